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

}  // namespace

REGISTER_OP("MatMul")
    .Input("a: T")
    .Input("b: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Output("product: T")
    .Attr("T: numbertype")
    .SetShapeFn(MatMulShape)
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
