// Owned tensor storage: 64-byte-aligned heap memory.
#include <cstdlib>
#include <limits>

#include "opforge/tensor.h"

namespace opforge {
namespace {

constexpr size_t kAlignment = 64;

class AlignedBuffer final : public TensorBuffer {
 public:
  AlignedBuffer(void* data, size_t size) : TensorBuffer(data, size) {}
 private:
  ~AlignedBuffer() override { std::free(data()); }
};

// Empty tensors still get a valid, aligned, non-null data pointer (numpy
// would otherwise allocate its own when viewing them).
class EmptyBuffer final : public TensorBuffer {
 public:
  EmptyBuffer() : TensorBuffer(storage_, 0) {}
 private:
  ~EmptyBuffer() override = default;
  alignas(kAlignment) char storage_[kAlignment] = {};
};

}  // namespace

Status Tensor::Allocate(DType dtype, const TensorShape& shape, Tensor* out) {
  const size_t itemsize = DTypeSize(dtype);
  if (itemsize == 0) return errors::InvalidArgument("cannot allocate a tensor of dtype invalid");
  const int64_t n = shape.num_elements();
  if (n == 0) {
    TensorBuffer* buf = new EmptyBuffer();
    *out = Tensor(dtype, shape, buf);
    buf->Unref();
    return Status::OK();
  }
  if (static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / itemsize - kAlignment) {
    return errors::ResourceExhausted("cannot allocate a ", DTypeName(dtype), " tensor of shape ",
                                     shape.DebugString(), ": its size overflows");
  }
  const size_t bytes = static_cast<size_t>(n) * itemsize;
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = nullptr;
  if (posix_memalign(&p, kAlignment, rounded) != 0 || p == nullptr) {
    return errors::ResourceExhausted("failed to allocate ", bytes, " bytes for a ", DTypeName(dtype),
                                     " tensor of shape ", shape.DebugString());
  }
  TensorBuffer* buf = new AlignedBuffer(p, bytes);
  *out = Tensor(dtype, shape, buf);
  buf->Unref();  // `out` holds the only reference
  return Status::OK();
}

}  // namespace opforge
