// What Python's Graph, Operation and SymbolicTensor views read: every fact
// of a graph lives in the C++ graph (cpp/framework/graph.h); a view holds
// the graph capsule, a node id and an output index, and asks here.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace opforge {
class Graph;
namespace py {

// The Graph of a graph_new() capsule; nullptr with an error set otherwise.
Graph* GraphOf(PyObject* capsule);

PyObject* GraphNumNodes(PyObject* graph);
// (type, name, location, number of outputs).
PyObject* GraphNode(PyObject* graph, int node);
// The node's inputs: a tuple of (node, output) pairs, flattened.
PyObject* GraphNodeInputs(PyObject* graph, int node);
// The node's attrs by name, completed (inferred and defaults included);
// a Placeholder has dtype and shape (None: unknown), a Const dtype and value.
PyObject* GraphNodeAttrs(PyObject* graph, int node);
// (dtype, shape) of one output; an unknown dim is None.
PyObject* GraphOutput(PyObject* graph, int node, int index);
PyObject* GraphUniqueName(PyObject* graph, const char* base);
// Per node, a tuple of the nodes reading its outputs (once per edge).
PyObject* GraphConsumers(PyObject* graph);

}  // namespace py
}  // namespace opforge
