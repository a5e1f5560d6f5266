// OpenBLAS behind MatMul, found or loaded on first use (so `import opforge`
// pays nothing for it). Two kinds:
//
// - shared: a BLAS this process already loaded, normally numpy's bundled
//   scipy-openblas64 (numpy.libs/libscipy_openblas64_*.so, ILP64, symbols
//   scipy_cblas_sgemm64_ ...). It keeps its own threading: one call with the
//   whole product, on the thread pool numpy's matmul uses too, so alternating
//   numpy and opforge calls hands work to threads that are already awake
//   instead of two pools fighting for the cores. Never reconfigured.
// - private: opforge's own copy from the scipy-openblas32 wheel (a runtime
//   dependency), set to one thread; callers split rows over opforge's pool.
//   Used for small batched products (run in parallel over the batch) and when
//   opforge may use fewer threads than the shared BLAS would.
//
// OPFORGE_BLAS: unset or `auto` (both, as above); `numpy` (only the shared
// one); `bundled` (only the private one: opforge's behaviour before 0.2);
// `none` (MatMul's built-in GEMM); a path: that library, shared if something
// in the process already loaded it, else private.
#pragma once

#include <cstdint>

namespace opforge {
namespace blas {

// Row-major C[m, n] = op(A)[m, k] * op(B)[k, n] (beta = 0); trans_a / trans_b
// as cblas. Dimensions and leading dimensions must be <= Library::max_dim.
using SgemmFn = void (*)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                         int64_t ldc);
using DgemmFn = void (*)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                         const double* a, int64_t lda, const double* b, int64_t ldb, double* c,
                         int64_t ldc);

struct Library {
  SgemmFn sgemm;
  DgemmFn dgemm;
  int64_t max_dim;        // INT32_MAX for LP64 builds
  int (*num_threads)();   // the library's current thread count (changes: threadpoolctl)
  const char* path;
};

// Already loaded in the process (numpy's), or nullptr.
const Library* Shared();
// opforge's single-threaded copy, loaded on first call, or nullptr.
const Library* Private();

// Introspection (opforge.config, through ctypes): the libraries' paths or
// nullptr, and the shared one's thread count (0 without one).
const char* SharedPath();
const char* PrivatePath();
int SharedThreads();

// A [m, k] and B [k, n] as cblas takes them, from a product's element strides
// (rs_*, cs_*): each row-major (t = false) or column-major (t = true) with its
// leading dimension; false when either is neither.
template <typename G>
bool CblasOperands(const G& g, bool* ta, int64_t* lda, bool* tb, int64_t* ldb) {
  auto one = [](int64_t rs, int64_t cs, int64_t rows, int64_t cols, bool* t, int64_t* ld) {
    if (cs == 1 && rs >= (cols > 1 ? cols : 1)) return *t = false, *ld = rs, true;
    if (rs == 1 && cs >= (rows > 1 ? rows : 1)) return *t = true, *ld = cs, true;
    return false;
  };
  return one(g.rs_a, g.cs_a, g.m, g.k, ta, lda) && one(g.rs_b, g.cs_b, g.k, g.n, tb, ldb);
}

}  // namespace blas
}  // namespace opforge
