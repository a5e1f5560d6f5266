// Neural-network kernels: Softmax, LogSoftmax and RmsNorm.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "compiler.h"

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

// exp(x) for x <= 0 or NaN (softmax only ever needs those), written so that
// gcc vectorizes it: Cody-Waite range reduction, a degree-7 Taylor polynomial
// on |r| <= ln2/2 (max error ~1 ulp), 2^n built in the exponent bits, and
// branch-free selects through bit masks. Results that would be subnormal
// (x < -87) are flushed to 0, so exp(-inf) is exactly 0.
inline float ExpNonPositive(float x) {
  constexpr float kLo = -87.0f;
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const uint32_t below = 0u - static_cast<uint32_t>(x < kLo);  // all ones where x < kLo; NaN: 0
  uint32_t xb, lob;
  const float lo = kLo, magic = kMagic;
  std::memcpy(&xb, &x, sizeof xb);
  std::memcpy(&lob, &lo, sizeof lob);
  const uint32_t xcb = (xb & ~below) | (lob & below);
  float xc;
  std::memcpy(&xc, &xcb, sizeof xc);
  const float shifted = xc * kLog2e + kMagic;
  const float n = shifted - kMagic;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f;
  p = 1.0f + p * r * (1.0f / 7);
  p = 1.0f + p * r * (1.0f / 6);
  p = 1.0f + p * r * (1.0f / 5);
  p = 1.0f + p * r * (1.0f / 4);
  p = 1.0f + p * r * (1.0f / 3);
  p = 1.0f + p * r * (1.0f / 2);
  p = 1.0f + p * r;
  uint32_t sb, mb;
  std::memcpy(&sb, &shifted, sizeof sb);
  std::memcpy(&mb, &magic, sizeof mb);
  const uint32_t scale_bits = ((sb - mb) + 127u) << 23;  // 2^n, n in [-126, 0]
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const float v = p * scale;
  uint32_t vb;
  std::memcpy(&vb, &v, sizeof vb);
  vb &= ~below;
  float out;
  std::memcpy(&out, &vb, sizeof out);
  return out;
}
// float64 uses libm: the same trick needs 64-bit integer lanes SSE2 lacks.
inline double ExpNonPositive(double x) { return std::exp(x); }

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
  for (int64 i = 0; i < n; ++i) y[i] = ExpNonPositive(x[i] - m);
  double lanes[kLanes] = {};
  int64 i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(y[i + l]);
  }
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(y[i]);
  for (int l = 0; l < kLanes; ++l) s += lanes[l];
  const T inv = static_cast<T>(1.0 / s);
  for (int64 i = 0; i < n; ++i) y[i] *= inv;
}

// Log-softmax of one contiguous row: x - max - log(sum(exp(x - max))), sum in double.
template <typename T>
void LogSoftmaxRow(const T* OF_RESTRICT x, T* OF_RESTRICT y, int64 n) {
  const T m = RowMax(x, n);
  double lanes[kLanes] = {};
  int64 i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      y[i + l] = x[i + l] - m;
      lanes[l] += static_cast<double>(ExpNonPositive(y[i + l]));
    }
  }
  double s = 0;
  for (; i < n; ++i) {
    y[i] = x[i] - m;
    s += static_cast<double>(ExpNonPositive(y[i]));
  }
  for (int l = 0; l < kLanes; ++l) s += lanes[l];
  const T log_s = static_cast<T>(std::log(s));
  for (int64 i = 0; i < n; ++i) y[i] -= log_s;
}

// Softmax (kLog false) or log-softmax (kLog true) along one axis.
template <typename T, bool kLog>
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
      for (int64 o = b; o < e; ++o) {
        if (kLog) {
          LogSoftmaxRow(in + o * n, y + o * n, n);
        } else {
          SoftmaxRow(in + o * n, y + o * n, n);
        }
      }
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
        if (kLog) {
          for (int64 k = 0; k < w; ++k) orow[k] = row[k] - m[k];
          for (int64 k = 0; k < w; ++k) s[k] += static_cast<double>(ExpNonPositive(orow[k]));
        } else {
          for (int64 k = 0; k < w; ++k) orow[k] = ExpNonPositive(row[k] - m[k]);
          for (int64 k = 0; k < w; ++k) s[k] += static_cast<double>(orow[k]);
        }
      }
      if (kLog) {
        for (int64 k = 0; k < w; ++k) m[k] = static_cast<T>(std::log(s[k]));  // reuse m as log(sum)
        for (int64 r = 0; r < n; ++r) {
          T* orow = dst + r * inner;
          for (int64 k = 0; k < w; ++k) orow[k] -= m[k];
        }
      } else {
        for (int64 k = 0; k < w; ++k) m[k] = static_cast<T>(1.0 / s[k]);  // reuse m as 1/sum
        for (int64 r = 0; r < n; ++r) {
          T* orow = dst + r * inner;
          for (int64 k = 0; k < w; ++k) orow[k] *= m[k];
        }
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
      const double inv_d = 1.0 / std::sqrt(mean_sq + eps);
      const T inv = static_cast<T>(inv_d);
      if (std::isinf(inv) && !std::isinf(inv_d)) {  // a tiny epsilon over a zero row: stay in double
        for (int64 i = 0; i < d; ++i) yr[i] = static_cast<T>(static_cast<double>(xr[i]) * inv_d * w[i]);
      } else {
        for (int64 i = 0; i < d; ++i) yr[i] = xr[i] * inv * w[i];
      }
    }
  });
  return Status::OK();
}

REGISTER_KERNEL("Softmax", kCPU, DType::kFloat32, (SoftmaxKernel<float, false>));
REGISTER_KERNEL("Softmax", kCPU, DType::kFloat64, (SoftmaxKernel<double, false>));
REGISTER_KERNEL("LogSoftmax", kCPU, DType::kFloat32, (SoftmaxKernel<float, true>));
REGISTER_KERNEL("LogSoftmax", kCPU, DType::kFloat64, (SoftmaxKernel<double, true>));
REGISTER_KERNEL("RmsNorm", kCPU, DType::kFloat32, RmsNormKernel<float>);
REGISTER_KERNEL("RmsNorm", kCPU, DType::kFloat64, RmsNormKernel<double>);

}  // namespace
}  // namespace opforge
