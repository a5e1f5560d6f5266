// The typed fallback GEMM behind MatMul: integer types (wrapping, as unsigned
// arithmetic), and float/double when OpenBLAS is absent or cannot take the
// operands' strides. A cache-blocked, packed GEMM (BLIS-style loop nest) with
// a SIMD register-tile microkernel chosen at run time (AVX-512, AVX2+FMA or a
// portable 16-byte-vector version), and direct loops for thin products.
// Templates only: included by linalg_kernels.cc, which instantiates them.
// (float32 products normally run on sgemm.cc instead.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "opforge/parallel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_GEMM_X86 1
#endif

namespace opforge {
namespace typed_gemm {

// C[m, n] (row-major, contiguous) = A[m, k] * B[k, n]. Element (i, p) of A is
// a[i * rs_a + p * cs_a] and (p, j) of B is b[p * rs_b + j * cs_b], so
// transposed and 1-D operands need no copy. T is float, double or an unsigned
// integer (so integer products wrap without UB).
template <typename T>
struct GemmArgs {
  int64_t m, n, k;
  const T* a;
  int64_t rs_a, cs_a;
  const T* b;
  int64_t rs_b, cs_b;
  T* c;
};

// ---- microkernels ----------------------------------------------------------

template <typename T, int kBytes>
struct VecOf {
  typedef T type __attribute__((vector_size(kBytes)));
};

// c[MR, NV * lanes] (+)= sum over p < kc of a[p][MR] (outer) b[p][NV * lanes],
// from packed panels; the accumulators live in registers.
template <typename T, int kBytes, int MR, int NV>
__attribute__((always_inline)) inline void MicroBody(int64_t kc, const T* __restrict a,
                                                     const T* __restrict b, T* __restrict c,
                                                     int64_t ldc, bool accumulate) {
  using V = typename VecOf<T, kBytes>::type;
  constexpr int L = kBytes / sizeof(T);
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = V{};
  for (int64_t p = 0; p < kc; ++p) {
    V bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = *reinterpret_cast<const V*>(b + j * L);
    for (int i = 0; i < MR; ++i) {
      const T ai = a[i];
      for (int j = 0; j < NV; ++j) acc[i][j] += bv[j] * ai;
    }
    a += MR;
    b += NV * L;
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NV; ++j) {
      T* cp = c + i * ldc + j * L;
      V v = acc[i][j];
      if (accumulate) {
        V old;
        std::memcpy(&old, cp, sizeof(V));
        v += old;
      }
      std::memcpy(cp, &v, sizeof(V));
    }
  }
}

template <typename T>
using MicroFn = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool accumulate);

template <typename T, int kBytes, int MR, int NV>
void MicroBase(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool accumulate) {
  MicroBody<T, kBytes, MR, NV>(kc, a, b, c, ldc, accumulate);
}

#ifdef OF_GEMM_X86
template <typename T, int kBytes, int MR, int NV>
__attribute__((target("avx2,fma"))) void MicroAvx2(int64_t kc, const T* a, const T* b, T* c,
                                                   int64_t ldc, bool accumulate) {
  MicroBody<T, kBytes, MR, NV>(kc, a, b, c, ldc, accumulate);
}
template <typename T, int kBytes, int MR, int NV>
__attribute__((target("avx512f"))) void MicroAvx512(int64_t kc, const T* a, const T* b, T* c,
                                                    int64_t ldc, bool accumulate) {
  MicroBody<T, kBytes, MR, NV>(kc, a, b, c, ldc, accumulate);
}
#endif

constexpr int kMaxMR = 12, kMaxNR = 32;

template <typename T>
struct Micro {
  int mr, nr;
  MicroFn<T> fn;
};

template <typename T>
Micro<T> SelectMicro() {
#ifdef OF_GEMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    return {12, static_cast<int>(128 / sizeof(T)), MicroAvx512<T, 64, 12, 2>};
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {6, static_cast<int>(64 / sizeof(T)), MicroAvx2<T, 32, 6, 2>};
  }
#endif
  return {4, static_cast<int>(32 / sizeof(T)), MicroBase<T, 16, 4, 2>};
}

template <typename T>
const Micro<T>& GetMicro() {
  static const Micro<T> micro = SelectMicro<T>();
  return micro;
}

// ---- packing ---------------------------------------------------------------

// Per-thread scratch, 64-byte aligned; only the vector object lives in TLS.
template <typename T>
T* Scratch(std::vector<unsigned char>* buf, int64_t count) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(T) + 64;
  if (buf->size() < bytes) buf->resize(bytes);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf->data());
  return reinterpret_cast<T*>((p + 63) & ~static_cast<uintptr_t>(63));
}

// Packs a kc x w micro-panel: dst[p * w + c] = src[p * s_k + c * s_w] for the
// `valid` first columns c, zeros in the rest (so edge tiles run full width).
template <typename T>
void PackPanel(const T* src, int64_t s_w, int64_t s_k, int64_t valid, int w, int64_t kc,
               T* __restrict dst) {
  if (s_w == 1 && valid == w) {
    for (int64_t p = 0; p < kc; ++p) {
      const T* s = src + p * s_k;
      for (int c = 0; c < w; ++c) dst[p * w + c] = s[c];
    }
    return;
  }
  if (s_k == 1) {
    for (int64_t c = 0; c < valid; ++c) {
      const T* s = src + c * s_w;
      for (int64_t p = 0; p < kc; ++p) dst[p * w + c] = s[p];
    }
  } else {
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t c = 0; c < valid; ++c) dst[p * w + c] = src[p * s_k + c * s_w];
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    for (int64_t c = valid; c < w; ++c) dst[p * w + c] = T(0);
  }
}

// ---- packed GEMM driver ----------------------------------------------------

constexpr int64_t kKC = 256;      // depth of a packed panel
constexpr int64_t kMCPanels = 8;  // A block = kMCPanels * mr rows (stays in L2)
constexpr int64_t kNCPanels = 128;  // B panel = kNCPanels * nr columns (stays in L3)

template <typename T>
void GemmPacked(const GemmArgs<T>& g, bool parallel) {
  const Micro<T>& mk = GetMicro<T>();
  const int mr = mk.mr, nr = mk.nr;
  const int64_t MC = mr * kMCPanels, NC = nr * kNCPanels;
  const int64_t m = g.m, n = g.n, k = g.k;
  static thread_local std::vector<unsigned char> b_buf;
  const int64_t nc_max = (std::min(n, NC) + nr - 1) / nr * nr;
  T* bpack = Scratch<T>(&b_buf, nc_max * std::min(k, kKC));
  const int64_t mblocks = (m + MC - 1) / MC;
  const int threads = parallel ? NumIntraOpThreads() : 1;

  for (int64_t jc = 0; jc < n; jc += NC) {
    const int64_t nc = std::min(NC, n - jc);
    const int64_t npanels = (nc + nr - 1) / nr;
    // Few row blocks: also split the columns so every thread has work.
    int64_t nsplit = 1;
    if (mblocks < 2 * threads) nsplit = std::min(npanels, (2 * threads + mblocks - 1) / mblocks);
    const int64_t per_split = (npanels + nsplit - 1) / nsplit;
    nsplit = (npanels + per_split - 1) / per_split;

    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const bool accumulate = pc > 0;
      auto pack_b = [&](int64_t q0, int64_t q1) {
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t j0 = jc + q * nr;
          PackPanel(g.b + pc * g.rs_b + j0 * g.cs_b, g.cs_b, g.rs_b, std::min<int64_t>(nr, n - j0),
                    nr, kc, bpack + q * kc * nr);
        }
      };
      if (parallel) {
        ParallelFor(npanels, kc * nr, pack_b);
      } else {
        pack_b(0, npanels);
      }

      auto compute = [&](int64_t u0, int64_t u1) {
        static thread_local std::vector<unsigned char> a_buf;
        T* apack = Scratch<T>(&a_buf, MC * kc);
        alignas(64) T tmp[kMaxMR * kMaxNR];
        int64_t packed_block = -1;
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t mb = u / nsplit, split = u % nsplit;
          const int64_t ic = mb * MC, mc = std::min(MC, m - ic);
          if (packed_block != mb) {
            for (int64_t ir = 0; ir < mc; ir += mr) {
              PackPanel(g.a + (ic + ir) * g.rs_a + pc * g.cs_a, g.rs_a, g.cs_a,
                        std::min<int64_t>(mr, mc - ir), mr, kc, apack + ir * kc);
            }
            packed_block = mb;
          }
          const int64_t q_end = std::min(npanels, (split + 1) * per_split);
          for (int64_t q = split * per_split; q < q_end; ++q) {
            const int64_t jr = q * nr, nrv = std::min<int64_t>(nr, nc - jr);
            const T* bp = bpack + q * kc * nr;
            for (int64_t ir = 0; ir < mc; ir += mr) {
              const int64_t mrv = std::min<int64_t>(mr, mc - ir);
              T* cp = g.c + (ic + ir) * n + jc + jr;
              if (mrv == mr && nrv == nr) {
                mk.fn(kc, apack + ir * kc, bp, cp, n, accumulate);
                continue;
              }
              mk.fn(kc, apack + ir * kc, bp, tmp, nr, false);
              for (int64_t i = 0; i < mrv; ++i) {
                for (int64_t j = 0; j < nrv; ++j) {
                  cp[i * n + j] = accumulate ? cp[i * n + j] + tmp[i * nr + j] : tmp[i * nr + j];
                }
              }
            }
          }
        }
      };
      const int64_t units = mblocks * nsplit;
      if (parallel) {
        ParallelFor(units, MC * kc * per_split * nr * 2, compute);
      } else {
        compute(0, units);
      }
    }
  }
}

// ---- direct loops for thin products (m == 1, n == 1 or tiny) ----------------

template <typename T>
void GemmDirect(const GemmArgs<T>& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const int64_t k = g.k;
  for (int64_t i = i0; i < i1; ++i) {
    T* __restrict ci = g.c + i * g.n;
    const T* ai = g.a + i * g.rs_a;
    if (j1 - j0 == 1) {  // dot product; independent partial sums pipeline well
      const T* bj = g.b + j0 * g.cs_b;
      T s[8] = {};
      int64_t p = 0;
      for (; p + 8 <= k; p += 8) {
        for (int u = 0; u < 8; ++u) s[u] += ai[(p + u) * g.cs_a] * bj[(p + u) * g.rs_b];
      }
      for (; p < k; ++p) s[0] += ai[p * g.cs_a] * bj[p * g.rs_b];
      ci[j0] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
      continue;
    }
    for (int64_t j = j0; j < j1; ++j) ci[j] = T(0);
    for (int64_t p = 0; p < k; ++p) {
      const T av = ai[p * g.cs_a];
      const T* __restrict bp = g.b + p * g.rs_b;
      if (g.cs_b == 1) {
        for (int64_t j = j0; j < j1; ++j) ci[j] += av * bp[j];
      } else {
        for (int64_t j = j0; j < j1; ++j) ci[j] += av * bp[j * g.cs_b];
      }
    }
  }
}

}  // namespace typed_gemm
}  // namespace opforge
