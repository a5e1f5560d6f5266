// Pad: constant, reflect, edge and wrap padding of any rank (ONNX Pad,
// numpy.pad's modes of those names), and its backward op.
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace {

// x's shape grown by `pads` ([begin_0, ..., begin_r-1, end_0, ..., end_r-1]).
Status PaddedShape(InferenceContext* ctx, const TensorShape& x, TensorShape* out) {
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  const std::string& mode = ctx->attr("mode").s;
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return errors::InvalidArgument("attr 'mode' must be 'constant', 'reflect', 'edge' or 'wrap', got '", mode, "'");
  }
  const int r = x.rank();
  if (static_cast<int>(p.size()) != 2 * r) {
    return errors::InvalidArgument("attr 'pads' must have 2 * rank(x) = ", 2 * r,
                                   " entries (all begins, then all ends), got ", ListString(p));
  }
  std::vector<int64_t> dims(r);
  for (int a = 0; a < r; ++a) {
    const int64_t b = p[a], e = p[a + r], d = x.dim(a);
    if (b < 0 || e < 0) {
      return errors::InvalidArgument("attr 'pads' must be >= 0, got ", ListString(p));
    }
    if (b > (int64_t{1} << 40) || e > (int64_t{1} << 40)) {
      return errors::InvalidArgument("attr 'pads' ", ListString(p), ": the padded size overflows");
    }
    if (d >= 0 && (b > 0 || e > 0)) {
      if (mode == "reflect" && (b > d - 1 || e > d - 1)) {
        return errors::InvalidArgument("attr 'pads' ", ListString(p), ": mode 'reflect' needs pads below the size ",
                                       d, " of axis ", a, " of argument 'x'");
      }
      if ((mode == "edge" || mode == "wrap") && d == 0) {
        return errors::InvalidArgument("attr 'pads' ", ListString(p), ": mode '", mode, "' cannot pad axis ", a,
                                       " of argument 'x', which is empty");
      }
      if (mode == "wrap" && (b > d || e > d)) {
        return errors::InvalidArgument("attr 'pads' ", ListString(p), ": mode 'wrap' needs pads up to the size ", d,
                                       " of axis ", a, " of argument 'x'");
      }
    }
    dims[a] = d < 0 ? -1 : d + b + e;
  }
  *out = TensorShape(dims.data(), r);
  return Status::OK();
}

Status PadShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(PaddedShape(ctx, ctx->input_shape(0), &y));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

// (x, dy): dy must be Pad(x)'s shape.
Status PadGradShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  const TensorShape& dy = ctx->input_shape(1);
  TensorShape y;
  OF_RETURN_IF_ERROR(PaddedShape(ctx, x, &y));
  bool match = dy.rank() == y.rank();
  for (int i = 0; match && i < y.rank(); ++i) match = y.dim(i) < 0 || dy.dim(i) < 0 || y.dim(i) == dy.dim(i);
  if (!match) {
    return errors::InvalidArgument("argument 'dy' must have Pad(x)'s shape ", y.DebugString(), ", got ",
                                   dy.DebugString());
  }
  ctx->set_output_shape(0, x);
  return Status::OK();
}

}  // namespace

REGISTER_OP("Pad")
    .Input("x: T")
    .Attr("pads: list(int)")
    .Attr("mode: string = 'constant'")
    .Attr("constant_value: float = 0")
    .Output("y: T")
    .Attr("T: {float32, float64, float16, bfloat16, int32, int64}")
    .SetShapeFn(PadShape)
    .Gradient("x = PadGrad(x, dy, pads=pads, mode=mode)")
    .Doc(R"doc(
Pads every axis of x, as ONNX Pad and numpy.pad with mode 'constant', 'reflect', 'edge' or 'wrap'.

For axis a, pads[a] elements go before and pads[a + rank] after. 'constant'
fills them with constant_value; 'reflect' mirrors x without repeating the
border (pads below the axis size); 'edge' repeats the border; 'wrap' takes
them from the other end (pads up to the axis size).

x: The input, of any rank.
pads: 2 * rank(x) ints >= 0: all the begins, then all the ends (ONNX's order).
mode: 'constant', 'reflect', 'edge' or 'wrap'.
constant_value: The fill of mode 'constant' (cast to x's dtype).
y: The padded tensor, with y.shape[a] = x.shape[a] + pads[a] + pads[a + rank].
)doc");

REGISTER_OP("PadGrad")
    .Input("x: T")
    .Input("dy: T")
    .Attr("pads: list(int)")
    .Attr("mode: string = 'constant'")
    .Output("dx: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(PadGradShape)
    // Linear in dy and the adjoint of Pad (constant 0): <ddx, dx> = <Pad(ddx), dy>.
    .Gradient("x = ZerosLike(x)")
    .Gradient("dy = Pad(ddx, pads=pads, mode=mode, constant_value=0)")
    .Doc(R"doc(
The backward op of Pad: each element of dy is added to the element of x it was copied from (constant fill is dropped).

x: Pad's input; only its shape is read.
dy: The gradient with respect to Pad's output.
pads: Pad's pads.
mode: Pad's mode.
dx: The gradient with respect to x, with x's shape.
)doc");

}  // namespace opforge
