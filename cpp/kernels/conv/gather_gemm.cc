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
// wrote and re-packed a 1.8 MB column matrix). Wider filters (> 16 row
// panels) lost when tried (before the phases were skipped and the panels
// grouped): its 128 -> 256 1x1 stride 2 0.17 -> 0.22 ms.
constexpr int64_t kMaxDepth = 4 * kKC;
constexpr int64_t kGroupFloats = 48 << 10;  // B floats of a group of pixel panels (192 KiB: L2)
constexpr int64_t kMaxGroup = 8;
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

// Floats a piece copy may run past its row of B or its plane (one panel row).
constexpr int64_t kSlack = 32;

// Rows [0, kc) of a pixel panel of NR columns whose n pixels span np runs of
// output rows: each run copied as a whole panel row of NR floats (a
// fixed-size, inlined copy) from its start, in order, so a later run and the
// next depth row overwrite what an earlier one copied past its length (the
// last row's overrun lands in the buffer's slack; columns past n are zeroed).
// A libc memcpy per run (2-3 per row where the output rows are 28, 54 or 109
// pixels wide) cost as much as the FMAs at K = 144: SqueezeNet's 16 -> 64
// expand 3x3 at 54x54 one thread 0.86-1.03 ms against onnxruntime's 0.40.
template <int NR>
void CopyPieces(float* bq, const float* const* bb, int64_t kc, const Piece* pq, int np, int n) {
  for (int64_t p = 0; p < kc; ++p) {
    float* d = bq + p * NR;
    const float* s = bb[p];
    for (int u = 0; u < np; ++u) std::memcpy(d + pq[u].col, s + pq[u].src, NR * sizeof(float));
    if (n < NR) std::fill(d + n, d + NR, 0.0f);
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
  // kSlack floats past the last plane: a piece copy (CopyPieces) reads a
  // whole panel row from its start, past the plane's end for the last taps.
  // Kept per calling thread between calls, as Winograd's buffers: a fresh
  // 0.2-0.9 MB buffer per call faulted its pages in again (clear_page in a
  // profile of SqueezeNet b1).
  const int64_t plane_floats = g.c * g.sh * g.sw * ps.plane();
  static thread_local std::vector<float> plane_buf;
  if (plane_buf.size() < static_cast<size_t>(plane_floats + kSlack)) {
    plane_buf.resize(static_cast<size_t>(plane_floats + kSlack));
  }
  float* const planes_data = plane_buf.data();
  std::fill(planes_data + plane_floats, planes_data + plane_floats + kSlack, 0.0f);
  if (threads) {
    ParallelFor(g.c, g.sh * g.sw * ps.plane(), [&](int64_t c0, int64_t c1) { BuildPhases(g, ps, x, c0, c1, planes_data); });
  } else {
    BuildPhases(g, ps, x, 0, g.c, planes_data);
  }
  std::vector<const float*> base(static_cast<size_t>(K));  // each tap's (row of the column matrix) plane origin
  for (int64_t c = 0, p = 0; c < g.c; ++c) {
    for (int64_t a = 0; a < g.kh; ++a) {
      for (int64_t b = 0; b < g.kw; ++b, ++p) {
        const int64_t rp = a * g.dh % g.sh, cp = b * g.dw % g.sw;
        base[p] = planes_data + ((c * g.sh + rp) * g.sw + cp) * ps.plane() + a * g.dh / g.sh * ps.wq + b * g.dw / g.sw;
      }
    }
  }
  const bool epilogue = bias != nullptr || act != Act::kNone;
  const bool reg_epi = kr.packed_epi[0] != nullptr;
  const int64_t mp = (g.o + mr - 1) / mr * mr;  // PackPanels' rows: block pc's panels start at panels + pc * mp
  // Pixel panels in groups of up to kGroupFloats of B (L2): each row panel
  // of the filter (L1) runs over the whole group, so a tile's stores land
  // next to the previous tile's in the same 12 output rows instead of 12
  // rows a plane apart for every tile (a cache miss each). Isolated 12 x 32
  // tiles at K = 147 storing to a 4.5 MB output: 101-105 GF/s panel by
  // panel, 108 with the next tile's lines prefetched, 110 grouped; 111
  // storing into L1.
  const int64_t kc_max = std::min(K, kKC);
  const int64_t group = std::max<int64_t>(1, std::min<int64_t>(kMaxGroup, kGroupFloats / (kc_max * nr)));
  auto run = [&](int64_t q0, int64_t q1) {
    static thread_local std::vector<float> buf;
    const size_t need = static_cast<size_t>(group * kc_max * nr + 16 + kSlack);  // + a piece's overrun
    if (buf.size() < need) buf.resize(need);
    float* bp = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
    std::vector<Piece> pieces(static_cast<size_t>(group * (nr + 1)));
    std::vector<int> pcount(static_cast<size_t>(group));
    gemm::TileEpilogue ep{nullptr, nullptr, PanelActivation(act), nullptr, 0, false};
    for (int64_t qg = q0; qg < q1; qg += group) {
      const int64_t qe = std::min(q1, qg + group);
      for (int64_t q = qg; q < qe; ++q) {  // each panel's runs of output rows
        const int64_t t0 = q * nr;
        const int n = static_cast<int>(std::min<int64_t>(nr, P - t0));
        Piece* pq = pieces.data() + (q - qg) * (nr + 1);
        int np = 0;
        for (int64_t t = t0; t < t0 + n; ++np) {
          const int64_t i = t / g.ow, j = t % g.ow, len = std::min(g.ow - j, t0 + n - t);
          pq[np] = Piece{i * ps.wq + j, static_cast<int>(t - t0), static_cast<int>(len)};
          t += len;
        }
        pcount[static_cast<size_t>(q - qg)] = np;
      }
      // Depth blocks of kKC (the panels' layout): each block's rows of the
      // group's pixel panels copied, then every row panel run over them, C
      // accumulated (beta 1) after the first block, the epilogue on the last.
      for (int64_t pc = 0; pc < K; pc += kKC) {
        const int64_t kc = std::min(kKC, K - pc);
        const float* const* bb = base.data() + pc;
        for (int64_t q = qg; q < qe; ++q) {
          const int n = static_cast<int>(std::min<int64_t>(nr, P - q * nr));
          const Piece* pq = pieces.data() + (q - qg) * (nr + 1);
          const int np = pcount[static_cast<size_t>(q - qg)];
          float* bq = bp + (q - qg) * kc * nr;
          if (np == 1 && n == nr && nr == 32) {  // a whole panel inside one output row: fixed-size copies
            for (int64_t p = 0; p < kc; ++p) std::memcpy(bq + p * 32, bb[p] + pq[0].src, 32 * sizeof(float));
          } else if (nr == 32) {
            CopyPieces<32>(bq, bb, kc, pq, np, n);
          } else if (nr == 16) {
            CopyPieces<16>(bq, bb, kc, pq, np, n);
          } else {
            for (int64_t p = 0; p < kc; ++p) {
              float* d = bq + p * nr;
              for (int u = 0; u < np; ++u) std::memcpy(d + pq[u].col, bb[p] + pq[u].src, sizeof(float) * pq[u].len);
              std::fill(d + n, d + nr, 0.0f);
            }
          }
        }
        const bool last = pc + kc >= K;
        const float beta = pc == 0 ? 0.0f : 1.0f;
        const float* ablk = panels + pc * mp;
        for (int64_t ir = 0; ir < g.o; ir += mr) {
          const int rows = static_cast<int>(std::min<int64_t>(mr, g.o - ir));
          const float* bi = bias != nullptr ? bias + ir : nullptr;
          for (int64_t q = qg; q < qe; ++q) {
            const int64_t t0 = q * nr;
            const int n = static_cast<int>(std::min<int64_t>(nr, P - t0));
            const float* bq = bp + (q - qg) * kc * nr;
            float* cq = y + ir * P + t0;
            if (last && epilogue && reg_epi) {
              ep.bias_row = bi;
              kr.packed_epi[rows - 1](kc, ablk + ir * kc, 1, mr, bq, nr, cq, P, n, 1.0f, beta, ep);
              continue;
            }
            kr.packed[rows - 1](kc, ablk + ir * kc, 1, mr, bq, nr, cq, P, n, 1.0f, beta);
            if (last && epilogue) BiasActTile(act, cq, P, bi, rows, n);
          }
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
