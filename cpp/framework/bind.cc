// The binder (bind.h): flattens the inputs, gives weak values their
// partner's dtype, completes and checks attrs and runs the shape fn, once
// for every mode.
#include "bind.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "executor.h"

namespace opforge {
namespace {

// The one promotion table. Strong inputs sharing a type attr must match
// (no implicit promotion: InferOutputs says so, naming both). A weak value
// (Python scalar or list) of kind bool < int < float may take any dtype of
// its own kind or a higher one: True -> 1.0 is fine, 1.5 -> int32 is not.
int KindRank(DType t) { return t == DType::kBool ? 0 : IsInteger(t) ? 1 : 2; }
const char* KindName(int rank) { return rank == 0 ? "bool" : rank == 1 ? "int" : "float"; }

template <typename From, typename To>
void CastAll(const Tensor& in, Tensor* out) {
  const From* src = in.data<From>();
  To* dst = out->data<To>();
  const int64_t n = in.NumElements();
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<To>(src[i]);
}

template <typename From>
void CastFrom(const Tensor& in, Tensor* out) {
  switch (out->dtype()) {
#define OPFORGE_BIND_CAST(e, v, nm, np, ctype, ...) \
  case DType::e: CastAll<From, ctype>(in, out); break;
    OPFORGE_DTYPES(OPFORGE_BIND_CAST)
#undef OPFORGE_BIND_CAST
    default: break;
  }
}

// The dtype of a strong flattened slot (kTensor, kPending, kSymbolic).
DType SlotDType(const BoundCall& call, size_t i) {
  return call.slots[i].kind == BindInput::kSymbolic ? call.slots[i].dtype : call.values[i].dtype();
}


}  // namespace

std::string InputLabel(const ArgDef& arg, int64_t k, bool is_list_element) {
  return is_list_element ? arg.name + "[" + std::to_string(k) + "]" : arg.name;
}

Status ResolveWeak(BindInput* in, DType target, const std::string& label, const std::string& partner) {
  const Tensor& natural = in->tensor;
  const bool empty = natural.NumElements() == 0;
  if (target == DType::kInvalid) {
    if (in->weak_kind == 1 && natural.dtype() != DType::kInt64) {
      return errors::InvalidArgument("argument '", label, "' is a Python int out of range for int64");
    }
    in->kind = BindInput::kTensor;
    return Status::OK();
  }
  if (!empty && in->weak_kind > KindRank(target)) {
    return errors::InvalidArgument("argument '", label, "' is a Python ", KindName(in->weak_kind), " value but ",
                                   partner, " has dtype ", DTypeName(target),
                                   "; there is no implicit promotion: pass a matching value or use cast");
  }
  if (natural.dtype() == target) {
    in->kind = BindInput::kTensor;
    return Status::OK();
  }
  // Narrowing ints (and ints past int64, held as float64): refuse values that would not fit.
  if (!empty && IsInteger(target) && in->weak_kind == 1) {
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    switch (target) {
#define OPFORGE_BIND_RANGE(e, v, nm, np, ctype, size, fl, in)                                          \
  case DType::e:                                                                                     \
    if constexpr (in && sizeof(ctype) < 8) {                                                         \
      lo = static_cast<int64_t>(std::numeric_limits<ctype>::min());                                  \
      hi = static_cast<int64_t>(std::numeric_limits<ctype>::max());                                  \
    } else if constexpr (in && std::is_unsigned_v<ctype>) {                                          \
      lo = 0;                                                                                        \
    }                                                                                                \
    break;
      OPFORGE_DTYPES(OPFORGE_BIND_RANGE)
#undef OPFORGE_BIND_RANGE
      default: break;
    }
    bool fits = natural.dtype() == DType::kInt64;
    int64_t bad = 0;
    for (int64_t i = 0; fits && i < natural.NumElements(); ++i) {
      const int64_t v = natural.data<int64_t>()[i];
      if (v < lo || v > hi) {
        fits = false;
        bad = v;
      }
    }
    if (!fits) {
      if (natural.shape().rank() == 0 && natural.dtype() == DType::kInt64) {
        return errors::InvalidArgument("argument '", label, "' is ", bad, ", out of range for ", DTypeName(target));
      }
      return errors::InvalidArgument("argument '", label, "' has values out of range for ", DTypeName(target));
    }
  }
  Tensor cast;
  OF_RETURN_IF_ERROR(Tensor::Allocate(target, natural.shape(), &cast));
  switch (natural.dtype()) {
    case DType::kBool: CastFrom<bool>(natural, &cast); break;
    case DType::kInt64: CastFrom<int64_t>(natural, &cast); break;
    case DType::kFloat64: CastFrom<double>(natural, &cast); break;
    default: return errors::Internal("argument '", label, "': a weak value of dtype ", DTypeName(natural.dtype()));
  }
  in->tensor = std::move(cast);
  in->kind = BindInput::kTensor;
  return Status::OK();
}

namespace {

// The checks every bound call gets, on (dtype, shape) pairs: type attrs
// from the inputs, attrs completed, the shape fn (which takes unknown dims
// as unknown: shape_inference.h).
Status InferBound(const OpDef& op, BoundCall* out) {
  const size_t num_slots = out->values.size();
  AttrValue* attrs = out->attrs.data();
  const bool has_slots = !out->slots.empty();
  // Dtypes, attrs and shapes: the executor's own checks, on (dtype, shape) pairs.
  out->output_dtypes.resize(op.outputs.size());
  out->output_shapes.resize(op.outputs.size());
  InlinedVector<InputSpec, 4> specs(num_slots);
  InlinedVector<TensorShape, 2> shapes;
  shapes.resize(op.outputs.size());
  bool unknown_rank = false;
  for (size_t i = 0; i < num_slots; ++i) {
    if (has_slots && out->slots[i].kind == BindInput::kSymbolic) {
      const BindInput& s = out->slots[i];
      unknown_rank = unknown_rank || !s.shape.known_rank;
      specs[i] = InputSpec{s.dtype, &s.shape.dims};
    } else {
      const Tensor& v = out->values[i];
      const bool known = v.buffer() != nullptr || v.NumElements() == 0;
      specs[i] = InputSpec{v.dtype(), &v.shape(), known ? &v : nullptr};
    }
  }
  if (unknown_rank) {
    // An input of unknown rank (a placeholder declared without a shape):
    // dtypes and attrs are checked now, shapes once the graph runs.
    OF_RETURN_IF_ERROR(InferOutputDTypes(op, specs.data(), static_cast<int>(num_slots), attrs,
                                         out->output_dtypes.data()));
    for (size_t o = 0; o < op.outputs.size(); ++o) out->output_shapes[o] = PartialShape::UnknownRank();
    return Status::OK();
  }
  OF_RETURN_IF_ERROR(InferOutputs(op, specs.data(), static_cast<int>(num_slots), attrs, shapes.data(),
                                  out->output_dtypes.data()));
  for (size_t o = 0; o < op.outputs.size(); ++o) out->output_shapes[o] = PartialShape(shapes[o]);
  return Status::OK();
}

Status BindImpl(const OpDef& op, BindInput* inputs, AttrValue* given, BoundCall* out) {
  out->op = &op;
  out->attrs.resize(op.attrs.size());
  for (size_t i = 0; i < op.attrs.size(); ++i) out->attrs[i] = std::move(given[i]);
  AttrValue* attrs = out->attrs.data();

  // Flatten: a list arg takes one slot per element and sets its length attr.
  size_t num_slots = 0;
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    num_slots += op.inputs[a].is_list() ? inputs[a].items.size() : 1;
  }
  out->values.resize(num_slots);
  out->slots.resize(num_slots);
  InlinedVector<int, 4> arg_of(num_slots);  // index into op.inputs per slot
  bool any_weak = false;
  size_t slot = 0;
  auto take = [&](BindInput&& in, size_t a) {
    arg_of[slot] = static_cast<int>(a);
    BindInput& s = out->slots[slot];
    s.kind = in.kind;
    s.weak_kind = in.weak_kind;
    s.autograd = in.autograd;
    out->autograd |= in.autograd;
    switch (in.kind) {
      case BindInput::kSymbolic:
        out->symbolic = true;
        s.dtype = in.dtype;
        s.shape = in.shape;
        s.node = in.node;
        s.output = in.output;
        break;
      case BindInput::kPending:
        out->pending = true;
        s.pending = std::move(in.pending);
        out->values[slot] = std::move(in.tensor);
        break;
      case BindInput::kWeak:
        any_weak = true;
        s.tensor = std::move(in.tensor);  // converted below, then moved to values
        break;
      default:
        out->values[slot] = std::move(in.tensor);
    }
    ++slot;
  };
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    BindInput& in = inputs[a];
    if (!arg.is_list()) {
      if (in.kind == BindInput::kList) {
        return errors::InvalidArgument("argument '", arg.name, "' is a list of tensors but must be one tensor");
      }
      take(std::move(in), a);
      continue;
    }
    if (in.kind != BindInput::kList) {
      return errors::InvalidArgument("argument '", arg.name, "' must be a list or tuple of tensors");
    }
    attrs[arg.number_attr_index] = AttrValue::Int(static_cast<int64_t>(in.items.size()));
    for (BindInput& item : in.items) {
      if (item.kind == BindInput::kList) {
        return errors::InvalidArgument("argument '", arg.name, "' must be a list of tensors, not of lists");
      }
      take(std::move(item), a);
    }
  }

  // Weak values take the dtype of a strong partner sharing their type attr,
  // else the arg's fixed dtype, else the type attr's given value, else their own.
  for (size_t i = 0; any_weak && i < num_slots; ++i) {
    BindInput& s = out->slots[i];
    if (s.kind != BindInput::kWeak) continue;
    const ArgDef& arg = op.inputs[arg_of[i]];
    DType target = arg.fixed_type;
    std::string partner = "the op";
    if (target == DType::kInvalid) {
      for (size_t j = 0; j < num_slots; ++j) {
        const ArgDef& other = op.inputs[arg_of[j]];
        if (out->slots[j].kind != BindInput::kWeak && other.type_attr_index == arg.type_attr_index) {
          target = SlotDType(*out, j);
          partner = "argument '" + other.name + "'";
          break;
        }
      }
      if (target == DType::kInvalid && attrs[arg.type_attr_index].is_set() && !attrs[arg.type_attr_index].is_none()) {
        target = attrs[arg.type_attr_index].type;
        partner = "attr '" + op.attrs[arg.type_attr_index].name + "'";
      }
    }
    const int64_t k = static_cast<int64_t>(i) - (std::find(arg_of.begin(), arg_of.end(), arg_of[i]) - arg_of.begin());
    OF_RETURN_IF_ERROR(ResolveWeak(&s, target, InputLabel(arg, k, arg.is_list()), partner));
    out->values[i] = std::move(s.tensor);
  }

  return InferBound(op, out);
}

Status WithOpName(const OpDef& op, Status s) {
  if (s.ok()) return s;
  // InferOutputs prefixes the op's name already.
  const std::string prefix = op.name + ": ";
  return s.message().compare(0, prefix.size(), prefix) == 0 ? s : s.WithPrefix(prefix);
}

}  // namespace

Status Bind(const OpDef& op, BindInput* inputs, AttrValue* attrs, BoundCall* out) {
  return WithOpName(op, BindImpl(op, inputs, attrs, out));
}

Status BindValues(const OpDef& op, AttrValue* attrs, BoundCall* out) {
  out->op = &op;
  out->attrs.clear();
  for (size_t i = 0; i < op.attrs.size(); ++i) out->attrs.emplace_back(std::move(attrs[i]));
  return WithOpName(op, InferBound(op, out));
}

}  // namespace opforge
