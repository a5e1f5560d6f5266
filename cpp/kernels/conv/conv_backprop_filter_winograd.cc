// Winograd F(3x3, 4x4) filter gradient driver (conv_backprop_filter_winograd.h):
// tile blocks over the intra-op pool, each thread accumulating the 36
// transformed products of its blocks, a sum over threads, then the output
// transform G^T M G per (o, c). The tile transforms run in the best
// instruction set the CPU has (conv_backprop_filter_isa.inc).
#include "conv_backprop_filter_winograd.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "opforge/parallel.h"

#include "conv_gemm.h"
#include "winograd.h"

#include "../simd_math.h"
#include "../vector_math.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_FG_X86 1
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace opforge {
namespace conv {

#ifdef OF_CONV_OWN_SGEMM
namespace {

struct FgPlan {
  int64_t c, o, h, w, oh, ow, pt, pl;
  int64_t tw, tiles;  // 4x4 dy tiles per row and per image
  int64_t cp, op;     // c and o rounded up to whole vectors (the row strides of the buffers)
};

namespace baseline {
constexpr int kBytes = 16;
#include "conv_backprop_filter_isa.inc"
}  // namespace baseline

#if defined(OF_FG_X86)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
constexpr int kBytes = 32;
#include "conv_backprop_filter_isa.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
namespace avx512 {
constexpr int kBytes = 64;
#include "conv_backprop_filter_isa.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

using BlockFn = void (*)(const FgPlan&, const float*, const float*, int64_t, int64_t, float*, float*, float*, bool);

struct Isa {
  BlockFn run;
  int lanes;
};

Isa Get() {
  static const Isa isa = [] {
#if defined(OF_FG_X86)
    const char* name = vmath::IsaName();
    if (std::strcmp(name, "avx512") == 0) return Isa{&avx512::RunBlock, avx512::L};
    if (std::strcmp(name, "avx2") == 0) return Isa{&avx2::RunBlock, avx2::L};
#endif
    return Isa{&baseline::RunBlock, baseline::L};
  }();
  return isa;
}

// Tiles per block (one thread, CPU time, 64 channels 56x56 at batch 8: 32 /
// 64 / 128 / 256 tiles 10.8 / 10.6 / 10.1 / 10.0 ms; each block's 36 GEMMs are
// [o, tiles] x [tiles, c], so deeper blocks amortize their C tiles better).
constexpr int64_t kBlockTiles = 128;

// df [o, c, 3, 3] = G^T m[xi] G for xi's 6x6 layout, m [36][o][c].
void OutputTransform(const float* m, int64_t o_count, int64_t c_count, int64_t o0, int64_t o1, float* df) {
  // G of the forward (winograd_isa.inc's FilterRows), [6][3].
  static constexpr float G[6][3] = {{0.25f, 0.0f, 0.0f},
                                    {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                    {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                    {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                    {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                    {0.0f, 0.0f, 1.0f}};
  const int64_t oc = o_count * c_count;
  for (int64_t o = o0; o < o1; ++o) {
    for (int64_t c = 0; c < c_count; ++c) {
      const float* mo = m + o * c_count + c;
      float t[6][3];  // M G: row i, tap b
      for (int i = 0; i < 6; ++i) {
        const float* r = mo + i * 6 * oc;
        for (int b = 0; b < 3; ++b) {
          float s = 0.0f;
          for (int j = 0; j < 6; ++j) s += r[j * oc] * G[j][b];
          t[i][b] = s;
        }
      }
      float* d = df + (o * c_count + c) * 9;
      for (int a = 0; a < 3; ++a) {
        for (int b = 0; b < 3; ++b) {
          float s = 0.0f;
          for (int i = 0; i < 6; ++i) s += G[i][a] * t[i][b];
          d[a * 3 + b] = s;
        }
      }
    }
  }
}

}  // namespace

// Few tiles make shallow GEMMs ([o, tiles] x [tiles, c]) whose 36 products
// cost more to accumulate and transform than they save (one thread, CPU time,
// against im2col + GEMM: 128 channels at 28x28, batch 1 (49 tiles) 3.28 /
// 2.97 ms; 64 channels at 56x56, batch 1 (196 tiles) 1.65 / 3.2 ms).
constexpr int64_t kMinFilterTiles = 128;

bool WinogradBackpropFilterApplies(const Geometry& g) {
  return WinogradApplies(g) && g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4) >= kMinFilterTiles;
}

void WinogradBackpropFilter(const Geometry& g, const float* x, const float* dy, float* df) {
  const Isa isa = Get();
  FgPlan p;
  p.c = g.c, p.o = g.o, p.h = g.h, p.w = g.w, p.oh = g.oh, p.ow = g.ow, p.pt = g.pt, p.pl = g.pl;
  p.tw = (g.ow + 3) / 4, p.tiles = (g.oh + 3) / 4 * p.tw;
  p.cp = (g.c + isa.lanes - 1) / isa.lanes * isa.lanes, p.op = (g.o + isa.lanes - 1) / isa.lanes * isa.lanes;
  const int64_t total = g.n * p.tiles, oc = g.o * g.c;
  const int64_t threads = NumIntraOpThreads();
  // Whole blocks of kBlockTiles, fewer per block if that leaves a thread idle.
  const int64_t tb = std::max<int64_t>(16, std::min(kBlockTiles, (total + threads - 1) / threads));
  const int64_t blocks = (total + tb - 1) / tb;
  ScratchBuffer<float> sum(36 * oc);
  std::mutex mu;
  bool have_sum = false;
  ParallelFor(blocks, tb * oc * 36 * 2, [&](int64_t b0, int64_t b1) {
    ScratchBuffer<float> xbuf(36 * tb * p.cp), dybuf(36 * tb * p.op), acc(36 * oc);
    for (int64_t b = b0; b < b1; ++b) {
      isa.run(p, x, dy, b * tb, std::min(total, (b + 1) * tb), xbuf.data(), dybuf.data(), acc.data(), b == b0);
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!have_sum) {
      std::memcpy(sum.data(), acc.data(), sizeof(float) * 36 * oc);
      have_sum = true;
    } else {
      float* s = sum.data();
      const float* a = acc.data();
      for (int64_t i = 0; i < 36 * oc; ++i) s[i] += a[i];
    }
  });
  ParallelFor(g.o, g.c * 36 * 12, [&](int64_t o0, int64_t o1) { OutputTransform(sum.data(), g.o, g.c, o0, o1, df); });
}

#else  // no own GEMM in this build

bool WinogradBackpropFilterApplies(const Geometry&) { return false; }
void WinogradBackpropFilter(const Geometry&, const float*, const float*, float*) {}

#endif

}  // namespace conv
}  // namespace opforge
