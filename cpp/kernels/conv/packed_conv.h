// The convolution over a packed filter (packed_conv_kernels.cc) as a call
// that writes into a given output, shared by Conv2DPacked(Add) and
// Conv2DPackedConcat (packed_conv_concat_kernels.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "opforge/kernel.h"

#include "conv_gemm.h"
#include "conv_geometry.h"

namespace opforge {
namespace conv {

// The one-group geometry of x [n, c, h, w] through filter `fs` [o, c, kh, kw]
// into oh x ow outputs.
inline Geometry PackedGeometry(const TensorShape& x, const std::vector<int64_t>& fs, int64_t oh, int64_t ow,
                               const int64_t* strides, const int64_t* dilations, const int64_t* pads) {
  Geometry g;
  g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.o = fs[0], g.kh = fs[2], g.kw = fs[3];
  g.oh = oh, g.ow = ow;
  g.sh = strides[0], g.sw = strides[1], g.dh = dilations[0], g.dw = dilations[1], g.pt = pads[0], g.pl = pads[1];
  g.groups = 1, g.cg = g.c, g.og = g.o;
  return g;
}

// attr 'activation' of the packed convolutions.
inline Act ActOf(const std::string& a) {
  return a == "relu"        ? Act::kRelu
         : a == "sigmoid"   ? Act::kSigmoid
         : a == "silu"      ? Act::kSilu
         : a == "hardswish" ? Act::kHardSwish
                            : Act::kNone;
}

// y = act(conv(x) + bias + r) for the packed filter `blob` of shape `fs`
// (checked here), image n's output at y + n * y_img (y_img >= o * oh * ow:
// a channel slice of a wider output); bias and r may be null, and r (the
// output's shape) needs y_img == o * oh * ow.
Status PackedConvInto(const Geometry& g, const Tensor& blob, const std::vector<int64_t>& fs, const float* x,
                      const float* bias, Act act, const float* r, float* y, int64_t y_img);

}  // namespace conv
}  // namespace opforge
