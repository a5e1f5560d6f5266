// Helpers shared by the graph (py_graph.cc) and async (py_async.cc)
// bindings: op lookup, attr dicts, per-input iteration over an op's args.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>
#include <vector>

#include "opforge/op.h"
#include "py_convert.h"
#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {

// The registered op, or nullptr with NotFoundError set.
const OpDef* FindOp(const char* op_type);

// attrs: a dict of user attrs by name (None: not given).
bool ConvertAttrs(const OpDef& op, PyObject* dict, std::vector<AttrValue>* out);

// A Tensor argument (maybe pending); false with an error set otherwise.
bool TensorArg(PyObject* obj, const char* op, const std::string& arg);

// Calls fn(item, label, arg) for every flattened input, setting list lengths.
template <typename Fn>
bool ForEachInput(const OpDef& op, PyObject* inputs, std::vector<AttrValue>* attrs, Fn fn) {
  const char* name = op.name.c_str();
  if (!PyTuple_Check(inputs) || static_cast<size_t>(PyTuple_GET_SIZE(inputs)) != op.inputs.size()) {
    return SetInvalidArgument(name, "expected a tuple of " + std::to_string(op.inputs.size()) + " inputs") != nullptr;
  }
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    PyObject* obj = PyTuple_GET_ITEM(inputs, a);
    if (!arg.is_list()) {
      if (!fn(obj, arg.name, arg)) return false;
      continue;
    }
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
      return SetInvalidArgument(name, "argument '" + arg.name + "' must be a list or tuple of tensors, not " +
                                          Py_TYPE(obj)->tp_name) != nullptr;
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    (*attrs)[arg.number_attr_index] = AttrValue::Int(n);
    for (Py_ssize_t k = 0; k < n; ++k) {
      if (!fn(PySequence_Fast_GET_ITEM(obj, k), arg.name + "[" + std::to_string(k) + "]", arg)) return false;
    }
  }
  return true;
}


}  // namespace py
}  // namespace opforge
