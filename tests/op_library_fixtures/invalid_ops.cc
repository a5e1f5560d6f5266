// Refused: a declaration that does not parse (and a valid op beside it).
#include "opforge/opforge.h"

namespace opforge {
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_OP("ValidBesideInvalid").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Doc("Fine.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("ValidBesideInvalid", kCPU, DType::kFloat32, Copy);
REGISTER_OP("BadAttr").Input("x: float32").Output("y: float32").Attr("k: int >= nope")
    .SetShapeFn(shape_fns::Unchanged).Doc("Bad.\n\nx: In.\ny: Out.\nk: K.");
REGISTER_KERNEL("BadAttr", kCPU, DType::kFloat32, Copy);
}  // namespace opforge
