// Kernel of the unique group (cpp/ops/unique_ops.cc): a stable sort of the
// row indices, then one pass grouping equal rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "opforge/kernel.h"

namespace opforge {
namespace {

// -1, 0, 1; NaN equals NaN and is greater than any number.
template <typename T>
int Compare(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

template <typename T>
Status UniqueKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* outs[5] = {};
  for (int i = 0; i < 5; ++i) OF_RETURN_IF_ERROR(ctx->allocate_output(i, &outs[i]));
  const int64_t n = x.shape().dim(0), m = x.shape().dim(1);
  const T* in = x.data<T>();
  auto row_cmp = [in, m](int64_t a, int64_t b) {
    for (int64_t j = 0; j < m; ++j) {
      const int c = Compare(in[a * m + j], in[b * m + j]);
      if (c) return c;
    }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row_cmp(a, b) < 0; });
  // Groups of equal rows, in sorted order: the first of each is its first occurrence (stable sort).
  std::vector<int64_t> first, size, group_of(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t r = order[static_cast<size_t>(k)];
    if (k == 0 || row_cmp(order[static_cast<size_t>(k - 1)], r) != 0) {
      first.push_back(r);
      size.push_back(0);
    }
    ++size.back();
    group_of[static_cast<size_t>(r)] = static_cast<int64_t>(first.size()) - 1;
  }
  const int64_t groups = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank(static_cast<size_t>(groups));  // group -> output position
  std::iota(rank.begin(), rank.end(), int64_t{0});
  if (!ctx->attr_bool("sorted")) {  // by first occurrence
    std::vector<int64_t> by_first(rank);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    for (int64_t p = 0; p < groups; ++p) rank[static_cast<size_t>(by_first[static_cast<size_t>(p)])] = p;
  }
  T* y = outs[0]->data<T>();
  int64_t* idx = outs[1]->data<int64_t>();
  int64_t* inv = outs[2]->data<int64_t>();
  int64_t* cnt = outs[3]->data<int64_t>();
  std::fill(y, y + n * m, T{});
  std::fill(idx, idx + n, int64_t{-1});
  std::fill(cnt, cnt + n, int64_t{0});
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t p = rank[static_cast<size_t>(g)], r = first[static_cast<size_t>(g)];
    std::copy(in + r * m, in + (r + 1) * m, y + p * m);
    idx[p] = r;
    cnt[p] = size[static_cast<size_t>(g)];
  }
  for (int64_t i = 0; i < n; ++i) inv[i] = rank[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
  *outs[4]->data<int64_t>() = groups;
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("Unique", kCPU, DType::kFloat32, UniqueKernel<float>);
REGISTER_KERNEL("Unique", kCPU, DType::kFloat64, UniqueKernel<double>);
REGISTER_KERNEL("Unique", kCPU, DType::kInt32, UniqueKernel<int32_t>);
REGISTER_KERNEL("Unique", kCPU, DType::kInt64, UniqueKernel<int64_t>);
REGISTER_KERNEL("Unique", kCPU, DType::kInt8, UniqueKernel<int8_t>);
REGISTER_KERNEL("Unique", kCPU, DType::kUInt8, UniqueKernel<uint8_t>);
REGISTER_KERNEL("Unique", kCPU, DType::kInt16, UniqueKernel<int16_t>);
REGISTER_KERNEL("Unique", kCPU, DType::kUInt16, UniqueKernel<uint16_t>);
REGISTER_KERNEL("Unique", kCPU, DType::kUInt32, UniqueKernel<uint32_t>);
REGISTER_KERNEL("Unique", kCPU, DType::kUInt64, UniqueKernel<uint64_t>);
REGISTER_KERNEL("Unique", kCPU, DType::kBool, UniqueKernel<bool>);

}  // namespace opforge
