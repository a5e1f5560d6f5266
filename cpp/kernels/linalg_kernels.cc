// MatMul kernels: float32 products run on opforge's own GEMM
// (cpp/kernels/gemm/; Route() below says which), float64 on OpenBLAS
// (blas_loader.h); integer types (or anything OpenBLAS cannot take) on the
// typed fallback GEMM (gemm/typed_gemm.h).
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
#include "gemm/typed_gemm.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

using typed_gemm::GemmArgs;
using typed_gemm::GemmDirect;
using typed_gemm::GemmPacked;

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
    if (!blas::CblasOperands(g, &ta, &lda, &tb, &ldb)) return false;
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
