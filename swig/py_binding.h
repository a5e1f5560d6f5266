// Module-level functions of the extension: initialisation, the registry's
// fingerprint and JSON, tensor conversion. (The op entry points' OpBinding
// is in py_call.h.)
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>
#include <vector>

#include "opforge/registry.h"
#include "registry_internal.h"
#include "py_convert.h"

namespace opforge {
namespace py {

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
// (name, value, numpy name, size, is_floating, is_integer) per dtype.
PyObject* DTypeTable();
// PromoteTypes for every pair: row a-1 holds, for b = 1.., the result's value (0: none).
PyObject* PromotionTable();

}  // namespace py
}  // namespace opforge
