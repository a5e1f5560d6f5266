// State: variables (a resource holding one tensor), their updates, and the
// optimizer updates of graph-mode training; all stateful (resource.h).
//
// A variable is named by its `var: resource` attr and lives in the resource
// manager of the Session (graph mode) or of the process (eager mode). Reads
// and updates return copies: nothing handed out shares the variable's memory,
// so later updates never change a value already returned.
#include <cstdint>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

Status ShapeFromAttr(InferenceContext* ctx) {
  const std::vector<int64_t>& dims = ctx->attr_ints("shape");
  TensorShape out;
  OF_RETURN_IF_ERROR(TensorShape::Make(dims.data(), static_cast<int>(dims.size()), &out));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status Scalar(InferenceContext* ctx) {
  ctx->set_output_shape(0, TensorShape());
  return Status::OK();
}

// Optimizer updates: grad has the variable's shape (checked again at run
// time against the variable itself); output 0 is the updated value.
Status UpdateShape(InferenceContext* ctx) { return shape_fns::Unchanged(ctx); }

}  // namespace

REGISTER_OP("AssignVariable")
    .Attr("var: resource")
    .Input("value: T")
    .Attr("alias: bool = false")
    .Output("out: T")
    .Attr("T: {float32, float64, int32, int64, bool}")
    .SetIsStateful()
    .SetShapeFn(shape_fns::Unchanged)
    .NoGradient()  // variables are differentiated through their reads (opforge.Variable)
    .Doc(R"doc(
Sets variable `var` to `value`, creating (initializing) it if needed.

An initialized variable keeps its dtype and shape: a value of another dtype
or shape is an InvalidArgumentError naming the variable.

var: The variable's name (a resource of the Session, or of the process in eager mode).
value: The new value (copied).
alias: Eager mode only: an uninitialized variable adopts value's memory when it is writable (opforge.Variable's own leaf tensor).
out: A copy of the new value.
)doc");

REGISTER_OP("ReadVariable")
    .Attr("var: resource")
    .Attr("dtype: {float32, float64, int32, int64, bool}")
    .Attr("shape: shape")
    .Output("value: dtype")
    .SetIsStateful()
    .SetShapeFn(ShapeFromAttr)
    .NoGradient()
    .Doc(R"doc(
A copy of variable `var`'s value.

Reading a variable that was never assigned is a FailedPreconditionError naming it.

var: The variable's name.
dtype: The variable's dtype.
shape: The variable's shape.
value: The value, copied (later updates do not change it).
)doc");

REGISTER_OP("AssignAddVariable")
    .Attr("var: resource")
    .Input("delta: T")
    .Output("out: T")
    .Attr("T: {float32, float64, int32, int64}")
    .SetIsStateful()
    .SetShapeFn(shape_fns::Unchanged)
    .NoGradient()
    .Doc(R"doc(
Adds `delta` to variable `var` in place.

var: The variable's name (initialized, of delta's dtype and shape).
delta: What to add.
out: A copy of the new value.
)doc");

REGISTER_OP("AssignSubVariable")
    .Attr("var: resource")
    .Input("delta: T")
    .Output("out: T")
    .Attr("T: {float32, float64, int32, int64}")
    .SetIsStateful()
    .SetShapeFn(shape_fns::Unchanged)
    .NoGradient()
    .Doc(R"doc(
Subtracts `delta` from variable `var` in place.

var: The variable's name (initialized, of delta's dtype and shape).
delta: What to subtract.
out: A copy of the new value.
)doc");

REGISTER_OP("VariableIsInitialized")
    .Attr("var: resource")
    .Output("initialized: bool")
    .SetIsStateful()
    .SetShapeFn(Scalar)
    .NoGradient()
    .Doc(R"doc(
Whether variable `var` holds a value.

var: The variable's name.
initialized: True once the variable was assigned.
)doc");

REGISTER_OP("Group")
    .Output("done: bool")
    .SetIsStateful()
    .SetShapeFn(Scalar)
    .NoGradient()
    .Doc(R"doc(
Does nothing; runs after its control inputs (opforge.group, a training step's one op).

done: True.
)doc");

REGISTER_OP("ResourceApplyGradientDescent")
    .Attr("var: resource")
    .Input("grad: T")
    .Attr("lr: float")
    .Attr("weight_decay: float = 0")
    .Output("out: T")
    .Attr("T: {float32, float64}")
    .SetIsStateful()
    .SetShapeFn(UpdateShape)
    .NoGradient()
    .Doc(R"doc(
var -= lr * (grad + weight_decay * var), on the variable in place (ApplyGradientDescent's update).

var: The variable to update.
grad: The gradient, of var's shape.
lr: The learning rate.
weight_decay: The L2 term added to the gradient.
out: A copy of the updated variable.
)doc");

REGISTER_OP("ResourceApplyMomentum")
    .Attr("var: resource")
    .Attr("accum: resource")
    .Input("grad: T")
    .Attr("lr: float")
    .Attr("momentum: float")
    .Attr("weight_decay: float = 0")
    .Attr("nesterov: bool = false")
    .Output("out: T")
    .Attr("T: {float32, float64}")
    .SetIsStateful()
    .SetShapeFn(UpdateShape)
    .NoGradient()
    .Doc(R"doc(
PyTorch's SGD momentum update on variables var and accum in place (ApplyMomentum's update).

var: The variable to update.
accum: Its momentum buffer (a variable of var's shape).
grad: The gradient, of var's shape.
lr: The learning rate.
momentum: The momentum factor.
weight_decay: The L2 term added to the gradient.
nesterov: Nesterov momentum.
out: A copy of the updated variable.
)doc");

REGISTER_OP("ResourceApplyAdam")
    .Attr("var: resource")
    .Attr("m: resource")
    .Attr("v: resource")
    .Input("grad: T")
    .Input("step: int64")
    .Attr("lr: float")
    .Attr("beta1: float = 0.9")
    .Attr("beta2: float = 0.999")
    .Attr("epsilon: float = 1e-8")
    .Attr("weight_decay: float = 0")
    .Output("out: T")
    .Attr("T: {float32, float64}")
    .SetIsStateful()
    .SetShapeFn(UpdateShape)
    .NoGradient()
    .Doc(R"doc(
Adam's update (PyTorch's, bias-corrected for `step`) on variables var, m and v in place (ApplyAdam's update).

var: The variable to update.
m: Its first-moment variable.
v: Its second-moment variable.
grad: The gradient, of var's shape.
step: The 1-based step number (a scalar; the optimizer's step variable), for the bias correction.
lr: The learning rate.
beta1: The first moment's decay.
beta2: The second moment's decay.
epsilon: Added to the denominator.
weight_decay: The L2 term added to the gradient.
out: A copy of the updated variable.
)doc");

}  // namespace opforge
