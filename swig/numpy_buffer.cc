#include "numpy_buffer.h"

namespace opforge {
namespace py {
namespace {

// Guarded by the GIL: a buffer is made from a numpy array (under the GIL)
// and nearly always freed under it; one freed on a thread without it goes
// back to the heap. No atomics: a locked instruction costs tens of cycles.
constexpr int kBufferFreeListMax = 256;
void* buffer_free_list[kBufferFreeListMax];
int buffer_free_count = 0;

}  // namespace

NumpyBuffer::~NumpyBuffer() {
  if (PyGILState_Check()) {  // the common case, and much cheaper than Ensure
    Py_DECREF(array_);
    return;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF(array_);
  PyGILState_Release(gil);
}

void* NumpyBuffer::operator new(size_t size) {
  if (buffer_free_count > 0) return buffer_free_list[--buffer_free_count];
  return ::operator new(size);
}

void NumpyBuffer::operator delete(void* p) {
  if (PyGILState_Check() && buffer_free_count < kBufferFreeListMax) {
    buffer_free_list[buffer_free_count++] = p;
    return;
  }
  ::operator delete(p);
}

}  // namespace py
}  // namespace opforge
