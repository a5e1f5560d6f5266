// Kernels of the math group's comparison, logical and selection ops:
// Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual (-> bool),
// LogicalAnd, LogicalOr, LogicalNot, and Select (np.where).
#include <cstdint>
#include <cstring>
#include <type_traits>

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

// The condition is read as bytes and turned into a bit mask: GCC does not
// vectorize `c ? x : y` over a bool array when T is wider than a byte, and
// a random condition then costs a branch misprediction per element.
template <typename T>
struct SelectF {
  T operator()(uint8_t c, T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) {
      return c != 0 ? x : y;
    } else {
      using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
      U xb, yb;
      std::memcpy(&xb, &x, sizeof(T));
      std::memcpy(&yb, &y, sizeof(T));
      const U mask = U(0) - static_cast<U>(c != 0);
      const U r = (xb & mask) | (yb & ~mask);
      T out;
      std::memcpy(&out, &r, sizeof(T));
      return out;
    }
  }
};

template <typename T>
Status SelectKernel(OpKernelContext* ctx) {
  const Tensor& c = ctx->input(0);
  const Tensor& x = ctx->input(1);
  const Tensor& y = ctx->input(2);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  static_assert(sizeof(bool) == 1, "bool tensors hold one byte per element");
  elementwise::TernaryLoop(c.data<uint8_t>(), c.shape(), x.data<T>(), x.shape(), y.data<T>(),
                           y.shape(), out->data<T>(), out->shape(), SelectF<T>());
  return Status::OK();
}

}  // namespace

#define OF_REGISTER_COMPARE(op, F)                                           \
  REGISTER_KERNEL(op, kCPU, DType::kFloat32, CompareKernel<F, float>);       \
  REGISTER_KERNEL(op, kCPU, DType::kFloat64, CompareKernel<F, double>);      \
  REGISTER_KERNEL(op, kCPU, DType::kInt32, CompareKernel<F, int32_t>);       \
  REGISTER_KERNEL(op, kCPU, DType::kInt64, CompareKernel<F, int64_t>);       \
  REGISTER_KERNEL(op, kCPU, DType::kBool, CompareKernel<F, bool>)

OF_REGISTER_COMPARE("Equal", EqualF);
OF_REGISTER_COMPARE("NotEqual", NotEqualF);
OF_REGISTER_COMPARE("Less", LessF);
OF_REGISTER_COMPARE("LessEqual", LessEqualF);
OF_REGISTER_COMPARE("Greater", GreaterF);
OF_REGISTER_COMPARE("GreaterEqual", GreaterEqualF);
#undef OF_REGISTER_COMPARE

REGISTER_KERNEL("LogicalAnd", kCPU, DType::kBool, LogicalAndKernel);
REGISTER_KERNEL("LogicalOr", kCPU, DType::kBool, LogicalOrKernel);
REGISTER_KERNEL("LogicalNot", kCPU, DType::kBool, LogicalNotKernel);

REGISTER_KERNEL("Select", kCPU, DType::kFloat32, SelectKernel<float>);
REGISTER_KERNEL("Select", kCPU, DType::kFloat64, SelectKernel<double>);
REGISTER_KERNEL("Select", kCPU, DType::kInt32, SelectKernel<int32_t>);
REGISTER_KERNEL("Select", kCPU, DType::kInt64, SelectKernel<int64_t>);
REGISTER_KERNEL("Select", kCPU, DType::kBool, SelectKernel<bool>);

}  // namespace opforge
