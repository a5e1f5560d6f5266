// Loads and runs, but declares a wrong gradient (x * x with dy * x: the
// factor 2 is missing): `opforge check` must fail its gradient check.
#include "opforge/opforge.h"

namespace opforge {
static Status SquareKernel(OpKernelContext* ctx) {
  const Tensor& in = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const double* x = in.data<double>();
  double* y = out->data<double>();
  for (int64_t i = 0; i < in.NumElements(); ++i) y[i] = x[i] * x[i];
  return Status::OK();
}
REGISTER_OP("BadSquare").Input("x: float64").Output("y: float64").SetShapeFn(shape_fns::Unchanged)
    .Gradient("x = Mul(dy, x)")
    .Doc("x * x.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("BadSquare", kCPU, DType::kFloat64, SquareKernel);
}  // namespace opforge
