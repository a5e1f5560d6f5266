// Kernels of the special group (cpp/ops/special_ops.cc): Erf, Floor, Ceil,
// Round, Sign, IsNan, IsInf. Each is a functor run by elementwise::UnaryOp,
// whose contiguous loop the compiler vectorizes (floor/ceil/nearbyint map to
// one rounding instruction; erf stays a libm call, costed as transcendental).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../elementwise.h"
#include "opforge/kernel.h"

namespace opforge {
namespace {

using elementwise::kCheapCost;
using elementwise::kTranscendentalCost;
using elementwise::UnaryOp;

template <typename T>
struct ErfF {
  T operator()(T x) const { return std::erf(x); }
};
template <typename T>
struct FloorF {
  T operator()(T x) const { return std::floor(x); }
};
template <typename T>
struct CeilF {
  T operator()(T x) const { return std::ceil(x); }
};
// nearbyint rounds in the current mode, round-half-to-even by default (as
// numpy and ONNX); std::round would round halves away from zero.
template <typename T>
struct RoundF {
  T operator()(T x) const { return std::nearbyint(x); }
};
// np.sign: 0 for 0 (and -0), NaN for NaN.
template <typename T>
struct SignF {
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (x != x) return x;  // NOLINT(misc-redundant-expression)
    }
    return static_cast<T>((x > T(0)) - (x < T(0)));
  }
};
template <typename T>
struct IsNanF {
  bool operator()(T x) const { return x != x; }  // NOLINT(misc-redundant-expression)
};
template <typename T>
struct IsInfF {
  bool operator()(T x) const { return std::isinf(x); }
};

template <template <typename> class F, typename T>
Status CheapKernel(OpKernelContext* ctx) {
  return UnaryOp<T>(ctx, F<T>(), kCheapCost);
}
template <template <typename> class F, typename T>
Status PredicateKernel(OpKernelContext* ctx) {
  return UnaryOp<T, bool>(ctx, F<T>(), kCheapCost);
}
template <typename T>
Status ErfKernel(OpKernelContext* ctx) {
  return UnaryOp<T>(ctx, ErfF<T>(), kTranscendentalCost);
}

}  // namespace

REGISTER_KERNEL("Erf", kCPU, DType::kFloat32, ErfKernel<float>);
REGISTER_KERNEL("Erf", kCPU, DType::kFloat64, ErfKernel<double>);
REGISTER_KERNEL("Floor", kCPU, DType::kFloat32, (CheapKernel<FloorF, float>));
REGISTER_KERNEL("Floor", kCPU, DType::kFloat64, (CheapKernel<FloorF, double>));
REGISTER_KERNEL("Ceil", kCPU, DType::kFloat32, (CheapKernel<CeilF, float>));
REGISTER_KERNEL("Ceil", kCPU, DType::kFloat64, (CheapKernel<CeilF, double>));
REGISTER_KERNEL("Round", kCPU, DType::kFloat32, (CheapKernel<RoundF, float>));
REGISTER_KERNEL("Round", kCPU, DType::kFloat64, (CheapKernel<RoundF, double>));
REGISTER_KERNEL("Sign", kCPU, DType::kFloat32, (CheapKernel<SignF, float>));
REGISTER_KERNEL("Sign", kCPU, DType::kFloat64, (CheapKernel<SignF, double>));
REGISTER_KERNEL("Sign", kCPU, DType::kInt32, (CheapKernel<SignF, int32_t>));
REGISTER_KERNEL("Sign", kCPU, DType::kInt64, (CheapKernel<SignF, int64_t>));
REGISTER_KERNEL("IsNan", kCPU, DType::kFloat32, (PredicateKernel<IsNanF, float>));
REGISTER_KERNEL("IsNan", kCPU, DType::kFloat64, (PredicateKernel<IsNanF, double>));
REGISTER_KERNEL("IsInf", kCPU, DType::kFloat32, (PredicateKernel<IsInfF, float>));
REGISTER_KERNEL("IsInf", kCPU, DType::kFloat64, (PredicateKernel<IsInfF, double>));


}  // namespace opforge
