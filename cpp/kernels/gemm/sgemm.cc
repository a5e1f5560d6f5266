// The Sgemm driver: the BLIS loop nest around the microkernels of
// micro_*.cc, a small-M path that reads A (and row-major B) in place, and
// the split over the intra-op pool.
//
// Large M:  for jc (NC columns: B block in L3)
//             for pc (KC depths): pack B[kc x nc] into nr-wide panels
//               for ic (MC rows: A block in L2): pack A[mc x kc] into mr-high panels
//                 for jr (one B micro-panel, in L1), for ir: microkernel
// Small M (see kUnpackedRows; small_m.cc): one nr-wide panel of B at a time,
// in place when its rows are contiguous, against all of A's rows.
//
// The epilogue (bias, activation, residual) is applied by the microkernel to
// its accumulators on the last depth block, before the store, where the ISA
// has such kernels (AVX-512); elsewhere by a second pass over each finished
// tile while it is in L1 (epilogue.cc).
//
// Threads: C is cut into a grid of tiles (whole register tiles), a few per
// thread, claimed dynamically (claims.h); each thread runs the serial nest on its tile
// with its own packing buffers: one fork-join per call, no barriers inside.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "blas_handoff.h"
#include "blocking.h"
#include "claims.h"
#include "driver.h"
#include "epilogue.h"
#include "gemm.h"
#include "microkernel.h"
#include "scratch.h"
#include "small_split.h"
#include "tile_grid.h"
#include "opforge/parallel.h"

namespace opforge {
namespace gemm {
namespace {

// The packed path's kc / MC / NC come from the CPU's caches (blocking.h).
constexpr int64_t kSmallM = 64;     // up to this many rows, threads split along N only
// Up to kSmallM rows, and up to kUnpackedRows when the depth is at most
// kUnpackedDepth, A is read in place, not packed (one thread, CPU time:
// 128^3 88 GFLOP/s unpacked against 83 packed; at K = 768 and 3072 packing
// wins, 0.76-0.89x numpy unpacked against 0.97-1.09x).
constexpr int64_t kUnpackedRows = 128;
constexpr int64_t kUnpackedDepth = 256;
// Below this many multiply-adds one thread is faster than waking another.
constexpr int64_t kMinParallelFma = 128 * 128 * 128;
// From this many multiply-adds (a few microseconds) a product below
// kMinParallelFma splits in two when an intra-op worker is already polling
// for work and the last splits paid (small_split.h; OPFORGE_GEMM_SMALL_SPLIT).
// 48^3 split measured 0.77-1.17x numpy from process to process against
// 0.88x alone (chrt -f 2, load 3-4); 64^3 1.58-1.59x against 1.07-1.08x.
constexpr int64_t kMinSplitFma = 64 * 64 * 48;
// From this many multiply-adds a threaded product checks for numpy's BLAS
// workers spinning (blas_handoff.h): the check costs ~2.4 us here (two CPU
// clock reads), 1.3 % of a 256^3 product, 9 % of a 128^3 one.
constexpr int64_t kMinHandoffFma = int64_t{1} << 22;
// A GEMV is bound by reading B, not by FMAs: from 2^17 elements of B (0.5
// MiB, tens of microseconds) a second thread pays.
constexpr int64_t kMinParallelGemv = 1 << 17;
constexpr int64_t kBBoundRows = 8;
// Up to this many elements of A (16 MiB) a threaded call packs A once for
// all its tiles.
constexpr int64_t kMaxPrepackA = 1 << 22;
// Panels of A per claimed packing unit (SharedPhase): 4 x 12 x 256 floats,
// 48 KiB, a few microseconds.
constexpr int64_t kPrepackPanels = 4;

const Kernels* Select() {
  int level = 0;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = 1;
  if (level == 1 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) {
    level = 2;
  }
#endif
  // The same cap as the elementwise kernels (vector_math.h).
  if (const char* cap = std::getenv("OPFORGE_SIMD")) {
    if (std::strcmp(cap, "baseline") == 0) level = 0;
    else if (std::strcmp(cap, "avx2") == 0) level = std::min(level, 1);
  }
  if (level == 2 && Avx512Kernels() != nullptr) return Avx512Kernels();
  if (level >= 1 && Avx2Kernels() != nullptr) return Avx2Kernels();
  return GenericKernels();
}

const Kernels& Get() {
  static const Kernels* k = Select();
  return *k;
}

// One mr-high A panel: dst[p * mr + i] = A(i, p) for i < m (rows past m are
// never read: the microkernel for m rows is called).
void PackA(const float* src, int64_t rs, int64_t cs, int64_t m, int64_t kc, int mr, float* dst) {
  if (rs == 1) {
    for (int64_t p = 0; p < kc; ++p) {
      const float* s = src + p * cs;
      for (int64_t i = 0; i < m; ++i) dst[p * mr + i] = s[i];
    }
    return;
  }
  // Row-major A: 8 depths at a time, so each source row is read in runs.
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    for (int64_t i = 0; i < m; ++i) {
      const float* s = src + i * rs + p * cs;
      for (int q = 0; q < 8; ++q) dst[(p + q) * mr + i] = s[q * cs];
    }
  }
  for (; p < kc; ++p) {
    for (int64_t i = 0; i < m; ++i) dst[p * mr + i] = src[i * rs + p * cs];
  }
}

}  // namespace

// PackA through the ISA's kernel where it has one for this layout (row-major A).
void PackAFor(const Kernels& kr, const float* src, int64_t rs, int64_t cs, int64_t m, int64_t kc, float* dst) {
  if (kr.pack_a != nullptr && cs == 1 && rs != 1) {
    kr.pack_a(src, rs, cs, m, kc, kr.mr, dst);
  } else {
    PackA(src, rs, cs, m, kc, kr.mr, dst);
  }
}

namespace {

// Whether the microkernels apply the epilogue in registers where their ISA
// has the kernels for it (OPFORGE_GEMM_EPILOGUE=pass: a second pass over
// each stored tile, ApplyEpilogue, as before; for comparison).
bool EpilogueInRegisters() {
  static const bool on = [] {
    const char* v = std::getenv("OPFORGE_GEMM_EPILOGUE");
    return v == nullptr || std::strcmp(v, "pass") != 0;
  }();
  return on;
}

}  // namespace

// The epilogue of the register tile whose first element is C[row, col].
TileEpilogue TileEp(const Epilogue& ep, int64_t row, int64_t col) {
  TileEpilogue t;
  t.bias_col = ep.bias_kind == BiasKind::kPerColumn ? ep.bias + col : nullptr;
  t.bias_row = ep.bias_kind == BiasKind::kPerRow ? ep.bias + row : nullptr;
  t.activation = static_cast<int>(ep.activation);
  t.residual = ep.residual != nullptr ? ep.residual + row * ep.residual_ld + col : nullptr;
  t.residual_ld = ep.residual_ld;
  return t;
}

bool RegisterEpilogue(const Epilogue& ep, const Kernels& kr) {
  return !ep.empty() && kr.packed_epi[0] != nullptr && EpilogueInRegisters();
}

namespace {

// apre: all of A packed by the threaded caller (then i0 == 0, i1 == m), or null.
void Packed(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, int64_t i0, int64_t i1,
            int64_t j0, int64_t j1, const float* apre) {
  const int mr = kr.mr, nr = kr.nr;
  const Blocking& bl = GetBlocking();
  const int64_t kKC = bl.kc, kNC = bl.nc, MC = bl.mc_panels * mr;
  const int64_t nc_max = (std::min(kNC, j1 - j0) + nr - 1) / nr * nr;
  float* bpack = g.b_panels != nullptr ? nullptr : ScratchFloats(kScratchB, nc_max * std::min(g.k, kKC));
  float* apack = apre != nullptr ? nullptr : ScratchFloats(kScratchA, MC * std::min(g.k, kKC));
  const int64_t m_padded = (g.m + mr - 1) / mr * mr;
  const bool in_regs = RegisterEpilogue(ep, kr);
  for (int64_t jc = j0; jc < j1; jc += kNC) {
    const int64_t nc = std::min(kNC, j1 - jc);
    const int64_t npanels = (nc + nr - 1) / nr;
    for (int64_t pc = 0; pc < g.k; pc += kKC) {
      const int64_t kc = std::min(kKC, g.k - pc);
      const bool last = pc + kc >= g.k;
      const float beta = pc == 0 ? g.beta : 1.0f;
      for (int64_t q = 0; q < npanels && g.b_panels == nullptr; ++q) {
        const int64_t j = jc + q * nr;
        kr.pack_b(g.b + pc * g.rs_b + j * g.cs_b, g.rs_b, g.cs_b, std::min<int64_t>(nr, jc + nc - j),
                  kc, bpack + q * kc * nr);
      }
      for (int64_t ic = i0; ic < i1; ic += MC) {
        const int64_t mc = std::min(MC, i1 - ic);
        const float* ablk = apack;
        if (apre != nullptr) {
          ablk = apre + pc * m_padded + ic * kc;
        } else {
          for (int64_t ir = 0; ir < mc; ir += mr) {
            PackAFor(kr, g.a + (ic + ir) * g.rs_a + pc * g.cs_a, g.rs_a, g.cs_a, std::min<int64_t>(mr, mc - ir),
                     kc, apack + ir * kc);
          }
        }
        for (int64_t q = 0; q < npanels; ++q) {
          const int64_t jr = jc + q * nr;
          const int n = static_cast<int>(std::min<int64_t>(nr, jc + nc - jr));
          const float* bp = g.b_panels != nullptr ? PanelAt(g, nr, jr, pc) : bpack + q * kc * nr;
          for (int64_t ir = 0; ir < mc; ir += mr) {
            const int m = static_cast<int>(std::min<int64_t>(mr, mc - ir));
            float* c = g.c + (ic + ir) * g.ldc + jr;
            if (last && in_regs) {
              kr.packed_epi[m - 1](kc, ablk + ir * kc, 1, mr, bp, nr, c, g.ldc, n, g.alpha, beta,
                                   TileEp(ep, ic + ir, jr));
            } else {
              kr.packed[m - 1](kc, ablk + ir * kc, 1, mr, bp, nr, c, g.ldc, n, g.alpha, beta);
            }
          }
          if (last && !ep.empty() && !in_regs) ApplyEpilogue(ep, g.c + ic * g.ldc + jr, g.ldc, ic, jr, mc, n);
        }
      }
    }
  }
}

bool UsesPackedA(const StridedArgs& g, int64_t rows) {
  return !(rows <= kSmallM || (rows <= kUnpackedRows && g.k <= kUnpackedDepth));
}

void Slab(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, int64_t i0, int64_t i1,
          int64_t j0, int64_t j1, const float* apre = nullptr) {
  if (i1 <= i0 || j1 <= j0) return;
  if (!UsesPackedA(g, i1 - i0)) {
    SmallM(g, ep, kr, i0, i1, j0, j1);
  } else {
    Packed(g, ep, kr, i0, i1, j0, j1, apre);
  }
}

// A product of a few microseconds over two threads (small_split.h): two to
// four tiles, halves of N and of M where each has two register tiles (M in
// the small-M path's 8-row units, so 64 rows split 32 + 32, not 36 + 28).
// False (nothing run) when it does not split.
struct SmallTiles {
  const StridedArgs* g;
  const Epilogue* ep;
  const Kernels* kr;
  int64_t row_unit, units_m, units_n, tm, tn;
  static void Run(const void* ctx, int64_t t) {
    const SmallTiles& s = *static_cast<const SmallTiles*>(ctx);
    const StridedArgs& g = *s.g;
    const int64_t r = t / s.tn, c = t % s.tn, nr = s.kr->nr;
    const int64_t i0 = std::min(g.m, s.units_m * r / s.tm * s.row_unit);
    const int64_t i1 = std::min(g.m, s.units_m * (r + 1) / s.tm * s.row_unit);
    const int64_t j0 = std::min(g.n, s.units_n * c / s.tn * nr), j1 = std::min(g.n, s.units_n * (c + 1) / s.tn * nr);
    Slab(g, *s.ep, *s.kr, i0, i1, j0, j1);
  }
};

bool SplitSmall(const StridedArgs& g, const Epilogue& ep, const Kernels& kr) {
  SmallTiles s{&g, &ep, &kr, UsesPackedA(g, g.m) ? kr.mr : std::min(kr.mr, kStridedRows), 0, 0, 1, 1};
  s.units_m = (g.m + s.row_unit - 1) / s.row_unit, s.units_n = (g.n + kr.nr - 1) / kr.nr;
  // Rows split only into whole row units (a one-row tile would take the GEMV
  // loop, whose sums round differently: results must not depend on the split).
  s.tm = g.m >= 2 * s.row_unit ? 2 : 1, s.tn = s.units_n >= 2 ? 2 : 1;
  return s.tm * s.tn >= 2 && SmallSplit(s.tm * s.tn, TileFn{&SmallTiles::Run, &s});
}

}  // namespace

void SgemmStrided(const StridedArgs& g, const Epilogue& ep, bool parallel) {
  if (g.m <= 0 || g.n <= 0) return;
  // A matrix times a vector is the transposed problem with M = 1 (GEMV):
  // C^T [1, m] = b^T op(A)^T, when C's column is contiguous.
  if (g.n == 1 && g.m > 1 && g.k > 0 && (g.ldc == 1 || g.m == 1) && g.b_panels == nullptr &&
      (ep.residual == nullptr || ep.residual_ld == 1)) {
    StridedArgs t = g;
    t.m = 1, t.n = g.m;
    t.a = g.b, t.rs_a = 0, t.cs_a = g.rs_b;
    t.b = g.a, t.rs_b = g.cs_a, t.cs_b = g.rs_a;
    t.ldc = g.m;
    Epilogue te = ep;
    if (ep.bias_kind == BiasKind::kPerRow) te.bias_kind = BiasKind::kPerColumn;
    else if (ep.bias_kind == BiasKind::kPerColumn) te.bias_kind = BiasKind::kPerRow;
    SgemmStrided(t, te, parallel);
    return;
  }
  if (g.k <= 0) {  // C = beta * C, then the epilogue
    for (int64_t i = 0; i < g.m; ++i) {
      float* r = g.c + i * g.ldc;
      for (int64_t j = 0; j < g.n; ++j) r[j] = g.beta == 0.0f ? 0.0f : g.beta * r[j];
    }
    if (!ep.empty()) ApplyEpilogue(ep, g.c, g.ldc, 0, 0, g.m, g.n);
    return;
  }
  const Kernels& kr = Get();
  if (SkinnyRows(g, ep, kr, parallel)) return;
  int64_t threads = parallel ? NumIntraOpThreads() : 1;
  // Up to kBBoundRows rows a product is bound by reading B, as a GEMV: two
  // threads pay from the same size of B. ONNX MLP batch 4 (4 x 784 x 256
  // first), two threads, beside onnxruntime: 1.04-1.09x -> 1.22-1.25x.
  const bool b_bound = g.m <= kBBoundRows;
  const int64_t work = b_bound ? g.n * g.k : g.m * g.n * g.k;
  const bool large = work >= (b_bound ? kMinParallelGemv : kMinParallelFma);
  const int64_t units_m = (g.m + kr.mr - 1) / kr.mr, units_n = (g.n + kr.nr - 1) / kr.nr;
  if (!large) {
    if (threads > 1 && !b_bound && work >= kMinSplitFma && SplitSmall(g, ep, kr)) return;
    threads = 1;
  }
  threads = std::min(threads, units_m * units_n);
  if (threads <= 1) {
    Slab(g, ep, kr, 0, g.m, 0, g.n);
    return;
  }
  // Numpy's BLAS workers spinning after its last call would take a core from
  // our threads: the product goes to them (blas_handoff.h).
  if (large && work >= kMinHandoffFma && g.m > kBBoundRows && HandOffWhileBlasAwake(g, ep, threads)) return;
  if (GemvSplitDepth(g, ep, kr, threads)) return;
  // C is cut into a grid of tiles, several per thread, that the threads
  // claim one at a time: a thread that shares its core with something else
  // (numpy's OpenBLAS workers spin about 0.1 s after each call; other
  // processes) takes fewer tiles instead of holding up the join, and the
  // caller runs a worker's share itself when the worker is late to start.
  const Grid grid = MakeGrid(g.m, g.n, g.k, kr, threads, kSmallM);
  // Each column of tiles would pack its rows of A again (M = 128, N = 768:
  // eight tiles of 128 x 96, eight copies of A; n = 256..1024: two to four):
  // the threads pack A once, together, first (kc-deep blocks of mr-high
  // panels, as Packed lays them out), in units of a few panels claimed by
  // whichever thread is running (SharedPhase), in the same fork-join as the
  // tiles. M = 128, K = 3072 ran 0.86x numpy with A packed per tile.
  const bool prepack = grid.tn > 1 && g.m * g.k <= kMaxPrepackA && UsesPackedA(g, g.m);
  const int64_t m_padded = (g.m + kr.mr - 1) / kr.mr * kr.mr, panels = m_padded / kr.mr;
  float* const apre = prepack ? ScratchFloats(kScratchPrepackA, m_padded * g.k) : nullptr;
  const int64_t groups = (panels + kPrepackPanels - 1) / kPrepackPanels;
  const int64_t kKC = GetBlocking().kc;
  const int64_t pack_units = prepack ? (g.k + kKC - 1) / kKC * groups : 0;
  auto pack_unit = [&](int64_t u) {  // one kc-deep block of up to kPrepackPanels panels
    const int64_t pc = u / groups * kKC, kc = std::min(kKC, g.k - pc);
    for (int64_t p = u % groups * kPrepackPanels; p < std::min(panels, (u % groups + 1) * kPrepackPanels); ++p) {
      const int64_t i = p * kr.mr;
      PackAFor(kr, g.a + i * g.rs_a + pc * g.cs_a, g.rs_a, g.cs_a, std::min<int64_t>(kr.mr, g.m - i), kc,
               apre + pc * m_padded + i * kc);
    }
  };
  SharedPhase pack_a(pack_units);
  TileClaims claims(grid.tm * grid.tn, threads);
  auto run = [&](int64_t who, int64_t) {
    pack_a.Run(pack_unit);
    claims.Run(who, [&](int64_t t) {
      const int64_t r = t / grid.tn, c = t % grid.tn;
      const int64_t i0 = units_m * r / grid.tm * kr.mr, i1 = std::min(g.m, units_m * (r + 1) / grid.tm * kr.mr);
      const int64_t j0 = units_n * c / grid.tn * kr.nr, j1 = std::min(g.n, units_n * (c + 1) / grid.tn * kr.nr);
      Slab(g, ep, kr, i0, i1, j0, j1, apre);
    });
  };
  ParallelFor(threads, kMinParallelCost, run);
}

void Sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           const Epilogue& epilogue) {
  StridedArgs g;
  g.m = M, g.n = N, g.k = K, g.alpha = alpha, g.beta = beta;
  g.a = A, g.rs_a = trans_a ? 1 : lda, g.cs_a = trans_a ? lda : 1;
  g.b = B, g.rs_b = trans_b ? 1 : ldb, g.cs_b = trans_b ? ldb : 1;
  g.c = C, g.ldc = ldc;
  SgemmStrided(g, epilogue, true);
}

const char* SgemmIsa() { return Get().name; }

int SgemmPanelWidth() { return Get().nr; }

void PackBPanels(const float* b, int64_t rs, int64_t cs, int64_t k, int64_t n, float* panels) {
  const Kernels& kr = Get();
  const int nr = kr.nr;
  ParallelFor((n + nr - 1) / nr, k * nr, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      kr.pack_b(b + q * nr * cs, rs, cs, std::min<int64_t>(nr, n - q * nr), k, panels + q * k * nr);
    }
  });
}

}  // namespace gemm
}  // namespace opforge
