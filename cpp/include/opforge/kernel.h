// Kernels: the math of an op for one device and dtype.
//
//   template <typename T> Status AddKernel(OpKernelContext* ctx) { ... }
//   REGISTER_KERNEL("Add", kCPU, DType::kFloat32, AddKernel<float>);
//
// The dtype a kernel registers for is the "kernel dtype" of the call: the
// dtype of the first input whose type is an attr (T of "x: T", SrcT of
// Cast); else the fixed dtype of the first input (bool for LogicalAnd); else
// the value of the op's first type attr; else the fixed dtype of the first
// output (bool for Group); else DType::kInvalid.
#pragma once

#include <vector>

#include "opforge/op_context.h"
#include "opforge/resource.h"
#include "opforge/shape_inference.h"

namespace opforge {

enum Device : int { kCPU = 0 };
inline constexpr int kNumDevices = 1;
const char* DeviceName(int device);  // "cpu"

class OpKernelContext : public OpContext {
 public:
  // output_shapes and outputs have one slot per op.outputs.
  OpKernelContext(const OpDef& op, const Tensor* inputs, int num_inputs, const AttrValue* attrs,
                  const TensorShape* output_shapes, Tensor* outputs)
      : OpContext(op, num_inputs, attrs), inputs_(inputs), output_shapes_(output_shapes), outputs_(outputs) {}

  const Tensor& input(int i) const { return inputs_[i]; }

  int num_outputs() const { return static_cast<int>(op().outputs.size()); }
  // The shape the shape function inferred for output i.
  const TensorShape& output_shape(int i) const { return output_shapes_[i]; }
  // Allocates output i with its inferred shape and the dtype the op declares.
  Status allocate_output(int i, Tensor** out);
  // Uses an existing tensor as output i, e.g. an input's buffer (Identity, Reshape).
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }

  // Set by the graph executor, whose memory plan put a tensor of the
  // inferred dtype and shape into each output slot: allocate_output hands
  // that out instead of allocating (eager calls never set it).
  void set_outputs_preallocated() { outputs_preallocated_ = true; }

  // State (resource.h), for ops declared SetIsStateful(): the manager of the
  // Session running the graph, or the process's in eager mode.
  ResourceMgr* resource_manager() const;
  // The graph node being run; empty in eager mode.
  const std::string& node_name() const;
  // The resource named by the op's `resource` attr `attr`.
  template <typename T>
  Status LookupResource(const std::string& attr, std::shared_ptr<T>* out) const {
    return resource_manager()->Lookup<T>(attr_string(attr), out);
  }
  template <typename T>
  Status LookupOrCreateResource(const std::string& attr, std::shared_ptr<T>* out,
                                const std::function<Status(std::shared_ptr<T>*)>& create) const {
    return resource_manager()->LookupOrCreate<T>(attr_string(attr), out, create);
  }

 private:
  const Tensor* inputs_;
  const TensorShape* output_shapes_;
  Tensor* outputs_;
  bool outputs_preallocated_ = false;
};

using KernelFn = Status (*)(OpKernelContext* ctx);

// O(1) lookup: one slot per (device, dtype).
struct KernelTable {
  KernelFn fn[kNumDevices][kNumDTypes] = {};
};

struct KernelRegistrar {
  KernelRegistrar(const char* op, int device, DType dtype, KernelFn fn, const char* file, int line);
};

}  // namespace opforge

#define REGISTER_KERNEL(op, device, dtype, ...)                                    \
  [[maybe_unused]] static const ::opforge::KernelRegistrar OF_CONCAT(             \
      of_kernel_registrar_, __COUNTER__)(op, ::opforge::device, dtype, __VA_ARGS__, \
                                          __FILE__, __LINE__)
