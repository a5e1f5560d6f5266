// Kernels of the variable ops (state_ops.cc): assign, read, add/sub in place.
#include <cstring>
#include <mutex>

#include "opforge/kernel.h"
#include "variable.h"

namespace opforge {
namespace state {
namespace {

Status AssignKernel(OpKernelContext* ctx) {
  std::shared_ptr<Variable> var;
  OF_RETURN_IF_ERROR(GetVariable(ctx, "var", &var));
  const Tensor& value = ctx->input(0);
  std::lock_guard<std::mutex> lock(var->mu());
  if (!var->initialized()) {
    const TensorBuffer* b = value.buffer();
    // Eager opforge.Variable: the variable and its leaf tensor share memory.
    if (ctx->attr_bool("alias") && ctx->node_name().empty() && b != nullptr && b->writable()) {
      var->value = value;
    } else {
      Tensor fresh;
      OF_RETURN_IF_ERROR(Tensor::Allocate(value.dtype(), value.shape(), &fresh));
      if (value.TotalBytes()) std::memcpy(fresh.raw_data(), value.raw_data(), value.TotalBytes());
      var->value = std::move(fresh);
    }
    return CopyToOutput(ctx, var->value);
  }
  const std::string& name = ctx->attr_string("var");
  if (var->value.dtype() != value.dtype() || var->value.shape() != value.shape()) {
    return errors::InvalidArgument("argument 'value' is ", DTypeName(value.dtype()), " ",
                                   value.shape().DebugString(), " but variable '", name, "' is ",
                                   DTypeName(var->value.dtype()), " ", var->value.shape().DebugString());
  }
  // In place: an eager Variable's leaf tensor sees the new value.
  if (value.raw_data() != var->value.raw_data() && value.TotalBytes()) {
    std::memmove(var->value.raw_data(), value.raw_data(), value.TotalBytes());
  }
  return CopyToOutput(ctx, var->value);
}

Status ReadKernel(OpKernelContext* ctx) {
  std::shared_ptr<Variable> var;
  OF_RETURN_IF_ERROR(GetVariable(ctx, "var", &var));
  std::lock_guard<std::mutex> lock(var->mu());
  OF_RETURN_IF_ERROR(CheckVariable(ctx, "var", *var, ctx->attr_type("dtype"), ctx->output_shape(0)));
  return CopyToOutput(ctx, var->value);
}

template <typename T, int kSign>
Status AddKernel(OpKernelContext* ctx) {
  std::shared_ptr<Variable> var;
  OF_RETURN_IF_ERROR(GetVariable(ctx, "var", &var));
  const Tensor& delta = ctx->input(0);
  std::lock_guard<std::mutex> lock(var->mu());
  OF_RETURN_IF_ERROR(CheckVariable(ctx, "var", *var, delta.dtype(), delta.shape()));
  T* v = var->value.data<T>();
  const T* d = delta.data<T>();
  const int64_t n = delta.NumElements();
  for (int64_t i = 0; i < n; ++i) v[i] = kSign > 0 ? v[i] + d[i] : v[i] - d[i];
  return CopyToOutput(ctx, var->value);
}

Status IsInitializedKernel(OpKernelContext* ctx) {
  std::shared_ptr<Variable> var;
  OF_RETURN_IF_ERROR(GetVariable(ctx, "var", &var));
  std::lock_guard<std::mutex> lock(var->mu());
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  *out->data<bool>() = var->initialized();
  return Status::OK();
}

Status GroupKernel(OpKernelContext* ctx) {
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  *out->data<bool>() = true;
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("AssignVariable", kCPU, DType::kFloat32, AssignKernel);
REGISTER_KERNEL("AssignVariable", kCPU, DType::kFloat64, AssignKernel);
REGISTER_KERNEL("AssignVariable", kCPU, DType::kInt32, AssignKernel);
REGISTER_KERNEL("AssignVariable", kCPU, DType::kInt64, AssignKernel);
REGISTER_KERNEL("AssignVariable", kCPU, DType::kBool, AssignKernel);
REGISTER_KERNEL("ReadVariable", kCPU, DType::kFloat32, ReadKernel);
REGISTER_KERNEL("ReadVariable", kCPU, DType::kFloat64, ReadKernel);
REGISTER_KERNEL("ReadVariable", kCPU, DType::kInt32, ReadKernel);
REGISTER_KERNEL("ReadVariable", kCPU, DType::kInt64, ReadKernel);
REGISTER_KERNEL("ReadVariable", kCPU, DType::kBool, ReadKernel);
REGISTER_KERNEL("AssignAddVariable", kCPU, DType::kFloat32, AddKernel<float, 1>);
REGISTER_KERNEL("AssignAddVariable", kCPU, DType::kFloat64, AddKernel<double, 1>);
REGISTER_KERNEL("AssignAddVariable", kCPU, DType::kInt32, AddKernel<int32_t, 1>);
REGISTER_KERNEL("AssignAddVariable", kCPU, DType::kInt64, AddKernel<int64_t, 1>);
REGISTER_KERNEL("AssignSubVariable", kCPU, DType::kFloat32, AddKernel<float, -1>);
REGISTER_KERNEL("AssignSubVariable", kCPU, DType::kFloat64, AddKernel<double, -1>);
REGISTER_KERNEL("AssignSubVariable", kCPU, DType::kInt32, AddKernel<int32_t, -1>);
REGISTER_KERNEL("AssignSubVariable", kCPU, DType::kInt64, AddKernel<int64_t, -1>);
REGISTER_KERNEL("VariableIsInitialized", kCPU, DType::kBool, IsInitializedKernel);
REGISTER_KERNEL("Group", kCPU, DType::kBool, GroupKernel);

}  // namespace state
}  // namespace opforge
