// AVX-512 VNNI microkernels: a 12 x 32 tile of int32 (24 zmm accumulators,
// two B vectors, one broadcast). Each vpdpbusd multiplies 64 u8 x s8 pairs
// and adds them four by four into 16 int32 lanes, without saturation. Called
// only when the CPU has AVX-512 VNNI (see qgemm.cc).
#include <cstdint>
#include <cstring>
#include <utility>

#include "qmicrokernel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2")
// GCC 12's AVX-512 headers fill the unused merge operand with a self-initialized
// `__Y` (_mm512_undefined_*), which -Wuninitialized reports at every inlined use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace opforge {
namespace qgemm {
namespace vnni {
namespace {

constexpr int MR = 12, NR = 32, KG = 4;

inline int32_t Load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// NV = 1: only the first 16 columns of the panel (a layer of <= 16 outputs
// skips the zero half of its 32-column panel). kRows: A unpacked, row i at
// a + i * lda (qmicrokernel.h); the rows are reached from one base per three
// rows ([base], [base + lda], [base + 2 lda]), so 12 rows need 5 registers.
// The epilogue on one row's 16 lanes: float(acc + off) * scale + bias, relu.
inline __m512i Epilogue(__m512i acc, int j, __mmask16 k, const FloatEpilogue& ep) {
  if (ep.off != nullptr) acc = _mm512_add_epi32(acc, _mm512_maskz_loadu_epi32(k, ep.off + j));
  __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_maskz_loadu_ps(k, ep.scale + j));
  if (ep.bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, ep.bias + j));
  if (ep.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
  return _mm512_castps_si512(v);
}

template <int M, int NV, bool kRows>
void TileNV(int64_t kq, const uint8_t* a, int64_t lda, const int8_t* b, int32_t* c, int64_t ldc, int n,
            bool accumulate, const FloatEpilogue* ep) {
  __m512i acc0[M], acc1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm512_setzero_si512();
  constexpr int kBases = (M + 2) / 3;
  const uint8_t* base[kBases];
#pragma GCC unroll 8
  for (int t = 0; t < kBases; ++t) base[t] = a + (kRows ? 3 * t * lda : 0);
#pragma GCC unroll 2
  for (int64_t q = 0; q < kq; ++q) {
    const __m512i b0 = _mm512_loadu_si512(b);
    const __m512i b1 = NV == 2 ? _mm512_loadu_si512(b + 64) : _mm512_setzero_si512();
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * NR * KG), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * NR * KG + 64), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const uint8_t* ai = kRows ? base[i / 3] + (i % 3) * lda : a + i * KG;
      const __m512i av = _mm512_set1_epi32(Load4(ai));
      acc0[i] = _mm512_dpbusd_epi32(acc0[i], av, b0);
      if (NV == 2) acc1[i] = _mm512_dpbusd_epi32(acc1[i], av, b1);
    }
    if (kRows) {
#pragma GCC unroll 8
      for (int t = 0; t < kBases; ++t) base[t] += KG;
    } else {
      a += MR * KG;
    }
    b += NR * KG;
  }
  const __mmask16 m0 = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  const __mmask16 m1 = n >= 32 ? __mmask16(0xFFFF) : n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    int32_t* ci = c + i * ldc;
    __m512i r0 = acc0[i], r1 = acc1[i];
    if (accumulate) {
      r0 = _mm512_add_epi32(r0, _mm512_maskz_loadu_epi32(m0, ci));
      if (NV == 2) r1 = _mm512_add_epi32(r1, _mm512_maskz_loadu_epi32(m1, ci + 16));
    }
    if (ep != nullptr) {
      r0 = Epilogue(r0, 0, m0, *ep);
      if (NV == 2) r1 = Epilogue(r1, 16, m1, *ep);
    }
    _mm512_mask_storeu_epi32(ci, m0, r0);
    if (NV == 2) _mm512_mask_storeu_epi32(ci + 16, m1, r1);
  }
}

template <int M>
void Tile(int64_t kq, const void* av, const void* bv, int32_t* c, int64_t ldc, int n, bool accumulate) {
  const uint8_t* a = static_cast<const uint8_t*>(av);
  const int8_t* b = static_cast<const int8_t*>(bv);
  if (n <= 16) return TileNV<M, 1, false>(kq, a, 0, b, c, ldc, n, accumulate, nullptr);
  TileNV<M, 2, false>(kq, a, 0, b, c, ldc, n, accumulate, nullptr);
}

template <int M>
void Rows(int64_t kq, const void* av, int64_t lda, const void* bv, int32_t* c, int64_t ldc, int n, bool accumulate,
          const FloatEpilogue* ep) {
  const uint8_t* a = static_cast<const uint8_t*>(av);
  const int8_t* b = static_cast<const int8_t*>(bv);
  if (n <= 16) return TileNV<M, 1, true>(kq, a, lda, b, c, ldc, n, accumulate, ep);
  TileNV<M, 2, true>(kq, a, lda, b, c, ldc, n, accumulate, ep);
}

template <int... Ms>
constexpr QKernels Make(std::integer_sequence<int, Ms...>) {
  return QKernels{"avx512vnni", MR, NR, KG, false, {&Tile<Ms + 1>...}, {&Rows<Ms + 1>...}};
}

const QKernels kKernels = Make(std::make_integer_sequence<int, MR>());

}  // namespace
}  // namespace vnni

const QKernels* VnniKernels() { return &vnni::kKernels; }

}  // namespace qgemm
}  // namespace opforge

#pragma GCC diagnostic pop
#pragma GCC pop_options

#else
namespace opforge {
namespace qgemm {
const QKernels* VnniKernels() { return nullptr; }
}  // namespace qgemm
}  // namespace opforge
#endif
