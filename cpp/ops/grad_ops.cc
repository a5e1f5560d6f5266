// Backward ops: gradients with their own kernels, for the ops where a
// composition of registered ops would be slow or unstable. Gradient
// declarations (beside each forward op) call them. Inputs named after a
// forward input (x, values, a, b) are read only for what the gradient needs:
// SliceGrad and ConcatGrad read only shapes, so they also work in graphs.
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace {

// `got` must equal `want`, the shape the forward op gives `what`.
Status ExpectShape(const char* arg, const TensorShape& got, const TensorShape& want, const char* what) {
  if (got == want) return Status::OK();
  return errors::InvalidArgument("argument '", arg, "' has shape ", got.DebugString(), " but ", what,
                                 " has shape ", want.DebugString());
}

Status SoftmaxGradShape(InferenceContext* ctx) {
  const TensorShape& s = ctx->input_shape(0);
  if (s.rank() == 0) {
    return errors::InvalidArgument("argument 'softmax' must have rank >= 1, got a 0-d tensor");
  }
  OF_RETURN_IF_ERROR(ExpectShape("grad", ctx->input_shape(1), s, "argument 'softmax'"));
  int axis;
  OF_RETURN_IF_ERROR(NormalizeAxis(ctx->attr_int("axis"), s.rank(), "attr 'axis'", &axis));
  ctx->set_output_shape(0, s);
  return Status::OK();
}

Status RmsNormGradShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  OF_RETURN_IF_ERROR(CheckRmsNormInputs(ctx->attr_float("epsilon"), x, ctx->input_shape(1)));
  OF_RETURN_IF_ERROR(ExpectShape("grad", ctx->input_shape(2), x, "argument 'x'"));
  ctx->set_output_shape(0, x);
  ctx->set_output_shape(1, ctx->input_shape(1));
  return Status::OK();
}

// The shape of MatMul(a, b, transpose_a, transpose_b): numpy.matmul rules,
// as MatMul's shape function (linalg_ops.cc) applies them.
Status MatMulProductShape(const TensorShape& a, const TensorShape& b, bool transpose_a, bool transpose_b,
                          TensorShape* product) {
  if (a.rank() == 0 || b.rank() == 0) {
    return errors::InvalidArgument("argument '", a.rank() == 0 ? "a" : "b",
                                   "' is 0-d; matmul needs operands of rank >= 1");
  }
  const bool ta = transpose_a && a.rank() >= 2, tb = transpose_b && b.rank() >= 2;
  const int64_t ka = a.rank() == 1 ? a.dim(0) : a.dim(a.rank() - (ta ? 2 : 1));
  const int64_t kb = b.rank() == 1 ? b.dim(0) : b.dim(b.rank() - (tb ? 1 : 2));
  if (ka != kb) {
    return errors::InvalidArgument("inner dims differ: argument 'a' of shape ", a.DebugString(),
                                   ta ? " (transposed)" : "", " gives k = ", ka, " but argument 'b' of shape ",
                                   b.DebugString(), tb ? " (transposed)" : "", " gives k = ", kb);
  }
  const int ba = a.rank() > 2 ? a.rank() - 2 : 0, bb = b.rank() > 2 ? b.rank() - 2 : 0;
  const int batch_rank = ba > bb ? ba : bb;
  TensorShape out;
  for (int i = 0; i < batch_rank; ++i) {
    const int ia = i - (batch_rank - ba), ib = i - (batch_rank - bb);
    const int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
    if (da != db && da != 1 && db != 1) {
      return errors::InvalidArgument("batch dims of argument 'a' of shape ", a.DebugString(),
                                     " and argument 'b' of shape ", b.DebugString(), " do not broadcast (",
                                     da, " vs ", db, ")");
    }
    out.AddDim(da == 1 ? db : da);
  }
  if (a.rank() >= 2) out.AddDim(a.dim(a.rank() - (ta ? 1 : 2)));
  if (b.rank() >= 2) out.AddDim(b.dim(b.rank() - (tb ? 2 : 1)));
  return MakeShape(out.dims(), out.rank(), product);
}

Status MatMulGradShape(InferenceContext* ctx) {
  const TensorShape& a = ctx->input_shape(0);
  const TensorShape& b = ctx->input_shape(1);
  TensorShape product;
  OF_RETURN_IF_ERROR(MatMulProductShape(a, b, ctx->attr_bool("transpose_a"), ctx->attr_bool("transpose_b"),
                                        &product));
  OF_RETURN_IF_ERROR(ExpectShape("grad", ctx->input_shape(2), product, "the product of 'a' and 'b'"));
  ctx->set_output_shape(0, a);
  ctx->set_output_shape(1, b);
  return Status::OK();
}

// Sum/Mean/Max/Min/Prod's axis rules (reduction_ops.cc); y and grad must
// have the reduced shape.
Status ReduceGradShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  const std::string& reduction = ctx->attr("reduction").s;
  const bool extremum = reduction == "max" || reduction == "min";
  if (!extremum && reduction != "sum" && reduction != "mean" && reduction != "prod") {
    return errors::InvalidArgument("attr 'reduction' is \"", reduction,
                                   "\"; expected one of \"sum\", \"mean\", \"max\", \"min\", \"prod\"");
  }
  const int rank = x.rank();
  const AttrValue& axis = ctx->attr("axis");
  bool reduced[kMaxRank];
  for (int i = 0; i < kMaxRank; ++i) reduced[i] = axis.is_none() && i < rank;
  if (!axis.is_none()) {
    for (int64_t a : axis.list_i) {
      if (a < -rank || a >= rank) {
        return errors::InvalidArgument("attr 'axis' has axis ", a, ", out of range for argument 'x' of rank ",
                                       rank, " (valid: ", -rank, " to ", rank - 1, ")");
      }
      const int norm = static_cast<int>(a < 0 ? a + rank : a);
      if (reduced[norm]) return errors::InvalidArgument("attr 'axis' names axis ", norm, " more than once");
      reduced[norm] = true;
    }
  }
  const bool keepdims = ctx->attr_bool("keepdims");
  TensorShape out;
  int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    if (reduced[i]) {
      count *= x.dim(i);
      if (keepdims) out.AddDim(1);
    } else {
      out.AddDim(x.dim(i));
    }
  }
  if (extremum && count == 0) {
    return errors::InvalidArgument("argument 'x' of shape ", x.DebugString(),
                                   " has no elements along the reduced axes (attr 'axis'), so "
                                   "reduction \"", reduction, "\" has no result to differentiate");
  }
  OF_RETURN_IF_ERROR(ExpectShape("y", ctx->input_shape(1), out, "the reduction of argument 'x'"));
  OF_RETURN_IF_ERROR(ExpectShape("grad", ctx->input_shape(2), out, "the reduction of argument 'x'"));
  ctx->set_output_shape(0, x);
  return Status::OK();
}

// The number of directions ReduceGradGrad takes at most: derivatives of order
// up to kMaxDirections + 1 (its kernel keeps 2**N running sums per element).
constexpr int kMaxDirections = 8;

Status ReduceGradGradShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(ReduceGradShape(ctx));
  const auto range = ctx->input_range("directions");
  if (range.second - range.first > kMaxDirections) {
    return errors::InvalidArgument("argument 'directions' has ", range.second - range.first,
                                   " tensors; at most ", kMaxDirections, " (derivatives of order up to ",
                                   kMaxDirections + 1, ") are supported");
  }
  for (int i = range.first; i < range.second; ++i) {
    const TensorShape& d = ctx->input_shape(i);
    if (d != ctx->input_shape(0)) {
      return errors::InvalidArgument("argument 'directions'[", i - range.first, "] has shape ", d.DebugString(),
                                     " but argument 'x' has shape ", ctx->input_shape(0).DebugString());
    }
  }
  return Status::OK();
}

// Slice's rules (shape_checks.h); grad must have the slice's shape.
Status SliceGradShape(InferenceContext* ctx) {
  TensorShape sliced;
  OF_RETURN_IF_ERROR(SliceResultShape(ctx->input_shape(0), ctx->attr_ints("begin"), ctx->attr_ints("size"), &sliced));
  OF_RETURN_IF_ERROR(ExpectShape("grad", ctx->input_shape(1), sliced, "the slice of argument 'x'"));
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}

// Concat's rules (array_ops.cc), for ConcatGrad (grad must have the joined
// shape) and its adjoint ConcatGradGrad (block must have values[index]'s).
Status ConcatGradShape(InferenceContext* ctx) {
  const auto range = ctx->input_range("values");
  const int n = range.second - range.first;
  const int64_t index = ctx->attr_int("index");
  if (index < 0 || index >= n) {
    return errors::InvalidArgument("attr 'index' is ", index, " but argument 'values' has ", n,
                                   " tensors (valid: 0 to ", n - 1, ")");
  }
  const TensorShape& first = ctx->input_shape(range.first);
  const int rank = first.rank();
  if (rank == 0) {
    return errors::InvalidArgument("argument 'values'[0] is 0-d; concatenation needs rank >= 1");
  }
  int axis;
  OF_RETURN_IF_ERROR(NormalizeAxis(ctx->attr_int("axis"), rank, "attr 'axis'", &axis));
  TensorShape joined = first;
  int64_t total = first.dim(axis);
  for (int i = range.first + 1; i < range.second; ++i) {
    const TensorShape& s = ctx->input_shape(i);
    const int idx = i - range.first;
    bool match = s.rank() == rank;
    for (int d = 0; match && d < rank; ++d) match = d == axis || s.dim(d) == first.dim(d);
    if (!match) {
      return errors::InvalidArgument("argument 'values'[", idx, "] has shape ", s.DebugString(),
                                     " but 'values'[0] has shape ", first.DebugString(),
                                     "; they must match except on axis ", axis);
    }
    if (IsUnknownDim(s.dim(axis)) || IsUnknownDim(total)) {
      total = kUnknownDim;  // a sum with an unknown dim is unknown
      continue;
    }
    if (s.dim(axis) > INT64_MAX - total) {
      return errors::InvalidArgument("argument 'values': the dims on axis ", axis,
                                     " add up to more than INT64_MAX");
    }
    total += s.dim(axis);
  }
  joined.set_dim(axis, total);
  const TensorShape& block = ctx->input_shape(range.first + static_cast<int>(index));
  if (ctx->op().name == "ConcatGradGrad") {  // (block, values) -> the joined shape
    OF_RETURN_IF_ERROR(ExpectShape("block", ctx->input_shape(0), block, "argument 'values'[index]"));
    ctx->set_output_shape(0, joined);
  } else {  // ConcatGrad: (grad, values) -> values[index]'s shape
    OF_RETURN_IF_ERROR(ExpectShape("grad", ctx->input_shape(0), joined, "the concatenation of 'values'"));
    ctx->set_output_shape(0, block);
  }
  return Status::OK();
}

constexpr const char* kFloatTypes = "T: {float32, float64, halftype}";

}  // namespace

REGISTER_OP("SoftmaxGrad")
    .Input("softmax: T")
    .Input("grad: T")
    .Attr("axis: int = -1")
    .Output("output: T")
    .Attr(kFloatTypes)
    .SetShapeFn(SoftmaxGradShape)
    .Category("whole_axis")
    // output = s * (g - sum(s * g)): linear in g with the symmetric Jacobian of
    // Softmax, so dg is SoftmaxGrad itself; ds by the product rule.
    .Gradient("softmax = Sub(Mul(doutput, Sub(grad, Sum(Mul(softmax, grad), axis=list(axis), keepdims=true))), "
              "Mul(grad, Sum(Mul(doutput, softmax), axis=list(axis), keepdims=true)))")
    .Gradient("grad = SoftmaxGrad(softmax, doutput, axis=axis)")
    .Doc(R"doc(
The gradient of Softmax with respect to its logits.

Equivalent to the numpy expression
softmax * (grad - (grad * softmax).sum(axis, keepdims=True)). Each slice along
axis is read twice and written once, with no temporary of the input's size;
the dot product is accumulated in float64. Empty tensors are allowed.

softmax: The output of Softmax(logits, axis), of rank >= 1.
grad: The gradient of the loss with respect to softmax; same shape.
axis: The axis Softmax normalised over; negative values count from the end.
output: The gradient with respect to the logits, with the shape of softmax.
)doc");

REGISTER_OP("RmsNormGrad")
    .Input("x: T")
    .Input("weight: T")
    .Input("grad: T")
    .Attr("epsilon: float >= 0 = 1e-6")
    .Output("grad_x: T")
    .Output("grad_weight: T")
    .Attr(kFloatTypes)
    .SetShapeFn(RmsNormGradShape)
    // Per row of d features, with n = RmsNorm(x, 1), r = 1 / sqrt(mean(x**2) +
    // epsilon), u = grad * weight, means over the row: grad_x = P u with
    // P v = r (v - n mean(v n)) (symmetric; the Jacobian of n), grad_weight =
    // the sum over rows of grad * n. Differentiating <dgrad_x, grad_x> +
    // <dgrad_weight, grad_weight> (a = dgrad_x) gives d grad = weight P a +
    // dgrad_weight n, d weight = grad P a (summed to weight's shape by the
    // tape), and d x = r**2 n (mean(a n) mean(u n) - mean(a u)) + P v with
    // v = dgrad_weight grad - r (mean(u n) a + mean(a n) u).
    .Gradient("let n = RmsNorm(x, OnesLike(weight), epsilon=epsilon)")
    .Gradient("let r2 = Div(1, Add(Mean(Square(x), axis=[-1], keepdims=true), epsilon))")
    .Gradient("let r = Sqrt(r2)")
    .Gradient("let u = Mul(grad, weight)")
    .Gradient("let an = Mean(Mul(dgrad_x, n), axis=[-1], keepdims=true)")
    .Gradient("let un = Mean(Mul(u, n), axis=[-1], keepdims=true)")
    .Gradient("let pa = Mul(r, Sub(dgrad_x, Mul(n, an)))")
    .Gradient("let v = Sub(Mul(dgrad_weight, grad), Mul(r, Add(Mul(un, dgrad_x), Mul(an, u))))")
    .Gradient("x = Add(Mul(Mul(r2, n), Sub(Mul(an, un), Mean(Mul(dgrad_x, u), axis=[-1], keepdims=true))), "
              "Mul(r, Sub(v, Mul(n, Mean(Mul(v, n), axis=[-1], keepdims=true)))))")
    .Gradient("weight = Mul(grad, pa)")
    .Gradient("grad = Add(Mul(weight, pa), Mul(dgrad_weight, n))")
    .Doc(R"doc(
The gradients of RmsNorm(x, weight, epsilon) with respect to x and weight.

With r = 1 / sqrt(mean(x**2, -1, keepdims=True) + epsilon) and d = x.shape[-1]:
grad_x = r * grad * weight - x * r**3 / d * sum(grad * weight * x, -1, keepdims=True),
grad_weight = sum over all leading axes of grad * x * r. Row sums are accumulated
in float64 (as RmsNorm does), and so is grad_weight; its sum over rows is split
into blocks that depend only on the shape, so the result does not depend on the
thread count.

x: The input of RmsNorm, of rank >= 1.
weight: The per-feature scale, a 1-D tensor of length x.shape[-1].
grad: The gradient of the loss with respect to RmsNorm's output; same shape as x.
epsilon: The epsilon RmsNorm was called with; must be >= 0.
grad_x: The gradient with respect to x, with x's shape.
grad_weight: The gradient with respect to weight, with weight's shape.
)doc");

REGISTER_OP("MatMulGrad")
    .Input("a: T")
    .Input("b: T")
    .Input("grad: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("compute_grad_a: bool = true")
    .Attr("compute_grad_b: bool = true")
    .Output("grad_a: T")
    .Output("grad_b: T")
    .Attr(kFloatTypes)
    .SetShapeFn(MatMulGradShape)
    // grad_a and grad_b are the partial derivatives of <MatMul(a, b), grad>,
    // which is bilinear, so <dgrad_a, grad_a> + <dgrad_b, grad_b> =
    // <MatMul(dgrad_a, b) + MatMul(a, dgrad_b), grad>: one MatMulGrad of the
    // two directions gives da and db (batch broadcasting included). An output
    // not computed is the constant zero, so what flows into it is dropped
    // (times 0: ka, kb); the tape sends zeros there anyway.
    .Gradient("let ka = Mul(dgrad_a, compute_grad_a)")
    .Gradient("let kb = Mul(dgrad_b, compute_grad_b)")
    .Gradient("a, b = MatMulGrad(ka, kb, grad, transpose_a=transpose_a, transpose_b=transpose_b, "
              "compute_grad_a=needs_grad(a), compute_grad_b=needs_grad(b))")
    .Gradient("grad = Add(MatMul(ka, b, transpose_a=transpose_a, transpose_b=transpose_b), "
              "MatMul(a, kb, transpose_a=transpose_a, transpose_b=transpose_b))")
    .Doc(R"doc(
The gradients of MatMul(a, b, transpose_a, transpose_b) with respect to a and b.

For matrices, grad_a = grad @ op(b).T (transposed back when transpose_a) and
grad_b = op(a).T @ grad (transposed back when transpose_b), computed by the same
GEMM as MatMul, reading transposed operands in place. 1-D operands follow
MatMul's numpy.matmul rules, and gradients of broadcast batch dims are summed,
so each result has exactly the shape of its operand. A result not asked for
(compute_grad_a or compute_grad_b false) skips its GEMM and is zeros of its
operand's shape, so the outputs and their shapes never depend on the flags.

a: MatMul's left operand.
b: MatMul's right operand.
grad: The gradient of the loss with respect to MatMul's product; it must have the product's shape.
transpose_a: The transpose_a MatMul was called with.
transpose_b: The transpose_b MatMul was called with.
compute_grad_a: If false, grad_a is not computed (no GEMM) and is zeros of a's shape: MatMul's gradient passes false where a needs no gradient.
compute_grad_b: If false, grad_b is not computed (no GEMM) and is zeros of b's shape.
grad_a: The gradient with respect to a, with a's shape (zeros if not compute_grad_a).
grad_b: The gradient with respect to b, with b's shape (zeros if not compute_grad_b).
)doc");

REGISTER_OP("ReduceGrad")
    .Input("x: T")
    .Input("y: T")
    .Input("grad: T")
    .Attr("reduction: string")
    .Attr("axis: list(int) = None")
    .Attr("keepdims: bool = false")
    .Output("output: T")
    .Attr(kFloatTypes)
    .SetShapeFn(ReduceGradShape)
    // output = W * broadcast(grad), W = ReduceGrad(x, y, ones): linear in grad;
    // y only picks ties (piecewise constant); x enters through W (prod only).
    .Gradient("x = ReduceGradGrad(x, y, grad, [doutput], reduction=reduction, axis=axis, keepdims=keepdims)")
    .Gradient("y = ZerosLike(y)")
    .Gradient("grad = Sum(Mul(doutput, ReduceGrad(x, y, OnesLike(grad), reduction=reduction, axis=axis, "
              "keepdims=keepdims)), axis=axis, keepdims=keepdims)")
    .Doc(R"doc(
The gradient of a reduction (Sum, Mean, Max, Min, Prod) with respect to its input.

"sum" broadcasts grad back to x's shape and "mean" also divides by the number
of reduced elements (x's values are not read for either). "max" and "min" give
grad to the elements of x equal to y, split equally among ties (a NaN result
goes to the NaN elements). "prod" gives grad times the product of the other
reduced elements, computed from prefix and suffix products, so zeros in x are
exact and nothing is divided.

x: The reduction's input.
y: The reduction's result (read only by "max" and "min"), of the reduced shape.
grad: The gradient of the loss with respect to y, of the reduced shape.
reduction: Which reduction: "sum", "mean", "max", "min" or "prod".
axis: The reduction's axes, with its rules: negative entries count from the end; None reduces all axes; an empty list reduces none.
keepdims: The reduction's keepdims: whether y and grad keep reduced axes with length 1.
output: The gradient with respect to x, with x's shape.
)doc");

REGISTER_OP("ReduceGradGrad")
    .Input("x: T")
    .Input("y: T")
    .Input("grad: T")
    .Input("directions: N * T")
    .Attr("N: int >= 1")
    .Attr("reduction: string")
    .Attr("axis: list(int) = None")
    .Attr("keepdims: bool = false")
    .Output("output: T")
    .Attr(kFloatTypes)
    .SetShapeFn(ReduceGradGradShape)
    // output = grad * (the derivative of order N + 1 of each group's reduction,
    // contracted with the directions): symmetric in the directions and the
    // output, linear in each and in grad. So every gradient is ReduceGradGrad
    // again (one more direction for x), and the derivatives never run out.
    .Gradient("x = ReduceGradGrad(x, y, grad, append(directions, doutput), reduction=reduction, axis=axis, "
              "keepdims=keepdims)")
    .Gradient("y = ZerosLike(y)")
    .Gradient("grad = Sum(Mul(doutput, ReduceGradGrad(x, y, OnesLike(grad), directions, reduction=reduction, "
              "axis=axis, keepdims=keepdims)), axis=axis, keepdims=keepdims)")
    .Gradient("directions[i] = ReduceGradGrad(x, y, grad, replace(directions, doutput), reduction=reduction, "
              "axis=axis, keepdims=keepdims)")
    .Doc(R"doc(
Higher derivatives of a reduction: ReduceGrad's gradient with respect to x (one direction), and its gradients.

For "sum" and "mean" ReduceGrad does not depend on x, and for "max" and "min"
it is piecewise constant in x, so the result is zeros (x is not read). For
"prod", element j gets grad * the sum, over distinct other elements
i1, ..., iN of j's group, of directions[0][i1] * ... * directions[N-1][iN] *
(the product of the rest of the group): with one direction, grad * sum over
i != j of directions[0][i] * (the product of the group without i and j).
It is computed in one pass each way with running sums in float64, so zeros
need no special case and nothing is divided.

x: The reduction's input.
y: The reduction's result, of the reduced shape (not read).
grad: The gradient ReduceGrad was given, of the reduced shape.
directions: One to eight tensors of x's shape: the gradient flowing into ReduceGrad's output, then those into this op's outputs.
reduction: Which reduction: "sum", "mean", "max", "min" or "prod".
axis: The reduction's axes (as ReduceGrad).
keepdims: The reduction's keepdims (as ReduceGrad).
output: The gradient with respect to x, with x's shape.
)doc");

REGISTER_OP("SliceGrad")
    .Input("x: T")
    .Input("grad: T")
    .Attr("begin: list(int)")
    .Attr("size: list(int)")
    .Output("output: T")
    .Attr(kFloatTypes)
    .SetShapeFn(SliceGradShape)
    .Gradient("x = ZerosLike(x)")  // only x's shape is read
    .Gradient("grad = Slice(doutput, begin=begin, size=size)")
    .Doc(R"doc(
The gradient of Slice(x, begin, size) with respect to x.

Zeros of x's shape with grad written at the slice, as numpy's
out = zeros_like(x); out[b0:b0+s0, ...] = grad. Only x's shape is read.

x: Slice's input; only its shape is used.
grad: The gradient with respect to the slice; it must have the slice's shape.
begin: Slice's begin: the start index on each axis, with 0 <= begin[i] <= x.shape[i].
size: Slice's size: the length on each axis, or -1 for everything from begin[i] to the end.
output: The gradient with respect to x, with x's shape.
)doc");

REGISTER_OP("ConcatGrad")
    .Input("grad: T")
    .Input("values: N * T")
    .Attr("N: int >= 1")
    .Attr("index: int >= 0")
    .Attr("axis: int = 0")
    .Output("output: T")
    .Attr(kFloatTypes)
    .SetShapeFn(ConcatGradShape)
    // A slice of grad: its adjoint pads doutput with zeros; values give only shapes.
    .Gradient("grad = ConcatGradGrad(doutput, values, index=index, axis=axis)")
    .Gradient("values[i] = ConcatGrad(ZerosLike(grad), values, index=i, axis=axis)")
    .Doc(R"doc(
The gradient of Concat(values, axis) with respect to values[index].

The block of grad that values[index] occupies in the concatenation, as numpy's
numpy.split(grad, numpy.cumsum(sizes)[:-1], axis)[index]. Only the shapes of
values are read.

grad: The gradient with respect to Concat's output; it must have its shape.
values: Concat's inputs; only their shapes are used.
index: Which of values to return the gradient of, in [0, N).
axis: Concat's axis; negative values count from the end.
output: The gradient with respect to values[index], with its shape.
)doc");

REGISTER_OP("ConcatGradGrad")
    .Input("block: T")
    .Input("values: N * T")
    .Attr("N: int >= 1")
    .Attr("index: int >= 0")
    .Attr("axis: int = 0")
    .Output("output: T")
    .Attr(kFloatTypes)
    .SetShapeFn(ConcatGradShape)
    // Zero padding of block: its adjoint is the slice ConcatGrad takes.
    .Gradient("block = ConcatGrad(doutput, values, index=index, axis=axis)")
    .Gradient("values[i] = ConcatGrad(ZerosLike(output), values, index=i, axis=axis)")
    .Doc(R"doc(
The gradient of ConcatGrad with respect to its grad: block padded with zeros to the concatenation's shape.

Zeros of the shape of Concat(values, axis) with block written where
values[index] sits, as numpy's
numpy.concatenate([block if i == index else numpy.zeros_like(v) for i, v in enumerate(values)], axis).
Only the shapes of values are read.

block: The gradient with respect to ConcatGrad's output; it must have values[index]'s shape.
values: Concat's inputs; only their shapes are used.
index: Which of values block stands for, in [0, N).
axis: Concat's axis; negative values count from the end.
output: Zeros of the concatenation's shape with block at values[index]'s place.
)doc");

}  // namespace opforge
