// Winograd F(4x4, 3x3) driver (winograd.h): the filter transform, tile
// blocks over the intra-op pool, and the run-time choice of the transforms'
// instruction set (winograd_isa.inc, as for the depthwise kernel).
#include "winograd.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "opforge/parallel.h"

#include "packed_gemm.h"

#include "../simd_math.h"
#include "../vector_math.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_WG_X86 1
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace opforge {
namespace conv {

#ifdef OF_CONV_OWN_SGEMM
namespace {

constexpr int64_t kNoTile = std::numeric_limits<int64_t>::min() / 4;

// Fewer tiles than this per call (or outputs under 8x8): the filter
// transform (36 x out x in) and the GEMMs' packing of it cost about what
// Winograd saves (one thread, CPU time: ResNet-18 at batch 1 55.5 ms
// without this floor, 53.2 with it; its 7x7 layers at batch 8 run 18%
// slower through Winograd than through im2col).
constexpr int64_t kMinTiles = 32;

struct WinoPlan {
  int64_t c, o, h, w, oh, ow, pt, pl;
  int64_t th, tw, tiles;  // 4x4 output tiles per image
  int64_t tb;             // tiles per block (a multiple of 32: whole GEMM panels)
  int64_t u_panels;       // > 0: U[xi] packed as GEMM panels, this many floats apart
};

namespace baseline {
constexpr int kBytes = 16;
#include "winograd_isa.inc"
}  // namespace baseline

#if defined(OF_WG_X86)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
constexpr int kBytes = 32;
#include "winograd_isa.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
namespace avx512 {
constexpr int kBytes = 64;
#include "winograd_isa.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

using BlockFn = void (*)(const WinoPlan&, const float*, const float*, const float*, Act, float*, int64_t, int64_t,
                         float*, float*);

BlockFn Get() {
  static const BlockFn fn = [] {
#if defined(OF_WG_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return &avx512::RunBlock;
    if (std::strcmp(isa, "avx2") == 0) return &avx2::RunBlock;
#endif
    return &baseline::RunBlock;
  }();
  return fn;
}

using FilterFn = void (*)(const float*, int64_t, int64_t, bool, int64_t, int64_t, float*);

FilterFn GetFilter() {
  static const FilterFn fn = [] {
#if defined(OF_WG_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return &avx512::FilterRows;
    if (std::strcmp(isa, "avx2") == 0) return &avx2::FilterRows;
#endif
    return &baseline::FilterRows;
  }();
  return fn;
}

bool Enabled() {
  static const bool on = [] {
    const char* e = std::getenv("OPFORGE_CONV_WINOGRAD");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}

}  // namespace

bool WinogradApplies(const Geometry& g) {
  return Enabled() && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 &&
         g.c >= 16 && g.o >= 16 && g.oh >= 8 && g.ow >= 8 && g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4) >= kMinTiles;
}

void WinogradFilter(const float* f, int64_t o, int64_t c, float* u) {
  const FilterFn ffn = GetFilter();
  ParallelFor(o, c * 200, [&](int64_t o0, int64_t o1) { ffn(f, o, c, false, o0, o1, u); });
}

void WinogradForward(const Geometry& g, const float* x, const float* f, const float* bias, Act act, float* y,
                     bool transposed, const float* u_pre, int64_t u_panels) {
  WinoPlan p;
  p.c = g.c, p.o = g.o, p.h = g.h, p.w = g.w, p.oh = g.oh, p.ow = g.ow, p.pt = g.pt, p.pl = g.pl;
  p.th = (g.oh + 3) / 4, p.tw = (g.ow + 3) / 4, p.tiles = p.th * p.tw;
  p.u_panels = u_pre != nullptr ? u_panels : 0;
  // Blocks of tb tiles, numbered across the batch (small images fill a block
  // from several): each of the 36 GEMMs re-packs U[xi], so blocks are as
  // wide as keeps a slice V[xi] ([C][tb]) or M[xi] ([O][tb]) at 64 KiB (all 36
  // of them, kept per thread, 2.3 MiB).
  p.tb = std::max<int64_t>(32, std::min<int64_t>(256, 16384 / std::max(g.c, g.o) / 32 * 32));
  const int64_t total = g.n * p.tiles;
  // At least one block per thread (batch 1: 56x56 is 196 tiles).
  const int64_t threads = NumIntraOpThreads();
  p.tb = std::min(p.tb, ((total + threads - 1) / threads + 31) / 32 * 32);
  // Not zero-filled: every element is written.
  ScratchBuffer<float> u(u_pre != nullptr ? 0 : 36 * g.o * g.c);
  if (u_pre == nullptr) {
    const FilterFn ffn = GetFilter();
    ParallelFor(g.o, g.c * 200, [&](int64_t o0, int64_t o1) { ffn(f, g.o, g.c, transposed, o0, o1, u.data()); });
  }
  const float* ud = u_pre != nullptr ? u_pre : u.data();
  const int64_t blocks = (total + p.tb - 1) / p.tb;
  // Where the GEMMs would pack U[xi] again for every block, pack it once
  // here (ResNet-18's 256-channel layers at batch 8, one thread: 14.9 ->
  // 9.9 ms per convolution with the panels made at import, Conv2DPacked).
  ScratchBuffer<float> panels(u_pre == nullptr && blocks > 1 && WinogradPanelsPay(g.o, g.c)
                                  ? 36 * PanelFloats(g.o, g.c) : 0);
  if (u_pre == nullptr && blocks > 1 && WinogradPanelsPay(g.o, g.c)) {
    const int64_t pf = PanelFloats(g.o, g.c);
    for (int xi = 0; xi < 36; ++xi) PackPanels(u.data() + xi * g.o * g.c, g.o, g.c, panels.data() + xi * pf);
    ud = panels.data(), p.u_panels = pf;
  }
  const BlockFn fn = Get();
  ParallelFor(blocks, p.tb * g.c * g.o * 36, [&](int64_t b0, int64_t b1) {
    // Kept per thread between calls (a fresh 1-2 MiB buffer per call faults
    // its pages in again).
    static thread_local std::vector<float> vbuf, mbuf;
    if (vbuf.size() < static_cast<size_t>(36 * p.c * p.tb)) vbuf.resize(static_cast<size_t>(36 * p.c * p.tb));
    if (mbuf.size() < static_cast<size_t>(36 * p.o * p.tb)) mbuf.resize(static_cast<size_t>(36 * p.o * p.tb));
    for (int64_t b = b0; b < b1; ++b) {
      fn(p, x, ud, bias, act, y, b * p.tb, std::min(total, (b + 1) * p.tb), vbuf.data(), mbuf.data());
    }
  });
}

#else  // no own GEMM in this build

bool WinogradApplies(const Geometry&) { return false; }
void WinogradForward(const Geometry&, const float*, const float*, const float*, Act, float*, bool, const float*,
                     int64_t) {}
void WinogradFilter(const float*, int64_t, int64_t, float*) {}

#endif

}  // namespace conv
}  // namespace opforge
