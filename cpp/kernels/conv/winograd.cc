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

#include "conv_tuning.h"
#include "packed_gemm.h"
#include "../common/claimed_for.h"

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
// Down to this many, the column-panel layout of U (WinogradColumnsApplies):
// ResNet-18's 14x14 3x3 layers at batch 1 (16 tiles) 1.83 ms against 2.3
// for onnxruntime and ~2.4 through im2col (one thread). At 7x7 (4 tiles)
// reading U (36 x 512 x 512 floats) costs more than it saves: 5.4 ms.
constexpr int64_t kMinColumnTiles = 16;

struct WinoPlan {
  int64_t c, o, h, w, oh, ow, pt, pl;
  int64_t th, tw, tiles;  // 4x4 output tiles per image
  int64_t tb;             // the most tiles in a block (a multiple of 32: whole GEMM panels)
  // Floats from V[xi] to V[xi + 1] (C x tb) and M[xi] to M[xi + 1] (O x tb),
  // plus a cache line: with 32 tiles and 64 channels the 36 slices one
  // transform reads or writes were 8 KiB apart, all in one L1 set.
  int64_t v_xi, m_xi;
  int64_t u_panels;       // > 0: U[xi] packed as GEMM panels, this many floats apart
  bool u_columns;         // those panels are column panels (ColumnPanelGemm: few tiles)
  int64_t y_img;          // floats between images' outputs
  const float* res;       // added before the activation (y's layout), or null
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
#define OF_WG_ROW_SEGMENTS "winograd_rows_avx2.inc"
#include "winograd_isa.inc"
#undef OF_WG_ROW_SEGMENTS
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
namespace avx512 {
constexpr int kBytes = 64;
#define OF_WG_ROW_SEGMENTS "winograd_rows_avx512.inc"
#include "winograd_isa.inc"
#undef OF_WG_ROW_SEGMENTS
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

// The phases of one block, each split over threads on its own (few tiles).
struct PhaseFns {
  void (*input)(const WinoPlan&, const float*, int64_t, int64_t, int64_t, int64_t, float*);
  void (*product)(const WinoPlan&, const float*, int64_t, int64_t, int, int, const float*, float*);
  void (*output)(const WinoPlan&, const float*, Act, float*, int64_t, int64_t, int64_t, int64_t, const float*);
};

PhaseFns GetPhases() {
  static const PhaseFns fns = [] {
#if defined(OF_WG_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return PhaseFns{&avx512::InputPhase, &avx512::ProductPhase, &avx512::OutputPhase};
    if (std::strcmp(isa, "avx2") == 0) return PhaseFns{&avx2::InputPhase, &avx2::ProductPhase, &avx2::OutputPhase};
#endif
    return PhaseFns{&baseline::InputPhase, &baseline::ProductPhase, &baseline::OutputPhase};
  }();
  return fns;
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

void SetSliceStrides(WinoPlan& p) { p.v_xi = p.c * p.tb + 16, p.m_xi = p.o * p.tb + 16; }

// Fewer tiles than a block (batch 1 at 14x14: 16 tiles): one block, each of
// its phases split over threads (input channels, the 36 products, output
// channels), U read as column panels (the tiles as the microkernel's rows,
// the output channels across its 32 columns; the usual layout would fill 16
// of them). Buffers kept per calling thread.
void FewTiles(WinoPlan& p, int64_t total, const float* x, const float* u, const float* bias, Act act, float* y) {
  p.tb = (total + 15) / 16 * 16;  // whole vectors of every ISA
  SetSliceStrides(p);
  static thread_local std::vector<float> vbuf, mbuf;
  if (vbuf.size() < static_cast<size_t>(36 * p.v_xi)) vbuf.resize(static_cast<size_t>(36 * p.v_xi));
  if (mbuf.size() < static_cast<size_t>(36 * p.m_xi)) mbuf.resize(static_cast<size_t>(36 * p.m_xi));
  float* v = vbuf.data();
  float* m = mbuf.data();
  const PhaseFns fns = GetPhases();
  ParallelFor(p.c, total * 36 * 8, [&](int64_t c0, int64_t c1) { fns.input(p, x, 0, total, c0, c1, v); });
  ParallelFor(36, p.o * p.c * p.tb, [&](int64_t x0, int64_t x1) {
    fns.product(p, u, 0, total, static_cast<int>(x0), static_cast<int>(x1), v, m);
  });
  ParallelFor(p.o, total * 36 * 8, [&](int64_t o0, int64_t o1) { fns.output(p, bias, act, y, 0, total, o0, o1, m); });
}

}  // namespace

bool WinogradFusesResidual() {
#if defined(OF_WG_X86)
  return std::strcmp(vmath::IsaName(), "avx512") == 0 || std::strcmp(vmath::IsaName(), "avx2") == 0;
#else
  return false;
#endif
}

bool WinogradApplies(const Geometry& g) {
  return Enabled() && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 &&
         g.c >= 16 && g.o >= 16 && g.oh >= 8 && g.ow >= 8 && g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4) >= kMinTiles;
}

bool WinogradColumnsApplies(const Geometry& g) {
  const int64_t tiles = g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4);
  return Enabled() && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 &&
         g.c >= 16 && g.o >= 16 && g.oh >= 8 && g.ow >= 8 && tiles >= kMinColumnTiles;
}

int64_t WinogradColumnFloats(int64_t o, int64_t c) { return ColumnPanelFloats(o, c); }

void WinogradFilter(const float* f, int64_t o, int64_t c, float* u) {
  const FilterFn ffn = GetFilter();
  ParallelFor(o, c * 200, [&](int64_t o0, int64_t o1) { ffn(f, o, c, false, o0, o1, u); });
}

void WinogradForward(const Geometry& g, const float* x, const float* f, const float* bias, Act act, float* y,
                     bool transposed, const float* u_pre, int64_t u_panels, bool u_columns, int64_t y_img,
                     const float* res) {
  WinoPlan p;
  p.res = res;
  p.c = g.c, p.o = g.o, p.h = g.h, p.w = g.w, p.oh = g.oh, p.ow = g.ow, p.pt = g.pt, p.pl = g.pl;
  p.y_img = y_img > 0 ? y_img : g.o * g.oh * g.ow;
  p.th = (g.oh + 3) / 4, p.tw = (g.ow + 3) / 4, p.tiles = p.th * p.tw;
  p.u_panels = u_pre != nullptr ? u_panels : 0;
  p.u_columns = u_pre != nullptr && u_columns;
  if (p.u_columns && g.n * p.tiles < kMinTiles) return FewTiles(p, g.n * p.tiles, x, u_pre, bias, act, y);
  // Blocks of tb tiles, numbered across the batch (small images fill a block
  // from several), at most WinogradMostTiles (conv_tuning.h: by CPU).
  const int64_t most = WinogradMostTiles(g.c, g.o);
  const int64_t total = g.n * p.tiles;
  // Blocks of whole 32-tile groups, as many as a multiple of the threads and
  // of even size (to a group), so every thread gets the same number of tiles:
  // fixed-size blocks left a ragged last one (batch 1 at 56x56, 196 tiles:
  // 128 + 68; batch 8: 4 blocks of 256 on one thread, 2 + 32 tiles on the
  // other), and the threads' shares are equal ranges of blocks.
  const int64_t groups = (total + 31) / 32;
  const int64_t threads = NumIntraOpThreads();
  int64_t blocks = (groups + most / 32 - 1) / (most / 32);
  blocks = std::min(groups, (blocks + threads - 1) / threads * threads);
  p.tb = (groups + blocks - 1) / blocks * 32;
  SetSliceStrides(p);
  // Not zero-filled: every element is written.
  ScratchBuffer<float> u(u_pre != nullptr ? 0 : 36 * g.o * g.c);
  if (u_pre == nullptr) {
    const FilterFn ffn = GetFilter();
    ParallelFor(g.o, g.c * 200, [&](int64_t o0, int64_t o1) { ffn(f, g.o, g.c, transposed, o0, o1, u.data()); });
  }
  const float* ud = u_pre != nullptr ? u_pre : u.data();
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
  // Blocks claimed (claimed_for.h): a thread that starts late takes fewer.
  ClaimedFor(blocks, p.tb * g.c * g.o * 36, [&](int64_t b) {
    // Kept per thread between calls (a fresh 1-2 MiB buffer per call faults
    // its pages in again).
    static thread_local std::vector<float> vbuf, mbuf;
    if (vbuf.size() < static_cast<size_t>(36 * p.v_xi)) vbuf.resize(static_cast<size_t>(36 * p.v_xi));
    if (mbuf.size() < static_cast<size_t>(36 * p.m_xi)) mbuf.resize(static_cast<size_t>(36 * p.m_xi));
    const int64_t t0 = groups * b / blocks * 32, t1 = std::min(total, groups * (b + 1) / blocks * 32);
    fn(p, x, ud, bias, act, y, t0, t1, vbuf.data(), mbuf.data());
  });
}

#else  // no own GEMM in this build

bool WinogradApplies(const Geometry&) { return false; }
bool WinogradColumnsApplies(const Geometry&) { return false; }
int64_t WinogradColumnFloats(int64_t, int64_t) { return 0; }
bool WinogradFusesResidual() { return false; }
void WinogradForward(const Geometry&, const float*, const float*, const float*, Act, float*, bool, const float*,
                     int64_t, bool, int64_t, const float*) {}
void WinogradFilter(const float*, int64_t, int64_t, float*) {}

#endif

}  // namespace conv
}  // namespace opforge
