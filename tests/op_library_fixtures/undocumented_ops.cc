// Refused by the wrapper generator (after dlopen, before the commit): no Doc.
#include "opforge/opforge.h"

namespace opforge {
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_OP("Undocumented").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged);
REGISTER_KERNEL("Undocumented", kCPU, DType::kFloat32, Copy);
}  // namespace opforge
