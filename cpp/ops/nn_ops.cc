// Neural-network ops: Softmax and RmsNorm.
#include <cstdint>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

Status SoftmaxShape(InferenceContext* ctx) {
  const TensorShape& in = ctx->input_shape(0);
  if (in.rank() == 0) {
    return errors::InvalidArgument("argument 'logits' must have rank >= 1, got a 0-d tensor");
  }
  const int64_t axis = ctx->attr_int("axis");
  if (axis < -in.rank() || axis >= in.rank()) {
    return errors::InvalidArgument("attr 'axis' is ", axis, ", out of range for argument 'logits' of rank ",
                                   in.rank(), " (valid: ", -in.rank(), " to ", in.rank() - 1, ")");
  }
  ctx->set_output_shape(0, in);
  return Status::OK();
}

Status RmsNormShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  const TensorShape& w = ctx->input_shape(1);
  const double eps = ctx->attr_float("epsilon");
  if (!(eps >= 0)) {  // also rejects NaN
    return errors::InvalidArgument("attr 'epsilon' must be >= 0, got ", eps);
  }
  if (x.rank() == 0) {
    return errors::InvalidArgument("argument 'x' must have rank >= 1, got a 0-d tensor");
  }
  const int64_t d = x.dim(x.rank() - 1);
  if (w.rank() != 1 || w.dim(0) != d) {
    return errors::InvalidArgument("argument 'weight' must have shape [", d,
                                   "] (the last dim of argument 'x' of shape ", x.DebugString(),
                                   "), got ", w.DebugString());
  }
  ctx->set_output_shape(0, x);
  return Status::OK();
}

}  // namespace

REGISTER_OP("Softmax")
    .Input("logits: T")
    .Attr("axis: int = -1")
    .Output("softmax: T")
    .Attr("T: floattype")
    .SetShapeFn(SoftmaxShape)
    .Gradient("logits = SoftmaxGrad(softmax, dsoftmax, axis=axis)")
    .Doc(R"doc(
Computes softmax along one axis: exp(logits) normalised to sum to 1.

Equivalent to the numpy expression
e = numpy.exp(logits - logits.max(axis, keepdims=True)); e / e.sum(axis, keepdims=True).
The maximum is subtracted first, so large logits do not overflow. A NaN in a
slice makes that whole slice NaN, as does a slice whose maximum is infinite.
A -inf logit gets probability exactly 0; in float32, terms under exp(-87)
relative to the slice maximum also become 0 rather than subnormal. Empty
tensors are allowed; 0-d tensors are an error.

logits: The unnormalised log-probabilities, of rank >= 1.
axis: The axis to normalise over; negative values count from the end. Defaults to the last axis.
softmax: Probabilities with the shape and dtype of logits; each slice along axis sums to 1.
)doc");

REGISTER_OP("LogSoftmax")
    .Input("logits: T")
    .Attr("axis: int = -1")
    .Output("logsoftmax: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(SoftmaxShape)
    .Doc(R"doc(
Computes log(softmax(logits)) along one axis, without forming softmax.

Equivalent to the numpy expression
s = logits - logits.max(axis, keepdims=True); s - numpy.log(numpy.exp(s).sum(axis, keepdims=True)).
Subtracting the maximum first keeps exp from overflowing, and working in log
space keeps tiny probabilities finite (log(softmax) would give -inf). The sum
is kept in double. NaN and infinities propagate as in that expression; a -inf
logit gives -inf. Empty tensors are allowed; 0-d tensors are an error.

logits: The unnormalised log-probabilities, of rank >= 1.
axis: The axis to normalise over; negative values count from the end. Defaults to the last axis.
logsoftmax: Log-probabilities with the shape and dtype of logits; exp of each slice along axis sums to 1.
)doc");

REGISTER_OP("RmsNorm")
    .Input("x: T")
    .Input("weight: T")
    .Attr("epsilon: float >= 0 = 1e-6")
    .Output("y: T")
    .Attr("T: floattype")
    .SetShapeFn(RmsNormShape)
    .Gradient("x, weight = RmsNormGrad(x, weight, dy, epsilon=epsilon)")
    .Doc(R"doc(
Applies root-mean-square normalisation over the last axis, then a per-feature scale.

Equivalent to the numpy expression
x / numpy.sqrt(numpy.mean(x**2, axis=-1, keepdims=True) + epsilon) * weight.
The mean of squares is accumulated in float64, so float32 input does not
lose precision on long rows. An all-zero row with epsilon 0 gives NaN, as in
numpy.

x: The input, of rank >= 1; its last axis holds the features.
weight: The per-feature scale, a 1-D tensor of length x.shape[-1].
epsilon: Added to the mean of squares before the square root, for stability; must be >= 0.
y: The normalised, scaled tensor, with the shape and dtype of x.
)doc");

}  // namespace opforge
