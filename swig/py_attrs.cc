// Python values -> typed attrs. Errors are InvalidArgumentError naming the op
// and the attr; None always means "not given" (the executor applies defaults).
#include <limits>

#include "numpy_api.h"
#include "py_convert.h"
#include "py_dtypes.h"
#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

std::string TypeName(PyObject* o) { return Py_TYPE(o)->tp_name; }

bool Fail(const char* op, const char* name, const std::string& expected, PyObject* got) {
  SetInvalidArgument(op, "attr '" + std::string(name) + "' must be " + expected + ", not " + TypeName(got));
  return false;
}

bool IsBoolLike(PyObject* o) { return PyBool_Check(o) || PyArray_IsScalar(o, Bool); }

// Python ints and objects with __index__ (numpy integers), but not bools.
bool ToInt(PyObject* o, const char* op, const char* name, int64_t* out) {
  if (IsBoolLike(o) || !PyIndex_Check(o)) return Fail(op, name, "an int", o);
  PyObject* idx = PyNumber_Index(o);
  if (!idx) return false;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
  Py_DECREF(idx);
  if (overflow) {
    SetInvalidArgument(op, "attr '" + std::string(name) + "' is out of int64 range");
    return false;
  }
  *out = v;
  return true;
}

bool ToFloat(PyObject* o, const char* op, const char* name, double* out) {
  if (IsBoolLike(o) || !(PyFloat_Check(o) || PyLong_Check(o) || PyArray_IsScalar(o, Number))) {
    return Fail(op, name, "a float", o);
  }
  double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();  // e.g. OverflowError for 10**400: still the attr's fault
    SetInvalidArgument(op, "attr '" + std::string(name) + "' is out of float64 range");
    return false;
  }
  *out = v;
  return true;
}

// A single item or a sequence of items (a tuple, list or 1-D array).
template <typename T, typename F>
bool ToList(PyObject* o, const char* op, const char* name, const std::string& expected, bool single_ok,
            std::vector<T>* out, F convert_item) {
  if (single_ok && !PyList_Check(o) && !PyTuple_Check(o) && !PyArray_Check(o)) {
    T v;
    if (!convert_item(o, &v)) return false;
    out->push_back(v);
    return true;
  }
  if (PyUnicode_Check(o) || PyBytes_Check(o)) return Fail(op, name, expected, o);
  PyObject* seq = PySequence_Fast(o, "");
  if (!seq) {
    PyErr_Clear();
    return Fail(op, name, expected, o);
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  out->reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    T v;
    if (!convert_item(PySequence_Fast_GET_ITEM(seq, i), &v)) {
      Py_DECREF(seq);
      return false;
    }
    out->push_back(v);
  }
  Py_DECREF(seq);
  return true;
}

}  // namespace

bool ToDType(PyObject* o, DType* out) {
  for (int t = 1; t < kNumDTypes; ++t) {
    if (o == DTypeObject(static_cast<DType>(t))) { *out = static_cast<DType>(t); return true; }
  }
  if (PyUnicode_Check(o)) {
    const char* s = PyUnicode_AsUTF8(o);
    if (s && DTypeFromName(s, out)) return true;
  }
  if (o == Py_None) return false;
  PyArray_Descr* descr = nullptr;
  if (!PyArray_DescrConverter2(o, &descr) || descr == nullptr) {
    PyErr_Clear();
    return false;
  }
  const bool known = DTypeFromDescr(descr, out);
  Py_DECREF(descr);
  if (!known) *out = DType::kInvalid;
  return *out != DType::kInvalid;
}

#define OPFORGE_NONE_IS_UNSET(o, out)        \
  if ((o) == Py_None) {                      \
    (out)->value = AttrValue::None();        \
    return true;                             \
  }                                          \
  (out)->value.kind = AttrValue::kValue

bool ConvertAttr(PyObject* o, const char* op, const char* name, IntAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  return ToInt(o, op, name, &out->value.i);
}

bool ConvertAttr(PyObject* o, const char* op, const char* name, FloatAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  return ToFloat(o, op, name, &out->value.f);
}

bool ConvertAttr(PyObject* o, const char* op, const char* name, BoolAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  if (!IsBoolLike(o)) return Fail(op, name, "a bool", o);
  out->value.b = PyObject_IsTrue(o) == 1;
  return true;
}

bool ConvertAttr(PyObject* o, const char* op, const char* name, StringAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  if (!PyUnicode_Check(o)) return Fail(op, name, "a str", o);
  const char* s = PyUnicode_AsUTF8(o);
  if (!s) return false;
  out->value.s = s;
  return true;
}

bool ConvertAttr(PyObject* o, const char* op, const char* name, TypeAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  if (!ToDType(o, &out->value.type)) {
    return Fail(op, name, "an opforge dtype (opforge.float32, numpy.float32 or 'float32'; one of float32, "
                          "float64, int32, int64, bool)", o);
  }
  return true;
}

bool ConvertAttr(PyObject* o, const char* op, const char* name, ShapeAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  return ToList<int64_t>(o, op, name, "a shape (a sequence of ints)", true, &out->value.list_i,
                         [&](PyObject* item, int64_t* v) { return ToInt(item, op, name, v); });
}

bool ConvertAttr(PyObject* o, const char* op, const char* name, IntListAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  return ToList<int64_t>(o, op, name, "an int or a sequence of ints", true, &out->value.list_i,
                         [&](PyObject* item, int64_t* v) { return ToInt(item, op, name, v); });
}

bool ConvertAttr(PyObject* o, const char* op, const char* name, FloatListAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  return ToList<double>(o, op, name, "a float or a sequence of floats", true, &out->value.list_f,
                        [&](PyObject* item, double* v) { return ToFloat(item, op, name, v); });
}

bool ConvertAttr(PyObject* o, const char* op, const char* name, TypeListAttr* out) {
  OPFORGE_NONE_IS_UNSET(o, out);
  return ToList<DType>(o, op, name, "a sequence of dtypes", false, &out->value.list_type,
                       [&](PyObject* item, DType* v) {
                         if (ToDType(item, v)) return true;
                         return Fail(op, name, "a sequence of opforge dtypes", item);
                       });
}

PyObject* AttrToPython(const AttrDef& def, const AttrValue& v) {
  if (!v.is_set() || v.is_none()) Py_RETURN_NONE;
  auto list = [](const auto& items, auto convert) -> PyObject* {
    PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(items.size()));
    for (size_t i = 0; t && i < items.size(); ++i) {
      PyObject* item = convert(items[i]);
      if (!item) {
        Py_DECREF(t);
        return nullptr;
      }
      PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), item);
    }
    return t;
  };
  auto dtype = [](DType d) {
    PyObject* o = DTypeObject(d);
    Py_INCREF(o);
    return o;
  };
  switch (def.type) {
    case AttrType::kInt: return PyLong_FromLongLong(v.i);
    case AttrType::kFloat: return PyFloat_FromDouble(v.f);
    case AttrType::kBool: return PyBool_FromLong(v.b);
    case AttrType::kString: return PyUnicode_FromStringAndSize(v.s.data(), static_cast<Py_ssize_t>(v.s.size()));
    case AttrType::kType: return dtype(v.type);
    case AttrType::kShape:
    case AttrType::kListInt: return list(v.list_i, [](int64_t x) { return PyLong_FromLongLong(x); });
    case AttrType::kListFloat: return list(v.list_f, [](double x) { return PyFloat_FromDouble(x); });
    case AttrType::kListType: return list(v.list_type, dtype);
  }
  Py_RETURN_NONE;
}

namespace {

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

}  // namespace py
}  // namespace opforge
