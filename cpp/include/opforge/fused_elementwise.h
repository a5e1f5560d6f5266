// The program of the FusedElementwise op (cpp/ops/fused_elementwise_ops.cc):
// shared by the graph pass that writes it (cpp/framework/graph_fusion.cc)
// and the kernel that runs it (cpp/kernels/fused_elementwise/).
//
// A program is a flat list(int) of instructions of four ints each,
// {opcode, dst, a, b}, over numbered registers. Each register holds one value
// at the op's output shape: inputs are broadcast to it (elementwise ops
// commute with broadcasting, so a tree of them computes the same values at
// the output shape). The last instruction's dst is the result.
#pragma once

#include <cstdint>

namespace opforge {
namespace fused {

enum Opcode : int64_t {
  kInput = 0,  // dst = inputs[a]
  kConst,      // dst = constants[a] (every element)
  // dst = f(reg a)
  kNeg, kAbs, kSquare, kRelu, kExp, kLog, kSqrt, kTanh, kSigmoid, kGelu, kSin, kCos,
  // dst = reg a (op) reg b
  kAdd, kSub, kMul, kDiv, kMaximum, kMinimum,
  kPowConst,   // dst = reg a ** constants[b]
  kNumOpcodes
};

constexpr int kInstrLen = 4;
constexpr int kMaxRegisters = 64;

inline bool IsUnary(int64_t op) { return op >= kNeg && op <= kCos; }
inline bool IsBinary(int64_t op) { return op >= kAdd && op <= kMinimum; }

}  // namespace fused
}  // namespace opforge
