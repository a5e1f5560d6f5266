#include "numpy_buffer.h"

#include <atomic>

namespace opforge {
namespace py {
namespace {

constexpr int kBufferFreeListMax = 256;
void* buffer_free_list[kBufferFreeListMax];
int buffer_free_count = 0;
std::atomic_flag buffer_free_lock = ATOMIC_FLAG_INIT;

struct SpinLock {
  SpinLock() { while (buffer_free_lock.test_and_set(std::memory_order_acquire)) {} }
  ~SpinLock() { buffer_free_lock.clear(std::memory_order_release); }
};

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
  {
    SpinLock lock;
    if (buffer_free_count > 0) return buffer_free_list[--buffer_free_count];
  }
  return ::operator new(size);
}

void NumpyBuffer::operator delete(void* p) {
  {
    SpinLock lock;
    if (buffer_free_count < kBufferFreeListMax) {
      buffer_free_list[buffer_free_count++] = p;
      return;
    }
  }
  ::operator delete(p);
}

}  // namespace py
}  // namespace opforge
