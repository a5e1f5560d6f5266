// The implicit-GEMM convolution of gather_gemm.h: phase planes, then pixel
// panels copied from them into the microkernel's B layout, each panel run
// against every row panel of the prepacked filter while it is in L1.
#include "gather_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "opforge/parallel.h"

#include "depthwise.h"
#include "im2col.h"
#include "panel_kernels.h"

namespace opforge {
namespace conv {

#ifdef OF_CONV_OWN_SGEMM
namespace {

constexpr int64_t kKC = 256;          // PackPanels' depth block (packed_gemm.cc)
// Up to 4 depth blocks, each pixel panel's block copied and run against
// every row panel in turn (the filter, <= 768 KiB, stays in L2). ResNet-18's
// 64 -> 128 3x3 stride 2 (K = 576) b1 one thread: 1.33 -> 1.23 ms (im2col
// wrote and re-packed a 1.8 MB column matrix); wider filters (> 16 row
// panels) lost: its 128 -> 256 1x1 stride 2 0.17 -> 0.22 ms.
constexpr int64_t kMaxDepth = 4 * kKC;
constexpr int64_t kMaxRowPanels = 16;  // the filter's row panels (192 rows on AVX-512): kept in L2
constexpr int64_t kMinParallelFma = 128 * 128 * 128;

// Plane (c, rp, cp) of the phase split: [hq][wq] with element (r, q) =
// x[c][sh * r + rp - pt][sw * q + cp - pl], 0 outside x. Tap (a, b) of
// output (i, j) is element (i + a * dh / sh, j + b * dw / sw) of plane
// (c, a * dh % sh, b * dw % sw).
struct PhaseShape {
  int64_t hq, wq;
  explicit PhaseShape(const Geometry& g)
      : hq(g.oh + (g.kh - 1) * g.dh / g.sh), wq(g.ow + (g.kw - 1) * g.dw / g.sw) {}
  int64_t plane() const { return hq * wq; }
};

// Whether some tap reads row phase rp (cp: column phase): a 1x1 stride-2
// conv reads one plane of four, a 3x3 stride-4 three rows of four.
bool PhaseRead(int64_t taps, int64_t dil, int64_t stride, int64_t phase) {
  for (int64_t a = 0; a < taps; ++a) {
    if (a * dil % stride == phase) return true;
  }
  return false;
}

void BuildPhases(const Geometry& g, const PhaseShape& ps, const float* x, int64_t c0, int64_t c1, float* planes) {
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t rp = 0; rp < g.sh; ++rp) {
      if (!PhaseRead(g.kh, g.dh, g.sh, rp)) continue;
      for (int64_t cp = 0; cp < g.sw; ++cp) {
        if (!PhaseRead(g.kw, g.dw, g.sw, cp)) continue;
        float* pl = planes + ((c * g.sh + rp) * g.sw + cp) * ps.plane();
        const int64_t off = cp - g.pl;
        int64_t q0, q1;
        ValidRange(off, g.sw, g.w, ps.wq, &q0, &q1);
        for (int64_t r = 0; r < ps.hq; ++r) {
          float* d = pl + r * ps.wq;
          const int64_t ih = g.sh * r + rp - g.pt;
          if (ih < 0 || ih >= g.h) {
            std::fill(d, d + ps.wq, 0.0f);
            continue;
          }
          const float* xr = x + (c * g.h + ih) * g.w;  // element q reads xr[sw * q + off]
          std::fill(d, d + q0, 0.0f);
          int64_t q = q0;
          if (g.sw == 1) {
            std::memcpy(d + q0, xr + q0 + off, sizeof(float) * (q1 - q0));
            q = q1;
          } else if (g.sw == 2) {  // whole vectors while they stay inside x's row (as Im2ColRange)
            const int64_t vec = std::max<int64_t>(0, std::min(q1 - q0, (g.w - off - 2 * q0) / 2));
            GatherStride2(xr + 2 * q0 + off, d + q0, vec);
            q = q0 + vec;
          }
          for (; q < q1; ++q) d[q] = xr[g.sw * q + off];
          std::fill(d + q1, d + ps.wq, 0.0f);
        }
      }
    }
  }
}

// A run of one output row inside a pixel panel: `len` pixels from panel
// column `col`, read from offset `src` of every tap's plane row base.
struct Piece {
  int64_t src;
  int col, len;
};

// The output lines of the next tile, `rows` rows of nr floats ldc apart,
// fetched while this one computes: a tile's stores go to rows a plane
// apart, each a cache miss (a 12 x 32 tile at K = 147 storing to a 4.5 MB
// output: 101-104 GF/s, 108 with this, 111 into L1; stem b1 see
// gather_gemm.h).
inline void PrefetchTile(const float* c, int64_t ldc, int rows, int nr) {
  if (c == nullptr) return;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < nr; j += 16) __builtin_prefetch(c + i * ldc + j, 1, 3);
  }
}

}  // namespace

bool GatherGemmApplies(const Geometry& g) {
  const int64_t mr = PanelKernels().mr;
  return g.groups == 1 && !g.pointwise() && g.k() <= kMaxDepth && (g.o + mr - 1) / mr <= kMaxRowPanels && g.p() > 0;
}

void GatherGemm(const Geometry& g, const float* x, const float* panels, const float* bias, Act act, float* y,
                bool parallel) {
  const gemm::Kernels& kr = PanelKernels();
  const int mr = kr.mr, nr = kr.nr;
  const int64_t K = g.k(), P = g.p(), npanels = (P + nr - 1) / nr;
  const bool threads = parallel && g.o * P * K >= kMinParallelFma && NumIntraOpThreads() > 1;
  const PhaseShape ps(g);
  ScratchBuffer<float> planes(g.c * g.sh * g.sw * ps.plane());
  if (threads) {
    ParallelFor(g.c, g.sh * g.sw * ps.plane(), [&](int64_t c0, int64_t c1) { BuildPhases(g, ps, x, c0, c1, planes.data()); });
  } else {
    BuildPhases(g, ps, x, 0, g.c, planes.data());
  }
  std::vector<const float*> base(static_cast<size_t>(K));  // each tap's (row of the column matrix) plane origin
  for (int64_t c = 0, p = 0; c < g.c; ++c) {
    for (int64_t a = 0; a < g.kh; ++a) {
      for (int64_t b = 0; b < g.kw; ++b, ++p) {
        const int64_t rp = a * g.dh % g.sh, cp = b * g.dw % g.sw;
        base[p] = planes.data() + ((c * g.sh + rp) * g.sw + cp) * ps.plane() + a * g.dh / g.sh * ps.wq + b * g.dw / g.sw;
      }
    }
  }
  const bool epilogue = bias != nullptr || act != Act::kNone;
  const bool reg_epi = kr.packed_epi[0] != nullptr;
  const int64_t mp = (g.o + mr - 1) / mr * mr;  // PackPanels' rows: block pc's panels start at panels + pc * mp
  auto run = [&](int64_t q0, int64_t q1) {
    static thread_local std::vector<float> buf;
    const int64_t kc_max = std::min(K, kKC);
    if (buf.size() < static_cast<size_t>(kc_max * nr + 16)) buf.resize(static_cast<size_t>(kc_max * nr + 16));
    float* bp = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
    std::vector<Piece> pieces(static_cast<size_t>(nr) + 1);
    gemm::TileEpilogue ep{nullptr, nullptr, PanelActivation(act), nullptr, 0, false};
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t t0 = q * nr;
      const int n = static_cast<int>(std::min<int64_t>(nr, P - t0));
      int np = 0;
      for (int64_t t = t0; t < t0 + n; ++np) {
        const int64_t i = t / g.ow, j = t % g.ow, len = std::min(g.ow - j, t0 + n - t);
        pieces[np] = Piece{i * ps.wq + j, static_cast<int>(t - t0), static_cast<int>(len)};
        t += len;
      }
      // Depth blocks of kKC (the panels' layout): each block's rows of the
      // pixel panel copied, then run against every row panel, C
      // accumulated (beta 1) after the first, the epilogue on the last.
      for (int64_t pc = 0; pc < K; pc += kKC) {
        const int64_t kc = std::min(kKC, K - pc);
        const float* const* bb = base.data() + pc;
        if (np == 1 && n == nr && nr == 32) {  // a whole panel inside one output row: fixed-size copies
          for (int64_t p = 0; p < kc; ++p) std::memcpy(bp + p * 32, bb[p] + pieces[0].src, 32 * sizeof(float));
        } else {
          for (int64_t p = 0; p < kc; ++p) {
            float* d = bp + p * nr;
            for (int u = 0; u < np; ++u) {
              std::memcpy(d + pieces[u].col, bb[p] + pieces[u].src, sizeof(float) * pieces[u].len);
            }
            std::fill(d + n, d + nr, 0.0f);
          }
        }
        const bool first = pc == 0, last = pc + kc >= K;
        const float beta = first ? 0.0f : 1.0f;
        const float* ablk = panels + pc * mp;
        for (int64_t ir = 0; ir < g.o; ir += mr) {
          const int rows = static_cast<int>(std::min<int64_t>(mr, g.o - ir));
          float* cq = y + ir * P + t0;
          if (first) {  // later blocks find C in cache
            PrefetchTile(ir + mr < g.o ? cq + mr * P : last && t0 + nr < P ? y + t0 + nr : nullptr, P,
                         static_cast<int>(std::min<int64_t>(mr, ir + mr < g.o ? g.o - ir - mr : g.o)), nr);
          }
          const float* bi = bias != nullptr ? bias + ir : nullptr;
          if (last && epilogue && reg_epi) {
            ep.bias_row = bi;
            kr.packed_epi[rows - 1](kc, ablk + ir * kc, 1, mr, bp, nr, cq, P, n, 1.0f, beta, ep);
            continue;
          }
          kr.packed[rows - 1](kc, ablk + ir * kc, 1, mr, bp, nr, cq, P, n, 1.0f, beta);
          if (last && epilogue) BiasActTile(act, cq, P, bi, rows, n);
        }
      }
    }
  };
  if (threads) {
    ParallelFor(npanels, K * nr * g.o, run);
  } else {
    run(0, npanels);
  }
}

#else  // no own GEMM in this build

bool GatherGemmApplies(const Geometry&) { return false; }
void GatherGemm(const Geometry&, const float*, const float*, const float*, Act, float*, bool) {}

#endif

}  // namespace conv
}  // namespace opforge
