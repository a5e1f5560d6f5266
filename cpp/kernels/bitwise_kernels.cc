// Kernels of the bitwise group (cpp/ops/bitwise_ops.cc): And, Or, Xor, Not,
// BitShift for every integer dtype (and bool for the logic ones), and
// BitCast, a byte copy.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "elementwise.h"
#include "opforge/kernel.h"

namespace opforge {
namespace {

template <typename T>
struct AndF {
  T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
template <typename T>
struct OrF {
  T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
template <typename T>
struct XorF {
  T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
template <typename T>
struct NotF {
  T operator()(T a) const {
    if constexpr (std::is_same_v<T, bool>) {
      return !a;
    } else {
      return static_cast<T>(~a);
    }
  }
};

// Shifts go through the unsigned type, so a left shift into the sign bit is
// defined; a count outside [0, bits) leaves only the sign fill (ONNX
// BitShift, opset 28).
template <typename T>
struct ShiftLeftF {
  T operator()(T a, T n) const {
    using U = std::make_unsigned_t<T>;
    if (n < 0 || static_cast<uint64_t>(n) >= sizeof(T) * 8) return T(0);
    return static_cast<T>(static_cast<U>(static_cast<U>(a) << n));
  }
};
template <typename T>
struct ShiftRightF {
  T operator()(T a, T n) const {
    if (n < 0 || static_cast<uint64_t>(n) >= sizeof(T) * 8) return a < 0 ? T(-1) : T(0);  // NOLINT
    return static_cast<T>(a >> n);  // arithmetic for signed T (C++20 defines it)
  }
};

template <template <typename> class F, typename T>
Status BinaryKernel(OpKernelContext* ctx) {
  return elementwise::BinaryOp<T>(ctx, F<T>());
}
template <typename T>
Status NotKernel(OpKernelContext* ctx) {
  return elementwise::UnaryOp<T>(ctx, NotF<T>());
}
template <typename T>
Status BitShiftKernel(OpKernelContext* ctx) {
  const std::string& direction = ctx->attr_string("direction");
  if (direction == "LEFT") return elementwise::BinaryOp<T>(ctx, ShiftLeftF<T>());
  if (direction == "RIGHT") return elementwise::BinaryOp<T>(ctx, ShiftRightF<T>());
  return errors::InvalidArgument("BitShift: attr 'direction' must be \"LEFT\" or \"RIGHT\", got \"", direction,
                                 "\"");
}

Status BitCastKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const size_t bytes = static_cast<size_t>(x.NumElements()) * DTypeSize(x.dtype());
  if (bytes) std::memcpy(y->raw_data(), x.raw_data(), bytes);
  return Status::OK();
}

}  // namespace

#define OF_REGISTER_INTS(op, K)                                 \
  REGISTER_KERNEL(op, kCPU, DType::kInt8, K<int8_t>);           \
  REGISTER_KERNEL(op, kCPU, DType::kUInt8, K<uint8_t>);         \
  REGISTER_KERNEL(op, kCPU, DType::kInt16, K<int16_t>);         \
  REGISTER_KERNEL(op, kCPU, DType::kUInt16, K<uint16_t>);       \
  REGISTER_KERNEL(op, kCPU, DType::kInt32, K<int32_t>);         \
  REGISTER_KERNEL(op, kCPU, DType::kUInt32, K<uint32_t>);       \
  REGISTER_KERNEL(op, kCPU, DType::kInt64, K<int64_t>);         \
  REGISTER_KERNEL(op, kCPU, DType::kUInt64, K<uint64_t>)

template <typename T>
Status AndKernel(OpKernelContext* ctx) { return BinaryKernel<AndF, T>(ctx); }
template <typename T>
Status OrKernel(OpKernelContext* ctx) { return BinaryKernel<OrF, T>(ctx); }
template <typename T>
Status XorKernel(OpKernelContext* ctx) { return BinaryKernel<XorF, T>(ctx); }

OF_REGISTER_INTS("BitwiseAnd", AndKernel);
OF_REGISTER_INTS("BitwiseOr", OrKernel);
OF_REGISTER_INTS("BitwiseXor", XorKernel);
OF_REGISTER_INTS("BitwiseNot", NotKernel);
OF_REGISTER_INTS("BitShift", BitShiftKernel);
REGISTER_KERNEL("BitwiseAnd", kCPU, DType::kBool, AndKernel<bool>);
REGISTER_KERNEL("BitwiseOr", kCPU, DType::kBool, OrKernel<bool>);
REGISTER_KERNEL("BitwiseXor", kCPU, DType::kBool, XorKernel<bool>);
REGISTER_KERNEL("BitwiseNot", kCPU, DType::kBool, NotKernel<bool>);
#undef OF_REGISTER_INTS

// BitCast copies bytes: one kernel for every source dtype.
#define OF_REGISTER_BITCAST(e, ...) REGISTER_KERNEL("BitCast", kCPU, DType::e, BitCastKernel);
OPFORGE_DTYPES(OF_REGISTER_BITCAST)
#undef OF_REGISTER_BITCAST

}  // namespace opforge
