// ResizeBilinear over the two spatial axes of NCHW input, with the ONNX
// coordinate transformation modes torchvision and YOLO-style models export,
// and its backward op.
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace {

Status CheckResizeAttrs(InferenceContext* ctx, const TensorShape& x) {
  const std::vector<int64_t>& size = ctx->attr_ints("size");
  const std::vector<double>& scales = ctx->attr("scales").list_f;
  const std::string& mode = ctx->attr("coordinate_mode").s;
  if (mode != "half_pixel" && mode != "pytorch_half_pixel" && mode != "align_corners" && mode != "asymmetric") {
    return errors::InvalidArgument(
        "attr 'coordinate_mode' must be 'half_pixel', 'pytorch_half_pixel', 'align_corners' or 'asymmetric', got '",
        mode, "'");
  }
  if (size.size() != 2 || size[0] < 1 || size[1] < 1 || size[0] > (int64_t{1} << 31) ||
      size[1] > (int64_t{1} << 31)) {
    return errors::InvalidArgument("attr 'size' must be 2 ints >= 1 (height, width), got ", ListString(size));
  }
  if (!scales.empty() && (scales.size() != 2 || !(scales[0] > 0) || !(scales[1] > 0))) {
    return errors::InvalidArgument("attr 'scales' must be empty or 2 floats > 0 (height, width)");
  }
  if (x.rank() != 4) {
    return errors::InvalidArgument("argument 'x' must be 4-D [batch, channels, height, width], got shape ",
                                   x.DebugString());
  }
  for (int i = 2; i < 4; ++i) {
    if (x.dim(i) == 0) return errors::InvalidArgument("argument 'x' has an empty spatial axis: ", x.DebugString());
  }
  return Status::OK();
}

Status ResizeBilinearShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  OF_RETURN_IF_ERROR(CheckResizeAttrs(ctx, x));
  const std::vector<int64_t>& size = ctx->attr_ints("size");
  ctx->set_output_shape(0, TensorShape({x.dim(0), x.dim(1), size[0], size[1]}));
  return Status::OK();
}

Status ResizeBilinearGradShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  OF_RETURN_IF_ERROR(CheckResizeAttrs(ctx, x));
  const std::vector<int64_t>& size = ctx->attr_ints("size");
  const TensorShape& dy = ctx->input_shape(1);
  const int64_t want[4] = {x.dim(0), x.dim(1), size[0], size[1]};
  bool match = dy.rank() == 4;
  for (int i = 0; match && i < 4; ++i) match = want[i] < 0 || dy.dim(i) < 0 || want[i] == dy.dim(i);
  if (!match) {
    return errors::InvalidArgument("argument 'dy' must have ResizeBilinear(x)'s shape ",
                                   TensorShape(want, 4).DebugString(), ", got ", dy.DebugString());
  }
  ctx->set_output_shape(0, x);
  return Status::OK();
}

}  // namespace

#define OF_RESIZE_ATTRS                                         \
  Attr("size: list(int)")                                       \
      .Attr("coordinate_mode: string = 'half_pixel'")           \
      .Attr("scales: list(float) = []")

REGISTER_OP("ResizeBilinear")
    .Input("x: T")
    .OF_RESIZE_ATTRS
    .Output("y: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(ResizeBilinearShape)
    .Gradient("x = ResizeBilinearGrad(x, dy, size=size, coordinate_mode=coordinate_mode, scales=scales)")
    .Doc(R"doc(
Bilinear resize of the height and width of NCHW input, as ONNX Resize (mode 'linear') and torch.nn.functional.interpolate(mode='bilinear').

Output pixel o maps to input coordinate u by coordinate_mode, with s the
scale (attr `scales`, else out / in): 'half_pixel' u = (o + 0.5) / s - 0.5;
'pytorch_half_pixel' the same, but 0 when the output has size 1;
'align_corners' u = o (in - 1) / (out - 1); 'asymmetric' u = o / s. u is
clamped to [0, in - 1] and the two neighbours are mixed linearly.

x: The input, [batch, channels, height, width].
size: The output (height, width), each >= 1.
coordinate_mode: 'half_pixel' (torch align_corners=False), 'pytorch_half_pixel', 'align_corners' or 'asymmetric'.
scales: Empty, or the (height, width) scales the coordinates use (ONNX's scales input), each > 0.
y: The output, [batch, channels, size[0], size[1]].
)doc");

REGISTER_OP("ResizeBilinearGrad")
    .Input("x: T")
    .Input("dy: T")
    .OF_RESIZE_ATTRS
    .Output("dx: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(ResizeBilinearGradShape)
    // Linear in dy and ResizeBilinear's adjoint: <ddx, dx> = <ResizeBilinear(ddx), dy>.
    .Gradient("x = ZerosLike(x)")
    .Gradient("dy = ResizeBilinear(ddx, size=size, coordinate_mode=coordinate_mode, scales=scales)")
    .Doc(R"doc(
The backward op of ResizeBilinear: each dy is split over the four input pixels it was mixed from.

x: ResizeBilinear's input; only its shape is read.
dy: The gradient with respect to ResizeBilinear's output.
size: ResizeBilinear's size.
coordinate_mode: ResizeBilinear's coordinate_mode.
scales: ResizeBilinear's scales.
dx: The gradient with respect to x, with x's shape.
)doc");

#undef OF_RESIZE_ATTRS

}  // namespace opforge
