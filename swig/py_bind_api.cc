// The binder from Python without running anything: bind() (graph
// building, Dask's meta inference) and infer() on (dtype, shape) pairs
// (the op checker). Both go through Bind (cpp/framework/bind.h).
#include <cmath>
#include <string>
#include <vector>

#include "bind.h"
#include "numpy_api.h"
#include "opforge/inlined_vector.h"
#include "opforge/registry.h"
#include "py_call.h"
#include "py_promote.h"
#include "py_convert.h"
#include "py_errors.h"
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

// Shape-only inputs of bind(): objects with `dtype` and `shape` but no value.
bool IsShapeOnly(PyObject* obj) {
  if (IsTensor(obj) || PyArray_Check(obj) || PyArray_IsScalar(obj, Generic) || PyBool_Check(obj) ||
      PyLong_Check(obj) || PyFloat_Check(obj) || PyList_Check(obj) || PyTuple_Check(obj)) {
    return false;
  }
  return PyObject_HasAttrString(obj, "dtype") && PyObject_HasAttrString(obj, "shape");
}

bool ToShapeOnly(PyObject* obj, const char* op, const std::string& label, BindInput* out) {
  PyObject* d = PyObject_GetAttrString(obj, "dtype");
  PyObject* s = d ? PyObject_GetAttrString(obj, "shape") : nullptr;
  DType dtype;
  bool ok = s != nullptr;
  if (ok && !ToDType(d, &dtype)) {
    PyErr_Clear();
    SetInvalidArgument(op, "argument '" + label + "' has a dtype opforge does not support");
    ok = false;
  }
  PyObject* seq = ok ? PySequence_Fast(s, "") : nullptr;
  if (ok && !seq) {
    PyErr_Clear();
    SetInvalidArgument(op, "argument '" + label + "': its shape must be a sequence of ints");
    ok = false;
  }
  PartialShape shape;
  for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(seq); ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
    int64_t v = PartialShape::kUnknownDim;
    if (item != Py_None && !(PyFloat_Check(item) && std::isnan(PyFloat_AS_DOUBLE(item)))) {
      v = PyLong_AsLongLong(item);
      if ((v == -1 && PyErr_Occurred()) || v < 0) {
        PyErr_Clear();
        SetInvalidArgument(op, "argument '" + label + "': its shape must be a sequence of ints >= 0 and None");
        ok = false;
      }
    }
    if (ok && shape.dims.rank() == kMaxRank) {
      SetInvalidArgument(op, "argument '" + label + "' has rank above " + std::to_string(kMaxRank));
      ok = false;
    }
    if (ok) shape.dims.AddDim(v);
  }
  Py_XDECREF(seq);
  Py_XDECREF(s);
  Py_XDECREF(d);
  if (ok) *out = BindInput::Symbolic(-1, 0, dtype, shape);
  return ok;
}

bool ToBindAny(PyObject* obj, const char* op, const std::string& label, BindInput* out) {
  return IsShapeOnly(obj) ? ToShapeOnly(obj, op, label, out) : ToBindInput(obj, op, label, false, out);
}

PyObject* PartialShapeTuple(const PartialShape& s) {
  if (!s.known_rank) Py_RETURN_NONE;
  PyObject* t = PyTuple_New(s.rank());
  for (int i = 0; t && i < s.rank(); ++i) {
    PyObject* d = s.dim(i) < 0 ? (Py_INCREF(Py_None), Py_None) : PyLong_FromLongLong(s.dim(i));
    PyTuple_SET_ITEM(t, i, d);
  }
  return t;
}

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


// attrs: a dict by name (None: none given) into one AttrValue per op attr.
bool AttrsFromDict(const OpDef& op, PyObject* attrs_dict, AttrValue* attrs) {
  const char* name = op.name.c_str();
  if (attrs_dict == Py_None) return true;
  if (!PyDict_Check(attrs_dict)) {
    SetInvalidArgument(name, std::string("the attrs must be a dict, not ") + Py_TYPE(attrs_dict)->tp_name);
    return false;
  }
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(attrs_dict, &pos, &key, &value)) {
    const char* k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
    const int i = k ? op.FindAttr(k) : -1;
    if (i < 0) {
      PyErr_Clear();
      std::string declared;
      for (const AttrDef& a : op.attrs) declared += (declared.empty() ? "" : ", ") + a.name;
      SetInvalidArgument(name, std::string("unknown attr '") + (k ? k : "?") + "' (the op's attrs: " +
                                   (declared.empty() ? "none" : declared) + ")");
      return false;
    }
    if (!ConvertAnyAttr(value, name, op.attrs[i], &attrs[i])) return false;
  }
  return true;
}

// (output dtypes, output shapes, completed attrs) of a bound call.
PyObject* Outputs(const OpDef& op, const BoundCall& bc) {
  Ref dtypes(PyTuple_New(static_cast<Py_ssize_t>(op.outputs.size())));
  Ref shapes(PyTuple_New(static_cast<Py_ssize_t>(op.outputs.size())));
  Ref done(PyDict_New());
  if (!dtypes.p || !shapes.p || !done.p) return nullptr;
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    PyObject* d = DTypeObject(bc.output_dtypes[o]);
    if (!d) {
      PyErr_SetString(PyExc_RuntimeError, "opforge: the dtype objects are not initialised");
      return nullptr;
    }
    Py_INCREF(d);
    PyTuple_SET_ITEM(dtypes.p, static_cast<Py_ssize_t>(o), d);
    PyObject* sh = PartialShapeTuple(bc.output_shapes[o]);
    if (!sh) return nullptr;
    PyTuple_SET_ITEM(shapes.p, static_cast<Py_ssize_t>(o), sh);
  }
  for (size_t i = 0; i < op.attrs.size(); ++i) {
    Ref v(AttrToPython(op.attrs[i], bc.attrs[i]));  // as OpCall.completed_attrs has them
    if (!v.p || PyDict_SetItemString(done.p, op.attrs[i].name.c_str(), v.p) != 0) return nullptr;
  }
  return PyTuple_Pack(3, dtypes.p, shapes.p, done.p);
}

}  // namespace

PyObject* Infer(const char* op_type, PyObject* inputs, PyObject* attrs_dict) {
  const OpBinding* b = FindBinding(op_type);
  if (!b) return nullptr;
  const OpDef& op = *b->op();
  const char* name = op.name.c_str();
  if (!PyTuple_Check(inputs)) {
    return SetInvalidArgument(name, std::string("infer() takes the inputs as a tuple, not ") + Py_TYPE(inputs)->tp_name);
  }
  if (static_cast<size_t>(PyTuple_GET_SIZE(inputs)) != op.inputs.size()) {
    return SetInvalidArgument(name, "infer() got " + std::to_string(PyTuple_GET_SIZE(inputs)) +
                                        " inputs; the op takes " + std::to_string(op.inputs.size()));
  }
  InlinedVector<AttrValue, 4> attrs(op.attrs.size());
  if (!AttrsFromDict(op, attrs_dict, attrs.data())) return nullptr;
  InlinedVector<BindInput, 4> bound(op.inputs.size());
  auto pair = [&](PyObject* item, const std::string& label, BindInput* out) {
    DType dtype;
    TensorShape shape;
    if (!ParsePair(item, name, label, &dtype, &shape)) return false;
    *out = BindInput::Symbolic(-1, 0, dtype, PartialShape(shape));
    return true;
  };
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    PyObject* item = PyTuple_GET_ITEM(inputs, static_cast<Py_ssize_t>(a));
    if (!arg.is_list()) {
      if (!pair(item, arg.name, &bound[a])) return nullptr;
      continue;
    }
    if (!PyList_Check(item) && !PyTuple_Check(item)) {
      return SetInvalidArgument(name, "argument '" + arg.name + "' must be a list of (dtype, shape) pairs, not " +
                                          Py_TYPE(item)->tp_name);
    }
    bound[a].kind = BindInput::kList;
    bound[a].items.resize(static_cast<size_t>(PySequence_Fast_GET_SIZE(item)));
    for (size_t k = 0; k < bound[a].items.size(); ++k) {
      if (!pair(PySequence_Fast_GET_ITEM(item, k), InputLabel(arg, k, true), &bound[a].items[k])) return nullptr;
    }
  }
  if (b->promotes() && !PromoteShapeOnly(*b, bound.data())) return nullptr;
  BoundCall bc;
  Status s = Bind(op, bound.data(), attrs.data(), &bc);
  if (!s.ok()) return SetError(s);
  return Outputs(op, bc);
}

PyObject* BindCall(const char* op_type, PyObject* inputs, PyObject* attrs_dict) {
  const OpBinding* b = FindBinding(op_type);
  if (!b) return nullptr;
  const OpDef& op = *b->op();
  const char* name = op.name.c_str();
  if (!PyTuple_Check(inputs) || static_cast<size_t>(PyTuple_GET_SIZE(inputs)) != op.inputs.size()) {
    return SetInvalidArgument(name, "bind() takes a tuple of the op's " + std::to_string(op.inputs.size()) +
                                        " inputs");
  }
  InlinedVector<AttrValue, 4> attrs(op.attrs.size());
  if (!AttrsFromDict(op, attrs_dict, attrs.data())) return nullptr;
  InlinedVector<BindInput, 4> bound(op.inputs.size());
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    PyObject* obj = PyTuple_GET_ITEM(inputs, static_cast<Py_ssize_t>(a));
    if (!arg.is_list()) {
      if (!ToBindAny(obj, name, arg.name, &bound[a])) return nullptr;
      continue;
    }
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
      return SetInvalidArgument(name, "argument '" + arg.name + "' must be a list or tuple of tensors, not " +
                                          Py_TYPE(obj)->tp_name);
    }
    bound[a].kind = BindInput::kList;
    bound[a].items.resize(static_cast<size_t>(PySequence_Fast_GET_SIZE(obj)));
    for (size_t k = 0; k < bound[a].items.size(); ++k) {
      if (!ToBindAny(PySequence_Fast_GET_ITEM(obj, k), name, InputLabel(arg, k, true), &bound[a].items[k])) {
        return nullptr;
      }
    }
  }
  if (b->promotes() && !PromoteShapeOnly(*b, bound.data())) return nullptr;
  BoundCall bc;
  Status s = Bind(op, bound.data(), attrs.data(), &bc);
  if (!s.ok()) return SetError(s);
  // Inputs back, per arg: converted values as Tensors, shape-only ones as given.
  PyObject* out_inputs = PyTuple_New(static_cast<Py_ssize_t>(op.inputs.size()));
  if (!out_inputs) return nullptr;
  size_t slot = 0;
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    PyObject* given = PyTuple_GET_ITEM(inputs, static_cast<Py_ssize_t>(a));
    auto one = [&](PyObject* orig) -> PyObject* {
      const size_t i = slot++;
      if (bc.slots[i].kind == BindInput::kSymbolic) {
        Py_INCREF(orig);
        return orig;
      }
      if (IsTensor(orig) && TensorOf(orig).buffer() == bc.values[i].buffer()) {
        Py_INCREF(orig);
        return orig;
      }
      return WrapTensor(bc.values[i]);
    };
    PyObject* item;
    if (op.inputs[a].is_list()) {
      const Py_ssize_t n = PySequence_Fast_GET_SIZE(given);
      item = PyList_New(n);
      for (Py_ssize_t k = 0; item && k < n; ++k) {
        PyObject* v = one(PySequence_Fast_GET_ITEM(given, k));
        if (!v) Py_CLEAR(item);
        else PyList_SET_ITEM(item, k, v);
      }
    } else {
      item = one(given);
    }
    if (!item) {
      Py_DECREF(out_inputs);
      return nullptr;
    }
    PyTuple_SET_ITEM(out_inputs, static_cast<Py_ssize_t>(a), item);
  }
  PyObject* outputs = Outputs(op, bc);
  if (!outputs) {
    Py_DECREF(out_inputs);
    return nullptr;
  }
  PyObject* result = Py_BuildValue("(NOOO)", out_inputs, PyTuple_GET_ITEM(outputs, 0), PyTuple_GET_ITEM(outputs, 1),
                                   PyTuple_GET_ITEM(outputs, 2));
  Py_DECREF(outputs);
  return result;
}

}  // namespace py
}  // namespace opforge
