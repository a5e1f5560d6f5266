// The math group: element-wise arithmetic, unary math, comparisons, logical
// ops and Select. Binary ops broadcast like numpy; no implicit type promotion.
#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {

// ---- arithmetic, numpy broadcasting

REGISTER_OP("Add")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .Gradient("x = dz")
    .Gradient("y = dz")
    .Doc(R"doc(
Returns x + y element-wise, with numpy broadcasting.

Equivalent to `np.add(x, y)` for operands of one dtype. Integer sums wrap
around on overflow, as in numpy.

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: The sum, with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("Sub")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .Gradient("x = dz")
    .Gradient("y = Neg(dz)")
    .Doc(R"doc(
Returns x - y element-wise, with numpy broadcasting.

Equivalent to `np.subtract(x, y)` for operands of one dtype. Integer
differences wrap around on overflow, as in numpy.

x: The minuend.
y: The subtrahend, of the same dtype as `x`; broadcast against `x`.
z: The difference, with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("Mul")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .Gradient("x = Mul(dz, y)")
    .Gradient("y = Mul(dz, x)")
    .Doc(R"doc(
Returns x * y element-wise, with numpy broadcasting.

Equivalent to `np.multiply(x, y)` for operands of one dtype. Integer
products wrap around on overflow, as in numpy.

x: The first factor.
y: The second factor, of the same dtype as `x`; broadcast against `x`.
z: The product, with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("Div")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .Gradient("x = Div(dz, y)")
    .Gradient("y = Neg(Div(Mul(dz, z), y))")
    .Doc(R"doc(
Returns x / y element-wise (true division), with numpy broadcasting.

Equivalent to `np.true_divide(x, y)` for floating operands of one dtype.
Division by zero gives inf or NaN as IEEE 754 says, without a warning.
Integer tensors are not supported: cast them to a floating dtype first.

x: The dividend, float32 or float64.
y: The divisor, of the same dtype as `x`; broadcast against `x`.
z: The quotient, with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("Maximum")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .Gradient("x = Select(Greater(x, y), dz, Select(Equal(x, y), Mul(dz, 0.5), ZerosLike(dz)))")
    .Gradient("y = Select(Less(x, y), dz, Select(Equal(x, y), Mul(dz, 0.5), ZerosLike(dz)))")
    .Doc(R"doc(
Returns the element-wise maximum of x and y, with numpy broadcasting.

Equivalent to `np.maximum(x, y)`: where either operand is NaN the result is
NaN (use a comparison and `select` to ignore NaNs instead).

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: The larger of each pair, with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("Minimum")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .Gradient("x = Select(Less(x, y), dz, Select(Equal(x, y), Mul(dz, 0.5), ZerosLike(dz)))")
    .Gradient("y = Select(Greater(x, y), dz, Select(Equal(x, y), Mul(dz, 0.5), ZerosLike(dz)))")
    .Doc(R"doc(
Returns the element-wise minimum of x and y, with numpy broadcasting.

Equivalent to `np.minimum(x, y)`: where either operand is NaN the result is
NaN (use a comparison and `select` to ignore NaNs instead).

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: The smaller of each pair, with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("Pow")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .Gradient("x = Mul(dz, Mul(y, Pow(x, Sub(y, 1))))")
    .Gradient("y = Mul(dz, Mul(z, Select(Greater(x, 0), Log(x), ZerosLike(x))))")
    .Doc(R"doc(
Returns x raised to the power y element-wise, with numpy broadcasting.

Equivalent to `np.power(x, y)` for operands of one dtype. For integer
dtypes a negative exponent is an InvalidArgumentError, as numpy raises
ValueError (cast to a floating dtype first); integer results wrap around on
overflow and 0 ** 0 is 1. Floating results follow C `pow`: a negative base
with a non-integral exponent gives NaN.

x: The base.
y: The exponent, of the same dtype as `x`; broadcast against `x`.
z: The power, with the broadcast shape of `x` and `y`.
)doc");

// ---- unary math

REGISTER_OP("Neg")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Neg(dy)")
    .Doc(R"doc(
Returns -x element-wise.

Equivalent to `np.negative(x)`. For integers the negation of the most
negative value wraps around to itself, as in numpy.

x: The input tensor.
y: The negation, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Abs")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Select(Greater(x, 0), dy, Select(Less(x, 0), Neg(dy), ZerosLike(dy)))")
    .Doc(R"doc(
Returns the absolute value of x element-wise.

Equivalent to `np.abs(x)`. For integers the absolute value of the most
negative value wraps around to itself, as in numpy; abs(NaN) is NaN.

x: The input tensor.
y: The absolute values, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Square")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Mul(dy, Mul(x, 2))")
    .Doc(R"doc(
Returns x * x element-wise.

Equivalent to `np.square(x)`. Integer squares wrap around on overflow.

x: The input tensor.
y: The squares, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Relu")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {numbertype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Select(Greater(x, 0), dy, ZerosLike(dy))")
    .Doc(R"doc(
Returns the rectified linear unit max(x, 0) element-wise.

Equivalent to `np.maximum(x, 0)`, so NaN inputs stay NaN.

x: The input tensor.
y: The rectified values, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Exp")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Mul(dy, y)")
    .Doc(R"doc(
Returns e raised to the power x element-wise.

Equivalent to `np.exp(x)`: overflows to inf and underflows to 0 without a
warning.

x: The exponent, float32 or float64.
y: The result, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Log")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Div(dy, x)")
    .Doc(R"doc(
Returns the natural logarithm of x element-wise.

Equivalent to `np.log(x)`: log(0) is -inf and the log of a negative number
is NaN, without a warning.

x: The input tensor, float32 or float64.
y: The logarithm, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Sqrt")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Div(Mul(dy, 0.5), y)")
    .Doc(R"doc(
Returns the non-negative square root of x element-wise.

Equivalent to `np.sqrt(x)`: the square root of a negative number is NaN,
without a warning.

x: The input tensor, float32 or float64.
y: The square root, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Sin")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Mul(dy, Cos(x))")
    .Doc(R"doc(
Returns the sine of x element-wise.

Equivalent to `np.sin(x)`; the angle is in radians, and sin(inf) is NaN.

x: The angle in radians, float32 or float64.
y: The sine, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Cos")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Neg(Mul(dy, Sin(x)))")
    .Doc(R"doc(
Returns the cosine of x element-wise.

Equivalent to `np.cos(x)`; the angle is in radians, and cos(inf) is NaN.

x: The angle in radians, float32 or float64.
y: The cosine, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Tanh")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Mul(dy, Sub(1, Square(y)))")
    .Doc(R"doc(
Returns the hyperbolic tangent of x element-wise.

Equivalent to `np.tanh(x)`; the result lies in [-1, 1].

x: The input tensor, float32 or float64.
y: The hyperbolic tangent, with the shape and dtype of `x`.
)doc");

REGISTER_OP("Sigmoid")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {floattype, halftype}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .Gradient("x = Mul(dy, Mul(y, Sub(1, y)))")
    .Doc(R"doc(
Returns the logistic sigmoid 1 / (1 + exp(-x)) element-wise.

Equivalent to `scipy.special.expit(x)`. Computed stably: no overflow for
large |x|, sigmoid(inf) is 1, sigmoid(-inf) is 0 and NaN stays NaN.

x: The input tensor, float32 or float64.
y: The sigmoid, in [0, 1], with the shape and dtype of `x`.
)doc");

// ---- comparisons, numpy broadcasting, bool result

REGISTER_OP("Equal")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: alltypes")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of x == y element-wise, with numpy broadcasting.

Equivalent to `np.equal(x, y)` for operands of one dtype; NaN equals
nothing, not even NaN.

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: A bool tensor with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("NotEqual")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: alltypes")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of x != y element-wise, with numpy broadcasting.

Equivalent to `np.not_equal(x, y)` for operands of one dtype; NaN is not
equal to anything, so a NaN operand gives True.

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: A bool tensor with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("Less")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: alltypes")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of x < y element-wise, with numpy broadcasting.

Equivalent to `np.less(x, y)` for operands of one dtype; any comparison
with NaN is False. For bool, False < True.

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: A bool tensor with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("LessEqual")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: alltypes")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of x <= y element-wise, with numpy broadcasting.

Equivalent to `np.less_equal(x, y)` for operands of one dtype; any
comparison with NaN is False. For bool, False < True.

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: A bool tensor with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("Greater")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: alltypes")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of x > y element-wise, with numpy broadcasting.

Equivalent to `np.greater(x, y)` for operands of one dtype; any comparison
with NaN is False. For bool, False < True.

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: A bool tensor with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("GreaterEqual")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: alltypes")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of x >= y element-wise, with numpy broadcasting.

Equivalent to `np.greater_equal(x, y)` for operands of one dtype; any
comparison with NaN is False. For bool, False < True.

x: The first operand.
y: The second operand, of the same dtype as `x`; broadcast against `x`.
z: A bool tensor with the broadcast shape of `x` and `y`.
)doc");

// ---- logical

REGISTER_OP("LogicalAnd")
    .Input("x: bool")
    .Input("y: bool")
    .Output("z: bool")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of x AND y element-wise, with numpy broadcasting.

Equivalent to `np.logical_and(x, y)` for bool operands (cast or compare
other dtypes first).

x: The first bool operand.
y: The second bool operand, broadcast against `x`.
z: A bool tensor with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("LogicalOr")
    .Input("x: bool")
    .Input("y: bool")
    .Output("z: bool")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of x OR y element-wise, with numpy broadcasting.

Equivalent to `np.logical_or(x, y)` for bool operands (cast or compare
other dtypes first).

x: The first bool operand.
y: The second bool operand, broadcast against `x`.
z: A bool tensor with the broadcast shape of `x` and `y`.
)doc");

REGISTER_OP("LogicalNot")
    .Input("x: bool")
    .Output("y: bool")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the truth value of NOT x element-wise.

Equivalent to `np.logical_not(x)` for a bool operand.

x: The bool input tensor.
y: The negation, a bool tensor with the shape of `x`.
)doc");

// ---- selection

REGISTER_OP("Select")
    .Input("condition: bool")
    .Input("x: T")
    .Input("y: T")
    .Output("output: T")
    .Attr("T: alltypes")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .Gradient("condition = None")
    .Gradient("x = Select(condition, doutput, ZerosLike(doutput))")
    .Gradient("y = Select(condition, ZerosLike(doutput), doutput)")
    .Doc(R"doc(
Picks elements from x where condition is True and from y elsewhere.

Equivalent to the three-argument `np.where(condition, x, y)`: the three
inputs broadcast together like numpy. The facade also exposes it as
`opforge.where`.

condition: A bool tensor; True selects from `x`, False from `y`.
x: The values taken where `condition` is True.
y: The values taken where `condition` is False, of the same dtype as `x`.
output: A tensor with the dtype of `x` and the broadcast shape of all three inputs.
)doc");

}  // namespace opforge
