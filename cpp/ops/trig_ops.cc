// The trig group: inverse trigonometric and (inverse) hyperbolic functions
// beyond math_ops' Sin, Cos, Tanh. Outside the domain (asin of 2, acosh of
// 0, ...) the result is NaN, as in numpy. Kernels in
// cpp/kernels/trig_kernels.cc (libm).
#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {

#define OF_TRIG_OP(name, np_name, grad, domain)                        \
  REGISTER_OP(name)                                                    \
      .Input("x: T")                                                   \
      .Output("y: T")                                                  \
      .Attr("T: floattype")                                            \
      .SetShapeFn(shape_fns::Unchanged)                                \
      .Category("elementwise")                                         \
      .Gradient(grad)                                                  \
      .Doc("Returns " np_name "(x) element-wise.\n"                    \
           "\n"                                                        \
           "Equivalent to `np." np_name "(x)`; " domain "\n"           \
           "\n"                                                        \
           "x: The input tensor.\n"                                    \
           "y: " np_name "(x), with the shape and dtype of `x`.\n")

OF_TRIG_OP("Asin", "arcsin", "x = Div(dy, Sqrt(Sub(1, Square(x))))", "NaN outside [-1, 1].");
OF_TRIG_OP("Acos", "arccos", "x = Neg(Div(dy, Sqrt(Sub(1, Square(x)))))", "NaN outside [-1, 1].");
OF_TRIG_OP("Atan", "arctan", "x = Div(dy, Add(1, Square(x)))", "the result lies in [-pi/2, pi/2].");
OF_TRIG_OP("Asinh", "arcsinh", "x = Div(dy, Sqrt(Add(Square(x), 1)))", "defined everywhere.");
OF_TRIG_OP("Acosh", "arccosh", "x = Div(dy, Sqrt(Sub(Square(x), 1)))", "NaN below 1.");
OF_TRIG_OP("Atanh", "arctanh", "x = Div(dy, Sub(1, Square(x)))", "NaN outside [-1, 1], infinite at +-1.");

#undef OF_TRIG_OP

}  // namespace opforge
