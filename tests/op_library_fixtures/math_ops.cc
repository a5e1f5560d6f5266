// Refused: its file name puts its op in the built-in group "math".
#include "opforge/opforge.h"

namespace opforge {
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_OP("IntoBuiltinGroup").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Doc("In group math.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("IntoBuiltinGroup", kCPU, DType::kFloat32, Copy);
}  // namespace opforge
