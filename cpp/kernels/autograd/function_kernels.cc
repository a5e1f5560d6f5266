// PythonFunction's kernel: output 0 is the last input (the Function's result), shared, not copied.
#include "opforge/kernel.h"

namespace opforge {
namespace {

Status PythonFunctionKernel(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(ctx->num_inputs() - 1));
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("PythonFunction", kCPU, DType::kFloat32, PythonFunctionKernel);
REGISTER_KERNEL("PythonFunction", kCPU, DType::kFloat64, PythonFunctionKernel);

}  // namespace opforge
