// The unique group: Unique (ONNX's, over rows), whose output size depends on
// the values: it writes padded outputs and the count, and the caller keeps
// the first `count` rows. Kernel in cpp/kernels/unique_kernels.cc.
#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

Status UniqueShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  if (x.rank() != 2) {
    return errors::InvalidArgument("Unique: argument 'x' must be 2-D (rows are the elements), got ",
                                   x.DebugString());
  }
  ctx->set_output_shape(0, x);
  for (int i = 1; i <= 3; ++i) ctx->set_output_shape(i, TensorShape({x.dim(0)}));
  ctx->set_output_shape(4, TensorShape({}));
  return Status::OK();
}

}  // namespace

REGISTER_OP("Unique")
    .Input("x: T")
    .Output("y: T")
    .Output("indices: int64")
    .Output("inverse: int64")
    .Output("counts: int64")
    .Output("count: int64")
    .Attr("T: {float32, float64, int32, int64, int8, uint8, int16, uint16, uint32, uint64, bool}")
    .Attr("sorted: bool = true")
    .SetShapeFn(UniqueShape)
    .NoGradient()  // a selection whose size depends on the values
    .Doc(R"doc(
The distinct rows of x (ONNX Unique over an axis moved first and flattened).

Rows compare element by element; NaN equals NaN and sorts after every
number, and -0.0 equals 0.0. With `sorted`, the distinct rows come in
lexicographic order; otherwise in the order of their first occurrence. The
first `count` rows of y, indices and counts are in use (the rest are 0, -1
and 0).

x: [n, m]: n rows of m elements.
sorted: Whether the distinct rows are sorted.
y: [n, m]: the distinct rows first (each as it first occurs in x).
indices: [n]: the index in x of each distinct row's first occurrence.
inverse: [n]: for each row of x, the position of its row in y.
counts: [n]: how often each distinct row occurs.
count: The number of distinct rows.
)doc");

}  // namespace opforge
