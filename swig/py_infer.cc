// Shape-only inference from Python: (dtype, shape) pairs in, static output
// dtypes and shapes out, through the executor's own checks (InferOutputs).
#include "py_infer.h"

#include <string>
#include <vector>

#include "executor.h"
#include "opforge/inlined_vector.h"
#include "opforge/registry.h"
#include "py_convert.h"
#include "py_errors.h"
#include "py_op_library.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

// Owns new references; a nullptr item means failure (an error is set).
struct Ref {
  PyObject* p;
  explicit Ref(PyObject* o) : p(o) {}
  ~Ref() { Py_XDECREF(p); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* release() { PyObject* o = p; p = nullptr; return o; }
};

// One (dtype, shape) pair into `dtype` and `shape`.
bool ParsePair(PyObject* pair, const char* op, const std::string& label, DType* dtype, TensorShape* shape) {
  if (!PyTuple_Check(pair) && !PyList_Check(pair)) {
    SetInvalidArgument(op, "argument '" + label + "' must be a (dtype, shape) pair, not " + Py_TYPE(pair)->tp_name);
    return false;
  }
  if (PySequence_Fast_GET_SIZE(pair) != 2) {
    SetInvalidArgument(op, "argument '" + label + "' must be a (dtype, shape) pair, got " +
                               std::to_string(PySequence_Fast_GET_SIZE(pair)) + " items");
    return false;
  }
  PyObject* d = PySequence_Fast_GET_ITEM(pair, 0);
  PyObject* s = PySequence_Fast_GET_ITEM(pair, 1);
  if (!ToDType(d, dtype)) {
    PyErr_Clear();
    SetInvalidArgument(op, "argument '" + label + "': dtype must be an opforge dtype (float32, float64, int32, "
                               "int64, bool), not " + Py_TYPE(d)->tp_name);
    return false;
  }
  if (PyUnicode_Check(s) || PyBytes_Check(s)) {
    SetInvalidArgument(op, "argument '" + label + "': shape must be a sequence of ints, not str");
    return false;
  }
  Ref seq(PySequence_Fast(s, ""));
  if (!seq.p) {
    PyErr_Clear();
    SetInvalidArgument(op, "argument '" + label + "': shape must be a sequence of ints, not " + Py_TYPE(s)->tp_name);
    return false;
  }
  const Py_ssize_t rank = PySequence_Fast_GET_SIZE(seq.p);
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (Py_ssize_t i = 0; i < rank; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq.p, i);
    int overflow = 0;
    long long v = -1;
    if (PyIndex_Check(item) && !PyBool_Check(item)) {
      Ref idx(PyNumber_Index(item));
      if (idx.p) v = PyLong_AsLongLongAndOverflow(idx.p, &overflow);
      if (PyErr_Occurred()) PyErr_Clear();
    } else {
      SetInvalidArgument(op, "argument '" + label + "': shape must be a sequence of ints, got " +
                                 Py_TYPE(item)->tp_name + " at position " + std::to_string(i));
      return false;
    }
    if (overflow) v = -1;  // rejected below as out of range
    dims[static_cast<size_t>(i)] = v;
  }
  if (rank > 0x7fffffff) {
    SetInvalidArgument(op, "argument '" + label + "': shape has too many dimensions");
    return false;
  }
  Status st = TensorShape::Make(dims.data(), static_cast<int>(rank), shape);
  if (!st.ok()) {
    SetInvalidArgument(op, "argument '" + label + "': " + st.message());
    return false;
  }
  return true;
}

PyObject* ShapeTuple(const TensorShape& shape) {
  PyObject* out = PyTuple_New(shape.rank());
  for (int i = 0; out && i < shape.rank(); ++i) {
    PyObject* x = PyLong_FromLongLong(shape.dim(i));
    if (!x) { Py_DECREF(out); return nullptr; }
    PyTuple_SET_ITEM(out, i, x);
  }
  return out;
}

PyObject* DTypeRef(DType t) {
  PyObject* o = DTypeObject(t);
  Py_XINCREF(o);
  if (!o) PyErr_SetString(PyExc_RuntimeError, "opforge: the dtype objects are not initialised");
  return o;
}

}  // namespace

PyObject* Infer(const char* op_type, PyObject* inputs, PyObject* attrs) {
  const OpDef* def = OpRegistry::Global()->Find(op_type);
  if (def == nullptr) {
    return SetError(errors::NotFound(op_type, ": op is not registered (load its library with "
                                              "opforge.load_op_library)"));
  }
  const OpDef& op = *def;
  const char* name = op.name.c_str();
  if (!PyTuple_Check(inputs)) {
    return SetInvalidArgument(name, std::string("infer() takes the inputs as a tuple, not ") + Py_TYPE(inputs)->tp_name);
  }
  if (attrs != Py_None && !PyDict_Check(attrs)) {
    return SetInvalidArgument(name, std::string("infer() takes the attrs as a dict, not ") + Py_TYPE(attrs)->tp_name);
  }
  if (static_cast<size_t>(PyTuple_GET_SIZE(inputs)) != op.inputs.size()) {
    return SetInvalidArgument(name, "infer() got " + std::to_string(PyTuple_GET_SIZE(inputs)) +
                                        " inputs; the op takes " + std::to_string(op.inputs.size()));
  }

  std::vector<AttrValue> values(op.attrs.size());
  if (attrs != Py_None) {
    PyObject* key;
    PyObject* value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(attrs, &pos, &key, &value)) {
      const char* k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
      if (k == nullptr) {
        PyErr_Clear();
        return SetInvalidArgument(name, "attr names must be str");
      }
      const int i = op.FindAttr(k);
      if (i < 0) {
        std::string declared;
        for (const AttrDef& a : op.attrs) declared += (declared.empty() ? "" : ", ") + a.name;
        return SetInvalidArgument(name, std::string("unknown attr '") + k + "' (the op's attrs: " +
                                            (declared.empty() ? "none" : declared) + ")");
      }
      if (!ConvertAnyAttr(value, name, op.attrs[i], &values[i])) return nullptr;
    }
  }

  // Flatten the pairs as the binding flattens tensors: a list arg sets its N.
  std::vector<TensorShape> shapes;
  std::vector<DType> dtypes;
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    PyObject* item = PyTuple_GET_ITEM(inputs, static_cast<Py_ssize_t>(a));
    if (!arg.is_list()) {
      shapes.emplace_back();
      dtypes.emplace_back();
      if (!ParsePair(item, name, arg.name, &dtypes.back(), &shapes.back())) return nullptr;
      continue;
    }
    if (!PyList_Check(item) && !PyTuple_Check(item)) {
      return SetInvalidArgument(name, "argument '" + arg.name + "' must be a list of (dtype, shape) pairs, not " +
                                          Py_TYPE(item)->tp_name);
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(item);
    values[arg.number_attr_index] = AttrValue::Int(n);
    for (Py_ssize_t k = 0; k < n; ++k) {
      shapes.emplace_back();
      dtypes.emplace_back();
      if (!ParsePair(PySequence_Fast_GET_ITEM(item, k), name, arg.name + "[" + std::to_string(k) + "]",
                     &dtypes.back(), &shapes.back())) {
        return nullptr;
      }
    }
  }
  std::vector<InputSpec> specs(shapes.size());
  for (size_t i = 0; i < specs.size(); ++i) specs[i] = InputSpec{dtypes[i], &shapes[i]};

  std::vector<TensorShape> out_shapes(op.outputs.size());
  std::vector<DType> out_dtypes(op.outputs.size());
  Status s = InferOutputs(op, specs.data(), static_cast<int>(specs.size()), values.data(), out_shapes.data(),
                          out_dtypes.data());
  if (!s.ok()) return SetError(s);

  Ref py_dtypes(PyTuple_New(static_cast<Py_ssize_t>(op.outputs.size())));
  Ref py_shapes(PyTuple_New(static_cast<Py_ssize_t>(op.outputs.size())));
  Ref py_attrs(PyDict_New());
  if (!py_dtypes.p || !py_shapes.p || !py_attrs.p) return nullptr;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    PyObject* d = DTypeRef(out_dtypes[i]);
    if (!d) return nullptr;
    PyTuple_SET_ITEM(py_dtypes.p, static_cast<Py_ssize_t>(i), d);
    PyObject* sh = ShapeTuple(out_shapes[i]);
    if (!sh) return nullptr;
    PyTuple_SET_ITEM(py_shapes.p, static_cast<Py_ssize_t>(i), sh);
  }
  for (size_t i = 0; i < op.attrs.size(); ++i) {
    Ref v(AttrToPython(op.attrs[i], values[i]));  // as OpCall.completed_attrs has them
    if (!v.p || PyDict_SetItemString(py_attrs.p, op.attrs[i].name.c_str(), v.p) != 0) return nullptr;
  }
  return PyTuple_Pack(3, py_dtypes.p, py_shapes.p, py_attrs.p);
}

PyObject* DTypeTable() {
  Ref out(PyTuple_New(kNumDTypes - 1));
  if (!out.p) return nullptr;
  for (int i = 1; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    PyObject* row = Py_BuildValue("(sisnNN)", DTypeName(t), i, DTypeNumpyName(t),
                                  static_cast<Py_ssize_t>(DTypeSize(t)), PyBool_FromLong(IsFloating(t)),
                                  PyBool_FromLong(IsInteger(t)));
    if (!row) return nullptr;
    PyTuple_SET_ITEM(out.p, i - 1, row);
  }
  return out.release();
}

}  // namespace py
}  // namespace opforge
