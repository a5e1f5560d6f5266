// Shape checks shared by the convolution and pooling ops (conv_ops.cc,
// pool_ops.cc), the packed-filter convolution (packed_conv_ops.cc) and the
// blocked ones (nchwc_ops.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace conv_shape {

// Strides, dilations (2 positive ints each) and pads (4 ints >= 0).
inline Status CheckWindowAttrs(InferenceContext* ctx) {
  const std::vector<int64_t>& s = ctx->attr_ints("strides");
  const std::vector<int64_t>& d = ctx->attr_ints("dilations");
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  if (s.size() != 2 || s[0] < 1 || s[1] < 1) {
    return errors::InvalidArgument("attr 'strides' must be 2 ints >= 1 (height, width), got ", ListString(s));
  }
  if (d.size() != 2 || d[0] < 1 || d[1] < 1) {
    return errors::InvalidArgument("attr 'dilations' must be 2 ints >= 1 (height, width), got ", ListString(d));
  }
  if (p.size() != 4 || p[0] < 0 || p[1] < 0 || p[2] < 0 || p[3] < 0) {
    return errors::InvalidArgument("attr 'pads' must be 4 ints >= 0 (top, left, bottom, right), got ",
                                   ListString(p));
  }
  return Status::OK();
}

// One spatial output size; -1 stays unknown.
inline Status ConvOutDim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, const char* axis,
                  int64_t* out) {
  if (in < 0 || k < 0) {
    *out = -1;
    return Status::OK();
  }
  const int64_t eff = (k - 1) * d + 1;
  const int64_t padded = in + pb + pe;
  if (k == 0 || eff > padded) {
    return errors::InvalidArgument("argument 'filter': the dilated kernel ", axis, " ", eff,
                                   " is larger than the padded input ", axis, " ", padded);
  }
  *out = (padded - eff) / s + 1;
  return Status::OK();
}

// One pooled size (MaxPool2D, AvgPool2D and MaxPool2DNchwc; PyTorch's and ONNX's rule): with ceil_mode a last window
// that would start inside the end padding is dropped. -1 stays unknown.
inline Status PoolOutDim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil_mode,
                  const char* axis, int64_t* out) {
  const int64_t eff = (k - 1) * d + 1;
  if (pb >= eff || pe >= eff) {
    return errors::InvalidArgument("attr 'pads' on the ", axis, " (", pb, ", ", pe,
                                   ") must be smaller than the dilated kernel ", eff,
                                   ", else a window holds only padding");
  }
  if (in < 0) {
    *out = -1;
    return Status::OK();
  }
  const int64_t padded = in + pb + pe;
  if (eff > padded) {
    return errors::InvalidArgument("attr 'ksize': the dilated kernel ", axis, " ", eff,
                                   " is larger than the padded input ", axis, " ", padded);
  }
  int64_t o = ceil_mode ? (padded - eff + s - 1) / s + 1 : (padded - eff) / s + 1;
  if (ceil_mode && (o - 1) * s >= in + pb) --o;
  *out = o;
  return Status::OK();
}

// attr 'activation' of the fused convolutions (their epilogue's activations).
inline Status CheckConvActivation(InferenceContext* ctx) {
  const std::string& act = ctx->attr("activation").s;
  if (act != "none" && act != "relu" && act != "sigmoid" && act != "silu" && act != "hardswish") {
    return errors::InvalidArgument("attr 'activation' must be 'none', 'relu', 'sigmoid', 'silu' or 'hardswish', got '",
                                   act, "'");
  }
  return Status::OK();
}

// The concatenating convolutions (one x through attr 'N' filters, outputs
// one after another along the channels): attrs 'filter_shapes', 'strides',
// 'dilations' and 'pads' hold 4, 2, 2 and 4 ints per filter. Checks every
// filter's shape (channels in [1, 2^20], kernel sides in [1, max_k]) and
// window, calls check(i, f) for the op's own checks of filter i (f: its 4
// ints), and gives the one output size every filter must share (*oh, *ow;
// -1 where unknown).
template <typename Check>
Status ConcatConvWindows(InferenceContext* ctx, const TensorShape& x, int64_t max_k, Check&& check, int64_t* oh,
                         int64_t* ow) {
  const int64_t n = ctx->attr_int("N");
  const std::vector<int64_t>& fs = ctx->attr_ints("filter_shapes");
  const std::vector<int64_t>& s = ctx->attr_ints("strides");
  const std::vector<int64_t>& d = ctx->attr_ints("dilations");
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  if (static_cast<int64_t>(fs.size()) != 4 * n || static_cast<int64_t>(s.size()) != 2 * n ||
      static_cast<int64_t>(d.size()) != 2 * n || static_cast<int64_t>(p.size()) != 4 * n) {
    return errors::InvalidArgument("attrs 'filter_shapes', 'strides', 'dilations' and 'pads' must hold 4, 2, 2 and 4 "
                                   "ints per filter (", n, " filters), got ", fs.size(), ", ", s.size(), ", ",
                                   d.size(), " and ", p.size());
  }
  constexpr int64_t kMaxChannels = int64_t{1} << 20;
  *oh = *ow = -2;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t* f = fs.data() + 4 * i;
    if (f[0] < 1 || f[1] < 1 || f[2] < 1 || f[3] < 1 || f[0] > kMaxChannels || f[1] > kMaxChannels || f[2] > max_k ||
        f[3] > max_k) {
      return errors::InvalidArgument("attr 'filter_shapes': filter ", i, " must be [out_channels, in_channels, kh, "
                                     "kw] with channels in [1, 2^20] and kh, kw in [1, ", max_k, "], got ",
                                     ListString(std::vector<int64_t>(f, f + 4)));
    }
    const int64_t *si = s.data() + 2 * i, *di = d.data() + 2 * i, *pi = p.data() + 4 * i;
    if (si[0] < 1 || si[1] < 1 || di[0] < 1 || di[1] < 1 || pi[0] < 0 || pi[1] < 0 || pi[2] < 0 || pi[3] < 0) {
      return errors::InvalidArgument("attrs 'strides' / 'dilations' (>= 1) and 'pads' (>= 0) of filter ", i,
                                     " are out of range");
    }
    OF_RETURN_IF_ERROR(check(i, f));
    int64_t h, w;
    OF_RETURN_IF_ERROR(ConvOutDim(x.dim(2), f[2], si[0], di[0], pi[0], pi[2], "height", &h));
    OF_RETURN_IF_ERROR(ConvOutDim(x.dim(3), f[3], si[1], di[1], pi[1], pi[3], "width", &w));
    if (i > 0 && ((h >= 0 && *oh >= 0 && h != *oh) || (w >= 0 && *ow >= 0 && w != *ow))) {
      return errors::InvalidArgument("filter ", i, " gives ", h, "x", w, " outputs, filter 0 ", *oh, "x", *ow,
                                     ": the concatenated outputs must have one size");
    }
    if (*oh < 0) *oh = h;
    if (*ow < 0) *ow = w;
  }
  return Status::OK();
}

// x [N, C, H, W], filter [O, C / groups, kh, kw] -> y [N, O, OH, OW];
// `groups` < 1: from attr 'groups'.
inline Status ConvForwardShape(const TensorShape& x, const TensorShape& f, InferenceContext* ctx, TensorShape* y,
                               int64_t groups = 0) {
  OF_RETURN_IF_ERROR(CheckWindowAttrs(ctx));
  if (x.rank() != 4) {
    return errors::InvalidArgument("argument 'x' must be 4-D [batch, channels, height, width], got shape ",
                                   x.DebugString());
  }
  if (f.rank() != 4) {
    return errors::InvalidArgument(
        "argument 'filter' must be 4-D [out_channels, in_channels / groups, kh, kw], got shape ", f.DebugString());
  }
  const int64_t g = groups >= 1 ? groups : ctx->attr_int("groups");
  if (g < 1) return errors::InvalidArgument("attr 'groups' must be >= 1, got ", g);
  const int64_t c = x.dim(1), o = f.dim(0);
  if (c >= 0 && c % g != 0) {
    return errors::InvalidArgument("argument 'x' has ", c, " channels, which do not divide by attr 'groups' ", g);
  }
  if (o >= 0 && o % g != 0) {
    return errors::InvalidArgument("argument 'filter' has ", o, " output channels, which do not divide by attr 'groups' ", g);
  }
  if (c >= 0 && f.dim(1) >= 0 && f.dim(1) * g != c) {
    return errors::InvalidArgument("argument 'filter' has ", f.dim(1), " input channels per group; argument 'x' has ",
                                   c, " channels and attr 'groups' is ", g, ", so it must be ", c / g);
  }
  const std::vector<int64_t>& s = ctx->attr_ints("strides");
  const std::vector<int64_t>& d = ctx->attr_ints("dilations");
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  int64_t oh, ow;
  OF_RETURN_IF_ERROR(ConvOutDim(x.dim(2), f.dim(2), s[0], d[0], p[0], p[2], "height", &oh));
  OF_RETURN_IF_ERROR(ConvOutDim(x.dim(3), f.dim(3), s[1], d[1], p[1], p[3], "width", &ow));
  *y = TensorShape({x.dim(0), o, oh, ow});
  return Status::OK();
}

}  // namespace conv_shape
}  // namespace opforge
