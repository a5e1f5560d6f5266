#include "py_graph_views.h"

#include <string>
#include <vector>

#include "../cpp/framework/graph.h"
#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

constexpr const char* kCapsule = "opforge.Graph";

// The node, or nullptr with an error set.
const opforge::GraphNode* NodeOf(PyObject* graph, int id) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  if (id < 0 || id >= g->num_nodes()) {
    SetError(errors::InvalidArgument("graph node ", id, " does not exist"));
    return nullptr;
  }
  return &g->node(id);
}

PyObject* DTypePy(DType t) {
  PyObject* d = DTypeObject(t);
  Py_XINCREF(d);
  return d;
}

// An unknown dim (-1) is None, as Python shapes write it.
PyObject* ShapeTuple(const TensorShape& s) {
  PyObject* t = PyTuple_New(s.rank());
  for (int i = 0; t && i < s.rank(); ++i) {
    PyObject* d;
    if (s.dim(i) < 0) {
      d = Py_None;
      Py_INCREF(d);
    } else {
      d = PyLong_FromLongLong(s.dim(i));
    }
    PyTuple_SET_ITEM(t, i, d);
  }
  return t;
}

PyObject* IntList(const std::vector<int64_t>& v) {
  PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.size()));
  for (size_t i = 0; l && i < v.size(); ++i) PyList_SET_ITEM(l, i, PyLong_FromLongLong(v[i]));
  return l;
}

PyObject* AttrToPy(const AttrDef& def, const AttrValue& v) {
  if (!v.is_set() || v.is_none()) Py_RETURN_NONE;
  switch (def.type) {
    case AttrType::kInt: return PyLong_FromLongLong(v.i);
    case AttrType::kFloat: return PyFloat_FromDouble(v.f);
    case AttrType::kBool: return PyBool_FromLong(v.b);
    case AttrType::kString: return PyUnicode_FromStringAndSize(v.s.data(), static_cast<Py_ssize_t>(v.s.size()));
    case AttrType::kType: return DTypePy(v.type);
    case AttrType::kShape:
    case AttrType::kListInt: return IntList(v.list_i);
    case AttrType::kListFloat: {
      PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.list_f.size()));
      for (size_t i = 0; l && i < v.list_f.size(); ++i) PyList_SET_ITEM(l, i, PyFloat_FromDouble(v.list_f[i]));
      return l;
    }
    case AttrType::kListType: {
      PyObject* l = PyList_New(static_cast<Py_ssize_t>(v.list_type.size()));
      for (size_t i = 0; l && i < v.list_type.size(); ++i) PyList_SET_ITEM(l, i, DTypePy(v.list_type[i]));
      return l;
    }
  }
  Py_RETURN_NONE;
}

bool SetItem(PyObject* dict, const char* key, PyObject* value) {
  if (!value) return false;
  const int rc = PyDict_SetItemString(dict, key, value);
  Py_DECREF(value);
  return rc == 0;
}

}  // namespace

Graph* GraphOf(PyObject* capsule) {
  void* p = PyCapsule_GetPointer(capsule, kCapsule);
  if (!p) {
    PyErr_Clear();
    SetError(errors::InvalidArgument("expected a graph handle from graph_new()"));
  }
  return static_cast<Graph*>(p);
}

PyObject* GraphNumNodes(PyObject* graph) {
  Graph* g = GraphOf(graph);
  return g ? PyLong_FromLong(g->num_nodes()) : nullptr;
}

PyObject* GraphNode(PyObject* graph, int id) {
  const opforge::GraphNode* n = NodeOf(graph, id);
  if (!n) return nullptr;
  const char* type = n->op ? n->op->name.c_str() : n->kind == opforge::GraphNode::kPlaceholder ? "Placeholder"
                                                                                                : "Const";
  return Py_BuildValue("(sssn)", type, n->name.c_str(), n->where.c_str(), static_cast<Py_ssize_t>(n->dtypes.size()));
}

PyObject* GraphNodeInputs(PyObject* graph, int id) {
  const opforge::GraphNode* n = NodeOf(graph, id);
  if (!n) return nullptr;
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(n->inputs.size()));
  for (size_t i = 0; t && i < n->inputs.size(); ++i) {
    PyObject* pair = Py_BuildValue("(ii)", n->inputs[i].node, n->inputs[i].index);
    if (!pair) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, i, pair);
  }
  return t;
}

PyObject* GraphNodeAttrs(PyObject* graph, int id) {
  const opforge::GraphNode* n = NodeOf(graph, id);
  if (!n) return nullptr;
  PyObject* d = PyDict_New();
  if (!d) return nullptr;
  bool ok = true;
  if (n->op) {
    for (size_t i = 0; ok && i < n->op->attrs.size(); ++i) {
      ok = SetItem(d, n->op->attrs[i].name.c_str(), AttrToPy(n->op->attrs[i], n->attrs[i]));
    }
  } else {
    ok = SetItem(d, "dtype", DTypePy(n->dtypes[0]));
    if (ok && n->kind == opforge::GraphNode::kPlaceholder && n->RankUnknown(0)) {
      Py_INCREF(Py_None);
      ok = SetItem(d, "shape", Py_None);  // unknown rank
    } else if (ok && n->kind == opforge::GraphNode::kPlaceholder) {
      PyObject* shape = ShapeTuple(n->shapes[0]);
      PyObject* list = shape ? PySequence_List(shape) : nullptr;
      Py_XDECREF(shape);
      ok = SetItem(d, "shape", list);
    } else if (ok) {
      ok = SetItem(d, "value", WrapTensor(n->value));
    }
  }
  if (!ok) {
    Py_DECREF(d);
    return nullptr;
  }
  return d;
}

PyObject* GraphOutput(PyObject* graph, int id, int index) {
  const opforge::GraphNode* n = NodeOf(graph, id);
  if (!n) return nullptr;
  if (index < 0 || index >= static_cast<int>(n->dtypes.size())) {
    return SetError(errors::InvalidArgument(n->Label(), " has no output ", index));
  }
  if (n->RankUnknown(index)) return Py_BuildValue("(NO)", DTypePy(n->dtypes[index]), Py_None);
  PyObject* shape = ShapeTuple(n->shapes[index]);
  if (!shape) return nullptr;
  return Py_BuildValue("(NN)", DTypePy(n->dtypes[index]), shape);
}

PyObject* GraphUniqueName(PyObject* graph, const char* base) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  const std::string name = g->UniqueName(base);
  return PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
}

PyObject* GraphConsumers(PyObject* graph) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  const std::vector<std::vector<int>> consumers = g->Consumers();
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(consumers.size()));
  for (size_t i = 0; out && i < consumers.size(); ++i) {
    PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(consumers[i].size()));
    if (!t) {
      Py_DECREF(out);
      return nullptr;
    }
    for (size_t k = 0; k < consumers[i].size(); ++k) PyTuple_SET_ITEM(t, k, PyLong_FromLong(consumers[i][k]));
    PyTuple_SET_ITEM(out, i, t);
  }
  return out;
}

}  // namespace py
}  // namespace opforge
