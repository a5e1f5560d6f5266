// Ops over constant weights packed once: a Pack*Weight op turns a weight
// into an opaque uint8 "packed" tensor (a checked header, then the GEMM's
// panels: cpp/kernels/quant/packed_blob.h), run once when a model is
// imported or a layer built; the matching matmul op reads the panels
// directly instead of packing the weight on every call, as onnxruntime does
// with constant initializers. The consumer validates the blob: a truncated,
// edited or foreign one is an InvalidArgumentError naming argument
// 'packed'. Blobs are a per-process cache, not a file format: the int8 panels
// depend on the ISA (a blob packed under another OPFORGE_SIMD is refused).
#include <cstdint>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

constexpr int64_t kHeader = 128;

int64_t Up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// A weight [k, n] (or [n, k] with transpose_b), both dims known and >= 1.
Status WeightDims(const TensorShape& b, bool transpose_b, int64_t* k, int64_t* n) {
  if (b.rank() != 2) return errors::InvalidArgument("argument 'b' must be 2-D, got shape ", b.DebugString());
  *k = b.dim(transpose_b ? 1 : 0), *n = b.dim(transpose_b ? 0 : 1);
  if (IsUnknownDim(*k) || IsUnknownDim(*n)) {
    return errors::InvalidArgument("argument 'b' must have a known shape (a constant weight), got ", b.DebugString());
  }
  if (*k < 1 || *n < 1 || *k > (int64_t{1} << 30) || *n > (int64_t{1} << 30)) {
    return errors::InvalidArgument("argument 'b' must have between 1 and 2^30 rows and columns, got ",
                                   b.DebugString());
  }
  return Status::OK();
}

bool Scalar(const TensorShape& s) { return s.rank() == 0 || (s.rank() == 1 && s.dim(0) == 1); }

// Blob bytes for int8: the header, n zero points and n column sums (each
// padded to 64 bytes) and panels of the largest layout any ISA uses (AVX2's
// int16 panels: 2 bytes per weight, n and k padded to 32 and 4), so the
// shape does not depend on the CPU.
Status PackIntShape(InferenceContext* ctx) {
  int64_t k, n;
  OF_RETURN_IF_ERROR(WeightDims(ctx->input_shape(0), false, &k, &n));
  const TensorShape& z = ctx->input_shape(1);
  if (!Scalar(z) && !(z.rank() == 1 && (IsUnknownDim(z.dim(0)) || z.dim(0) == n))) {
    return errors::InvalidArgument("argument 'b_zero_point' must be a scalar or have one value per column of b (",
                                   n, "), got ", z.DebugString());
  }
  ctx->set_output_shape(0, TensorShape({kHeader + 2 * Up(4 * n, 64) + 2 * Up(n, 32) * Up(k, 4)}));
  return Status::OK();
}

// Blob bytes for float16: the header and float32 panels of 32 columns.
Status PackHalfShape(InferenceContext* ctx) {
  int64_t k, n;
  OF_RETURN_IF_ERROR(WeightDims(ctx->input_shape(0), ctx->attr_bool("transpose_b"), &k, &n));
  ctx->set_output_shape(0, TensorShape({kHeader + 4 * Up(n, 32) * k}));
  return Status::OK();
}

// x [..., k] times a packed [k, n]: y [..., n]. `packed` 1-D; `vectors`
// name inputs that are scalars or [n] (empty allowed where `may_be_empty`).
Status PackedProduct(InferenceContext* ctx, int packed_input, const char* x_name) {
  const TensorShape& x = ctx->input_shape(0);
  if (x.rank() < 1) return errors::InvalidArgument("argument '", x_name, "' must have rank >= 1, got a scalar");
  if (ctx->input_shape(packed_input).rank() != 1) {
    return errors::InvalidArgument("argument 'packed' must be 1-D (a Pack*Weight output), got ",
                                   ctx->input_shape(packed_input).DebugString());
  }
  const int64_t n = ctx->attr_int("n");
  std::vector<int64_t> dims;
  for (int i = 0; i + 1 < x.rank(); ++i) dims.push_back(x.dim(i));
  dims.push_back(n);
  TensorShape y;
  OF_RETURN_IF_ERROR(MakeShape(dims.data(), static_cast<int>(dims.size()), &y));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

Status PerColumn(const TensorShape& s, const char* name, int64_t n, bool scalar_ok, bool empty_ok) {
  if (scalar_ok && Scalar(s)) return Status::OK();
  if (s.rank() == 1 && (IsUnknownDim(s.dim(0)) || s.dim(0) == n || (empty_ok && s.dim(0) == 0))) return Status::OK();
  return errors::InvalidArgument("argument '", name, "' must be ", scalar_ok ? "a scalar or " : "",
                                 "1-D with one value per column (", n, ")", empty_ok ? " or empty" : "", ", got ",
                                 s.DebugString());
}

Status MatMulIntegerPackedShape(InferenceContext* ctx) {
  if (!Scalar(ctx->input_shape(1))) {
    return errors::InvalidArgument("argument 'a_zero_point' must be a scalar, got ",
                                   ctx->input_shape(1).DebugString());
  }
  return PackedProduct(ctx, 2, "a");
}

Status DynamicQuantizeMatMulShape(InferenceContext* ctx) {
  const int64_t n = ctx->attr_int("n");
  OF_RETURN_IF_ERROR(PerColumn(ctx->input_shape(2), "b_scale", n, true, false));
  OF_RETURN_IF_ERROR(PerColumn(ctx->input_shape(3), "bias", n, false, true));
  return PackedProduct(ctx, 1, "x");
}

Status HalfMatMulPackedShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(PerColumn(ctx->input_shape(2), "bias", ctx->attr_int("n"), false, true));
  return PackedProduct(ctx, 1, "a");
}

}  // namespace

REGISTER_OP("PackMatMulIntegerWeight")
    .Input("b: T")
    .Input("b_zero_point: T")
    .Output("packed: uint8")
    .Attr("T: {uint8, int8}")
    .SetShapeFn(PackIntShape)
    .NoGradient()  // an opaque blob
    .Doc(R"doc(
Packs a constant 8-bit weight once for MatMulIntegerPacked and DynamicQuantizeMatMul.

The blob holds the 8-bit GEMM's panels for this CPU's ISA with each column's
zero point and sum, behind a checked header. It is valid in this process
(and processes on the same ISA); a blob from another ISA is refused.

b: The weight, [k, n] (a Linear weight transposed, as ONNX MatMulInteger's B).
b_zero_point: A scalar, or one zero point per column of b.
packed: The opaque packed weight (uint8 bytes).
)doc");

REGISTER_OP("MatMulIntegerPacked")
    .Input("a: T")
    .Input("a_zero_point: T")
    .Input("packed: uint8")
    .Attr("n: int >= 1")
    .Output("y: int32")
    .Attr("T: {uint8, int8}")
    .SetShapeFn(MatMulIntegerPackedShape)
    .NoGradient()  // integer operands and output
    .Doc(R"doc(
MatMulInteger with a prepacked B: y = (a - a_zero_point) @ (b - b_zero_point) in int32.

a: The rows, [..., k] (leading axes folded into rows).
a_zero_point: The zero point of a (a scalar of a's type).
packed: b and its zero points, packed by PackMatMulIntegerWeight.
n: The number of columns of b (checked against the blob).
y: The int32 products, a.shape[:-1] + [n].
)doc");

REGISTER_OP("DynamicQuantizeMatMul")
    .Input("x: T")
    .Input("packed: uint8")
    .Input("b_scale: float32")
    .Input("bias: float32")
    .Attr("n: int >= 1")
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(DynamicQuantizeMatMulShape)
    .NoGradient()  // x is quantized: no useful derivative
    .Doc(R"doc(
DynamicQuantizeLinear, MatMulInteger with a prepacked weight, and the float rescale in one op (onnxruntime's
DynamicQuantizeMatMul).

x is quantized per tensor to uint8 as DynamicQuantizeLinear does (scale
(max(x, 0) - min(x, 0)) / 255), multiplied in int32 by the packed int8
weight, and each output tile is rescaled while in cache:
y = activation(acc * (x_scale * b_scale) + bias).

x: The float32 rows, [..., k].
packed: The int8 (or uint8) weight and its zero points, from PackMatMulIntegerWeight.
b_scale: The weight's scale: a scalar or one per column.
bias: One value per column, or empty for none.
n: The number of columns of the weight (checked against the blob).
activation: 'none' or 'relu'.
y: The float32 result, x.shape[:-1] + [n].
)doc");

REGISTER_OP("PackHalfMatMulWeight")
    .Input("b: T")
    .Attr("transpose_b: bool = false")
    .Output("packed: uint8")
    .Attr("T: {float16}")
    .SetShapeFn(PackHalfShape)
    .TransposeAttr("b", "transpose_b")
    .NoGradient()  // an opaque blob
    .Doc(R"doc(
Packs a constant float16 weight once for HalfMatMulPacked: widened to float32 panels of 32 columns.

The layout does not depend on the ISA, so a blob is valid in any process of
the same format version.

b: The weight, [k, n] (or [n, k] with transpose_b).
transpose_b: If true, b is [n, k] (a Linear weight, ONNX Gemm's transB).
packed: The opaque packed weight (uint8 bytes).
)doc");

REGISTER_OP("HalfMatMulPacked")
    .Input("a: T")
    .Input("packed: uint8")
    .Input("bias: T")
    .Attr("n: int >= 1")
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr("T: {float16}")
    .SetShapeFn(HalfMatMulPackedShape)
    .NoGradient()  // an inference op over a constant weight
    .Doc(R"doc(
activation(a @ b + bias) in float16 with float32 accumulation, b prepacked by PackHalfMatMulWeight.

a is widened to float32 while it is packed (F16C), each output accumulates
all of k in float32 and is rounded to float16 once, after the bias and the
activation (as MatMul followed by Add and Relu computed in float32 would).

a: The rows, [..., k].
packed: The weight, from PackHalfMatMulWeight.
bias: One value per column, or empty for none.
n: The number of columns of the weight (checked against the blob).
activation: 'none' or 'relu'.
y: The float16 result, a.shape[:-1] + [n].
)doc");

}  // namespace opforge
