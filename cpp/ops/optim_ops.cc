// Optimizer update ops (TensorFlow's ApplyAdam style): one fused kernel per
// parameter that updates the weight and its slots in place.
//
// In-place convention: an op whose doc says "updated in place" writes into
// those inputs' buffers and returns var itself (the same storage) as its
// output. The kernel refuses a read-only buffer (a read-only numpy array or
// a Tensor borrowing one) with InvalidArgumentError naming the argument. Pass
// opforge Tensors or C-contiguous, aligned, writable numpy arrays: any other
// layout is converted to a temporary copy, which would be the one updated.
#include <cstdint>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

// Every input has var's shape; the output is var.
Status SameAsVar(InferenceContext* ctx) {
  const TensorShape& var = ctx->input_shape(0);
  for (int i = 1; i < ctx->num_inputs(); ++i) {
    if (ctx->input_shape(i) != var) {
      return errors::InvalidArgument("argument '", ctx->op().inputs[i].name, "' must have the shape of argument 'var' ",
                                     var.DebugString(), ", got ", ctx->input_shape(i).DebugString());
    }
  }
  ctx->set_output_shape(0, var);
  return Status::OK();
}

Status CheckFinite(InferenceContext* ctx, const char* name, double lo) {
  const double v = ctx->attr_float(name);
  if (!(v >= lo) || v - v != 0) return errors::InvalidArgument("attr '", name, "' must be finite and >= ", lo, ", got ", v);
  return Status::OK();
}

Status GradientDescentShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckFinite(ctx, "lr", 0));
  OF_RETURN_IF_ERROR(CheckFinite(ctx, "weight_decay", 0));
  return SameAsVar(ctx);
}

Status MomentumShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckFinite(ctx, "momentum", 0));
  return GradientDescentShape(ctx);
}

Status AdamShape(InferenceContext* ctx) {
  for (const char* beta : {"beta1", "beta2"}) {
    const double b = ctx->attr_float(beta);
    if (!(b >= 0 && b < 1)) return errors::InvalidArgument("attr '", beta, "' must be in [0, 1), got ", b);
  }
  OF_RETURN_IF_ERROR(CheckFinite(ctx, "epsilon", 0));
  return GradientDescentShape(ctx);
}

}  // namespace

REGISTER_OP("ApplyGradientDescent")
    .Input("var: T")
    .Input("grad: T")
    .Attr("lr: float")
    .Attr("weight_decay: float = 0")
    .Output("out: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(GradientDescentShape)
    .NoGradient()
    .Doc(R"doc(
Plain SGD step, updated in place: var -= lr * (grad + weight_decay * var).

var: The parameter; updated in place (must be writable).
grad: The gradient of the loss with respect to var.
lr: The learning rate, >= 0.
weight_decay: L2 penalty coefficient added to the gradient, >= 0.
out: var itself (the same storage), after the update.
)doc");

REGISTER_OP("ApplyMomentum")
    .Input("var: T")
    .Input("accum: T")
    .Input("grad: T")
    .Attr("lr: float")
    .Attr("momentum: float")
    .Attr("weight_decay: float = 0")
    .Attr("nesterov: bool = false")
    .Output("out: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(MomentumShape)
    .NoGradient()
    .Doc(R"doc(
SGD with momentum (PyTorch's rule), var and accum updated in place.

g = grad + weight_decay * var; accum = momentum * accum + g;
var -= lr * (g + momentum * accum if nesterov else accum).
Start accum at zero: the first step then equals PyTorch's.

var: The parameter; updated in place (must be writable).
accum: The momentum buffer, var's shape; updated in place.
grad: The gradient of the loss with respect to var.
lr: The learning rate, >= 0.
momentum: The momentum factor, >= 0.
weight_decay: L2 penalty coefficient added to the gradient, >= 0.
nesterov: Use Nesterov momentum.
out: var itself (the same storage), after the update.
)doc");

REGISTER_OP("ApplyAdam")
    .Input("var: T")
    .Input("m: T")
    .Input("v: T")
    .Input("grad: T")
    .Attr("lr: float")
    .Attr("step: int >= 1 = 1")
    .Attr("beta1: float = 0.9")
    .Attr("beta2: float = 0.999")
    .Attr("epsilon: float = 1e-8")
    .Attr("weight_decay: float = 0")
    .Output("out: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(AdamShape)
    .NoGradient()
    .Doc(R"doc(
One Adam step (PyTorch's rule, bias-corrected), var, m and v updated in place in one pass.

g = grad + weight_decay * var; m = beta1 * m + (1 - beta1) * g;
v = beta2 * v + (1 - beta2) * g * g;
var -= lr * (m / (1 - beta1**step)) / (sqrt(v / (1 - beta2**step)) + epsilon).
Start m and v at zero and step at 1. As in PyTorch, the step size
lr / (1 - beta1**step) and the other scalars are rounded to T first (a step
size below T's range is 0).

var: The parameter; updated in place (must be writable).
m: The first-moment slot, var's shape; updated in place.
v: The second-moment slot, var's shape; updated in place.
grad: The gradient of the loss with respect to var.
lr: The learning rate, >= 0.
step: The 1-based number of this step, for the bias correction.
beta1: Decay of the first moment, in [0, 1).
beta2: Decay of the second moment, in [0, 1).
epsilon: Added to the denominator, >= 0.
weight_decay: L2 penalty coefficient added to the gradient, >= 0.
out: var itself (the same storage), after the update.
)doc");

}  // namespace opforge
