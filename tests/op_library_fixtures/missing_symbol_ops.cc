// Refused: the kernel function is declared but defined nowhere (its source
// file "was left out of the build"), so dlopen cannot resolve it.
#include "opforge/opforge.h"

namespace opforge {
Status MissingKernel(OpKernelContext* ctx);  // not defined anywhere
REGISTER_OP("NeedsMissingKernel").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Doc("Has no kernel code.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("NeedsMissingKernel", kCPU, DType::kFloat32, MissingKernel);
}  // namespace opforge
