// im2col and its adjoint col2im for one image and one channel group: the
// column matrix is [cg * kh * kw, oh * ow], row (c, a, b) holding the input
// pixel each output pixel sees through tap (a, b) of channel c (0 in pads).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "conv_geometry.h"
#include "opforge/parallel.h"

namespace opforge {
namespace conv {

// The output columns [j0, j1) whose tap at offset `off` (= a * dilation - pad)
// lands inside [0, size) with stride s.
inline void ValidRange(int64_t off, int64_t s, int64_t size, int64_t out, int64_t* j0, int64_t* j1) {
  // j * s + off >= 0  and  j * s + off < size
  int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t hi = size - off <= 0 ? 0 : (size - off + s - 1) / s;
  *j0 = std::min(lo, out);
  *j1 = std::max(*j0, std::min(hi, out));
}

// dst[j] = src[2 * j] for j < n, src readable up to src[2 * n - 1]: vectorized
// (depthwise.cc's ISA dispatch), for the stride-2 rows of im2col.
void GatherStride2(const float* src, float* dst, int64_t n);

// Channels [c0, c1) of one image's group; `ld`: the row stride of col (0:
// oh * ow, the rows packed). Output rows [i0, i1) only (i1 < 0: all), their
// columns from col's first: a convolution in chunks of output rows keeps
// its column matrix small.
template <typename T>
void Im2ColRange(const Geometry& g, const T* x, T* col, int64_t c0, int64_t c1, int64_t ld = 0, int64_t i0 = 0,
                 int64_t i1 = -1) {
  const int64_t p = ld > 0 ? ld : g.p();
  if (i1 < 0) i1 = g.oh;
  for (int64_t c = c0; c < c1; ++c) {
    const T* xc = x + c * g.h * g.w;
    for (int64_t a = 0; a < g.kh; ++a) {
      for (int64_t b = 0; b < g.kw; ++b) {
        T* row = col + ((c * g.kh + a) * g.kw + b) * p;
        const int64_t offh = a * g.dh - g.pt, offw = b * g.dw - g.pl;
        int64_t j0, j1;
        ValidRange(offw, g.sw, g.w, g.ow, &j0, &j1);
        for (int64_t i = i0; i < i1; ++i) {
          T* r = row + (i - i0) * g.ow;
          const int64_t ih = i * g.sh + offh;
          if (ih < 0 || ih >= g.h) {
            std::fill(r, r + g.ow, T(0));
            continue;
          }
          const T* xr = xc + ih * g.w + offw;
          std::fill(r, r + j0, T(0));
          if (g.sw == 1) {
            std::memcpy(r + j0, xr + j0, sizeof(T) * (j1 - j0));
          } else {
            int64_t j = j0;
            if constexpr (std::is_same_v<T, float>) {
              if (g.sw == 2) {
                // Whole vectors only while they stay inside x's row (none
                // when the tap starts in the right pad: the bound is negative).
                const int64_t vec = std::max<int64_t>(0, std::min(j1 - j0, (g.w - offw - 2 * j0) / 2));
                GatherStride2(xr + 2 * j0, r + j0, vec);
                j = j0 + vec;
              }
            }
            for (; j < j1; ++j) r[j] = xr[j * g.sw];
          }
          std::fill(r + j1, r + g.ow, T(0));
        }
      }
    }
  }
}

// dx (one image, one group, [cg, h, w]) += the scatter of col, channels [c0, c1).
template <typename T>
void Col2ImRange(const Geometry& g, const T* col, T* dx, int64_t c0, int64_t c1) {
  const int64_t p = g.p();
  for (int64_t c = c0; c < c1; ++c) {
    T* xc = dx + c * g.h * g.w;
    for (int64_t a = 0; a < g.kh; ++a) {
      for (int64_t b = 0; b < g.kw; ++b) {
        const T* row = col + ((c * g.kh + a) * g.kw + b) * p;
        const int64_t offh = a * g.dh - g.pt, offw = b * g.dw - g.pl;
        int64_t j0, j1;
        ValidRange(offw, g.sw, g.w, g.ow, &j0, &j1);
        for (int64_t i = 0; i < g.oh; ++i) {
          const int64_t ih = i * g.sh + offh;
          if (ih < 0 || ih >= g.h) continue;
          const T* r = row + i * g.ow;
          T* xr = xc + ih * g.w + offw;
          if (g.sw == 1) {
            for (int64_t j = j0; j < j1; ++j) xr[j] += r[j];
          } else {
            for (int64_t j = j0; j < j1; ++j) xr[j * g.sw] += r[j];
          }
        }
      }
    }
  }
}

// The whole group; `parallel`: split the channels over the intra-op pool
// (each channel's rows read / write only that channel).
template <typename T>
void Im2Col(const Geometry& g, const T* x, T* col, bool parallel = false) {
  if (!parallel) return Im2ColRange(g, x, col, 0, g.cg);
  ParallelFor(g.cg, g.kh * g.kw * g.p(), [&](int64_t c0, int64_t c1) { Im2ColRange(g, x, col, c0, c1); });
}

template <typename T>
void Col2Im(const Geometry& g, const T* col, T* dx, bool parallel = false) {
  if (!parallel) return Col2ImRange(g, col, dx, 0, g.cg);
  ParallelFor(g.cg, 2 * g.kh * g.kw * g.p(), [&](int64_t c0, int64_t c1) { Col2ImRange(g, col, dx, c0, c1); });
}

}  // namespace conv
}  // namespace opforge
