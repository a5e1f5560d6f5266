#include "py_convert.h"

#include <cstring>
#include <limits>
#include <utility>

#include "numpy_api.h"
#include "numpy_buffer.h"
#include "py_dlpack.h"
#include "py_dtypes.h"
#include "py_errors.h"
#include "py_graph.h"
#include "py_state.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

// 0 bool, 1 integer, 2 floating: a value of one kind may become any dtype of
// the same or a higher kind (True -> 1.0 is fine, 1.5 -> int is not).
int KindRank(DType t) { return t == DType::kBool ? 0 : IsInteger(t) ? 1 : 2; }
const char* KindName(int rank) { return rank == 0 ? "bool" : rank == 1 ? "int" : "float"; }

std::string TypeName(PyObject* o) { return Py_TYPE(o)->tp_name; }

template <typename T>
void Store(Tensor* t, T v) { *t->data<T>() = v; }

// A failed copy of a (say, zero-stride broadcast) array: numpy's MemoryError
// becomes ResourceExhaustedError naming the op and the argument.
bool CopyFailed(const char* op, const std::string& arg) {
  if (!PyErr_ExceptionMatches(PyExc_MemoryError)) return false;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* text = value ? PyObject_Str(value) : nullptr;
  const char* utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
  const std::string why = utf8 ? utf8 : "out of memory";
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_Clear();
  SetError(Status(Code::kResourceExhausted, std::string(op) + ": argument '" + arg +
                                                "' is not contiguous and copying it failed: " + why));
  return false;
}

// Objects that share their memory through a protocol numpy reads (DLPack,
// the array interfaces, __array__, the buffer protocol).
bool HasArrayProtocol(PyObject* obj) {
  if (PyObject_CheckBuffer(obj)) return true;
  for (const char* name : {"__dlpack__", "__array_interface__", "__array_struct__", "__array__"}) {
    if (PyObject_HasAttrString(obj, name)) return true;
  }
  return false;
}

// The producer's error (a hostile or failing protocol) as InvalidArgumentError.
bool ProtocolFailed(PyObject* obj, const char* op, const std::string& arg, const char* how) {
  if (PyErr_ExceptionMatches(PyExc_MemoryError)) return CopyFailed(op, arg);
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* text = value ? PyObject_Str(value) : nullptr;
  const char* utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
  const std::string why = utf8 ? utf8 : "unknown error";
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_Clear();
  SetInvalidArgument(op, "argument '" + arg + "' (a " + TypeName(obj) + ") could not be read through " + how + ": " +
                             why);
  return false;
}

// numpy does the reading: np.from_dlpack for DLPack producers (versioned or
// legacy capsules), PyArray_FromAny for the rest; both share memory when
// they can, and TensorFromArray borrows the array they return.
bool TensorFromProtocol(PyObject* obj, const char* op, const std::string& arg, Tensor* out) {
  if (RejectSymbolic(obj, op, arg)) return false;  // a graph's tensor in an eager call
  PyObject* arr = nullptr;
  const char* how = "__dlpack__";
  if (PyObject_HasAttrString(obj, "__dlpack__")) {
    static PyObject* from_dlpack = nullptr;  // numpy.from_dlpack, looked up once
    if (!from_dlpack) {
      PyObject* numpy = PyImport_ImportModule("numpy");
      from_dlpack = numpy ? PyObject_GetAttrString(numpy, "from_dlpack") : nullptr;
      Py_XDECREF(numpy);
    }
    arr = from_dlpack ? PyObject_CallOneArg(from_dlpack, obj) : nullptr;
    if (!arr && (PyErr_ExceptionMatches(PyExc_BufferError) || PyErr_ExceptionMatches(PyExc_RuntimeError))) {
      // A dtype numpy's importer lacks (bfloat16): opforge's own importer.
      PyErr_Clear();
      PyObject* cap = PyObject_CallMethod(obj, "__dlpack__", nullptr);
      const bool ok = cap != nullptr && TensorFromDLPackCapsule(cap, out);
      Py_XDECREF(cap);
      if (ok) return true;
    }
  } else {
    how = "the array interface, __array__ or the buffer protocol";
    arr = PyArray_FromAny(obj, nullptr, 0, 0, 0, nullptr);
  }
  if (!arr) return ProtocolFailed(obj, op, arg, how);
  if (!PyArray_Check(arr)) {
    Py_DECREF(arr);
    SetInvalidArgument(op, "argument '" + arg + "' (a " + TypeName(obj) + ") did not give a numpy array through " + how);
    return false;
  }
  const bool ok = TensorFromArray(arr, op, arg, out);
  Py_DECREF(arr);
  return ok;
}

}  // namespace

bool TensorFromArray(PyObject* obj, const char* op, const std::string& arg, Tensor* out) {
  PyArrayObject* arr = reinterpret_cast<PyArrayObject*>(obj);
  DType dtype;
  if (!DTypeFromDescr(PyArray_DESCR(arr), &dtype)) {
    PyObject* repr = PyObject_Str(reinterpret_cast<PyObject*>(PyArray_DESCR(arr)));
    std::string name = repr ? PyUnicode_AsUTF8(repr) : "?";
    Py_XDECREF(repr);
    PyErr_Clear();
    SetInvalidArgument(op, "argument '" + arg + "' has numpy dtype " + name + ", which opforge does not support (" +
                               SupportedNumpyDTypes() + "); convert it with astype() first");
    return false;
  }
  const int rank = PyArray_NDIM(arr);
  if (rank > kMaxRank) {
    SetInvalidArgument(op, "argument '" + arg + "' has rank " + std::to_string(rank) + "; opforge supports up to " +
                               std::to_string(kMaxRank));
    return false;
  }
  // numpy already guarantees non-negative dims whose product fits.
  const TensorShape shape(reinterpret_cast<const int64_t*>(PyArray_SHAPE(arr)), rank);
  PyArrayObject* source = arr;
  if (!(PyArray_IS_C_CONTIGUOUS(arr) && PyArray_ISALIGNED(arr) && PyArray_ISNOTSWAPPED(arr))) {
    // Strided, misaligned or byte-swapped: one copy into a native C array.
    PyArray_Descr* descr = NumpyDescr(dtype);  // DTypeFromDescr knew it: no import can fail here
    if (!descr) return false;
    source = reinterpret_cast<PyArrayObject*>(
        PyArray_FromArray(arr, descr, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST));
    if (!source) return CopyFailed(op, arg);
  } else {
    Py_INCREF(source);
  }
  TensorBuffer* buf = new NumpyBuffer(source);
  Py_DECREF(source);  // the buffer holds its own reference
  *out = Tensor::Adopt(dtype, shape, buf);
  return true;
}

bool BorrowTransposed(const ArgDef& arg, PyObject* obj, Tensor* out) {
  if (arg.transpose_attr_index < 0 || !PyArray_Check(obj)) return false;
  PyArrayObject* arr = reinterpret_cast<PyArrayObject*>(obj);
  const int rank = PyArray_NDIM(arr);
  if (rank < 2 || rank > kMaxRank || PyArray_IS_C_CONTIGUOUS(arr) || !PyArray_ISALIGNED(arr) ||
      !PyArray_ISNOTSWAPPED(arr)) {
    return false;
  }
  DType dtype;
  if (!DTypeFromDescr(PyArray_DESCR(arr), &dtype)) return false;
  int64_t dims[kMaxRank], strides[kMaxRank];
  for (int d = 0; d < rank; ++d) {
    dims[d] = PyArray_DIM(arr, d);
    strides[d] = PyArray_STRIDE(arr, d);
  }
  std::swap(dims[rank - 2], dims[rank - 1]);
  std::swap(strides[rank - 2], strides[rank - 1]);
  int64_t step = PyArray_ITEMSIZE(arr);  // C order of the swapped axes, axes of one element aside
  for (int d = rank - 1; d >= 0; --d) {
    if (dims[d] == 0) return false;
    if (dims[d] != 1 && strides[d] != step) return false;
    step *= dims[d];
  }
  // The view starts at its lowest address (every stride that matters is
  // positive), so the buffer covers exactly the C array.
  *out = Tensor::Adopt(dtype, TensorShape(dims, rank), new NumpyBuffer(arr));
  return true;
}

void FlipTransposeAttrs(const OpDef& op, uint32_t borrowed, AttrValue* attrs) {
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    if (borrowed >> a & 1u) {
      AttrValue& v = attrs[op.inputs[a].transpose_attr_index];
      v.b = !v.b;
    }
  }
}

bool BorrowsWritableMemory(const Tensor& t) {
  const auto* b = dynamic_cast<const NumpyBuffer*>(t.buffer());
  return b != nullptr && b->writable();
}

bool IsBorrowedFromNumpy(const TensorBuffer* buffer) {
  return buffer != nullptr && dynamic_cast<const NumpyBuffer*>(buffer) != nullptr;
}

namespace {

const char* kAnyInput = "an opforge.Tensor, a numpy array, a Python scalar, a nested list of numbers or an object "
                        "with __dlpack__, __array_interface__, __array__ or the buffer protocol";

// A Python bool, int or float at its natural dtype (an int past int64 is
// held as float64, still of the int kind, so Bind refuses it for ints).
bool WeakScalar(PyObject* obj, const char* op, const std::string& label, BindInput* out) {
  Tensor t;
  if (PyBool_Check(obj)) {
    Status s = Tensor::Allocate(DType::kBool, TensorShape(), &t);
    if (!s.ok()) return SetError(s) != nullptr;
    Store<bool>(&t, obj == Py_True);
    *out = BindInput::Weak(std::move(t));
    return true;
  }
  if (PyLong_Check(obj)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (!overflow) {
      Status s = Tensor::Allocate(DType::kInt64, TensorShape(), &t);
      if (!s.ok()) return SetError(s) != nullptr;
      Store<int64_t>(&t, static_cast<int64_t>(v));
      *out = BindInput::Weak(std::move(t));
      return true;
    }
  }
  const double v = PyFloat_AsDouble(obj);
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    SetInvalidArgument(op, "argument '" + label + "' is a Python int too large for float64");
    return false;
  }
  Status s = Tensor::Allocate(DType::kFloat64, TensorShape(), &t);
  if (!s.ok()) return SetError(s) != nullptr;
  Store<double>(&t, v);
  *out = BindInput::Weak(std::move(t));
  out->weak_kind = PyFloat_Check(obj) ? 2 : 1;
  return true;
}

// A nested list: numpy finds its natural dtype; kept as bool, int64 or float64.
bool WeakList(PyObject* obj, const char* op, const std::string& label, BindInput* out) {
  PyArrayObject* arr = reinterpret_cast<PyArrayObject*>(PyArray_FromAny(obj, nullptr, 0, 0, NPY_ARRAY_CARRAY, nullptr));
  if (!arr) {
    PyErr_Clear();
    SetInvalidArgument(op, "argument '" + label + "' is a " + TypeName(obj) +
                               " that is not a rectangular nested sequence of numbers");
    return false;
  }
  const char k = PyArray_DESCR(arr)->kind;
  const bool numeric = k == 'b' || k == 'i' || k == 'u' || k == 'f';
  if (!numeric || (k == 'u' && PyDataType_ELSIZE(PyArray_DESCR(arr)) >= 8)) {
    Py_DECREF(arr);
    SetInvalidArgument(op, "argument '" + label + "' is a " + TypeName(obj) + " whose elements are not all bools, " +
                               "ints or floats in int64 range");
    return false;
  }
  const DType natural = k == 'b' ? DType::kBool : k == 'f' ? DType::kFloat64 : DType::kInt64;
  PyObject* cast = PyArray_FromArray(arr, NumpyDescr(natural),
                                     NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
  Py_DECREF(arr);
  if (!cast) return false;
  Tensor t;
  const bool ok = TensorFromArray(cast, op, label, &t);
  Py_DECREF(cast);
  if (ok) *out = BindInput::Weak(std::move(t));
  return ok;
}

}  // namespace

bool ToBindInput(PyObject* obj, const char* op, const std::string& label, bool keep_pending, BindInput* out) {
  obj = UnwrapVariable(obj);  // an eager opforge.Variable is its leaf tensor
  if (IsTensor(obj)) {
    PyTensor* pt = reinterpret_cast<PyTensor*>(obj);
    if (pt->pending) {
      if (keep_pending) {
        *out = BindInput::Pending(pt->tensor, pt->pending);
        return true;
      }
      if (!ResolvePending(obj)) return false;  // wait for the value
    }
    out->kind = BindInput::kTensor;
    out->tensor = pt->tensor;
    out->autograd = pt->ag != nullptr;
    return true;
  }
  out->kind = BindInput::kTensor;
  if (PyArray_Check(obj)) return TensorFromArray(obj, op, label, &out->tensor);
  if (PyArray_IsScalar(obj, Generic)) {  // numpy scalars are typed: np.float32(1)
    PyObject* arr = PyArray_FromScalar(obj, nullptr);
    if (!arr) return false;
    const bool ok = TensorFromArray(arr, op, label, &out->tensor);
    Py_DECREF(arr);
    return ok;
  }
  if (PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj)) return WeakScalar(obj, op, label, out);
  if (PyList_Check(obj) || PyTuple_Check(obj)) return WeakList(obj, op, label, out);
  if (HasArrayProtocol(obj)) return TensorFromProtocol(obj, op, label, &out->tensor);
  SetInvalidArgument(op, "argument '" + label + "' must be " + kAnyInput + ", not " + TypeName(obj));
  return false;
}

bool ToBindListInput(PyObject* obj, const char* op, const ArgDef& arg, bool keep_pending, BindInput* out) {
  if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
    SetInvalidArgument(op, "argument '" + arg.name + "' must be a list or tuple of tensors, not " + TypeName(obj));
    return false;
  }
  out->kind = BindInput::kList;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  out->items.resize(static_cast<size_t>(n));
  for (Py_ssize_t k = 0; k < n; ++k) {
    if (!ToBindInput(PySequence_Fast_GET_ITEM(obj, k), op, InputLabel(arg, k, true), keep_pending,
                     &out->items[static_cast<size_t>(k)])) {
      return false;
    }
  }
  return true;
}

}  // namespace py
}  // namespace opforge
