// Op declarations of the example library: exactly what an in-tree
// cpp/ops/<group>_ops.cc holds.
#include "opforge/opforge.h"

namespace opforge {

REGISTER_OP("ZeroOut")
    .Input("to_zero: int32")
    .Output("zeroed: int32")
    .SetShapeFn(shape_fns::Unchanged)
    .Doc(R"doc(
Keeps the first element of a tensor and zeroes the rest (TensorFlow's
custom-op example).

to_zero: The tensor to zero out.
zeroed: A tensor of the same shape: the first element of `to_zero`, then zeros.
)doc");

REGISTER_OP("SoftShrink")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64}")
    .Attr("threshold: float = 0.5")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")  // opforge.dask: m.dask.soft_shrink runs per block
    // dy where |x| > threshold, else 0: built-in ops compose the gradient.
    .Gradient("x = Select(Greater(Abs(x), threshold), dy, ZerosLike(dy))")
    .Doc(R"doc(
Shrinks x towards zero by `threshold`, element-wise: x - threshold above
threshold, x + threshold below -threshold, 0 in between.

x: The input.
y: The shrunk values, with the shape and dtype of `x`.
threshold: How far to shrink; values within it become 0.
)doc");

}  // namespace opforge
