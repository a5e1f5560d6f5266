// What the quantization kernels share: ONNX's rounding and saturation, the
// check of scale values, and the (outer, axis, inner) view of a per-axis
// parameter. Internal to cpp/kernels/quant/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "opforge/kernel.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace opforge {
namespace quant {

// round(t) to nearest, ties to even, for |t| < 2^22 (the FPU's default mode
// does the rounding; plain arithmetic, so loops vectorize without SSE4.1).
// Larger |t| are clamped first: they saturate whatever the zero point.
inline float RoundHalfEven(float t) {
  constexpr float kBig = 4194304.0f;     // 2^22
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  t = t > kBig ? kBig : t;
  t = t < -kBig ? -kBig : t;
  return (t + kMagic) - kMagic;
}

// saturate(v) into Q's range; NaN gives the lowest value, as onnxruntime.
template <typename Q>
inline Q Saturate(float v) {
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
  v = v >= lo ? v : lo;
  v = v <= hi ? v : hi;
  return static_cast<Q>(static_cast<int32_t>(v));
}

// ONNX QuantizeLinear of one value.
template <typename Q>
inline Q QuantizeOne(float x, float scale, float zero_point) {
  return Saturate<Q>(RoundHalfEven(x / scale) + zero_point);
}

// The AVX-512 loops (quantize_avx512.cc), or nullptr without AVX-512 (or
// under OPFORGE_SIMD=avx2/baseline). RangeFn: false when x holds NaN or
// infinity; else [lo, hi] = [min(x, 0), max(x, 0)].
using RangeFn = bool (*)(const float* x, int64_t n, float* lo, float* hi);
using QuantizeU8Fn = void (*)(const float* x, int64_t n, float s, int32_t z, uint8_t* y);
RangeFn Avx512Range();
// bounded: for x finite with |x / s| <= 255 only (DynamicQuantizeLinear's
// own scale): no clamps.
QuantizeU8Fn Avx512QuantizeU8(bool bounded = false);
// The 8-bit GEMM's tile epilogues over an m x n tile (n <= 64) of C: the
// zero-point correction c[i][j] += zb[j] t[i] - za[i] cs[j] (uint32, wrapping),
// and the rescale of int32 c to float32 in place, float(c + off[j]) * s[j] +
// bias[j] (off and bias may be null; off wraps: a zero-point correction
// that is the same for every row, folded into this pass), then relu.
using CorrectFn = void (*)(uint32_t* c, int64_t ldc, int m, int n, const uint32_t* zb, const uint32_t* cs,
                           const uint32_t* t, const uint32_t* za);
using RescaleFn = void (*)(int32_t* c, int64_t ldc, int m, int n, const float* s, const float* bias,
                           const uint32_t* off, bool relu);
CorrectFn Avx512Correct();
RescaleFn Avx512Rescale();

// y[i] = QuantizeOne(x[i]) for a row. round(clamp(t)) = clamp(round(t)) when
// the bounds are integers, so t = x / s is clamped to [lo - z, hi - z] first
// (MAXPS gives the bound for NaN: the lowest value), then rounded by the
// FPU's default mode (nearest, ties to even) and shifted by z. SSE2 (the
// x86-64 baseline) for 8-bit types; plain code for the rest and the tail.
template <typename Q>
void QuantizeRowPortable(const float* x, int64_t n, float s, int32_t z, Q* y) {
  const float lo = static_cast<float>(std::numeric_limits<Q>::min() - z);
  const float hi = static_cast<float>(std::numeric_limits<Q>::max() - z);
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (sizeof(Q) == 1) {
    const __m128 vs = _mm_set1_ps(s), vl = _mm_set1_ps(lo), vh = _mm_set1_ps(hi);
    const __m128i vz = _mm_set1_epi32(z);
    for (; i + 16 <= n; i += 16) {
      __m128i r[4];
      for (int k = 0; k < 4; ++k) {
        __m128 t = _mm_div_ps(_mm_loadu_ps(x + i + 4 * k), vs);
        t = _mm_min_ps(_mm_max_ps(t, vl), vh);
        r[k] = _mm_add_epi32(_mm_cvtps_epi32(t), vz);
      }
      const __m128i p0 = _mm_packs_epi32(r[0], r[1]), p1 = _mm_packs_epi32(r[2], r[3]);  // [-128, 255]: exact
      const __m128i out = std::numeric_limits<Q>::is_signed ? _mm_packs_epi16(p0, p1) : _mm_packus_epi16(p0, p1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), out);
    }
  }
#endif
  for (; i < n; ++i) {
    float t = x[i] / s;
    t = t >= lo ? t : lo;
    t = t <= hi ? t : hi;
    y[i] = static_cast<Q>(static_cast<int32_t>(std::nearbyint(t)) + z);
  }
}

// The same, with the AVX-512 loop where there is one.
template <typename Q>
void QuantizeRow(const float* x, int64_t n, float s, int32_t z, Q* y) {
  if constexpr (std::is_same_v<Q, uint8_t>) {
    static const QuantizeU8Fn fast = Avx512QuantizeU8();
    if (fast != nullptr) return fast(x, n, s, z, y);
  }
  QuantizeRowPortable<Q>(x, n, s, z, y);
}

// QuantizeRow for DynamicQuantizeLinear's own (s, z) of an x it checked finite.
inline void QuantizeRowDynamic(const float* x, int64_t n, float s, int32_t z, uint8_t* y) {
  static const QuantizeU8Fn fast = Avx512QuantizeU8(true);
  if (fast != nullptr) return fast(x, n, s, z, y);
  QuantizeRowPortable<uint8_t>(x, n, s, z, y);
}

// Every value of a float32 scale tensor is finite and non-zero; else an
// InvalidArgumentError naming the argument.
inline Status CheckScales(const Tensor& s, const char* name) {
  const float* v = s.data<float>();
  for (int64_t i = 0; i < s.NumElements(); ++i) {
    if (!std::isfinite(v[i]) || v[i] == 0.0f) {
      return errors::InvalidArgument("argument '", name, "' must be finite and non-zero, got ", v[i],
                                     s.NumElements() > 1 ? " at index " : "",
                                     s.NumElements() > 1 ? std::to_string(i) : std::string());
    }
  }
  return Status::OK();
}

// DynamicQuantizeLinear's parameters for x[0..n): the range [min(x, 0),
// max(x, 0)] onto uint8 [0, 255]. NaN or infinity in x: InvalidArgument.
inline Status DynamicRange(const float* xd, int64_t n, float* scale_out, uint8_t* zero_out) {
  float lo = 0.0f, hi = 0.0f;
  bool finite = true;
  static const RangeFn fast = Avx512Range();
  if (fast != nullptr) {
    finite = fast(xd, n, &lo, &hi);
  } else {
    // The range in four lanes; poison becomes NaN once any x is NaN or infinite.
    float lo4[4] = {0, 0, 0, 0}, hi4[4] = {0, 0, 0, 0}, poison4[4] = {0, 0, 0, 0};
    int64_t i = 0;
#if defined(__SSE2__)
    __m128 vlo = _mm_setzero_ps(), vhi = _mm_setzero_ps(), vp = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4) {
      const __m128 v = _mm_loadu_ps(xd + i);
      vlo = _mm_min_ps(vlo, v);
      vhi = _mm_max_ps(vhi, v);
      vp = _mm_add_ps(vp, _mm_mul_ps(v, _mm_setzero_ps()));
    }
    _mm_storeu_ps(lo4, vlo);
    _mm_storeu_ps(hi4, vhi);
    _mm_storeu_ps(poison4, vp);
#endif
    for (; i < n; ++i) {
      lo4[0] = xd[i] < lo4[0] ? xd[i] : lo4[0];
      hi4[0] = xd[i] > hi4[0] ? xd[i] : hi4[0];
      poison4[0] += xd[i] * 0.0f;
    }
    lo = std::min(std::min(lo4[0], lo4[1]), std::min(lo4[2], lo4[3]));
    hi = std::max(std::max(hi4[0], hi4[1]), std::max(hi4[2], hi4[3]));
    finite = !std::isnan(poison4[0] + poison4[1] + poison4[2] + poison4[3]);
  }
  if (!finite) {
    return errors::InvalidArgument("argument 'x' holds NaN or infinite values: its range, and so the scale, "
                                   "is undefined");
  }
  // All zeros (hi == lo): scale 1, as onnxruntime, so y is zeros and dequantizes exactly.
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  *scale_out = scale;
  *zero_out = Saturate<uint8_t>(RoundHalfEven(0.0f - lo / scale));
  return Status::OK();
}

// The int32 value of element i of a zero-point tensor (8, 16 or 32 bits).
inline int32_t ZeroPointAt(const Tensor& z, int64_t i) {
  switch (z.dtype()) {
    case DType::kUInt8: return z.data<uint8_t>()[i];
    case DType::kInt8: return z.data<int8_t>()[i];
    case DType::kUInt16: return z.data<uint16_t>()[i];
    case DType::kInt16: return z.data<int16_t>()[i];
    case DType::kInt32: return z.data<int32_t>()[i];
    default: return 0;
  }
}

// x viewed as [outer, channels, inner] around `axis` (per-axis parameters
// index the middle); per tensor: [1, 1, size].
struct AxisView {
  int64_t outer = 1, channels = 1, inner = 1;
};
inline AxisView MakeAxisView(const TensorShape& x, int64_t axis, bool per_axis) {
  AxisView v;
  if (!per_axis) {
    v.inner = x.num_elements();
    return v;
  }
  const int a = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
  for (int i = 0; i < a; ++i) v.outer *= x.dim(i);
  v.channels = x.dim(a);
  for (int i = a + 1; i < x.rank(); ++i) v.inner *= x.dim(i);
  return v;
}

}  // namespace quant
}  // namespace opforge
