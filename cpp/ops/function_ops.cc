// PythonFunction: the node opforge.autograd.Function puts on the tape. The
// forward ran in Python; this op passes its result through so the tape (or a
// graph) links it to the inputs that need gradients, and its gradient is the
// Function's backward, registered from Python (opforge/autograd.py).
#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

Status PassThroughShape(InferenceContext* ctx) {
  ctx->set_output_shape(0, ctx->input_shape(ctx->num_inputs() - 1));
  return Status::OK();
}

}  // namespace

REGISTER_OP("PythonFunction")
    .Input("xs: N * T")
    .Input("y: U")
    .Attr("N: int >= 1")
    .Attr("key: int")
    .Attr("index: int = 0")
    .Output("out: U")
    .Attr("T: {float32, float64}")
    .Attr("U: {float32, float64, int32, int64, bool}")
    .SetShapeFn(PassThroughShape)
    .NoGradient()  // declared in Python: @RegisterGradient("PythonFunction") calls the Function's backward
    .Doc(R"doc(
Output `index` of an opforge.autograd.Function call: returns y unchanged.

xs are the Function's inputs that need gradients (so the tape and graphs
link the output to them); key names the saved context of the call.

xs: The inputs of the call that need gradients.
y: The output computed by the Function's forward.
key: Identifies the call's context (ctx) in opforge.autograd.
index: Which output of the Function this is.
out: y.
)doc");

}  // namespace opforge
