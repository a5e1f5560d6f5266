#include "py_eager.h"

#include <utility>

#include "executor.h"
#include "numpy_api.h"
#include "opforge/inlined_vector.h"
#include "py_autograd.h"
#include "py_convert.h"
#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

// Below this many input bytes a kernel is over before releasing the GIL pays.
constexpr size_t kReleaseGilBytes = 1 << 16;

// One output: a Tensor; several: a tuple of them.
PyObject* WrapOutputs(InlinedVector<Tensor, 2>& outputs) {
  if (outputs.size() == 1) return WrapTensor(std::move(outputs[0]));
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(outputs.size()));
  if (!tuple) return nullptr;
  for (size_t i = 0; i < outputs.size(); ++i) {
    PyObject* t = WrapTensor(std::move(outputs[i]));
    if (!t) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), t);
  }
  return tuple;
}

// An OpCall a hook asked to record (call.record): its converted inputs,
// completed attrs and outputs, as attributes of the call.
bool SetRecorded(PyObject* call, const OpDef& op, const Tensor* values, size_t n, const AttrValue* attrs,
                 PyObject* result) {
  static PyObject *s_flat = PyUnicode_InternFromString("flat_inputs"),
                  *s_attrs = PyUnicode_InternFromString("completed_attrs"),
                  *s_outputs = PyUnicode_InternFromString("outputs");
  PyObject* flat = PyTuple_New(static_cast<Py_ssize_t>(n));
  PyObject* dict = PyDict_New();
  bool ok = flat && dict;
  for (size_t i = 0; ok && i < n; ++i) {
    PyObject* t = WrapTensor(values[i]);
    ok = t != nullptr;
    if (ok) PyTuple_SET_ITEM(flat, static_cast<Py_ssize_t>(i), t);
  }
  for (size_t i = 0; ok && i < op.attrs.size(); ++i) {
    PyObject* v = AttrToPython(op.attrs[i], attrs[i]);
    ok = v && PyDict_SetItemString(dict, op.attrs[i].name.c_str(), v) == 0;
    Py_XDECREF(v);
  }
  PyObject* outputs = ok ? (PyTuple_Check(result) ? (Py_INCREF(result), result) : PyTuple_Pack(1, result)) : nullptr;
  ok = ok && outputs && PyObject_SetAttr(call, s_flat, flat) == 0 && PyObject_SetAttr(call, s_attrs, dict) == 0 &&
       PyObject_SetAttr(call, s_outputs, outputs) == 0;
  Py_XDECREF(flat);
  Py_XDECREF(dict);
  Py_XDECREF(outputs);
  return ok;
}

// Runs the kernel on bound values (attrs complete, output shapes known),
// then tapes the call when an input requires a gradient.
PyObject* RunEager(const OpDef& op, const Tensor* values, size_t n, const AttrValue* attrs,
                   const TensorShape* shapes, bool autograd, PyObject* const* py_inputs, PyObject* call) {
  InlinedVector<Tensor, 2> outputs;
  outputs.resize(op.outputs.size());  // default-initialized: not zeroed
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) bytes += values[i].TotalBytes();
  Status status;
  if (bytes >= kReleaseGilBytes) {
    Py_BEGIN_ALLOW_THREADS
    status = RunKernel(op, values, static_cast<int>(n), attrs, shapes, outputs.data());
    Py_END_ALLOW_THREADS
  } else {
    status = RunKernel(op, values, static_cast<int>(n), attrs, shapes, outputs.data());
  }
  if (!status.ok()) return SetError(status);
  PyObject* result = WrapOutputs(outputs);
  if (!result) return nullptr;
  if (call != nullptr) {
    static PyObject* s_record = PyUnicode_InternFromString("record");
    PyObject* rec = PyObject_GetAttr(call, s_record);
    const int want = rec ? PyObject_IsTrue(rec) : -1;
    Py_XDECREF(rec);
    if (want < 0 || (want && !SetRecorded(call, op, values, n, attrs, result))) {
      Py_DECREF(result);
      return nullptr;
    }
  }
  if (autograd && WantsRecording(op, py_inputs) && !RecordCall(op, py_inputs, values, n, attrs, result)) {
    Py_CLEAR(result);
  }
  return result;
}

// The memo key of an attr argument; false if it has none.
bool MakeKey(PyObject* o, EagerMemo::Key* key) {
  bool singleton = o == Py_None || PyBool_Check(o);
  for (int t = 0; !singleton && t < kNumDTypes; ++t) singleton = o == DTypeObject(static_cast<DType>(t));
  if (singleton) {
    key->kind = EagerMemo::Key::kObject;
    key->object = o;
    return true;
  }
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    key->i = PyLong_AsLongLongAndOverflow(o, &overflow);
    key->kind = EagerMemo::Key::kInt;
    return !overflow && !(key->i == -1 && PyErr_Occurred());
  }
  if (PyFloat_CheckExact(o)) {
    key->kind = EagerMemo::Key::kFloat;
    key->f = PyFloat_AS_DOUBLE(o);
    return true;
  }
  return false;
}

bool KeyMatches(const EagerMemo::Key& key, PyObject* o) {
  switch (key.kind) {
    case EagerMemo::Key::kObject:
      return o == key.object;
    case EagerMemo::Key::kInt: {
      if (!PyLong_CheckExact(o)) return false;
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      return !overflow && v == key.i;
    }
    case EagerMemo::Key::kFloat:
      return PyFloat_CheckExact(o) && PyFloat_AS_DOUBLE(o) == key.f;
  }
  return false;
}

// The memo if it matches this call (with a reference for the caller), else null.
EagerMemo* MemoLookup(const OpBinding& b, const Tensor* values, size_t n, PyObject* const* args,
                      uint32_t transposed) {
  EagerMemo* m = b.memo();
  if (m == nullptr || m->transposed != transposed) return nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (values[i].dtype() != m->dtypes[i] || !(values[i].shape() == m->shapes[i])) return nullptr;
  }
  const auto& attr_pos = b.attr_pos();
  for (size_t k = 0; k < attr_pos.size(); ++k) {
    if (!KeyMatches(m->keys[k], args[attr_pos[k].second])) return nullptr;
  }
  ++m->refs;
  return m;
}

void MemoStore(const OpBinding& b, const BoundCall& bc, PyObject* const* args, uint32_t transposed) {
  for (size_t o = 0; o < bc.output_shapes.size(); ++o) {
    if (!bc.output_shapes[o].fully_defined()) return;
  }
  const auto& attr_pos = b.attr_pos();
  EagerMemo::Key keys[EagerMemo::kAttrs];
  for (size_t k = 0; k < attr_pos.size(); ++k) {
    if (!MakeKey(args[attr_pos[k].second], &keys[k])) return;
  }
  auto* m = new EagerMemo();
  m->transposed = transposed;
  for (size_t i = 0; i < bc.values.size(); ++i) {
    m->dtypes[i] = bc.values[i].dtype();
    m->shapes[i] = bc.values[i].shape();
  }
  for (size_t k = 0; k < attr_pos.size(); ++k) m->keys[k] = keys[k];
  m->attrs.assign(bc.attrs.data(), bc.attrs.data() + bc.attrs.size());
  for (size_t o = 0; o < bc.output_shapes.size(); ++o) m->output_shapes.push_back(bc.output_shapes[o].dims);
  b.set_memo(m);
}

}  // namespace

bool Memoizable(const OpDef& op, bool plain, size_t num_caller_attrs) {
  // The shape-tensor ops' shape functions read input values (cpp/ops/shape_ops.cc):
  // their output shapes depend on more than the memo's key (dtypes and shapes).
  static const char* const kReadsValues[] = {"ReshapeTo", "Expand", "StridedSlice", "Tile", "ConstantOfShape",
                                             "ArangeOf"};
  for (const char* name : kReadsValues) {
    if (op.name == name) return false;
  }
  return plain && op.inputs.size() <= EagerMemo::kInputs && num_caller_attrs <= EagerMemo::kAttrs;
}

PyObject* RunBound(const OpDef& op, BoundCall& bc, PyObject* const* py_inputs, PyObject* call) {
  InlinedVector<TensorShape, 2> shapes;
  for (size_t o = 0; o < op.outputs.size(); ++o) shapes.emplace_back(bc.output_shapes[o].dims);
  return RunEager(op, bc.values.data(), bc.values.size(), bc.attrs.data(), shapes.data(), bc.autograd, py_inputs,
                  call);
}

PyObject* EagerPlain(const OpBinding& b, PyObject* const* args, PyObject* const* py_inputs, PyObject* call,
                     bool* handled) {
  const OpDef& op = *b.op();
  const char* name = op.name.c_str();
  *handled = false;
  // BindValues, the binder less the flattening and weak values.
  BoundCall bc;
  bool autograd = false;
  uint32_t transposed = 0;  // inputs borrowed as their transposes (BorrowTransposed)
  for (size_t a = 0; a < op.inputs.size(); ++a) {
    PyObject* obj = py_inputs[a];
    if (IsTensor(obj)) {
      const PyTensor* pt = reinterpret_cast<const PyTensor*>(obj);
      if (pt->pending) return nullptr;
      bc.values.emplace_back(pt->tensor);
      autograd |= pt->ag != nullptr;
    } else if (PyArray_CheckExact(obj)) {
      Tensor t;  // default-initialized (not zeroed), then moved in
      if (a < 32 && BorrowTransposed(op.inputs[a], obj, &t)) {
        transposed |= 1u << a;
      } else if (!TensorFromArray(obj, name, op.inputs[a].name, &t)) {
        *handled = true;
        return nullptr;
      }
      bc.values.emplace_back(std::move(t));
    } else {
      return nullptr;
    }
  }
  *handled = true;
  const size_t n = bc.values.size();
  const bool memo = b.memoizable();
  if (memo) {
    if (EagerMemo* m = MemoLookup(b, bc.values.data(), n, args, transposed)) {
      PyObject* r = RunEager(op, bc.values.data(), n, m->attrs.data(), m->output_shapes.data(), autograd,
                             py_inputs, call);
      m->Unref();
      return r;
    }
  }
  InlinedVector<AttrValue, 4> attrs;
  attrs.resize(op.attrs.size());
  for (const auto& [i, pos] : b.attr_pos()) {
    if (!ConvertAnyAttr(args[pos], name, op.attrs[i], &attrs[i])) return nullptr;
  }
  FlipTransposeAttrs(op, transposed, attrs.data());
  Status s = BindValues(op, attrs.data(), &bc);
  if (!s.ok() && transposed != 0) {  // Dispatch's general path binds the views as copies (py_call.cc)
    *handled = false;
    return nullptr;
  }
  if (!s.ok()) return SetError(s);
  bc.autograd = autograd;
  if (memo) MemoStore(b, bc, args, transposed);
  return RunBound(op, bc, py_inputs, call);
}

}  // namespace py
}  // namespace opforge
