#include "py_binding.h"

#include <map>
#include <mutex>
#include <cstring>

#include "numpy_api.h"
#include "py_autograd.h"
#include "opforge/inlined_vector.h"
#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

// Below this many input bytes a kernel is over before releasing the GIL pays.
constexpr size_t kReleaseGilBytes = 1 << 16;

std::string SlotLabel(const ArgDef& arg, Py_ssize_t k) {
  return arg.is_list() ? arg.name + "[" + std::to_string(k) + "]" : arg.name;
}

// What a hook records of a call: (the converted inputs, flattened; the
// completed attrs by name).
PyObject* Recorded(const OpDef& op, const Tensor* tensors, size_t n, const AttrValue* attrs) {
  PyObject* flat = PyTuple_New(static_cast<Py_ssize_t>(n));
  PyObject* dict = PyDict_New();
  bool ok = flat && dict;
  for (size_t i = 0; ok && i < n; ++i) {
    PyObject* t = WrapTensor(tensors[i]);
    ok = t != nullptr;
    if (ok) PyTuple_SET_ITEM(flat, static_cast<Py_ssize_t>(i), t);
  }
  for (size_t i = 0; ok && i < op.attrs.size(); ++i) {
    PyObject* v = AttrToPython(op.attrs[i], attrs[i]);
    ok = v && PyDict_SetItemString(dict, op.attrs[i].name.c_str(), v) == 0;
    Py_XDECREF(v);
  }
  if (!ok) {
    Py_XDECREF(flat);
    Py_XDECREF(dict);
    return nullptr;
  }
  return Py_BuildValue("(NN)", flat, dict);
}

// Also sets `any_autograd` if some input Tensor has autograd state.
bool ConvertArgs(const OpDef& op, PyObject* const* inputs, AttrValue* attrs, InlinedVector<Tensor, 4>* tensors,
                 bool* any_autograd) {
  const char* name = op.name.c_str();
  // Flatten: a list arg contributes one slot per element. Tensors are
  // converted straight into the array Execute reads.
  size_t num_slots = 0;
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    num_slots += op.inputs[a].is_list() && (PyList_Check(inputs[a]) || PyTuple_Check(inputs[a]))
                     ? static_cast<size_t>(PySequence_Fast_GET_SIZE(inputs[a]))
                     : 1;
  }
  tensors->resize(num_slots);
  struct Slot {
    InputSlot in;
    int arg;       // index into op.inputs
    Py_ssize_t k;  // index within a list arg
  };
  InlinedVector<Slot, 4> slots;
  bool any_pending = false;
  auto convert = [&](PyObject* obj, size_t a, Py_ssize_t k) {
    Slot& s = slots.emplace_back();
    s.arg = static_cast<int>(a);
    s.k = k;
    s.in.tensor = &(*tensors)[slots.size() - 1];
    // The label of a list element is built only for list args (no string per call).
    const ArgDef& def = op.inputs[a];
    if (!(def.is_list() ? ConvertInput(obj, name, SlotLabel(def, k), &s.in) : ConvertInput(obj, name, def.name, &s.in))) {
      return false;
    }
    any_pending |= s.in.pending;
    *any_autograd |= s.in.autograd;
    return true;
  };
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    PyObject* obj = inputs[a];
    if (!arg.is_list()) {
      if (!convert(obj, a, 0)) return false;
      continue;
    }
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
      SetInvalidArgument(name, "argument '" + arg.name + "' must be a list or tuple of tensors, not " +
                                   Py_TYPE(obj)->tp_name);
      return false;
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    attrs[arg.number_attr_index] = AttrValue::Int(n);
    for (Py_ssize_t k = 0; k < n; ++k) {
      if (!convert(PySequence_Fast_GET_ITEM(obj, k), a, k)) return false;
    }
  }

  // Python scalars and lists take the dtype of a partner sharing their type
  // attr, else the arg's fixed dtype, else their natural dtype.
  for (size_t i = 0; any_pending && i < slots.size(); ++i) {
    if (!slots[i].in.pending) continue;
    const ArgDef& arg = op.inputs[slots[i].arg];
    DType target = arg.fixed_type;
    std::string partner = "the op";
    if (target == DType::kInvalid) {
      for (size_t j = 0; j < slots.size(); ++j) {
        const ArgDef& other = op.inputs[slots[j].arg];
        if (!slots[j].in.pending && other.type_attr_index == arg.type_attr_index) {
          target = (*tensors)[j].dtype();
          partner = "argument '" + other.name + "'";
          break;
        }
      }
      if (target == DType::kInvalid && attrs[arg.type_attr_index].is_set()) {
        target = attrs[arg.type_attr_index].type;
        partner = "attr '" + op.attrs[arg.type_attr_index].name + "'";
      }
    }
    if (!ConvertPending(name, SlotLabel(arg, slots[i].k), target, partner, &slots[i].in)) return false;
  }
  return true;
}

// Executes with the GIL released when the inputs are large enough for it to pay.
bool Run(const OpDef& op, InlinedVector<Tensor, 4>& tensors, AttrValue* attrs, InlinedVector<Tensor, 2>* outputs) {
  size_t bytes = 0;
  for (const Tensor& t : tensors) bytes += t.TotalBytes();
  Status status;
  if (bytes >= kReleaseGilBytes) {
    Py_BEGIN_ALLOW_THREADS
    status = Execute(op, tensors.data(), static_cast<int>(tensors.size()), attrs, outputs->data());
    Py_END_ALLOW_THREADS
  } else {
    status = Execute(op, tensors.data(), static_cast<int>(tensors.size()), attrs, outputs->data());
  }
  if (!status.ok()) {
    SetError(status);
    return false;
  }
  return true;
}

// One output: a Tensor; several: a tuple of them.
PyObject* WrapOutputs(InlinedVector<Tensor, 2>& outputs) {
  if (outputs.size() == 1) return WrapTensor(std::move(outputs[0]));
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(outputs.size()));
  if (!tuple) return nullptr;
  for (size_t i = 0; i < outputs.size(); ++i) {
    PyObject* t = WrapTensor(std::move(outputs[i]));
    if (!t) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), t);
  }
  return tuple;
}

}  // namespace

OpBinding::OpBinding(const char* op_name, std::initializer_list<const char*> attr_names)
    : name_(op_name), op_(OpRegistry::Global()->Find(op_name)) {
  if (!op_) return;
  for (const char* a : attr_names) attr_slots_.push_back(op_->FindAttr(a));
}

OpBinding::OpBinding(const std::string& op_name, const std::vector<std::string>& attr_names)
    : name_(op_name), op_(OpRegistry::Global()->Find(op_name)) {
  if (!op_) return;
  for (const std::string& a : attr_names) attr_slots_.push_back(op_->FindAttr(a));
}

PyObject* OpBinding::Call(PyObject* const* inputs, AttrValue* given, PyObject** recorded) const {
  if (!op_) return SetError(errors::NotFound(name_, ": op is not registered in this build of opforge"));
  const OpDef& op = *op_;
  InlinedVector<AttrValue, 4> attrs(op.attrs.size());
  for (size_t i = 0; i < attr_slots_.size(); ++i) attrs[attr_slots_[i]] = std::move(given[i]);
  InlinedVector<Tensor, 4> tensors;
  bool any_autograd = false;
  if (!ConvertArgs(op, inputs, attrs.data(), &tensors, &any_autograd)) return nullptr;
  // The gradient tape: a flag test when no input has autograd state.
  const bool record = any_autograd && WantsRecording(op, inputs);
  InlinedVector<Tensor, 2> outputs(op.outputs.size());
  if (!Run(op, tensors, attrs.data(), &outputs)) return nullptr;
  if (recorded != nullptr && !(*recorded = Recorded(op, tensors.data(), tensors.size(), attrs.data()))) {
    return nullptr;
  }
  PyObject* result = WrapOutputs(outputs);
  if (record && result && !RecordCall(op, inputs, tensors.data(), tensors.size(), attrs.data(), result)) {
    Py_CLEAR(result);
  }
  return result;
}

PyObject* Init(PyObject* tensor_methods, PyObject* dtypes, PyObject* error_classes) {
  if (!InitErrorClasses(error_classes)) return nullptr;
  return InitTensorType(tensor_methods, dtypes);
}

PyObject* CheckFingerprint(const char* group, const char* expected) {
  const std::string actual = OpRegistry::Global()->Fingerprint(group);
  if (actual == expected) Py_RETURN_NONE;
  PyErr_Format(PyExc_ImportError,
               "opforge: the generated wrappers of op group '%s' (registry fingerprint %s) do not match the "
               "compiled op registry (fingerprint %s): the C++ op declarations changed after the wrappers were "
               "generated. Run `python -m codegen` and rebuild (`pip install .`).",
               group, expected, actual.c_str());
  return nullptr;
}

PyObject* ToTensor(PyObject* value, PyObject* dtype) {
  const char* op = "tensor";
  Tensor tensor;
  InputSlot slot;
  slot.tensor = &tensor;
  if (!ConvertInput(value, op, "value", &slot)) return nullptr;
  DType want = DType::kInvalid;
  if (dtype != Py_None && !ToDType(dtype, &want)) {
    return SetInvalidArgument(op, std::string("argument 'dtype' is not an opforge dtype: ") + Py_TYPE(dtype)->tp_name);
  }
  if (slot.pending) {
    if (!ConvertPending(op, "value", want, "argument 'dtype'", &slot)) return nullptr;
  } else if (want != DType::kInvalid && tensor.dtype() != want) {
    return SetInvalidArgument(op, std::string("argument 'value' has dtype ") + DTypeName(tensor.dtype()) +
                                      " but dtype is " + DTypeName(want) + "; use cast");
  }
  return WrapTensor(std::move(tensor));
}

PyObject* RegistryJson() {
  const std::string json = RegistryToJson();
  return PyUnicode_FromStringAndSize(json.data(), static_cast<Py_ssize_t>(json.size()));
}

PyObject* RegistrationErrors() {
  const auto errs = OpRegistry::Global()->registration_errors();
  PyObject* list = PyList_New(0);
  for (const auto& e : errs) {
    PyObject* s = PyUnicode_FromString(e.c_str());
    PyList_Append(list, s);
    Py_DECREF(s);
  }
  return list;
}

PyObject* ValidateDeclaration(const char* name, PyObject* specs) {
  OpDefBuilder builder(name, "<validate>", 0);
  PyObject* seq = PySequence_Fast(specs, "specs must be a sequence of (kind, text) pairs");
  if (!seq) return nullptr;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    const char* kind = nullptr;
    const char* text = nullptr;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "ss", &kind, &text)) {
      Py_DECREF(seq);
      return nullptr;
    }
    const std::string k = kind;
    if (k == "input") builder.Input(text);
    else if (k == "output") builder.Output(text);
    else if (k == "attr") builder.Attr(text);
    else if (k == "doc") builder.Doc(text);
    else if (k == "gradient") builder.Gradient(text);
    else if (k == "no_gradient") builder.NoGradient();
    else if (k == "category") builder.Category(text);
  }
  Py_DECREF(seq);
  builder.SetShapeFn(shape_fns::Unchanged);
  OpDef def;
  Status s = builder.Finalize(&def);
  if (!s.ok()) return SetError(s);
  Py_RETURN_NONE;
}

}  // namespace py
}  // namespace opforge
