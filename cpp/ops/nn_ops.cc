// Neural-network ops: Softmax and RmsNorm; the training block (layers, losses
// and their backward ops) is at the end.
#include <cstdint>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

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
  OF_RETURN_IF_ERROR(CheckRmsNormInputs(ctx->attr_float("epsilon"), x, ctx->input_shape(1)));
  ctx->set_output_shape(0, x);
  return Status::OK();
}

}  // namespace

REGISTER_OP("Softmax")
    .Input("logits: T")
    .Attr("axis: int = -1")
    .Output("softmax: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(SoftmaxShape)
    .Category("whole_axis")
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
    .Attr("T: {float32, float64, halftype}")
    .SetShapeFn(SoftmaxShape)
    .Category("whole_axis")
    .Gradient("logits = Sub(dlogsoftmax, Mul(Exp(logsoftmax), Sum(dlogsoftmax, axis=list(axis), keepdims=true)))")
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
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(RmsNormShape)
    .Category("whole_axis")
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

// ---- Training: layers, losses and their backward ops (issue 12) ----------
namespace {

Status LastDimVector(const TensorShape& x, const TensorShape& v, const char* name) {
  if (x.rank() == 0) {
    return errors::InvalidArgument("argument 'x' must have rank >= 1, got a 0-d tensor");
  }
  const int64_t d = x.dim(x.rank() - 1);
  if (v.rank() != 1 || v.dim(0) != d) {
    return errors::InvalidArgument("argument '", name, "' must have shape [", d,
                                   "] (the last dim of argument 'x' of shape ", x.DebugString(), "), got ",
                                   v.DebugString());
  }
  return Status::OK();
}

Status CheckEpsilon(InferenceContext* ctx) {
  const double eps = ctx->attr_float("epsilon");
  if (!(eps >= 0)) return errors::InvalidArgument("attr 'epsilon' must be >= 0, got ", eps);
  return Status::OK();
}

Status SameShape(const TensorShape& a, const char* an, const TensorShape& b, const char* bn) {
  if (a != b) {
    return errors::InvalidArgument("argument '", bn, "' must have the shape of argument '", an, "' ",
                                   a.DebugString(), ", got ", b.DebugString());
  }
  return Status::OK();
}

Status GeluGradShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(SameShape(ctx->input_shape(1), "x", ctx->input_shape(0), "dy"));
  ctx->set_output_shape(0, ctx->input_shape(1));
  return Status::OK();
}

Status LayerNormShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckEpsilon(ctx));
  const TensorShape& x = ctx->input_shape(0);
  OF_RETURN_IF_ERROR(LastDimVector(x, ctx->input_shape(1), "weight"));
  OF_RETURN_IF_ERROR(LastDimVector(x, ctx->input_shape(2), "bias"));
  ctx->set_output_shape(0, x);
  return Status::OK();
}

// (dy, x, weight) -> dx, dweight[, dbias]
Status NormGradShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckEpsilon(ctx));
  const TensorShape& x = ctx->input_shape(1);
  OF_RETURN_IF_ERROR(LastDimVector(x, ctx->input_shape(2), "weight"));
  OF_RETURN_IF_ERROR(SameShape(x, "x", ctx->input_shape(0), "dy"));
  ctx->set_output_shape(0, x);
  const int n = static_cast<int>(ctx->op().outputs.size());
  for (int i = 1; i < n; ++i) ctx->set_output_shape(i, ctx->input_shape(2));
  return Status::OK();
}

Status GatherShape(InferenceContext* ctx) {
  const TensorShape& params = ctx->input_shape(0);
  const TensorShape& indices = ctx->input_shape(1);
  if (params.rank() == 0) {
    return errors::InvalidArgument("argument 'params' must have rank >= 1, got a 0-d tensor");
  }
  if (indices.rank() + params.rank() - 1 > kMaxRank) {
    return errors::InvalidArgument("the result would have rank ", indices.rank() + params.rank() - 1,
                                   "; opforge supports up to ", kMaxRank);
  }
  TensorShape out = indices;
  for (int i = 1; i < params.rank(); ++i) out.AddDim(params.dim(i));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

// GatherGrad(params, indices, dy): dy must be Gather(params, indices)'s shape.
Status GatherGradShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(GatherShape(ctx));
  TensorShape want;
  {
    const TensorShape& params = ctx->input_shape(0);
    want = ctx->input_shape(1);
    for (int i = 1; i < params.rank(); ++i) want.AddDim(params.dim(i));
  }
  OF_RETURN_IF_ERROR(SameShape(want, "Gather(params, indices)", ctx->input_shape(2), "dy"));
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}

Status SparseXentShape(InferenceContext* ctx) {
  const TensorShape& f = ctx->input_shape(0);
  const TensorShape& l = ctx->input_shape(1);
  if (f.rank() != 2) {
    return errors::InvalidArgument("argument 'features' must be 2-D [batch, classes], got shape ",
                                   f.DebugString());
  }
  if (l.rank() != 1 || l.dim(0) != f.dim(0)) {
    return errors::InvalidArgument("argument 'labels' must have shape [", f.dim(0),
                                   "] (the batch of argument 'features'), got ", l.DebugString());
  }
  if (f.dim(1) == 0 && f.dim(0) > 0) {
    return errors::InvalidArgument("argument 'features' has 0 classes; there is no label to score");
  }
  ctx->set_output_shape(0, l);
  ctx->set_output_shape(1, f);
  return Status::OK();
}

Status DropoutMaskShape(InferenceContext* ctx) {
  const double rate = ctx->attr_float("rate");
  if (!(rate >= 0 && rate < 1)) return errors::InvalidArgument("attr 'rate' must be in [0, 1), got ", rate);
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}

}  // namespace

REGISTER_OP("Gelu")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = GeluGrad(dy, x)")
    .Doc(R"doc(
Computes the exact (erf-based) Gaussian error linear unit element-wise.

Equivalent to x * 0.5 * (1 + erf(x / sqrt(2))) (scipy.special.erf), the
form PyTorch's GELU uses by default.

x: The input.
y: The activations, with the shape and dtype of x.
)doc");

REGISTER_OP("GeluTanh")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    // An inference fusion the ONNX importer makes of exported models (GPT-2's
    // MLP); models that train use Gelu or compose the tanh form from
    // differentiable ops.
    .NoGradient()
    .Doc(R"doc(
The tanh approximation of GELU in one pass: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

Computed as x * sigmoid(2 sqrt(2/pi) x (1 + 0.044715 x^2)), the same value
(onnx Gelu with approximate='tanh', PyTorch's gelu(approximate='tanh')). The
ONNX importer runs GPT-2's exported eight-node form as this op.

x: The input.
y: The activations, with the shape and dtype of x.
)doc");

REGISTER_OP("GeluGrad")
    .Input("dy: T")
    .Input("x: T")
    .Output("dx: T")
    .Attr("T: {float32, float64, halftype}")
    .SetShapeFn(GeluGradShape)
    .Category("elementwise")
    // dx = dy * Gelu'(x) with Gelu'' = phi(x) * (2 - x**2), phi(x) = exp(-x**2 / 2) / sqrt(2 pi).
    .Gradient("dy = GeluGrad(ddx, x)")
    .Gradient("x = Mul(Mul(ddx, dy), Mul(Exp(Mul(Square(x), -0.5)), Mul(Sub(2, Square(x)), 0.3989422804014327)))")
    .Doc(R"doc(
The backward op of Gelu: dy * (Phi(x) + x * phi(x)), Phi and phi the standard normal CDF and density.

dy: The gradient of the loss with respect to Gelu's output.
x: Gelu's input, of dy's shape.
dx: The gradient with respect to x.
)doc");

REGISTER_OP("LayerNorm")
    .Input("x: T")
    .Input("weight: T")
    .Input("bias: T")
    .Attr("epsilon: float >= 0 = 1e-5")
    .Output("y: T")
    .Attr("T: {float32, float64, halftype}")
    .SetShapeFn(LayerNormShape)
    .Category("whole_axis")
    .Gradient("x, weight, bias = LayerNormGrad(dy, x, weight, epsilon=epsilon)")
    .Doc(R"doc(
Normalises over the last axis to zero mean and unit variance, then scales and shifts per feature.

Equivalent to (x - mean) / numpy.sqrt(var + epsilon) * weight + bias with
mean and the (biased) var taken over axis -1; the statistics are accumulated
in float64.

x: The input, of rank >= 1; its last axis holds the features.
weight: The per-feature scale, a 1-D tensor of length x.shape[-1].
bias: The per-feature shift, a 1-D tensor of length x.shape[-1].
epsilon: Added to the variance before the square root; must be >= 0.
y: The normalised tensor, with the shape and dtype of x.
)doc");

REGISTER_OP("LayerNormGrad")
    .Input("dy: T")
    .Input("x: T")
    .Input("weight: T")
    .Attr("epsilon: float >= 0 = 1e-5")
    .Output("dx: T")
    .Output("dweight: T")
    .Output("dbias: T")
    .Attr("T: {float32, float64, halftype}")
    .SetShapeFn(NormGradShape)
    // Per row of d features, with h = LayerNorm(x, 1, 0), r = 1 / sqrt(var(x) +
    // epsilon), u = dy * weight, means over the row: dx = P u with P v =
    // r (v - mean(v) - h mean(v h)) (symmetric; the Jacobian of h), dweight =
    // the sum over rows of dy * h, dbias = that of dy. Differentiating <ddx, dx>
    // + <ddweight, dweight> + <ddbias, dbias> (a = ddx) gives d dy = weight P a +
    // ddweight h + ddbias, d weight = dy P a (summed to weight's shape by the
    // tape), and d x = r**2 h (mean(a h) mean(u h) - mean(a u) + mean(a) mean(u))
    // + P v with v = ddweight dy - r (mean(u h) a + mean(a h) u).
    .Gradient("let h = LayerNorm(x, OnesLike(weight), ZerosLike(weight), epsilon=epsilon)")
    .Gradient("let xc = Sub(x, Mean(x, axis=[-1], keepdims=true))")
    .Gradient("let r2 = Div(1, Add(Mean(Square(xc), axis=[-1], keepdims=true), epsilon))")
    .Gradient("let r = Sqrt(r2)")
    .Gradient("let u = Mul(dy, weight)")
    .Gradient("let ah = Mean(Mul(ddx, h), axis=[-1], keepdims=true)")
    .Gradient("let uh = Mean(Mul(u, h), axis=[-1], keepdims=true)")
    .Gradient("let pa = Mul(r, Sub(Sub(ddx, Mean(ddx, axis=[-1], keepdims=true)), Mul(h, ah)))")
    .Gradient("let v = Sub(Mul(ddweight, dy), Mul(r, Add(Mul(uh, ddx), Mul(ah, u))))")
    .Gradient("x = Add(Mul(Mul(r2, h), Add(Sub(Mul(ah, uh), Mean(Mul(ddx, u), axis=[-1], keepdims=true)), "
              "Mul(Mean(ddx, axis=[-1], keepdims=true), Mean(u, axis=[-1], keepdims=true)))), "
              "Mul(r, Sub(Sub(v, Mean(v, axis=[-1], keepdims=true)), Mul(h, Mean(Mul(v, h), axis=[-1], "
              "keepdims=true)))))")
    .Gradient("weight = Mul(dy, pa)")
    .Gradient("dy = Add(Add(Mul(weight, pa), Mul(ddweight, h)), ddbias)")
    .Doc(R"doc(
The backward op of LayerNorm: the gradients with respect to x, weight and bias, in one pass over the rows.

dy: The gradient of the loss with respect to LayerNorm's output.
x: LayerNorm's input, of dy's shape.
weight: LayerNorm's scale.
epsilon: LayerNorm's epsilon.
dx: The gradient with respect to x.
dweight: The gradient with respect to weight (summed over all rows).
dbias: The gradient with respect to bias (summed over all rows).
)doc");

REGISTER_OP("Gather")
    .Input("params: T")
    .Input("indices: Tindices")
    .Output("output: T")
    .Attr("T: {float32, float64, int32, int64, uint8, int8, halftype}")
    .Attr("Tindices: {int32, int64}")
    .SetShapeFn(GatherShape)
    .Category("layout")
    .Gradient("params = GatherGrad(params, indices, doutput)").Gradient("indices = None")
    .Doc(R"doc(
Gathers rows of params (axis 0) at the given indices: an embedding lookup.

Equivalent to params[indices] in numpy, but negative indices are an error
rather than counting from the end: every index must be in [0, params.shape[0]),
else InvalidArgumentError names the first one out of range.

params: The table, of rank >= 1.
indices: Row numbers, of any shape.
output: Shape indices.shape + params.shape[1:].
)doc");

REGISTER_OP("GatherGrad")
    .Input("params: T")
    .Input("indices: Tindices")
    .Input("dy: T")
    .Output("dparams: T")
    .Attr("T: {float32, float64, halftype}")
    .Attr("Tindices: {int32, int64}")
    .SetShapeFn(GatherGradShape)
    // A scatter-add, linear in dy: its adjoint is Gather. params gives only a shape.
    .Gradient("params = ZerosLike(params)")
    .Gradient("indices = None")
    .Gradient("dy = Gather(ddparams, indices)")
    .Doc(R"doc(
The backward op of Gather: scatter-adds the rows of dy into a zero tensor of params' shape.

Equivalent to d = numpy.zeros_like(params); numpy.add.at(d, indices, dy).
Only params' shape is read. Indices are bounds-checked as in Gather.

params: Gather's table (its values are not read).
indices: Gather's indices.
dy: The gradient with respect to Gather's output.
dparams: The gradient with respect to params.
)doc");

REGISTER_OP("SparseSoftmaxCrossEntropyWithLogits")
    .Input("features: T")
    .Input("labels: Tlabels")
    .Output("loss: T")
    .Output("backprop: T")
    .Attr("T: {float32, float64, halftype}")
    .Attr("Tlabels: {int32, int64}")
    .SetShapeFn(SparseXentShape)
    // backprop = softmax(features) - onehot(labels): what flows into it goes
    // back through Softmax's Jacobian (second derivatives of the loss).
    .Gradient("features = Add(Transpose(Mul(Transpose(backprop), dloss)), "
              "SoftmaxGrad(Softmax(features), dbackprop))")
    .Gradient("labels = None")
    .Doc(R"doc(
Softmax cross-entropy with integer class labels, per example, and its gradient, in one numerically stable pass.

loss[i] = logsumexp(features[i]) - features[i, labels[i]] (the maximum is
subtracted first, so large logits do not overflow); backprop[i] =
softmax(features[i]) - onehot(labels[i]), the gradient of loss[i] with
respect to features[i]. Every label must be in [0, classes), else
InvalidArgumentError names the first one out of range.

features: Unnormalised log-probabilities, [batch, classes].
labels: The class of each example, [batch].
loss: The per-example loss, [batch].
backprop: The gradient of loss with respect to features, [batch, classes].
)doc");

REGISTER_OP("DropoutMask")
    .Input("x: T")
    .Attr("rate: float")
    .Attr("seed: int = 0")
    .Output("mask: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(DropoutMaskShape)
    .NoGradient()
    .Doc(R"doc(
A dropout mask for x: each element is 0 with probability rate, else 1 / (1 - rate).

Only x's shape and dtype are read. The mask is a pure function of (seed,
element index): the same seed gives the same mask on any number of
threads. Dropout is x * mask.

x: The tensor the mask is for.
rate: The probability of dropping an element, in [0, 1).
seed: Picks the mask; change it every step.
mask: The scaled keep mask, with the shape and dtype of x.
)doc");
// ---- end of the training block --------------------------------------------

}  // namespace opforge
