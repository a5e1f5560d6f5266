// Dtype promotion at the call site (py_promote.h).
#include "py_promote.h"

#include <cstring>

#include "dtype_promotion_args.h"
#include "py_convert.h"
#include "py_dtypes.h"
#include "py_errors.h"
#include "py_state.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

// A strong input's dtype, or kInvalid for a weak value (a Python scalar or
// list) and for what the binder will refuse anyway.
DType StrongDType(PyObject* obj) {
  obj = UnwrapVariable(obj);
  if (IsTensor(obj)) return TensorOf(obj).dtype();
  DType d = DType::kInvalid;
  if (PyArray_Check(obj)) {
    if (!DTypeFromDescr(PyArray_DESCR(reinterpret_cast<PyArrayObject*>(obj)), &d)) d = DType::kInvalid;
    return d;
  }
  if (PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj) || PyList_Check(obj) || PyTuple_Check(obj)) {
    return DType::kInvalid;
  }
  if (PyArray_IsScalar(obj, Generic)) {
    PyArray_Descr* descr = PyArray_DescrFromScalar(obj);
    if (descr == nullptr || !DTypeFromDescr(descr, &d)) d = DType::kInvalid;
    Py_XDECREF(descr);
    PyErr_Clear();
    return d;
  }
  // A graph's SymbolicTensor (or another object with an opforge dtype).
  static PyObject* s_dtype = PyUnicode_InternFromString("dtype");
  PyObject* dt = PyObject_GetAttr(obj, s_dtype);
  if (dt == nullptr) {
    PyErr_Clear();
    return DType::kInvalid;
  }
  if (!ToDType(dt, &d)) {
    // Another library's dtype object (torch.bfloat16): its name after the last dot.
    d = DType::kInvalid;
    PyErr_Clear();
    PyObject* text = PyObject_Str(dt);
    const char* s = text ? PyUnicode_AsUTF8(text) : nullptr;
    if (s != nullptr) {
      const char* dot = std::strrchr(s, '.');
      if (!DTypeFromName(dot ? dot + 1 : s, &d)) d = DType::kInvalid;
    }
    Py_XDECREF(text);
  }
  Py_DECREF(dt);
  PyErr_Clear();
  return d;
}

}  // namespace

int PromoteArgs(const OpBinding& b, PyObject* const* args, size_t level, std::vector<PyObject*>* promoted,
                std::vector<PyObject*>* owned) {
  const OpDef& op = *b.op();
  const size_t n = op.inputs.size();
  InlinedVector<DType, 4> dtypes(n), before(n);
  bool differ = false;  // two strong inputs sharing a type attr differ: the common case is no
  for (size_t a = 0; a < n; ++a) {
    dtypes[a] = before[a] = op.inputs[a].fixed_type != DType::kInvalid ? DType::kInvalid
                                                                       : StrongDType(args[b.input_pos()[a]]);
    for (size_t c = 0; c < a && !differ; ++c) {
      differ = dtypes[a] != DType::kInvalid && dtypes[c] != DType::kInvalid && dtypes[a] != dtypes[c] &&
               op.inputs[a].type_attr_index == op.inputs[c].type_attr_index;
    }
  }
  if (!differ) return 0;
  bool changed = false;
  Status s = PromoteInputDTypes(op, dtypes.data(), &changed);
  if (!s.ok()) {
    SetError(s.WithPrefix(op.name + ": "));
    return -1;
  }
  if (!changed) return 0;
  static const OpBinding* cast = FindBinding("Cast");
  if (cast == nullptr) return -1;
  const OpDef& cast_op = *cast->op();
  promoted->assign(args, args + op.params.size());
  for (size_t a = 0; a < n; ++a) {
    if (dtypes[a] == before[a]) continue;
    std::vector<PyObject*> cast_args(cast_op.params.size(), Py_None);
    cast_args[cast->input_pos()[0]] = args[b.input_pos()[a]];
    for (const auto& [i, pos] : cast->attr_pos()) {
      if (cast_op.attrs[i].name == "dtype") cast_args[pos] = DTypeObject(dtypes[a]);
    }
    PyObject* r = DispatchAt(*cast, cast_args.data(), level, nullptr);
    if (r == nullptr) return -1;
    owned->push_back(r);
    (*promoted)[b.input_pos()[a]] = r;
  }
  return 1;
}

bool PromoteShapeOnly(const OpBinding& b, BindInput* bound) {
  const OpDef& op = *b.op();
  const size_t n = op.inputs.size();
  InlinedVector<DType, 4> dtypes(n);
  for (size_t a = 0; a < n; ++a) {
    const BindInput& in = bound[a];
    dtypes[a] = in.kind == BindInput::kSymbolic                          ? in.dtype
                : in.kind == BindInput::kTensor || in.kind == BindInput::kPending ? in.tensor.dtype()
                                                                         : DType::kInvalid;
  }
  InlinedVector<DType, 4> promoted(n);
  for (size_t a = 0; a < n; ++a) promoted[a] = dtypes[a];
  bool changed = false;
  Status s = PromoteInputDTypes(op, promoted.data(), &changed);
  if (!s.ok()) {
    SetError(s.WithPrefix(op.name + ": "));
    return false;
  }
  for (size_t a = 0; changed && a < n; ++a) {
    if (promoted[a] != dtypes[a] && bound[a].kind == BindInput::kSymbolic) bound[a].dtype = promoted[a];
  }
  return true;
}

}  // namespace py
}  // namespace opforge
