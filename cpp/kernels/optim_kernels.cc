// Optimizer update kernels: one pass per parameter, reading grad and writing
// var and its slots in place (see the convention in cpp/ops/optim_ops.cc).
#include <cmath>
#include <cstdint>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "compiler.h"

namespace opforge {
namespace {

using int64 = int64_t;
constexpr int64 kUpdateCost = 8;

// The first `n` inputs are updated in place: they must be writable. Returns
// var (input 0) as the output, sharing its storage.
Status PrepareInPlace(OpKernelContext* ctx, int n) {
  for (int i = 0; i < n; ++i) {
    const TensorBuffer* b = ctx->input(i).buffer();
    if (b != nullptr && !b->writable()) {
      return errors::InvalidArgument("argument '", ctx->op().inputs[i].name,
                                     "' is read-only, but this op updates it in place; pass a writable "
                                     "opforge Tensor or numpy array");
    }
  }
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}

template <typename T>
Status GradientDescentKernel(OpKernelContext* ctx) {
  OF_RETURN_IF_ERROR(PrepareInPlace(ctx, 1));
  T* OF_RESTRICT var = ctx->input(0).data<T>();
  const T* OF_RESTRICT grad = ctx->input(1).data<T>();
  const T lr = static_cast<T>(ctx->attr_float("lr"));
  const T wd = static_cast<T>(ctx->attr_float("weight_decay"));
  ParallelFor(ctx->input(0).NumElements(), kUpdateCost, [&](int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) var[i] -= lr * (grad[i] + wd * var[i]);
  });
  return Status::OK();
}

template <typename T>
Status MomentumKernel(OpKernelContext* ctx) {
  OF_RETURN_IF_ERROR(PrepareInPlace(ctx, 2));
  T* OF_RESTRICT var = ctx->input(0).data<T>();
  T* OF_RESTRICT acc = ctx->input(1).data<T>();
  const T* OF_RESTRICT grad = ctx->input(2).data<T>();
  const T lr = static_cast<T>(ctx->attr_float("lr"));
  const T mu = static_cast<T>(ctx->attr_float("momentum"));
  const T wd = static_cast<T>(ctx->attr_float("weight_decay"));
  const bool nesterov = ctx->attr_bool("nesterov");
  ParallelFor(ctx->input(0).NumElements(), kUpdateCost, [&](int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) {
      const T g = grad[i] + wd * var[i];
      const T a = mu * acc[i] + g;
      acc[i] = a;
      var[i] -= lr * (nesterov ? g + mu * a : a);
    }
  });
  return Status::OK();
}

// The loop lives in a function with restrict parameters (a lambda's captured
// pointers lose them), so the compiler vectorizes it without alias checks.
template <typename T>
void AdamRange(T* OF_RESTRICT var, T* OF_RESTRICT m, T* OF_RESTRICT v, const T* OF_RESTRICT grad, int64 lo,
               int64 hi, T step_size, T inv_sqrt_bc2, T eps, T wd, T b1, T b2) {
  const T c1 = T(1) - b1, c2 = T(1) - b2;
  for (int64 i = lo; i < hi; ++i) {
    const T w = var[i];
    const T g = grad[i] + wd * w;
    const T mi = b1 * m[i] + c1 * g;
    const T vi = b2 * v[i] + c2 * g * g;
    m[i] = mi;
    v[i] = vi;
    var[i] = w - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

template <typename T>
Status AdamKernel(OpKernelContext* ctx) {
  OF_RETURN_IF_ERROR(PrepareInPlace(ctx, 3));
  T* var = ctx->input(0).data<T>();
  T* m = ctx->input(1).data<T>();
  T* v = ctx->input(2).data<T>();
  const T* grad = ctx->input(3).data<T>();
  const double b1 = ctx->attr_float("beta1"), b2 = ctx->attr_float("beta2");
  const double step = static_cast<double>(ctx->attr_int("step"));
  // PyTorch's form: var -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
  const T step_size = static_cast<T>(ctx->attr_float("lr") / (1.0 - std::pow(b1, step)));
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(1.0 - std::pow(b2, step)));
  const T eps = static_cast<T>(ctx->attr_float("epsilon"));
  const T wd = static_cast<T>(ctx->attr_float("weight_decay"));
  ParallelFor(ctx->input(0).NumElements(), kUpdateCost * 2, [&](int64 lo, int64 hi) {
    AdamRange(var, m, v, grad, lo, hi, step_size, inv_sqrt_bc2, eps, wd, static_cast<T>(b1), static_cast<T>(b2));
  });
  return Status::OK();
}

REGISTER_KERNEL("ApplyGradientDescent", kCPU, DType::kFloat32, GradientDescentKernel<float>);
REGISTER_KERNEL("ApplyGradientDescent", kCPU, DType::kFloat64, GradientDescentKernel<double>);
REGISTER_KERNEL("ApplyMomentum", kCPU, DType::kFloat32, MomentumKernel<float>);
REGISTER_KERNEL("ApplyMomentum", kCPU, DType::kFloat64, MomentumKernel<double>);
REGISTER_KERNEL("ApplyAdam", kCPU, DType::kFloat32, AdamKernel<float>);
REGISTER_KERNEL("ApplyAdam", kCPU, DType::kFloat64, AdamKernel<double>);

}  // namespace
}  // namespace opforge
