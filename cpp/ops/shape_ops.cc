// Shape ops: shapes as int64 tensors, and the ops that take one (ONNX's
// Shape, Reshape, Expand, Slice, Tile, ConstantOfShape, Range), so one graph
// runs at every size. Their shape functions read the shape tensor's value
// where it is known (a constant, an eager call, a value the planner computed
// from the fed shapes) and give unknown (-1) dims where it is not.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "opforge/strided_slice.h"
#include "shape_checks.h"

namespace opforge {
namespace {

// The int64 entries of 1-D input `i` (named `what`): *known false when the
// value is known only at run time (then *len is still its length).
Status ShapeVector(InferenceContext* ctx, int i, const char* what, std::vector<int64_t>* vals, bool* known) {
  const TensorShape& s = ctx->input_shape(i);
  if (s.rank() != 1) {
    return errors::InvalidArgument("argument '", what, "' must be 1-D, got shape ", s.DebugString());
  }
  if (IsUnknownDim(s.dim(0))) {
    return errors::InvalidArgument("argument '", what, "' has an unknown length: the rank of the result "
                                   "would be unknown");
  }
  if (s.dim(0) > kMaxRank && std::string(what) != "starts" && std::string(what) != "ends" &&
      std::string(what) != "axes" && std::string(what) != "steps") {
    return errors::InvalidArgument("argument '", what, "' has ", s.dim(0), " entries; at most ", kMaxRank,
                                   " dims are supported");
  }
  vals->assign(static_cast<size_t>(s.dim(0)), kUnknownDim);
  const Tensor* v = ctx->input_value(i);
  *known = v != nullptr;
  if (v != nullptr) {
    for (int64_t k = 0; k < s.dim(0); ++k) (*vals)[k] = v->data<int64_t>()[k];
  }
  return Status::OK();
}

Status ShapeShape(InferenceContext* ctx) {
  ctx->set_output_shape(0, TensorShape({ctx->input_shape(0).rank()}));
  return Status::OK();
}

// A target known in part ('dims'), whose unknown entries are as many as x's
// unknown dims (they come from x's shape, as exported models build them):
// the one entry to infer (-2 here) is x's known dims over the target's
// known ones. The engine checks the guess against every run's shapes
// (shape_plan.cc), so a wrong one fails the run instead of answering wrong.
void InferHintedDim(const TensorShape& in, std::vector<int64_t>* dims) {
  int infer = -1, unknown_out = 0, unknown_in = 0;
  int64_t known_out = 1, known_in = 1;
  for (size_t i = 0; i < dims->size(); ++i) {
    const int64_t d = (*dims)[i];
    if (d == -2) {
      if (infer >= 0) return;
      infer = static_cast<int>(i);
    } else if (IsUnknownDim(d)) {
      ++unknown_out;
    } else {
      known_out *= d;
    }
  }
  for (int i = 0; i < in.rank(); ++i) {
    if (IsUnknownDim(in.dim(i))) {
      ++unknown_in;
    } else {
      known_in *= in.dim(i);
    }
  }
  if (infer < 0) return;
  (*dims)[infer] = kUnknownDim;
  if (unknown_in == unknown_out && known_out > 0 && known_in % known_out == 0) {
    (*dims)[infer] = known_in / known_out;
  }
}

// ONNX Reshape: 0 copies the input's dim there (unless allowzero), one -1 is inferred.
Status ReshapeToShape(InferenceContext* ctx) {
  const TensorShape& in = ctx->input_shape(0);
  std::vector<int64_t> dims;
  bool known = false;
  OF_RETURN_IF_ERROR(ShapeVector(ctx, 1, "shape", &dims, &known));
  const int rank = static_cast<int>(dims.size());
  const bool allowzero = ctx->attr_bool("allowzero");
  const std::vector<int64_t>& hint = ctx->attr_ints("dims");
  if (!hint.empty() && hint.size() != dims.size()) {
    return errors::InvalidArgument("attr 'dims' ", ListString(hint), " has ", hint.size(),
                                   " entries but argument 'shape' has ", dims.size());
  }
  if (!known) {
    // The entries known when the graph was built (attr 'dims') give those dims.
    for (size_t i = 0; i < hint.size(); ++i) {
      const int64_t h = hint[i];
      if (h > 0 || (h == 0 && allowzero)) dims[i] = h;
      if (h == 0 && !allowzero && static_cast<int>(i) < in.rank()) dims[i] = in.dim(static_cast<int>(i));
      if (h == -1) dims[i] = -2;  // the entry to infer, marked apart from the unknown ones
    }
    InferHintedDim(in, &dims);
    ctx->set_output_shape(0, TensorShape(dims.data(), rank));
    return Status::OK();
  }
  for (size_t i = 0; i < hint.size(); ++i) {
    if (hint[i] != -2 && hint[i] != dims[i]) {
      return errors::InvalidArgument("argument 'shape' ", ListString(dims), " differs from attr 'dims' ",
                                     ListString(hint), " at index ", i);
    }
  }
  const std::vector<int64_t> spec = dims;
  int infer = -1;
  bool unknown = false;
  int64_t product = 1;
  for (int i = 0; i < rank; ++i) {
    int64_t& d = dims[i];
    if (d == 0 && !allowzero) {
      if (i >= in.rank()) {
        return errors::InvalidArgument("argument 'shape' ", ListString(spec), " copies dim ", i,
                                       " (0) but argument 'x' has rank ", in.rank());
      }
      d = in.dim(i);
    } else if (d == -1) {
      if (infer >= 0) {
        return errors::InvalidArgument("argument 'shape' ", ListString(spec), " has more than one -1");
      }
      if (allowzero) {
        for (int64_t e : spec) {
          if (e == 0) {
            return errors::InvalidArgument("argument 'shape' ", ListString(spec),
                                           " has both 0 and -1 with allowzero");
          }
        }
      }
      infer = i;
      continue;
    } else if (d < 0) {
      return errors::InvalidArgument("argument 'shape' ", ListString(spec), " has negative dim ", d, " at index ",
                                     i, "; only -1 (infer) is allowed");
    }
    if (IsUnknownDim(d)) {
      unknown = true;
    } else {
      product = (d != 0 && product > INT64_MAX / d) ? INT64_MAX : product * d;
    }
  }
  if (!IsFullyDefined(in) || unknown) {
    if (infer >= 0) dims[infer] = kUnknownDim;
    ctx->set_output_shape(0, TensorShape(dims.data(), rank));
    return Status::OK();
  }
  const int64_t n = in.num_elements();
  if (infer >= 0) {
    if (product == 0 || n % product != 0) {
      return errors::InvalidArgument("argument 'shape' ", ListString(spec), " cannot hold the ", n,
                                     " elements of argument 'x' of shape ", in.DebugString());
    }
    dims[infer] = n / product;
  } else if (product != n) {
    return errors::InvalidArgument("argument 'shape' ", ListString(spec), " has ", product,
                                   " elements but argument 'x' of shape ", in.DebugString(), " has ", n);
  }
  TensorShape out;
  OF_RETURN_IF_ERROR(MakeShape(dims.data(), rank, &out));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

// Two-way numpy broadcasting of x's shape and the shape tensor's value.
Status ExpandShape(InferenceContext* ctx) {
  const TensorShape& in = ctx->input_shape(0);
  std::vector<int64_t> dims;
  bool known = false;
  OF_RETURN_IF_ERROR(ShapeVector(ctx, 1, "shape", &dims, &known));
  for (size_t i = 0; known && i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return errors::InvalidArgument("argument 'shape' ", ListString(dims), " has negative dim ", dims[i]);
    }
  }
  const int rank = std::max(in.rank(), static_cast<int>(dims.size()));
  std::vector<int64_t> out(rank);
  for (int i = 0; i < rank; ++i) {
    const int xi = i - (rank - in.rank()), si = i - (rank - static_cast<int>(dims.size()));
    const int64_t a = xi >= 0 ? in.dim(xi) : 1, b = si >= 0 ? dims[si] : 1;
    if (IsUnknownDim(b)) {
      out[i] = (!IsUnknownDim(a) && a != 1) ? a : kUnknownDim;  // b is 1 or a there
    } else if (IsUnknownDim(a)) {
      out[i] = b == 1 ? kUnknownDim : b;
    } else if (a == b || b == 1) {
      out[i] = a;
    } else if (a == 1) {
      out[i] = b;
    } else {
      return errors::InvalidArgument("argument 'x' of shape ", in.DebugString(), " does not broadcast with "
                                     "argument 'shape' ", ListString(dims));
    }
  }
  TensorShape s;
  OF_RETURN_IF_ERROR(MakeShape(out.data(), rank, &s));
  ctx->set_output_shape(0, s);
  return Status::OK();
}

Status TileShape(InferenceContext* ctx) {
  const TensorShape& in = ctx->input_shape(0);
  std::vector<int64_t> reps;
  bool known = false;
  OF_RETURN_IF_ERROR(ShapeVector(ctx, 1, "repeats", &reps, &known));
  if (static_cast<int>(reps.size()) != in.rank()) {
    return errors::InvalidArgument("argument 'repeats' has ", reps.size(), " entries but argument 'x' has rank ",
                                   in.rank());
  }
  std::vector<int64_t> out(in.rank());
  for (int i = 0; i < in.rank(); ++i) {
    if (known && reps[i] < 0) {
      return errors::InvalidArgument("argument 'repeats' ", ListString(reps), " has a negative entry");
    }
    const int64_t d = in.dim(i);
    out[i] = (IsUnknownDim(reps[i]) || IsUnknownDim(d)) ? ((reps[i] == 0 || d == 0) ? 0 : kUnknownDim)
             : (d != 0 && reps[i] > INT64_MAX / d) ? INT64_MAX : d * reps[i];
  }
  TensorShape s;
  OF_RETURN_IF_ERROR(MakeShape(out.data(), in.rank(), &s));
  ctx->set_output_shape(0, s);
  return Status::OK();
}

Status FullShape(InferenceContext* ctx) {
  if (ctx->input_shape(1).num_elements() != 1) {
    return errors::InvalidArgument("argument 'value' must have exactly one element, got shape ",
                                   ctx->input_shape(1).DebugString());
  }
  std::vector<int64_t> dims;
  bool known = false;
  OF_RETURN_IF_ERROR(ShapeVector(ctx, 0, "shape", &dims, &known));
  for (size_t i = 0; known && i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return errors::InvalidArgument("argument 'shape' ", ListString(dims), " has negative dim ", dims[i]);
    }
  }
  TensorShape s;
  OF_RETURN_IF_ERROR(MakeShape(dims.data(), static_cast<int>(dims.size()), &s));
  ctx->set_output_shape(0, s);
  return Status::OK();
}

template <typename T>
double ScalarAt(const Tensor& t) {
  return static_cast<double>(t.data<T>()[0]);
}

double ScalarOf(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kInt32: return ScalarAt<int32_t>(t);
    case DType::kInt64: return ScalarAt<int64_t>(t);
    case DType::kFloat32: return ScalarAt<float>(t);
    default: return ScalarAt<double>(t);
  }
}

Status ArangeShape(InferenceContext* ctx) {
  const char* names[3] = {"start", "limit", "delta"};
  double v[3];
  bool known = true;
  for (int i = 0; i < 3; ++i) {
    if (ctx->input_shape(i).num_elements() != 1) {
      return errors::InvalidArgument("argument '", names[i], "' must have exactly one element, got shape ",
                                     ctx->input_shape(i).DebugString());
    }
    const Tensor* t = ctx->input_value(i);
    if (t == nullptr) {
      known = false;
      continue;
    }
    v[i] = ScalarOf(*t);
  }
  if (!known) {
    ctx->set_output_shape(0, TensorShape({kUnknownDim}));
    return Status::OK();
  }
  if (v[2] == 0 || std::isnan(v[2])) return errors::InvalidArgument("argument 'delta' must not be 0");
  const double n = std::ceil((v[1] - v[0]) / v[2]);
  if (!(n < 9.0e15)) {
    if (std::isnan(n)) return errors::InvalidArgument("arguments 'start', 'limit', 'delta' give no length");
    return errors::InvalidArgument("the range from 'start' to 'limit' by 'delta' has too many elements");
  }
  ctx->set_output_shape(0, TensorShape({n > 0 ? static_cast<int64_t>(n) : 0}));
  return Status::OK();
}

Status StridedSliceShape(InferenceContext* ctx) {
  const TensorShape& in = ctx->input_shape(0);
  const char* names[4] = {"starts", "ends", "axes", "steps"};
  std::vector<int64_t> v[4];
  bool known[4];
  for (int i = 0; i < 4; ++i) OF_RETURN_IF_ERROR(ShapeVector(ctx, i + 1, names[i], &v[i], &known[i]));
  for (int i = 1; i < 4; ++i) {
    if (v[i].size() != v[0].size()) {
      return errors::InvalidArgument("arguments 'starts', 'ends', 'axes' and 'steps' must have one entry each per "
                                     "sliced axis; got ", v[0].size(), ", ", v[1].size(), ", ", v[2].size(), ", ",
                                     v[3].size());
    }
  }
  if (known[0] && known[1] && known[2] && known[3] && IsFullyDefined(in)) {
    std::vector<int64_t> begin, step;
    TensorShape out;
    OF_RETURN_IF_ERROR(StridedSliceBounds(in, v[0], v[1], v[2], v[3], &begin, &step, &out));
    ctx->set_output_shape(0, out);
    return Status::OK();
  }
  // Some bound or dim is known only at run time: the sliced axes (all of
  // them where the axes are unknown) have unknown length.
  std::vector<int64_t> dims(in.dims(), in.dims() + in.rank());
  for (size_t j = 0; j < v[2].size() || !known[2]; ++j) {
    if (!known[2]) {
      for (int64_t& d : dims) d = kUnknownDim;
      break;
    }
    int a = 0;
    OF_RETURN_IF_ERROR(NormalizeAxis(v[2][j], in.rank(), "argument 'axes' entry", &a));
    dims[a] = kUnknownDim;
  }
  ctx->set_output_shape(0, TensorShape(dims.data(), in.rank()));
  return Status::OK();
}

constexpr const char* kAllTypes = "T: alltypes";

}  // namespace

REGISTER_OP("Shape")
    .Input("x: T")
    .Output("y: int64")
    .Attr(kAllTypes)
    .SetShapeFn(ShapeShape)
    .NoGradient()  // a shape is not a function of the values
    .Doc(R"doc(
The shape of a tensor as a 1-D int64 tensor.

Like numpy.array(x.shape). In a graph it is computed from the fed shapes
before the graph runs, so the ops that take a shape tensor (ReshapeTo,
Expand, StridedSlice, Tile, ConstantOfShape, ArangeOf) get concrete shapes.

x: The tensor whose shape is taken; its values are not read.
y: x's dims, of shape [rank(x)].
)doc");

REGISTER_OP("ReshapeTo")
    .Input("x: T")
    .Input("shape: int64")
    .Attr("allowzero: bool = false")
    .Attr("dims: list(int) = []")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(ReshapeToShape)
    .Gradient("x = Reshape(dy, shape=shape(x))")
    .Doc(R"doc(
Reshape to a shape given as a tensor (ONNX Reshape), without copying.

One entry of shape may be -1 (inferred from the element count); an entry 0
copies x's dim at that position unless allowzero is true (then it is a zero
dim). The result shares x's buffer.

x: The tensor to reshape.
shape: The new shape, a 1-D int64 tensor.
allowzero: Whether 0 in shape is a zero dim (true) or copies x's dim (false).
dims: The entries of shape known when a graph is built, -2 where known only at run time (empty: none); a graph then knows those dims of y before it runs, and a run whose shape differs fails.
y: x's elements in the same order, with the given shape.
)doc");

REGISTER_OP("Expand")
    .Input("x: T")
    .Input("shape: int64")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(ExpandShape)
    .NoGradient()  // for imported inference graphs; the tape's broadcasting ops differentiate
    .Doc(R"doc(
Broadcasts x against a shape given as a tensor (ONNX Expand).

Like x * numpy.ones(shape) (two-way numpy broadcasting: a dim of 1 in shape
keeps x's dim), as a new contiguous tensor.

x: The tensor to broadcast.
shape: The shape to broadcast with, a 1-D int64 tensor of non-negative dims.
y: x broadcast to broadcast_shapes(x.shape, shape).
)doc");

REGISTER_OP("StridedSlice")
    .Input("x: T")
    .Input("starts: int64")
    .Input("ends: int64")
    .Input("axes: int64")
    .Input("steps: int64")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(StridedSliceShape)
    .NoGradient()  // for imported inference graphs; Slice differentiates
    .Doc(R"doc(
Slices x with per-axis starts, ends and steps given as tensors (ONNX Slice).

Like x[starts[i]:ends[i]:steps[i]] on axis axes[i] in numpy: negative
starts and ends count from the end, out-of-range bounds are clamped, steps
may be negative (walking backwards) but not 0. Axes not listed are kept
whole.

x: The tensor to slice.
starts: The first index on each sliced axis (1-D int64).
ends: One past the last index on each sliced axis (1-D int64).
axes: The sliced axes, each at most once; negative values count from the end.
steps: The stride on each sliced axis, not 0.
y: A new tensor holding the slice.
)doc");

REGISTER_OP("Tile")
    .Input("x: T")
    .Input("repeats: int64")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(TileShape)
    .NoGradient()  // for imported inference graphs
    .Doc(R"doc(
Repeats x along each axis (ONNX Tile), with the counts given as a tensor.

Like numpy.tile(x, repeats) with one entry of repeats per axis of x.

x: The tensor to repeat.
repeats: How often to repeat each axis (1-D int64, non-negative, length rank(x)).
y: A tensor of shape [x.shape[i] * repeats[i]].
)doc");

REGISTER_OP("ConstantOfShape")
    .Input("shape: int64")
    .Input("value: T")
    .Output("y: T")
    .Attr(kAllTypes)
    .SetShapeFn(FullShape)
    .NoGradient()  // for imported inference graphs; Fill differentiates
    .Doc(R"doc(
A tensor of a shape given as a tensor, every element set to one value (ONNX ConstantOfShape).

Like numpy.full(shape, value).

shape: The shape of the result (1-D int64, non-negative dims).
value: The fill value; must hold exactly one element.
y: A tensor of that shape filled with value.
)doc");

REGISTER_OP("ArangeOf")
    .Input("start: T")
    .Input("limit: T")
    .Input("delta: T")
    .Output("y: T")
    .Attr("T: {int32, int64, float32, float64}")
    .SetShapeFn(ArangeShape)
    .NoGradient()  // its values depend on no tensor's values smoothly
    .Doc(R"doc(
Evenly spaced values from start towards limit by delta (ONNX Range).

Like numpy.arange(start, limit, delta): max(ceil((limit - start) / delta), 0)
elements, element i being start + i * delta.

start: The first value (one element).
limit: The bound, not included (one element).
delta: The step, not 0 (one element).
y: A 1-D tensor of the values.
)doc");

}  // namespace opforge
