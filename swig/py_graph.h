// Python entry points of graph mode (opforge.graph). Inputs arrive as
// Tensors (opforge.graph converts Python values first); attrs as dicts by name.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>

#include "opforge/attr.h"
#include "opforge/op.h"

namespace opforge {
namespace py {

// Graphs. `graph` is the capsule graph_new() returns; nodes are ints.
PyObject* GraphNew();
PyObject* GraphPlaceholder(PyObject* graph, const char* name, PyObject* dtype, PyObject* shape, const char* where);
PyObject* GraphConstant(PyObject* graph, const char* name, PyObject* value, const char* where);
// Adds a node for a call of `op_type` (graph building's one entry): `inputs`
// one item per input arg as the caller passed them (SymbolicTensors of
// `graph_obj`, whose handle `graph` is, or anything an eager call takes:
// those become constant nodes), bound by the binder (bind.h), whose output
// dtypes and shapes the node keeps. `where` None: the caller's file:line.
// Returns the output view (a tuple of them for several outputs), cached on
// `graph_obj`. Errors name the node and `where`.
PyObject* GraphAddCall(PyObject* graph_obj, PyObject* graph, const char* op_type, const char* base, PyObject* where,
                       PyObject* inputs, PyObject* attrs);
// The graph entry of the mode stack (mode_stack.h, kGraph; py_call.cc):
// the call of `op` (inputs per op input; attrs per op attr, unset where not
// given) as a node of `graph_obj` (an opforge.Graph), named after the op,
// built at the caller's file:line. Returns its output view(s).
PyObject* GraphEntry(PyObject* graph_obj, const OpDef& op, PyObject* const* inputs, AttrValue* attrs);
// True, with an error set naming the tensor, its graph and Session.run, when
// `obj` is a SymbolicTensor given to an eager call (it has no value).
bool RejectSymbolic(PyObject* obj, const char* op, const std::string& arg);
// Registers opforge.graph.SymbolicTensor, the view GraphAddCall recognizes.
PyObject* GraphInit(PyObject* symbolic_tensor_type);
// feeds: list of (node, Tensor); fetches: list of (node, output).
// resources: the Session's manager (py_state.h), None for the process's.
// Returns (tuple of Tensors, stats dict). Runs without the GIL.
PyObject* GraphRun(PyObject* graph, PyObject* feeds, PyObject* fetches, int inter_op_threads, PyObject* resources);
// Per-node timing of in-order graph runs (cpp/framework/run_profile.h):
// GraphProfile turns it on or off and returns the previous setting;
// GraphProfileTake returns [(node, op, ns), ...] recorded since, and clears.
PyObject* GraphProfile(bool on);
PyObject* GraphProfileTake();

}  // namespace py
}  // namespace opforge
