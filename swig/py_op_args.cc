#include "py_op_args.h"

#include "opforge/registry.h"

namespace opforge {
namespace py {

const OpDef* FindOp(const char* op_type) {
  const OpDef* op = OpRegistry::Global()->Find(op_type);
  if (!op) SetError(errors::NotFound(op_type, ": op is not registered (load its library with opforge.load_op_library)"));
  return op;
}

// attrs: a dict of user attrs by name (None: not given).
bool ConvertAttrs(const OpDef& op, PyObject* dict, std::vector<AttrValue>* out) {
  out->assign(op.attrs.size(), AttrValue());
  if (dict == Py_None) return true;
  if (!PyDict_Check(dict)) return SetInvalidArgument(op.name.c_str(), "attrs must be a dict") != nullptr;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict, &pos, &key, &value)) {
    const char* name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
    const int i = name ? op.FindAttr(name) : -1;
    if (i < 0 || op.attrs[i].inferred) {
      // Inferred attrs (T, N) may be passed only when consistent: checked by inference.
      if (i >= 0 && value != Py_None) {
        if (!ConvertAnyAttr(value, op.name.c_str(), op.attrs[i], &(*out)[i])) return false;
        continue;
      }
      if (i >= 0) continue;
      return SetInvalidArgument(op.name.c_str(), std::string("unknown attr '") + (name ? name : "?") + "'") != nullptr;
    }
    if (!ConvertAnyAttr(value, op.name.c_str(), op.attrs[i], &(*out)[i])) return false;
  }
  return true;
}

// A Tensor argument (maybe pending); false with an error set otherwise.
bool TensorArg(PyObject* obj, const char* op, const std::string& arg) {
  if (IsTensor(obj)) return true;
  SetInvalidArgument(op, "argument '" + arg + "' must be an opforge.Tensor here, not " + Py_TYPE(obj)->tp_name);
  return false;
}

}  // namespace py
}  // namespace opforge
