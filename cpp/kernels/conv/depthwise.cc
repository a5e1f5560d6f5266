// Run-time dispatch of the float32 depthwise kernel (depthwise_isa.inc,
// compiled once per instruction set under a `#pragma GCC target`, so the
// default build stays portable) and its plan: the phase-plane geometry and
// each tap's phase and offset, worked out once per call.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "depthwise.h"
#include "opforge/parallel.h"

#include "../common/plane_taps.h"
#include "../common/rational_logistic.h"

#include "../simd_math.h"
#include "../vector_math.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_DW_X86 1
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace opforge {
namespace conv {
namespace {

constexpr int kMaxTaps = 49;
constexpr int64_t kSlack = 96;  // floats past each buffer read by rounded-up vectors (>= 4 * 16 + 16)

struct DwPlan {
  int64_t c, mult, h, w, oh, ow, kh, kw, s, pt, pl;
  int64_t hq, wq;   // phase plane rows and row length
  int64_t plane;    // floats per phase plane, slack included
  int tap_phase[kMaxTaps];
  int64_t tap_off[kMaxTaps];
  int64_t scratch() const { return s * s * plane + oh * wq + kSlack; }
};

// The direct kernel's plan (depthwise_rows_isa.inc): square 3x3 / 5x5 / 7x7
// taps, stride 1 or 2, dilation 1, and per output vector q the lane masks
// of its loads (bit l: that lane's input column is inside the row).
constexpr int kDirectLoads = 8;   // loads per input row and output vector, at most (7x7 stride 2)
constexpr int64_t kDirectQ = 64;  // output vectors per row, at most
struct DwDirect {
  int64_t c, mult, h, w, oh, ow, pt, pl, k, s, nq;
  uint32_t mask[kDirectQ * kDirectLoads];
};

// The output vectors of a row must be mostly full: a row of ow < lanes - 2
// keeps the phase planes (their flat index packs several rows per vector),
// except AVX-512 stride 2 from 7 outputs (14 -> 7: measured faster than
// building four phase planes, 50 against 66 us at 288 channels).
bool DirectApplies(const Geometry& g, int lanes) {
  return g.kh == g.kw && (g.kh == 3 || g.kh == 5 || g.kh == 7) && g.sh == g.sw && (g.sh == 1 || g.sh == 2) &&
         g.dh == 1 && g.dw == 1 && g.ow >= (g.sh == 2 && lanes == 16 ? 7 : lanes - 2) && (g.ow + lanes - 1) / lanes <= kDirectQ;
}

// The flat kernel's plan (AVX-512; depthwise_rows_isa.inc): stride 1, w ==
// ow, square 3x3 / 5x5 / 7x7, dilation 1, output planes of at most kFlatV
// vectors; mask[v * k + b] the lanes of vector v whose output exists and
// whose input column for tap column b is inside the row. `rows`: the
// zero-bordered copy's rows (pt above the plane, up to the taps' reach below).
constexpr int64_t kFlatV = 16;
struct DwFlat {
  int64_t c, mult, h, w, oh, ow, pt, pl, k, nv, rows;
  std::vector<uint16_t> mask;
};

bool FlatApplies(const Geometry& g) {
  return g.kh == g.kw && (g.kh == 3 || g.kh == 5 || g.kh == 7) && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1 && g.ow == g.w && (g.oh * g.ow + 15) / 16 <= kFlatV;
}

void MakeFlat(const Geometry& g, DwFlat* d) {
  d->c = g.c, d->mult = g.og, d->h = g.h, d->w = g.w, d->oh = g.oh, d->ow = g.ow, d->pt = g.pt, d->pl = g.pl;
  d->k = g.kh, d->nv = (g.oh * g.ow + 15) / 16;
  // Rows read: up to (the last vector's last row) + k - 1 in the copy's
  // rows, and at least the plane's own.
  d->rows = std::max(g.pt + g.h, (d->nv * 16 - 1) / g.ow + g.kh);
  d->mask.assign(static_cast<size_t>(d->nv * d->k), 0);
  for (int64_t v = 0; v < d->nv; ++v) {
    for (int64_t b = 0; b < d->k; ++b) {
      uint32_t bits = 0;
      for (int lane = 0; lane < 16; ++lane) {
        const int64_t t = v * 16 + lane, col = t % g.ow - g.pl + b;
        if (t < g.oh * g.ow && col >= 0 && col < g.w) bits |= 1u << lane;
      }
      d->mask[static_cast<size_t>(v * d->k + b)] = static_cast<uint16_t>(bits);
    }
  }
}

void MakeDirect(const Geometry& g, int lanes, DwDirect* d) {
  d->c = g.c, d->mult = g.og, d->h = g.h, d->w = g.w, d->oh = g.oh, d->ow = g.ow, d->pt = g.pt, d->pl = g.pl;
  d->k = g.kh, d->s = g.sh, d->nq = (g.ow + lanes - 1) / lanes;
  for (int64_t q = 0; q < d->nq; ++q) {
    for (int l = 0; l < kDirectLoads; ++l) {
      // Stride 1: load l starts at tap column l; stride 2: loads 2m and
      // 2m + 1 are the halves (lanes and 2 * lanes wide) at tap column 2m.
      const int64_t start = q * lanes * d->s - d->pl + (d->s == 1 ? l : (l & ~1) + (l & 1) * lanes);
      uint32_t bits = 0;
      for (int lane = 0; lane < lanes; ++lane) {
        if (start + lane >= 0 && start + lane < d->w) bits |= 1u << lane;
      }
      d->mask[q * kDirectLoads + l] = bits;
    }
  }
}

DwPlan MakePlan(const Geometry& g) {
  DwPlan p;
  p.c = g.c, p.mult = g.og, p.h = g.h, p.w = g.w, p.oh = g.oh, p.ow = g.ow;
  p.kh = g.kh, p.kw = g.kw, p.s = g.sh, p.pt = g.pt, p.pl = g.pl;
  p.hq = g.oh + (g.kh - 1) * g.dh / p.s;
  p.wq = g.ow + (g.kw - 1) * g.dw / p.s;
  p.plane = p.hq * p.wq + p.wq + kSlack;
  for (int64_t a = 0; a < g.kh; ++a) {
    for (int64_t b = 0; b < g.kw; ++b) {
      const int64_t ra = a * g.dh, cb = b * g.dw;
      p.tap_phase[a * g.kw + b] = static_cast<int>((ra % p.s) * p.s + cb % p.s);
      p.tap_off[a * g.kw + b] = (ra / p.s) * p.wq + cb / p.s;
    }
  }
  return p;
}

namespace baseline {
constexpr int kBytes = 16;
#include "depthwise_isa.inc"
}  // namespace baseline

#if defined(OF_DW_X86)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
constexpr int kBytes = 32;
#include "depthwise_isa.inc"
#define OF_DW_ISA_MASK16 0
#include "depthwise_rows_isa.inc"
#undef OF_DW_ISA_MASK16
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
namespace avx512 {
constexpr int kBytes = 64;
#include "depthwise_isa.inc"
#define OF_DW_ISA_MASK16 1
#include "depthwise_rows_isa.inc"
#undef OF_DW_ISA_MASK16
}  // namespace avx512
#pragma GCC pop_options
#endif

using PlanesFn = void (*)(const DwPlan&, const float*, const float*, const float*, Act, float*, int64_t, int64_t,
                          float*);

// The same choice as the elementwise kernels (OPFORGE_SIMD caps it).
PlanesFn Select() {
#if defined(OF_DW_X86)
  const char* isa = vmath::IsaName();
  if (std::strcmp(isa, "avx512") == 0) return &avx512::Planes;
  if (std::strcmp(isa, "avx2") == 0) return &avx2::Planes;
#endif
  return &baseline::Planes;
}

PlanesFn Get() {
  static const PlanesFn fn = Select();
  return fn;
}

}  // namespace

bool DepthwiseFastPath(const Geometry& g) {
  return g.groups == g.c && g.cg == 1 && g.sh == g.sw && g.sh >= 1 && g.sh <= 4 && g.kh * g.kw <= kMaxTaps &&
         g.oh > 0 && g.ow > 0;
}

using DirectFn = void (*)(const DwDirect&, const float*, const float*, const float*, Act, float*, int64_t, int64_t,
                         const float*);

// The direct kernel of the running instruction set and its vector width
// (none on the portable baseline: it keeps the phase planes).
DirectFn GetDirect(int* lanes) {
#if defined(OF_DW_X86)
  static const std::pair<DirectFn, int> fn = []() -> std::pair<DirectFn, int> {
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return {&avx512::DirectPlanes, 16};
    if (std::strcmp(isa, "avx2") == 0) return {&avx2::DirectPlanes, 8};
    return {nullptr, 0};
  }();
  *lanes = fn.second;
  return fn.first;
#else
  *lanes = 0;
  return nullptr;
#endif
}

void DepthwiseForward(const Geometry& g, const float* x, const float* f, const float* bias, Act act, float* y) {
  int lanes = 0;
  const DirectFn direct = GetDirect(&lanes);
  // OPFORGE_DW_DIRECT=0 keeps every shape on the phase planes, =flat prefers
  // the flat kernel where both apply (read per call: tests compare them).
  const char* env = std::getenv("OPFORGE_DW_DIRECT");
  const bool fresh = env == nullptr || std::strcmp(env, "0") != 0;
  const bool rows = direct != nullptr && fresh && DirectApplies(g, lanes);
#if defined(OF_DW_X86)
  if (lanes == 16 && fresh && FlatApplies(g) && (!rows || std::strcmp(env ? env : "", "flat") == 0)) {
    DwFlat d;
    MakeFlat(g, &d);
    ParallelFor(g.n * g.c, g.og * g.oh * g.ow * g.kh * g.kw / 4 + g.h * g.w, [&](int64_t u0, int64_t u1) {
      static thread_local std::vector<float> buf;
      const size_t need = static_cast<size_t>(d.rows * d.w + 16);
      if (buf.size() < need) buf.resize(need);
      avx512::FlatPlanes(d, x, f, bias, act, y, u0, u1, buf.data());
    });
    return;
  }
#endif
  if (rows) {
    DwDirect d;
    MakeDirect(g, lanes, &d);
    ParallelFor(g.n * g.c, g.og * g.oh * g.ow * g.kh * g.kw / 4 + g.h * g.w, [&](int64_t u0, int64_t u1) {
      static thread_local std::vector<float> zeros;
      if (zeros.size() < static_cast<size_t>(g.w)) zeros.assign(static_cast<size_t>(g.w), 0.0f);
      direct(d, x, f, bias, act, y, u0, u1, zeros.data());
    });
    return;
  }
  const DwPlan plan = MakePlan(g);
  const PlanesFn fn = Get();
  ParallelFor(g.n * g.c, plan.mult * plan.oh * plan.wq * plan.kh * plan.kw / 4 + plan.h * plan.w,
              [&](int64_t u0, int64_t u1) {
                static thread_local std::vector<float> scratch;
                const size_t need = static_cast<size_t>(plan.scratch());
                if (scratch.size() < need) scratch.resize(need);
                fn(plan, x, f, bias, act, y, u0, u1, scratch.data());
              });
}

const char* DepthwiseIsa() { return vmath::IsaName(); }

bool MaxPoolPlanesApplies(int64_t kh, int64_t kw, int64_t sh, int64_t sw) {
  return sh == sw && sh >= 1 && sh <= 4 && kh * kw <= kMaxTaps;
}

void MaxPoolPlanes(int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t s,
                   int64_t dh, int64_t dw, int64_t pt, int64_t pl, const float* x, float* y) {
  Geometry g;
  g.n = planes, g.c = 1, g.h = h, g.w = w, g.o = 1, g.kh = kh, g.kw = kw, g.oh = oh, g.ow = ow;
  g.sh = g.sw = s, g.dh = dh, g.dw = dw, g.pt = pt, g.pl = pl, g.groups = 1, g.cg = 1, g.og = 1;
  const DwPlan plan = MakePlan(g);
  using Fn = void (*)(const DwPlan&, const float*, float*, int64_t, int64_t, float*);
  static const Fn fn = [] {
#if defined(OF_DW_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return &avx512::MaxPlanes;
    if (std::strcmp(isa, "avx2") == 0) return &avx2::MaxPlanes;
#endif
    return &baseline::MaxPlanes;
  }();
  ParallelFor(planes, plan.oh * plan.wq * plan.kh * plan.kw / 4 + h * w, [&](int64_t u0, int64_t u1) {
    static thread_local std::vector<float> scratch;
    const size_t need = static_cast<size_t>(plan.scratch());
    if (scratch.size() < need) scratch.resize(need);
    fn(plan, x, y, u0, u1, scratch.data());
  });
}

void GatherStride2(const float* src, float* dst, int64_t n) {
  using Fn = void (*)(const float*, float*, int64_t);
  static const Fn fn = [] {
#if defined(OF_DW_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return &avx512::Stride2;
    if (std::strcmp(isa, "avx2") == 0) return &avx2::Stride2;
#endif
    return &baseline::Stride2;
  }();
  fn(src, dst, n);
}

void BiasActRows(Act act, float* y, const float* bias, int64_t rows, int64_t p) {
  using Fn = void (*)(Act, float*, const float*, int64_t, int64_t);
  static const Fn fn = [] {
#if defined(OF_DW_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return &avx512::BiasActRows;
    if (std::strcmp(isa, "avx2") == 0) return &avx2::BiasActRows;
#endif
    return &baseline::BiasActRows;
  }();
  fn(act, y, bias, rows, p);
}

void BiasActTile(Act act, float* y, int64_t ld, const float* bias, int64_t rows, int64_t p) {
  using Fn = void (*)(Act, float*, int64_t, const float*, int64_t, int64_t);
  static const Fn fn = [] {
#if defined(OF_DW_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return &avx512::BiasActStrided;
    if (std::strcmp(isa, "avx2") == 0) return &avx2::BiasActStrided;
#endif
    return &baseline::BiasActStrided;
  }();
  fn(act, y, ld, bias, rows, p);
}

}  // namespace conv
}  // namespace opforge
