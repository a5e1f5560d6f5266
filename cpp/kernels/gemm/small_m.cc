// The small-M path of the Sgemm driver (sgemm.cc): up to 64 rows (128 at a
// depth of at most 256), C in register tiles of up to 12 rows x nr columns,
// one nr-wide column panel at a time, each panel in kSmallKC-deep blocks:
//
//   for jr (nr columns of B, read in place when its rows are contiguous)
//     for pc (kSmallKC depths)
//       for ir (row tiles): microkernel
//
// A is read in place by broadcasts where the tiles are at most kStridedRows
// high, and packed once for the whole call where they are higher (the
// in-place kernel keeps a pointer per row and spills past 8). One row of C
// goes to the GEMV kernels.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "driver.h"
#include "epilogue.h"
#include "scratch.h"

namespace opforge {
namespace gemm {
namespace {

// Tiles that read A in place are at most this high: each row of A is one
// more address register in the loop, and past 8 rows they spill (AVX-512,
// one 11 x 32 or 12 x 32 tile, B in L1/L2, chrt -f 1: 4-8 rows 112-116
// GFLOP/s, 9-11 rows 108-112, 12 rows 104; the core's FMA peak 115). 64^3
// as 8 tiles of 8 rows: 4.68 us against 4.89 us as 11 + 11 + 11 + 11 + 11 + 9.
// Only while B (this slab's columns) is small enough to be re-read from L2
// by the extra row tiles: with B streamed in place from memory the taller
// tiles win (one thread, chrt -f 1, alternating processes: 64 x 768 x 3072
// 1.15-1.18x numpy in 11-row tiles against 1.09-1.12x in 8-row ones; 12 x
// 768 x 3072 looked worse in two tiles of 6 too, but varied as much between
// processes running the same code). Small B, same runs: 64^3 1.04-1.05x ->
// 1.08-1.10x, 128^3 1.08-1.09x -> 1.16-1.17x, 48 x 256 x 256 1.09-1.11x ->
// 1.18-1.22x, 96 x 256 x 96 1.06-1.11x -> 1.15-1.20x.
constexpr int64_t kStridedRowsB = int64_t{1} << 17;  // floats: 512 KiB
// Depth block of the small-M path (B read in place; 32 KiB panels). At 1024,
// B rows 4 KiB or more apart fell out of cache between row tiles, by how much
// varying from process to process (session 16, one thread: 64 x 768 x 3072
// 64-73 -> 95-101 GFLOP/s, 16 x 768 x 3072 54-59 -> 64-68; two: 103-107 ->
// 120-121 there, the rest and 64 x 384 x 729 the same within noise).
constexpr int64_t kSmallKC = 256;

// Row tiles higher than kStridedRows read A from panels packed once per call
// (constant row offsets, no spills) where the ISA has the kernel (packed_a:
// AVX-512), instead of from 9-12 row pointers. Sapphire Rapids, one thread,
// chrt -f 1, both forms interleaved in one process (load 4-6): 64 x 384 x 729
// (SqueezeNet's 1x1 convolutions at 27x27) 145-151 -> 152-162 GFLOP/s, 128 x
// 256 x 729 143-156 -> 162-171, 32 x 384 x 729 135-140 -> 143-151; at 8 rows
// and below the in-place form is as fast and packs nothing.
// OPFORGE_GEMM_SMALL_PACK_A=0 (or SetSmallMPackA(0)) keeps A in place, for
// comparison.
std::atomic<int> g_pack_a{[] {
  const char* v = std::getenv("OPFORGE_GEMM_SMALL_PACK_A");
  return v != nullptr && std::strcmp(v, "0") == 0 ? 0 : 1;
}()};
std::atomic<int64_t> g_packed_a_calls{0};  // SmallMPackedACount

// M = 1 with W stored [N, K]: the weight's rows are read in blocks, forwards
// on one call and backwards on the next (per thread, so per share of W): a
// call then starts on the rows the last one read last, still in this core's
// L2 when the share is a little larger than the L2 (a loop of LRU-evicting
// forward scans would miss on every line). Each output is still one dot
// product in one order, so results do not depend on the direction. K = N =
// 768, load 9-10: one thread (CPU time) 1.08-1.09x numpy against 1.01x; two
// threads 0.95-0.97x against 0.91-0.94x. Only shares up to kAlternateBytes:
// past a few L2s little is reused, and each block boundary of a backward
// walk restarts the prefetch streams (K = 768, N = 3072 on two threads, a
// 4.7 MB share each: 0.87-0.98x alternating against 0.98x forwards).
constexpr int64_t kGemvBlockRows = 16;
constexpr int64_t kAlternateBytes = int64_t{3} << 20;
void GemvTAlternating(const StridedArgs& g, const Kernels& kr, const float* a, int64_t j0, int64_t j1, float* c) {
  static const bool alternate = [] {  // OPFORGE_GEMV_ALTERNATE=0: always forwards, for comparison
    const char* v = std::getenv("OPFORGE_GEMV_ALTERNATE");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  static thread_local bool backwards = false;
  backwards = alternate && !backwards;
  const int64_t n = j1 - j0;
  if (!backwards || n <= kGemvBlockRows || n * g.k * int64_t{sizeof(float)} > kAlternateBytes) {
    kr.gemv_t(g.k, a, g.b + j0 * g.cs_b, g.cs_b, c, n, g.alpha, g.beta);
    return;
  }
  for (int64_t jb = (n - 1) / kGemvBlockRows * kGemvBlockRows; jb >= 0; jb -= kGemvBlockRows) {
    kr.gemv_t(g.k, a, g.b + (j0 + jb) * g.cs_b, g.cs_b, c + jb, std::min(kGemvBlockRows, n - jb), g.alpha,
              g.beta);
  }
}

}  // namespace

// Row pc of the prepacked panel holding column jr (a multiple of nr).
const float* PanelAt(const StridedArgs& g, int nr, int64_t jr, int64_t pc) {
  return g.b_panels + (jr / nr) * g.k * nr + pc * nr;
}

namespace {

// One row of C: the GEMV kernels, when B has contiguous rows or columns.
bool OneRow(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, int64_t i, int64_t j0,
            int64_t j1) {
  const float* a = g.a + i * g.rs_a;
  float* c = g.c + i * g.ldc + j0;
  if (g.b_panels != nullptr) {
    // Each prepacked panel is a k x nr row-major B: the row-streaming GEMV
    // keeps several FMA chains going (a one-row microkernel has two).
    for (int64_t jr = j0; jr < j1; jr += kr.nr) {
      kr.gemv_n(g.k, a, g.cs_a, PanelAt(g, kr.nr, jr, 0), kr.nr, c + (jr - j0), std::min<int64_t>(kr.nr, j1 - jr),
                g.alpha, g.beta);
    }
  } else if (g.cs_b == 1) {
    kr.gemv_n(g.k, a, g.cs_a, g.b + j0, g.rs_b, c, j1 - j0, g.alpha, g.beta);
  } else if (g.rs_b == 1 && g.cs_a == 1) {
    GemvTAlternating(g, kr, a, j0, j1, c);
  } else {
    return false;
  }
  if (!ep.empty()) ApplyEpilogue(ep, c, g.ldc, i, j0, 1, j1 - j0);
  return true;
}

}  // namespace

int SetSmallMPackA(int mode) {
  return mode < 0 ? g_pack_a.load(std::memory_order_relaxed) : g_pack_a.exchange(mode != 0 ? 1 : 0);
}

int64_t SmallMPackedACount() { return g_packed_a_calls.load(std::memory_order_relaxed); }

void SmallM(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, int64_t i0, int64_t i1,
            int64_t j0, int64_t j1) {
  if (i1 - i0 == 1 && OneRow(g, ep, kr, i0, j0, j1)) return;
  const int nr = kr.nr;
  // Rows split evenly over the fewest tiles (16 rows: 8 + 8, not 12 + 4).
  const int max_rows = g.k * (j1 - j0) <= kStridedRowsB ? std::min(kr.mr, kStridedRows) : kr.mr;
  const int64_t tiles = (i1 - i0 + max_rows - 1) / max_rows;
  const int mr = static_cast<int>((i1 - i0 + tiles - 1) / tiles);
  const bool pack_a = mr > kStridedRows && kr.packed_a[0] != nullptr && g_pack_a.load(std::memory_order_relaxed) != 0;
  const bool in_place = g.cs_b == 1 || g.b_panels != nullptr;
  const bool in_regs = RegisterEpilogue(ep, kr);
  float* bbuf = g.b_panels != nullptr || (in_place && (j1 - j0) % nr == 0)
                    ? nullptr
                    : ScratchFloats(kScratchB, std::min(g.k, kSmallKC) * nr);
  // Packed A: the panel of row tile t, depth block pc / kSmallKC, at
  // apack + (block * tiles + t) * kSmallKC * kr.mr.
  const int64_t blocks = (g.k + kSmallKC - 1) / kSmallKC;
  float* apack = pack_a ? ScratchFloats(kScratchA, blocks * tiles * kSmallKC * kr.mr) : nullptr;
  auto a_panel = [&](int64_t pc, int64_t t) { return apack + (pc / kSmallKC * tiles + t) * kSmallKC * kr.mr; };
  if (pack_a) g_packed_a_calls.fetch_add(1, std::memory_order_relaxed);
  for (int64_t pc = 0; pack_a && pc < g.k; pc += kSmallKC) {
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t ir = i0 + t * mr;
      PackAFor(kr, g.a + ir * g.rs_a + pc * g.cs_a, g.rs_a, g.cs_a, std::min<int64_t>(mr, i1 - ir),
               std::min(kSmallKC, g.k - pc), a_panel(pc, t));
    }
  }
  for (int64_t jr = j0; jr < j1; jr += nr) {
    const int n = static_cast<int>(std::min<int64_t>(nr, j1 - jr));
    for (int64_t pc = 0; pc < g.k; pc += kSmallKC) {
      const int64_t kc = std::min(kSmallKC, g.k - pc);
      const float* bp = g.b + pc * g.rs_b + jr * g.cs_b;
      int64_t b_ld = g.rs_b;
      if (g.b_panels != nullptr) {
        bp = PanelAt(g, nr, jr, pc), b_ld = nr;
      } else if (!in_place || n < nr) {
        kr.pack_b(bp, g.rs_b, g.cs_b, n, kc, bbuf);
        bp = bbuf, b_ld = nr;
      }
      const float beta = pc == 0 ? g.beta : 1.0f;
      const bool epi = in_regs && pc + kc >= g.k;
      for (int64_t ir = i0, t = 0; ir < i1; ir += mr, ++t) {
        const int m = static_cast<int>(std::min<int64_t>(mr, i1 - ir));
        float* c = g.c + ir * g.ldc + jr;
        if (pack_a) {
          const float* a = a_panel(pc, t);
          if (epi) {
            kr.packed_a_epi[m - 1](kc, a, 1, kr.mr, bp, b_ld, c, g.ldc, n, g.alpha, beta, TileEp(ep, ir, jr));
          } else {
            kr.packed_a[m - 1](kc, a, 1, kr.mr, bp, b_ld, c, g.ldc, n, g.alpha, beta);
          }
          continue;
        }
        const float* a = g.a + ir * g.rs_a + pc * g.cs_a;
        if (epi) {
          kr.strided_epi[m - 1](kc, a, g.rs_a, g.cs_a, bp, b_ld, c, g.ldc, n, g.alpha, beta, TileEp(ep, ir, jr));
        } else {
          kr.strided[m - 1](kc, a, g.rs_a, g.cs_a, bp, b_ld, c, g.ldc, n, g.alpha, beta);
        }
      }
    }
    if (!ep.empty() && !in_regs) ApplyEpilogue(ep, g.c + i0 * g.ldc + jr, g.ldc, i0, jr, i1 - i0, n);
  }
}

}  // namespace gemm
}  // namespace opforge
