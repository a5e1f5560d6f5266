// Direct depthwise convolution (one filter per input channel, any depth
// multiplier): im2col would build a kh*kw-row matrix for a GEMM with one
// output row, so a direct loop over the taps wins. Forward only; the
// backward ops go through im2col.
//
// float32 runs the vectorized kernel of depthwise.cc (AVX-512, AVX2 or the
// portable baseline, picked at run time like the elementwise kernels; see
// depthwise_isa.inc) whenever both strides are equal; DepthwiseChannel below
// serves float64 and the rest.
#pragma once

#include <cstdint>

#include "../compiler.h"
#include "conv_gemm.h"
#include "conv_geometry.h"
#include "im2col.h"

namespace opforge {
namespace conv {

// y[oh, ow] of one channel from x[h, w] and the taps f[kh, kw], plus `bias`.
template <typename T>
void DepthwiseChannel(const Geometry& g, const T* OF_RESTRICT x, const T* OF_RESTRICT f, T* OF_RESTRICT y,
                      T bias = T(0)) {
  for (int64_t i = 0; i < g.oh * g.ow; ++i) y[i] = bias;
  for (int64_t a = 0; a < g.kh; ++a) {
    for (int64_t b = 0; b < g.kw; ++b) {
      const T wv = f[a * g.kw + b];
      const int64_t offh = a * g.dh - g.pt, offw = b * g.dw - g.pl;
      int64_t j0, j1;
      ValidRange(offw, g.sw, g.w, g.ow, &j0, &j1);
      for (int64_t i = 0; i < g.oh; ++i) {
        const int64_t ih = i * g.sh + offh;
        if (ih < 0 || ih >= g.h) continue;
        const T* OF_RESTRICT xr = x + ih * g.w + offw;
        T* OF_RESTRICT yr = y + i * g.ow;
        if (g.sw == 1) {
          for (int64_t j = j0; j < j1; ++j) yr[j] += wv * xr[j];
        } else {
          for (int64_t j = j0; j < j1; ++j) yr[j] += wv * xr[j * g.sw];
        }
      }
    }
  }
}

// True when the float32 kernel below handles g (groups == channels, equal
// strides up to 4, at most 49 taps).
bool DepthwiseFastPath(const Geometry& g);

// y = act(depthwise conv(x, f) + bias) for g with DepthwiseFastPath(g)
// (bias may be null), over the intra-op pool (planes split across threads).
void DepthwiseForward(const Geometry& g, const float* x, const float* f, const float* bias, Act act, float* y);

// y[r, :] = act(y[r, :] + bias[r]) for r < rows, rows of p floats (bias
// may be null), vectorized like the kernel above.
void BiasActRows(Act act, float* y, const float* bias, int64_t rows, int64_t p);
// The same over rows `ld` floats apart (a tile of a larger matrix).
void BiasActTile(Act act, float* y, int64_t ld, const float* bias, int64_t rows, int64_t p);

// The instruction set the float32 kernel runs: "avx512", "avx2" or "baseline".
const char* DepthwiseIsa();

}  // namespace conv
}  // namespace opforge
