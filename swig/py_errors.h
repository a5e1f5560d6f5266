// Maps opforge::Status onto the opforge.errors classes.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "opforge/status.h"

namespace opforge {
namespace py {

// `classes`: a tuple indexed by opforge::Code (index 0, kOk, holds OpError).
bool InitErrorClasses(PyObject* classes);

// Sets the Python exception for a non-OK status. Always returns nullptr.
PyObject* SetError(const Status& s);

// Shorthand: sets InvalidArgumentError "<op>: <message>".
PyObject* SetInvalidArgument(const char* op, const std::string& message);

}  // namespace py
}  // namespace opforge
