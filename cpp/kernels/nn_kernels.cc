// Neural-network kernels: Softmax and RmsNorm.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#ifndef OF_RESTRICT
#if defined(__GNUC__) || defined(__clang__)
#define OF_RESTRICT __restrict__
#else
#define OF_RESTRICT
#endif
#endif

namespace opforge {
namespace {

using int64 = int64_t;

constexpr int kLanes = 16;   // independent accumulators per row
constexpr int64 kCols = 256;  // column block when the axis is not the last one
constexpr int64 kExpCost = 20;

// NaN-propagating max, as numpy's maximum.
template <typename T>
inline T NanMax(T a, T b) { return (a >= b || a != a) ? a : b; }

template <typename T>
T RowMax(const T* OF_RESTRICT x, int64 n) {
  T r = -std::numeric_limits<T>::infinity();
  int64 i = 0;
  if (n >= kLanes) {
    T lanes[kLanes];
    for (int l = 0; l < kLanes; ++l) lanes[l] = r;
    for (; i + kLanes <= n; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) lanes[l] = NanMax(lanes[l], x[i + l]);
    }
    for (int l = 0; l < kLanes; ++l) r = NanMax(r, lanes[l]);
  }
  for (; i < n; ++i) r = NanMax(r, x[i]);
  return r;
}

// Sum of squares in double (float32 input loses nothing on long rows).
template <typename T>
double RowSumSquares(const T* OF_RESTRICT x, int64 n) {
  double lanes[kLanes] = {};
  int64 i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double v = static_cast<double>(x[i + l]);
      lanes[l] += v * v;
    }
  }
  double r = 0;
  for (; i < n; ++i) r += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  for (int l = 0; l < kLanes; ++l) r += lanes[l];
  return r;
}

// Softmax of one contiguous row. The sum is kept in double.
template <typename T>
void SoftmaxRow(const T* OF_RESTRICT x, T* OF_RESTRICT y, int64 n) {
  const T m = RowMax(x, n);
  double s = 0;
  for (int64 i = 0; i < n; ++i) {
    const T e = std::exp(x[i] - m);
    y[i] = e;
    s += e;
  }
  const T inv = static_cast<T>(1.0 / s);
  for (int64 i = 0; i < n; ++i) y[i] *= inv;
}

template <typename T>
Status SoftmaxKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (x.NumElements() == 0) return Status::OK();
  const int rank = x.rank();
  const int64 a = ctx->attr_int("axis");
  const int axis = static_cast<int>(a < 0 ? a + rank : a);
  int64 outer = 1, inner = 1;
  const int64 n = x.dim(axis);
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < rank; ++i) inner *= x.dim(i);
  const T* in = x.data<T>();
  T* y = out->data<T>();

  if (inner == 1) {
    ParallelFor(outer, n * kExpCost, [&](int64 b, int64 e) {
      for (int64 o = b; o < e; ++o) SoftmaxRow(in + o * n, y + o * n, n);
    });
    return Status::OK();
  }
  // Axis not last: walk whole contiguous rows, one column block at a time.
  const int64 cw = std::min(inner, kCols);
  const int64 ncb = (inner + cw - 1) / cw;
  ParallelFor(outer * ncb, n * cw * kExpCost, [&](int64 b, int64 e) {
    T m[kCols];
    double s[kCols];
    for (int64 u = b; u < e; ++u) {
      const int64 o = u / ncb, col0 = (u % ncb) * cw, w = std::min(cw, inner - col0);
      const T* src = in + o * n * inner + col0;
      T* dst = y + o * n * inner + col0;
      for (int64 k = 0; k < w; ++k) {
        m[k] = -std::numeric_limits<T>::infinity();
        s[k] = 0;
      }
      for (int64 r = 0; r < n; ++r) {
        const T* row = src + r * inner;
        for (int64 k = 0; k < w; ++k) m[k] = NanMax(m[k], row[k]);
      }
      for (int64 r = 0; r < n; ++r) {
        const T* row = src + r * inner;
        T* orow = dst + r * inner;
        for (int64 k = 0; k < w; ++k) {
          const T v = std::exp(row[k] - m[k]);
          orow[k] = v;
          s[k] += v;
        }
      }
      for (int64 k = 0; k < w; ++k) m[k] = static_cast<T>(1.0 / s[k]);  // reuse m as 1/sum
      for (int64 r = 0; r < n; ++r) {
        T* orow = dst + r * inner;
        for (int64 k = 0; k < w; ++k) orow[k] *= m[k];
      }
    }
  });
  return Status::OK();
}

template <typename T>
Status RmsNormKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& weight = ctx->input(1);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64 total = x.NumElements();
  if (total == 0) return Status::OK();
  const int64 d = x.dim(x.rank() - 1);
  const int64 rows = total / d;
  const double eps = ctx->attr_float("epsilon");
  const T* in = x.data<T>();
  const T* w = weight.data<T>();
  T* y = out->data<T>();
  ParallelFor(rows, d * 4, [&](int64 b, int64 e) {
    for (int64 r = b; r < e; ++r) {
      const T* OF_RESTRICT xr = in + r * d;
      T* OF_RESTRICT yr = y + r * d;
      const double mean_sq = RowSumSquares(xr, d) / static_cast<double>(d);
      const T inv = static_cast<T>(1.0 / std::sqrt(mean_sq + eps));
      for (int64 i = 0; i < d; ++i) yr[i] = xr[i] * inv * w[i];
    }
  });
  return Status::OK();
}

REGISTER_KERNEL("Softmax", kCPU, DType::kFloat32, SoftmaxKernel<float>);
REGISTER_KERNEL("Softmax", kCPU, DType::kFloat64, SoftmaxKernel<double>);
REGISTER_KERNEL("RmsNorm", kCPU, DType::kFloat32, RmsNormKernel<float>);
REGISTER_KERNEL("RmsNorm", kCPU, DType::kFloat64, RmsNormKernel<double>);

}  // namespace
}  // namespace opforge
