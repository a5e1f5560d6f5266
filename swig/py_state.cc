#include "py_state.h"

#include <vector>

#include "../cpp/framework/graph.h"
#include "py_errors.h"
#include "py_graph_views.h"

namespace opforge {
namespace py {
namespace {

constexpr const char* kOwned = "opforge.ResourceMgr";
constexpr const char* kBorrowed = "opforge.EagerResourceMgr";

PyObject* IntList(const std::vector<int>& ids) {
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(ids.size()));
  for (size_t i = 0; out && i < ids.size(); ++i) PyList_SET_ITEM(out, i, PyLong_FromLong(ids[i]));
  return out;
}

}  // namespace

bool ResourcesOf(PyObject* obj, ResourceMgr** out) {
  if (obj == Py_None) {
    *out = nullptr;
    return true;
  }
  const char* name = PyCapsule_CheckExact(obj) ? PyCapsule_GetName(obj) : nullptr;
  if (name == nullptr || (std::string(name) != kOwned && std::string(name) != kBorrowed)) {
    PyErr_Clear();
    SetInvalidArgument("Session", "expected a resource manager (resources_new())");
    return false;
  }
  *out = static_cast<ResourceMgr*>(PyCapsule_GetPointer(obj, name));
  return *out != nullptr;
}

PyObject* ResourcesNew() {
  return PyCapsule_New(new ResourceMgr(), kOwned, [](PyObject* c) {
    delete static_cast<ResourceMgr*>(PyCapsule_GetPointer(c, kOwned));
  });
}

PyObject* ResourcesEager() { return PyCapsule_New(EagerResourceMgr(), kBorrowed, nullptr); }

PyObject* ResourcesList(PyObject* resources) {
  ResourceMgr* r;
  if (!ResourcesOf(resources, &r)) return nullptr;
  if (!r) r = EagerResourceMgr();
  const auto items = r->List();
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(items.size()));
  for (size_t i = 0; out && i < items.size(); ++i) {
    PyList_SET_ITEM(out, i, Py_BuildValue("(ss)", items[i].first.c_str(), items[i].second.c_str()));
  }
  return out;
}

PyObject* ResourcesClear(PyObject* resources) {
  ResourceMgr* r;
  if (!ResourcesOf(resources, &r)) return nullptr;
  Py_BEGIN_ALLOW_THREADS
  (r ? r : EagerResourceMgr())->Clear();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyObject* ResourcesDelete(PyObject* resources, const char* name) {
  ResourceMgr* r;
  if (!ResourcesOf(resources, &r)) return nullptr;
  return PyBool_FromLong((r ? r : EagerResourceMgr())->Delete(name).ok());
}

PyTypeObject* eager_variable_type = nullptr;

PyObject* VariableInit(PyObject* type) {
  if (!PyType_Check(type)) return SetInvalidArgument("variable_init", "expected the eager Variable type");
  Py_INCREF(type);
  eager_variable_type = reinterpret_cast<PyTypeObject*>(type);
  Py_RETURN_NONE;
}

PyObject* VariableValue(PyObject* obj) {
  static PyObject* s_value = PyUnicode_InternFromString("_value");
  PyObject* v = PyObject_GetAttr(obj, s_value);
  if (!v) {
    PyErr_Clear();
    return obj;  // the binder then names its type in the usual error
  }
  Py_DECREF(v);  // the Variable keeps its leaf alive for the call
  return v;
}

PyObject* GraphSetControlDeps(PyObject* graph, PyObject* nodes) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  PyObject* seq = PySequence_Fast(nodes, "control_dependencies: expected a list of node ids");
  if (!seq) return nullptr;
  std::vector<int> ids;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    const long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return nullptr;
    }
    ids.push_back(static_cast<int>(v));
  }
  Py_DECREF(seq);
  Status s = g->SetControlDeps(std::move(ids));
  if (!s.ok()) return SetError(s);
  Py_RETURN_NONE;
}

PyObject* GraphControlDeps(PyObject* graph) {
  Graph* g = GraphOf(graph);
  return g ? IntList(g->ControlDeps()) : nullptr;
}

PyObject* GraphNodeControlInputs(PyObject* graph, int node) {
  Graph* g = GraphOf(graph);
  if (!g) return nullptr;
  if (node < 0 || node >= g->num_nodes()) return SetInvalidArgument("graph", "no such node");
  return IntList(g->node(node).control_inputs);
}

}  // namespace py
}  // namespace opforge
