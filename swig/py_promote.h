// Dtype promotion at the call site: the inputs of an elementwise op or a
// contraction that share a type attr are brought to one dtype by the
// promotion table (cpp/framework/dtype_promotion_args.h) before the call is
// bound. Each input that changes dtype goes through a Cast op call at the
// same mode level, so every mode sees it as the user would have written
// it: a Cast node in a graph, a taped Cast (its gradient casts back) when
// the input needs a gradient, a pending Cast in async mode.
#pragma once

#include <vector>

#include "numpy_api.h"
#include "bind.h"
#include "py_call.h"

namespace opforge {
namespace py {

// Runs an op call at mode entry `level` (py_call.cc).
PyObject* DispatchAt(const OpBinding& b, PyObject* const* args, size_t level, PyObject* call);

// For an op that promotes (b.promotes()): fills `promoted` with args where
// some input changed dtype (owning the Cast results in `owned`), and returns
// 1; 0 where nothing changes; -1 with an opforge.errors exception set.
int PromoteArgs(const OpBinding& b, PyObject* const* args, size_t level, std::vector<PyObject*>* promoted,
                std::vector<PyObject*>* owned);

// Shape-only binding (infer/bind, which dask's meta inference uses): the
// dtype-only inputs (kSymbolic) of an op that promotes take their promoted
// dtype, as the Cast of a real call would give them. Inputs with values are
// left as they are (the binder then refuses a mismatch). False with an
// opforge.errors exception set where the table has no common dtype.
bool PromoteShapeOnly(const OpBinding& b, BindInput* bound);

}  // namespace py
}  // namespace opforge
