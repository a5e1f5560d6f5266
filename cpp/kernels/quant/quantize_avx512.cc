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

// Four accumulators each (a min/max chain is latency-bound); NaN and
// infinity are found from the bits (|x|'s bits >= 0x7f800000) on the integer
// units, beside the float min/max.
bool Range(const float* x, int64_t n, float* lo_out, float* hi_out) {
  __m512 lo[4], hi[4];
  __m512i bits[4];
  for (int u = 0; u < 4; ++u) lo[u] = hi[u] = _mm512_setzero_ps(), bits[u] = _mm512_setzero_si512();
  const __m512i abs = _mm512_set1_epi32(0x7fffffff);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * u);
      lo[u] = _mm512_min_ps(lo[u], v);
      hi[u] = _mm512_max_ps(hi[u], v);
      bits[u] = _mm512_max_epu32(bits[u], _mm512_and_si512(_mm512_castps_si512(v), abs));
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 t = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(t, x + i);  // zeros past n: inside [min(x, 0), max(x, 0)]
    lo[0] = _mm512_min_ps(lo[0], v);
    hi[0] = _mm512_max_ps(hi[0], v);
    bits[0] = _mm512_max_epu32(bits[0], _mm512_and_si512(_mm512_castps_si512(v), abs));
  }
  const __m512 l = _mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3]));
  const __m512 h = _mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3]));
  const __m512i m = _mm512_max_epu32(_mm512_max_epu32(bits[0], bits[1]), _mm512_max_epu32(bits[2], bits[3]));
  *lo_out = _mm512_reduce_min_ps(l);
  *hi_out = _mm512_reduce_max_ps(h);
  return static_cast<uint32_t>(_mm512_reduce_max_epu32(m)) < 0x7f800000u;
}

// x / s without the division (vdivps issues once per 5-10 cycles): t = x r
// with r = 1/s, then one Markstein step t + r (x - s t) (two FMAs), which
// gives the correctly rounded quotient, as the division does (checked
// against it on 4e7 pairs, ties included). t is clamped first to just past
// [lo, hi] (NaN to the low bound, as before): outside the range only the side
// matters, and the residual of a clamped infinity stays on its side. s far
// from 1 (r not normal) keeps the division.
void QuantizeU8(const float* x, int64_t n, float s, int32_t z, uint8_t* y) {
  const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(1.0f / s);
  const float flo = static_cast<float>(0 - z), fhi = static_cast<float>(255 - z);
  const __m512 vl = _mm512_set1_ps(flo), vh = _mm512_set1_ps(fhi);
  const __m512 wl = _mm512_set1_ps(flo - 2.0f), wh = _mm512_set1_ps(fhi + 2.0f);
  const __m512i vz = _mm512_set1_epi32(z);
  const float as = s < 0 ? -s : s;
  const bool fast = as > 0x1p-100f && as < 0x1p100f;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 t = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(t, x + i);
    __m512 v;
    if (fast) {
      v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(xv, vr), wl), wh);
      v = _mm512_fmadd_ps(_mm512_fnmadd_ps(v, vs, xv), vr, v);
    } else {
      v = _mm512_div_ps(xv, vs);
    }
    v = _mm512_min_ps(_mm512_max_ps(v, vl), vh);
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), vz);
    _mm_mask_storeu_epi8(y + i, t, _mm512_cvtepi32_epi8(q));
  }
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
QuantizeU8Fn Avx512QuantizeU8() {
  static const bool ok = Detect();
  return ok ? &QuantizeU8 : nullptr;
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
QuantizeU8Fn Avx512QuantizeU8() { return nullptr; }
CorrectFn Avx512Correct() { return nullptr; }
RescaleFn Avx512Rescale() { return nullptr; }
#endif

}  // namespace quant
}  // namespace opforge
