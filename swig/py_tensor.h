// opforge.Tensor: a heap type whose C part holds an opforge::Tensor; the
// operators and conveniences are Python functions (opforge/tensor.py) copied
// onto it, much as TensorFlow builds its EagerTensor.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <memory>

#include "bind.h"
#include "opforge/tensor.h"

namespace opforge {
namespace py {

// Creates the type, copying in the attributes of the class `methods`;
// returns it (new reference).
PyObject* InitTensorType(PyObject* methods, PyObject* dtype_objects);

// The C part of a Tensor object (in the header so the per-call checks inline).
struct PyTensor {
  PyObject_HEAD
  Tensor tensor;
  PyObject* weakrefs;
  PyObject* ag;  // autograd state (opforge/autodiff: a Meta), or NULL or None
  std::shared_ptr<PendingValue> pending;  // async mode: set until the value is read
};

extern PyTypeObject* tensor_type;  // set by InitTensorType

inline bool IsTensor(PyObject* obj) { return tensor_type && Py_TYPE(obj) == tensor_type; }
const Tensor& TensorOf(PyObject* obj);  // obj must satisfy IsTensor
PyObject* WrapTensor(Tensor t);         // new reference, or NULL with an error set

// A value still being computed (async mode). A pending Tensor holds a
// shell (dtype and shape, no storage) until its value is read.
// (PendingValue is the binder's: cpp/framework/bind.h.)
PyObject* WrapPendingTensor(Tensor shell, std::shared_ptr<PendingValue> pending);
// The pending value of a Tensor object, or null once its value is there.
std::shared_ptr<PendingValue> PendingOf(PyObject* obj);
// Waits (GIL released) and stores the value; false with the op's error set.
// Everything that reads a Tensor's memory calls this first.
bool ResolvePending(PyObject* obj);

// The opforge.DType object for a dtype (borrowed reference), or Py_None.
PyObject* DTypeObject(DType t);

// A numpy view of the tensor's memory that keeps `owner` alive.
PyObject* TensorToNumpy(const Tensor& t, PyObject* owner);

}  // namespace py
}  // namespace opforge
