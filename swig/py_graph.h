// Python entry points of graph mode (opforge.graph). Inputs arrive as
// Tensors (opforge.graph converts Python values first); attrs as dicts by name.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace opforge {
namespace py {

// Graphs. `graph` is the capsule graph_new() returns; nodes are ints.
PyObject* GraphNew();
PyObject* GraphPlaceholder(PyObject* graph, const char* name, PyObject* dtype, PyObject* shape, const char* where);
PyObject* GraphConstant(PyObject* graph, const char* name, PyObject* value, const char* where);
// inputs: one item per input arg, a (node, output) pair or a list of pairs.
// Returns (node, dtypes, shapes, completed attrs dict).
PyObject* GraphAddOp(PyObject* graph, const char* op_type, const char* name, const char* where, PyObject* inputs,
                     PyObject* attrs);
// feeds: list of (node, Tensor); fetches: list of (node, output).
// Returns (tuple of Tensors, stats dict). Runs without the GIL.
PyObject* GraphRun(PyObject* graph, PyObject* feeds, PyObject* fetches, int inter_op_threads);

}  // namespace py
}  // namespace opforge
