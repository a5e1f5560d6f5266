#include "py_binding.h"

#include <string>

#include "numpy_api.h"
#include "py_autograd.h"
#include "opforge/registry.h"
#include "py_convert.h"
#include "registry_internal.h"
#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {

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
  DType want = DType::kInvalid;
  if (dtype != Py_None && !ToDType(dtype, &want)) {
    return SetInvalidArgument(op, std::string("argument 'dtype' is not an opforge dtype: ") + Py_TYPE(dtype)->tp_name);
  }
  BindInput in;
  if (!ToBindInput(value, op, "value", false, &in)) return nullptr;
  if (in.kind == BindInput::kWeak) {
    Status s = ResolveWeak(&in, want, "value", "argument 'dtype'");
    if (!s.ok()) return SetError(s.WithPrefix(std::string(op) + ": "));
  } else if (want != DType::kInvalid && in.tensor.dtype() != want) {
    return SetInvalidArgument(op, std::string("argument 'value' has dtype ") + DTypeName(in.tensor.dtype()) +
                                      " but dtype is " + DTypeName(want) + "; use cast");
  }
  return WrapTensor(std::move(in.tensor));
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
    else if (k == "transpose_attr") {  // "input attr"
      const std::string t = text;
      const size_t space = t.find(' ');
      builder.TransposeAttr(t.substr(0, space), space == std::string::npos ? "" : t.substr(space + 1));
    }
  }
  Py_DECREF(seq);
  builder.SetShapeFn(shape_fns::Unchanged);
  OpDef def;
  Status s = builder.Finalize(&def);
  if (!s.ok()) return SetError(s);
  Py_RETURN_NONE;
}

PyObject* DTypeTable() {
  PyObject* out = PyTuple_New(kNumDTypes - 1);
  if (!out) return nullptr;
  for (int i = 1; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    PyObject* row = Py_BuildValue("(sisnNN)", DTypeName(t), i, DTypeNumpyName(t),
                                  static_cast<Py_ssize_t>(DTypeSize(t)), PyBool_FromLong(IsFloating(t)),
                                  PyBool_FromLong(IsInteger(t)));
    if (!row) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, i - 1, row);
  }
  return out;
}

PyObject* PromotionTable() {
  PyObject* out = PyTuple_New(kNumDTypes - 1);
  if (!out) return nullptr;
  for (int a = 1; a < kNumDTypes; ++a) {
    PyObject* row = PyTuple_New(kNumDTypes - 1);
    if (!row) {
      Py_DECREF(out);
      return nullptr;
    }
    for (int b = 1; b < kNumDTypes; ++b) {
      DType r = DType::kInvalid;
      PromoteTypes(static_cast<DType>(a), static_cast<DType>(b), &r);
      PyTuple_SET_ITEM(row, b - 1, PyLong_FromLong(static_cast<int>(r)));
    }
    PyTuple_SET_ITEM(out, a - 1, row);
  }
  return out;
}

}  // namespace py
}  // namespace opforge
