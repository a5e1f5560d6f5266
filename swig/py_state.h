// Python entry points of state (opforge.variables, Session): resource
// managers as capsules, and the control dependencies of graph nodes.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "opforge/resource.h"

namespace opforge {
namespace py {

// A new resource manager (a Session's), owned by the capsule.
PyObject* ResourcesNew();
// The process's manager (eager mode); the capsule does not own it.
PyObject* ResourcesEager();
// [(name, description)], sorted by name.
PyObject* ResourcesList(PyObject* resources);
// Drops every resource (Session.close).
PyObject* ResourcesClear(PyObject* resources);
// Drops one; False if there was none of that name.
PyObject* ResourcesDelete(PyObject* resources, const char* name);
// The manager a capsule from ResourcesNew/ResourcesEager holds; None gives
// null (eager). Sets a Python error and returns false otherwise.
bool ResourcesOf(PyObject* obj, ResourceMgr** out);

// opforge.Variable in eager mode: the type whose objects op calls take as
// their `_value` Tensor (the variable's leaf, sharing its memory), so the
// tape records the leaf. Registered by variable_init.
PyObject* VariableInit(PyObject* eager_variable_type);
extern PyTypeObject* eager_variable_type;
PyObject* VariableValue(PyObject* obj);  // borrowed: the variable holds it
inline PyObject* UnwrapVariable(PyObject* obj) {
  return Py_TYPE(obj) == eager_variable_type && eager_variable_type ? VariableValue(obj) : obj;
}

// The control dependencies given to nodes added from now on (node ids).
PyObject* GraphSetControlDeps(PyObject* graph, PyObject* nodes);
PyObject* GraphControlDeps(PyObject* graph);
PyObject* GraphNodeControlInputs(PyObject* graph, int node);

}  // namespace py
}  // namespace opforge
