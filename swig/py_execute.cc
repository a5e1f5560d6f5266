// The generic execute path: one entry point for ops that have no generated
// SWIG function (those of custom op libraries). It reuses OpBinding, so
// conversions, errors and GIL handling are those of the built-in ops; the
// only extra cost is one map lookup and the attr-type switch per call.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "py_binding.h"
#include "py_errors.h"
#include "py_op_library.h"

namespace opforge {
namespace py {
namespace {

struct GenericBinding {
  OpBinding binding;
  size_t num_inputs;
  std::vector<const AttrDef*> attrs;  // the non-inferred attrs, in params order
};

// The attrs among the op's user-visible params (OpDef::params, computed at
// registration): the order of the generated wrappers' attr parameters.
std::vector<std::string> UserAttrNames(const OpDef& op) {
  std::vector<std::string> names;
  for (const std::string& n : op.params) {
    if (op.FindAttr(n) >= 0) names.push_back(n);
  }
  return names;
}

// Bindings are created and looked up with the GIL held; entries are never
// removed (ops are never unregistered), so a pointer stays valid while
// Call() runs without the GIL.
const GenericBinding* Lookup(const char* op_name) {
  static auto* cache = new std::map<std::string, std::unique_ptr<GenericBinding>>();
  auto it = cache->find(op_name);
  if (it != cache->end()) return it->second.get();
  const OpDef* op = OpRegistry::Global()->Find(op_name);
  if (op == nullptr) return nullptr;
  const std::vector<std::string> names = UserAttrNames(*op);
  std::vector<const AttrDef*> attrs;
  for (const std::string& n : names) attrs.push_back(&op->attrs[op->FindAttr(n)]);
  auto entry = std::unique_ptr<GenericBinding>(
      new GenericBinding{OpBinding(op->name, names), op->inputs.size(), std::move(attrs)});
  return cache->emplace(op_name, std::move(entry)).first->second.get();
}

template <typename A>
bool Convert(PyObject* o, const char* op, const char* name, AttrValue* out) {
  A a;
  if (!ConvertAttr(o, op, name, &a)) return false;
  *out = std::move(a.value);
  return true;
}

}  // namespace

bool ConvertAnyAttr(PyObject* o, const char* op, const AttrDef& def, AttrValue* out) {
  const char* name = def.name.c_str();
  switch (def.type) {
    case AttrType::kInt: return Convert<IntAttr>(o, op, name, out);
    case AttrType::kFloat: return Convert<FloatAttr>(o, op, name, out);
    case AttrType::kBool: return Convert<BoolAttr>(o, op, name, out);
    case AttrType::kString: return Convert<StringAttr>(o, op, name, out);
    case AttrType::kType: return Convert<TypeAttr>(o, op, name, out);
    case AttrType::kShape: return Convert<ShapeAttr>(o, op, name, out);
    case AttrType::kListInt: return Convert<IntListAttr>(o, op, name, out);
    case AttrType::kListFloat: return Convert<FloatListAttr>(o, op, name, out);
    case AttrType::kListType: return Convert<TypeListAttr>(o, op, name, out);
  }
  SetInvalidArgument(op, std::string("attr '") + name + "' has an unknown type");
  return false;
}

namespace {

PyObject* Execute(const char* op_name, PyObject* inputs, PyObject* attrs, PyObject** recorded) {
  const GenericBinding* b = Lookup(op_name);
  if (b == nullptr) {
    return SetError(errors::NotFound(op_name, ": op is not registered (load its library with "
                                              "opforge.load_op_library)"));
  }
  if (!PyTuple_Check(inputs) || !PyTuple_Check(attrs)) {
    return SetInvalidArgument(op_name, "execute() takes the inputs and the attrs as two tuples");
  }
  if (static_cast<size_t>(PyTuple_GET_SIZE(inputs)) != b->num_inputs ||
      static_cast<size_t>(PyTuple_GET_SIZE(attrs)) != b->attrs.size()) {
    return SetInvalidArgument(op_name, "execute() got " + std::to_string(PyTuple_GET_SIZE(inputs)) +
                                           " inputs and " + std::to_string(PyTuple_GET_SIZE(attrs)) +
                                           " attrs; the op takes " + std::to_string(b->num_inputs) + " and " +
                                           std::to_string(b->attrs.size()));
  }
  std::vector<AttrValue> values(b->attrs.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!ConvertAnyAttr(PyTuple_GET_ITEM(attrs, i), op_name, *b->attrs[i], &values[i])) return nullptr;
  }
  PyObject* const* items = reinterpret_cast<PyTupleObject*>(inputs)->ob_item;
  return b->binding.Call(items, values.data(), recorded);
}

}  // namespace

PyObject* ExecuteOp(const char* op_name, PyObject* inputs, PyObject* attrs) {
  return Execute(op_name, inputs, attrs, nullptr);
}

PyObject* ExecuteRecorded(const char* op_name, PyObject* inputs, PyObject* attrs) {
  PyObject* recorded = nullptr;
  PyObject* result = Execute(op_name, inputs, attrs, &recorded);
  if (!result) return nullptr;
  PyObject* out = PyTuple_Pack(3, result, PyTuple_GET_ITEM(recorded, 0), PyTuple_GET_ITEM(recorded, 1));
  Py_DECREF(result);
  Py_DECREF(recorded);
  return out;
}

PyObject* OpSignature(const char* op_name) {
  const GenericBinding* b = Lookup(op_name);
  if (b == nullptr) return SetError(errors::NotFound(op_name, ": op is not registered"));
  const OpDef& op = *OpRegistry::Global()->Find(op_name);
  PyObject* names = PyTuple_New(static_cast<Py_ssize_t>(op.inputs.size()));
  PyObject* lists = PyTuple_New(static_cast<Py_ssize_t>(op.inputs.size()));
  PyObject* attrs = PyTuple_New(static_cast<Py_ssize_t>(b->attrs.size()));
  if (!names || !lists || !attrs) {
    Py_XDECREF(names);
    Py_XDECREF(lists);
    Py_XDECREF(attrs);
    return nullptr;
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    PyTuple_SET_ITEM(names, static_cast<Py_ssize_t>(i), PyUnicode_FromString(op.inputs[i].name.c_str()));
    PyTuple_SET_ITEM(lists, static_cast<Py_ssize_t>(i), PyBool_FromLong(op.inputs[i].is_list()));
  }
  for (size_t i = 0; i < b->attrs.size(); ++i) {
    PyTuple_SET_ITEM(attrs, static_cast<Py_ssize_t>(i), PyUnicode_FromString(b->attrs[i]->name.c_str()));
  }
  // The wrappers' parameter order (OpDef::params).
  PyObject* params = PyList_New(0);
  for (const std::string& n : op.params) {
    PyObject* s = PyUnicode_FromString(n.c_str());
    PyList_Append(params, s);
    Py_DECREF(s);
  }
  return Py_BuildValue("(NNNN)", names, lists, attrs, params);
}

}  // namespace py
}  // namespace opforge
