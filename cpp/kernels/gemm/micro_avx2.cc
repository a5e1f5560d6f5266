// AVX2+FMA microkernels: a 6 x 16 register tile (12 ymm accumulators, two B
// vectors, one broadcast), the classic Haswell shape. Compiled under a target
// pragma; called only when the CPU has AVX2 and FMA (see sgemm.cc).
#include <cstdint>
#include <utility>

#include "../simd_math.h"
#include "gemm.h"
#include "microkernel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma")
// simd_math.h's templates are instantiated here (see the -Wpsabi note there).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace opforge {
namespace gemm {
namespace avx2 {
namespace {

constexpr int MR = 6, NR = 16;

#include "pack_isa.inc"

constexpr int L = 8;
typedef float V __attribute__((vector_size(32)));
#include "gemv_isa.inc"

// Lane masks for the first n of 8 columns (maskload/maskstore).
inline __m256i Mask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

typedef float V8 __attribute__((vector_size(32)));

// The activations as vector_math's AVX2 loops compute them (GenericScale).
template <Activation kAct>
inline __attribute__((always_inline)) __m256 Activate(__m256 v) {
  if constexpr (kAct == Activation::kRelu) {
    return _mm256_max_ps(_mm256_setzero_ps(), v);  // NaN stays NaN (max returns its second operand)
  } else if constexpr (kAct == Activation::kSigmoid) {
    return (__m256)simd::Sigmoid<float, 32>((V8)v);
  } else if constexpr (kAct == Activation::kSilu) {
    return _mm256_mul_ps(v, (__m256)simd::Sigmoid<float, 32>((V8)v));
  } else if constexpr (static_cast<int>(kAct) == kTileHardSwish) {
    // As the conv kernels' pass (activate_isa.inc): x * min(max(x / 6 + 1/2, 0), 1).
    __m256 h = _mm256_fmadd_ps(v, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
    h = _mm256_min_ps(_mm256_max_ps(h, _mm256_setzero_ps()), _mm256_set1_ps(1.0f));
    return _mm256_mul_ps(v, h);
  } else if constexpr (kAct == Activation::kGelu) {
    return (__m256)simd::GeluErf<32>((V8)v);
  } else {
    return v;
  }
}

// The epilogue in registers, unrolled over the rows: the same steps, in the
// same order, as ApplyEpilogue's second pass (masked: lanes past n are never
// read or written).
template <int M, Activation kAct>
inline __attribute__((always_inline)) void Finish(const __m256* acc0, const __m256* acc1, float* c, int64_t ldc,
                                                  int n, float alpha, float beta, const TileEpilogue& ep) {
  // Full tiles load and store plainly (a masked store costs more on some cores).
  const bool full = n == NR;
  const __m256i k0 = Mask(n), k1 = Mask(n - 8);
  auto load0 = [&](const float* p) { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, k0); };
  auto load1 = [&](const float* p) { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, k1); };
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const bool has_bc = ep.bias_col != nullptr;
  const __m256 bc0 = has_bc ? load0(ep.bias_col) : _mm256_setzero_ps();
  const __m256 bc1 = has_bc ? load1(ep.bias_col + 8) : _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(va, acc0[i]), r1 = _mm256_mul_ps(va, acc1[i]);
    if (beta != 0.0f) {
      r0 = _mm256_fmadd_ps(vb, load0(ci), r0);
      r1 = _mm256_fmadd_ps(vb, load1(ci + 8), r1);
    }
    if (has_bc) r0 = _mm256_add_ps(r0, bc0), r1 = _mm256_add_ps(r1, bc1);  // no bias: -0 stays -0
    if (ep.bias_row != nullptr) {
      const __m256 br = _mm256_set1_ps(ep.bias_row[i]);
      r0 = _mm256_add_ps(r0, br), r1 = _mm256_add_ps(r1, br);
    }
    if (ep.residual_first) {  // residual non-null (the driver sets the flag only with one)
      const float* ri = ep.residual + i * ep.residual_ld;
      r0 = _mm256_add_ps(r0, load0(ri));
      r1 = _mm256_add_ps(r1, load1(ri + 8));
    }
    r0 = Activate<kAct>(r0), r1 = Activate<kAct>(r1);
    if (ep.residual != nullptr && !ep.residual_first) {
      const float* ri = ep.residual + i * ep.residual_ld;
      r0 = _mm256_add_ps(r0, load0(ri));
      r1 = _mm256_add_ps(r1, load1(ri + 8));
    }
    if (full) {
      _mm256_storeu_ps(ci, r0);
      _mm256_storeu_ps(ci + 8, r1);
    } else {
      _mm256_maskstore_ps(ci, k0, r0);
      _mm256_maskstore_ps(ci + 8, k1, r1);
    }
  }
}

// kPacked: a is a packed panel (a_rs = 1, a_cs = MR). ep: the epilogue
// applied in registers, or null.
template <int M, bool kPacked>
inline __attribute__((always_inline)) void Body(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                                                const float* b, int64_t b_ld, float* c, int64_t ldc, int n,
                                                float alpha, float beta, const TileEpilogue* ep) {
  if (kPacked) a_rs = 1, a_cs = MR;
  __m256 acc0[M], acc1[M];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i * a_rs);
      acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
    }
    a += a_cs;
    b += b_ld;
  }
  if (ep != nullptr) {
    switch (static_cast<Activation>(ep->activation)) {
      case Activation::kNone: Finish<M, Activation::kNone>(acc0, acc1, c, ldc, n, alpha, beta, *ep); break;
      case Activation::kRelu: Finish<M, Activation::kRelu>(acc0, acc1, c, ldc, n, alpha, beta, *ep); break;
      case Activation::kGelu: Finish<M, Activation::kGelu>(acc0, acc1, c, ldc, n, alpha, beta, *ep); break;
      case Activation::kSilu: Finish<M, Activation::kSilu>(acc0, acc1, c, ldc, n, alpha, beta, *ep); break;
      case Activation::kSigmoid: Finish<M, Activation::kSigmoid>(acc0, acc1, c, ldc, n, alpha, beta, *ep); break;
      default:  // kTileHardSwish
        Finish<M, static_cast<Activation>(kTileHardSwish)>(acc0, acc1, c, ldc, n, alpha, beta, *ep);
        break;
    }
    return;
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  if (n == NR) {
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      float* ci = c + i * ldc;
      __m256 r0 = _mm256_mul_ps(va, acc0[i]), r1 = _mm256_mul_ps(va, acc1[i]);
      if (beta != 0.0f) {
        r0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), r0);
        r1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), r1);
      }
      _mm256_storeu_ps(ci, r0);
      _mm256_storeu_ps(ci + 8, r1);
    }
    return;
  }
  const __m256i k0 = Mask(n), k1 = Mask(n - 8);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(va, acc0[i]), r1 = _mm256_mul_ps(va, acc1[i]);
    if (beta != 0.0f) {
      r0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci, k0), r0);
      r1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci + 8, k1), r1);
    }
    _mm256_maskstore_ps(ci, k0, r0);
    _mm256_maskstore_ps(ci + 8, k1, r1);
  }
}

template <int M, bool kPacked>
void Tile(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_ld,
          float* c, int64_t ldc, int n, float alpha, float beta) {
  Body<M, kPacked>(kc, a, a_rs, a_cs, b, b_ld, c, ldc, n, alpha, beta, nullptr);
}

template <int M, bool kPacked>
void TileEpi(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_ld,
             float* c, int64_t ldc, int n, float alpha, float beta, const TileEpilogue& ep) {
  Body<M, kPacked>(kc, a, a_rs, a_cs, b, b_ld, c, ldc, n, alpha, beta, &ep);
}

template <int... Ms>
constexpr Kernels Make(std::integer_sequence<int, Ms...>) {
  return Kernels{"avx2", MR, NR, {&Tile<Ms + 1, true>...}, {&Tile<Ms + 1, false>...}, &PackB<NR>, &GemvN, &GemvT,
                 {&TileEpi<Ms + 1, true>...}, {&TileEpi<Ms + 1, false>...}};
}

const Kernels kKernels = Make(std::make_integer_sequence<int, MR>());

}  // namespace
}  // namespace avx2

const Kernels* Avx2Kernels() { return &avx2::kKernels; }

}  // namespace gemm
}  // namespace opforge

#pragma GCC pop_options

#else
namespace opforge {
namespace gemm {
const Kernels* Avx2Kernels() { return nullptr; }
}  // namespace gemm
}  // namespace opforge
#endif
