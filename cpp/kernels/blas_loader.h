// OpenBLAS behind MatMul, loaded on first use with dlopen (so `import
// opforge` pays nothing for it) from the PyPI wheel scipy-openblas32, a
// runtime dependency: <site-packages>/scipy_openblas32/lib/libscipy_openblas.so
// next to <site-packages>/opforge/. Its threading is set to one thread; MatMul
// splits work over opforge's own pool instead (one pool, no oversubscription).
//
// OPFORGE_BLAS=<path to a libscipy_openblas.so> picks the library;
// OPFORGE_BLAS=none disables it (MatMul then uses its own GEMM).
#pragma once

#include <cstdint>

namespace opforge {
namespace blas {

// Row-major C[m, n] = op(A)[m, k] * op(B)[k, n] (beta = 0); trans_a / trans_b
// as cblas. Dimensions and leading dimensions must fit in int32.
using SgemmFn = void (*)(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                         const float* b, int ldb, float* c, int ldc);
using DgemmFn = void (*)(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda,
                         const double* b, int ldb, double* c, int ldc);

struct Library {
  SgemmFn sgemm;
  DgemmFn dgemm;
  const char* path;
};

// The loaded library, or nullptr where it is missing or disabled.
const Library* Get();

}  // namespace blas
}  // namespace opforge
