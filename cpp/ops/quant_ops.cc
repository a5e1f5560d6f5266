// Quantization ops (ONNX's): linear (de)quantization between float32 and
// uint8/int8, and the integer matmul and convolution on quantized operands.
// A scale must be finite and non-zero (checked by the kernels, which see the
// values); zero points are tensors of the quantized type, so always in range.
// None is differentiable: their outputs are integers (or, for
// DequantizeLinear, a function of integer inputs), so every op declares
// NoGradient; quantization-aware training would need a straight-through
// estimator, which opforge does not offer yet.
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "conv_shape.h"
#include "shape_checks.h"

namespace opforge {
namespace {

constexpr const char* kQ8 = "{uint8, int8}";

// A (scale, zero point) pair: both scalars (one element, rank <= 1), or both
// 1-D with `axis_dim` values (-1: a length not known yet; -2: scalars only).
Status CheckParams(const TensorShape& s, const char* sname, const TensorShape& z, const char* zname,
                   int64_t axis_dim, const char* what) {
  auto scalar = [](const TensorShape& t) { return t.rank() == 0 || (t.rank() == 1 && t.dim(0) == 1); };
  if (scalar(s)) {
    if (!scalar(z) && !(z.rank() == 1 && IsUnknownDim(z.dim(0)))) {
      return errors::InvalidArgument("argument '", zname, "' must have the shape of argument '", sname, "' ",
                                     s.DebugString(), ", got ", z.DebugString());
    }
    return Status::OK();
  }
  if (axis_dim == -2) {
    return errors::InvalidArgument("argument '", sname, "' must be a scalar, got shape ", s.DebugString());
  }
  if (s.rank() != 1) {
    return errors::InvalidArgument("argument '", sname, "' must be a scalar or 1-D (one per ", what,
                                   "), got shape ", s.DebugString());
  }
  if (axis_dim >= 0 && s.dim(0) >= 0 && s.dim(0) != axis_dim) {
    return errors::InvalidArgument("argument '", sname, "' has ", s.dim(0), " values, but needs one per ", what, " (",
                                   axis_dim, ")");
  }
  if (z.rank() != 1 || (z.dim(0) >= 0 && s.dim(0) >= 0 && z.dim(0) != s.dim(0))) {
    return errors::InvalidArgument("argument '", zname, "' must have the shape of argument '", sname, "' ",
                                   s.DebugString(), ", got ", z.DebugString());
  }
  return Status::OK();
}

// QuantizeLinear / DequantizeLinear: x, scale, zero point; per axis on `axis`.
Status LinearShape(InferenceContext* ctx, const char* sname, const char* zname) {
  const TensorShape& x = ctx->input_shape(0);
  const TensorShape& s = ctx->input_shape(1);
  int64_t axis_dim = -1;
  if (!(s.rank() == 0 || (s.rank() == 1 && s.dim(0) == 1))) {
    int axis = 0;
    OF_RETURN_IF_ERROR(NormalizeAxis(ctx->attr_int("axis"), x.rank(), "attr 'axis'", &axis));
    axis_dim = x.dim(axis);
  }
  OF_RETURN_IF_ERROR(CheckParams(s, sname, ctx->input_shape(2), zname, axis_dim, "index of x along attr 'axis'"));
  ctx->set_output_shape(0, x);
  return Status::OK();
}
Status QuantizeShape(InferenceContext* ctx) { return LinearShape(ctx, "y_scale", "y_zero_point"); }
Status DequantizeShape(InferenceContext* ctx) { return LinearShape(ctx, "x_scale", "x_zero_point"); }

Status DynamicQuantizeShape(InferenceContext* ctx) {
  ctx->set_output_shape(0, ctx->input_shape(0));
  ctx->set_output_shape(1, TensorShape({}));
  ctx->set_output_shape(2, TensorShape({}));
  return Status::OK();
}

// numpy.matmul's shape for a [..., m, k] and b [..., k, n] (1-D: a vector);
// m and n through *m, *n for the zero-point checks.
Status MatMulResult(const TensorShape& a, const TensorShape& b, TensorShape* out, int64_t* m, int64_t* n) {
  if (a.rank() < 1) return errors::InvalidArgument("argument 'a' must have rank >= 1, got a scalar");
  if (b.rank() < 1) return errors::InvalidArgument("argument 'b' must have rank >= 1, got a scalar");
  const int64_t ka = a.dim(a.rank() - 1), kb = b.rank() == 1 ? b.dim(0) : b.dim(b.rank() - 2);
  if (ka >= 0 && kb >= 0 && ka != kb) {
    return errors::InvalidArgument("argument 'a' has inner dimension ", ka, " but argument 'b' has ", kb,
                                   " (shapes ", a.DebugString(), " and ", b.DebugString(), ")");
  }
  *m = a.rank() == 1 ? 1 : a.dim(a.rank() - 2);
  *n = b.rank() == 1 ? 1 : b.dim(b.rank() - 1);
  std::vector<int64_t> ab, bb;
  for (int i = 0; i + 2 < a.rank(); ++i) ab.push_back(a.dim(i));
  for (int i = 0; i + 2 < b.rank(); ++i) bb.push_back(b.dim(i));
  TensorShape batch;
  OF_RETURN_IF_ERROR(BroadcastShapes(TensorShape(ab.data(), static_cast<int>(ab.size())), "a",
                                     TensorShape(bb.data(), static_cast<int>(bb.size())), "b", &batch));
  std::vector<int64_t> dims;
  for (int i = 0; i < batch.rank(); ++i) dims.push_back(batch.dim(i));
  if (a.rank() > 1) dims.push_back(*m);
  if (b.rank() > 1) dims.push_back(*n);
  return MakeShape(dims.data(), static_cast<int>(dims.size()), out);
}

// MatMulInteger (a, b, a_zero_point, b_zero_point) and QLinearMatMul (a,
// a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point).
// Zero points (and scales): scalars, or one per row of a / column of b.
Status MatMulIntegerShape(InferenceContext* ctx) {
  TensorShape y;
  int64_t m, n;
  OF_RETURN_IF_ERROR(MatMulResult(ctx->input_shape(0), ctx->input_shape(1), &y, &m, &n));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(2), "a_zero_point", ctx->input_shape(2), "a_zero_point", m,
                                 "row of a"));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(3), "b_zero_point", ctx->input_shape(3), "b_zero_point", n,
                                 "column of b"));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

Status QLinearMatMulShape(InferenceContext* ctx) {
  TensorShape y;
  int64_t m, n;
  OF_RETURN_IF_ERROR(MatMulResult(ctx->input_shape(0), ctx->input_shape(3), &y, &m, &n));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(1), "a_scale", ctx->input_shape(2), "a_zero_point", m, "row of a"));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(4), "b_scale", ctx->input_shape(5), "b_zero_point", n,
                                 "column of b"));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(6), "y_scale", ctx->input_shape(7), "y_zero_point", -2, ""));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

// Conv2D's geometry (NCHW, pads [top, left, bottom, right]) for x and w.
Status ConvShape(InferenceContext* ctx, const TensorShape& x, const TensorShape& w, TensorShape* y) {
  const std::vector<int64_t>& s = ctx->attr_ints("strides");
  const std::vector<int64_t>& d = ctx->attr_ints("dilations");
  const std::vector<int64_t>& p = ctx->attr_ints("pads");
  OF_RETURN_IF_ERROR(conv_shape::CheckWindowAttrs(ctx));
  if (x.rank() != 4) return errors::InvalidArgument("argument 'x' must be 4-D [N, C, H, W], got ", x.DebugString());
  if (w.rank() != 4) {
    return errors::InvalidArgument("argument 'w' must be 4-D [O, C / groups, kh, kw], got ", w.DebugString());
  }
  const int64_t g = ctx->attr_int("groups");
  const int64_t c = x.dim(1), o = w.dim(0);
  if ((c >= 0 && c % g != 0) || (o >= 0 && o % g != 0) || (c >= 0 && w.dim(1) >= 0 && w.dim(1) * g != c)) {
    return errors::InvalidArgument("argument 'w' ", w.DebugString(), " does not fit argument 'x' ", x.DebugString(),
                                   " with attr 'groups' ", g, " (w.shape[1] * groups must be x's channels, and "
                                   "both channel counts divide by groups)");
  }
  int64_t out[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x.dim(2 + i), k = w.dim(2 + i);
    if (in < 0 || k < 0) {
      out[i] = -1;
      continue;
    }
    const int64_t eff = (k - 1) * d[i] + 1, padded = in + p[i] + p[i + 2];
    if (k == 0 || eff > padded) {
      return errors::InvalidArgument("argument 'w': the dilated kernel ", eff, " is larger than the padded input ",
                                     padded, i == 0 ? " (height)" : " (width)");
    }
    out[i] = (padded - eff) / s[i] + 1;
  }
  *y = TensorShape({x.dim(0), o, out[0], out[1]});
  return Status::OK();
}

Status ConvIntegerShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(ConvShape(ctx, ctx->input_shape(0), ctx->input_shape(1), &y));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(2), "x_zero_point", ctx->input_shape(2), "x_zero_point", -2, ""));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(3), "w_zero_point", ctx->input_shape(3), "w_zero_point",
                                 ctx->input_shape(1).dim(0), "output channel of w"));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

Status QLinearConvShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(ConvShape(ctx, ctx->input_shape(0), ctx->input_shape(3), &y));
  const int64_t o = ctx->input_shape(3).dim(0);
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(1), "x_scale", ctx->input_shape(2), "x_zero_point", -2, ""));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(4), "w_scale", ctx->input_shape(5), "w_zero_point", o,
                                 "output channel of w"));
  OF_RETURN_IF_ERROR(CheckParams(ctx->input_shape(6), "y_scale", ctx->input_shape(7), "y_zero_point", -2, ""));
  const TensorShape& bias = ctx->input_shape(8);
  if (bias.rank() != 1 || (o >= 0 && bias.dim(0) >= 0 && bias.dim(0) != o)) {
    return errors::InvalidArgument("argument 'bias' must be 1-D with one value per output channel (", o,
                                   "), got ", bias.DebugString());
  }
  ctx->set_output_shape(0, y);
  return Status::OK();
}

}  // namespace

REGISTER_OP("QuantizeLinear")
    .Input("x: T")
    .Input("y_scale: float32")
    .Input("y_zero_point: Q")
    .Attr("axis: int = 1")
    .Output("y: Q")
    .Attr("T: {float32}")
    .Attr("Q: {uint8, int8, uint16, int16}")
    .SetShapeFn(QuantizeShape)
    .NoGradient()  // an integer output; see the file comment
    .Doc(R"doc(
Quantizes x to 8 (or 16) bits, as ONNX QuantizeLinear: y = saturate(round(x / y_scale) + y_zero_point).

round is to nearest, ties to even; saturate clamps to the range of y's type
(uint8 [0, 255], int8 [-128, 127], ...); NaN quantizes to the lowest value (as
onnxruntime). A scale that is zero, NaN or infinite is an InvalidArgumentError.

x: The values to quantize.
y_scale: The step: a scalar (per tensor) or 1-D with one value per index of x along axis.
y_zero_point: The quantized value of 0.0, with y_scale's shape; its dtype is y's.
axis: The axis of a per-axis scale (negative counts from the end).
y: The quantized tensor, of x's shape.
)doc");

REGISTER_OP("DequantizeLinear")
    .Input("x: T")
    .Input("x_scale: float32")
    .Input("x_zero_point: T")
    .Attr("axis: int = 1")
    .Output("y: float32")
    .Attr("T: {uint8, int8, uint16, int16, int32}")
    .SetShapeFn(DequantizeShape)
    .NoGradient()  // a function of integer inputs; see the file comment
    .Doc(R"doc(
Maps quantized values back to float32, as ONNX DequantizeLinear: y = (x - x_zero_point) * x_scale.

A scale that is zero, NaN or infinite is an InvalidArgumentError.

x: The quantized values.
x_scale: The step: a scalar or 1-D with one value per index of x along axis.
x_zero_point: The quantized value of 0.0, with x_scale's shape and x's dtype.
axis: The axis of a per-axis scale (negative counts from the end).
y: The float32 values, of x's shape.
)doc");

REGISTER_OP("DynamicQuantizeLinear")
    .Input("x: T")
    .Output("y: uint8")
    .Output("y_scale: float32")
    .Output("y_zero_point: uint8")
    .Attr("T: {float32}")
    .SetShapeFn(DynamicQuantizeShape)
    .NoGradient()  // integer outputs; see the file comment
    .Doc(R"doc(
Quantizes x to uint8 with a scale and zero point computed from its range, as ONNX DynamicQuantizeLinear.

With lo = min(0, min(x)) and hi = max(0, max(x)): y_scale = (hi - lo) / 255,
y_zero_point = saturate(round(-lo / y_scale)), y = saturate(round(x / y_scale) +
y_zero_point). An x of zeros gives y_scale 1 and y of zeros (as onnxruntime).
NaN or infinite values in x are an InvalidArgumentError (the range is undefined).

x: The values to quantize.
y: The quantized tensor, of x's shape.
y_scale: The computed scale (a scalar).
y_zero_point: The computed zero point (a scalar).
)doc");

REGISTER_OP("MatMulInteger")
    .Input("a: T1")
    .Input("b: T2")
    .Input("a_zero_point: T1")
    .Input("b_zero_point: T2")
    .Output("y: int32")
    .Attr(std::string("T1: ") + kQ8)
    .Attr(std::string("T2: ") + kQ8)
    .SetShapeFn(MatMulIntegerShape)
    .NoGradient()  // integer operands and output
    .Doc(R"doc(
The integer product (a - a_zero_point) @ (b - b_zero_point) in int32, as ONNX MatMulInteger.

numpy.matmul's shapes and broadcasting. Runs on the 8-bit GEMM (AVX-512 VNNI
vpdpbusd where the CPU has it, else AVX2, else portable code); int32 wraps on
overflow as numpy does.

a: The left operand, [..., m, k] (uint8 or int8).
b: The right operand, [..., k, n] (uint8 or int8).
a_zero_point: A scalar, or 1-D with one value per row of a (m).
b_zero_point: A scalar, or 1-D with one value per column of b (n).
y: The int32 product.
)doc");

REGISTER_OP("QLinearMatMul")
    .Input("a: T1")
    .Input("a_scale: float32")
    .Input("a_zero_point: T1")
    .Input("b: T2")
    .Input("b_scale: float32")
    .Input("b_zero_point: T2")
    .Input("y_scale: float32")
    .Input("y_zero_point: T3")
    .Output("y: T3")
    .Attr(std::string("T1: ") + kQ8)
    .Attr(std::string("T2: ") + kQ8)
    .Attr(std::string("T3: ") + kQ8)
    .SetShapeFn(QLinearMatMulShape)
    .NoGradient()  // integer operands and output
    .Doc(R"doc(
The quantized matmul of ONNX QLinearMatMul: MatMulInteger requantized to y's scale and zero point.

y = saturate(round(acc * a_scale * b_scale / y_scale) + y_zero_point), acc the
int32 product of MatMulInteger. Scales must be finite and non-zero.

a: The left operand, [..., m, k].
a_scale: a's scale: a scalar or one per row.
a_zero_point: a's zero point, with a_scale's shape.
b: The right operand, [..., k, n].
b_scale: b's scale: a scalar or one per column.
b_zero_point: b's zero point, with b_scale's shape.
y_scale: The output's scale (a scalar).
y_zero_point: The output's zero point (a scalar); its dtype is y's.
y: The quantized product.
)doc");

#define OF_QCONV_ATTRS                        \
  Attr("strides: list(int) = [1, 1]")         \
      .Attr("pads: list(int) = [0, 0, 0, 0]") \
      .Attr("dilations: list(int) = [1, 1]")  \
      .Attr("groups: int >= 1 = 1")

REGISTER_OP("ConvInteger")
    .Input("x: T1")
    .Input("w: T2")
    .Input("x_zero_point: T1")
    .Input("w_zero_point: T2")
    .OF_QCONV_ATTRS
    .Output("y: int32")
    .Attr(std::string("T1: ") + kQ8)
    .Attr(std::string("T2: ") + kQ8)
    .SetShapeFn(ConvIntegerShape)
    .NoGradient()  // integer operands and output
    .Doc(R"doc(
The integer 2-D convolution of ONNX ConvInteger (NCHW): Conv2D of (x - x_zero_point) and (w - w_zero_point) in int32.

Pads hold x_zero_point (a real 0). Lowered by im2col onto the 8-bit GEMM.

x: The input, [N, C, H, W].
w: The filter, [O, C / groups, kh, kw].
x_zero_point: x's zero point (a scalar).
w_zero_point: w's zero point: a scalar or one per output channel (O).
strides: The step of the window on (height, width), each >= 1.
pads: Padding (top, left, bottom, right), each >= 0.
dilations: The spacing of the kernel taps on (height, width), each >= 1.
groups: Channels and output channels split into this many independent groups.
y: The int32 output, [N, O, OH, OW].
)doc");

REGISTER_OP("QLinearConv")
    .Input("x: T1")
    .Input("x_scale: float32")
    .Input("x_zero_point: T1")
    .Input("w: T2")
    .Input("w_scale: float32")
    .Input("w_zero_point: T2")
    .Input("y_scale: float32")
    .Input("y_zero_point: T3")
    .Input("bias: int32")
    .OF_QCONV_ATTRS
    .Output("y: T3")
    .Attr(std::string("T1: ") + kQ8)
    .Attr(std::string("T2: ") + kQ8)
    .Attr(std::string("T3: ") + kQ8)
    .SetShapeFn(QLinearConvShape)
    .NoGradient()  // integer operands and output
    .Doc(R"doc(
The quantized 2-D convolution of ONNX QLinearConv: ConvInteger plus bias, requantized to y's scale and zero point.

y = saturate(round((acc + bias[o]) * x_scale * w_scale[o] / y_scale) + y_zero_point).

x: The input, [N, C, H, W].
x_scale: x's scale (a scalar).
x_zero_point: x's zero point (a scalar).
w: The filter, [O, C / groups, kh, kw].
w_scale: w's scale: a scalar or one per output channel.
w_zero_point: w's zero point, with w_scale's shape.
y_scale: The output's scale (a scalar).
y_zero_point: The output's zero point (a scalar); its dtype is y's.
bias: int32, one per output channel, in units of x_scale * w_scale (zeros for none).
strides: The step of the window on (height, width), each >= 1.
pads: Padding (top, left, bottom, right), each >= 0.
dilations: The spacing of the kernel taps on (height, width), each >= 1.
groups: Channels and output channels split into this many independent groups.
y: The quantized output, [N, O, OH, OW].
)doc");

#undef OF_QCONV_ATTRS

}  // namespace opforge
