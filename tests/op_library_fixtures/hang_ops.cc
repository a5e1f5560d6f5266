// Loads, but its kernel never returns for a 0-d input (it waits for a
// second element that never comes): `opforge check --timeout` must report
// a hang naming the op and the case, and kill it.
#include <cstdint>

#include "opforge/opforge.h"

namespace opforge {
static Status PairSumKernel(OpKernelContext* ctx) {
  const Tensor& in = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  volatile bool waiting = in.rank() == 0;  // volatile: the loop must not be optimised out
  while (waiting) {
  }
  for (int64_t i = 0; i < in.NumElements(); ++i) out->data<float>()[i] = in.data<float>()[i] * 2;
  return Status::OK();
}
REGISTER_OP("PairSum").Input("x: float32").Output("y: float32").SetShapeFn(shape_fns::Unchanged)
    .Doc("x * 2, hanging on 0-d input.\n\nx: In.\ny: Out.");
REGISTER_KERNEL("PairSum", kCPU, DType::kFloat32, PairSumKernel);
}  // namespace opforge
