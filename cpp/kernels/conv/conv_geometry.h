// The shape of one Conv2D call, read from its tensors and attrs (the shape
// function has already checked them), shared by im2col, the depthwise kernel
// and the three convolution kernels.
#pragma once

#include <cstdint>

#include "opforge/kernel.h"

namespace opforge {
namespace conv {

struct Geometry {
  int64_t n, c, h, w;       // input
  int64_t o, kh, kw;        // filter
  int64_t oh, ow;           // output
  int64_t sh, sw, dh, dw;   // strides, dilations
  int64_t pt, pl;           // top and left pads (bottom/right are implied by oh/ow)
  int64_t groups, cg, og;   // groups, channels and out_channels per group
  int64_t k() const { return cg * kh * kw; }  // GEMM depth
  int64_t p() const { return oh * ow; }       // output pixels per image
  // A 1x1 kernel with unit strides and no pads: the input is its own im2col.
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh == h && ow == w; }
  bool depthwise() const { return groups == c && o == c && groups > 1; }
};

// x, filter as Conv2D's; y the output's shape.
inline Geometry MakeGeometry(const OpContext& ctx, const TensorShape& x, const TensorShape& f, const TensorShape& y) {
  Geometry g;
  g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.o = f.dim(0), g.kh = f.dim(2), g.kw = f.dim(3);
  g.oh = y.dim(2), g.ow = y.dim(3);
  const auto& s = ctx.attr_ints("strides");
  const auto& d = ctx.attr_ints("dilations");
  const auto& p = ctx.attr_ints("pads");
  g.sh = s[0], g.sw = s[1], g.dh = d[0], g.dw = d[1], g.pt = p[0], g.pl = p[1];
  g.groups = ctx.attr_int("groups");
  g.cg = g.c / g.groups, g.og = g.o / g.groups;
  return g;
}

}  // namespace conv
}  // namespace opforge
