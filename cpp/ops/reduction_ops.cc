// Reduction ops: Sum, Prod, Max, Min, Mean over a set of axes, and
// ArgMax / ArgMin along one axis.
#include <cstdint>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

// Validates attr 'axis' (list(int) or None) against argument 'x' and marks
// the reduced axes. None reduces every axis; [] reduces none (numpy axis=()).
Status ReducedAxes(InferenceContext* ctx, bool reduced[kMaxRank]) {
  const int rank = ctx->input_shape(0).rank();
  const AttrValue& axis = ctx->attr("axis");
  for (int i = 0; i < kMaxRank; ++i) reduced[i] = axis.is_none() && i < rank;
  if (axis.is_none()) return Status::OK();
  for (int64_t a : axis.list_i) {
    if (a < -rank || a >= rank) {
      return errors::InvalidArgument("attr 'axis' has axis ", a, ", out of range for argument 'x' of rank ",
                                     rank, " (valid: ", -rank, " to ", rank - 1, ")");
    }
    const int norm = static_cast<int>(a < 0 ? a + rank : a);
    if (reduced[norm]) {
      return errors::InvalidArgument("attr 'axis' names axis ", norm, " more than once");
    }
    reduced[norm] = true;
  }
  return Status::OK();
}

Status ReduceShapeImpl(InferenceContext* ctx, bool needs_nonempty) {
  bool reduced[kMaxRank];
  OF_RETURN_IF_ERROR(ReducedAxes(ctx, reduced));
  const TensorShape& in = ctx->input_shape(0);
  const bool keepdims = ctx->attr_bool("keepdims");
  TensorShape out;
  int64_t reduce_count = 1;
  for (int i = 0; i < in.rank(); ++i) {
    if (reduced[i]) {
      reduce_count *= in.dim(i);
      if (keepdims) out.AddDim(1);
    } else {
      out.AddDim(in.dim(i));
    }
  }
  // Like numpy: reducing zero elements has no identity (even into an empty result).
  if (needs_nonempty && reduce_count == 0) {
    return errors::InvalidArgument("argument 'x' of shape ", in.DebugString(),
                                   " has no elements along the reduced axes (attr 'axis'), and this "
                                   "reduction has no identity");
  }
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status ReduceShape(InferenceContext* ctx) { return ReduceShapeImpl(ctx, false); }
Status ReduceShapeNoIdentity(InferenceContext* ctx) { return ReduceShapeImpl(ctx, true); }

// ArgMax / ArgMin: 'axis' is one int or None (the flattened array).
Status ArgReduceShape(InferenceContext* ctx) {
  const TensorShape& in = ctx->input_shape(0);
  const int rank = in.rank();
  const bool keepdims = ctx->attr_bool("keepdims");
  const AttrValue& axis = ctx->attr("axis");
  TensorShape out;
  int64_t reduce_count = in.num_elements();
  if (axis.is_none() || rank == 0) {
    // numpy accepts axis 0 or -1 for a 0-d array and treats it as flattened.
    if (!axis.is_none() && axis.i != 0 && axis.i != -1) {
      return errors::InvalidArgument("attr 'axis' is ", axis.i, ", out of range for argument 'x' of rank 0");
    }
    if (keepdims) {
      for (int i = 0; i < rank; ++i) out.AddDim(1);
    }
  } else {
    if (axis.i < -rank || axis.i >= rank) {
      return errors::InvalidArgument("attr 'axis' is ", axis.i, ", out of range for argument 'x' of rank ",
                                     rank, " (valid: ", -rank, " to ", rank - 1, ")");
    }
    const int a = static_cast<int>(axis.i < 0 ? axis.i + rank : axis.i);
    reduce_count = in.dim(a);
    for (int i = 0; i < rank; ++i) {
      if (i != a) out.AddDim(in.dim(i));
      else if (keepdims) out.AddDim(1);
    }
  }
  if (reduce_count == 0) {
    return errors::InvalidArgument("argument 'x' of shape ", in.DebugString(),
                                   " is empty along the reduced axis; there is no index to return");
  }
  ctx->set_output_shape(0, out);
  return Status::OK();
}

constexpr const char* kNumericTypes = "T: {numbertype, halftype}";

}  // namespace

REGISTER_OP("Sum")
    .Input("x: T")
    .Attr("axis: list(int) = None")
    .Attr("keepdims: bool = false")
    .Output("y: T")
    .Attr(kNumericTypes)
    .SetShapeFn(ReduceShape)
    .Category("reduction")
    .Gradient("x = ReduceGrad(x, y, dy, reduction='sum', axis=axis, keepdims=keepdims)")
    .Doc(R"doc(
Sums the elements of a tensor over the given axes.

Like numpy.sum(x, axis=tuple(axis), keepdims=keepdims, dtype=x.dtype): the
result keeps the dtype of x (int32 is not promoted to int64), and integer sums
wrap around on overflow. Float sums are accumulated in blocks (float32 in
float64), so they are at least as accurate as numpy's pairwise summation.
The sum over zero elements is 0.

x: The tensor to reduce.
axis: The axes to reduce; negative entries count from the end. None (the default) reduces all axes; an empty list reduces none. Out-of-range or repeated axes are an error.
keepdims: If true, reduced axes stay in the result with length 1, so it broadcasts against x.
y: The sum, with the dtype of x.
)doc");

REGISTER_OP("Prod")
    .Input("x: T")
    .Attr("axis: list(int) = None")
    .Attr("keepdims: bool = false")
    .Output("y: T")
    .Attr(kNumericTypes)
    .SetShapeFn(ReduceShape)
    .Category("reduction")
    .Gradient("x = ReduceGrad(x, y, dy, reduction='prod', axis=axis, keepdims=keepdims)")
    .Doc(R"doc(
Multiplies the elements of a tensor over the given axes.

Like numpy.prod(x, axis=tuple(axis), keepdims=keepdims, dtype=x.dtype): the
result keeps the dtype of x and integer products wrap around on overflow. The
product over zero elements is 1.

x: The tensor to reduce.
axis: The axes to reduce; negative entries count from the end. None (the default) reduces all axes; an empty list reduces none. Out-of-range or repeated axes are an error.
keepdims: If true, reduced axes stay in the result with length 1, so it broadcasts against x.
y: The product, with the dtype of x.
)doc");

REGISTER_OP("Max")
    .Input("x: T")
    .Attr("axis: list(int) = None")
    .Attr("keepdims: bool = false")
    .Output("y: T")
    .Attr(kNumericTypes)
    .SetShapeFn(ReduceShapeNoIdentity)
    .Category("reduction")
    .Gradient("x = ReduceGrad(x, y, dy, reduction='max', axis=axis, keepdims=keepdims)")
    .Doc(R"doc(
Returns the largest element of a tensor over the given axes.

Like numpy.max(x, axis=tuple(axis), keepdims=keepdims). NaN propagates: a
reduction that sees a NaN returns NaN. Reducing over a zero-size axis is an
error (there is no identity), even when the result itself is empty.

x: The tensor to reduce.
axis: The axes to reduce; negative entries count from the end. None (the default) reduces all axes; an empty list reduces none. Out-of-range or repeated axes are an error.
keepdims: If true, reduced axes stay in the result with length 1, so it broadcasts against x.
y: The maximum, with the dtype of x.
)doc");

REGISTER_OP("Min")
    .Input("x: T")
    .Attr("axis: list(int) = None")
    .Attr("keepdims: bool = false")
    .Output("y: T")
    .Attr(kNumericTypes)
    .SetShapeFn(ReduceShapeNoIdentity)
    .Category("reduction")
    .Gradient("x = ReduceGrad(x, y, dy, reduction='min', axis=axis, keepdims=keepdims)")
    .Doc(R"doc(
Returns the smallest element of a tensor over the given axes.

Like numpy.min(x, axis=tuple(axis), keepdims=keepdims). NaN propagates: a
reduction that sees a NaN returns NaN. Reducing over a zero-size axis is an
error (there is no identity), even when the result itself is empty.

x: The tensor to reduce.
axis: The axes to reduce; negative entries count from the end. None (the default) reduces all axes; an empty list reduces none. Out-of-range or repeated axes are an error.
keepdims: If true, reduced axes stay in the result with length 1, so it broadcasts against x.
y: The minimum, with the dtype of x.
)doc");

REGISTER_OP("Mean")
    .Input("x: T")
    .Attr("axis: list(int) = None")
    .Attr("keepdims: bool = false")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(ReduceShape)
    .Category("mean")
    .Gradient("x = ReduceGrad(x, y, dy, reduction='mean', axis=axis, keepdims=keepdims)")
    .Doc(R"doc(
Averages the elements of a tensor over the given axes.

Like numpy.mean(x, axis=tuple(axis), keepdims=keepdims) for float tensors
(cast integer tensors first). float32 input is accumulated in float64. The
mean of zero elements is NaN (numpy also warns).

x: The tensor to reduce.
axis: The axes to reduce; negative entries count from the end. None (the default) reduces all axes; an empty list reduces none. Out-of-range or repeated axes are an error.
keepdims: If true, reduced axes stay in the result with length 1, so it broadcasts against x.
y: The arithmetic mean, with the dtype of x.
)doc");

REGISTER_OP("ArgMax")
    .Input("x: T")
    .Attr("axis: int = None")
    .Attr("keepdims: bool = false")
    .Output("index: int64")
    .Attr(kNumericTypes)
    .SetShapeFn(ArgReduceShape)
    .Category("arg_reduction")
    .NoGradient()
    .Doc(R"doc(
Returns the index of the largest element along an axis.

Like numpy.argmax(x, axis=axis, keepdims=keepdims). On ties the first
occurrence wins; if the reduced elements contain NaN, the index of the first
NaN is returned. Reducing over a zero-size axis (or, with axis None, an empty
tensor) is an error.

x: The tensor to search.
axis: The axis to reduce; negative values count from the end. None (the default) searches the flattened tensor and returns a flat index.
keepdims: If true, the reduced axis stays in the result with length 1 (with axis None, every axis does).
index: The int64 indices of the maxima.
)doc");

REGISTER_OP("ArgMin")
    .Input("x: T")
    .Attr("axis: int = None")
    .Attr("keepdims: bool = false")
    .Output("index: int64")
    .Attr(kNumericTypes)
    .SetShapeFn(ArgReduceShape)
    .Category("arg_reduction")
    .NoGradient()
    .Doc(R"doc(
Returns the index of the smallest element along an axis.

Like numpy.argmin(x, axis=axis, keepdims=keepdims). On ties the first
occurrence wins; if the reduced elements contain NaN, the index of the first
NaN is returned. Reducing over a zero-size axis (or, with axis None, an empty
tensor) is an error.

x: The tensor to search.
axis: The axis to reduce; negative values count from the end. None (the default) searches the flattened tensor and returns a flat index.
keepdims: If true, the reduced axis stays in the result with length 1 (with axis None, every axis does).
index: The int64 indices of the minima.
)doc");

}  // namespace opforge
