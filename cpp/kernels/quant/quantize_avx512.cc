// AVX-512 loops of dynamic quantization (quant_common.h): the range of x
// and its uint8 quantization, and the 8-bit GEMM's tile epilogues (zero-point
// correction, rescaling to float32), 16 lanes per instruction where the
// SSE2 code does 4 (DynamicQuantizeLinear and DynamicQuantizeMatMul spend as long
// here as in the GEMM at batch sizes of a few dozen rows). Same arithmetic
// as the SSE2 code: x / s (a division, as onnxruntime), clamped with MAXPS
// (NaN gives the bound), rounded by the default mode (nearest even).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "quant_common.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define OF_QUANT_AVX512 1
#endif

namespace opforge {
namespace quant {

#if defined(OF_QUANT_AVX512)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,fma")
// GCC 12's AVX-512 headers fill the unused merge operand with a self-initialized
// `__Y` (_mm512_undefined_*), which -Wuninitialized reports at every inlined use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace {

// The range from the bits alone, on the integer units: as int32, positive
// floats order as their values, so the signed max of the bits is max(x, 0);
// as uint32, negative floats order by magnitude above every positive one, so
// the unsigned max is min(x, 0) when it has the sign bit (else min is 0).
// NaN and infinity have the largest bits of their sign (>= 0x7f800000), so
// they show in the same two maxima. Two accumulators each: latency.
bool Range(const float* x, int64_t n, float* lo_out, float* hi_out) {
  __m512i hs0 = _mm512_setzero_si512(), hs1 = hs0, lu0 = hs0, lu1 = hs0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i v0 = _mm512_loadu_si512(x + i), v1 = _mm512_loadu_si512(x + i + 16);
    hs0 = _mm512_max_epi32(hs0, v0), lu0 = _mm512_max_epu32(lu0, v0);
    hs1 = _mm512_max_epi32(hs1, v1), lu1 = _mm512_max_epu32(lu1, v1);
  }
  for (; i < n; i += 16) {
    const __mmask16 t = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i v = _mm512_maskz_loadu_epi32(t, x + i);  // zeros past n: inside [min(x, 0), max(x, 0)]
    hs0 = _mm512_max_epi32(hs0, v), lu0 = _mm512_max_epu32(lu0, v);
  }
  const uint32_t hb = static_cast<uint32_t>(_mm512_reduce_max_epi32(_mm512_max_epi32(hs0, hs1)));
  const uint32_t lb = static_cast<uint32_t>(_mm512_reduce_max_epu32(_mm512_max_epu32(lu0, lu1)));
  if (hb >= 0x7f800000u || lb >= 0xff800000u) return false;  // +-NaN or +-infinity
  const uint32_t lo_bits = lb >= 0x80000000u ? lb : 0u;
  std::memcpy(hi_out, &hb, 4);
  std::memcpy(lo_out, &lo_bits, 4);
  return true;
}

// x / s without the division (vdivps issues once per 5-10 cycles): t = x r
// with r = 1/s, then one Markstein step t + r (x - s t) (two FMAs), which
// gives the correctly rounded quotient, as the division does (checked
// against it on 4e7 pairs, ties included). Unless `bounded`, t is clamped
// first to just past [lo, hi] (NaN to the low bound, as before): outside the
// range only the side matters, and the residual of a clamped infinity stays
// on its side. s far from 1 (r not normal) keeps the division. `bounded`:
// x is finite and |x / s| <= 255 (DynamicQuantizeLinear's own range), so
// both clamps go: the saturating packs to bytes keep [0, 255].
template <bool kBounded>
inline __m512i QuantizeVec(__m512 xv, __m512 vs, __m512 vr, __m512 wl, __m512 wh, __m512 vl, __m512 vh, __m512i vz,
                           bool fast) {
  __m512 v;
  if (fast) {
    v = _mm512_mul_ps(xv, vr);
    if (!kBounded) v = _mm512_min_ps(_mm512_max_ps(v, wl), wh);
    v = _mm512_fmadd_ps(_mm512_fnmadd_ps(v, vs, xv), vr, v);
  } else {
    v = _mm512_div_ps(xv, vs);
  }
  if (!kBounded) v = _mm512_min_ps(_mm512_max_ps(v, vl), vh);
  return _mm512_add_epi32(_mm512_cvtps_epi32(v), vz);
}

template <bool kBounded>
void QuantizeU8Impl(const float* x, int64_t n, float s, int32_t z, uint8_t* y) {
  const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(1.0f / s);
  const float flo = static_cast<float>(0 - z), fhi = static_cast<float>(255 - z);
  const __m512 vl = _mm512_set1_ps(flo), vh = _mm512_set1_ps(fhi);
  const __m512 wl = _mm512_set1_ps(flo - 2.0f), wh = _mm512_set1_ps(fhi + 2.0f);
  const __m512i vz = _mm512_set1_epi32(z);
  const float as = s < 0 ? -s : s;
  const bool fast = as > 0x1p-100f && as < 0x1p100f;
  // 64 values a step, narrowed by two rounds of saturating packs (vpmovdb to
  // memory is slow on some cores) and put back in order by one permute.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i q[4];
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      q[u] = QuantizeVec<kBounded>(_mm512_loadu_ps(x + i + 16 * u), vs, vr, wl, wh, vl, vh, vz, fast);
    }
    const __m512i w = _mm512_packus_epi16(_mm512_packs_epi32(q[0], q[1]), _mm512_packs_epi32(q[2], q[3]));
    _mm512_storeu_si512(y + i, _mm512_permutexvar_epi32(order, w));
  }
  for (; i < n; i += 16) {
    const __mmask16 t = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i q = QuantizeVec<kBounded>(_mm512_maskz_loadu_ps(t, x + i), vs, vr, wl, wh, vl, vh, vz, fast);
    const __m512i w = _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(255)), _mm512_setzero_si512());
    _mm_mask_storeu_epi8(y + i, t, _mm512_cvtepi32_epi8(w));
  }
}

void QuantizeU8(const float* x, int64_t n, float s, int32_t z, uint8_t* y) { QuantizeU8Impl<false>(x, n, s, z, y); }
void QuantizeU8Bounded(const float* x, int64_t n, float s, int32_t z, uint8_t* y) {
  const float as = s < 0 ? -s : s;  // a scale of 0 (underflowed) or subnormal: the clamped loop, as before
  if (as > 0x1p-100f && as < 0x1p100f) return QuantizeU8Impl<true>(x, n, s, z, y);
  QuantizeU8Impl<false>(x, n, s, z, y);
}

// c[i][j] += zb[j] * t[i] - za[i] * cs[j], wrapping (uint32).
void Correct(uint32_t* c, int64_t ldc, int m, int n, const uint32_t* zb, const uint32_t* cs, const uint32_t* t,
             const uint32_t* za) {
  for (int j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512i vzb = _mm512_maskz_loadu_epi32(k, zb + j), vcs = _mm512_maskz_loadu_epi32(k, cs + j);
    for (int i = 0; i < m; ++i) {
      uint32_t* ci = c + i * ldc + j;
      const __m512i d = _mm512_sub_epi32(_mm512_mullo_epi32(vzb, _mm512_set1_epi32(static_cast<int>(t[i]))),
                                         _mm512_mullo_epi32(vcs, _mm512_set1_epi32(static_cast<int>(za[i]))));
      _mm512_mask_storeu_epi32(ci, k, _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, ci), d));
    }
  }
}

// c[i][j] (int32) -> float32 in place: float(c + off[j]) * s[j] + bias[j],
// then relu.
void Rescale(int32_t* c, int64_t ldc, int m, int n, const float* s, const float* bias, const uint32_t* off,
             bool relu) {
  const __m512 zero = _mm512_setzero_ps();
  for (int j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512 vs = _mm512_maskz_loadu_ps(k, s + j);
    const __m512 vb = bias != nullptr ? _mm512_maskz_loadu_ps(k, bias + j) : zero;
    const __m512i vo = off != nullptr ? _mm512_maskz_loadu_epi32(k, off + j) : _mm512_setzero_si512();
    for (int i = 0; i < m; ++i) {
      int32_t* ci = c + i * ldc + j;
      const __m512i ai = _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, ci), vo);
      __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ai), vs), vb);
      if (relu) v = _mm512_max_ps(v, zero);
      _mm512_mask_storeu_ps(reinterpret_cast<float*>(ci), k, v);
    }
  }
}

bool Detect() {
  __builtin_cpu_init();
  bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl");
  if (const char* cap = std::getenv("OPFORGE_SIMD")) {  // the cap the other kernels obey
    if (std::strcmp(cap, "baseline") == 0 || std::strcmp(cap, "avx2") == 0) ok = false;
  }
  return ok;
}

}  // namespace
#pragma GCC diagnostic pop
#pragma GCC pop_options

RangeFn Avx512Range() {
  static const bool ok = Detect();
  return ok ? &Range : nullptr;
}
QuantizeU8Fn Avx512QuantizeU8(bool bounded) {
  static const bool ok = Detect();
  return !ok ? nullptr : bounded ? &QuantizeU8Bounded : &QuantizeU8;
}
CorrectFn Avx512Correct() {
  static const bool ok = Detect();
  return ok ? &Correct : nullptr;
}
RescaleFn Avx512Rescale() {
  static const bool ok = Detect();
  return ok ? &Rescale : nullptr;
}

#else
RangeFn Avx512Range() { return nullptr; }
QuantizeU8Fn Avx512QuantizeU8(bool) { return nullptr; }
CorrectFn Avx512Correct() { return nullptr; }
RescaleFn Avx512Rescale() { return nullptr; }
#endif

}  // namespace quant
}  // namespace opforge
