// opforge.Tensor: a heap type whose C part holds an opforge::Tensor and whose
// Python base class (opforge/tensor.py) supplies operators and repr, the way
// TensorFlow's EagerTensor is built.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "opforge/tensor.h"

namespace opforge {
namespace py {

// Creates the type with `base` as its Python base class; returns it (new ref).
PyObject* InitTensorType(PyObject* base, PyObject* dtype_objects);

bool IsTensor(PyObject* obj);
const Tensor& TensorOf(PyObject* obj);  // obj must satisfy IsTensor
PyObject* WrapTensor(Tensor t);         // new reference, or NULL with an error set

// The opforge.DType object for a dtype (borrowed reference), or Py_None.
PyObject* DTypeObject(DType t);

// A numpy view of the tensor's memory that keeps `owner` alive.
PyObject* TensorToNumpy(const Tensor& t, PyObject* owner);

}  // namespace py
}  // namespace opforge
