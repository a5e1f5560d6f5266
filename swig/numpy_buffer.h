// NumpyBuffer: tensor storage that borrows a numpy array's memory (no copy).
#pragma once

#include "numpy_api.h"
#include "opforge/tensor.h"

namespace opforge {
namespace py {

// Keeps a numpy array alive for exactly as long as a tensor uses its memory.
class NumpyBuffer final : public TensorBuffer {
 public:
  explicit NumpyBuffer(PyArrayObject* arr)
      : TensorBuffer(PyArray_DATA(arr), static_cast<size_t>(PyArray_NBYTES(arr))),
        array_(arr),
        writable_(PyArray_ISWRITEABLE(arr)) {
    Py_INCREF(arr);
  }
  bool writable() const override { return writable_; }

  // Borrowing happens on every op call: recycle the small objects through a
  // free list (guarded by the GIL) instead of malloc/free. Made under the GIL.
  static void* operator new(size_t size);
  static void operator delete(void* p);

 private:
  // The last reference may drop on any thread, with or without the GIL.
  ~NumpyBuffer() override;
  PyArrayObject* array_;
  bool writable_;
};

}  // namespace py
}  // namespace opforge
