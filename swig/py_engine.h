// Python entry points of the engine: graphs (opforge.graph) and async mode
// (opforge._async). Inputs arrive as Tensors (opforge.graph and
// opforge._async convert Python values first); attrs as dicts by name.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace opforge {
namespace py {

// Graphs. `graph` is the capsule graph_new() returns; nodes are ints.
PyObject* GraphNew();
PyObject* GraphPlaceholder(PyObject* graph, const char* name, PyObject* dtype, PyObject* shape, const char* where);
PyObject* GraphConstant(PyObject* graph, const char* name, PyObject* value, const char* where);
// Names are bases the graph makes unique (py_graph_views.h reads nodes).
// inputs: one item per input arg, a (node, output) pair or a list of pairs.
// Returns (node, number of outputs).
PyObject* GraphAddOp(PyObject* graph, const char* op_type, const char* name, const char* where, PyObject* inputs,
                     PyObject* attrs);
// feeds: list of (node, Tensor); fetches: list of (node, output).
// Returns (tuple of Tensors, stats dict). Runs without the GIL.
PyObject* GraphRun(PyObject* graph, PyObject* feeds, PyObject* fetches, int inter_op_threads);

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
