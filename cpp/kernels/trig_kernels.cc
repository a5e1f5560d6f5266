// Kernels of the trig group (cpp/ops/trig_ops.cc): libm's inverse
// trigonometric and hyperbolic functions, one functor each, run by
// elementwise::UnaryOp (costed as transcendental, so large inputs split
// over the intra-op pool).
#include <cmath>

#include "elementwise.h"
#include "opforge/kernel.h"

namespace opforge {
namespace {

#define OF_TRIG_FUNCTOR(F, fn)                         \
  template <typename T>                                \
  struct F {                                           \
    T operator()(T x) const { return std::fn(x); }     \
  };
OF_TRIG_FUNCTOR(AsinF, asin)
OF_TRIG_FUNCTOR(AcosF, acos)
OF_TRIG_FUNCTOR(AtanF, atan)
OF_TRIG_FUNCTOR(AsinhF, asinh)
OF_TRIG_FUNCTOR(AcoshF, acosh)
OF_TRIG_FUNCTOR(AtanhF, atanh)
#undef OF_TRIG_FUNCTOR

template <template <typename> class F, typename T>
Status TrigKernel(OpKernelContext* ctx) {
  return elementwise::UnaryOp<T>(ctx, F<T>(), elementwise::kTranscendentalCost);
}

}  // namespace

#define OF_REGISTER_TRIG(op, F)                                          \
  REGISTER_KERNEL(op, kCPU, DType::kFloat32, (TrigKernel<F, float>));    \
  REGISTER_KERNEL(op, kCPU, DType::kFloat64, (TrigKernel<F, double>))
OF_REGISTER_TRIG("Asin", AsinF);
OF_REGISTER_TRIG("Acos", AcosF);
OF_REGISTER_TRIG("Atan", AtanF);
OF_REGISTER_TRIG("Asinh", AsinhF);
OF_REGISTER_TRIG("Acosh", AcoshF);
OF_REGISTER_TRIG("Atanh", AtanhF);
#undef OF_REGISTER_TRIG

}  // namespace opforge
