// Python entry points of async mode (opforge._async) and the engine's
// inter-op pool size.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace opforge {
namespace py {


// Async mode. inputs: one item per input arg (a list for list args) of
// anything an op takes: Tensors (maybe pending), arrays, scalars, lists. Returns pending Tensor(s); call-site errors raise at once.
PyObject* AsyncSubmit(const char* op_type, PyObject* inputs, PyObject* attrs, const char* where);
// The async-mode hook itself (opforge._async installs it): takes an
// opforge._hooks.OpCall, submits it (or call.run() when it must run
// synchronously). AsyncHookInit gives the package directory whose frames
// the submitting file:line skips.
PyObject* AsyncHook(PyObject* call);
PyObject* AsyncHookInit(const char* package_dir);
PyObject* AsyncFlush();
PyObject* AsyncDrain();
PyObject* AsyncQueueSize();
PyObject* AsyncPending();
PyObject* IsPending(PyObject* tensor);
PyObject* InterOpThreads();

}  // namespace py
}  // namespace opforge
