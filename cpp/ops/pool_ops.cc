// Pooling ops, NCHW: MaxPool2D, AvgPool2D, AdaptiveAvgPool2D and their
// backward ops. Global pooling is Mean / Max over axes [2, 3].
#include <cstdint>
#include <string>
#include <vector>

#include "conv_shape.h"
#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace {

constexpr const char* kFloat = "T: {float32, float64}";
// The forward pools also take float16/bfloat16 (computed in float32: cpp/kernels/half_kernels.cc).
constexpr const char* kFloatHalf = "T: {float32, float64, halftype}";

Status CheckX(const TensorShape& x, const char* name) {
  if (x.rank() != 4) {
    return errors::InvalidArgument("argument '", name, "' must be 4-D [batch, channels, height, width], got shape ",
                                   x.DebugString());
  }
  return Status::OK();
}

// MaxPool2D / AvgPool2D output from x (AvgPool2D has no dilations).
Status PoolShapeOf(InferenceContext* ctx, const TensorShape& x, TensorShape* y) {
  OF_RETURN_IF_ERROR(CheckX(x, "x"));
  const std::vector<int64_t>& k = ctx->attr_ints("ksize");
  const std::vector<int64_t>& s = ctx->attr_ints("strides");
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  std::vector<int64_t> d = {1, 1};
  if (ctx->op().FindAttr("dilations") >= 0) d = ctx->attr_ints("dilations");
  if (k.size() != 2 || k[0] < 1 || k[1] < 1) {
    return errors::InvalidArgument("attr 'ksize' must be 2 ints >= 1 (height, width), got ", ListString(k));
  }
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
  const bool ceil_mode = ctx->attr_bool("ceil_mode");
  int64_t oh, ow;
  OF_RETURN_IF_ERROR(conv_shape::PoolOutDim(x.dim(2), k[0], s[0], d[0], p[0], p[2], ceil_mode, "height", &oh));
  OF_RETURN_IF_ERROR(conv_shape::PoolOutDim(x.dim(3), k[1], s[1], d[1], p[1], p[3], ceil_mode, "width", &ow));
  *y = TensorShape({x.dim(0), x.dim(1), oh, ow});
  return Status::OK();
}

Status PoolShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(PoolShapeOf(ctx, ctx->input_shape(0), &y));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

Status CheckDy(const TensorShape& y, const TensorShape& dy, const char* op) {
  bool match = dy.rank() == y.rank();
  for (int i = 0; match && i < y.rank(); ++i) match = y.dim(i) < 0 || dy.dim(i) < 0 || y.dim(i) == dy.dim(i);
  if (!match) {
    return errors::InvalidArgument("argument 'dy' must have ", op, "(x)'s shape ", y.DebugString(), ", got ",
                                   dy.DebugString());
  }
  return Status::OK();
}

Status PoolGradShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(PoolShapeOf(ctx, ctx->input_shape(0), &y));
  OF_RETURN_IF_ERROR(CheckDy(y, ctx->input_shape(1), "the pool"));
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}

Status AdaptiveShapeOf(InferenceContext* ctx, const TensorShape& x, TensorShape* y) {
  OF_RETURN_IF_ERROR(CheckX(x, "x"));
  const std::vector<int64_t>& o = ctx->attr_ints("output_size");
  if (o.size() != 2 || o[0] < 1 || o[1] < 1) {
    return errors::InvalidArgument("attr 'output_size' must be 2 ints >= 1 (height, width), got ", ListString(o));
  }
  if ((x.dim(2) == 0 || x.dim(3) == 0) && x.num_elements() != 0) {
    return errors::InvalidArgument("argument 'x' has an empty spatial axis, shape ", x.DebugString());
  }
  *y = TensorShape({x.dim(0), x.dim(1), o[0], o[1]});
  return Status::OK();
}

Status AdaptiveShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(AdaptiveShapeOf(ctx, ctx->input_shape(0), &y));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

Status AdaptiveGradShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(AdaptiveShapeOf(ctx, ctx->input_shape(0), &y));
  OF_RETURN_IF_ERROR(CheckDy(y, ctx->input_shape(1), "AdaptiveAvgPool2D"));
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}

}  // namespace

REGISTER_OP("MaxPool2D")
    .Input("x: T")
    .Attr("ksize: list(int)")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("pads: list(int) = [0, 0, 0, 0]")
    .Attr("dilations: list(int) = [1, 1]")
    .Attr("ceil_mode: bool = false")
    .Output("y: T")
    .Attr(kFloatHalf)
    .SetShapeFn(PoolShape)
    .Gradient("x = MaxPool2DGrad(x, dy, ksize=ksize, strides=strides, pads=pads, dilations=dilations, "
              "ceil_mode=ceil_mode)")
    .Doc(R"doc(
2-D max pooling over NCHW input, as torch.nn.functional.max_pool2d and ONNX MaxPool.

Padding never wins (it acts as -inf); NaN in a window gives NaN.

x: The input, [batch, channels, height, width].
ksize: The window (height, width).
strides: The step of the window on (height, width), each >= 1.
pads: Implicit -inf padding (top, left, bottom, right), each smaller than the dilated window.
dilations: The spacing of the window taps on (height, width).
ceil_mode: Round the output size up (a last window starting in the end padding is dropped).
y: The pooled output, [batch, channels, out_height, out_width].
)doc");

REGISTER_OP("MaxPool2DGrad")
    .Input("x: T")
    .Input("dy: T")
    .Attr("ksize: list(int)")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("pads: list(int) = [0, 0, 0, 0]")
    .Attr("dilations: list(int) = [1, 1]")
    .Attr("ceil_mode: bool = false")
    .Output("dx: T")
    .Attr(kFloat)
    .SetShapeFn(PoolGradShape)
    // Second derivatives of max pooling are not supported yet (they need a
    // gather of ddx at each window's argmax).
    .NoGradient()
    .Doc(R"doc(
The backward op of MaxPool2D: each dy goes to the first maximum of its window in x.

x: MaxPool2D's input.
dy: The gradient with respect to MaxPool2D's output.
ksize: MaxPool2D's ksize.
strides: MaxPool2D's strides.
pads: MaxPool2D's pads.
dilations: MaxPool2D's dilations.
ceil_mode: MaxPool2D's ceil_mode.
dx: The gradient with respect to x, with x's shape.
)doc");

REGISTER_OP("AvgPool2D")
    .Input("x: T")
    .Attr("ksize: list(int)")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("pads: list(int) = [0, 0, 0, 0]")
    .Attr("ceil_mode: bool = false")
    .Attr("count_include_pad: bool = false")
    .Output("y: T")
    .Attr(kFloatHalf)
    .SetShapeFn(PoolShape)
    .Gradient("x = AvgPool2DGrad(x, dy, ksize=ksize, strides=strides, pads=pads, ceil_mode=ceil_mode, "
              "count_include_pad=count_include_pad)")
    .Doc(R"doc(
2-D average pooling over NCHW input, as torch.nn.functional.avg_pool2d and ONNX AveragePool.

With count_include_pad the divisor counts the zero padding (but never the
part of a ceil_mode window past the end padding), as PyTorch; without it,
only the input pixels in the window.

x: The input, [batch, channels, height, width].
ksize: The window (height, width).
strides: The step of the window on (height, width), each >= 1.
pads: Zero padding (top, left, bottom, right), each smaller than the window.
ceil_mode: Round the output size up (a last window starting in the end padding is dropped).
count_include_pad: Whether padding counts in the divisor.
y: The pooled output, [batch, channels, out_height, out_width].
)doc");

REGISTER_OP("AvgPool2DGrad")
    .Input("x: T")
    .Input("dy: T")
    .Attr("ksize: list(int)")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("pads: list(int) = [0, 0, 0, 0]")
    .Attr("ceil_mode: bool = false")
    .Attr("count_include_pad: bool = false")
    .Output("dx: T")
    .Attr(kFloat)
    .SetShapeFn(PoolGradShape)
    // Linear in dy; its adjoint is AvgPool2D itself.
    .Gradient("x = ZerosLike(x)")
    .Gradient("dy = AvgPool2D(ddx, ksize=ksize, strides=strides, pads=pads, ceil_mode=ceil_mode, "
              "count_include_pad=count_include_pad)")
    .Doc(R"doc(
The backward op of AvgPool2D: each dy spread evenly over its window (by the same divisor).

x: AvgPool2D's input; only its shape is read.
dy: The gradient with respect to AvgPool2D's output.
ksize: AvgPool2D's ksize.
strides: AvgPool2D's strides.
pads: AvgPool2D's pads.
ceil_mode: AvgPool2D's ceil_mode.
count_include_pad: AvgPool2D's count_include_pad.
dx: The gradient with respect to x, with x's shape.
)doc");

REGISTER_OP("AdaptiveAvgPool2D")
    .Input("x: T")
    .Attr("output_size: list(int)")
    .Output("y: T")
    .Attr(kFloatHalf)
    .SetShapeFn(AdaptiveShape)
    .Gradient("x = AdaptiveAvgPool2DGrad(x, dy, output_size=output_size)")
    .Doc(R"doc(
Average pooling to a given output size, as torch.nn.functional.adaptive_avg_pool2d.

Output row i averages input rows floor(i * H / OH) to ceil((i + 1) * H / OH)
(exclusive), and likewise for columns.

x: The input, [batch, channels, height, width] with height, width >= 1.
output_size: The output (height, width), each >= 1.
y: The pooled output, [batch, channels, output_size[0], output_size[1]].
)doc");

REGISTER_OP("AdaptiveAvgPool2DGrad")
    .Input("x: T")
    .Input("dy: T")
    .Attr("output_size: list(int)")
    .Output("dx: T")
    .Attr(kFloat)
    .SetShapeFn(AdaptiveGradShape)
    .Gradient("x = ZerosLike(x)")
    .Gradient("dy = AdaptiveAvgPool2D(ddx, output_size=output_size)")
    .Doc(R"doc(
The backward op of AdaptiveAvgPool2D: each dy spread evenly over its window.

x: AdaptiveAvgPool2D's input; only its shape is read.
dy: The gradient with respect to AdaptiveAvgPool2D's output.
output_size: AdaptiveAvgPool2D's output_size.
dx: The gradient with respect to x, with x's shape.
)doc");

}  // namespace opforge
