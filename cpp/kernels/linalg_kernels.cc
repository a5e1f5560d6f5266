// MatMul kernels: small-M float32 products run on opforge's own GEMM
// (cpp/kernels/gemm/; Route() below says which), larger ones and float64 on
// OpenBLAS (blas_loader.h); for integer types (or without OpenBLAS) a
// cache-blocked, packed GEMM
// (BLIS-style loop nest) with a SIMD register-tile microkernel chosen at run
// time (AVX-512, AVX2+FMA or a portable 16-byte-vector version); direct
// loops for thin products.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "blas_loader.h"
#include "gemm/gemm.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_GEMM_X86 1
#endif

namespace opforge {
namespace {

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

// OpenBLAS for float and double, when each operand is row- or column-major
// (transposes need no copy). A parallel product goes whole to the BLAS numpy
// loaded (it threads itself, on the pool numpy's matmul keeps awake) unless
// that would use more threads than opforge may; otherwise rows of C split
// over the intra-op pool, one single-threaded call of opforge's own BLAS per
// chunk (blas_loader.h). False: not handled here.
template <typename T>
bool GemmBlas(const GemmArgs<T>& g, bool parallel) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return false;
  } else {
    const blas::Library* shared = blas::Shared();
    const blas::Library* lib = nullptr;
    bool whole = false;
    if (parallel && shared != nullptr && shared->num_threads() <= NumIntraOpThreads()) {
      lib = shared, whole = true;
    } else if ((lib = blas::Private()) == nullptr) {
      // Without a private copy, the shared BLAS in a pool worker (batched
      // products) is still far faster than the built-in GEMM.
      if (parallel || shared == nullptr) return false;
      lib = shared, whole = true;
    }
    bool ta, tb;
    int64_t lda, ldb;
    if (g.cs_a == 1 && g.rs_a >= std::max<int64_t>(g.k, 1)) {
      ta = false, lda = g.rs_a;
    } else if (g.rs_a == 1 && g.cs_a >= std::max<int64_t>(g.m, 1)) {
      ta = true, lda = g.cs_a;
    } else {
      return false;
    }
    if (g.cs_b == 1 && g.rs_b >= std::max<int64_t>(g.n, 1)) {
      tb = false, ldb = g.rs_b;
    } else if (g.rs_b == 1 && g.cs_b >= std::max<int64_t>(g.k, 1)) {
      tb = true, ldb = g.cs_b;
    } else {
      return false;
    }
    const int64_t kMax = lib->max_dim;
    if (g.m > kMax || g.n > kMax || g.k > kMax || lda > kMax || ldb > kMax) return false;
    auto rows = [&](int64_t i0, int64_t i1) {
      if constexpr (std::is_same_v<T, float>) {
        lib->sgemm(ta, tb, i1 - i0, g.n, g.k, g.a + i0 * g.rs_a, lda, g.b, ldb, g.c + i0 * g.n, g.n);
      } else {
        lib->dgemm(ta, tb, i1 - i0, g.n, g.k, g.a + i0 * g.rs_a, lda, g.b, ldb, g.c + i0 * g.n, g.n);
      }
    };
    if (parallel && !whole) {
      // A SIMD FMA costs ~1/16 of a ParallelFor "cheap op"; below ~90^3 the
      // product runs inline rather than wake the pool.
      ParallelFor(g.m, std::max<int64_t>(g.n * g.k / 8, 1), rows);
    } else {
      rows(0, g.m);
    }
    return true;
  }
}

// Smaller products take the direct loops (less call overhead than BLAS).
constexpr int64_t kBlasMinFlops = 8 * 8 * 8;

// Which float32 products take our GEMM (cpp/kernels/gemm/): all of them by
// default. Its two-thread deficit at n = 256-1024 and M = 128 (0.56-0.91x
// numpy in bench.gemm_table) was numpy's OpenBLAS workers, which busy-wait
// about 0.1 s after each call, sharing the cores with our threads (the bench
// ran ours right after numpy): measured apart (the bench now lets them settle
// first) ours runs 1.0-1.6x numpy there with two threads, and 1.9-2.0x numpy's
// one-thread speed. OPFORGE_SGEMM=openblas sends every product with M > 1 to
// OpenBLAS, =small only those with M > 64 (the routing before).
enum class SgemmRoute { kSmallM, kOwn, kOpenBlas };
SgemmRoute Route() {
  static const SgemmRoute route = [] {
    const char* e = std::getenv("OPFORGE_SGEMM");
    if (e != nullptr && std::strcmp(e, "small") == 0) return SgemmRoute::kSmallM;
    if (e != nullptr && std::strcmp(e, "openblas") == 0) return SgemmRoute::kOpenBlas;
    return SgemmRoute::kOwn;
  }();
  return route;
}
constexpr int64_t kOwnSgemmMaxM = 64;

bool OwnSgemm(int64_t m) {
  const SgemmRoute r = Route();
  return r == SgemmRoute::kOwn || (r == SgemmRoute::kSmallM && m <= kOwnSgemmMaxM);
}

template <typename T>
void Gemm(const GemmArgs<T>& g, bool parallel) {
  if constexpr (std::is_same_v<T, float>) {
    if (OwnSgemm(g.m)) {
      gemm::StridedArgs s{g.m, g.n, g.k, 1.0f, g.a, g.rs_a, g.cs_a, g.b, g.rs_b, g.cs_b, 0.0f, g.c, g.n};
      gemm::SgemmStrided(s, gemm::Epilogue(), parallel);
      return;
    }
  }
  const int64_t flops = g.m * g.n * g.k;
  if (g.k == 0) {
    std::memset(static_cast<void*>(g.c), 0, g.m * g.n * sizeof(T));
    return;
  }
  if (g.m > 1 && g.n > 1 && flops >= kBlasMinFlops && GemmBlas(g, parallel)) return;
  if (g.m == 1 || g.n == 1 || flops < 24 * 24 * 24) {
    if (!parallel) {
      GemmDirect(g, 0, g.m, 0, g.n);
    } else if (g.m == 1) {
      ParallelFor(g.n, 2 * g.k, [&](int64_t j0, int64_t j1) { GemmDirect(g, 0, 1, j0, j1); });
    } else {
      ParallelFor(g.m, 2 * g.k * g.n, [&](int64_t i0, int64_t i1) {
        GemmDirect(g, i0, i1, 0, g.n);
      });
    }
    return;
  }
  GemmPacked(g, parallel);
}

// ---- the MatMul kernel -------------------------------------------------------

template <typename T>
struct Compute {
  using type = T;
};
template <> struct Compute<int32_t> { using type = uint32_t; };
template <> struct Compute<int64_t> { using type = uint64_t; };
template <typename T>
using ComputeType = typename Compute<T>::type;

template <typename T>
Status MatMulKernel(OpKernelContext* ctx) {
  using U = ComputeType<T>;
  const Tensor& a = ctx->input(0);
  const Tensor& b = ctx->input(1);
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (out->NumElements() == 0) return Status::OK();
  const int ra = a.rank(), rb = b.rank();
  const bool ta = ctx->attr_bool("transpose_a") && ra >= 2;
  const bool tb = ctx->attr_bool("transpose_b") && rb >= 2;

  GemmArgs<U> g;
  int64_t a_mat, b_mat;
  if (ra == 1) {
    g.m = 1, g.k = a.dim(0), g.rs_a = 0, g.cs_a = 1, a_mat = g.k;
  } else {
    const int64_t rows = a.dim(ra - 2), cols = a.dim(ra - 1);
    g.m = ta ? cols : rows, g.k = ta ? rows : cols;
    g.rs_a = ta ? 1 : cols, g.cs_a = ta ? cols : 1;
    a_mat = rows * cols;
  }
  if (rb == 1) {
    g.n = 1, g.rs_b = 1, g.cs_b = 0, b_mat = b.dim(0);
  } else {
    const int64_t rows = b.dim(rb - 2), cols = b.dim(rb - 1);
    g.n = tb ? rows : cols;
    g.rs_b = tb ? 1 : cols, g.cs_b = tb ? cols : 1;
    b_mat = rows * cols;
  }

  // Batch axes of the output, and each operand's stride along them (0 where
  // it broadcasts).
  const TensorShape& os = out->shape();
  const int br = os.rank() - (ra >= 2) - (rb >= 2);
  int64_t a_bs[kMaxRank] = {}, b_bs[kMaxRank] = {};
  int64_t batch = 1;
  for (int i = 0; i < br; ++i) batch *= os.dim(i);
  for (int i = ra - 3, s = 0; i >= 0; --i, ++s) {
    a_bs[br - 1 - s] = a.dim(i) == 1 ? 0 : a_mat;
    a_mat *= a.dim(i);
  }
  for (int i = rb - 3, s = 0; i >= 0; --i, ++s) {
    b_bs[br - 1 - s] = b.dim(i) == 1 ? 0 : b_mat;
    b_mat *= b.dim(i);
  }
  const U* a_data = reinterpret_cast<const U*>(a.data<T>());
  const U* b_data = reinterpret_cast<const U*>(b.data<T>());
  U* c_data = reinterpret_cast<U*>(out->data<T>());
  const int64_t c_mat = g.m * g.n;

  // The operands of batch element t (decomposed over the output batch axes).
  auto batch_args = [&](int64_t t) {
    GemmArgs<U> gb = g;
    gb.a = a_data;
    gb.b = b_data;
    gb.c = c_data + t * c_mat;
    for (int i = br - 1; i >= 0; --i) {
      const int64_t idx = t % os.dim(i);
      t /= os.dim(i);
      gb.a += idx * a_bs[i];
      gb.b += idx * b_bs[i];
    }
    return gb;
  };
  // A stack of untransposed matrices times one matrix is one tall product.
  if (batch > 1 && rb <= 2 && ra >= 3 && !ta) {
    g.m *= batch;
    batch = 1;
  }
  const int64_t flops = g.m * g.n * std::max<int64_t>(g.k, 1);
  if (batch > 1 && flops < 128 * 128 * 128) {
    ParallelFor(batch, 2 * flops, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        Gemm(batch_args(t), false);
      }
    });
  } else {
    for (int64_t t = 0; t < batch; ++t) {
      Gemm(batch_args(t), true);
    }
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("MatMul", kCPU, DType::kFloat32, MatMulKernel<float>);
REGISTER_KERNEL("MatMul", kCPU, DType::kFloat64, MatMulKernel<double>);
REGISTER_KERNEL("MatMul", kCPU, DType::kInt32, MatMulKernel<int32_t>);
REGISTER_KERNEL("MatMul", kCPU, DType::kInt64, MatMulKernel<int64_t>);

}  // namespace opforge

// ---- the MatMulGrad kernel ---------------------------------------------------
//
// For one batch element, with op(A) [m, k], op(B) [k, n] and G [m, n]:
//   grad op(A) = G op(B)^T      (grad A = op(B) G^T when transpose_a)
//   grad op(B) = op(A)^T G      (grad B = G^T op(A) when transpose_b)
// Every factor is a strided view of a, b or grad, so each product is one Gemm
// call with no copies. Broadcast batch elements accumulate into one slice.

namespace opforge {
namespace {

// Gemm of one batch element into `dst` (a slice of rows x cols), or added to
// it through `tmp` when the slice also receives other batch elements.
template <typename T>
void GemmInto(GemmArgs<T> g, T* dst, bool accumulate, T* tmp, bool parallel) {
  if (!accumulate) {
    g.c = dst;
    Gemm(g, parallel);
    return;
  }
  g.c = tmp;
  Gemm(g, parallel);
  const int64_t count = g.m * g.n;
  for (int64_t i = 0; i < count; ++i) dst[i] += tmp[i];
}

template <typename T>
Status MatMulGradKernel(OpKernelContext* ctx) {
  const Tensor& a = ctx->input(0);
  const Tensor& b = ctx->input(1);
  const Tensor& grad = ctx->input(2);
  Tensor* grad_a;
  Tensor* grad_b;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &grad_a));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &grad_b));
  const int ra = a.rank(), rb = b.rank();
  const bool ta = ctx->attr_bool("transpose_a") && ra >= 2;
  const bool tb = ctx->attr_bool("transpose_b") && rb >= 2;
  // A gradient not asked for is zeros (a memset, not a GEMM).
  const bool want_a = ctx->attr_bool("compute_grad_a");
  const bool want_b = ctx->attr_bool("compute_grad_b");

  // op(A)(i, p) = a[i * rs_a + p * cs_a], op(B)(p, j) = b[p * rs_b + j * cs_b],
  // as in MatMulKernel.
  int64_t m, k, n, rs_a, cs_a, rs_b, cs_b, a_mat, b_mat;
  if (ra == 1) {
    m = 1, k = a.dim(0), rs_a = 0, cs_a = 1, a_mat = k;
  } else {
    const int64_t rows = a.dim(ra - 2), cols = a.dim(ra - 1);
    m = ta ? cols : rows, k = ta ? rows : cols;
    rs_a = ta ? 1 : cols, cs_a = ta ? cols : 1;
    a_mat = rows * cols;
  }
  if (rb == 1) {
    n = 1, rs_b = 1, cs_b = 0, b_mat = b.dim(0);
  } else {
    const int64_t rows = b.dim(rb - 2), cols = b.dim(rb - 1);
    n = tb ? rows : cols;
    rs_b = tb ? 1 : cols, cs_b = tb ? cols : 1;
    b_mat = rows * cols;
  }
  // Output batch axes, and each operand's slice stride along them (0 where it
  // broadcasts or lacks the axis).
  const int br = grad.rank() - (ra >= 2) - (rb >= 2);
  int64_t a_bs[kMaxRank] = {}, b_bs[kMaxRank] = {}, batch_dims[kMaxRank] = {};
  int64_t batch = 1, a_batch = 1, b_batch = 1;
  for (int i = 0; i < br; ++i) batch *= (batch_dims[i] = grad.dim(i));
  for (int i = ra - 3, s = 0, stride = 1; i >= 0; --i, ++s) {
    a_bs[br - 1 - s] = a.dim(i) == 1 ? 0 : stride;
    stride *= a.dim(i);
    a_batch *= a.dim(i);
  }
  for (int i = rb - 3, s = 0, stride = 1; i >= 0; --i, ++s) {
    b_bs[br - 1 - s] = b.dim(i) == 1 ? 0 : stride;
    stride *= b.dim(i);
    b_batch *= b.dim(i);
  }
  T* ga = grad_a->data<T>();
  T* gb = grad_b->data<T>();
  if (batch * m * n == 0) {  // no product elements: nothing flows back
    std::memset(static_cast<void*>(ga), 0, grad_a->NumElements() * sizeof(T));
    std::memset(static_cast<void*>(gb), 0, grad_b->NumElements() * sizeof(T));
    return Status::OK();
  }
  // A stack of untransposed matrices times one matrix is one tall product:
  // fold the batch into m.
  if (rb <= 2 && ra >= 3 && !ta) {
    a_mat *= a_batch;
    m *= batch;
    batch = a_batch = 1;
    for (int i = 0; i < br; ++i) a_bs[i] = 0;
  }
  if (!want_a) std::memset(static_cast<void*>(ga), 0, grad_a->NumElements() * sizeof(T));
  if (!want_b) std::memset(static_cast<void*>(gb), 0, grad_b->NumElements() * sizeof(T));
  const bool acc_a = want_a && a_batch != batch, acc_b = want_b && b_batch != batch;
  if (acc_a) std::memset(static_cast<void*>(ga), 0, grad_a->NumElements() * sizeof(T));
  if (acc_b) std::memset(static_cast<void*>(gb), 0, grad_b->NumElements() * sizeof(T));
  const T* ad = a.data<T>();
  const T* bd = b.data<T>();
  const T* gd = grad.data<T>();
  const int64_t g_mat = m * n;
  // Slice offsets of a and b (in matrices) for batch element t.
  auto slices = [&](int64_t t, int64_t* sa, int64_t* sb) {
    *sa = 0, *sb = 0;
    for (int i = br - 1; i >= 0; --i) {
      const int64_t idx = t % batch_dims[i];
      t /= batch_dims[i];
      *sa += idx * a_bs[i];
      *sb += idx * b_bs[i];
    }
  };
  auto run = [&](int64_t t, bool parallel, T* tmp_a, T* tmp_b) {
    int64_t sa, sb;
    slices(t, &sa, &sb);
    const T* at = ad + sa * a_mat;
    const T* bt = bd + sb * b_mat;
    const T* gt = gd + t * g_mat;
    GemmArgs<T> da, db;
    if (!ta) {  // [m, k] = G [m, n] op(B)^T [n, k]
      da = {m, k, n, gt, n, 1, bt, cs_b, rs_b, nullptr};
    } else {  // [k, m] = op(B) [k, n] G^T [n, m]
      da = {k, m, n, bt, rs_b, cs_b, gt, 1, n, nullptr};
    }
    if (!tb) {  // [k, n] = op(A)^T [k, m] G [m, n]
      db = {k, n, m, at, cs_a, rs_a, gt, n, 1, nullptr};
    } else {  // [n, k] = G^T [n, m] op(A) [m, k]
      db = {n, k, m, gt, 1, n, at, rs_a, cs_a, nullptr};
    }
    if (want_a) GemmInto(da, ga + sa * a_mat, acc_a, tmp_a, parallel);
    if (want_b) GemmInto(db, gb + sb * b_mat, acc_b, tmp_b, parallel);
  };
  const int64_t flops = m * n * std::max<int64_t>(k, 1);
  if (!acc_a && !acc_b && batch > 1 && flops < 128 * 128 * 128) {
    // Distinct slices per batch element: small products run side by side.
    ParallelFor(batch, 4 * flops, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) run(t, false, nullptr, nullptr);
    });
  } else {
    std::vector<T> tmp_a(acc_a ? a_mat : 0), tmp_b(acc_b ? b_mat : 0);
    for (int64_t t = 0; t < batch; ++t) run(t, true, tmp_a.data(), tmp_b.data());
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("MatMulGrad", kCPU, DType::kFloat32, MatMulGradKernel<float>);
REGISTER_KERNEL("MatMulGrad", kCPU, DType::kFloat64, MatMulGradKernel<double>);

}  // namespace opforge
