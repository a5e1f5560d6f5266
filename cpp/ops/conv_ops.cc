// Convolution ops, NCHW: Conv2D and its backward ops for the input and the
// filter. 1-D convolution is Conv2D over a height of 1 (opforge.nn.functional).
// Padding is explicit here ([top, left, bottom, right], ONNX's order); the
// Python layers turn 'same' / 'valid' into pads.
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "conv_shape.h"
#include "shape_checks.h"

namespace opforge {
namespace {

constexpr const char* kFloat = "T: {float32, float64, halftype}";

using conv_shape::CheckWindowAttrs;
using conv_shape::ConvForwardShape;

Status Conv2DShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(ConvForwardShape(ctx->input_shape(0), ctx->input_shape(1), ctx, &y));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

// (x, filter, dy): dy must be Conv2D(x, filter)'s shape; output `which`'s shape.
Status ConvBackpropShape(InferenceContext* ctx, int which) {
  TensorShape y;
  OF_RETURN_IF_ERROR(ConvForwardShape(ctx->input_shape(0), ctx->input_shape(1), ctx, &y));
  const TensorShape& dy = ctx->input_shape(2);
  bool match = dy.rank() == 4;
  for (int i = 0; match && i < 4; ++i) match = y.dim(i) < 0 || dy.dim(i) < 0 || y.dim(i) == dy.dim(i);
  if (!match) {
    return errors::InvalidArgument("argument 'dy' must have Conv2D(x, filter)'s shape ", y.DebugString(), ", got ",
                                   dy.DebugString());
  }
  ctx->set_output_shape(0, ctx->input_shape(which));
  return Status::OK();
}
Status Conv2DBackpropInputShape(InferenceContext* ctx) { return ConvBackpropShape(ctx, 0); }
Status Conv2DBackpropFilterShape(InferenceContext* ctx) { return ConvBackpropShape(ctx, 1); }


// ConvTranspose2D: x [N, C, H, W], filter [C, O / groups, kh, kw] -> y [N, O,
// OH, OW] with OH = (H - 1) * stride - pad_top - pad_bottom + dilation * (kh - 1)
// + output_padding + 1; Conv2D(y, filter) has x's shape again (output_padding <
// stride), so the gradients are Conv2D and Conv2DBackpropFilter.
Status ConvTranspose2DShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckWindowAttrs(ctx));
  const TensorShape& x = ctx->input_shape(0);
  const TensorShape& f = ctx->input_shape(1);
  if (x.rank() != 4) {
    return errors::InvalidArgument("argument 'x' must be 4-D [batch, channels, height, width], got shape ",
                                   x.DebugString());
  }
  if (f.rank() != 4) {
    return errors::InvalidArgument(
        "argument 'filter' must be 4-D [in_channels, out_channels / groups, kh, kw], got shape ", f.DebugString());
  }
  const int64_t g = ctx->attr_int("groups");
  if (g < 1) return errors::InvalidArgument("attr 'groups' must be >= 1, got ", g);
  const int64_t c = x.dim(1);
  if (c >= 0 && c % g != 0) {
    return errors::InvalidArgument("argument 'x' has ", c, " channels, which do not divide by attr 'groups' ", g);
  }
  if (c >= 0 && f.dim(0) >= 0 && f.dim(0) != c) {
    return errors::InvalidArgument("argument 'filter' has ", f.dim(0), " input channels (dim 0); argument 'x' has ",
                                   c, " channels");
  }
  const std::vector<int64_t>& s = ctx->attr_ints("strides");
  const std::vector<int64_t>& d = ctx->attr_ints("dilations");
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  const std::vector<int64_t>& op = ctx->attr_ints("output_padding");
  if (op.size() != 2 || op[0] < 0 || op[1] < 0 || op[0] >= s[0] || op[1] >= s[1]) {
    return errors::InvalidArgument("attr 'output_padding' must be 2 ints >= 0 and below attr 'strides' ",
                                   ListString(s), ", got ", ListString(op));
  }
  int64_t out[2];
  const char* axis[2] = {"height", "width"};
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x.dim(2 + i), k = f.dim(2 + i);
    if (in < 0 || k < 0) {
      out[i] = -1;
      continue;
    }
    if (in == 0) return errors::InvalidArgument("argument 'x' has ", axis[i], " 0");
    if (k == 0) return errors::InvalidArgument("argument 'filter' has kernel ", axis[i], " 0");
    if (in - 1 > (int64_t{1} << 40) / s[i]) {
      return errors::InvalidArgument("argument 'x': the output ", axis[i], " overflows (input ", in, ", stride ",
                                     s[i], ")");
    }
    out[i] = (in - 1) * s[i] - p[i] - p[i + 2] + d[i] * (k - 1) + op[i] + 1;
    if (out[i] < 1) {
      return errors::InvalidArgument("attr 'pads' ", ListString(p), " leave an output ", axis[i], " of ", out[i],
                                     " (input ", in, ", kernel ", k, ")");
    }
  }
  const int64_t o = f.dim(1) < 0 ? -1 : f.dim(1) * g;
  ctx->set_output_shape(0, TensorShape({x.dim(0), o, out[0], out[1]}));
  return Status::OK();
}


// FusedConv2D: Conv2D's shape, a bias of [out_channels] and a known activation.
Status FusedConv2DShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(ConvForwardShape(ctx->input_shape(0), ctx->input_shape(1), ctx, &y));
  const TensorShape& b = ctx->input_shape(2);
  if (b.rank() != 1 || (y.dim(1) >= 0 && b.dim(0) >= 0 && b.dim(0) != y.dim(1))) {
    return errors::InvalidArgument("argument 'bias' must be 1-D of length out_channels ", y.dim(1), ", got shape ",
                                   b.DebugString());
  }
  OF_RETURN_IF_ERROR(conv_shape::CheckConvActivation(ctx));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

}  // namespace

#define OF_CONV_ATTRS                                  \
  Attr("strides: list(int) = [1, 1]")                  \
      .Attr("pads: list(int) = [0, 0, 0, 0]")          \
      .Attr("dilations: list(int) = [1, 1]")           \
      .Attr("groups: int >= 1 = 1")

#define OF_CONV_ARGS "strides=strides, pads=pads, dilations=dilations, groups=groups"

REGISTER_OP("Conv2D")
    .Input("x: T")
    .Input("filter: T")
    .OF_CONV_ATTRS
    .Output("y: T")
    .Attr(kFloat)
    .SetShapeFn(Conv2DShape)
    .Gradient("x = Conv2DBackpropInput(x, filter, dy, " OF_CONV_ARGS ")")
    .Gradient("filter = Conv2DBackpropFilter(x, filter, dy, " OF_CONV_ARGS ")")
    .Doc(R"doc(
2-D cross-correlation over NCHW input, as torch.nn.functional.conv2d and ONNX Conv.

y[n, o, i, j] = sum over c in o's group, a, b of
x_padded[n, c, i * strides[0] + a * dilations[0], j * strides[1] + b * dilations[1]] *
filter[o, c - group start, a, b]. Lowered onto GEMM (im2col; a 1x1
convolution with unit strides and no pads reads x directly); depthwise
convolution (groups == channels == out_channels) runs a direct kernel.

x: The input, [batch, channels, height, width].
filter: The weights, [out_channels, channels / groups, kernel_height, kernel_width].
strides: The step of the window on (height, width), each >= 1.
pads: Zero padding (top, left, bottom, right), each >= 0.
dilations: The spacing of the kernel taps on (height, width), each >= 1.
groups: Channels and out_channels split into this many independent groups; both must divide by it.
y: The output, [batch, out_channels, out_height, out_width] with out = (in + pads - dilation * (k - 1) - 1) / stride + 1.
)doc");

REGISTER_OP("Conv2DBackpropInput")
    .Input("x: T")
    .Input("filter: T")
    .Input("dy: T")
    .OF_CONV_ATTRS
    .Output("dx: T")
    .Attr(kFloat)
    .SetShapeFn(Conv2DBackpropInputShape)
    // Linear in filter and dy: <ddx, dx> = <Conv2D(ddx, filter), dy>.
    .Gradient("x = ZerosLike(x)")
    .Gradient("filter = Conv2DBackpropFilter(ddx, filter, dy, " OF_CONV_ARGS ")")
    .Gradient("dy = Conv2D(ddx, filter, " OF_CONV_ARGS ")")
    .Doc(R"doc(
The backward op of Conv2D for its input: the transposed convolution of dy with filter.

x: Conv2D's input; only its shape is read.
filter: Conv2D's filter.
dy: The gradient with respect to Conv2D's output.
strides: Conv2D's strides.
pads: Conv2D's pads.
dilations: Conv2D's dilations.
groups: Conv2D's groups.
dx: The gradient with respect to x, with x's shape.
)doc");

REGISTER_OP("Conv2DBackpropFilter")
    .Input("x: T")
    .Input("filter: T")
    .Input("dy: T")
    .OF_CONV_ATTRS
    .Output("dfilter: T")
    .Attr(kFloat)
    .SetShapeFn(Conv2DBackpropFilterShape)
    // Linear in x and dy: <ddfilter, dfilter> = <Conv2D(x, ddfilter), dy>.
    .Gradient("x = Conv2DBackpropInput(x, ddfilter, dy, " OF_CONV_ARGS ")")
    .Gradient("filter = ZerosLike(filter)")
    .Gradient("dy = Conv2D(x, ddfilter, " OF_CONV_ARGS ")")
    .Doc(R"doc(
The backward op of Conv2D for its filter: the correlation of x with dy, summed over the batch.

x: Conv2D's input.
filter: Conv2D's filter; only its shape is read.
dy: The gradient with respect to Conv2D's output.
strides: Conv2D's strides.
pads: Conv2D's pads.
dilations: Conv2D's dilations.
groups: Conv2D's groups.
dfilter: The gradient with respect to filter, with filter's shape.
)doc");


REGISTER_OP("ConvTranspose2D")
    .Input("x: T")
    .Input("filter: T")
    .OF_CONV_ATTRS
    .Attr("output_padding: list(int) = [0, 0]")
    .Output("y: T")
    .Attr(kFloat)
    .SetShapeFn(ConvTranspose2DShape)
    // y = Conv2DBackpropInput(y's shape, filter, x): linear in x and filter.
    .Gradient("x = Conv2D(dy, filter, " OF_CONV_ARGS ")")
    .Gradient("filter = Conv2DBackpropFilter(dy, filter, x, " OF_CONV_ARGS ")")
    .Doc(R"doc(
2-D transposed convolution over NCHW input, as torch.nn.functional.conv_transpose2d and ONNX ConvTranspose.

The adjoint of Conv2D with the same filter and attrs: each input pixel
scatters filter-weighted copies into the output, so y = Conv2DBackpropInput
of a Conv2D whose input has y's shape. Runs as one GEMM per (image, group)
and a col2im scatter.

x: The input, [batch, in_channels, height, width].
filter: The weights, [in_channels, out_channels / groups, kernel_height, kernel_width] (PyTorch's layout).
strides: The step of the window on (height, width), each >= 1.
pads: Removed from the full output (top, left, bottom, right), each >= 0.
dilations: The spacing of the kernel taps on (height, width), each >= 1.
groups: in_channels and out_channels split into this many independent groups.
output_padding: Extra rows / columns at the bottom / right, each below the stride.
y: The output, [batch, out_channels, out_height, out_width] with out = (in - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + output_padding + 1.
)doc");


REGISTER_OP("FusedConv2D")
    .Input("x: T")
    .Input("filter: T")
    .Input("bias: T")
    .OF_CONV_ATTRS
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr(kFloat)
    .SetShapeFn(FusedConv2DShape)
    // An inference fast path (the ONNX importer's Conv + bias (+ Relu /
    // Sigmoid / x * Sigmoid / HardSwish)); a gradient would be the unfused ops'.
    .NoGradient()
    .Doc(R"doc(
activation(Conv2D(x, filter) + bias) in one pass: the bias and the activation are applied to each output tile of the convolution's GEMM while it is in cache.

x: The input, [batch, channels, height, width].
filter: The weights, [out_channels, channels / groups, kernel_height, kernel_width].
bias: Added per output channel, [out_channels].
strides: As Conv2D's.
pads: As Conv2D's.
dilations: As Conv2D's.
groups: As Conv2D's.
activation: 'none', 'relu', 'sigmoid', 'silu' (x * sigmoid(x)) or 'hardswish' (x * clip(x / 6 + 0.5, 0, 1)).
y: activation(Conv2D(x, filter) + bias[o]), Conv2D's shape.
)doc");

#undef OF_CONV_ARGS
#undef OF_CONV_ATTRS

}  // namespace opforge
