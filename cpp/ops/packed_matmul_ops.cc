// A float32 weight packed once into the GEMM microkernel's B panels
// (PackMatMulWeight), and the fused product that reads them in place
// (FusedMatMulPacked): a Linear layer over a constant weight no longer packs
// (or reads strided) the weight on every call, as onnxruntime does with its
// constant initializers. The blob has the checked header of
// cpp/kernels/quant/packed_blob.h; its panel width depends on the ISA, so a
// blob packed under another OPFORGE_SIMD is refused by name.
#include <cstdint>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

constexpr int64_t kHeader = 128;
// Every ISA's panel width divides 32 (AVX-512 32, AVX2 and generic 16): the
// blob is sized for 32-wide panels so its shape does not depend on the CPU.
constexpr int64_t kWidestPanel = 32;

Status PackShape(InferenceContext* ctx) {
  const TensorShape& b = ctx->input_shape(0);
  const bool tb = ctx->attr_bool("transpose_b");
  if (b.rank() != 2) return errors::InvalidArgument("argument 'b' must be 2-D, got shape ", b.DebugString());
  const int64_t k = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  if (IsUnknownDim(k) || IsUnknownDim(n)) {
    return errors::InvalidArgument("argument 'b' must have a known shape (a constant weight), got ", b.DebugString());
  }
  if (k < 1 || n < 1 || k > (int64_t{1} << 30) || n > (int64_t{1} << 30)) {
    return errors::InvalidArgument("argument 'b' must have between 1 and 2^30 rows and columns, got ",
                                   b.DebugString());
  }
  const int64_t cols = (n + kWidestPanel - 1) / kWidestPanel * kWidestPanel;
  ctx->set_output_shape(0, TensorShape({kHeader + 4 * cols * k}));
  return Status::OK();
}

// a [..., k] times the packed [k, n]: y [..., n]; bias [n] or empty.
Status FusedPackedShape(InferenceContext* ctx) {
  const TensorShape& a = ctx->input_shape(0);
  if (a.rank() < 1) return errors::InvalidArgument("argument 'a' must have rank >= 1, got a scalar");
  if (ctx->input_shape(1).rank() != 1) {
    return errors::InvalidArgument("argument 'packed' must be 1-D (a PackMatMulWeight output), got ",
                                   ctx->input_shape(1).DebugString());
  }
  const int64_t n = ctx->attr_int("n");
  const TensorShape& bias = ctx->input_shape(2);
  if (!(bias.rank() == 1 && (IsUnknownDim(bias.dim(0)) || bias.dim(0) == n || bias.dim(0) == 0))) {
    return errors::InvalidArgument("argument 'bias' must be 1-D with one value per column (", n,
                                   ") or empty, got ", bias.DebugString());
  }
  std::vector<int64_t> dims;
  for (int i = 0; i + 1 < a.rank(); ++i) dims.push_back(a.dim(i));
  dims.push_back(n);
  TensorShape y;
  OF_RETURN_IF_ERROR(MakeShape(dims.data(), static_cast<int>(dims.size()), &y));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

}  // namespace

REGISTER_OP("PackMatMulWeight")
    .Input("b: T")
    .Attr("transpose_b: bool = false")
    .Output("packed: uint8")
    .Attr("T: {float32}")
    .SetShapeFn(PackShape)
    .TransposeAttr("b", "transpose_b")
    .NoGradient()  // an opaque blob
    .Doc(R"doc(
Packs a constant float32 weight once for FusedMatMulPacked: the GEMM microkernel's B panels.

The blob holds b in panels of this CPU's microkernel width over the whole
depth, behind a checked header. It is valid in this process (and processes
on the same ISA); a blob from another ISA is refused.

b: The weight, [k, n] (or [n, k] with transpose_b).
transpose_b: If true, b is [n, k] (a Linear weight, ONNX Gemm's transB).
packed: The opaque packed weight (uint8 bytes).
)doc");

REGISTER_OP("FusedMatMulPacked")
    .Input("a: T")
    .Input("packed: uint8")
    .Input("bias: T")
    .Attr("n: int >= 1")
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(FusedPackedShape)
    .NoGradient()  // an inference op over a constant weight (train with FusedMatMul)
    .Doc(R"doc(
activation(a @ b + bias) with b prepacked by PackMatMulWeight: FusedMatMul without packing b per call.

a: The rows, [..., k] (leading axes folded into rows).
packed: The weight, from PackMatMulWeight.
bias: One value per column, or empty for none.
n: The number of columns of the weight (checked against the blob).
activation: 'none', 'relu', 'gelu' (exact, erf), 'silu' or 'sigmoid'.
y: activation(a @ b + bias), of shape a.shape[:-1] + [n].
)doc");

}  // namespace opforge
