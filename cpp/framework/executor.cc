// Eager execution of one op: check dtypes and attrs, infer shapes, run the
// kernel. Everything before the kernel reads only (dtype, shape) pairs, so
// InferOutputs runs it without tensors.
#include "executor.h"

#include <string>

#include "opforge/inlined_vector.h"

namespace opforge {
namespace {

std::string DTypeSetString(const std::vector<DType>& types) {
  std::string out = "{";
  for (size_t i = 0; i < types.size(); ++i) out += std::string(i ? ", " : "") + DTypeName(types[i]);
  return out + "}";
}

std::string KernelDTypes(const KernelTable& table, int device) {
  std::string out;
  for (int t = 0; t < kNumDTypes; ++t) {
    if (table.fn[device][t]) out += std::string(out.empty() ? "" : ", ") + DTypeName(static_cast<DType>(t));
  }
  return out.empty() ? "none" : out;
}

// Binds type attrs (and list lengths, already set by the caller) from the inputs.
Status InferTypeAttrs(const OpDef& op, const InputSpec* inputs, int num_inputs, AttrValue* attrs) {
  int expected = 0;
  for (const ArgDef& arg : op.inputs) {
    if (!arg.is_list()) { ++expected; continue; }
    const AttrValue& n = attrs[arg.number_attr_index];
    if (!n.is_set() || n.is_none()) {
      return errors::InvalidArgument("the length of list argument '", arg.name, "' is not known");
    }
    expected += static_cast<int>(n.i);
  }
  if (expected != num_inputs) {
    return errors::InvalidArgument("expected ", expected, " input tensors, got ", num_inputs);
  }
  int slot = 0;
  for (const ArgDef& arg : op.inputs) {
    const int count = arg.is_list() ? static_cast<int>(attrs[arg.number_attr_index].i) : 1;
    for (int k = 0; k < count; ++k, ++slot) {
      const DType d = inputs[slot].dtype;
      auto label = [&] {
        std::string l = "argument '" + arg.name + "'";
        return arg.is_list() ? l + "[" + std::to_string(k) + "]" : l;
      };
      if (arg.fixed_type != DType::kInvalid) {
        if (d != arg.fixed_type) {
          return errors::InvalidArgument(label(), " must have dtype ", DTypeName(arg.fixed_type), ", got ",
                                         DTypeName(d));
        }
        continue;
      }
      AttrValue& t = attrs[arg.type_attr_index];
      const AttrDef& def = op.attrs[arg.type_attr_index];
      if (!t.is_set()) {
        t.kind = AttrValue::kValue;  // set in place: no temporary AttrValue
        t.type = d;
        if (!def.allowed_types.empty()) {
          bool ok = false;
          for (DType a : def.allowed_types) ok = ok || a == d;
          if (!ok) {
            return errors::InvalidArgument(label(), " has dtype ", DTypeName(d), ", which is not supported: ",
                                           def.name, " must be one of ", DTypeSetString(def.allowed_types));
          }
        }
      } else if (t.type != d) {
        std::string other = "attr '" + def.name + "'";
        for (const ArgDef& a : op.inputs) {
          if (a.type_attr_index == arg.type_attr_index) { other = "argument '" + a.name + "'"; break; }
        }
        return errors::InvalidArgument(label(), " has dtype ", DTypeName(d), " but ", other, " has dtype ",
                                       DTypeName(t.type), "; they must match (", def.name,
                                       "), there is no implicit promotion: use cast");
      }
    }
  }
  return Status::OK();
}

// The eager call path runs these once per op call: they are inlined into
// ExecuteImpl (as one function they were, before InferOutputs and RunKernel
// shared them), which saves about 150 instructions a call.
#define OPFORGE_HOT_INLINE __attribute__((always_inline)) inline

// Fills defaults and checks every attr against its declaration.
OPFORGE_HOT_INLINE Status CompleteAttrs(const OpDef& op, AttrValue* attrs) {
  for (size_t i = 0; i < op.attrs.size(); ++i) {
    const AttrDef& def = op.attrs[i];
    AttrValue& v = attrs[i];
    if (!v.is_set()) {
      if (!def.has_default) return errors::InvalidArgument("attr '", def.name, "' is required");
      v = def.default_value;
      continue;
    }
    if (v.is_none()) {
      if (def.has_default && def.default_value.is_none()) continue;
      return errors::InvalidArgument("attr '", def.name, "' must be a ", AttrTypeName(def.type), ", not None");
    }
    if (def.has_minimum) {
      const bool below = def.type == AttrType::kInt ? v.i < def.minimum : v.f < static_cast<double>(def.minimum);
      if (below) {
        return errors::InvalidArgument("attr '", def.name, "' is ", v.DebugString(def.type), " but must be >= ",
                                       def.minimum);
      }
    }
    if (!def.allowed_types.empty() && !def.inferred) {
      std::vector<DType> given = def.type == AttrType::kType ? std::vector<DType>{v.type} : v.list_type;
      for (DType t : given) {
        bool ok = false;
        for (DType a : def.allowed_types) ok = ok || a == t;
        if (!ok) {
          return errors::InvalidArgument("attr '", def.name, "' is ", DTypeName(t), " but must be one of ",
                                         DTypeSetString(def.allowed_types));
        }
      }
    }
    if (def.type == AttrType::kShape) {
      for (int64_t d : v.list_i) {
        if (d < 0) {
          return errors::InvalidArgument("attr '", def.name, "' is ", v.DebugString(def.type),
                                         " but dimensions must be >= 0");
        }
      }
    }
  }
  return Status::OK();
}

// Runs the shape function and checks what it set.
OPFORGE_HOT_INLINE Status RunShapeFn(const OpDef& op, const InputSpec* inputs, int num_inputs, const AttrValue* attrs,
                  TensorShape* shapes) {
  InferenceContext ictx(op, inputs, num_inputs, attrs, shapes);
  OF_RETURN_IF_ERROR(op.shape_fn(&ictx));
  if (!ictx.lookup_error().ok()) return ictx.lookup_error();
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const bool partial_ok = HasUnknownDims(inputs, num_inputs) || ictx.read_unknown_value();
    if (!shapes[i].IsValid() && !(partial_ok && IsPartialShapeValid(shapes[i]))) {
      TensorShape checked;
      Status s = TensorShape::Make(shapes[i].dims(), shapes[i].rank(), &checked);
      return errors::InvalidArgument("output '", op.outputs[i].name, "': ", s.message());
    }
  }
  return Status::OK();
}

// The kernel half of Execute: attrs complete, output shapes known (also a
// planned graph node's, whose shapes were inferred when it was added).
OPFORGE_HOT_INLINE Status RunKernelImpl(const OpDef& op, const Tensor* inputs, int num_inputs, const AttrValue* attrs,
                     const TensorShape* shapes, Tensor* outputs, int device) {
  const DType key = op.kernel_type_attr >= 0 ? attrs[op.kernel_type_attr].type : op.kernel_fixed_type;
  KernelFn fn = op.kernels->fn[device][static_cast<int>(key)];
  if (fn == nullptr) {
    return errors::NotFound("no ", DeviceName(device), " kernel for dtype ", DTypeName(key),
                            "; registered ", DeviceName(device), " kernels: ", KernelDTypes(*op.kernels, device));
  }
  OpKernelContext kctx(op, inputs, num_inputs, attrs, shapes, outputs);
  OF_RETURN_IF_ERROR(fn(&kctx));
  if (!kctx.lookup_error().ok()) return kctx.lookup_error();
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (!out.valid()) {
      // Kernels may skip allocating outputs they never write (empty results).
      if (shapes[i].num_elements() != 0) {
        return errors::Internal("the kernel did not produce output '", op.outputs[i].name, "'");
      }
      OF_RETURN_IF_ERROR(Tensor::Allocate(OutputDType(op, static_cast<int>(i), attrs), shapes[i], &out));
    }
  }
  return Status::OK();
}

Status ExecuteImpl(const OpDef& op, const Tensor* inputs, int num_inputs, AttrValue* attrs, Tensor* outputs,
                   int device) {
  InlinedVector<InputSpec, 4> specs(static_cast<size_t>(num_inputs));
  for (int i = 0; i < num_inputs; ++i) specs[i] = InputSpec{inputs[i].dtype(), &inputs[i].shape(), &inputs[i]};
  OF_RETURN_IF_ERROR(InferTypeAttrs(op, specs.data(), num_inputs, attrs));
  OF_RETURN_IF_ERROR(CompleteAttrs(op, attrs));
  InlinedVector<TensorShape, 2> shapes(op.outputs.size());
  OF_RETURN_IF_ERROR(RunShapeFn(op, specs.data(), num_inputs, attrs, shapes.data()));
  return RunKernelImpl(op, inputs, num_inputs, attrs, shapes.data(), outputs, device);
}

Status InferImpl(const OpDef& op, const InputSpec* inputs, int num_inputs, AttrValue* attrs,
                 TensorShape* output_shapes, DType* output_dtypes) {
  for (int i = 0; i < num_inputs; ++i) {
    if (inputs[i].shape == nullptr || DTypeSize(inputs[i].dtype) == 0) {
      return errors::InvalidArgument("input slot ", i, " has no dtype or shape");
    }
  }
  OF_RETURN_IF_ERROR(InferTypeAttrs(op, inputs, num_inputs, attrs));
  OF_RETURN_IF_ERROR(CompleteAttrs(op, attrs));
  OF_RETURN_IF_ERROR(RunShapeFn(op, inputs, num_inputs, attrs, output_shapes));
  for (size_t i = 0; i < op.outputs.size(); ++i) output_dtypes[i] = OutputDType(op, static_cast<int>(i), attrs);
  return Status::OK();
}

}  // namespace

DType OutputDType(const OpDef& op, int i, const AttrValue* attrs) {
  const ArgDef& arg = op.outputs[i];
  return arg.fixed_type != DType::kInvalid ? arg.fixed_type : attrs[arg.type_attr_index].type;
}

Status OpKernelContext::allocate_output(int i, Tensor** out) {
  Tensor& slot = outputs_[i];
  if (outputs_preallocated_ && slot.valid()) {
    *out = &slot;
    return Status::OK();
  }
  OF_RETURN_IF_ERROR(Tensor::Allocate(OutputDType(op(), i, attr_values()), output_shapes_[i], &slot));
  *out = &slot;
  return Status::OK();
}

Status Execute(const OpDef& op, const Tensor* inputs, int num_inputs, AttrValue* attrs, Tensor* outputs,
               int device) {
  Status s = ExecuteImpl(op, inputs, num_inputs, attrs, outputs, device);
  return s.ok() ? s : s.WithPrefix(op.name + ": ");
}

Status RunKernel(const OpDef& op, const Tensor* inputs, int num_inputs, const AttrValue* attrs,
                 const TensorShape* output_shapes, Tensor* outputs, int device) {
  Status s = RunKernelImpl(op, inputs, num_inputs, attrs, output_shapes, outputs, device);
  return s.ok() ? s : s.WithPrefix(op.name + ": ");
}

Status InferOutputDTypes(const OpDef& op, const InputSpec* inputs, int num_inputs, AttrValue* attrs,
                         DType* output_dtypes) {
  Status s = InferTypeAttrs(op, inputs, num_inputs, attrs);
  if (s.ok()) s = CompleteAttrs(op, attrs);
  if (!s.ok()) return s.WithPrefix(op.name + ": ");
  for (size_t i = 0; i < op.outputs.size(); ++i) output_dtypes[i] = OutputDType(op, static_cast<int>(i), attrs);
  return Status::OK();
}

Status InferPlannedShapes(const OpDef& op, const InputSpec* inputs, int num_inputs, const AttrValue* attrs,
                          TensorShape* output_shapes) {
  Status s = RunShapeFn(op, inputs, num_inputs, attrs, output_shapes);
  return s.ok() ? s : s.WithPrefix(op.name + ": ");
}

Status InferOutputs(const OpDef& op, const InputSpec* inputs, int num_inputs, AttrValue* attrs,
                    TensorShape* output_shapes, DType* output_dtypes) {
  Status s = InferImpl(op, inputs, num_inputs, attrs, output_shapes, output_dtypes);
  return s.ok() ? s : s.WithPrefix(op.name + ": ");
}

}  // namespace opforge
