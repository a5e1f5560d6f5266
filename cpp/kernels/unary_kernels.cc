// Kernels of the math group's unary ops: Neg, Abs, Square, Relu (all
// numeric types) and Exp, Log, Sqrt, Sin, Cos, Tanh, Sigmoid (floats).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "elementwise.h"
#include "opforge/kernel.h"
#include "vector_math.h"

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
struct SinF {
  T operator()(T x) const { return std::sin(x); }
};
template <typename T>
struct CosF {
  T operator()(T x) const { return std::cos(x); }
};

template <template <typename> class F, typename T>
Status CheapKernel(OpKernelContext* ctx) {
  return UnaryOp<T>(ctx, F<T>(), kCheapCost);
}
template <template <typename> class F, typename T>
Status TranscendentalKernel(OpKernelContext* ctx) {
  return UnaryOp<T>(ctx, F<T>(), kTranscendentalCost);
}

// Exp, Log, Sqrt, Tanh and Sigmoid run the dispatched SIMD loops of
// vector_math.h (polynomials, not libm: see simd_math.h for their accuracy).
template <vmath::UnaryFn kFn, typename T>
Status VectorKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64_t n = y->NumElements();
  const T* in = x.data<T>();
  T* out = y->data<T>();
  const bool stream = n * static_cast<int64_t>(sizeof(T)) >= vmath::StreamThresholdBytes();
  const int64_t cost = kFn == vmath::UnaryFn::kSqrt ? elementwise::kDivCost : kTranscendentalCost;
  ParallelFor(n, cost, [&](int64_t b, int64_t e) { vmath::Unary(kFn, in + b, out + b, e - b, stream); });
  return Status::OK();
}

}  // namespace

#define OF_REGISTER_VECTOR(op, fn)                                                         \
  REGISTER_KERNEL(op, kCPU, DType::kFloat32, (VectorKernel<vmath::UnaryFn::fn, float>));  \
  REGISTER_KERNEL(op, kCPU, DType::kFloat64, (VectorKernel<vmath::UnaryFn::fn, double>))

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

OF_REGISTER_VECTOR("Exp", kExp);
OF_REGISTER_VECTOR("Log", kLog);
OF_REGISTER_VECTOR("Sqrt", kSqrt);
OF_REGISTER_VECTOR("Tanh", kTanh);
OF_REGISTER_VECTOR("Sigmoid", kSigmoid);
OF_REGISTER_FLOAT("Sin", SinF);
OF_REGISTER_FLOAT("Cos", CosF);

#undef OF_REGISTER_NUMERIC
#undef OF_REGISTER_FLOAT
#undef OF_REGISTER_VECTOR

}  // namespace opforge
