// M = 1 over the intra-op threads when B's rows are contiguous (x @ W with
// W stored [K, N]): the depth is split, not the columns. Each thread then
// streams whole rows of B, one contiguous run of memory (a column split
// reads every row in short pieces, a new prefetch stream per row: 0.84x
// numpy at K = 768, N = 3072 on two threads), into its own partial row of C,
// which the caller sums. W stored [N, K] (gemv_t) keeps the column split
// of the tile grid: there a thread's columns are contiguous rows of W.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "blocking.h"
#include "claims.h"
#include "epilogue.h"
#include "microkernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace gemm {

// A share of B a little larger than this core's L2 (K = 768, N = 3072 on
// two threads: 4.7 MB against Sapphire Rapids' 2 MiB) is read in blocks of
// columns, forwards on one call and backwards on the next, so each call
// starts on the columns the last one read last, still in L2 (as GemvT's
// rows, sgemm.cc). Each output's sum runs over the same rows in the same
// order either way: bitwise the same results (OPFORGE_GEMV_ALTERNATE=0:
// always forwards). Two threads, chrt -f 1: 0.95-0.99x numpy forwards,
// 1.08-1.10x alternating. Only up to three L2s per share: past that little
// is left to reuse (GemvT on Zen 5 lost at a 4.7 MB share, 1 MiB L2).
constexpr int64_t kAltChunk = 512;  // columns: 2 KiB of each row (256: 1.03x numpy, 1024: 1.02-1.03x, 512: 1.08-1.10x)
bool AlternateColumns() {
  static const bool on = [] {
    const char* v = std::getenv("OPFORGE_GEMV_ALTERNATE");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

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
      const float* a = g.a + k0 * g.cs_a;
      const float* b = g.b + k0 * g.rs_b;
      float* part = parts + t * g.n;
      const int64_t bytes = (k1 - k0) * g.n * int64_t{sizeof(float)};
      static thread_local bool backwards = false;
      backwards = !backwards;
      if (!AlternateColumns() || g.n < 2 * kAltChunk || bytes <= L2BytesPerCore() || bytes > 3 * L2BytesPerCore()) {
        kr.gemv_n(k1 - k0, a, g.cs_a, b, g.rs_b, part, g.n, 1.0f, 0.0f);
        return;
      }
      const int64_t chunks = (g.n + kAltChunk - 1) / kAltChunk;
      for (int64_t q = 0; q < chunks; ++q) {
        const int64_t j0 = (backwards ? chunks - 1 - q : q) * kAltChunk, w = std::min(kAltChunk, g.n - j0);
        kr.gemv_n(k1 - k0, a, g.cs_a, b + j0, g.rs_b, part + j0, w, 1.0f, 0.0f);
      }
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
