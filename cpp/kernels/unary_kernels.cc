// Kernels of the math group's unary ops: Neg, Abs, Square, Relu (all
// numeric types) and Exp, Log, Sqrt, Sin, Cos, Tanh, Sigmoid (floats).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "elementwise.h"
#include "opforge/kernel.h"

namespace opforge {
namespace {

using elementwise::kCheapCost;
using elementwise::kTranscendentalCost;
using elementwise::UnaryOp;

template <typename T>
struct NegF {
  T operator()(T x) const { return elementwise::WrapNeg(x); }
};
template <typename T>
struct AbsF {
  // abs(INT_MIN) wraps to INT_MIN, like numpy.
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? elementwise::WrapNeg(x) : x;
    } else {
      return std::fabs(x);
    }
  }
};
template <typename T>
struct SquareF {
  T operator()(T x) const { return elementwise::WrapMul(x, x); }
};
// Like np.maximum(x, 0): NaN stays NaN.
template <typename T>
struct ReluF {
  T operator()(T x) const { return (x >= T(0) || x != x) ? x : T(0); }  // NOLINT(misc-redundant-expression)
};

template <typename T>
struct ExpF {
  T operator()(T x) const { return std::exp(x); }
};
template <typename T>
struct LogF {
  T operator()(T x) const { return std::log(x); }
};
template <typename T>
struct SqrtF {
  T operator()(T x) const { return std::sqrt(x); }
};
template <typename T>
struct SinF {
  T operator()(T x) const { return std::sin(x); }
};
template <typename T>
struct CosF {
  T operator()(T x) const { return std::cos(x); }
};
template <typename T>
struct TanhF {
  T operator()(T x) const { return std::tanh(x); }
};
// exp of a non-positive number only, so nothing overflows for large |x|.
template <typename T>
struct SigmoidF {
  T operator()(T x) const {
    const T e = std::exp(-std::fabs(x));
    const T r = T(1) / (T(1) + e);
    return x >= T(0) ? r : e * r;  // NaN falls through to e * r = NaN
  }
};

template <template <typename> class F, typename T>
Status CheapKernel(OpKernelContext* ctx) {
  return UnaryOp<T>(ctx, F<T>(), kCheapCost);
}
template <template <typename> class F, typename T>
Status TranscendentalKernel(OpKernelContext* ctx) {
  return UnaryOp<T>(ctx, F<T>(), kTranscendentalCost);
}

}  // namespace

#define OF_REGISTER_NUMERIC(op, F)                                         \
  REGISTER_KERNEL(op, kCPU, DType::kFloat32, CheapKernel<F, float>);       \
  REGISTER_KERNEL(op, kCPU, DType::kFloat64, CheapKernel<F, double>);      \
  REGISTER_KERNEL(op, kCPU, DType::kInt32, CheapKernel<F, int32_t>);       \
  REGISTER_KERNEL(op, kCPU, DType::kInt64, CheapKernel<F, int64_t>)
#define OF_REGISTER_FLOAT(op, F)                                               \
  REGISTER_KERNEL(op, kCPU, DType::kFloat32, TranscendentalKernel<F, float>);  \
  REGISTER_KERNEL(op, kCPU, DType::kFloat64, TranscendentalKernel<F, double>)

OF_REGISTER_NUMERIC("Neg", NegF);
OF_REGISTER_NUMERIC("Abs", AbsF);
OF_REGISTER_NUMERIC("Square", SquareF);
OF_REGISTER_NUMERIC("Relu", ReluF);

OF_REGISTER_FLOAT("Exp", ExpF);
OF_REGISTER_FLOAT("Log", LogF);
OF_REGISTER_FLOAT("Sqrt", SqrtF);
OF_REGISTER_FLOAT("Sin", SinF);
OF_REGISTER_FLOAT("Cos", CosF);
OF_REGISTER_FLOAT("Tanh", TanhF);
OF_REGISTER_FLOAT("Sigmoid", SigmoidF);

#undef OF_REGISTER_NUMERIC
#undef OF_REGISTER_FLOAT

}  // namespace opforge
