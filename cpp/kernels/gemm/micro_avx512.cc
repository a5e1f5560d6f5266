// AVX-512 microkernels: a 12 x 32 register tile (24 zmm accumulators, two
// B vectors, one broadcast), so both 512-bit FMA pipes of Zen 4/5 and
// Skylake-X stay busy. Compiled under a target pragma; the driver calls it
// only when the CPU has AVX-512 (see sgemm.cc).
#include <cstdint>
#include <utility>

#include "microkernel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")

namespace opforge {
namespace gemm {
namespace avx512 {
namespace {

constexpr int MR = 12, NR = 32;

#include "pack_isa.inc"

constexpr int L = 16;
typedef float V __attribute__((vector_size(64)));
#include "gemv_isa.inc"

// kPacked: a is a packed panel (a_rs = 1, a_cs = MR), so the row offsets are
// compile-time constants.
template <int M, bool kPacked>
void Tile(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_ld,
          float* c, int64_t ldc, int n, float alpha, float beta) {
  if (kPacked) a_rs = 1, a_cs = MR;
  __m512 acc0[M], acc1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
    // B read in place (small M) is a strided stream: fetch both lines ahead.
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * b_ld), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * b_ld + 16), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i * a_rs]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
    a += a_cs;
    b += b_ld;
  }
  const __mmask16 m0 = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  const __mmask16 m1 = n >= 32 ? __mmask16(0xFFFF) : n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
  const __m512 va = _mm512_set1_ps(alpha);
  if (beta == 0.0f) {
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      _mm512_mask_storeu_ps(c + i * ldc, m0, _mm512_mul_ps(va, acc0[i]));
      _mm512_mask_storeu_ps(c + i * ldc + 16, m1, _mm512_mul_ps(va, acc1[i]));
    }
  } else {
    const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      float* ci = c + i * ldc;
      const __m512 o0 = _mm512_maskz_loadu_ps(m0, ci), o1 = _mm512_maskz_loadu_ps(m1, ci + 16);
      _mm512_mask_storeu_ps(ci, m0, _mm512_fmadd_ps(va, acc0[i], _mm512_mul_ps(vb, o0)));
      _mm512_mask_storeu_ps(ci + 16, m1, _mm512_fmadd_ps(va, acc1[i], _mm512_mul_ps(vb, o1)));
    }
  }
}

template <int... Ms>
constexpr Kernels Make(std::integer_sequence<int, Ms...>) {
  return Kernels{"avx512", MR, NR, {&Tile<Ms + 1, true>...}, {&Tile<Ms + 1, false>...}, &PackB<NR>, &GemvN, &GemvT};
}

const Kernels kKernels = Make(std::make_integer_sequence<int, MR>());

}  // namespace
}  // namespace avx512

const Kernels* Avx512Kernels() { return &avx512::kKernels; }

}  // namespace gemm
}  // namespace opforge

#pragma GCC pop_options

#else
namespace opforge {
namespace gemm {
const Kernels* Avx512Kernels() { return nullptr; }
}  // namespace gemm
}  // namespace opforge
#endif
