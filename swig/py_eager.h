// The eager entry of the call path (py_call.cc's Dispatch hands it a call):
// run the kernel now, wrap the outputs, tape the call when an input
// requires a gradient. Plain calls (no list args, every input a Tensor or a
// numpy array) skip the full binder, and repeated ones its inference too:
// the last inference of each op is memoised (EagerMemo).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "bind.h"
#include "opforge/op.h"
#include "opforge/tensor.h"
#include "py_call.h"

namespace opforge {
namespace py {

// What BindValues inferred for an op's last plain eager call: completed
// attrs and output shapes. A call reuses it when its inputs have the same
// dtypes and shapes and its caller attrs the same keys: None, a bool or an
// opforge dtype (objects that live as long as the module) by identity, a
// Python int or float by value (no reference is held). Other attr values
// (lists, strings) are converted on every call and not memoised. Inference
// reads nothing else. Inputs borrowed as their transposes (BorrowTransposed)
// are part of the key: the completed attrs have their transpose attrs flipped.
// Touched only under the GIL; a call holds a reference while it uses the memo
// (a nested call of the same op may replace it).
struct EagerMemo {
  static constexpr size_t kInputs = 4, kAttrs = 4;
  struct Key {
    enum Kind : int8_t { kObject, kInt, kFloat } kind = kObject;
    PyObject* object = nullptr;  // kObject
    int64_t i = 0;               // kInt
    double f = 0;                // kFloat
  };
  int refs = 1;
  uint32_t transposed = 0;  // the inputs borrowed as their transposes, one bit each
  DType dtypes[kInputs];
  TensorShape shapes[kInputs];
  Key keys[kAttrs];               // in attr_pos order
  std::vector<AttrValue> attrs;   // completed
  std::vector<TensorShape> output_shapes;

  void Unref() {
    if (--refs == 0) delete this;
  }
};

// A binding can memoise when its calls are plain and its keys fit.
bool Memoizable(const OpDef& op, bool plain, size_t num_caller_attrs);

// The eager fast path. Returns the result (or nullptr with an error) and
// sets *handled, or leaves *handled false when some input is neither a
// Tensor with its value nor a numpy array (the caller binds in full).
PyObject* EagerPlain(const OpBinding& b, PyObject* const* args, PyObject* const* py_inputs, PyObject* call,
                     bool* handled);

// Runs a call the full binder bound (eager mode, or a taped call in another mode).
PyObject* RunBound(const OpDef& op, BoundCall& bc, PyObject* const* py_inputs, PyObject* call);

}  // namespace py
}  // namespace opforge
