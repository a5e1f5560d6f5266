// AVX2 microkernels: a 6 x 16 tile of int32 (12 ymm accumulators). Operands
// are packed as int16 pairs (wide format, qmicrokernel.h): vpmaddwd
// multiplies 16 int16 pairs exactly and adds them two by two into 8 int32
// lanes. (vpmaddubsw on bytes would be twice as fast but saturates at
// int16: 2 * 255 * 127 does not fit.) Called only when the CPU has AVX2.
#include <cstdint>
#include <cstring>
#include <utility>

#include "qmicrokernel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace opforge {
namespace qgemm {
namespace avx2 {
namespace {

constexpr int MR = 6, NR = 16, KG = 2;

inline __m256i Mask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

template <int M>
void Tile(int64_t kq, const void* av, const void* bv, int32_t* c, int64_t ldc, int n, bool accumulate) {
  const int16_t* a = static_cast<const int16_t*>(av);
  const int16_t* b = static_cast<const int16_t*>(bv);
  __m256i acc0[M], acc1[M];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int64_t q = 0; q < kq; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      int32_t pair;
      std::memcpy(&pair, a + i * KG, 4);
      const __m256i ai = _mm256_set1_epi32(pair);
      acc0[i] = _mm256_add_epi32(acc0[i], _mm256_madd_epi16(ai, b0));
      acc1[i] = _mm256_add_epi32(acc1[i], _mm256_madd_epi16(ai, b1));
    }
    a += MR * KG;
    b += NR * KG;
  }
  const __m256i m0 = Mask(n), m1 = Mask(n - 8);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    int* ci = reinterpret_cast<int*>(c + i * ldc);
    __m256i r0 = acc0[i], r1 = acc1[i];
    if (accumulate) {
      r0 = _mm256_add_epi32(r0, _mm256_maskload_epi32(ci, m0));
      r1 = _mm256_add_epi32(r1, _mm256_maskload_epi32(ci + 8, m1));
    }
    _mm256_maskstore_epi32(ci, m0, r0);
    _mm256_maskstore_epi32(ci + 8, m1, r1);
  }
}

template <int... Ms>
constexpr QKernels Make(std::integer_sequence<int, Ms...>) {
  return QKernels{"avx2", MR, NR, KG, true, {&Tile<Ms + 1>...}, {}};
}

const QKernels kKernels = Make(std::make_integer_sequence<int, MR>());

}  // namespace
}  // namespace avx2

const QKernels* Avx2Kernels() { return &avx2::kKernels; }

}  // namespace qgemm
}  // namespace opforge

#pragma GCC pop_options

#else
namespace opforge {
namespace qgemm {
const QKernels* Avx2Kernels() { return nullptr; }
}  // namespace qgemm
}  // namespace opforge
#endif
