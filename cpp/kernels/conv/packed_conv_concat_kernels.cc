// Conv2DPackedConcat (cpp/ops/packed_conv_ops.cc): several packed-filter
// convolutions of one input, each writing its channel slice of the output
// (its images y_img = all channels * pixels apart), so the Concat that
// joined them is gone.
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/kernel.h"

#include "packed_conv.h"

namespace opforge {
namespace conv {
namespace {

Status Conv2DPackedConcatKernel(OpKernelContext* ctx) {
  const int64_t n = ctx->attr_int("N");
  const Tensor& x = ctx->input(0);
  const Tensor& bias = ctx->input(1 + n);
  const std::vector<int64_t>& fs = ctx->attr_ints("filter_shapes");
  const std::vector<int64_t>& s = ctx->attr_ints("strides");
  const std::vector<int64_t>& d = ctx->attr_ints("dilations");
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64_t o_all = y->dim(1), pixels = y->dim(2) * y->dim(3);
  if (bias.NumElements() != 0 && bias.NumElements() != o_all) {  // unknown in a graph's shape check
    return errors::InvalidArgument("argument 'bias' must hold 0 or ", o_all, " values, got ", bias.NumElements());
  }
  const Act act = ActOf(ctx->attr("activation").s);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t> f(fs.begin() + 4 * i, fs.begin() + 4 * i + 4);
    const Geometry g = PackedGeometry(x.shape(), f, y->dim(2), y->dim(3), s.data() + 2 * i, d.data() + 2 * i,
                                      p.data() + 4 * i);
    const Status st = PackedConvInto(g, ctx->input(1 + i), f, x.data<float>(),
                                     bias.NumElements() != 0 ? bias.data<float>() + off : nullptr, act, nullptr,
                                     y->NumElements() != 0 ? y->data<float>() + off * pixels : nullptr,
                                     o_all * pixels);
    if (!st.ok()) return st.WithPrefix("filter " + std::to_string(i) + " of " + std::to_string(n) + ": ");
    off += f[0];
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("Conv2DPackedConcat", kCPU, DType::kFloat32, Conv2DPackedConcatKernel);

}  // namespace conv
}  // namespace opforge
