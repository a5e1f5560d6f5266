// The gradient tape's recording path in C (opforge/autodiff reads what it
// builds): the per-thread gradient mode, the autograd state a Tensor's `_ag`
// slot holds (Meta) and the recorded op (Node, the `grad_fn` of its
// outputs). Every op call checks its inputs' `_ag` here, so recording needs
// no Python hook and the wrappers keep their one-branch fast path.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "opforge/op.h"
#include "opforge/tensor.h"

namespace opforge {
namespace py {

// True if some input (list args: some element) is a Tensor whose `_ag`
// requires a gradient, gradient mode is on in this thread and the op is
// differentiable (not declared NoGradient, or given a Python gradient).
// `inputs`: one object per input arg, list args already checked to be
// lists or tuples. Cheap when no input has autograd state.
bool WantsRecording(const OpDef& op, PyObject* const* inputs);

// Records a call WantsRecording approved: builds its Node from the caller's
// inputs (those that require a gradient) and the converted ones (saved,
// copied when they borrow writable numpy memory), the completed attrs and
// the outputs, and sets the `_ag` of every floating-point output in
// `result` (a Tensor or a tuple of them). False with an error set.
bool RecordCall(const OpDef& op, PyObject* const* inputs, const Tensor* tensors, size_t num_tensors,
                const AttrValue* attrs, PyObject* result);

// Module functions (pywrap_internal.i).
// (Meta, Node): the types, for opforge.autodiff; `python_gradients` is the
// dict of RegisterGradient's functions by op type (it overrides NoGradient).
PyObject* AutogradInit(PyObject* python_gradients);
PyObject* GradEnabled();
PyObject* SetGradEnabled(PyObject* enabled);  // returns the previous mode

}  // namespace py
}  // namespace opforge
