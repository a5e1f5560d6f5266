// The index group: gathers and scatters at computed positions (GatherND,
// ScatterND, GatherElements, ScatterElements), TopK and NonZero. Kernels
// live in cpp/kernels/index/. Indices may be negative (counted from the
// end, as ONNX allows); anything outside [-dim, dim) is InvalidArgumentError.
//
// The scatters take a `reduction` attr ('none', 'add', 'mul', 'max', 'min').
// The rules declared here hold for 'none' and 'add' (data: dy with the
// written slots zeroed by 'none', kept by 'add'); the gradient language
// cannot branch on the attr, so pkg/opforge/_index.py registers the same
// rule in Python, which takes precedence and refuses mul/max/min by name.
#include <string>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

constexpr const char* kIndexTypes = "T: {float32, float64, int32, int64, bool}";

bool Known(int64_t d) { return !IsUnknownDim(d); }

Status CheckReduction(InferenceContext* ctx) {
  const std::string& r = ctx->attr("reduction").s;
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min") {
    return errors::InvalidArgument("attr 'reduction' is '", r, "' but must be one of none, add, mul, max, min");
  }
  return Status::OK();
}

// GatherND(params, indices): indices [..., k] address the first k dims of params.
Status GatherNDShape(InferenceContext* ctx) {
  const TensorShape& p = ctx->input_shape(0);
  const TensorShape& idx = ctx->input_shape(1);
  if (idx.rank() == 0) return errors::InvalidArgument("argument 'indices' must have rank >= 1, got a 0-d tensor");
  const int64_t k = idx.dim(idx.rank() - 1);
  if (!Known(k)) return errors::InvalidArgument("argument 'indices' needs a known last dim (the index length)");
  if (k > p.rank()) {
    return errors::InvalidArgument("argument 'indices' has last dim ", k, " but argument 'params' has rank only ",
                                   p.rank());
  }
  if (idx.rank() - 1 + p.rank() - k > kMaxRank) {
    return errors::InvalidArgument("the result would have rank above ", kMaxRank);
  }
  TensorShape out;
  for (int i = 0; i + 1 < idx.rank(); ++i) out.AddDim(idx.dim(i));
  for (int i = static_cast<int>(k); i < p.rank(); ++i) out.AddDim(p.dim(i));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

// ScatterND(data, indices, updates): updates = indices.shape[:-1] + data.shape[k:].
Status ScatterNDShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckReduction(ctx));
  const TensorShape& d = ctx->input_shape(0);
  const TensorShape& idx = ctx->input_shape(1);
  const TensorShape& u = ctx->input_shape(2);
  if (idx.rank() == 0) return errors::InvalidArgument("argument 'indices' must have rank >= 1, got a 0-d tensor");
  const int64_t k = idx.dim(idx.rank() - 1);
  if (!Known(k)) return errors::InvalidArgument("argument 'indices' needs a known last dim (the index length)");
  if (k > d.rank()) {
    return errors::InvalidArgument("argument 'indices' has last dim ", k, " but argument 'data' has rank only ",
                                   d.rank());
  }
  const int want_rank = idx.rank() - 1 + d.rank() - static_cast<int>(k);
  bool ok = u.rank() == want_rank;
  for (int i = 0; ok && i < want_rank; ++i) {
    const int64_t w = i < idx.rank() - 1 ? idx.dim(i) : d.dim(static_cast<int>(k) + i - (idx.rank() - 1));
    ok = !Known(w) || !Known(u.dim(i)) || w == u.dim(i);
  }
  if (!ok) {
    return errors::InvalidArgument("argument 'updates' has shape ", u.DebugString(),
                                   " but must be indices.shape[:-1] + data.shape[", k, ":] (indices ",
                                   idx.DebugString(), ", data ", d.DebugString(), ")");
  }
  ctx->set_output_shape(0, d);
  return Status::OK();
}

Status ElementsAxis(InferenceContext* ctx, const TensorShape& d, const TensorShape& idx, const char* idx_name) {
  if (d.rank() == 0) return errors::InvalidArgument("argument 'data' must have rank >= 1, got a 0-d tensor");
  if (idx.rank() != d.rank()) {
    return errors::InvalidArgument("argument '", idx_name, "' has rank ", idx.rank(), " but must have data's rank ",
                                   d.rank());
  }
  int axis;
  return NormalizeAxis(ctx->attr_int("axis"), d.rank(), "attr 'axis'", &axis);
}

// GatherElements(params, indices): out[i] = params[i with i[axis] = indices[i]].
Status GatherElementsShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(ElementsAxis(ctx, ctx->input_shape(0), ctx->input_shape(1), "indices"));
  ctx->set_output_shape(0, ctx->input_shape(1));
  return Status::OK();
}

Status ScatterElementsShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckReduction(ctx));
  const TensorShape& idx = ctx->input_shape(1);
  const TensorShape& u = ctx->input_shape(2);
  OF_RETURN_IF_ERROR(ElementsAxis(ctx, ctx->input_shape(0), idx, "indices"));
  bool ok = u.rank() == idx.rank();
  for (int i = 0; ok && i < u.rank(); ++i) ok = !Known(u.dim(i)) || !Known(idx.dim(i)) || u.dim(i) == idx.dim(i);
  if (!ok) {
    return errors::InvalidArgument("argument 'updates' has shape ", u.DebugString(),
                                   " but must have the shape of argument 'indices', ", idx.DebugString());
  }
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}

Status TopKShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  if (x.rank() == 0) return errors::InvalidArgument("argument 'x' must have rank >= 1, got a 0-d tensor");
  int axis;
  OF_RETURN_IF_ERROR(NormalizeAxis(ctx->attr_int("axis"), x.rank(), "attr 'axis'", &axis));
  const int64_t k = ctx->attr_int("k");
  if (Known(x.dim(axis)) && k > x.dim(axis)) {
    return errors::InvalidArgument("attr 'k' is ", k, " but axis ", axis, " of argument 'x' ", x.DebugString(),
                                   " has only ", x.dim(axis), " elements");
  }
  TensorShape out = x;
  out.set_dim(axis, k);
  ctx->set_output_shape(0, out);
  ctx->set_output_shape(1, out);
  return Status::OK();
}

// The count of nonzeros is known only from the values, so the caller passes
// it (of.nonzero counts first): shapes stay static, which the executor and
// the graph memory plan rely on; the kernel checks the count.
Status NonZeroShape(InferenceContext* ctx) {
  ctx->set_output_shape(0, TensorShape({static_cast<int64_t>(ctx->input_shape(0).rank()), ctx->attr_int("count")}));
  return Status::OK();
}

}  // namespace

REGISTER_OP("GatherND")
    .Input("params: T")
    .Input("indices: Tindices")
    .Output("output: T")
    .Attr(kIndexTypes)
    .Attr("Tindices: {int32, int64}")
    .SetShapeFn(GatherNDShape)
    .Gradient("params = ScatterND(ZerosLike(params), indices, doutput, reduction='add')")
    .Gradient("indices = None")
    .Doc(R"doc(
Gathers slices of params addressed by the index tuples in the last dim of indices.

With k = indices.shape[-1], out[i...] = params[tuple(indices[i...])], a slice
of shape params.shape[k:]: numpy's params[tuple(indices.T)], ONNX's GatherND
with batch_dims 0. Negative indices count from the end.

params: The data, of rank >= k.
indices: Index tuples, shape [..., k].
output: Shape indices.shape[:-1] + params.shape[k:].
)doc");

REGISTER_OP("ScatterND")
    .Input("data: T")
    .Input("indices: Tindices")
    .Input("updates: T")
    .Output("output: T")
    .Attr(kIndexTypes)
    .Attr("Tindices: {int32, int64}")
    .Attr("reduction: string = 'none'")
    .SetShapeFn(ScatterNDShape)
    .Gradient("data = ScatterND(doutput, indices, ZerosLike(updates), reduction=reduction)")
    .Gradient("indices = None")
    .Gradient("updates = GatherND(doutput, indices)")
    .Doc(R"doc(
Returns a copy of data with the slices addressed by indices replaced by (or combined with) updates.

The inverse of GatherND: out[tuple(indices[i...])] = updates[i...], in index
order, so with repeated indices and reduction 'none' the last one wins.
reduction 'add', 'mul', 'max' or 'min' combines instead (ONNX ScatterND).

data: The tensor to update.
indices: Index tuples, shape [..., k], k <= rank(data).
updates: Shape indices.shape[:-1] + data.shape[k:].
reduction: 'none' (replace), 'add', 'mul', 'max' or 'min'.
output: data's shape and dtype.
)doc");

REGISTER_OP("GatherElements")
    .Input("params: T")
    .Input("indices: Tindices")
    .Output("output: T")
    .Attr(kIndexTypes)
    .Attr("Tindices: {int32, int64}")
    .Attr("axis: int = 0")
    .SetShapeFn(GatherElementsShape)
    .Gradient("params = ScatterElements(ZerosLike(params), indices, doutput, axis=axis, reduction='add')")
    .Gradient("indices = None")
    .Doc(R"doc(
Picks one element of params along axis per element of indices.

Equivalent to np.take_along_axis(params, indices, axis) (ONNX
GatherElements); negative indices count from the end.

params: The data.
indices: Of params' rank; the positions along axis.
axis: The axis indexed.
output: indices' shape.
)doc");

REGISTER_OP("ScatterElements")
    .Input("data: T")
    .Input("indices: Tindices")
    .Input("updates: T")
    .Output("output: T")
    .Attr(kIndexTypes)
    .Attr("Tindices: {int32, int64}")
    .Attr("axis: int = 0")
    .Attr("reduction: string = 'none'")
    .SetShapeFn(ScatterElementsShape)
    .Gradient("data = ScatterElements(doutput, indices, ZerosLike(updates), axis=axis, reduction=reduction)")
    .Gradient("indices = None")
    .Gradient("updates = GatherElements(doutput, indices, axis=axis)")
    .Doc(R"doc(
Returns a copy of data with updates written along axis at the positions indices give.

The inverse of GatherElements (np.put_along_axis for reduction 'none'; ONNX
ScatterElements): out[i with i[axis] = indices[i]] = updates[i], in order;
reduction 'add', 'mul', 'max' or 'min' combines instead.

data: The tensor to update.
indices: Of data's rank; positions along axis.
updates: indices' shape.
axis: The axis written along.
reduction: 'none' (replace), 'add', 'mul', 'max' or 'min'.
output: data's shape and dtype.
)doc");

REGISTER_OP("TopK")
    .Input("x: T")
    .Output("values: T")
    .Output("indices: int64")
    .Attr("T: {float32, float64, int32, int64}")
    .Attr("k: int >= 0")
    .Attr("axis: int = -1")
    .Attr("largest: bool = true")
    .Attr("sorted: bool = true")
    .SetShapeFn(TopKShape)
    .Gradient("x = ScatterElements(ZerosLike(x), indices, dvalues, axis=axis, reduction='add')")
    .Doc(R"doc(
The k largest (or smallest) elements along axis and their positions.

As ONNX TopK: ties keep the lower index first; NaN counts as larger than
every number. sorted=false still returns them sorted (allowed by ONNX).

x: The input, rank >= 1.
k: How many to keep, at most x.shape[axis].
axis: The axis searched.
largest: True for the largest, false for the smallest.
sorted: Whether the result must be in order (it always is).
values: The elements, x's shape with k along axis.
indices: Their positions along axis.
)doc");

REGISTER_OP("NonZero")
    .Input("x: T")
    .Output("y: int64")
    .Attr("T: {float32, float64, int32, int64, bool}")
    .Attr("count: int >= 0")
    .SetShapeFn(NonZeroShape)
    .NoGradient()  // integer positions: nothing to differentiate
    .Doc(R"doc(
The positions of the nonzero elements of x, one column per element, in row-major order.

Equivalent to np.array(np.nonzero(x)) (ONNX NonZero). The output's size
depends on the values, so the caller gives the count of nonzeros (of.nonzero
computes it); a count that does not match x is InvalidArgumentError.

x: The input.
count: The number of nonzero elements of x.
y: Shape [rank(x), count], int64.
)doc");

}  // namespace opforge
