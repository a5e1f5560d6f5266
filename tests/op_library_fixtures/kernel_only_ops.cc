// Refused: a kernel for an op nobody declared.
#include "opforge/opforge.h"

namespace opforge {
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_KERNEL("NobodyDeclaredMe", kCPU, DType::kFloat32, Copy);
}  // namespace opforge
