// float32 max pooling row by row (max_pool_rows.h): the driver, and the
// choice of instruction set for the loops in max_pool_rows_isa.inc.
#include "max_pool_rows.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "opforge/parallel.h"

#include "../simd_math.h"
#include "../vector_math.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_MP_X86 1
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace opforge {
namespace pool {
namespace {

// The most rows (or columns) a window may have here (MaxPoolRowsApplies).
constexpr int kMaxWindow = 64;

// Floats of the bordered row: the pads and every column a tap reads.
int64_t RowWidth(const MaxPoolGeom& g) {
  return std::max(g.pl + g.w, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1);
}

// Floats per stride phase of the row, with a vector (16 floats at most) of
// slack: a short output row reads whole vectors from the phases.
constexpr int64_t kSlack = 16;
int64_t PhaseWidth(const MaxPoolGeom& g) { return (RowWidth(g) + g.sw - 1) / g.sw + kSlack; }

// Floats of one bordered row in the scratch.
int64_t RowFloats(const MaxPoolGeom& g) { return PhaseWidth(g) * g.sw; }

// Output rows whose vertical maxima are written before any is read back
// (about 4 KiB of rows): read right after its own stores, a row's loads
// straddled them and waited for them to commit (a failed store-to-load
// forward: 29% of SqueezeNet's 27 -> 13 pool on one load). 16 KiB chunks
// left L1 before they were read in the models (109 -> 54 and 112 -> 56:
// 0.25-0.28 / 0.16-0.18 ms against 0.20 / 0.12 with 4 KiB).
int64_t ChunkRows(const MaxPoolGeom& g) {
  return std::max<int64_t>(1, std::min<int64_t>(g.oh, 1024 / RowFloats(g)));
}

// The chunk's rows and one row's phases.
int64_t ScratchFloats(const MaxPoolGeom& g) { return (ChunkRows(g) + 1) * RowFloats(g); }

// `a > b ? a : b` as written is two compares and a blend to the compiler;
// maxps is exactly that in one instruction.
namespace baseline {
constexpr int kBytes = 16;
#if defined(OF_MP_X86)
#define OF_MP_MAXPS(a, b) reinterpret_cast<V>(_mm_max_ps(reinterpret_cast<__m128>(a), reinterpret_cast<__m128>(b)))
#else
#define OF_MP_MAXPS(a, b) ((a) > (b) ? (a) : (b))
#endif
#include "max_pool_rows_isa.inc"
#undef OF_MP_MAXPS
}  // namespace baseline

#if defined(OF_MP_X86)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
constexpr int kBytes = 32;
#define OF_MP_MAXPS(a, b) reinterpret_cast<V>(_mm256_max_ps(reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b)))
#include "max_pool_rows_isa.inc"
#undef OF_MP_MAXPS
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
namespace avx512 {
constexpr int kBytes = 64;
#define OF_MP_MAXPS(a, b) reinterpret_cast<V>(_mm512_max_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b)))
#include "max_pool_rows_isa.inc"
#undef OF_MP_MAXPS
}  // namespace avx512
#pragma GCC pop_options
#endif

using PlanesFn = void (*)(const MaxPoolGeom&, const float*, float*, int64_t, int64_t, float*);

PlanesFn Get() {
  static const PlanesFn fn = [] {
#if defined(OF_MP_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return &avx512::Planes;
    if (std::strcmp(isa, "avx2") == 0) return &avx2::Planes;
#endif
    return &baseline::Planes;
  }();
  return fn;
}

}  // namespace

bool MaxPoolRowsApplies(const MaxPoolGeom& g) { return g.kh <= kMaxWindow && g.kw <= kMaxWindow; }

void MaxPoolRows(const MaxPoolGeom& g, const float* x, float* y) {
  const PlanesFn fn = Get();
  const int64_t scratch = ScratchFloats(g);
  ParallelFor(g.planes, g.oh * (g.kh * g.w / std::max<int64_t>(1, g.sh) + g.kw * g.ow) + g.h * g.w,
              [&](int64_t u0, int64_t u1) {
                static thread_local std::vector<float> buf;
                if (buf.size() < static_cast<size_t>(scratch)) buf.resize(static_cast<size_t>(scratch));
                fn(g, x, y, u0, u1, buf.data());
              });
}

}  // namespace pool
}  // namespace opforge
