// Linear algebra ops.
#include <cstdint>
#include <string>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

std::string Describe(const char* name, const TensorShape& s, bool transposed) {
  return errors::StrCat("argument '", name, "' of shape ", s.DebugString(),
                        transposed ? " (transposed)" : "");
}

// numpy.matmul shapes: 1-D operands are promoted to matrices (and the added
// axis removed from the result); leading batch dims broadcast.
Status MatMulShape(InferenceContext* ctx) {
  const TensorShape& a = ctx->input_shape(0);
  const TensorShape& b = ctx->input_shape(1);
  if (a.rank() == 0 || b.rank() == 0) {
    return errors::InvalidArgument("argument '", a.rank() == 0 ? "a" : "b",
                                   "' is 0-d; matmul needs operands of rank >= 1 (use multiply "
                                   "for scalars)");
  }
  // Transpose flags only apply to matrices, never to 1-D operands.
  const bool ta = ctx->attr_bool("transpose_a") && a.rank() >= 2;
  const bool tb = ctx->attr_bool("transpose_b") && b.rank() >= 2;
  int64_t m = 1, ka, kb, n = 1;
  if (a.rank() == 1) {
    ka = a.dim(0);
  } else {
    m = a.dim(a.rank() - (ta ? 1 : 2));
    ka = a.dim(a.rank() - (ta ? 2 : 1));
  }
  if (b.rank() == 1) {
    kb = b.dim(0);
  } else {
    kb = b.dim(b.rank() - (tb ? 1 : 2));
    n = b.dim(b.rank() - (tb ? 2 : 1));
  }
  if (ka != kb) {
    return errors::InvalidArgument("inner dims differ: ", Describe("a", a, ta), " gives k = ", ka,
                                   " but ", Describe("b", b, tb), " gives k = ", kb);
  }
  const int ba = a.rank() > 2 ? a.rank() - 2 : 0;
  const int bb = b.rank() > 2 ? b.rank() - 2 : 0;
  const int batch_rank = ba > bb ? ba : bb;
  TensorShape out;
  for (int i = 0; i < batch_rank; ++i) {
    const int ia = i - (batch_rank - ba), ib = i - (batch_rank - bb);
    const int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim(ib) : 1;
    if (da != db && da != 1 && db != 1) {
      return errors::InvalidArgument("batch dims of argument 'a' of shape ", a.DebugString(),
                                     " and argument 'b' of shape ", b.DebugString(),
                                     " do not broadcast (", da, " vs ", db, ")");
    }
    out.AddDim(da == 1 ? db : da);
  }
  if (a.rank() >= 2) out.AddDim(m);
  if (b.rank() >= 2) out.AddDim(n);
  TensorShape checked;
  OF_RETURN_IF_ERROR(MakeShape(out.dims(), out.rank(), &checked));
  ctx->set_output_shape(0, checked);
  return Status::OK();
}

// FusedMatMul: the product's shape (a's leading axes folded into rows), a
// bias of one value per output column, a known activation.
// `first`: the index of input a (b and bias follow it).
Status FusedMatMulShapeAt(InferenceContext* ctx, int first, TensorShape* out) {
  const TensorShape& a = ctx->input_shape(first);
  const TensorShape& b = ctx->input_shape(first + 1);
  const TensorShape& bias = ctx->input_shape(first + 2);
  const bool ta = ctx->attr_bool("transpose_a"), tb = ctx->attr_bool("transpose_b");
  if (b.rank() != 2) return errors::InvalidArgument("argument 'b' must be 2-D, got ", b.DebugString());
  if (a.rank() < 1 || (ta && a.rank() != 2)) {
    return errors::InvalidArgument("argument 'a' must be ", ta ? "2-D with transpose_a" : "of rank >= 1",
                                   ", got ", a.DebugString());
  }
  const int64_t k = ta ? a.dim(0) : a.dim(a.rank() - 1);
  const int64_t kb = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  if (k != kb) {
    return errors::InvalidArgument("inner dims differ: ", Describe("a", a, ta), " gives k = ", k, " but ",
                                   Describe("b", b, tb), " gives k = ", kb);
  }
  if (bias.rank() != 1 || bias.dim(0) != n) {
    return errors::InvalidArgument("argument 'bias' must have shape [", n, "] (one value per output column), got ",
                                   bias.DebugString());
  }
  const std::string& act = ctx->attr("activation").s;
  if (act != "none" && act != "relu" && act != "gelu" && act != "silu" && act != "sigmoid") {
    return errors::InvalidArgument("argument 'activation' is '", act,
                                   "'; expected one of 'none', 'relu', 'gelu', 'silu', 'sigmoid'");
  }
  *out = TensorShape();
  if (ta) {
    out->AddDim(a.dim(1));
  } else {
    for (int i = 0; i + 1 < a.rank(); ++i) out->AddDim(a.dim(i));
  }
  out->AddDim(n);
  return Status::OK();
}

Status FusedMatMulShape(InferenceContext* ctx) {
  TensorShape out;
  OF_RETURN_IF_ERROR(FusedMatMulShapeAt(ctx, 0, &out));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

}  // namespace

REGISTER_OP("FusedMatMul")
    .Input("a: T")
    .Input("b: T")
    .Input("bias: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(FusedMatMulShape)
    .TransposeAttr("a", "transpose_a")
    .TransposeAttr("b", "transpose_b")
    // The activation's derivative (from y, or the recomputed pre-activation
    // for gelu/silu), then MatMul's gradient; the bias gets dpre summed over
    // the rows (the sweep sums a broadcast gradient to the input's shape).
    .Gradient("let dpre = FusedMatMulActivationGrad(dy, y, a, b, bias, transpose_a=transpose_a, "
              "transpose_b=transpose_b, activation=activation)")
    .Gradient("a, b = MatMulGrad(a, b, dpre, transpose_a=transpose_a, transpose_b=transpose_b, "
              "compute_grad_a=needs_grad(a), compute_grad_b=needs_grad(b))")
    .Gradient("bias = dpre")
    .Doc(R"doc(
activation(a @ b + bias) in one pass: the bias and the activation are applied
to each output tile of the GEMM while it is still in cache.

a: The rows, of shape [..., k] (leading axes folded into rows), or [k, m] with transpose_a.
b: The matrix, of shape [k, n] (or [n, k] with transpose_b).
bias: One value per output column, of shape [n].
transpose_a: If true, a is [k, m] (2-D only).
transpose_b: If true, b is [n, k] (nn.Linear's weight layout).
activation: 'none', 'relu', 'gelu' (exact, erf), 'silu' or 'sigmoid'.
y: activation(a @ b + bias), of shape a.shape[:-1] + [n] (or [m, n] with transpose_a).
)doc");

// The first n_same inputs (named in names, the first the reference) share one
// shape, the FusedMatMul of the operands from index `operands` on.
Status SameShapesAsFusedMatMul(InferenceContext* ctx, const char* const* names, int n_same, int operands) {
  const TensorShape& ref = ctx->input_shape(0);
  for (int i = 1; i < n_same; ++i) {
    if (ctx->input_shape(i) != ref) {
      return errors::InvalidArgument("argument '", names[i], "' of shape ", ctx->input_shape(i).DebugString(),
                                     " differs from argument '", names[0], "' of shape ", ref.DebugString());
    }
  }
  TensorShape fwd;
  OF_RETURN_IF_ERROR(FusedMatMulShapeAt(ctx, operands, &fwd));
  if (fwd != ref) {
    return errors::InvalidArgument("argument 'y' of shape ", ref.DebugString(),
                                   " is not the shape of the FusedMatMul of a, b and bias, ", fwd.DebugString());
  }
  ctx->set_output_shape(0, ref);
  return Status::OK();
}

// dy and y of a FusedMatMul, and its operands (checked as there).
Status FusedMatMulActivationGradShape(InferenceContext* ctx) {
  static const char* const kNames[] = {"dy", "y"};
  return SameShapesAsFusedMatMul(ctx, kNames, 2, 2);
}

REGISTER_OP("FusedMatMulActivationGrad")
    .Input("dy: T")
    .Input("y: T")
    .Input("a: T")
    .Input("b: T")
    .Input("bias: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("activation: string = 'none'")
    .Output("dpre: T")
    .Attr("T: {float32}")
    .SetShapeFn(FusedMatMulActivationGradShape)
    // dpre = dy * act'(pre(a, b, bias)): linear in dy, so its gradient there
    // is the op itself. y stands for act(pre) and is read only as a shortcut
    // (relu, sigmoid), so the dependence on pre is taken through a, b and
    // bias alone (y gets zeros): dpre's gradient w.r.t. pre is
    // ddpre * dy * act''(pre), then MatMul's gradient as in the forward op.
    .Gradient("dy = FusedMatMulActivationGrad(ddpre, y, a, b, bias, transpose_a=transpose_a, "
              "transpose_b=transpose_b, activation=activation)")
    .Gradient("y = ZerosLike(y)")
    .Gradient("let dpre2 = FusedMatMulActivationGradGrad(ddpre, dy, y, a, b, bias, transpose_a=transpose_a, "
              "transpose_b=transpose_b, activation=activation)")
    .Gradient("a, b = MatMulGrad(a, b, dpre2, transpose_a=transpose_a, transpose_b=transpose_b, "
              "compute_grad_a=needs_grad(a), compute_grad_b=needs_grad(b))")
    .Gradient("bias = dpre2")
    .Doc(R"doc(
The gradient of a FusedMatMul's pre-activation a @ b + bias, given the
gradient dy of its output y: dy * activation'(pre). relu, sigmoid and none read
y; gelu and silu recompute pre (one GEMM) from a, b and bias.

dy: The gradient of y.
y: FusedMatMul's output.
a: FusedMatMul's a.
b: FusedMatMul's b.
bias: FusedMatMul's bias.
transpose_a: As in the FusedMatMul.
transpose_b: As in the FusedMatMul.
activation: As in the FusedMatMul.
dpre: The gradient of a @ b + bias, of y's shape.
)doc");

// ddpre, dy and y of a FusedMatMulActivationGrad (one shape), then its operands.
Status FusedMatMulActivationGradGradShape(InferenceContext* ctx) {
  static const char* const kNames[] = {"ddpre", "dy", "y"};
  return SameShapesAsFusedMatMul(ctx, kNames, 3, 3);
}

REGISTER_OP("FusedMatMulActivationGradGrad")
    .Input("ddpre: T")
    .Input("dy: T")
    .Input("y: T")
    .Input("a: T")
    .Input("b: T")
    .Input("bias: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("activation: string = 'none'")
    .Output("dpre2: T")
    .Attr("T: {float32}")
    .SetShapeFn(FusedMatMulActivationGradGradShape)
    // Its output is exactly zero wherever the kernel computes it (none,
    // relu: act'' = 0 almost everywhere); the other activations raise.
    .NoGradient()
    .Doc(R"doc(
The second-order term of a FusedMatMul's gradient: the gradient of
FusedMatMulActivationGrad's dpre = dy * act'(pre) with respect to the
pre-activation pre = a @ b + bias, ddpre * dy * act''(pre). Exactly zero for
'none' and 'relu' (act'' is 0 almost everywhere); 'gelu', 'silu' and
'sigmoid' raise UnimplementedError (their second derivatives through the fused
op are not implemented; the unfused ops have them).

ddpre: The gradient of FusedMatMulActivationGrad's dpre.
dy: FusedMatMulActivationGrad's dy.
y: FusedMatMul's output.
a: FusedMatMul's a.
b: FusedMatMul's b.
bias: FusedMatMul's bias.
transpose_a: As in the FusedMatMul.
transpose_b: As in the FusedMatMul.
activation: As in the FusedMatMul.
dpre2: The gradient with respect to pre, of y's shape.
)doc");

REGISTER_OP("MatMul")
    .Input("a: T")
    .Input("b: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Output("product: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(MatMulShape)
    .TransposeAttr("a", "transpose_a")
    .TransposeAttr("b", "transpose_b")
    .Category("contraction")
    // Only the operands that need a gradient get a GEMM (an MLP's input does not).
    .Gradient("a, b = MatMulGrad(a, b, dproduct, transpose_a=transpose_a, transpose_b=transpose_b, "
              "compute_grad_a=needs_grad(a), compute_grad_b=needs_grad(b))")
    .Doc(R"doc(
Multiplies matrices, with numpy.matmul semantics.

Operands of rank >= 2 are stacks of matrices in their last two axes; the
leading (batch) axes broadcast like numpy. A 1-D a is treated as a row vector
[1, k] and a 1-D b as a column vector [k, 1]; the added axis is removed from
the result, so two 1-D operands give their 0-d dot product. 0-d operands are
an error (use multiply). An inner dimension of 0 gives a result of zeros.
Integer products wrap on overflow like numpy.

a: The left operand, of shape [..., m, k] (or [..., k, m] with transpose_a), or [k].
b: The right operand, of shape [..., k, n] (or [..., n, k] with transpose_b), or [k].
transpose_a: If true, multiply by the transpose of each matrix of a (ignored for a 1-D a).
transpose_b: If true, multiply by the transpose of each matrix of b (ignored for a 1-D b).
product: The product, of shape broadcast(batch(a), batch(b)) + [m, n], minus the axes added for 1-D operands.
)doc");

}  // namespace opforge
