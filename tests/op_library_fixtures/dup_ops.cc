// Refused: redeclares the built-in Add (and declares a fresh op, which must
// not be registered either).
#include "opforge/opforge.h"

namespace opforge {
REGISTER_OP("FreshFromDup").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Doc("A fresh op.\n\nx: In.\ny: Out.");
REGISTER_OP("Add").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Doc("A second Add.\n\nx: In.\ny: Out.");
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_KERNEL("FreshFromDup", kCPU, DType::kFloat32, Copy);
REGISTER_KERNEL("Add", kCPU, DType::kFloat32, Copy);
}  // namespace opforge
