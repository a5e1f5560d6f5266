// The blocked channel layout NCHWc (issue 23): [N, ceil(C / B), H, W, B],
// channel c at block c / B, lane c % B, the lanes past C zero. B is 16 on
// AVX-512 and 8 elsewhere (NchwcBlockSize); the ONNX importer converts a
// CNN's conv region to it once (pkg/opforge/onnx/_layout_nchwc.py), so a
// depthwise conv vectorises across B channels whatever its stride, and a
// pointwise conv is a GEMM over channel blocks. Inference only (no
// gradients): the filters are laid out once at import.
#include <cstdint>
#include <string>
#include <vector>

#include "conv_shape.h"
#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace {

int64_t Blocks(int64_t c, int64_t b) { return (c + b - 1) / b; }

Status CheckBlock(InferenceContext* ctx, int64_t* b) {
  *b = ctx->attr_int("block");
  if (*b != 8 && *b != 16) return errors::InvalidArgument("attr 'block' must be 8 or 16, got ", *b);
  return Status::OK();
}

// x as NCHWc with `c` channels: rank 5, ceil(c / block) blocks, lanes == block.
Status CheckBlocked(const TensorShape& x, int64_t c, int64_t b, const char* arg) {
  if (x.rank() != 5) {
    return errors::InvalidArgument("argument '", arg, "' must be 5-D NCHWc [batch, channel_blocks, height, width, ",
                                   b, "], got shape ", x.DebugString());
  }
  if (!IsUnknownDim(x.dim(4)) && x.dim(4) != b) {
    return errors::InvalidArgument("argument '", arg, "' has ", x.dim(4), " lanes, attr 'block' is ", b);
  }
  if (c >= 0 && !IsUnknownDim(x.dim(1)) && x.dim(1) != Blocks(c, b)) {
    return errors::InvalidArgument("argument '", arg, "' has ", x.dim(1), " channel blocks; ", c, " channels in blocks of ",
                                   b, " make ", Blocks(c, b));
  }
  return Status::OK();
}

Status ReorderToShape(InferenceContext* ctx) {
  int64_t b;
  OF_RETURN_IF_ERROR(CheckBlock(ctx, &b));
  const TensorShape& x = ctx->input_shape(0);
  if (x.rank() != 4) {
    return errors::InvalidArgument("argument 'x' must be 4-D [batch, channels, height, width], got shape ",
                                   x.DebugString());
  }
  // The blocks alone would not tell 8 channels from 16 (block 16): the consumer's count, where given.
  const int64_t want = ctx->attr_int("channels");
  if (want < 0) return errors::InvalidArgument("attr 'channels' must be >= 0 (0: any), got ", want);
  if (want > 0 && !IsUnknownDim(x.dim(1)) && x.dim(1) != want) {
    return errors::InvalidArgument("argument 'x' has ", x.dim(1), " channels, attr 'channels' is ", want);
  }
  const int64_t c = IsUnknownDim(x.dim(1)) ? kUnknownDim : Blocks(x.dim(1), b);
  ctx->set_output_shape(0, TensorShape({x.dim(0), c, x.dim(2), x.dim(3), b}));
  return Status::OK();
}

Status ReorderFromShape(InferenceContext* ctx) {
  int64_t b;
  OF_RETURN_IF_ERROR(CheckBlock(ctx, &b));
  const int64_t c = ctx->attr_int("channels");
  if (c < 1) return errors::InvalidArgument("attr 'channels' must be >= 1, got ", c);
  const TensorShape& x = ctx->input_shape(0);
  OF_RETURN_IF_ERROR(CheckBlocked(x, c, b, "x"));
  ctx->set_output_shape(0, TensorShape({x.dim(0), c, x.dim(2), x.dim(3)}));
  return Status::OK();
}

// Floats of the filter as Conv2DNchwc reads it (see its doc).
int64_t FilterFloats(const std::vector<int64_t>& fs, int64_t groups, bool nchw, int64_t b) {
  const int64_t taps = fs[2] * fs[3];
  if (groups != 1) return Blocks(fs[0], b) * taps * b;
  return nchw ? Blocks(fs[0], b) * fs[1] * taps * b : Blocks(fs[0], b) * Blocks(fs[1], b) * taps * b * b;
}

Status Conv2DNchwcShape(InferenceContext* ctx) {
  int64_t b;
  OF_RETURN_IF_ERROR(CheckBlock(ctx, &b));
  const std::vector<int64_t>& fs = ctx->attr_ints("filter_shape");
  if (fs.size() != 4 || fs[0] < 1 || fs[1] < 1 || fs[2] < 1 || fs[3] < 1 || fs[0] > (int64_t{1} << 20) ||
      fs[1] > (int64_t{1} << 20) || fs[2] > 64 || fs[3] > 64) {
    return errors::InvalidArgument("attr 'filter_shape' must be [out_channels, in_channels / groups, kh, kw] with "
                                   "channels in [1, 2^20] and kh, kw in [1, 64], got ", ListString(fs));
  }
  const int64_t groups = ctx->attr_int("groups");
  const std::string& layout = ctx->attr("input_layout").s;
  if (layout != "nchwc" && layout != "nchw") {
    return errors::InvalidArgument("attr 'input_layout' must be 'nchwc' or 'nchw', got '", layout, "'");
  }
  const bool nchw = layout == "nchw";
  if (groups != 1 && !(groups == fs[0] && fs[1] == 1 && !nchw)) {
    return errors::InvalidArgument("attr 'groups' must be 1, or out_channels ", fs[0], " with one input channel per "
                                   "group (depthwise, NCHWc input), got ", groups, " with filter_shape ",
                                   ListString(fs), " and input_layout '", layout, "'");
  }
  const int64_t c = fs[1] * groups;
  const TensorShape& x = ctx->input_shape(0);
  TensorShape plain;
  if (nchw) {
    if (x.rank() != 4) {
      return errors::InvalidArgument("argument 'x' must be 4-D NCHW (input_layout 'nchw'), got shape ",
                                     x.DebugString());
    }
    plain = x;
  } else {
    OF_RETURN_IF_ERROR(CheckBlocked(x, c, b, "x"));
    plain = TensorShape({x.dim(0), c, x.dim(2), x.dim(3)});
  }
  TensorShape y;
  OF_RETURN_IF_ERROR(conv_shape::ConvForwardShape(plain, TensorShape({fs[0], fs[1], fs[2], fs[3]}), ctx, &y, groups));
  OF_RETURN_IF_ERROR(conv_shape::CheckConvActivation(ctx));
  const TensorShape& f = ctx->input_shape(1);
  const int64_t want = FilterFloats(fs, groups, nchw, b);
  if (f.rank() != 1 || (!IsUnknownDim(f.dim(0)) && f.dim(0) != want)) {
    return errors::InvalidArgument("argument 'filter' must be 1-D with ", want, " values (filter_shape ",
                                   ListString(fs), " laid out in blocks of ", b, "), got shape ", f.DebugString());
  }
  const int64_t ob = Blocks(fs[0], b);
  const TensorShape& bias = ctx->input_shape(2);
  if (bias.rank() != 1 || (!IsUnknownDim(bias.dim(0)) && bias.dim(0) != 0 && bias.dim(0) != ob * b)) {
    return errors::InvalidArgument("argument 'bias' must be 1-D of length ", ob * b, " (out_channels padded to the "
                                   "block) or empty, got shape ", bias.DebugString());
  }
  const TensorShape out({y.dim(0), ob, y.dim(2), y.dim(3), b});
  const TensorShape& r = ctx->input_shape(3);
  const bool empty = r.rank() == 1 && (IsUnknownDim(r.dim(0)) || r.dim(0) == 0);
  if (!empty) {
    bool ok = r.rank() == 5;
    for (int i = 0; ok && i < 5; ++i) ok = IsUnknownDim(r.dim(i)) || IsUnknownDim(out.dim(i)) || r.dim(i) == out.dim(i);
    if (!ok) {
      return errors::InvalidArgument("argument 'residual' must be empty or of the output's shape ", out.DebugString(),
                                     ", got shape ", r.DebugString());
    }
  }
  const TensorShape& sc = ctx->input_shape(4);
  if (!(sc.rank() == 1 && (IsUnknownDim(sc.dim(0)) || sc.dim(0) == 0))) {
    if (groups != 1 || nchw) {
      return errors::InvalidArgument("argument 'scale' must be empty for a depthwise conv or an NCHW input, got "
                                     "shape ", sc.DebugString());
    }
    const TensorShape want({x.dim(0), x.dim(1), 1, 1, b});
    bool ok = sc.rank() == 5;
    for (int i = 0; ok && i < 5; ++i) ok = IsUnknownDim(sc.dim(i)) || IsUnknownDim(want.dim(i)) || sc.dim(i) == want.dim(i);
    if (!ok) {
      return errors::InvalidArgument("argument 'scale' must be empty or of shape ", want.DebugString(),
                                     " (one factor per image and input channel), got shape ", sc.DebugString());
    }
  }
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status GlobalAvgShape(InferenceContext* ctx) {
  int64_t b;
  OF_RETURN_IF_ERROR(CheckBlock(ctx, &b));
  const TensorShape& x = ctx->input_shape(0);
  OF_RETURN_IF_ERROR(CheckBlocked(x, -1, b, "x"));
  ctx->set_output_shape(0, TensorShape({x.dim(0), x.dim(1), 1, 1, b}));
  return Status::OK();
}

// Conv2DNchwcConcat: every filter's window (4, 2, 2 and 4 ints per filter in
// filter_shapes, strides, dilations, pads) over one NCHWc x; y holds each
// conv's output blocks one after another.
Status Conv2DNchwcConcatShape(InferenceContext* ctx) {
  int64_t b;
  OF_RETURN_IF_ERROR(CheckBlock(ctx, &b));
  OF_RETURN_IF_ERROR(conv_shape::CheckConvActivation(ctx));
  const int64_t n = ctx->attr_int("N");
  const TensorShape& x = ctx->input_shape(0);
  int64_t ob = 0, oh, ow, c = -1;
  OF_RETURN_IF_ERROR(conv_shape::ConcatConvWindows(
      ctx, x, 64,
      [&](int64_t i, const int64_t* f) -> Status {
        if (i == 0) {
          c = f[1];
          OF_RETURN_IF_ERROR(CheckBlocked(x, c, b, "x"));
        } else if (f[1] != c) {
          return errors::InvalidArgument("attr 'filter_shapes': filter ", i, " reads ", f[1], " channels, filter 0 ",
                                         c, ": every filter reads all of x");
        }
        const TensorShape& w = ctx->input_shape(1 + i);
        const std::vector<int64_t> shape(f, f + 4);
        const int64_t want = FilterFloats(shape, 1, false, b);
        if (w.rank() != 1 || (!IsUnknownDim(w.dim(0)) && w.dim(0) != want)) {
          return errors::InvalidArgument("argument 'filters' item ", i, " must be 1-D with ", want, " values (filter ",
                                         ListString(shape), " laid out in blocks of ", b, "), got shape ",
                                         w.DebugString());
        }
        ob += Blocks(f[0], b);
        return Status::OK();
      },
      &oh, &ow));
  const TensorShape& bias = ctx->input_shape(1 + n);
  if (bias.rank() != 1 || (!IsUnknownDim(bias.dim(0)) && bias.dim(0) != 0 && bias.dim(0) != ob * b)) {
    return errors::InvalidArgument("argument 'bias' must be 1-D of length ", ob * b, " (each filter's out_channels "
                                   "padded to the block, one after another) or empty, got shape ", bias.DebugString());
  }
  ctx->set_output_shape(0, TensorShape({x.dim(0), ob, oh, ow, b}));
  return Status::OK();
}

Status MaxPoolNchwcShape(InferenceContext* ctx) {
  int64_t b;
  OF_RETURN_IF_ERROR(CheckBlock(ctx, &b));
  const TensorShape& x = ctx->input_shape(0);
  OF_RETURN_IF_ERROR(CheckBlocked(x, -1, b, "x"));
  const std::vector<int64_t>& k = ctx->attr_ints("ksize");
  const std::vector<int64_t>& s = ctx->attr_ints("strides");
  const std::vector<int64_t>& d = ctx->attr_ints("dilations");
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  if (k.size() != 2 || k[0] < 1 || k[1] < 1 || k[0] > 64 || k[1] > 64) {
    return errors::InvalidArgument("attr 'ksize' must be 2 ints in [1, 64] (height, width), got ", ListString(k));
  }
  if (s.size() != 2 || s[0] < 1 || s[1] < 1 || d.size() != 2 || d[0] < 1 || d[1] < 1) {
    return errors::InvalidArgument("attrs 'strides' and 'dilations' must be 2 ints >= 1 each, got ", ListString(s),
                                   " and ", ListString(d));
  }
  if (p.size() != 4 || p[0] < 0 || p[1] < 0 || p[2] < 0 || p[3] < 0) {
    return errors::InvalidArgument("attr 'pads' must be 4 ints >= 0 (top, left, bottom, right), got ", ListString(p));
  }
  const bool ceil_mode = ctx->attr_bool("ceil_mode");
  int64_t oh, ow;
  OF_RETURN_IF_ERROR(conv_shape::PoolOutDim(x.dim(2), k[0], s[0], d[0], p[0], p[2], ceil_mode, "height", &oh));
  OF_RETURN_IF_ERROR(conv_shape::PoolOutDim(x.dim(3), k[1], s[1], d[1], p[1], p[3], ceil_mode, "width", &ow));
  ctx->set_output_shape(0, TensorShape({x.dim(0), x.dim(1), oh, ow, b}));
  return Status::OK();
}

}  // namespace

REGISTER_OP("NchwcBlockSize")
    .Output("block: int64")
    .SetShapeFn([](InferenceContext* ctx) {
      ctx->set_output_shape(0, TensorShape({}));
      return Status::OK();
    })
    .NoGradient()  // a constant of the CPU
    .Doc(R"doc(
The channel block of the NCHWc layout on this CPU: 16 on AVX-512, else 8.

It follows the instruction set the kernels use (OPFORGE_SIMD caps it). Every
NCHWc op takes either block on any CPU; this one is just the fast one.

block: 16 or 8 (a scalar).
)doc");

REGISTER_OP("ReorderToNchwc")
    .Input("x: T")
    .Attr("block: int")
    .Attr("channels: int = 0")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(ReorderToShape)
    .NoGradient()  // inference layout only
    .Doc(R"doc(
NCHW -> NCHWc: [N, C, H, W] to [N, ceil(C / block), H, W, block], the lanes past C zero.

x: The input, [batch, channels, height, width].
block: Channels per block, 8 or 16.
channels: x's channel count, checked where above 0 (the importer sets it: the blocked shape alone does not show it).
y: The blocked tensor.
)doc");

REGISTER_OP("ReorderFromNchwc")
    .Input("x: T")
    .Attr("channels: int")
    .Attr("block: int")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(ReorderFromShape)
    .NoGradient()  // inference layout only
    .Doc(R"doc(
NCHWc -> NCHW: [N, ceil(C / block), H, W, block] to [N, C, H, W], the padding lanes dropped.

x: The blocked tensor.
channels: C, the number of channels kept.
block: Channels per block, 8 or 16 (x's last dim).
y: [batch, channels, height, width].
)doc");

REGISTER_OP("Conv2DNchwc")
    .Input("x: T")
    .Input("filter: T")
    .Input("bias: T")
    .Input("residual: T")
    .Input("scale: T")
    .Attr("filter_shape: list(int)")
    .Attr("block: int")
    .Attr("groups: int = 1")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("pads: list(int) = [0, 0, 0, 0]")
    .Attr("dilations: list(int) = [1, 1]")
    .Attr("activation: string = 'none'")
    .Attr("input_layout: string = 'nchwc'")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(Conv2DNchwcShape)
    .NoGradient()  // inference over a filter laid out at import
    .Doc(R"doc(
activation(Conv2D(x * scale, W) + bias + residual) in the NCHWc layout: y is [N, ceil(O / block), OH, OW, block].

One group (dense, any kernel size; x NCHWc or, for a network's first conv,
plain NCHW), or depthwise (groups = out_channels, one input channel each).
Padding lanes of y come out as activation(0 + residual); those of x are read
against zero weights.

x: [N, ceil(C / block), H, W, block] (input_layout 'nchwc') or [N, C, H, W] ('nchw').
filter: W [O, C / groups, kh, kw] laid out flat: dense NCHWc [ceil(O/block), ceil(C/block), kh, kw, block (in), block (out)]; dense NCHW [ceil(O/block), kh, kw, C, block (out)]; depthwise [ceil(O/block), kh, kw, block]; zeros past O and C.
bias: ceil(O / block) * block values (zeros past O), or empty.
residual: Added before the activation: y's shape, or empty.
scale: Empty, or [N, ceil(C / block), 1, 1, block] (dense, NCHWc input): x's channels multiplied per image before the conv (a squeeze-and-excitation block's Mul).
filter_shape: W's shape [out_channels, in_channels / groups, kernel_height, kernel_width].
block: Channels per block, 8 or 16.
groups: 1, or out_channels (depthwise).
strides: Stride along height and width.
pads: Zero padding [top, left, bottom, right].
dilations: Dilation along height and width.
activation: 'none', 'relu', 'sigmoid', 'silu' or 'hardswish'.
input_layout: 'nchwc' or 'nchw' (dense only).
y: The blocked output.
)doc");

REGISTER_OP("GlobalAveragePoolNchwc")
    .Input("x: T")
    .Attr("block: int")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(GlobalAvgShape)
    .NoGradient()  // inference layout only
    .Doc(R"doc(
The mean over height and width of an NCHWc tensor: [N, Cb, H, W, block] -> [N, Cb, 1, 1, block].

x: The blocked tensor.
block: Channels per block, 8 or 16 (x's last dim).
y: The blocked means.
)doc");

REGISTER_OP("Conv2DNchwcConcat")
    .Input("x: T")
    .Input("filters: N * T")
    .Input("bias: T")
    .Attr("N: int >= 1")
    .Attr("filter_shapes: list(int)")
    .Attr("strides: list(int)")
    .Attr("pads: list(int)")
    .Attr("dilations: list(int)")
    .Attr("block: int")
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(Conv2DNchwcConcatShape)
    .NoGradient()  // inference over filters laid out at import
    .Doc(R"doc(
Concat([activation(Conv2DNchwc(x, filter_i) + bias_i) for each filter], along the channel blocks), with no Concat.

Each dense conv writes its output blocks straight into its slice of y (a
SqueezeNet fire module's 1x1 and 3x3 expands over one blocked input), so the
pieces are never stored apart and copied together. Block i of y is conv j's
block i minus the blocks of the convs before j: where a filter's out_channels
is not a multiple of block, its padding lanes stay between the pieces.

x: [N, ceil(C / block), H, W, block], read by every filter.
filters: Each filter laid out as Conv2DNchwc's dense NCHWc filter, [ceil(O/block), ceil(C/block), kh, kw, block (in), block (out)].
bias: Each filter's ceil(O / block) * block values one after another (zeros past O), or empty for none.
filter_shapes: 4 ints per filter, [out_channels, in_channels, kernel_height, kernel_width]; every in_channels C.
strides: 2 ints per filter: stride along height and width.
pads: 4 ints per filter: zero padding [top, left, bottom, right].
dilations: 2 ints per filter: dilation along height and width.
block: Channels per block, 8 or 16.
activation: 'none', 'relu', 'sigmoid', 'silu' or 'hardswish', for every filter.
y: [N, sum of ceil(O_i / block), OH, OW, block]; every filter's OH x OW must agree.
)doc");

REGISTER_OP("MaxPool2DNchwc")
    .Input("x: T")
    .Attr("ksize: list(int)")
    .Attr("block: int")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("pads: list(int) = [0, 0, 0, 0]")
    .Attr("dilations: list(int) = [1, 1]")
    .Attr("ceil_mode: bool = false")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(MaxPoolNchwcShape)
    .NoGradient()  // inference layout only
    .Doc(R"doc(
MaxPool2D on an NCHWc tensor: [N, Cb, H, W, block] -> [N, Cb, OH, OW, block], each lane its channel's pool.

A pixel's block of channels is one vector, so every window is whole-vector
loads whatever the stride. Padding never wins (it acts as -inf); a NaN in a
window gives NaN.

x: The blocked tensor.
ksize: The window (height, width), each in [1, 64].
block: Channels per block, 8 or 16 (x's last dim).
strides: The step of the window on (height, width), each >= 1.
pads: Implicit -inf padding (top, left, bottom, right), each smaller than the dilated window.
dilations: The spacing of the window taps on (height, width).
ceil_mode: Round the output size up (a last window starting in the end padding is dropped).
y: The pooled blocked tensor.
)doc");

}  // namespace opforge
