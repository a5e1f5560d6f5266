// Custom op libraries: loading them (staged, all-or-nothing registration).
// Their ops are called through the generic entry point (py_call.h).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "opforge/op.h"

namespace opforge {
namespace py {

// _pywrap_internal._load_library(path, accept) -> list of the op names it
// added. dlopens `path` with its registrations staged, checks them, calls
// accept(staged registry JSON) (which may raise to refuse), then commits
// them all or none. On refusal the library is closed again, the registry is
// as before and an opforge.errors exception (or accept's) says why. The
// caller (opforge.load_op_library) has already checked the library's stamp.
PyObject* LoadLibrary(const char* path, PyObject* accept);

// _pywrap_internal.stamp(): this build's stamp (see opforge/stamp.h).
PyObject* Stamp();

}  // namespace py
}  // namespace opforge
