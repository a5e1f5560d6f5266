#include "py_dtypes.h"

#include <cstring>
#include <string>

namespace opforge {
namespace py {
namespace {

int BuiltinTypeNum(DType t) {
  switch (t) {
    case DType::kFloat32: return NPY_FLOAT32;
    case DType::kFloat64: return NPY_FLOAT64;
    case DType::kInt32: return NPY_INT32;
    case DType::kInt64: return NPY_INT64;
    case DType::kBool: return NPY_BOOL;
    case DType::kFloat16: return NPY_FLOAT16;
    case DType::kInt8: return NPY_INT8;
    case DType::kUInt8: return NPY_UINT8;
    case DType::kInt16: return NPY_INT16;
    case DType::kUInt16: return NPY_UINT16;
    case DType::kUInt32: return NPY_UINT32;
    case DType::kUInt64: return NPY_UINT64;
    default: return -1;  // bfloat16 (ml_dtypes), kInvalid
  }
}

// ml_dtypes' type is "ml_dtypes.bfloat16"; TensorFlow's and older JAX's
// bfloat16 share its layout and name.
bool IsBFloat16Descr(PyArray_Descr* d) {
  if (d->kind != 'V' || PyDataType_ELSIZE(d) != 2 || d->typeobj == nullptr) return false;
  const char* name = d->typeobj->tp_name;
  const char* dot = std::strrchr(name, '.');
  return std::strcmp(dot ? dot + 1 : name, "bfloat16") == 0;
}

PyArray_Descr* bfloat16_descr = nullptr;  // imported once, kept for the process

}  // namespace

bool DTypeFromDescr(PyArray_Descr* d, DType* out) {
  const int size = static_cast<int>(PyDataType_ELSIZE(d));
  *out = DType::kInvalid;
  switch (d->kind) {
    case 'f':
      *out = size == 4 ? DType::kFloat32 : size == 8 ? DType::kFloat64 : size == 2 ? DType::kFloat16 : DType::kInvalid;
      break;
    case 'i':
      *out = size == 1   ? DType::kInt8
             : size == 2 ? DType::kInt16
             : size == 4 ? DType::kInt32
             : size == 8 ? DType::kInt64
                         : DType::kInvalid;
      break;
    case 'u':
      *out = size == 1   ? DType::kUInt8
             : size == 2 ? DType::kUInt16
             : size == 4 ? DType::kUInt32
             : size == 8 ? DType::kUInt64
                         : DType::kInvalid;
      break;
    case 'b': *out = DType::kBool; break;
    case 'V':
      if (IsBFloat16Descr(d)) *out = DType::kBFloat16;
      break;
    default: break;
  }
  return *out != DType::kInvalid;
}

PyArray_Descr* NumpyDescr(DType t) {
  const int num = BuiltinTypeNum(t);
  if (num >= 0) return PyArray_DescrFromType(num);
  if (t != DType::kBFloat16) {
    PyErr_Format(PyExc_TypeError, "opforge dtype %s has no numpy dtype", DTypeName(t));
    return nullptr;
  }
  if (!bfloat16_descr) {
    PyObject* mod = PyImport_ImportModule("ml_dtypes");
    if (!mod) {
      PyErr_Clear();
      PyErr_SetString(PyExc_ImportError,
                      "a bfloat16 tensor becomes a numpy array through the ml_dtypes package, which is not "
                      "installed: pip install 'opforge[ml_dtypes]' (or cast it to float32 first)");
      return nullptr;
    }
    PyObject* type = PyObject_GetAttrString(mod, "bfloat16");
    Py_DECREF(mod);
    if (!type) return nullptr;
    PyArray_Descr* d = nullptr;
    const int ok = PyArray_DescrConverter(type, &d);
    Py_DECREF(type);
    if (!ok) return nullptr;
    bfloat16_descr = d;  // keeps the reference
  }
  Py_INCREF(bfloat16_descr);
  return bfloat16_descr;
}

const char* BufferFormat(DType t) {
  switch (t) {
    case DType::kFloat32: return "f";
    case DType::kFloat64: return "d";
    case DType::kInt32: return "i";
    case DType::kInt64: return "q";
    case DType::kBool: return "?";
    case DType::kFloat16: return "e";
    case DType::kBFloat16: return "H";
    case DType::kInt8: return "b";
    case DType::kUInt8: return "B";
    case DType::kInt16: return "h";
    case DType::kUInt16: return "H";
    case DType::kUInt32: return "I";
    case DType::kUInt64: return "Q";
    default: return "B";
  }
}

const char* SupportedNumpyDTypes() {
  static const std::string text = [] {
    std::string s;
    for (int i = 1; i < kNumDTypes; ++i) {
      if (!s.empty()) s += ", ";
      s += DTypeName(static_cast<DType>(i));
      if (static_cast<DType>(i) == DType::kBFloat16) s += " (ml_dtypes)";
    }
    return s;
  }();
  return text.c_str();
}

}  // namespace py
}  // namespace opforge
