// Pad and PadGrad, any rank: each axis maps an output index to the input
// index it copies (-1: the constant fill); rows along the last axis are a
// left fill, one contiguous copy and a right fill.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "opforge/kernel.h"
#include "../common/each_dtype.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

using int64 = int64_t;

// Source index in [0, d) of output index i of an axis padded by b before.
int64 SourceIndex(const std::string& mode, int64 i, int64 b, int64 d) {
  int64 k = i - b;
  if (k >= 0 && k < d) return k;
  if (mode == "constant") return -1;
  if (mode == "edge") return k < 0 ? 0 : d - 1;
  if (mode == "wrap") return ((k % d) + d) % d;
  // reflect (pads < d, so one bounce suffices; d == 1 pads nothing)
  return k < 0 ? -k : 2 * (d - 1) - k;
}

struct PadPlan {
  int r = 0;
  std::vector<int64> in_dims, out_dims, in_strides;
  std::vector<std::vector<int64>> maps;  // per axis: out index -> in index or -1
  int64 rows = 1, in_last = 1, out_last = 1, begin_last = 0;
};

PadPlan MakePlan(const OpKernelContext& ctx, const TensorShape& x, const TensorShape& y) {
  PadPlan p;
  p.r = x.rank();
  const auto& pads = ctx.attr_ints("pads");
  const std::string& mode = ctx.attr("mode").s;
  p.in_strides.assign(p.r, 1);
  for (int a = p.r - 1; a >= 0; --a) {
    p.in_dims.insert(p.in_dims.begin(), x.dim(a));
    p.out_dims.insert(p.out_dims.begin(), y.dim(a));
    if (a + 1 < p.r) p.in_strides[a] = p.in_strides[a + 1] * x.dim(a + 1);
  }
  p.maps.resize(p.r);
  for (int a = 0; a < p.r; ++a) {
    p.maps[a].resize(y.dim(a));
    for (int64 i = 0; i < y.dim(a); ++i) p.maps[a][i] = SourceIndex(mode, i, pads[a], x.dim(a));
  }
  if (p.r > 0) {
    p.in_last = x.dim(p.r - 1), p.out_last = y.dim(p.r - 1), p.begin_last = pads[p.r - 1];
    for (int a = 0; a + 1 < p.r; ++a) p.rows *= y.dim(a);
  }
  return p;
}

// The input offset of output row `row` (all axes but the last), or -1 when
// the row lies in a constant fill.
int64 RowSource(const PadPlan& p, int64 row) {
  int64 off = 0;
  for (int a = p.r - 2; a >= 0; --a) {
    const int64 i = row % p.out_dims[a];
    row /= p.out_dims[a];
    const int64 s = p.maps[a][i];
    if (s < 0) return -1;
    off += s * p.in_strides[a];
  }
  return off;
}

template <typename T>
Status PadKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const double value = ctx->attr_float("constant_value");
  if constexpr (std::is_integral_v<T>) {
    if (!(value == std::floor(value) && value >= static_cast<double>(std::numeric_limits<T>::min()) &&
          value <= static_cast<double>(std::numeric_limits<T>::max()))) {
      return errors::InvalidArgument("attr 'constant_value' ", value, " is not a value of ", DTypeName(x.dtype()));
    }
  }
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const T* xd = x.data<T>();
  T* yd = y->data<T>();
  if (x.shape().rank() == 0) {
    yd[0] = xd[0];
    return Status::OK();
  }
  const PadPlan p = MakePlan(*ctx, x.shape(), y->shape());
  const T cv = static_cast<T>(value);
  const std::vector<int64>& last = p.maps[p.r - 1];
  const int64 mid0 = std::min(p.begin_last, p.out_last), mid1 = std::min(p.begin_last + p.in_last, p.out_last);
  ParallelFor(p.rows, p.out_last, [&](int64 b, int64 e) {
    for (int64 row = b; row < e; ++row) {
      T* out = yd + row * p.out_last;
      const int64 src = p.in_last == 0 ? -1 : RowSource(p, row);
      if (src < 0) {
        std::fill(out, out + p.out_last, cv);
        continue;
      }
      const T* in = xd + src;
      for (int64 j = 0; j < mid0; ++j) out[j] = last[j] < 0 ? cv : in[last[j]];
      std::memcpy(out + mid0, in, sizeof(T) * (mid1 - mid0));
      for (int64 j = mid1; j < p.out_last; ++j) out[j] = last[j] < 0 ? cv : in[last[j]];
    }
  });
  return Status::OK();
}

template <typename T>
Status PadGradKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& dy = ctx->input(1);
  Tensor* dx = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &dx));
  if (dx->NumElements() == 0) return Status::OK();
  T* dxd = dx->data<T>();
  const T* dyd = dy.data<T>();
  if (x.shape().rank() == 0) {
    dxd[0] = dyd[0];
    return Status::OK();
  }
  std::memset(dxd, 0, sizeof(T) * dx->NumElements());
  const PadPlan p = MakePlan(*ctx, x.shape(), dy.shape());
  const std::vector<int64>& last = p.maps[p.r - 1];
  // Rows of dy that reflect / edge / wrap onto the same row of dx: serial.
  for (int64 row = 0; row < p.rows; ++row) {
    const int64 src = RowSource(p, row);
    if (src < 0) continue;
    const T* g = dyd + row * p.out_last;
    T* acc = dxd + src;
    for (int64 j = 0; j < p.out_last; ++j) {
      if (last[j] >= 0) acc[last[j]] += g[j];
    }
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("Pad", kCPU, DType::kFloat32, PadKernel<float>);
REGISTER_KERNEL("Pad", kCPU, DType::kFloat64, PadKernel<double>);
REGISTER_KERNEL("Pad", kCPU, DType::kInt32, PadKernel<int32_t>);
REGISTER_KERNEL("Pad", kCPU, DType::kInt64, PadKernel<int64_t>);
// float16/bfloat16 (attention masks in half-precision models): copies only.
OF_REGISTER_DTYPES("Pad", PadKernel, DType::kFloat16, DType::kBFloat16);
REGISTER_KERNEL("PadGrad", kCPU, DType::kFloat32, PadGradKernel<float>);
REGISTER_KERNEL("PadGrad", kCPU, DType::kFloat64, PadGradKernel<double>);

}  // namespace opforge
