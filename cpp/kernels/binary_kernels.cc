// Kernels of the math group's arithmetic binary ops: Add, Sub, Mul, Div,
// Maximum, Minimum, Pow. Integer results wrap on overflow like numpy.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "elementwise.h"
#include "opforge/kernel.h"
#include "vector_math.h"

namespace opforge {
namespace {

using elementwise::BinaryOp;

template <typename T>
struct AddF {
  T operator()(T a, T b) const { return elementwise::WrapAdd(a, b); }
};
template <typename T>
struct SubF {
  T operator()(T a, T b) const { return elementwise::WrapSub(a, b); }
};
template <typename T>
struct MulF {
  T operator()(T a, T b) const { return elementwise::WrapMul(a, b); }
};
template <typename T>
struct DivF {
  T operator()(T a, T b) const { return a / b; }
};
// A NaN in either operand wins, like np.maximum / np.minimum (for integers
// the NaN tests fold away).
template <typename T>
struct MaximumF {
  T operator()(T a, T b) const { return (a >= b || a != a) ? a : b; }  // NOLINT(misc-redundant-expression)
};
template <typename T>
struct MinimumF {
  T operator()(T a, T b) const { return (a <= b || a != a) ? a : b; }  // NOLINT(misc-redundant-expression)
};

// The float arithmetic that has a dispatched SIMD loop in vector_math.h.
template <template <typename> class F>
constexpr int kVectorFn = -1;
template <> constexpr int kVectorFn<AddF> = static_cast<int>(vmath::BinaryFn::kAdd);
template <> constexpr int kVectorFn<SubF> = static_cast<int>(vmath::BinaryFn::kSub);
template <> constexpr int kVectorFn<MulF> = static_cast<int>(vmath::BinaryFn::kMul);
template <> constexpr int kVectorFn<DivF> = static_cast<int>(vmath::BinaryFn::kDiv);

template <template <typename> class F, typename T>
Status BinaryKernel(OpKernelContext* ctx) {
  const int64_t cost = std::is_same_v<F<T>, DivF<T>> ? elementwise::kDivCost : elementwise::kCheapCost;
  if constexpr (std::is_floating_point_v<T> && kVectorFn<F> >= 0) {
    // Same-size operands: the SIMD loop, streaming stores for huge outputs.
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    Tensor* z = nullptr;
    OF_RETURN_IF_ERROR(ctx->allocate_output(0, &z));
    const int64_t n = z->NumElements();
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* out = z->data<T>();
    if (x.NumElements() == n && y.NumElements() == n) {
      const auto fn = static_cast<vmath::BinaryFn>(kVectorFn<F>);
      const bool stream = n * static_cast<int64_t>(sizeof(T)) >= vmath::StreamThresholdBytes();
      ParallelFor(n, cost, [&](int64_t s, int64_t e) { vmath::Binary(fn, a + s, b + s, out + s, e - s, stream); });
    } else {
      elementwise::BinaryLoop(a, x.shape(), b, y.shape(), out, z->shape(), F<T>(), cost);
    }
    return Status::OK();
  } else {
    return BinaryOp<T>(ctx, F<T>(), cost);
  }
}

// ---- Pow

template <typename T>
struct FloatPowF {
  T operator()(T a, T b) const { return std::pow(a, b); }
};

// Exponentiation by squaring in the unsigned type: wraps like numpy. The
// exponent is known to be >= 0.
template <typename T>
struct IntPowF {
  T operator()(T base, T exp) const {
    using U = std::make_unsigned_t<T>;
    U result = 1, b = static_cast<U>(base);
    for (U e = static_cast<U>(exp); e != 0; e >>= 1) {
      if (e & 1) result *= b;
      b *= b;
    }
    return static_cast<T>(result);
  }
};

// x ** c for one constant exponent c in {0.5, -0.5} or an integer |c| <= 16:
// multiplies (binary powering) or sqrt, an order of magnitude cheaper than
// pow. 0.5 is sqrt exactly as numpy computes it (sqrt(-0) = -0, sqrt(-inf) =
// nan); for -0.5 pow's corner cases are kept: pow(-0, -0.5) = inf,
// pow(-inf, -0.5) = 0.
template <typename T>
bool PowConstant(const T* x, T* out, int64_t n, T c) {
  const T kInf = std::numeric_limits<T>::infinity();
  auto run = [&](auto f) {
    ParallelFor(n, elementwise::kCheapCost * 2, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) out[i] = f(x[i]);
    });
  };
  if (c == T(0.5)) {
    run([](T v) { return std::sqrt(v); });
  } else if (c == T(-0.5)) {
    run([kInf](T v) { return v == -kInf ? T(0) : T(1) / (std::sqrt(v) + T(0)); });
  } else if (c == std::nearbyint(c) && std::fabs(c) <= 16) {
    const int k = static_cast<int>(std::fabs(c));
    const bool inv = c < 0;
    switch (k) {  // the common exponents unrolled; the rest by squaring
      case 0: run([](T) { return T(1); }); break;
      case 1: run([inv](T v) { return inv ? T(1) / v : v; }); break;
      case 2: run([inv](T v) { return inv ? T(1) / (v * v) : v * v; }); break;
      case 3: run([inv](T v) { return inv ? T(1) / (v * v * v) : v * v * v; }); break;
      default:
        run([k, inv](T v) {
          T r = 1, b = v;
          for (int e = k; e != 0; e >>= 1) {
            if (e & 1) r *= b;
            b *= b;
          }
          return inv ? T(1) / r : r;
        });
    }
  } else {
    return false;
  }
  return true;
}

template <typename T>
Status PowKernel(OpKernelContext* ctx) {
  if constexpr (std::is_floating_point_v<T>) {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    if (y.NumElements() == 1 && ctx->output_shape(0).num_elements() == x.NumElements()) {
      Tensor* z = nullptr;
      OF_RETURN_IF_ERROR(ctx->allocate_output(0, &z));
      if (PowConstant<T>(x.data<T>(), z->data<T>(), x.NumElements(), y.data<T>()[0])) return Status::OK();
      elementwise::BinaryLoop(x.data<T>(), x.shape(), y.data<T>(), y.shape(), z->data<T>(), z->shape(),
                              FloatPowF<T>(), elementwise::kTranscendentalCost);
      return Status::OK();
    }
    return BinaryOp<T>(ctx, FloatPowF<T>(), elementwise::kTranscendentalCost);
  } else {
    // Data-dependent, so the kernel (not the shape function) rejects it,
    // before anything is allocated.
    const Tensor& y = ctx->input(1);
    const T* e = y.data<T>();
    // Like numpy, only exponents that are used count: an empty result
    // (x broadcast to nothing) computes no power at all.
    const int64_t n = ctx->output_shape(0).num_elements() == 0 ? 0 : y.NumElements();
    bool negative = false;
    for (int64_t i = 0; i < n; ++i) negative |= e[i] < 0;
    if (negative) {
      return errors::InvalidArgument(
          "argument 'y' has negative values: integers to negative integer powers are not "
          "allowed (cast 'x' to a floating type first)");
    }
    return BinaryOp<T>(ctx, IntPowF<T>(), 8);
  }
}

}  // namespace

#define OF_REGISTER_BINARY(op, F)                                                   \
  REGISTER_KERNEL(op, kCPU, DType::kFloat32, BinaryKernel<F, float>);               \
  REGISTER_KERNEL(op, kCPU, DType::kFloat64, BinaryKernel<F, double>);              \
  REGISTER_KERNEL(op, kCPU, DType::kInt32, BinaryKernel<F, int32_t>);               \
  REGISTER_KERNEL(op, kCPU, DType::kInt64, BinaryKernel<F, int64_t>)

OF_REGISTER_BINARY("Add", AddF);
OF_REGISTER_BINARY("Sub", SubF);
OF_REGISTER_BINARY("Mul", MulF);
OF_REGISTER_BINARY("Maximum", MaximumF);
OF_REGISTER_BINARY("Minimum", MinimumF);
#undef OF_REGISTER_BINARY

REGISTER_KERNEL("Div", kCPU, DType::kFloat32, BinaryKernel<DivF, float>);
REGISTER_KERNEL("Div", kCPU, DType::kFloat64, BinaryKernel<DivF, double>);

REGISTER_KERNEL("Pow", kCPU, DType::kFloat32, PowKernel<float>);
REGISTER_KERNEL("Pow", kCPU, DType::kFloat64, PowKernel<double>);
REGISTER_KERNEL("Pow", kCPU, DType::kInt32, PowKernel<int32_t>);
REGISTER_KERNEL("Pow", kCPU, DType::kInt64, PowKernel<int64_t>);

}  // namespace opforge
