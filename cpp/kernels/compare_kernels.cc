// Kernels of the math group's comparison, logical and selection ops:
// Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual (-> bool),
// LogicalAnd, LogicalOr, LogicalNot, and Select (np.where).
#include <cstdint>
#include <type_traits>

#include "common/each_dtype.h"
#include "elementwise.h"
#include "opforge/kernel.h"

namespace opforge {
namespace {

using elementwise::BinaryOp;

// NaN compares unequal to everything (so NotEqual is true), like numpy.
template <typename T>
struct EqualF {
  bool operator()(T a, T b) const { return a == b; }
};
template <typename T>
struct NotEqualF {
  bool operator()(T a, T b) const { return a != b; }
};
template <typename T>
struct LessF {
  bool operator()(T a, T b) const { return a < b; }
};
template <typename T>
struct LessEqualF {
  bool operator()(T a, T b) const { return a <= b; }
};
template <typename T>
struct GreaterF {
  bool operator()(T a, T b) const { return a > b; }
};
template <typename T>
struct GreaterEqualF {
  bool operator()(T a, T b) const { return a >= b; }
};

template <template <typename> class F, typename T>
Status CompareKernel(OpKernelContext* ctx) {
  return BinaryOp<T, bool>(ctx, F<T>());
}

Status LogicalAndKernel(OpKernelContext* ctx) {
  return BinaryOp<bool>(ctx, [](bool a, bool b) { return a && b; });
}
Status LogicalOrKernel(OpKernelContext* ctx) {
  return BinaryOp<bool>(ctx, [](bool a, bool b) { return a || b; });
}
Status LogicalNotKernel(OpKernelContext* ctx) {
  return elementwise::UnaryOp<bool>(ctx, [](bool a) { return !a; });
}

// Select copies bits, so one loop per element size serves every dtype (4
// instantiations of the ternary loop's broadcast variants instead of 13). The
// condition is read as bytes and turned into a bit mask: GCC does not
// vectorize `c ? x : y` over a bool array when T is wider than a byte, and a
// random condition then costs a branch misprediction per element.
template <typename U>
struct SelectBitsF {
  U operator()(uint8_t c, U x, U y) const {
    const U mask = static_cast<U>(U(0) - static_cast<U>(c != 0));
    return static_cast<U>((x & mask) | (y & static_cast<U>(~mask)));
  }
};

template <typename U>
Status SelectBits(OpKernelContext* ctx) {
  const Tensor& c = ctx->input(0);
  const Tensor& x = ctx->input(1);
  const Tensor& y = ctx->input(2);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  static_assert(sizeof(bool) == 1, "bool tensors hold one byte per element");
  elementwise::TernaryLoop(c.data<uint8_t>(), c.shape(), x.data<U>(), x.shape(), y.data<U>(),
                           y.shape(), out->data<U>(), out->shape(), SelectBitsF<U>());
  return Status::OK();
}

template <typename T>
Status SelectKernel(OpKernelContext* ctx) {
  using U = std::conditional_t<sizeof(T) == 1, uint8_t,
            std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(U) == sizeof(T), "every dtype is 1, 2, 4 or 8 bytes");
  return SelectBits<U>(ctx);
}

template <typename T> Status EqualK(OpKernelContext* c) { return CompareKernel<EqualF, T>(c); }
template <typename T> Status NotEqualK(OpKernelContext* c) { return CompareKernel<NotEqualF, T>(c); }
template <typename T> Status LessK(OpKernelContext* c) { return CompareKernel<LessF, T>(c); }
template <typename T> Status LessEqualK(OpKernelContext* c) { return CompareKernel<LessEqualF, T>(c); }
template <typename T> Status GreaterK(OpKernelContext* c) { return CompareKernel<GreaterF, T>(c); }
template <typename T> Status GreaterEqualK(OpKernelContext* c) { return CompareKernel<GreaterEqualF, T>(c); }
}  // namespace

OF_REGISTER_EACH_DTYPE("Equal", EqualK);
OF_REGISTER_EACH_DTYPE("NotEqual", NotEqualK);
OF_REGISTER_EACH_DTYPE("Less", LessK);
OF_REGISTER_EACH_DTYPE("LessEqual", LessEqualK);
OF_REGISTER_EACH_DTYPE("Greater", GreaterK);
OF_REGISTER_EACH_DTYPE("GreaterEqual", GreaterEqualK);

REGISTER_KERNEL("LogicalAnd", kCPU, DType::kBool, LogicalAndKernel);
REGISTER_KERNEL("LogicalOr", kCPU, DType::kBool, LogicalOrKernel);
REGISTER_KERNEL("LogicalNot", kCPU, DType::kBool, LogicalNotKernel);

OF_REGISTER_EACH_DTYPE("Select", SelectKernel);

}  // namespace opforge
