// Custom op libraries: loading them (staged, all-or-nothing registration)
// and calling their ops through one generic entry point.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "opforge/op.h"

namespace opforge {
namespace py {

// Converts a Python attr value by the attr's declared type (the generic
// path's conversion; errors name the op and the attr).
bool ConvertAnyAttr(PyObject* o, const char* op, const AttrDef& def, AttrValue* out);

// _pywrap_internal.execute(op_name, inputs, attrs): runs any registered op.
// inputs: a tuple with one item per input arg (a list arg: a sequence);
// attrs: a tuple with one item per non-inferred attr, in declaration order
// (what the generated wrappers pass). Same conversions and errors as the
// per-op SWIG entry points.
PyObject* ExecuteOp(const char* op_name, PyObject* inputs, PyObject* attrs);
// The same, returning (result, converted inputs flattened, completed attrs by
// name): what the hooks record (opforge/_hooks.py).
PyObject* ExecuteRecorded(const char* op_name, PyObject* inputs, PyObject* attrs);
// (input names, list-input flags, attr names, all parameter names in the
// wrappers' order) of an op.
PyObject* OpSignature(const char* op_name);

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
