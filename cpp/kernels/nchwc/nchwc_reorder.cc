// The NCHW <-> NCHWc reorders (nchwc.h): 4 x 4 transposes (SSE, every
// x86-64) of 4 channels by 4 pixels, scalar for the odd channels and pixels
// and off x86. A float at a time, the strided side (a store or a load every
// `block` floats) cost about 0.8 ns a float: ResNet-18's 64 x 112 x 112
// stem output back to NCHW 0.65 ms on one thread, SqueezeNet's 384 x 27 x 27
// into blocks 0.15 ms.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "nchwc.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__SSE__)
#define OF_REORDER_SSE 1
#include <immintrin.h>
#endif

namespace opforge {
namespace nchwc {

// Pixels per unit of work: a unit's lane rows (16 x 256 floats) and its
// blocked output (16 KiB) stay in L1.
constexpr int64_t kReorderPixels = 256;

int64_t ReorderUnits(int64_t n, int64_t cb, int64_t hw) {
  return n * cb * ((hw + kReorderPixels - 1) / kReorderPixels);
}

namespace {

// Unit u: (image, block, chunk of pixels) -> block index img * cb + blk and
// the chunk's pixels [i0, i1).
void UnitRange(int64_t u, int64_t hw, int64_t* blk_index, int64_t* i0, int64_t* i1) {
  const int64_t chunks = (hw + kReorderPixels - 1) / kReorderPixels;
  *blk_index = u / chunks;
  *i0 = u % chunks * kReorderPixels;
  *i1 = std::min(hw, *i0 + kReorderPixels);
}

}  // namespace

void ReorderToRange(const float* x, int64_t c, int64_t cb, int64_t hw, int64_t b, float* y, int64_t u0, int64_t u1) {
  for (int64_t u = u0; u < u1; ++u) {
    int64_t bi, i0, i1;
    UnitRange(u, hw, &bi, &i0, &i1);
    const int64_t img = bi / cb, blk = bi % cb;
    const int64_t lanes = std::min(b, c - blk * b);
    const float* in = x + (img * c + blk * b) * hw;  // lane l's plane at in + l * hw
    float* out = y + bi * hw * b;                    // pixel i's lanes at out + i * b
    if (lanes < b) {
      for (int64_t i = i0; i < i1; ++i) std::memset(out + i * b + lanes, 0, sizeof(float) * (b - lanes));
    }
    int64_t l = 0;
#ifdef OF_REORDER_SSE
    for (; l + 4 <= lanes; l += 4) {
      const float* s = in + l * hw;
      int64_t i = i0;
      for (; i + 4 <= i1; i += 4) {
        __m128 r0 = _mm_loadu_ps(s + i), r1 = _mm_loadu_ps(s + hw + i);
        __m128 r2 = _mm_loadu_ps(s + 2 * hw + i), r3 = _mm_loadu_ps(s + 3 * hw + i);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(out + i * b + l, r0);
        _mm_storeu_ps(out + (i + 1) * b + l, r1);
        _mm_storeu_ps(out + (i + 2) * b + l, r2);
        _mm_storeu_ps(out + (i + 3) * b + l, r3);
      }
      for (; i < i1; ++i) {
        for (int64_t k = 0; k < 4; ++k) out[i * b + l + k] = s[k * hw + i];
      }
    }
#endif
    for (; l < lanes; ++l) {
      const float* s = in + l * hw;
      for (int64_t i = i0; i < i1; ++i) out[i * b + l] = s[i];
    }
  }
}

void ReorderFromRange(const float* x, int64_t c, int64_t cb, int64_t hw, int64_t b, float* y, int64_t u0,
                      int64_t u1) {
  for (int64_t u = u0; u < u1; ++u) {
    int64_t bi, i0, i1;
    UnitRange(u, hw, &bi, &i0, &i1);
    const int64_t img = bi / cb, blk = bi % cb;
    const int64_t lanes = std::min(b, c - blk * b);
    const float* in = x + bi * hw * b;
    float* out = y + (img * c + blk * b) * hw;
    int64_t l = 0;
#ifdef OF_REORDER_SSE
    for (; l + 4 <= lanes; l += 4) {
      float* d = out + l * hw;
      int64_t i = i0;
      for (; i + 4 <= i1; i += 4) {
        __m128 r0 = _mm_loadu_ps(in + i * b + l), r1 = _mm_loadu_ps(in + (i + 1) * b + l);
        __m128 r2 = _mm_loadu_ps(in + (i + 2) * b + l), r3 = _mm_loadu_ps(in + (i + 3) * b + l);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(d + i, r0);
        _mm_storeu_ps(d + hw + i, r1);
        _mm_storeu_ps(d + 2 * hw + i, r2);
        _mm_storeu_ps(d + 3 * hw + i, r3);
      }
      for (; i < i1; ++i) {
        for (int64_t k = 0; k < 4; ++k) d[k * hw + i] = in[i * b + l + k];
      }
    }
#endif
    for (; l < lanes; ++l) {
      float* d = out + l * hw;
      for (int64_t i = i0; i < i1; ++i) d[i] = in[i * b + l];
    }
  }
}

}  // namespace nchwc
}  // namespace opforge
