// Loads, but its type attr allows float64 with only a float32 kernel, and
// its output has no doc: `opforge check` lists both as declaration gaps.
#include "opforge/opforge.h"

namespace opforge {
static Status Copy(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}
REGISTER_OP("HalfKernels").Input("x: T").Output("y: T").Attr("T: {float32, float64}")
    .SetShapeFn(shape_fns::Unchanged).Doc("A copy.\n\nx: In.");
REGISTER_KERNEL("HalfKernels", kCPU, DType::kFloat32, Copy);
}  // namespace opforge
