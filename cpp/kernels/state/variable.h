// The variable resource of state_ops.cc: one tensor, its dtype and shape
// fixed by the first assignment. Kernels hold mu() while they touch it.
#pragma once

#include <cstring>
#include <memory>
#include <string>

#include "opforge/kernel.h"

namespace opforge {
namespace state {

struct Variable : ResourceBase {
  Tensor value;  // invalid until initialized
  bool initialized() const { return value.valid(); }
  std::string DebugString() const override {
    return initialized() ? std::string("Variable ") + DTypeName(value.dtype()) + " " + value.shape().DebugString()
                         : "Variable (uninitialized)";
  }
};

// The variable named by resource attr `attr`; created (uninitialized) on first use.
inline Status GetVariable(OpKernelContext* ctx, const std::string& attr, std::shared_ptr<Variable>* out) {
  return ctx->LookupOrCreateResource<Variable>(attr, out, [](std::shared_ptr<Variable>* v) {
    *v = std::make_shared<Variable>();
    return Status::OK();
  });
}

// Checks that the (locked) variable is initialized and matches dtype/shape.
inline Status CheckVariable(OpKernelContext* ctx, const std::string& attr, const Variable& v, DType dtype,
                            const TensorShape& shape) {
  const std::string& name = ctx->attr_string(attr);
  if (!v.initialized()) {
    return errors::FailedPrecondition("variable '", name,
                                      "' is not initialized: run its initializer first "
                                      "(opforge.global_variables_initializer(), or the variable's .initializer)");
  }
  if (v.value.dtype() != dtype || v.value.shape() != shape) {
    return errors::InvalidArgument("variable '", name, "' is ", DTypeName(v.value.dtype()), " ",
                                   v.value.shape().DebugString(), ", but this op uses it as ", DTypeName(dtype), " ",
                                   shape.DebugString());
  }
  return Status::OK();
}

// Output 0 as a copy of `t`.
inline Status CopyToOutput(OpKernelContext* ctx, const Tensor& t) {
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (t.TotalBytes()) std::memcpy(out->raw_data(), t.raw_data(), t.TotalBytes());
  return Status::OK();
}

}  // namespace state
}  // namespace opforge
