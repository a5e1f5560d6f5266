// The AVX-512 microkernel of the float16 GEMM (f16_gemm.h): a 12 x 32 tile
// in 24 zmm float32 accumulators, A broadcast from widened float32 rows, B
// from a float32 panel; the epilogue adds the bias, applies relu and rounds
// to float16 once (vcvtps2ph, nearest even). Compiled under a target pragma;
// called only when the CPU has AVX-512F.
#include <array>
#include <cstdint>
#include <utility>

#include "f16_gemm.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx2,fma,f16c")

namespace opforge {
namespace gemm {
namespace f16 {
namespace {

// M rows (M <= MR) by NV * 16 columns: edge tiles run only the rows and
// vectors they need (a 64-row batch is 5 x 12 + 4 rows; a 10-wide layer one
// vector), not a zero-padded full tile.
template <int M, int NV>
void TileMN(int64_t k, const float* a, int64_t lda, const float* bp, const float* bias, bool relu, uint16_t* c,
            int64_t ldc, int n) {
  __m512 acc[M][NV];
#pragma GCC unroll 12
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    __m512 b[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(bp + p * NR + 16 * v);
#pragma GCC unroll 12
    for (int i = 0; i < M; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i * lda + p]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, b[v], acc[i][v]);
    }
  }
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    const int w = n - 16 * v;
    if (w <= 0) break;
    const __mmask16 mask = w >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << w) - 1);
    const __m512 vb = bias ? _mm512_maskz_loadu_ps(mask, bias + 16 * v) : zero;
#pragma GCC unroll 12
    for (int i = 0; i < M; ++i) {
      __m512 y = _mm512_add_ps(acc[i][v], vb);
      if (relu) y = _mm512_max_ps(y, zero);
      _mm256_mask_storeu_epi16(c + i * ldc + 16 * v, mask,
                               _mm512_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
}

using EdgeFn = void (*)(int64_t, const float*, int64_t, const float*, const float*, bool, uint16_t*, int64_t, int);

template <int NV, int... Ms>
constexpr std::array<EdgeFn, MR> Table(std::integer_sequence<int, Ms...>) {
  return {&TileMN<Ms + 1, NV>...};
}

void Tile(int64_t k, const float* a, int64_t lda, const float* bp, const float* bias, bool relu, uint16_t* c,
          int64_t ldc, int m, int n) {
  static constexpr std::array<EdgeFn, MR> one = Table<1>(std::make_integer_sequence<int, MR>());
  static constexpr std::array<EdgeFn, MR> two = Table<2>(std::make_integer_sequence<int, MR>());
  (n <= 16 ? one : two)[m - 1](k, a, lda, bp, bias, relu, c, ldc, n);
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
