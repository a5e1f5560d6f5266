// BatchNorm over the channel axis (axis 1) of [N, C, ...] input, for training
// (batch statistics) and inference (given statistics), and its backward op.
// The running statistics are updated by the caller from the batch_mean and
// batch_var outputs (opforge.nn.BatchNorm2d does).
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

Status ChannelVector(const TensorShape& x, const TensorShape& v, const char* name) {
  const int64_t c = x.dim(1);
  if (v.rank() != 1 || (c >= 0 && v.dim(0) >= 0 && v.dim(0) != c)) {
    return errors::InvalidArgument("argument '", name, "' must be 1-D of length channels (x.shape[1] = ", c,
                                   "), got shape ", v.DebugString());
  }
  return Status::OK();
}

// x, then `first`.. `first + 3` of the per-channel vectors named in `names`.
Status CheckInputs(InferenceContext* ctx, int x_at, int first, const char* const* names, int count) {
  const double eps = ctx->attr_float("epsilon");
  if (!(eps >= 0)) return errors::InvalidArgument("attr 'epsilon' must be >= 0, got ", eps);
  const TensorShape& x = ctx->input_shape(x_at);
  if (x.rank() < 2) {
    return errors::InvalidArgument("argument 'x' must have rank >= 2 [batch, channels, ...], got shape ",
                                   x.DebugString());
  }
  for (int i = 0; i < count; ++i) OF_RETURN_IF_ERROR(ChannelVector(x, ctx->input_shape(first + i), names[i]));
  return Status::OK();
}

TensorShape Channels(const TensorShape& x) { return TensorShape({x.dim(1)}); }

Status BatchNormShape(InferenceContext* ctx) {
  static const char* const kNames[] = {"scale", "offset", "mean", "variance"};
  OF_RETURN_IF_ERROR(CheckInputs(ctx, 0, 1, kNames, 4));
  const TensorShape& x = ctx->input_shape(0);
  ctx->set_output_shape(0, x);
  ctx->set_output_shape(1, Channels(x));
  ctx->set_output_shape(2, Channels(x));
  return Status::OK();
}

// (dy, x, scale, mean, variance, dbatch_mean, dbatch_var)
Status BatchNormGradShape(InferenceContext* ctx) {
  static const char* const kNames[] = {"scale", "mean", "variance", "dbatch_mean", "dbatch_var"};
  OF_RETURN_IF_ERROR(CheckInputs(ctx, 1, 2, kNames, 5));
  const TensorShape& x = ctx->input_shape(1);
  const TensorShape& dy = ctx->input_shape(0);
  bool match = dy.rank() == x.rank();
  for (int i = 0; match && i < x.rank(); ++i) match = x.dim(i) < 0 || dy.dim(i) < 0 || x.dim(i) == dy.dim(i);
  if (!match) {
    return errors::InvalidArgument("argument 'dy' must have x's shape ", x.DebugString(), ", got ", dy.DebugString());
  }
  ctx->set_output_shape(0, x);
  for (int i = 1; i < 5; ++i) ctx->set_output_shape(i, Channels(x));
  return Status::OK();
}

}  // namespace

REGISTER_OP("BatchNorm")
    .Input("x: T")
    .Input("scale: T")
    .Input("offset: T")
    .Input("mean: T")
    .Input("variance: T")
    .Attr("epsilon: float >= 0 = 1e-5")
    .Attr("training: bool = false")
    .Output("y: T")
    .Output("batch_mean: T")
    .Output("batch_var: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(BatchNormShape)
    .Gradient("x, scale, offset, mean, variance = BatchNormGrad(dy, x, scale, batch_mean, batch_var, "
              "dbatch_mean, dbatch_var, epsilon=epsilon, training=training)")
    .Doc(R"doc(
Batch normalization over axis 1 of [N, C, ...] input, as torch.nn.functional.batch_norm and ONNX BatchNormalization.

y = (x - m) / sqrt(v + epsilon) * scale + offset per channel, where m and v
are the batch's mean and (biased) variance over every axis but 1 when
training, else the given mean and variance. One pass per channel; the
statistics are accumulated in float64.

x: The input, [batch, channels, ...] (rank >= 2).
scale: The per-channel scale (gamma), [channels].
offset: The per-channel shift (beta), [channels].
mean: The statistics used when not training (running mean), [channels].
variance: The statistics used when not training (running variance), [channels].
epsilon: Added to the variance before the square root, >= 0.
training: Normalise with the batch statistics (true) or the given ones (false).
y: The normalised tensor, with x's shape.
batch_mean: The mean used: the batch mean when training, else `mean`.
batch_var: The biased variance used: the batch variance when training, else `variance`.
)doc");

REGISTER_OP("BatchNormGrad")
    .Input("dy: T")
    .Input("x: T")
    .Input("scale: T")
    .Input("mean: T")
    .Input("variance: T")
    .Input("dbatch_mean: T")
    .Input("dbatch_var: T")
    .Attr("epsilon: float >= 0 = 1e-5")
    .Attr("training: bool = false")
    .Output("dx: T")
    .Output("dscale: T")
    .Output("doffset: T")
    .Output("dmean: T")
    .Output("dvariance: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(BatchNormGradShape)
    // Second derivatives of BatchNorm are not implemented: training needs the
    // first only, and a composed rule would cost more than the op it saves.
    .NoGradient()
    .Doc(R"doc(
The backward op of BatchNorm: the gradients of x, scale, offset, mean and variance.

When training, with h = (x - m) r, r = 1 / sqrt(v + epsilon) and means over the
M elements of a channel, dx = scale r (dy - mean(dy) - h mean(dy h)) +
dbatch_mean / M + 2 dbatch_var (x - m) / M; dmean = dvariance = 0 (the given
statistics are not used); otherwise dx = dy scale r, dmean = dbatch_mean -
scale r sum(dy), dvariance = dbatch_var - scale r**3 sum(dy (x - m)) / 2.
In both cases dscale = sum(dy h), doffset = sum(dy).

dy: The gradient with respect to BatchNorm's y.
x: BatchNorm's input.
scale: BatchNorm's scale.
mean: BatchNorm's batch_mean output.
variance: BatchNorm's batch_var output.
dbatch_mean: The gradient with respect to BatchNorm's batch_mean.
dbatch_var: The gradient with respect to BatchNorm's batch_var.
epsilon: BatchNorm's epsilon.
training: BatchNorm's training.
dx: The gradient with respect to x.
dscale: The gradient with respect to scale.
doffset: The gradient with respect to offset.
dmean: The gradient with respect to BatchNorm's mean input.
dvariance: The gradient with respect to BatchNorm's variance input.
)doc");

}  // namespace opforge
