// FusedElementwise: a tree of elementwise float ops run as one loop over the
// data. The graph fusion pass (cpp/framework/graph_fusion.cc) makes these
// nodes when a graph is planned; the program format is
// opforge/fused_elementwise.h.
#include <string>
#include <vector>

#include "opforge/fused_elementwise.h"
#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

// Every register is written before it is read, operands name real inputs and
// constants, and the program ends in a computed value.
Status CheckProgram(const std::vector<int64_t>& prog, int num_inputs, int num_constants) {
  using namespace fused;  // NOLINT(build/namespaces)
  if (prog.empty() || prog.size() % kInstrLen != 0) {
    return errors::InvalidArgument("attr 'program' must hold instructions of ", kInstrLen,
                                   " ints (at least one), got ", prog.size(), " ints");
  }
  std::vector<char> defined(kMaxRegisters, 0);
  auto reg = [&](int64_t r, size_t at, bool read) -> Status {
    if (r < 0 || r >= kMaxRegisters || (read && !defined[r])) {
      return errors::InvalidArgument("attr 'program': instruction ", at / kInstrLen, " names register ", r,
                                     read ? ", which holds no value yet" : ", out of range");
    }
    return Status::OK();
  };
  for (size_t i = 0; i < prog.size(); i += kInstrLen) {
    const int64_t op = prog[i], dst = prog[i + 1], a = prog[i + 2], b = prog[i + 3];
    if (op < 0 || op >= kNumOpcodes) {
      return errors::InvalidArgument("attr 'program': instruction ", i / kInstrLen, " has unknown opcode ", op);
    }
    if (op == kInput && (a < 0 || a >= num_inputs)) {
      return errors::InvalidArgument("attr 'program': instruction ", i / kInstrLen, " reads input ", a, " of ",
                                     num_inputs);
    }
    if ((op == kConst && (a < 0 || a >= num_constants)) || (op == kPowConst && (b < 0 || b >= num_constants))) {
      return errors::InvalidArgument("attr 'program': instruction ", i / kInstrLen,
                                     " reads a constant out of attr 'constants' (", num_constants, " values)");
    }
    if (IsUnary(op) || IsBinary(op) || op == kPowConst) OF_RETURN_IF_ERROR(reg(a, i, true));
    if (IsBinary(op)) OF_RETURN_IF_ERROR(reg(b, i, true));
    OF_RETURN_IF_ERROR(reg(dst, i, false));
    defined[dst] = 1;
  }
  if (prog[prog.size() - kInstrLen] == kInput || prog[prog.size() - kInstrLen] == kConst) {
    return errors::InvalidArgument("attr 'program' must end in an operation, not a load");
  }
  return Status::OK();
}

Status FusedElementwiseShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckProgram(ctx->attr_ints("program"), ctx->num_inputs(),
                                  static_cast<int>(ctx->attr("constants").list_f.size())));
  return shape_fns::BroadcastInputs(ctx);
}

}  // namespace

REGISTER_OP("FusedElementwise")
    .Input("inputs: N * T")
    .Attr("N: int >= 1")
    .Attr("program: list(int)")
    .Attr("constants: list(float) = []")
    .Output("y: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(FusedElementwiseShape)
    .NoGradient()  // made by the graph fusion pass when a graph is planned, after gradients are built
    .Doc(R"doc(
Runs a tree of elementwise ops as one loop over the data.

The graph fusion pass makes these nodes from chains such as GELU's tanh form
or x * sigmoid(x) when a graph is planned (OPFORGE_GRAPH_FUSION=0 turns it
off); calling it directly is for tests. `program` is a list of instructions
of four ints {opcode, dst, a, b} over registers (opforge/fused_elementwise.h):
load input a, load constant a, a unary op of register a, a binary op of
registers a and b, or register a to the power constants[b]. Every register
holds a value at the output shape; results equal those of the separate ops.

inputs: The tensors the program reads, broadcast against each other.
program: The instructions, four ints each; the last one's register is the result.
constants: The scalar constants the program reads.
y: The result, with the broadcast shape of the inputs.
)doc");

}  // namespace opforge
