// Kernels of the optimizer updates on variables (state_ops.cc): the same
// arithmetic as optim_kernels.cc's in-place Apply* ops, on the state of a
// resource manager instead of the op's inputs.
#include <cmath>
#include <mutex>

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "variable.h"

namespace opforge {
namespace state {
namespace {

constexpr int64_t kUpdateCost = 8;

// Looks up and locks (in attr order: one lock order for every op) the
// variables named by `attrs`, each checked against grad's dtype and shape.
template <int N>
struct Locked {
  std::shared_ptr<Variable> vars[N];
  std::unique_lock<std::mutex> locks[N];

  Status Init(OpKernelContext* ctx, const char* const (&attrs)[N]) {
    const Tensor& grad = ctx->input(0);
    for (int i = 0; i < N; ++i) {
      OF_RETURN_IF_ERROR(GetVariable(ctx, attrs[i], &vars[i]));
      for (int j = 0; j < i; ++j) {
        if (vars[j] == vars[i]) {
          return errors::InvalidArgument("attrs '", attrs[j], "' and '", attrs[i], "' name the same variable '",
                                         ctx->attr_string(attrs[i]), "'");
        }
      }
      locks[i] = std::unique_lock<std::mutex>(vars[i]->mu());
      OF_RETURN_IF_ERROR(CheckVariable(ctx, attrs[i], *vars[i], grad.dtype(), grad.shape()));
    }
    return Status::OK();
  }
  template <typename T> T* data(int i) { return vars[i]->value.template data<T>(); }
};

template <typename T>
Status GradientDescentKernel(OpKernelContext* ctx) {
  static const char* const kAttrs[1] = {"var"};
  Locked<1> l;
  OF_RETURN_IF_ERROR(l.Init(ctx, kAttrs));
  T* var = l.data<T>(0);
  const T* grad = ctx->input(0).data<T>();
  const T lr = static_cast<T>(ctx->attr_float("lr"));
  const T wd = static_cast<T>(ctx->attr_float("weight_decay"));
  ParallelFor(ctx->input(0).NumElements(), kUpdateCost, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) var[i] -= lr * (grad[i] + wd * var[i]);
  });
  return CopyToOutput(ctx, l.vars[0]->value);
}

template <typename T>
Status MomentumKernel(OpKernelContext* ctx) {
  static const char* const kAttrs[2] = {"var", "accum"};
  Locked<2> l;
  OF_RETURN_IF_ERROR(l.Init(ctx, kAttrs));
  T* var = l.data<T>(0);
  T* acc = l.data<T>(1);
  const T* grad = ctx->input(0).data<T>();
  const T lr = static_cast<T>(ctx->attr_float("lr"));
  const T mu = static_cast<T>(ctx->attr_float("momentum"));
  const T wd = static_cast<T>(ctx->attr_float("weight_decay"));
  const bool nesterov = ctx->attr_bool("nesterov");
  ParallelFor(ctx->input(0).NumElements(), kUpdateCost, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T g = grad[i] + wd * var[i];
      const T a = mu * acc[i] + g;
      acc[i] = a;
      var[i] -= lr * (nesterov ? g + mu * a : a);
    }
  });
  return CopyToOutput(ctx, l.vars[0]->value);
}

template <typename T>
Status AdamKernel(OpKernelContext* ctx) {
  static const char* const kAttrs[3] = {"var", "m", "v"};
  const Tensor& step_t = ctx->input(1);
  if (step_t.NumElements() != 1) {
    return errors::InvalidArgument("argument 'step' must be a scalar, got shape ", step_t.shape().DebugString());
  }
  const int64_t step_i = *step_t.data<int64_t>();
  if (step_i < 1) return errors::InvalidArgument("argument 'step' must be >= 1, got ", step_i);
  Locked<3> l;
  OF_RETURN_IF_ERROR(l.Init(ctx, kAttrs));
  T* var = l.data<T>(0);
  T* m = l.data<T>(1);
  T* v = l.data<T>(2);
  const T* grad = ctx->input(0).data<T>();
  const double b1 = ctx->attr_float("beta1"), b2 = ctx->attr_float("beta2");
  const double step = static_cast<double>(step_i);
  // As optim_kernels.cc's ApplyAdam computes them, so graph and eager agree.
  const T step_size = static_cast<T>(ctx->attr_float("lr") / (1.0 - std::pow(b1, step)));
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(1.0 - std::pow(b2, step)));
  const T eps = static_cast<T>(ctx->attr_float("epsilon"));
  const T wd = static_cast<T>(ctx->attr_float("weight_decay"));
  const T tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2);
  const T c1 = T(1) - tb1, c2 = T(1) - tb2;
  ParallelFor(ctx->input(0).NumElements(), kUpdateCost * 2, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T w = var[i];
      const T g = grad[i] + wd * w;
      const T mi = tb1 * m[i] + c1 * g;
      const T vi = tb2 * v[i] + c2 * g * g;
      m[i] = mi;
      v[i] = vi;
      var[i] = w - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    }
  });
  return CopyToOutput(ctx, l.vars[0]->value);
}

}  // namespace

REGISTER_KERNEL("ResourceApplyGradientDescent", kCPU, DType::kFloat32, GradientDescentKernel<float>);
REGISTER_KERNEL("ResourceApplyGradientDescent", kCPU, DType::kFloat64, GradientDescentKernel<double>);
REGISTER_KERNEL("ResourceApplyMomentum", kCPU, DType::kFloat32, MomentumKernel<float>);
REGISTER_KERNEL("ResourceApplyMomentum", kCPU, DType::kFloat64, MomentumKernel<double>);
REGISTER_KERNEL("ResourceApplyAdam", kCPU, DType::kFloat32, AdamKernel<float>);
REGISTER_KERNEL("ResourceApplyAdam", kCPU, DType::kFloat64, AdamKernel<double>);

}  // namespace state
}  // namespace opforge
