// Loads and runs, but returns NaN for negative (finite) inputs without
// declaring it: `opforge check` must report it unless --allow-nan names it.
#include <cmath>

#include "opforge/opforge.h"

namespace opforge {
template <typename T>
static Status RootKernel(OpKernelContext* ctx) {
  const Tensor& in = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const T* x = in.data<T>();
  T* y = out->data<T>();
  for (int64_t i = 0; i < in.NumElements(); ++i) y[i] = std::sqrt(x[i]);
  return Status::OK();
}
REGISTER_OP("Root").Input("x: T").Output("y: T").Attr("T: {float32, float64}").SetShapeFn(shape_fns::Unchanged)
    .Doc("Square root, NaN below zero.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("Root", kCPU, DType::kFloat32, RootKernel<float>);
REGISTER_KERNEL("Root", kCPU, DType::kFloat64, RootKernel<double>);
}  // namespace opforge
