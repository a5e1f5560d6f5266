// CPU kernels of the example library.
#include <cstdint>

#include "opforge/opforge.h"

namespace opforge {
namespace {

Status ZeroOutKernel(OpKernelContext* ctx) {
  const Tensor& in = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int32_t* src = in.data<int32_t>();
  int32_t* dst = out->data<int32_t>();
  const int64_t n = in.NumElements();
  for (int64_t i = 0; i < n; ++i) dst[i] = 0;
  if (n > 0) dst[0] = src[0];
  return Status::OK();
}

template <typename T>
Status SoftShrinkKernel(OpKernelContext* ctx) {
  const T t = static_cast<T>(ctx->attr_float("threshold"));
  if (!(t >= 0)) return errors::InvalidArgument("attr 'threshold' must be >= 0, got ", t);
  const Tensor& in = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const T* x = in.data<T>();
  T* y = out->data<T>();
  ParallelFor(in.NumElements(), 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      y[i] = x[i] > t ? x[i] - t : (x[i] < -t ? x[i] + t : T(0));
    }
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("ZeroOut", kCPU, DType::kInt32, ZeroOutKernel);
REGISTER_KERNEL("SoftShrink", kCPU, DType::kFloat32, SoftShrinkKernel<float>);
REGISTER_KERNEL("SoftShrink", kCPU, DType::kFloat64, SoftShrinkKernel<double>);

}  // namespace opforge
