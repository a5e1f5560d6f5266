// The one GEMM every convolution kernel calls. float32 goes to opforge's own
// packed GEMM (cpp/kernels/gemm/) when the build has it, else (and float64
// always) to the BLAS MatMul uses (blas_loader.h). To route float32 back to
// the BLAS, delete the __has_include block below.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "opforge/tensor.h"

#include "opforge/parallel.h"

#include "../blas_loader.h"

#if __has_include("../gemm/gemm.h")
#include "../gemm/gemm.h"
#define OF_CONV_OWN_SGEMM 1
#endif

namespace opforge {
namespace conv {

// Row-major C[m, n] = op(A)[m, k] * op(B)[k, n] (C overwritten); ta / tb as
// cblas. `in_worker`: the caller is already a pool task (one GEMM per image
// or group), so the product runs single-threaded; otherwise it may use every
// thread opforge may use.
template <typename T>
void NaiveGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
               int64_t ldb, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) ci[j] = T(0);
    for (int64_t p = 0; p < k; ++p) {
      const T av = ta ? a[p * lda + i] : a[i * lda + p];
      if (tb) {
        for (int64_t j = 0; j < n; ++j) ci[j] += av * b[j * ldb + p];
      } else {
        const T* bp = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j];
      }
    }
  }
}

template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
          T* c, int64_t ldc, bool in_worker) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
#ifdef OF_CONV_OWN_SGEMM
  if constexpr (std::is_same_v<T, float>) {
    // Element (i, p) of op(A) is a[i * rs_a + p * cs_a]; likewise B.
    gemm::StridedArgs g{m, n, k, 1.0f, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb, tb ? ldb : 1, 0.0f, c, ldc};
    gemm::SgemmStrided(g, gemm::Epilogue(), !in_worker);
    return;
  }
#endif
  // opforge's single-threaded BLAS, split over the intra-op pool: calling
  // the process's shared (numpy's) BLAS from executor threads measured 10x
  // slower on small products (its own worker threads wake per call).
  const blas::Library* lib = blas::Private();
  if (lib == nullptr) lib = blas::Shared();
  const bool whole = in_worker || lib != blas::Private();
  const int64_t big = std::max({m, n, k, lda, ldb, ldc});
  if (lib == nullptr || big > lib->max_dim) {
    NaiveGemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
    return;
  }
  auto rows = [&](int64_t i0, int64_t i1) {
    const T* ai = ta ? a + i0 : a + i0 * lda;
    if constexpr (std::is_same_v<T, float>) {
      lib->sgemm(ta, tb, i1 - i0, n, k, ai, lda, b, ldb, c + i0 * ldc, ldc);
    } else {
      lib->dgemm(ta, tb, i1 - i0, n, k, ai, lda, b, ldb, c + i0 * ldc, ldc);
    }
  };
  if (whole) {
    rows(0, m);
  } else if (m >= 2 * NumIntraOpThreads() || n < 64) {
    ParallelFor(m, std::max<int64_t>(n * k / 8, 1), rows);
  } else {
    // Few rows (a thin filter bank): split the columns instead.
    ParallelFor(n, std::max<int64_t>(m * k / 8, 1), [&](int64_t j0, int64_t j1) {
      const T* bj = tb ? b + j0 * ldb : b + j0;
      if constexpr (std::is_same_v<T, float>) {
        lib->sgemm(ta, tb, m, j1 - j0, k, a, lda, bj, ldb, c + j0, ldc);
      } else {
        lib->dgemm(ta, tb, m, j1 - j0, k, a, lda, bj, ldb, c + j0, ldc);
      }
    });
  }
}

// Scratch memory of n T's through opforge's allocator: its large blocks are
// recycled by its block cache. (std::vector's malloc'd buffers of a few MiB
// raised glibc's mmap threshold and then stayed in the heap: +27 MiB of peak
// RSS on SqueezeNet at batch 8.) Uninitialised; std::vector if that fails.
template <typename T>
class ScratchBuffer {
 public:
  explicit ScratchBuffer(int64_t n) {
    const int64_t words = (n * static_cast<int64_t>(sizeof(T)) + 3) / 4;
    if (n > 0 && Tensor::Allocate(DType::kFloat32, TensorShape({words}), &t_).ok()) {
      p_ = static_cast<T*>(t_.raw_data());
    } else {
      v_.resize(static_cast<size_t>(n > 0 ? n : 1));
      p_ = v_.data();
    }
  }
  T* data() { return p_; }

 private:
  Tensor t_;
  std::vector<T> v_;
  T* p_ = nullptr;
};

// A bias per output row and an activation after a convolution's GEMM.
enum class Act { kNone, kRelu, kSigmoid, kSilu, kHardSwish };
template <typename T>
struct EpiOf {
  const T* bias = nullptr;
  Act act = Act::kNone;
  bool empty() const { return bias == nullptr && act == Act::kNone; }
};

// Gemm with C = act(A B + bias[bias_row0 + i]) fused into the float32 GEMM's
// epilogue. Returns false (C = A B only) where there is no fused epilogue:
// the caller applies it.
template <typename T>
bool GemmEpilogue(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                  int64_t ldb, T* c, int64_t ldc, bool in_worker, const EpiOf<T>& e, int64_t bias_row0) {
#ifdef OF_CONV_OWN_SGEMM
  if constexpr (std::is_same_v<T, float>) {
    if (m > 0 && n > 0 && k > 0) {
      gemm::Epilogue ep;
      if (e.bias != nullptr) ep.bias_kind = gemm::BiasKind::kPerRow, ep.bias = e.bias + bias_row0;
      ep.activation = e.act == Act::kRelu      ? gemm::Activation::kRelu
                      : e.act == Act::kSigmoid ? gemm::Activation::kSigmoid
                      : e.act == Act::kSilu    ? gemm::Activation::kSilu
                                               : gemm::Activation::kNone;
      gemm::StridedArgs g{m, n, k, 1.0f, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb, tb ? ldb : 1, 0.0f, c, ldc};
      gemm::SgemmStrided(g, ep, !in_worker);
      return true;
    }
  }
#endif
  Gemm<T>(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, in_worker);
  return e.empty();
}

}  // namespace conv
}  // namespace opforge
