// Kernels that select by value: TopK (a partial sort per lane, ties to the
// lower index, NaN above every number as ONNX orders it) and NonZero (which
// checks the count its caller passed against the values).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

using int64 = int64_t;

template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  return false;
}

// a strictly before b: larger first (or smaller, when !largest); NaN is the largest.
template <typename T>
struct Before {
  bool largest;
  bool operator()(const std::pair<T, int64>& a, const std::pair<T, int64>& b) const {
    const bool an = IsNan(a.first), bn = IsNan(b.first);
    if (an || bn) {
      if (an && bn) return a.second < b.second;
      return largest ? an : bn;
    }
    if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  }
};

template <typename T>
Status TopKKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const int rank = x.rank();
  const int axis = static_cast<int>(ctx->attr_int("axis") < 0 ? ctx->attr_int("axis") + rank : ctx->attr_int("axis"));
  const int64 k = ctx->attr_int("k");
  const int64 n = x.dim(axis);
  if (k > n) {
    return errors::InvalidArgument("attr 'k' is ", k, " but axis ", axis, " of argument 'x' has only ", n,
                                   " elements");
  }
  int64 outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int d = axis + 1; d < rank; ++d) inner *= x.dim(d);
  Tensor *values = nullptr, *indices = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &values));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &indices));
  if (k == 0 || outer * inner == 0) return Status::OK();
  const T* src = x.data<T>();
  T* vo = values->data<T>();
  int64* io = indices->data<int64>();
  const Before<T> before{ctx->attr_bool("largest")};
  const int64 log_n = 1 + static_cast<int64>(std::log2(static_cast<double>(n) + 1));
  ParallelFor(outer * inner, n * log_n, [&](int64 lo, int64 hi) {
    std::vector<std::pair<T, int64>> lane(static_cast<size_t>(n));
    for (int64 l = lo; l < hi; ++l) {
      const int64 o = l / inner, i = l % inner;
      const T* col = src + o * n * inner + i;
      for (int64 j = 0; j < n; ++j) lane[j] = {col[j * inner], j};
      std::partial_sort(lane.begin(), lane.begin() + k, lane.end(), before);
      T* vcol = vo + o * k * inner + i;
      int64* icol = io + o * k * inner + i;
      for (int64 j = 0; j < k; ++j) {
        vcol[j * inner] = lane[j].first;
        icol[j * inner] = lane[j].second;
      }
    }
  });
  return Status::OK();
}

template <typename T>
Status NonZeroKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const int rank = x.rank();
  const int64 total = x.NumElements();
  const T* src = x.data<T>();
  int64 count = 0;
  for (int64 i = 0; i < total; ++i) count += src[i] != T(0);
  if (count != ctx->attr_int("count")) {
    return errors::InvalidArgument("attr 'count' is ", ctx->attr_int("count"), " but argument 'x' has ", count,
                                   " nonzero elements");
  }
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  int64* dst = out->data<int64>();
  std::vector<int64> coord(rank, 0);
  int64 c = 0;
  for (int64 i = 0; i < total; ++i) {
    if (src[i] != T(0)) {
      for (int d = 0; d < rank; ++d) dst[d * count + c] = coord[d];
      ++c;
    }
    for (int d = rank - 1; d >= 0; --d) {  // odometer over x's shape
      if (++coord[d] < x.dim(d)) break;
      coord[d] = 0;
    }
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("TopK", kCPU, DType::kFloat32, TopKKernel<float>);
REGISTER_KERNEL("TopK", kCPU, DType::kFloat64, TopKKernel<double>);
REGISTER_KERNEL("TopK", kCPU, DType::kInt32, TopKKernel<int32_t>);
REGISTER_KERNEL("TopK", kCPU, DType::kInt64, TopKKernel<int64_t>);
REGISTER_KERNEL("NonZero", kCPU, DType::kFloat32, NonZeroKernel<float>);
REGISTER_KERNEL("NonZero", kCPU, DType::kFloat64, NonZeroKernel<double>);
REGISTER_KERNEL("NonZero", kCPU, DType::kInt32, NonZeroKernel<int32_t>);
REGISTER_KERNEL("NonZero", kCPU, DType::kInt64, NonZeroKernel<int64_t>);
REGISTER_KERNEL("NonZero", kCPU, DType::kBool, NonZeroKernel<bool>);

}  // namespace opforge
