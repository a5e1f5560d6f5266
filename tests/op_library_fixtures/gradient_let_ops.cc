// Refused: a gradient rule uses a local before its `let`.
#include "opforge/opforge.h"

namespace opforge {
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_OP("LetAfterUse").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Gradient("x = Mul(dy, s)").Gradient("let s = Exp(x)")
    .Doc("Bad gradient.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("LetAfterUse", kCPU, DType::kFloat32, Copy);
}  // namespace opforge
