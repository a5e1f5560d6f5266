// Refused: a gradient rule passes a list where the called op takes one tensor.
#include "opforge/opforge.h"

namespace opforge {
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_OP("ListToTensor").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Gradient("x = Identity([dy])")
    .Doc("Bad gradient.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("ListToTensor", kCPU, DType::kFloat32, Copy);
}  // namespace opforge
