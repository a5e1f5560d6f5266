// Shape-only inference and the dtype table, for Python.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace opforge {
namespace py {

// _pywrap_internal.infer(op_type, inputs, attrs) -> (output_dtypes,
// output_shapes, completed_attrs). `inputs`: a tuple with one entry per input
// arg, a (dtype, shape) pair or, for a list arg, a list of pairs; `attrs`: a
// dict of attrs by name (user attrs; inferred ones may be given too). Runs
// what eager execution runs before the kernel (type-attr inference, attr
// completion and validation, the C++ shape function) without any tensor,
// and raises the same opforge.errors. completed_attrs has every attr
// (inferred T and N and defaults included) as OpCall.completed_attrs has
// them: lists and shapes as tuples, dtypes as opforge DTypes, None for none.
PyObject* Infer(const char* op_type, PyObject* inputs, PyObject* attrs);

// _pywrap_internal.dtype_table() -> tuple of (name, enum, numpy name, size,
// is_floating, is_integer), one per dtype of cpp/include/opforge/dtype.h.
PyObject* DTypeTable();

}  // namespace py
}  // namespace opforge
