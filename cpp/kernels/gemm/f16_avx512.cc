// The AVX-512 microkernel of the float16 GEMM (f16_gemm.h): a 12 x 32 tile
// in 24 zmm float32 accumulators, A broadcast from widened float32 rows, B
// from a float32 panel; the epilogue adds the bias, applies relu and rounds
// to float16 once (vcvtps2ph, nearest even). Compiled under a target pragma;
// called only when the CPU has AVX-512F.
#include <cstdint>

#include "f16_gemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx2,fma,f16c")

namespace opforge {
namespace gemm {
namespace f16 {
namespace {

template <int M>
void TileM(int64_t k, const float* a, int64_t lda, const float* bp, __m512* acc0, __m512* acc1) {
#pragma GCC unroll 12
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m512 b0 = _mm512_loadu_ps(bp + p * NR);
    const __m512 b1 = _mm512_loadu_ps(bp + p * NR + 16);
#pragma GCC unroll 12
    for (int i = 0; i < M; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i * lda + p]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
  }
}

void Tile(int64_t k, const float* a, int64_t lda, const float* bp, const float* bias, bool relu, uint16_t* c,
          int64_t ldc, int m, int n) {
  __m512 acc0[MR], acc1[MR];
  // a has MR readable rows (the driver pads A to whole tiles with zeros).
  TileM<MR>(k, a, lda, bp, acc0, acc1);
  const __m512 bias0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 k0 = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
  const __mmask16 k1 = n >= 32 ? __mmask16(0xffff) : n <= 16 ? __mmask16(0) : __mmask16((1u << (n - 16)) - 1);
  for (int i = 0; i < m; ++i) {
    __m512 v0 = _mm512_add_ps(acc0[i], bias0), v1 = _mm512_add_ps(acc1[i], bias1);
    if (relu) v0 = _mm512_max_ps(v0, zero), v1 = _mm512_max_ps(v1, zero);
    _mm256_mask_storeu_epi16(c + i * ldc, k0, _mm512_cvtps_ph(v0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (k1) {
      _mm256_mask_storeu_epi16(c + i * ldc + 16, k1,
                               _mm512_cvtps_ph(v1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
}

void Widen(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
  if (i < n) {
    const __mmask16 t = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, t, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(t, src + i)));
  }
}

}  // namespace

TileFn Avx512Tile() { return &Tile; }
WidenFn Avx512Widen() { return &Widen; }

}  // namespace f16
}  // namespace gemm
}  // namespace opforge

#pragma GCC pop_options
#else
namespace opforge {
namespace gemm {
namespace f16 {
TileFn Avx512Tile() { return nullptr; }
WidenFn Avx512Widen() { return nullptr; }
}  // namespace f16
}  // namespace gemm
}  // namespace opforge
#endif
