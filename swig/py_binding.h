// What the generated SWIG entry points call: one OpBinding per op, resolved
// once (op def, attr slots), then Call() per invocation.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "executor.h"
#include "opforge/registry.h"
#include "registry_internal.h"
#include "py_convert.h"

namespace opforge {
namespace py {

class OpBinding {
 public:
  // `attr_names`: the attrs the entry point passes, in its parameter order.
  OpBinding(const char* op_name, std::initializer_list<const char*> attr_names);
  // The same, with names known only at run time (the generic execute path).
  OpBinding(const std::string& op_name, const std::vector<std::string>& attr_names);

  // inputs: one PyObject per input arg (a list arg: one Python sequence).
  // attrs: one per attr name given at construction (moved from).
  // Returns a new opforge.Tensor (a tuple for several outputs), or nullptr
  // with an opforge.errors exception set. With `recorded`, also sets it to
  // a new (converted inputs flattened, completed attrs by name) pair, which
  // is what the hooks record (opforge/_hooks.py).
  PyObject* Call(PyObject* const* inputs, AttrValue* attrs, PyObject** recorded = nullptr) const;

 private:
  std::string name_;
  const OpDef* op_;            // nullptr if the op is not registered
  std::vector<int> attr_slots_;  // index into op_->attrs per given attr
};

// Module-level functions exposed to Python (see pywrap_internal.i).
PyObject* Init(PyObject* tensor_methods, PyObject* dtypes, PyObject* error_classes);
PyObject* CheckFingerprint(const char* group, const char* expected);
PyObject* ToTensor(PyObject* value, PyObject* dtype);
PyObject* RegistryJson();
PyObject* RegistrationErrors();
// Parses and validates a declaration without registering it (for tests and
// tools, the DSL fuzzer): specs is a sequence of ("input"|"output"|"attr"|"doc"|
// "gradient"|"no_gradient", text).
PyObject* ValidateDeclaration(const char* name, PyObject* specs);

}  // namespace py
}  // namespace opforge
