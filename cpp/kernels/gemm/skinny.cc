// Products with few columns and B's columns contiguous: x @ W^T with W
// stored [N, K], a classifier's last layer (256 x 1024 -> 10 in the
// 784-1024-1024-10 MLP), run as row dot products, one row of C at a time
// through the GEMV kernel (gemv_t). The register tile is nr columns wide
// (32 on AVX-512): at N = 10 the packed path multiplied 3.2x as much as it
// kept, after packing B one float at a time. OPFORGE_GEMM_SKINNY=0 turns
// this path off (for comparison).
#include <cstdlib>
#include <cstring>

#include "epilogue.h"
#include "gemm.h"
#include "microkernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace gemm {
namespace {

constexpr int64_t kMinRows = 65;           // sgemm.cc's kSmallM + 1: up to 64 rows keep the small-M path
constexpr int64_t kMinDepth = 64;          // shorter dot products leave the loop overhead exposed
constexpr int64_t kMinParallel = 1 << 21;  // multiply-adds; sgemm.cc's kMinParallelFma (128^3)

bool Enabled() {
  static const bool on = [] {
    const char* v = std::getenv("OPFORGE_GEMM_SKINNY");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

bool SkinnyRows(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, bool parallel) {
  if (2 * g.n > kr.nr || g.rs_b != 1 || g.cs_a != 1 || g.b_panels != nullptr || g.m < kMinRows ||
      g.k < kMinDepth || !Enabled()) {
    return false;
  }
  // Each row is one dot product per column in a fixed order, so results do
  // not depend on how the rows are split over threads.
  auto rows = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* c = g.c + i * g.ldc;
      kr.gemv_t(g.k, g.a + i * g.rs_a, g.b, g.cs_b, c, g.n, g.alpha, g.beta);
      if (!ep.empty()) ApplyEpilogue(ep, c, g.ldc, i, 0, 1, g.n);
    }
  };
  if (parallel && g.m * g.n * g.k >= kMinParallel) {
    ParallelFor(g.m, g.n * g.k, rows);
  } else {
    rows(0, g.m);
  }
  return true;
}

}  // namespace gemm
}  // namespace opforge
