// Loads and runs, but its kernel divides by the element count: an empty
// input is an integer division by zero (SIGFPE), which `opforge check`
// must report as a crash naming the op, not die of.
#include <cstdint>

#include "opforge/opforge.h"

namespace opforge {
static Status CenterKernel(OpKernelContext* ctx) {
  const Tensor& in = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int32_t* x = in.data<int32_t>();
  int32_t* y = out->data<int32_t>();
  const int64_t n = in.NumElements();
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const volatile int64_t count = n;  // volatile: the compiler must not assume n > 0
  const int64_t mean = sum / count;  // the bug: no empty-input case
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int32_t>(x[i] - mean);
  return Status::OK();
}
REGISTER_OP("CenterInt").Input("x: int32").Output("y: int32").SetShapeFn(shape_fns::Unchanged)
    .Doc("x minus its (integer) mean.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("CenterInt", kCPU, DType::kInt32, CenterKernel);
}  // namespace opforge

// A healthy op beside it: the checker carries on with it after the crash.
namespace opforge {
static Status PlusOneKernel(OpKernelContext* ctx) {
  const Tensor& in = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  for (int64_t i = 0; i < in.NumElements(); ++i) out->data<int32_t>()[i] = in.data<int32_t>()[i] + 1;
  return Status::OK();
}
REGISTER_OP("PlusOneInt").Input("x: int32").Output("y: int32").SetShapeFn(shape_fns::Unchanged)
    .Doc("x + 1.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("PlusOneInt", kCPU, DType::kInt32, PlusOneKernel);
}  // namespace opforge
