// Array ops: reshaping, transposing, casting, creating, joining and slicing tensors.
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace {

Status ReshapeShape(InferenceContext* ctx) {
  const std::vector<int64_t>& spec = ctx->attr_ints("shape");
  const TensorShape& in = ctx->input_shape(0);
  if (spec.size() > static_cast<size_t>(kMaxRank)) {
    return errors::InvalidArgument("attr 'shape' ", ListString(spec), " has rank ", spec.size(),
                                   "; at most ", kMaxRank, " is supported");
  }
  int infer = -1;
  int64_t known = 1;  // product of the given dims, saturating at INT64_MAX
  for (size_t i = 0; i < spec.size(); ++i) {
    const int64_t d = spec[i];
    if (d == -1) {
      if (infer >= 0) {
        return errors::InvalidArgument("attr 'shape' ", ListString(spec),
                                       " has more than one -1; only one dim can be inferred");
      }
      infer = static_cast<int>(i);
    } else if (d < 0) {
      return errors::InvalidArgument("attr 'shape' ", ListString(spec), " has negative dim ", d,
                                     " at index ", i, "; only -1 (infer) is allowed");
    } else if (known != 0) {
      known = (d != 0 && known > INT64_MAX / d) ? INT64_MAX : known * d;
    }
  }
  std::vector<int64_t> dims(spec);
  if (!IsFullyDefined(in)) {
    // n = (unknown) * the known dims' product: only a -1 can take the
    // unknown factor, and the known dims must divide at every size.
    int64_t known_in = 1;
    for (int i = 0; i < in.rank(); ++i) {
      if (!IsUnknownDim(in.dim(i))) known_in *= in.dim(i);
    }
    if (infer < 0) {
      return errors::InvalidArgument("attr 'shape' ", ListString(spec), " has a fixed element count but argument "
                                     "'x' of shape ", in.DebugString(), " has an unknown dimension (None); "
                                     "use -1 for the dim that takes it");
    }
    if (known == 0 || (known_in != 0 && known_in % known != 0)) {
      return errors::InvalidArgument("attr 'shape' ", ListString(spec), " cannot hold the elements of argument "
                                     "'x' of shape ", in.DebugString(), " at every size of its unknown dimension "
                                     "(None)");
    }
    dims[infer] = known_in == 0 ? 0 : kUnknownDim;
    TensorShape out(dims.data(), static_cast<int>(dims.size()));
    ctx->set_output_shape(0, out);
    return Status::OK();
  }
  const int64_t n = in.num_elements();
  if (infer >= 0) {
    if (known == 0) {
      return errors::InvalidArgument("attr 'shape' ", ListString(spec),
                                     " has a zero dim, so its -1 is ambiguous for argument 'x' "
                                     "of shape ", in.DebugString());
    }
    if (n % known != 0) {
      return errors::InvalidArgument("attr 'shape' ", ListString(spec), " cannot hold the ", n,
                                     " elements of argument 'x' of shape ", in.DebugString());
    }
    dims[infer] = n / known;
  } else if (known != n) {
    return errors::InvalidArgument("attr 'shape' ", ListString(spec), " has ", known,
                                   " elements but argument 'x' of shape ", in.DebugString(),
                                   " has ", n);
  }
  TensorShape out;
  OF_RETURN_IF_ERROR(TensorShape::Make(dims.data(), static_cast<int>(dims.size()), &out));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status TransposeShape(InferenceContext* ctx) {
  const TensorShape& in = ctx->input_shape(0);
  const int rank = in.rank();
  TensorShape out;
  const AttrValue& perm = ctx->attr("perm");
  if (perm.is_none()) {
    for (int i = rank - 1; i >= 0; --i) out.AddDim(in.dim(i));
    ctx->set_output_shape(0, out);
    return Status::OK();
  }
  const std::vector<int64_t>& p = perm.list_i;
  if (static_cast<int>(p.size()) != rank) {
    return errors::InvalidArgument("attr 'perm' ", ListString(p), " has ", p.size(),
                                   " entries but argument 'x' has rank ", rank);
  }
  bool seen[kMaxRank] = {};
  for (int i = 0; i < rank; ++i) {
    const int64_t a = p[i];
    if (a < -rank || a >= rank) {
      return errors::InvalidArgument("attr 'perm' ", ListString(p), " entry ", a,
                                     " is out of range for argument 'x' of rank ", rank);
    }
    const int ax = static_cast<int>(a < 0 ? a + rank : a);
    if (seen[ax]) {
      return errors::InvalidArgument("attr 'perm' ", ListString(p), " repeats axis ", ax,
                                     "; it must be a permutation of range(", rank, ")");
    }
    seen[ax] = true;
    out.AddDim(in.dim(ax));
  }
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status FillShape(InferenceContext* ctx) {
  const TensorShape& v = ctx->input_shape(0);
  if (v.num_elements() != 1) {
    return errors::InvalidArgument("argument 'value' must have exactly one element, got shape ",
                                   v.DebugString());
  }
  const std::vector<int64_t>& dims = ctx->attr_ints("shape");
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return errors::InvalidArgument("attr 'shape' ", ListString(dims), " has rank ", dims.size(),
                                   "; at most ", kMaxRank, " is supported");
  }
  for (int64_t d : dims) {
    if (d < 0) {
      return errors::InvalidArgument("attr 'shape' ", ListString(dims), " has negative dim ", d);
    }
  }
  TensorShape out;
  Status s = TensorShape::Make(dims.data(), static_cast<int>(dims.size()), &out);
  if (!s.ok()) return errors::InvalidArgument("attr 'shape' ", ListString(dims), ": ", s.message());
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status ConcatShape(InferenceContext* ctx) {
  const auto range = ctx->input_range("values");
  const TensorShape& first = ctx->input_shape(range.first);
  const int rank = first.rank();
  if (rank == 0) {
    return errors::InvalidArgument("argument 'values'[0] is 0-d; concatenation needs rank >= 1");
  }
  const int64_t raw_axis = ctx->attr_int("axis");
  if (raw_axis < -rank || raw_axis >= rank) {
    return errors::InvalidArgument("attr 'axis' is ", raw_axis, " but argument 'values' has rank ",
                                   rank, " (valid: [", -rank, ", ", rank, "))");
  }
  const int axis = static_cast<int>(raw_axis < 0 ? raw_axis + rank : raw_axis);
  TensorShape out = first;
  int64_t total = first.dim(axis);
  for (int i = range.first + 1; i < range.second; ++i) {
    const TensorShape& s = ctx->input_shape(i);
    const int idx = i - range.first;
    if (s.rank() != rank) {
      return errors::InvalidArgument("argument 'values'[", idx, "] has shape ", s.DebugString(),
                                     " (rank ", s.rank(), ") but 'values'[0] has shape ",
                                     first.DebugString(), " (rank ", rank, ")");
    }
    for (int d = 0; d < rank; ++d) {
      if (d != axis && s.dim(d) != first.dim(d)) {
        return errors::InvalidArgument("argument 'values'[", idx, "] has shape ", s.DebugString(),
                                       " but 'values'[0] has shape ", first.DebugString(),
                                       "; they must match except on axis ", axis);
      }
    }
    if (IsUnknownDim(s.dim(axis)) || IsUnknownDim(total)) {
      total = kUnknownDim;  // a sum with an unknown dim is unknown
      continue;
    }
    // Empty pieces can have dims near INT64_MAX; their sum must not overflow.
    if (s.dim(axis) > INT64_MAX - total) {
      return errors::InvalidArgument("argument 'values': the dims on axis ", axis,
                                     " add up to more than INT64_MAX");
    }
    total += s.dim(axis);
  }
  out.set_dim(axis, total);
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status SliceShape(InferenceContext* ctx) {
  TensorShape out;
  OF_RETURN_IF_ERROR(SliceResultShape(ctx->input_shape(0), ctx->attr_ints("begin"), ctx->attr_ints("size"), &out));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

constexpr const char* kAllTypes = "T: alltypes";

}  // namespace

REGISTER_OP("Reshape")
    .Input("x: T")
    .Attr("shape: list(int)")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(ReshapeShape)
    .Category("layout")
    .Gradient("x = Reshape(dy, shape=shape(x))")
    .Doc(R"doc(
Gives a tensor a new shape with the same elements, without copying them.

Like numpy.reshape(x, shape) in C order. The result shares the input's buffer
(zero copy). One entry of shape may be -1: that dim is inferred from the
element count. It is an error if more than one entry is -1, an entry is any
other negative number, the element counts differ, or the -1 is ambiguous
because another entry is 0.

x: The tensor to reshape.
shape: The new shape; at most one entry may be -1.
y: A tensor with the elements of x in the same order and the given shape.
)doc");

REGISTER_OP("Transpose")
    .Input("x: T")
    .Attr("perm: list(int) = None")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(TransposeShape)
    .Category("layout")
    .Gradient("x = Transpose(dy, perm=inverse_perm(perm))")
    .Doc(R"doc(
Permutes the axes of a tensor.

Like numpy.transpose(x, perm), but the result is a new contiguous tensor.
Output axis i is input axis perm[i], so y.shape[i] == x.shape[perm[i]].
0-d and 1-d tensors come back unchanged.

x: The tensor to transpose.
perm: A permutation of range(rank(x)); negative entries count from the end. None (the default) reverses the axes.
y: The transposed tensor, with shape [x.shape[p] for p in perm].
)doc");

REGISTER_OP("Cast")
    .Input("x: SrcT")
    .Attr("dtype: type")
    .Output("y: dtype")
    .Attr("SrcT: alltypes")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Cast(dy, dtype=SrcT)")
    .Doc(R"doc(
Converts a tensor to another dtype.

Like x.astype(dtype) in numpy. Floats convert to integers by truncating toward
zero; NaN, infinities and values outside the target's range become the
target's minimum (INT32_MIN or INT64_MIN), as on x86 and in numpy. Integer
narrowing wraps modulo 2**32. Any value converts to bool as value != 0 (NaN is
True); bool converts to numbers as 0 or 1. Casting to the same dtype returns
the input's buffer without copying.

x: The tensor to convert.
dtype: The dtype of the result.
y: x converted element-wise to dtype, with x's shape.
)doc");

REGISTER_OP("Fill")
    .Attr("shape: shape")
    .Input("value: T")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(FillShape)
    .Category("layout")
    .Gradient("value = Sum(dy)")
    .Doc(R"doc(
Creates a tensor of the given shape with every element set to one value.

Like numpy.full(shape, value). The dtype is value's dtype.

shape: The shape of the result; every dim must be >= 0 (an empty list makes a 0-d tensor).
value: The fill value; must hold exactly one element (0-d, or any shape of size 1).
y: A tensor of the given shape filled with value.
)doc");

REGISTER_OP("ZerosLike")
    .Input("x: T")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns a tensor of zeros with the shape and dtype of x.

Like numpy.zeros_like(x); bool tensors are filled with False.

x: The tensor whose shape and dtype the result takes; its values are not read.
y: A new tensor of zeros.
)doc");

REGISTER_OP("OnesLike")
    .Input("x: T")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns a tensor of ones with the shape and dtype of x.

Like numpy.ones_like(x); bool tensors are filled with True.

x: The tensor whose shape and dtype the result takes; its values are not read.
y: A new tensor of ones.
)doc");

REGISTER_OP("Concat")
    .Input("values: N * T")
    .Attr("N: int >= 1")
    .Attr("axis: int = 0")
    .Output("output: T")
    .Attr(kAllTypes)
    .SetShapeFn(ConcatShape)
    .Category("layout")
    .Gradient("values[i] = ConcatGrad(doutput, values, axis=axis, index=i)")
    .Doc(R"doc(
Joins a list of tensors along an existing axis.

Like numpy.concatenate(values, axis). All tensors must have the same dtype and
the same rank (at least 1), and equal dims on every axis but the joined one.
Pieces that are empty along the axis are allowed and contribute nothing.

values: The tensors to join, in order (at least one).
axis: The axis to join along; negative values count from the end.
output: The joined tensor; its dim on axis is the sum of the inputs' dims there.
)doc");

REGISTER_OP("Slice")
    .Input("x: T")
    .Attr("begin: list(int)")
    .Attr("size: list(int)")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(SliceShape)
    .Category("layout")
    .Gradient("x = SliceGrad(x, dy, begin=begin, size=size)")
    .Doc(R"doc(
Extracts a contiguous block from a tensor.

Like TensorFlow's tf.slice, or numpy's x[b0:b0+s0, b1:b1+s1, ...]. Both lists
must have one entry per axis of x. Unlike numpy slicing, out-of-range bounds
are errors, not clipped.

x: The tensor to slice.
begin: The start index on each axis, with 0 <= begin[i] <= x.shape[i].
size: The length on each axis, with begin[i] + size[i] <= x.shape[i]; -1 means everything from begin[i] to the end of that axis.
y: A new tensor holding the block, of shape size (with each -1 resolved).
)doc");

REGISTER_OP("Identity")
    .Input("x: T")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = dy")
    .Doc(R"doc(
Returns its input unchanged, sharing its buffer (zero copy).

Like numpy.asarray(x): no data is copied.

x: The tensor to return.
y: A tensor with the same dtype, shape and storage as x.
)doc");

}  // namespace opforge
