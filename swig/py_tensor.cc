#include "py_tensor.h"

#include <structmember.h>

#include <new>
#include <string>
#include <vector>

#include "numpy_api.h"
#include "py_dtypes.h"
#include "py_errors.h"
#include "py_tensor_ops.h"

namespace opforge {
namespace py {

PyTypeObject* tensor_type = nullptr;

namespace {


// Recently freed tensor objects, reused by WrapTensor: op results are
// created and dropped at a high rate, and PyType_GenericAlloc is costly.
// Only touched with the GIL held.
constexpr int kFreeListMax = 64;
PyObject* free_list[kFreeListMax];
int free_count = 0;
PyObject* dtype_objects[kNumDTypes] = {};

void Dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyTensor* t = reinterpret_cast<PyTensor*>(self);
  if (t->weakrefs) PyObject_ClearWeakRefs(self);
  Py_CLEAR(t->ag);
  t->tensor.~Tensor();
  t->pending.~shared_ptr<PendingValue>();
  if (type == tensor_type && free_count < kFreeListMax) {
    free_list[free_count++] = self;
  } else {
    type->tp_free(self);
  }
  Py_DECREF(type);
}

PyObject* GetShape(PyObject* self, void*) {
  const TensorShape& s = TensorOf(self).shape();
  PyObject* tuple = PyTuple_New(s.rank());
  if (!tuple) return nullptr;
  for (int i = 0; i < s.rank(); ++i) PyTuple_SET_ITEM(tuple, i, PyLong_FromLongLong(s.dim(i)));
  return tuple;
}

PyObject* GetDType(PyObject* self, void*) {
  PyObject* d = DTypeObject(TensorOf(self).dtype());
  Py_INCREF(d);
  return d;
}

PyObject* GetNDim(PyObject* self, void*) { return PyLong_FromLong(TensorOf(self).rank()); }
PyObject* GetSize(PyObject* self, void*) { return PyLong_FromLongLong(TensorOf(self).NumElements()); }

PyObject* Numpy(PyObject* self, PyObject*) {
  if (!ResolvePending(self)) return nullptr;
  return TensorToNumpy(TensorOf(self), self);
}

int GetBuffer(PyObject* self, Py_buffer* view, int flags) {
  if (!ResolvePending(self)) return -1;
  const Tensor& t = TensorOf(self);
  const bool writable = t.buffer() && t.buffer()->writable();
  if ((flags & PyBUF_WRITABLE) && !writable) {
    PyErr_SetString(PyExc_BufferError, "opforge.Tensor: this tensor's memory is read-only");
    return -1;
  }
  // shape and strides live in one block owned by the view.
  const int rank = t.rank();
  Py_ssize_t* dims = static_cast<Py_ssize_t*>(PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (rank ? rank : 1)));
  if (!dims) {
    PyErr_NoMemory();
    return -1;
  }
  Py_ssize_t* strides = dims + rank;
  Py_ssize_t step = static_cast<Py_ssize_t>(DTypeSize(t.dtype()));
  bool overflow = false;
  for (int i = rank - 1; i >= 0; --i) {
    dims[i] = static_cast<Py_ssize_t>(t.dim(i));
    strides[i] = step;
    // An empty tensor may have huge dims whose strides do not fit.
    overflow = overflow || __builtin_mul_overflow(step, dims[i] ? dims[i] : 1, &step);
  }
  if (overflow) {
    PyMem_Free(dims);
    PyErr_SetString(PyExc_BufferError, "opforge.Tensor: the strides of this shape overflow Py_ssize_t");
    return -1;
  }
  view->buf = t.raw_data();
  view->obj = self;
  Py_INCREF(self);
  view->len = static_cast<Py_ssize_t>(t.TotalBytes());
  view->itemsize = static_cast<Py_ssize_t>(DTypeSize(t.dtype()));
  view->readonly = !writable;
  view->ndim = rank;
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(BufferFormat(t.dtype())) : nullptr;
  view->shape = (flags & PyBUF_ND) ? dims : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? strides : nullptr;
  view->suboffsets = nullptr;
  view->internal = dims;
  return 0;
}

void ReleaseBuffer(PyObject*, Py_buffer* view) { PyMem_Free(view->internal); }

// Tensors come from ops and opforge.tensor(); a bare Tensor() would hold no storage.
PyObject* New(PyTypeObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_TypeError,
                  "opforge.Tensor cannot be created directly: use opforge.tensor(value) or an op");
  return nullptr;
}

PyGetSetDef kGetSet[] = {
    {"shape", GetShape, nullptr, "The shape, a tuple of ints.", nullptr},
    {"dtype", GetDType, nullptr, "The element type, an opforge.DType.", nullptr},
    {"ndim", GetNDim, nullptr, "The number of dimensions.", nullptr},
    {"size", GetSize, nullptr, "The number of elements.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef kMethods[] = {
    {"numpy", Numpy, METH_NOARGS,
     "numpy() -> ndarray\n\nA numpy view of this tensor's memory (no copy); it keeps the tensor alive."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef kMembers[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PyTensor, weakrefs), READONLY, nullptr},
    {"_ag", T_OBJECT, offsetof(PyTensor, ag), 0, "Autograd state (opforge.autodiff), or None."},
    {nullptr, 0, 0, 0, nullptr},
};

}  // namespace

PyObject* InitTensorType(PyObject* methods, PyObject* dtypes) {
  if (!PyTuple_Check(dtypes) || PyTuple_GET_SIZE(dtypes) != kNumDTypes || !PyType_Check(methods)) {
    PyErr_SetString(PyExc_TypeError, "expected a methods class and a tuple of dtypes indexed by dtype enum");
    return nullptr;
  }
  for (int i = 0; i < kNumDTypes; ++i) {
    PyObject* d = PyTuple_GET_ITEM(dtypes, i);
    Py_INCREF(d);
    Py_XSETREF(dtype_objects[i], d);
  }
  std::vector<PyType_Slot> slots = {
      {Py_tp_dealloc, reinterpret_cast<void*>(Dealloc)},
      {Py_tp_new, reinterpret_cast<void*>(New)},
      {Py_tp_getset, kGetSet},
      {Py_tp_methods, kMethods},
      {Py_tp_members, kMembers},
      {Py_bf_getbuffer, reinterpret_cast<void*>(GetBuffer)},
      {Py_bf_releasebuffer, reinterpret_cast<void*>(ReleaseBuffer)},
      {Py_tp_doc, const_cast<char*>("An n-dimensional array computed by opforge ops.")},
  };
  AppendOperatorSlots(&slots);  // + - * / ** @ ... and comparisons (py_tensor_ops.h)
  slots.push_back({0, nullptr});
  // No Python base class: the type stays out of the cyclic GC (a tensor
  // references no Python objects that could form a cycle), which keeps
  // creating results cheap. The Python-level methods are copied in instead.
  PyType_Spec spec = {"opforge.Tensor", sizeof(PyTensor), 0, Py_TPFLAGS_DEFAULT, slots.data()};
  PyObject* type = PyType_FromSpec(&spec);
  if (!type) return nullptr;
  PyObject* dict = PyObject_GetAttrString(methods, "__dict__");
  PyObject* items = dict ? PyMapping_Items(dict) : nullptr;
  Py_XDECREF(dict);
  if (!items) {
    Py_DECREF(type);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); ++i) {
    PyObject* key = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
    PyObject* value = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
    const char* name = PyUnicode_AsUTF8(key);
    if (!name) continue;
    const std::string n = name;
    if (n == "__dict__" || n == "__weakref__" || n == "__slots__" || n == "__module__" || n == "__qualname__" ||
        IsOperatorSlotName(name)) {
      continue;
    }
    if (PyObject_SetAttr(type, key, value) < 0) {
      Py_DECREF(items);
      Py_DECREF(type);
      return nullptr;
    }
  }
  Py_DECREF(items);
  Py_XDECREF(reinterpret_cast<PyObject*>(tensor_type));
  tensor_type = reinterpret_cast<PyTypeObject*>(type);
  Py_INCREF(type);  // one reference kept here, one returned
  return type;
}

const Tensor& TensorOf(PyObject* obj) { return reinterpret_cast<PyTensor*>(obj)->tensor; }

PyObject* WrapTensor(Tensor t) {
  if (!tensor_type) {
    PyErr_SetString(PyExc_RuntimeError, "opforge is not initialised: import opforge first");
    return nullptr;
  }
  PyObject* obj;
  if (free_count > 0) {
    obj = free_list[--free_count];
    PyObject_Init(obj, tensor_type);  // also takes the reference to the heap type
  } else {
    obj = tensor_type->tp_alloc(tensor_type, 0);
    if (!obj) return nullptr;
  }
  PyTensor* pt = reinterpret_cast<PyTensor*>(obj);
  new (&pt->tensor) Tensor(std::move(t));
  pt->weakrefs = nullptr;
  pt->ag = nullptr;
  new (&pt->pending) std::shared_ptr<PendingValue>();
  return obj;
}

PyObject* WrapPendingTensor(Tensor shell, std::shared_ptr<PendingValue> pending) {
  PyObject* obj = WrapTensor(std::move(shell));
  if (obj) reinterpret_cast<PyTensor*>(obj)->pending = std::move(pending);
  return obj;
}

std::shared_ptr<PendingValue> PendingOf(PyObject* obj) { return reinterpret_cast<PyTensor*>(obj)->pending; }

bool ResolvePending(PyObject* obj) {
  PyTensor* pt = reinterpret_cast<PyTensor*>(obj);
  if (!pt->pending) return true;
  std::shared_ptr<PendingValue> pending = pt->pending;  // alive while we wait without the GIL
  Tensor value;
  Status s;
  Py_BEGIN_ALLOW_THREADS
  s = pending->Wait(&value);
  Py_END_ALLOW_THREADS
  if (!s.ok()) return SetError(s) != nullptr;  // stays pending: every read raises
  if (pt->pending == pending) {
    pt->tensor = std::move(value);
    pt->pending.reset();
  }
  return true;
}

PyObject* DTypeObject(DType t) {
  PyObject* d = dtype_objects[static_cast<int>(t)];
  return d ? d : Py_None;
}

PyObject* TensorToNumpy(const Tensor& t, PyObject* owner) {
  npy_intp dims[kMaxRank];
  for (int i = 0; i < t.rank(); ++i) dims[i] = static_cast<npy_intp>(t.dim(i));
  int flags = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED;
  if (t.buffer() && t.buffer()->writable()) flags |= NPY_ARRAY_WRITEABLE;
  PyArray_Descr* descr = NumpyDescr(t.dtype());
  if (!descr) return nullptr;
  // Steals descr.
  PyObject* arr = PyArray_NewFromDescr(&PyArray_Type, descr, t.rank(), dims, nullptr, t.raw_data(), flags, nullptr);
  if (!arr) return nullptr;
  Py_INCREF(owner);
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(arr), owner) < 0) {
    Py_DECREF(arr);
    return nullptr;
  }
  return arr;
}

}  // namespace py
}  // namespace opforge
