// What a generated entry point is from Python: Python's argument rules
// (parameters by keyword, declared defaults for those left out, the
// TypeErrors Python gives for a call that does not fit) and the public
// function object that gen_<group>_ops.py exports, which is the entry point
// itself under the op's Python name, signature and docstring: a call from
// Python reaches the binder with no Python frame in between.
#include <cstring>
#include <deque>
#include <string>

#include "opforge/inlined_vector.h"
#include "py_call.h"
#include "py_convert.h"

namespace opforge {
namespace py {

// Only calls that are not one positional argument per parameter come here
// (py_call.cc: OpBinding::CallFast).
PyObject* OpBinding::CallWithKeywords(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) const {
  const size_t n = op_->params.size();
  const char* fn = py_name_.c_str();
  if (static_cast<size_t>(nargs) > n) {
    PyErr_Format(PyExc_TypeError, "%s() takes %zu positional argument%s but %zd %s given", fn, n, n == 1 ? "" : "s",
                 nargs, nargs == 1 ? "was" : "were");
    return nullptr;
  }
  InlinedVector<PyObject*, 8> full(n);
  for (size_t i = 0; i < n; ++i) full[i] = i < static_cast<size_t>(nargs) ? args[i] : nullptr;
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    const char* name = PyUnicode_AsUTF8(key);
    if (name == nullptr) return nullptr;
    size_t j = 0;
    while (j < n && std::strcmp(py_params_[j].c_str(), name) != 0) ++j;
    if (j == n) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", fn, name);
      return nullptr;
    }
    if (full[j] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn, name);
      return nullptr;
    }
    full[j] = args[nargs + k];
  }
  if (defaults_.empty()) {  // under the GIL, once: the declared defaults as the Python wrappers spell them
    std::vector<PyObject*> made(n, nullptr);
    for (size_t j = 0; j < n; ++j) {
      const int a = op_->FindAttr(op_->params[j]);
      if (a < 0 || op_->FindInput(op_->params[j]) >= 0 || !op_->attrs[a].has_default) continue;
      made[j] = AttrToPython(op_->attrs[a], op_->attrs[a].default_value);
      if (made[j] == nullptr) {
        for (PyObject* o : made) Py_XDECREF(o);
        return nullptr;
      }
    }
    defaults_ = std::move(made);  // kept for the process's life, as the binding is
  }
  for (size_t j = 0; j < n; ++j) {
    if (full[j] != nullptr) continue;
    if (defaults_[j] == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %zu)", fn, py_params_[j].c_str(),
                   j + 1);
      return nullptr;
    }
    full[j] = defaults_[j];
  }
  return Call(full.data());
}

PyObject* PublicEntry(PyObject* entry, const char* name, const char* module, const char* doc) {
  // Only the generated entry points (they ignore self): another builtin's
  // function called without its self would crash.
  PyObject* owner = PyCFunction_Check(entry) ? PyCFunction_GET_SELF(entry) : nullptr;
  const char* owner_name = owner != nullptr && PyModule_Check(owner) ? PyModule_GetName(owner) : nullptr;
  if (owner_name == nullptr || std::strstr(owner_name, "_pywrap_internal") == nullptr ||
      PyCFunction_GET_FLAGS(entry) != (METH_FASTCALL | METH_KEYWORDS)) {
    PyErr_Clear();
    PyErr_SetString(PyExc_TypeError, "public_entry: 'entry' must be a generated entry point of the extension");
    return nullptr;
  }
  // The method definitions live as long as the process (op functions are
  // never dropped); a deque never moves what it holds.
  static auto* names = new std::deque<std::string>();
  static auto* defs = new std::deque<PyMethodDef>();
  names->emplace_back(name);
  const char* kept_name = names->back().c_str();
  names->emplace_back(doc);
  defs->push_back(PyMethodDef{kept_name, PyCFunction_GET_FUNCTION(entry), PyCFunction_GET_FLAGS(entry),
                              names->back().c_str()});
  PyObject* mod = PyUnicode_FromString(module);
  if (mod == nullptr) return nullptr;
  // No self: pickle and copy find the function by __module__ and __name__.
  PyObject* f = PyCFunction_NewEx(&defs->back(), nullptr, mod);
  Py_DECREF(mod);
  return f;
}

}  // namespace py
}  // namespace opforge
