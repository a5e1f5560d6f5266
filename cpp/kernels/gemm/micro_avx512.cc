// AVX-512 microkernels: a 12 x 32 register tile (24 zmm accumulators, two
// B vectors, one broadcast), so both 512-bit FMA pipes of Zen 4/5 and
// Skylake-X stay busy. Compiled under a target pragma; the driver calls it
// only when the CPU has AVX-512 (see sgemm.cc).
#include <algorithm>
#include <cstdint>
#include <utility>

#include "../simd_math.h"
#include "gemm.h"
#include "microkernel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")
// simd_math.h's templates are instantiated here (see the -Wpsabi note there).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace opforge {
namespace gemm {
namespace avx512 {
namespace {

constexpr int MR = 12, NR = 32;
// Depth steps before the end of a packed tile's loop at which C's tile is
// fetched into L1 (about 200 cycles: an L2 hit, with room to spare).
constexpr int64_t kPrefetchCDepth = 16;

#include "pack_isa.inc"

constexpr int L = 16;
typedef float V __attribute__((vector_size(64)));
#include "gemv_isa.inc"

// vscalef for simd::Exp's 2^n, as vector_math's AVX-512 loops use it, so
// the activations here round exactly as the standalone ops'. Not
// always_inline (see simd::GenericScale).
struct Scalef {
  static inline V Apply(const V& p, const V& n, const V&) {
    return (V)_mm512_maskz_scalef_ps(__mmask16(0xFFFF), (__m512)p, (__m512)n);
  }
};

template <Activation kAct>
inline __attribute__((always_inline)) __m512 Activate(__m512 v) {
  if constexpr (kAct == Activation::kRelu) {
    return _mm512_maskz_max_ps(__mmask16(0xFFFF), _mm512_setzero_ps(), v);  // NaN stays NaN (max returns its second operand)
  } else if constexpr (kAct == Activation::kSigmoid) {
    return (__m512)simd::Sigmoid<float, 64, Scalef>((V)v);
  } else if constexpr (kAct == Activation::kSilu) {
    return _mm512_mul_ps(v, (__m512)simd::Sigmoid<float, 64, Scalef>((V)v));
  } else if constexpr (static_cast<int>(kAct) == kTileHardSwish) {
    // As the conv kernels' pass (activate_isa.inc): x * min(max(x / 6 + 1/2, 0), 1).
    __m512 h = _mm512_fmadd_ps(v, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
    h = _mm512_maskz_max_ps(__mmask16(0xFFFF), h, _mm512_setzero_ps());  // maskz: see Transpose16
    h = _mm512_maskz_min_ps(__mmask16(0xFFFF), h, _mm512_set1_ps(1.0f));
    return _mm512_mul_ps(v, h);
  } else if constexpr (kAct == Activation::kGelu) {
    return (__m512)simd::GeluErf<64, Scalef>((V)v);
  } else {
    return v;
  }
}

// The epilogue in registers, unrolled over the rows so the accumulators
// never leave them: the same steps, in the same order, as ApplyEpilogue's
// second pass over a stored tile.
template <int M, Activation kAct>
inline __attribute__((always_inline)) void Finish(const __m512* acc0, const __m512* acc1, float* c, int64_t ldc,
                                                  __mmask16 m0, __mmask16 m1, float alpha, float beta,
                                                  const TileEpilogue& ep) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const bool has_bc = ep.bias_col != nullptr;
  const __m512 bc0 = has_bc ? _mm512_maskz_loadu_ps(m0, ep.bias_col) : _mm512_setzero_ps();
  const __m512 bc1 = has_bc ? _mm512_maskz_loadu_ps(m1, ep.bias_col + 16) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
    __m512 r0 = _mm512_mul_ps(va, acc0[i]), r1 = _mm512_mul_ps(va, acc1[i]);
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), r1);
    }
    if (has_bc) r0 = _mm512_add_ps(r0, bc0), r1 = _mm512_add_ps(r1, bc1);  // no bias: -0 stays -0
    if (ep.bias_row != nullptr) {
      const __m512 br = _mm512_set1_ps(ep.bias_row[i]);
      r0 = _mm512_add_ps(r0, br), r1 = _mm512_add_ps(r1, br);
    }
    if (ep.residual_first) {  // residual non-null (the driver sets the flag only with one)
      const float* ri = ep.residual + i * ep.residual_ld;
      r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, ri));
      r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, ri + 16));
    }
    r0 = Activate<kAct>(r0), r1 = Activate<kAct>(r1);
    if (ep.residual != nullptr && !ep.residual_first) {
      const float* ri = ep.residual + i * ep.residual_ld;
      r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, ri));
      r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, ri + 16));
    }
    _mm512_mask_storeu_ps(ci, m0, r0);
    _mm512_mask_storeu_ps(ci + 16, m1, r1);
  }
}

// kPacked: a is a packed panel (a_rs = 1, a_cs = MR), so the row offsets are
// compile-time constants. kBInPlace: B's rows are read in place (a strided
// stream, prefetched ahead). ep: the epilogue applied in registers, or null.
template <int M, bool kPacked, bool kBInPlace = !kPacked>
inline __attribute__((always_inline)) void Body(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                                                const float* b, int64_t b_ld, float* c, int64_t ldc, int n,
                                                float alpha, float beta, const TileEpilogue* ep) {
  if (kPacked) a_rs = 1, a_cs = MR;
  __m512 acc0[M], acc1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  // C's tile is read (beta != 0) or written only after the FMAs, too late
  // for out-of-order execution to hide a miss: in a large product it comes
  // from L3 (each kc block of depth re-reads all of C), and L3 is far on a
  // mesh (Intel Sapphire Rapids). Fetch it into L2 now, into L1 near the end
  // (its rows, ldc apart, often share one L1 set and would not stay there).
  if (kPacked) {
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + n - 1), _MM_HINT_T1);
    }
  }
  const int64_t k_main = kPacked ? std::max<int64_t>(kc - kPrefetchCDepth, 0) : kc;
  auto steps = [&](int64_t count) __attribute__((always_inline)) {
#pragma GCC unroll 2
    for (int64_t p = 0; p < count; ++p) {
      const __m512 b0 = _mm512_loadu_ps(b);
      const __m512 b1 = _mm512_loadu_ps(b + 16);
      // B read in place (small M) is a strided stream: fetch both lines ahead.
      if (kBInPlace) {
        _mm_prefetch(reinterpret_cast<const char*>(b + 8 * b_ld), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(b + 8 * b_ld + 16), _MM_HINT_T0);
      }
#pragma GCC unroll 16
      for (int i = 0; i < M; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i * a_rs]);
        acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
        acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
      }
      a += a_cs;
      b += b_ld;
    }
  };
  steps(k_main);
  if (kPacked) {
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + n - 1), _MM_HINT_T0);
    }
  }
  steps(kc - k_main);
  const __mmask16 m0 = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  const __mmask16 m1 = n >= 32 ? __mmask16(0xFFFF) : n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
  const __m512 va = _mm512_set1_ps(alpha);
  if (ep == nullptr) {
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
    return;
  }
  switch (static_cast<Activation>(ep->activation)) {
    case Activation::kNone: Finish<M, Activation::kNone>(acc0, acc1, c, ldc, m0, m1, alpha, beta, *ep); break;
    case Activation::kRelu: Finish<M, Activation::kRelu>(acc0, acc1, c, ldc, m0, m1, alpha, beta, *ep); break;
    case Activation::kGelu: Finish<M, Activation::kGelu>(acc0, acc1, c, ldc, m0, m1, alpha, beta, *ep); break;
    case Activation::kSilu: Finish<M, Activation::kSilu>(acc0, acc1, c, ldc, m0, m1, alpha, beta, *ep); break;
    case Activation::kSigmoid: Finish<M, Activation::kSigmoid>(acc0, acc1, c, ldc, m0, m1, alpha, beta, *ep); break;
    default:  // kTileHardSwish
      Finish<M, static_cast<Activation>(kTileHardSwish)>(acc0, acc1, c, ldc, m0, m1, alpha, beta, *ep);
      break;
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

// A packed panel, B's rows read in place (small_m.cc's taller row tiles).
template <int M>
void TileAB(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_ld,
            float* c, int64_t ldc, int n, float alpha, float beta) {
  Body<M, true, true>(kc, a, a_rs, a_cs, b, b_ld, c, ldc, n, alpha, beta, nullptr);
}

template <int M>
void TileABEpi(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_ld,
               float* c, int64_t ldc, int n, float alpha, float beta, const TileEpilogue& ep) {
  Body<M, true, true>(kc, a, a_rs, a_cs, b, b_ld, c, ldc, n, alpha, beta, &ep);
}

// A transposed B (a weight stored [N, K], rs == 1) for a full panel: 16 x 16
// blocks transposed in registers (the maskz forms avoid GCC 12's bogus
// -Wuninitialized on the plain ones). The generic PackB moves one float per load
// and store (6% of a 784-1024-1024-10 training step on 2 threads); one
// thread, CPU time, against numpy: M = 16, K = 768, N = 3072 1.14-1.28x ->
// 1.33-1.48x, M = 64, K = 784, N = 512 1.13-1.23x -> 1.31-1.32x.
// out[p] lane j = r[j] lane p: a 16 x 16 transpose in registers.
inline __attribute__((always_inline)) void Transpose16Regs(const __m512* r, __m512* out) {
  __m512 u[16];
#pragma GCC unroll 4
  for (int g = 0; g < 16; g += 4) {  // rows g..g+3: u[g + c] lane L holds depth 4L + c of those columns
    const __m512 t0 = _mm512_maskz_unpacklo_ps(__mmask16(0xFFFF), r[g], r[g + 1]), t1 = _mm512_maskz_unpackhi_ps(__mmask16(0xFFFF), r[g], r[g + 1]);
    const __m512 t2 = _mm512_maskz_unpacklo_ps(__mmask16(0xFFFF), r[g + 2], r[g + 3]), t3 = _mm512_maskz_unpackhi_ps(__mmask16(0xFFFF), r[g + 2], r[g + 3]);
    u[g] = _mm512_shuffle_ps(t0, t2, 0x44), u[g + 1] = _mm512_shuffle_ps(t0, t2, 0xEE);
    u[g + 2] = _mm512_shuffle_ps(t1, t3, 0x44), u[g + 3] = _mm512_shuffle_ps(t1, t3, 0xEE);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512 v = _mm512_maskz_shuffle_f32x4(__mmask16(0xFFFF), u[c], u[4 + c], 0x88), w = _mm512_maskz_shuffle_f32x4(__mmask16(0xFFFF), u[c], u[4 + c], 0xDD);
    const __m512 x = _mm512_maskz_shuffle_f32x4(__mmask16(0xFFFF), u[8 + c], u[12 + c], 0x88), y = _mm512_maskz_shuffle_f32x4(__mmask16(0xFFFF), u[8 + c], u[12 + c], 0xDD);
    out[0 + c] = _mm512_maskz_shuffle_f32x4(__mmask16(0xFFFF), v, x, 0x88);
    out[4 + c] = _mm512_maskz_shuffle_f32x4(__mmask16(0xFFFF), w, y, 0x88);
    out[8 + c] = _mm512_maskz_shuffle_f32x4(__mmask16(0xFFFF), v, x, 0xDD);
    out[12 + c] = _mm512_maskz_shuffle_f32x4(__mmask16(0xFFFF), w, y, 0xDD);
  }
}

inline void Transpose16(const float* src, int64_t cs, float* dst) {
  __m512 r[16], out[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(src + j * cs);
  Transpose16Regs(r, out);
#pragma GCC unroll 16
  for (int p = 0; p < 16; ++p) _mm512_storeu_ps(dst + p * NR, out[p]);
}

// One A panel from a row-major A (cs == 1): 16 depths of its m <= 16 rows
// transposed in registers, each depth stored as mr lanes. The scalar
// PackA moved one float per load and store: 4 % of the samples of a
// 2048^3 product on one thread (Sapphire Rapids), as much as packing B.
void PackAPanel(const float* src, int64_t rs, int64_t cs, int64_t m, int64_t kc, int mr, float* dst) {
  const int64_t kv = cs == 1 && m <= 16 && mr <= 16 ? kc / 16 * 16 : 0;
  const __mmask16 keep = __mmask16((1u << mr) - 1);
  for (int64_t p = 0; p < kv; p += 16) {
    __m512 r[16], out[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = i < m ? _mm512_loadu_ps(src + i * rs + p) : _mm512_setzero_ps();
    Transpose16Regs(r, out);
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) _mm512_mask_storeu_ps(dst + (p + q) * mr, keep, out[q]);
  }
  for (int64_t p = kv; p < kc; ++p) {
    for (int64_t i = 0; i < m; ++i) dst[p * mr + i] = src[i * rs + p * cs];
  }
}

void PackBPanel(const float* src, int64_t rs, int64_t cs, int64_t n, int64_t kc, float* dst) {
  if (rs != 1 || n != NR || cs == 1 || kc < 16) {
    PackB<NR>(src, rs, cs, n, kc, dst);
    return;
  }
  const int64_t kv = kc / 16 * 16;
  for (int64_t p = 0; p < kv; p += 16) {
    Transpose16(src + p, cs, dst + p * NR);
    Transpose16(src + 16 * cs + p, cs, dst + p * NR + 16);
  }
  if (kv < kc) PackB<NR>(src + kv, rs, cs, n, kc - kv, dst + kv * NR);
}

template <int... Ms>
constexpr Kernels Make(std::integer_sequence<int, Ms...>) {
  return Kernels{"avx512", MR, NR, {&Tile<Ms + 1, true>...}, {&Tile<Ms + 1, false>...}, &PackBPanel, &GemvN, &GemvT,
                 {&TileEpi<Ms + 1, true>...}, {&TileEpi<Ms + 1, false>...}, &PackAPanel,
                 {&TileAB<Ms + 1>...}, {&TileABEpi<Ms + 1>...}};
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
