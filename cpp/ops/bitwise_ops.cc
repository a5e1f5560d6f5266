// The bitwise group: And, Or, Xor, Not and shifts of integer tensors, and
// BitCast (reinterpreting the bytes of one dtype as another of the same
// width). Integer results only, so none is differentiable. Kernels in
// cpp/kernels/bitwise_kernels.cc.
#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {

#define OF_BITWISE_BINARY(name, what)                                                    \
  REGISTER_OP(name)                                                                      \
      .Input("x: T")                                                                     \
      .Input("y: T")                                                                     \
      .Output("z: T")                                                                    \
      .Attr("T: {int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool}")       \
      .SetShapeFn(shape_fns::BroadcastInputs)                                            \
      .Category("elementwise")                                                           \
      .NoGradient()                                            \
      .Doc("Returns the bitwise " what " of x and y element-wise, with numpy broadcasting.\n" \
           "\n"                                                                          \
           "Equivalent to `np.bitwise_" what "(x, y)`; the ONNX operator Bitwise" what ".\n" \
           "\n"                                                                          \
           "x: An integer (or bool) tensor.\n"                                           \
           "y: A tensor of x's dtype, broadcast against x.\n"                            \
           "z: The result, in x's dtype, with the broadcast shape.\n")

OF_BITWISE_BINARY("BitwiseAnd", "and");
OF_BITWISE_BINARY("BitwiseOr", "or");
OF_BITWISE_BINARY("BitwiseXor", "xor");

#undef OF_BITWISE_BINARY

REGISTER_OP("BitwiseNot")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool}")
    .SetShapeFn(shape_fns::Unchanged)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Returns the bitwise complement of x element-wise.

Equivalent to `np.invert(x)` (logical not for bool); the ONNX operator
BitwiseNot.

x: An integer (or bool) tensor.
y: ~x, with the shape and dtype of x.
)doc");

REGISTER_OP("BitShift")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {int8, uint8, int16, uint16, int32, uint32, int64, uint64}")
    .Attr("direction: string")
    .SetShapeFn(shape_fns::BroadcastInputs)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Shifts the bits of x by y places, element-wise with numpy broadcasting.

direction "LEFT" is `x << y`, "RIGHT" is `x >> y` (arithmetic, sign-extending
for signed dtypes), as the ONNX operator BitShift (opset 28) defines it: a
shift count that is negative or not less than the dtype's bit width leaves
only the sign fill: -1 for a right shift of a negative x, 0 otherwise. Bits
shifted past the top are dropped.

x: The integers to shift.
y: The shift counts, in x's dtype, broadcast against x.
direction: "LEFT" or "RIGHT".
z: The shifted values, in x's dtype, with the broadcast shape.
)doc");

namespace {

Status BitCastShape(InferenceContext* ctx) {
  const DType from = ctx->input_dtype(0), to = ctx->attr_type("dtype");
  if (DTypeSize(from) != DTypeSize(to)) {
    return errors::InvalidArgument("BitCast: argument 'x' has dtype ", DTypeName(from), " (",
                                   DTypeSize(from), " bytes), which is not as wide as attr 'dtype' ",
                                   DTypeName(to), " (", DTypeSize(to), " bytes)");
  }
  ctx->set_output_shape(0, ctx->input_shape(0));
  return Status::OK();
}

}  // namespace

REGISTER_OP("BitCast")
    .Input("x: SrcT")
    .Attr("dtype: type")
    .Output("y: dtype")
    .Attr("SrcT: alltypes")
    .SetShapeFn(BitCastShape)
    .Category("elementwise")
    .NoGradient()
    .Doc(R"doc(
Reinterprets the bytes of x as another dtype of the same width.

Equivalent to `x.view(dtype)` in numpy for dtypes of equal size; the ONNX
operator BitCast. The shape is kept; a dtype of another width is an error.

x: The tensor whose bytes are reinterpreted.
dtype: The dtype of the result; as wide as x's.
y: x's bytes as dtype, with x's shape.
)doc");

}  // namespace opforge
