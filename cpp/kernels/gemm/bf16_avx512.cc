// The AVX512-BF16 microkernel of the bfloat16 GEMM (bf16_gemm.h): a 12 x 32
// tile in 24 zmm float32 accumulators; per pair of K, two B vectors and one
// broadcast pair of A per row feed vdpbf16ps. Compiled under a target pragma;
// called only when the CPU has AVX512-BF16.
#include <cstdint>

#include "bf16_gemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma")

namespace opforge {
namespace gemm {
namespace bf16_avx512 {

void Tile(int64_t kp, const uint32_t* ap, const uint32_t* bp, uint16_t* c, int64_t ldc, int m, int n) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * NR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + p * NR + 16);
    const uint32_t* a = ap + p * MR;
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i]));
      acc0[i] = _mm512_dpbf16_ps(acc0[i], ai, b0);
      acc1[i] = _mm512_dpbf16_ps(acc1[i], ai, b1);
    }
  }
  const __mmask16 k0 = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
  const __mmask16 k1 = n >= 32 ? __mmask16(0xffff) : n <= 16 ? __mmask16(0) : __mmask16((1u << (n - 16)) - 1);
  for (int i = 0; i < m; ++i) {
    // vcvtneps2bf16 rounds to nearest even, as the scalar path does.
    _mm256_mask_storeu_epi16(c + i * ldc, k0, (__m256i)_mm512_cvtneps_pbh(acc0[i]));
    if (k1) _mm256_mask_storeu_epi16(c + i * ldc + 16, k1, (__m256i)_mm512_cvtneps_pbh(acc1[i]));
  }
}

}  // namespace bf16_avx512
}  // namespace gemm
}  // namespace opforge

#pragma GCC pop_options
#else
namespace opforge {
namespace gemm {
namespace bf16_avx512 {
void Tile(int64_t, const uint32_t*, const uint32_t*, uint16_t*, int64_t, int, int) {}
}  // namespace bf16_avx512
}  // namespace gemm
}  // namespace opforge
#endif
