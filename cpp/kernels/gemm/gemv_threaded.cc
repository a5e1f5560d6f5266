// M = 1 over the intra-op threads when B's rows are contiguous (x @ W with
// W stored [K, N]): the depth is split, not the columns. Each thread then
// streams whole rows of B, one contiguous run of memory (a column split
// reads every row in short pieces, a new prefetch stream per row: 0.84x
// numpy at K = 768, N = 3072 on two threads), into its own partial row of C,
// which the caller sums. W stored [N, K] (gemv_t) keeps the column split
// of the tile grid: there a thread's columns are contiguous rows of W.
#include <algorithm>
#include <atomic>
#include <vector>

#include "claims.h"
#include "epilogue.h"
#include "microkernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace gemm {

bool GemvSplitDepth(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, int64_t threads) {
  constexpr int64_t kMinDepth = 64;  // per piece
  if (g.m != 1 || g.cs_b != 1 || g.b_panels != nullptr || threads < 2) return false;
  // One piece per thread (claims.h): each core reads the same rows of B on
  // every call (two each: 0.93x numpy at K = 768, N = 3072, against 0.97x).
  const int64_t pieces = std::min(threads, g.k / kMinDepth);
  if (pieces < 2) return false;
  static thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < pieces * g.n) scratch.resize(pieces * g.n);
  float* parts = scratch.data();
  TileClaims claims(pieces, threads);
  ParallelFor(threads, kMinParallelCost, [&](int64_t who, int64_t) {
    claims.Run(who, [&](int64_t t) {
      const int64_t k0 = g.k * t / pieces, k1 = g.k * (t + 1) / pieces;
      kr.gemv_n(k1 - k0, g.a + k0 * g.cs_a, g.cs_a, g.b + k0 * g.rs_b, g.rs_b, parts + t * g.n, g.n, 1.0f,
                0.0f);
    });
  });
  float* c = g.c;
  for (int64_t t = 1; t < pieces; ++t) {
    const float* p = parts + t * g.n;
    for (int64_t j = 0; j < g.n; ++j) parts[j] += p[j];
  }
  if (g.beta == 0.0f) {
    for (int64_t j = 0; j < g.n; ++j) c[j] = g.alpha * parts[j];
  } else {
    for (int64_t j = 0; j < g.n; ++j) c[j] = g.alpha * parts[j] + g.beta * c[j];
  }
  if (!ep.empty()) ApplyEpilogue(ep, c, g.ldc, 0, 0, 1, g.n);
  return true;
}

}  // namespace gemm
}  // namespace opforge
