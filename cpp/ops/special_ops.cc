// The special group: unary math beyond math_ops (the error function,
// rounding, sign) and float classification (IsNan, IsInf). Kernels live in
// cpp/kernels/special/.
#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {

REGISTER_OP("Erf")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Mul(dy, Mul(Exp(Neg(Square(x))), 1.1283791670955126))")
    .Doc(R"doc(
Returns the Gauss error function erf(x) element-wise.

Equivalent to `scipy.special.erf(x)` (C's `erf`); the ONNX operator Erf.

x: The input tensor.
y: erf(x), in [-1, 1], with the shape and dtype of `x`.
)doc");

REGISTER_OP("Floor")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = ZerosLike(dy)")
    .Doc(R"doc(
Returns the largest integer not greater than x, element-wise.

Equivalent to `np.floor(x)`; NaN and infinities pass through. The
gradient is zero (the function is flat between integers).

x: The input tensor.
y: The floors, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Ceil")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = ZerosLike(dy)")
    .Doc(R"doc(
Returns the smallest integer not less than x, element-wise.

Equivalent to `np.ceil(x)`; NaN and infinities pass through. The
gradient is zero (the function is flat between integers).

x: The input tensor.
y: The ceilings, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Round")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = ZerosLike(dy)")
    .Doc(R"doc(
Rounds x to the nearest integer element-wise, halves to even.

Equivalent to `np.round(x)` (2.5 -> 2, -1.5 -> -2), as ONNX's Round. The
gradient is zero (the function is flat between half-integers).

x: The input tensor.
y: The rounded values, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Sign")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = ZerosLike(dy)")
    .Doc(R"doc(
Returns -1, 0 or 1 by the sign of x, element-wise.

Equivalent to `np.sign(x)`: sign(0) is 0 and sign(NaN) is NaN. The
gradient is zero.

x: The input tensor.
y: The signs, with the shape and dtype of `x`.
)doc");

REGISTER_OP("IsNan")
    .Input("x: T")
    .Output("y: bool")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .NoGradient()  // a bool output: nothing to differentiate
    .Doc(R"doc(
Returns whether each element of x is NaN.

Equivalent to `np.isnan(x)`.

x: The input tensor.
y: A bool tensor with the shape of `x`.
)doc");

REGISTER_OP("IsInf")
    .Input("x: T")
    .Output("y: bool")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .NoGradient()  // a bool output: nothing to differentiate
    .Doc(R"doc(
Returns whether each element of x is +inf or -inf.

Equivalent to `np.isinf(x)`.

x: The input tensor.
y: A bool tensor with the shape of `x`.
)doc");

}  // namespace opforge
