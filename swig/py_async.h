// Async mode: submitting a bound call to the engine, and the Python entry
// points of opforge._async (flush, drain, queue sizes; the engine's
// inter-op pool size).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>

#include "bind.h"

namespace opforge {
namespace py {

// Async mode's entry (py_call.cc hands it a bound call): queues the op on
// the engine and returns its pending Tensor(s). Numpy memory it borrows is
// copied first. `where`: the submitting file:line, named by kernel errors.
PyObject* SubmitBound(BoundCall& bc, std::string where);

// Module functions (pywrap_internal.i).
PyObject* AsyncFlush();
PyObject* AsyncDrain();
PyObject* AsyncQueueSize();
PyObject* AsyncPending();
PyObject* IsPending(PyObject* tensor);
PyObject* InterOpThreads();

}  // namespace py
}  // namespace opforge
