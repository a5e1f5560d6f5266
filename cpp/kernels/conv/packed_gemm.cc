// The GEMM over prepacked filter panels (packed_gemm.h): the BLIS loop nest
// of cpp/kernels/gemm/sgemm.cc with A already packed, on the same
// microkernels (chosen by the same ISA name, so OPFORGE_SIMD caps both).
#include "packed_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "opforge/parallel.h"

#include "../common/claimed_for.h"

#include "depthwise.h"
#include "panel_kernels.h"

#ifdef OF_CONV_OWN_SGEMM
#include "../gemm/microkernel.h"
#endif

namespace opforge {
namespace conv {

#ifdef OF_CONV_OWN_SGEMM
namespace {

constexpr int64_t kKC = 256;       // depth of a block (as sgemm.cc)
constexpr int64_t kMCPanels = 16;  // A panels per L2 block
constexpr int64_t kNC = 3072;      // columns per B block
constexpr int64_t kMinParallelFma = 128 * 128 * 128;
constexpr int64_t kGroupFloats = 48 << 10;  // B floats of a group of column panels (192 KiB: L2)

const gemm::Kernels& Get() {
  static const gemm::Kernels* k = [] {
    const char* isa = gemm::SgemmIsa();
    if (std::strcmp(isa, "avx512") == 0 && gemm::Avx512Kernels() != nullptr) return gemm::Avx512Kernels();
    if (std::strcmp(isa, "avx2") == 0 && gemm::Avx2Kernels() != nullptr) return gemm::Avx2Kernels();
    return gemm::GenericKernels();
  }();
  return *k;
}

int64_t Padded(int64_t m, int mr) { return (m + mr - 1) / mr * mr; }

// B read in place (not packed) when at most this many row panels reuse each
// column panel: packing then costs more than the strided reads it saves
// (SqueezeNet's and MobileNet's narrow 1x1 convolutions).
constexpr int64_t kInPlacePanels = 4;
constexpr int64_t kStreamFloats = 65536;  // a row-packed block of B (256 KiB)

// The microkernels' in-register activation for `act` (gemm::Activation or
// gemm::kTileHardSwish).
int RegisterActivation(Act act) {
  switch (act) {
    case Act::kNone: return static_cast<int>(gemm::Activation::kNone);
    case Act::kRelu: return static_cast<int>(gemm::Activation::kRelu);
    case Act::kSigmoid: return static_cast<int>(gemm::Activation::kSigmoid);
    case Act::kSilu: return static_cast<int>(gemm::Activation::kSilu);
    case Act::kHardSwish: return gemm::kTileHardSwish;
  }
  return -1;
}

// For a column panel at most 16 wide under the 12 x 32 AVX-512 tile: the
// AVX2 table, whose 6 x 16 tiles read the same packed panels strided (A:
// a_cs = 12; B: the first 16 of each packed row's 32 floats) and do half
// the work (two 6 x 16 ymm tiles run at the rate of one 12 x 32 zmm tile
// where AVX-512 is two 256-bit halves (Zen 4), no slower where it is not).
// SqueezeNet's 512 -> 1000 classifier (169 pixels: 5 panels and 9
// columns) b1 one thread 1.82 -> 1.68 ms. Null where that table is absent.
const gemm::Kernels* HalfKernels(const gemm::Kernels& kr) {
  static const gemm::Kernels* half = [&]() -> const gemm::Kernels* {
    const gemm::Kernels* k2 = gemm::Avx2Kernels();
    if (kr.nr != 32 || kr.mr != 12 || k2 == nullptr || k2->nr != 16 || kr.mr % k2->mr != 0) return nullptr;
    return k2->strided_epi[0] == nullptr ? nullptr : k2;
  }();
  return half;
}

// The tile of rows [ir, ir + rows) x the n <= 16 columns at c as `half`'s
// strided tiles over panel rows a (a_cs = mr) and B rows b (b_ld apart).
void HalfTile(const gemm::Kernels& half, int mr, int64_t kc, const float* a, int rows, const float* b, int64_t bld,
              float* c, int64_t ldc, int n, float beta, bool epi, const gemm::TileEpilogue& ep, int64_t ldr) {
  for (int s = 0; s < rows; s += half.mr) {
    const int r = std::min(half.mr, rows - s);
    if (epi) {
      gemm::TileEpilogue e = ep;
      if (e.bias_row != nullptr) e.bias_row += s;
      if (e.residual != nullptr) e.residual += s * ldr;
      half.strided_epi[r - 1](kc, a + s, 1, mr, b, bld, c + s * ldc, ldc, n, 1.0f, beta, e);
    } else {
      half.strided[r - 1](kc, a + s, 1, mr, b, bld, c + s * ldc, ldc, n, 1.0f, beta);
    }
  }
}

// c[i, j] += r[i, j] over a rows x n tile (no in-register epilogue: the
// residual goes before the pass's bias and activation).
void AddTile(float* c, int64_t ldc, const float* r, int64_t ldr, int64_t rows, int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += r[i * ldr + j];
  }
}

// The next pixel panel of a B read in place (kc rows, ldb apart): each row
// is a separate stream (one per input channel), more than the hardware
// prefetchers follow, so every row's first load missed to L2 or L3.
inline void PrefetchPanel(const float* b, int64_t ldb, int64_t kc, int nr) {
  for (int64_t p = 0; p < kc; ++p) {
    for (int f = 0; f < nr; f += 16) __builtin_prefetch(b + p * ldb + f);
  }
}

// Rows [i0, i1) (i0 a multiple of mr) by columns [j0, j1) of C.
void Tile(const gemm::Kernels& kr, const float* panels, int64_t m, int64_t k, const float* b, int64_t ldb,
          float* c, int64_t ldc, const float* bias, Act act, const float* res, int64_t ldr, int64_t i0, int64_t i1,
          int64_t j0, int64_t j1, bool stream_b) {
  const int mr = kr.mr, nr = kr.nr;
  const int64_t mp = Padded(m, mr), MC = kMCPanels * mr;
  const bool epilogue = bias != nullptr || act != Act::kNone || res != nullptr;
  const bool few = (i1 - i0 + mr - 1) / mr <= kInPlacePanels;
  // B from L3 (stream_b): its strided panels (rows ldb apart, 32 floats of
  // each) miss on every row, so B is packed row by row instead (each row's
  // run of columns read in order), in blocks of 64K floats that stay in L2:
  // SqueezeNet's 96 -> 16 1x1 at batch 8, 2.9 -> 1.5 ms (one thread).
  const bool stream = few && stream_b;
  const bool in_place = few && !stream;
  const int64_t kNCb = stream ? std::max<int64_t>(nr, kStreamFloats / std::min(k, kKC) / nr * nr) : kNC;
  // Bias and activation on the accumulators before the store where the
  // microkernel has them (AVX-512): a pass over the stored tile cost
  // EfficientNet-B0 7% and MobileNetV3 5% more (one thread, batch 1 / 8).
  gemm::TileEpilogue ep{nullptr, nullptr, RegisterActivation(act), nullptr, ldr, res != nullptr};
  const bool reg_epi = epilogue && kr.packed_epi[0] != nullptr;
  const gemm::Kernels* half = HalfKernels(kr);
  static thread_local std::vector<float> bbuf;
  const int64_t need = (std::min(kNCb, j1 - j0) + nr - 1) / nr * nr * std::min(k, kKC) + 16;
  if (static_cast<int64_t>(bbuf.size()) < need) bbuf.resize(static_cast<size_t>(need));
  float* bpack = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(bbuf.data()) + 63) & ~uintptr_t{63});
  for (int64_t jc = j0; jc < j1; jc += kNCb) {
    const int64_t nc = std::min(kNCb, j1 - jc), npanels = (nc + nr - 1) / nr;
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const float beta = pc == 0 ? 0.0f : 1.0f;
      if (stream) {
        const int64_t full = nc / nr;
        for (int64_t p = 0; p < kc; ++p) {
          const float* src = b + (pc + p) * ldb + jc;
          for (int64_t q = 0; q < full; ++q) std::memcpy(bpack + q * kc * nr + p * nr, src + q * nr, sizeof(float) * nr);
        }
      }
      for (int64_t q = stream ? nc / nr : 0; q < npanels; ++q) {
        const int64_t j = jc + q * nr;
        if (in_place && jc + nc - j >= nr) continue;  // a full panel, read where it is
        kr.pack_b(b + pc * ldb + j, ldb, 1, std::min<int64_t>(nr, jc + nc - j), kc, bpack + q * kc * nr);
      }
      const float* ablk = panels + pc * mp;
      const bool last = pc + kc >= k;
      // Packed B: column panels in groups of up to kGroupFloats (L2), each
      // row panel of A run over the whole group, so a tile's stores
      // continue the previous tile's rows (panel by panel, every tile
      // stored to mr rows ldc apart: a cache miss each; gather_gemm.cc).
      // SqueezeNet b8 one thread 126.9 -> 119.7 ms (fire modules 7-15%,
      // the 512 -> 1000 classifier 7%), b1 level. B read in place keeps
      // panel by panel (each panel read once).
      const int64_t group = in_place || stream ? 1 : std::max<int64_t>(1, kGroupFloats / (kc * nr));
      for (int64_t ic = i0; ic < i1; ic += MC) {
        const int64_t mc = std::min(MC, i1 - ic);
        for (int64_t qg = 0; qg < npanels; qg += group)
        for (int64_t ir = ic; ir < ic + mc; ir += mr)
        for (int64_t q = qg; q < std::min(npanels, qg + group); ++q) {
          if (in_place && ir == ic && q + 1 < npanels) PrefetchPanel(b + pc * ldb + jc + (q + 1) * nr, ldb, kc, nr);
          const int64_t jr = jc + q * nr;
          const int n = static_cast<int>(std::min<int64_t>(nr, jc + nc - jr));
          const bool direct = in_place && n == nr;
          const float* bq = direct ? b + pc * ldb + jr : bpack + q * kc * nr;
          const int64_t bld = direct ? ldb : nr;
          {
            const int rows = static_cast<int>(std::min<int64_t>(mr, ic + mc - ir));
            if (half != nullptr && n <= 16 && (reg_epi || !last || !epilogue)) {
              ep.bias_row = bias != nullptr ? bias + ir : nullptr;
              ep.residual = res != nullptr ? res + ir * ldr + jr : nullptr;
              HalfTile(*half, mr, kc, ablk + ir * kc, rows, bq, bld, c + ir * ldc + jr, ldc, n, beta, reg_epi && last, ep,
                       ldr);
              continue;
            }
            if (reg_epi && last) {
              ep.bias_row = bias != nullptr ? bias + ir : nullptr;
              ep.residual = res != nullptr ? res + ir * ldr + jr : nullptr;
              kr.packed_epi[rows - 1](kc, ablk + ir * kc, 1, mr, bq, bld, c + ir * ldc + jr, ldc, n, 1.0f, beta, ep);
              continue;
            }
            kr.packed[rows - 1](kc, ablk + ir * kc, 1, mr, bq, bld, c + ir * ldc + jr, ldc, n, 1.0f, beta);
            // Else the epilogue on the register tile just stored, while it is
            // in L1 (a pass over whole rows afterwards made SiLU cost 2x).
            if (epilogue && last) {
              if (res != nullptr) AddTile(c + ir * ldc + jr, ldc, res + ir * ldr + jr, ldr, rows, n);
              BiasActTile(act, c + ir * ldc + jr, ldc, bias != nullptr ? bias + ir : nullptr, rows, n);
            }
          }
        }
      }
    }
  }
}

}  // namespace

const gemm::Kernels& PanelKernels() { return Get(); }
int PanelActivation(Act act) { return RegisterActivation(act); }

const char* PanelLayout() { return Get().name; }
int PanelRows() { return Get().mr; }

int64_t PanelFloats(int64_t m, int64_t k) { return Padded(m, Get().mr) * k; }

namespace {

// a [m, k] row-major as panels of r rows (kc-deep blocks; rows past m zero).
void PackRows(const float* a, int64_t m, int64_t k, int r, float* panels) {
  const int64_t mp = Padded(m, r);
  ParallelFor(mp / r, k * r, [&](int64_t p0, int64_t p1) {
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      for (int64_t pn = p0; pn < p1; ++pn) {
        float* dst = panels + pc * mp + pn * r * kc;
        for (int64_t p = 0; p < kc; ++p) {
          for (int i = 0; i < r; ++i) {
            const int64_t row = pn * r + i;
            dst[p * r + i] = row < m ? a[row * k + pc + p] : 0.0f;
          }
        }
      }
    }
  });
}

}  // namespace

void PackPanels(const float* a, int64_t m, int64_t k, float* panels) { PackRows(a, m, k, Get().mr, panels); }

int PanelCols() { return Get().nr; }
int64_t ColumnPanelFloats(int64_t m, int64_t k) { return Padded(m, Get().nr) * k; }
void PackColumnPanels(const float* a, int64_t m, int64_t k, float* panels) { PackRows(a, m, k, Get().nr, panels); }

namespace {

// The pixels (pixel j, depth p at src[j * rs + p * cs]; j < n, p < k) as
// the microkernel's A panels: mr pixels per panel, kc-deep blocks.
void PackPixels(const float* src, int64_t rs, int64_t cs, int64_t n, int64_t k, int mr, float* at) {
  const int64_t np = Padded(n, mr);
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    for (int64_t pn = 0; pn < np / mr; ++pn) {
      float* dst = at + pc * np + pn * mr * kc;
      const int64_t j0 = pn * mr, cols = std::min<int64_t>(mr, n - j0);
      for (int64_t p = 0; p < kc; ++p) {
        const float* s = src + j0 * rs + (pc + p) * cs;
        for (int i = 0; i < cols; ++i) dst[p * mr + i] = s[i * rs];
        for (int i = static_cast<int>(cols); i < mr; ++i) dst[p * mr + i] = 0.0f;
      }
    }
  }
}

// CT[n, m] (row stride ldct) = the pixels `at` (PackPixels) times the
// filter's column panels, with act(. + bias[i] + R[j, i]) (R: row stride
// ldr, may be null) on the accumulators where the ISA has that epilogue;
// returns whether it did (else CT holds the bare product).
bool ColumnCore(const gemm::Kernels& kr, const float* panels, int64_t m, int64_t n, int64_t k, const float* at,
                float* ct, int64_t ldct, const float* bias, Act act, const float* res, int64_t ldr, bool parallel) {
  const int mr = kr.mr, nr = kr.nr;
  const int64_t np = Padded(n, mr), mp = Padded(m, nr);
  gemm::TileEpilogue ep{nullptr, nullptr, RegisterActivation(act), nullptr, ldr, res != nullptr};
  const bool reg_epi = kr.packed_epi[0] != nullptr;
  // By column panels of m (the output channels); each task its own.
  const int64_t units = mp / nr;
  auto run = [&](int64_t q0, int64_t q1) {
    gemm::TileEpilogue e = ep;  // its bias_col and residual are per tile
    for (int64_t q = q0; q < q1; ++q) {
      const int cols = static_cast<int>(std::min<int64_t>(nr, m - q * nr));
      for (int64_t pc = 0; pc < k; pc += kKC) {
        const int64_t kc = std::min(kKC, k - pc);
        const float* bq = panels + pc * mp + q * nr * kc;
        const float beta = pc == 0 ? 0.0f : 1.0f;
        const bool last = pc + kc >= k;
        for (int64_t pn = 0; pn < np / mr; ++pn) {
          const int rows = static_cast<int>(std::min<int64_t>(mr, n - pn * mr));
          const float* ap = at + pc * np + pn * mr * kc;
          float* cq = ct + pn * mr * ldct + q * nr;
          if (reg_epi && last) {
            e.bias_col = bias != nullptr ? bias + q * nr : nullptr;
            e.residual = res != nullptr ? res + pn * mr * ldr + q * nr : nullptr;
            kr.packed_epi[rows - 1](kc, ap, 1, mr, bq, nr, cq, ldct, cols, 1.0f, beta, e);
          } else {
            kr.packed[rows - 1](kc, ap, 1, mr, bq, nr, cq, ldct, cols, 1.0f, beta);
          }
        }
      }
    }
  };
  const int64_t threads = parallel && m * n * k >= kMinParallelFma ? std::min<int64_t>(NumIntraOpThreads(), units) : 1;
  if (threads <= 1) {
    run(0, units);
  } else {
    ClaimedFor(units, n * k * nr, [&](int64_t q) { run(q, q + 1); });  // a late thread takes fewer panels
  }
  return reg_epi;
}

}  // namespace

void ColumnPanelGemm(const float* panels, int64_t m, int64_t n, int64_t k, const float* b, int64_t ldb, float* c,
                     int64_t ldc, const float* bias, Act act, bool parallel, const float* residual, int64_t ldr) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return PanelGemm(panels, m, n, k, b, ldb, c, ldc, bias, act, parallel, residual, ldr);  // no panels
  // The residual is [m, n]; this product runs transposed: it is added in the
  // pass that transposes back, before the bias and activation.
  if (residual != nullptr) {
    ColumnPanelGemm(panels, m, n, k, b, ldb, c, ldc, nullptr, Act::kNone, parallel);
    ParallelFor(m, n * 2, [&](int64_t i0, int64_t i1) {
      AddTile(c + i0 * ldc, ldc, residual + i0 * ldr, ldr, i1 - i0, n);
      BiasActTile(act, c + i0 * ldc, ldc, bias != nullptr ? bias + i0 : nullptr, i1 - i0, n);
    });
    return;
  }
  const gemm::Kernels& kr = Get();
  // B^T (the pixels) as the microkernel's A panels.
  ScratchBuffer<float> at(Padded(n, kr.mr) * std::max<int64_t>(k, 1)), ct(n * m);
  PackPixels(b, 1, ldb, n, k, kr.mr, at.data());
  const bool done = ColumnCore(kr, panels, m, n, k, at.data(), ct.data(), m, bias, act, nullptr, 0, parallel);
  // C = (C^T)^T, then the epilogue the microkernel lacked (the generic ISA).
  const bool after = !done && (bias != nullptr || act != Act::kNone);
  ParallelFor(m, n * 2, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) ci[j] = ct.data()[j * m + i];
      if (after) BiasActRows(act, ci, bias != nullptr ? bias + i : nullptr, 1, n);
    }
  });
}

void ColumnPanelGemmRows(const float* panels, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, float* y,
                         int64_t ldy, const float* bias, Act act, bool parallel, const float* residual, int64_t ldr) {
  if (m <= 0 || n <= 0) return;
  const gemm::Kernels& kr = Get();
  bool done = false;
  if (k > 0) {
    ScratchBuffer<float> at(Padded(n, kr.mr) * k);
    PackPixels(a, lda, 1, n, k, kr.mr, at.data());
    done = ColumnCore(kr, panels, m, n, k, at.data(), y, ldy, bias, act, residual, ldr, parallel);
  } else {
    for (int64_t j = 0; j < n; ++j) std::fill(y + j * ldy, y + j * ldy + m, 0.0f);
  }
  if (done) return;
  for (int64_t j = 0; j < n; ++j) {  // the epilogue after the product (the generic ISA), bias per column
    float* yj = y + j * ldy;
    for (int64_t i = 0; i < m; ++i) yj[i] += (residual != nullptr ? residual[j * ldr + i] : 0.0f) + (bias != nullptr ? bias[i] : 0.0f);
    BiasActRows(act, yj, nullptr, 1, m);
  }
}

void PanelGemm(const float* panels, int64_t m, int64_t n, int64_t k, const float* b, int64_t ldb, float* c,
               int64_t ldc, const float* bias, Act act, bool parallel, const float* residual, int64_t ldr,
               bool stream_b) {
  if (m <= 0 || n <= 0) return;
  const gemm::Kernels& kr = Get();
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    if (residual != nullptr) AddTile(c, ldc, residual, ldr, m, n);
    for (int64_t i = 0; i < m && (bias != nullptr || act != Act::kNone); ++i) {
      BiasActRows(act, c + i * ldc, bias != nullptr ? bias + i : nullptr, 1, n);
    }
    return;
  }
  const int64_t units_m = (m + kr.mr - 1) / kr.mr, units_n = (n + kr.nr - 1) / kr.nr;
  int64_t threads = parallel && m * n * k >= kMinParallelFma ? NumIntraOpThreads() : 1;
  threads = std::min(threads, units_m * units_n);
  if (threads <= 1) {
    Tile(kr, panels, m, k, b, ldb, c, ldc, bias, act, residual, ldr, 0, m, 0, n, stream_b);
    return;
  }
  // Columns first (each tile packs its own columns); rows when there are too
  // few column panels (ResNet's 7x7 layers at batch 1: 49 columns).
  const int64_t tn = std::min(units_n, threads), tm = std::min(units_m, (threads + tn - 1) / tn);
  ParallelFor(tm * tn, m * n * k / (tm * tn), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = t / tn, q = t % tn;
      const int64_t i0 = units_m * r / tm * kr.mr, i1 = std::min(m, units_m * (r + 1) / tm * kr.mr);
      const int64_t j0 = units_n * q / tn * kr.nr, j1 = std::min(n, units_n * (q + 1) / tn * kr.nr);
      if (i0 < i1 && j0 < j1) Tile(kr, panels, m, k, b, ldb, c, ldc, bias, act, residual, ldr, i0, i1, j0, j1, stream_b);
    }
  });
}

#else  // no own GEMM in this build: the "panels" are the row-major filter

const char* PanelLayout() { return "rowmajor"; }
int PanelRows() { return 1; }
int64_t PanelFloats(int64_t m, int64_t k) { return m * k; }
void PackPanels(const float* a, int64_t m, int64_t k, float* panels) { std::memcpy(panels, a, sizeof(float) * m * k); }
void PanelGemm(const float* panels, int64_t m, int64_t n, int64_t k, const float* b, int64_t ldb, float* c,
               int64_t ldc, const float* bias, Act act, bool parallel, const float* residual, int64_t ldr, bool) {
  Gemm<float>(false, false, m, n, k, panels, k, b, ldb, c, ldc, !parallel);
  for (int64_t i = 0; i < m && residual != nullptr; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += residual[i * ldr + j];
  }
  for (int64_t i = 0; i < m && (bias != nullptr || act != Act::kNone); ++i) {
    BiasActRows(act, c + i * ldc, bias != nullptr ? bias + i : nullptr, 1, n);
  }
}

int PanelCols() { return 1; }
int64_t ColumnPanelFloats(int64_t m, int64_t k) { return m * k; }
void PackColumnPanels(const float* a, int64_t m, int64_t k, float* panels) { PackPanels(a, m, k, panels); }
void ColumnPanelGemm(const float* panels, int64_t m, int64_t n, int64_t k, const float* b, int64_t ldb, float* c,
                     int64_t ldc, const float* bias, Act act, bool parallel, const float* residual, int64_t ldr) {
  PanelGemm(panels, m, n, k, b, ldb, c, ldc, bias, act, parallel, residual, ldr);
}
void ColumnPanelGemmRows(const float* panels, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, float* y,
                         int64_t ldy, const float* bias, Act act, bool parallel, const float* residual, int64_t ldr) {
  Gemm<float>(false, true, n, m, k, a, lda, panels, k, y, ldy, !parallel);
  for (int64_t j = 0; j < n; ++j) {
    float* yj = y + j * ldy;
    for (int64_t i = 0; i < m; ++i) yj[i] += (residual != nullptr ? residual[j * ldr + i] : 0.0f) + (bias != nullptr ? bias[i] : 0.0f);
    BiasActRows(act, yj, nullptr, 1, m);
  }
}

#endif

}  // namespace conv
}  // namespace opforge
