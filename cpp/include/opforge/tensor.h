// Tensor: a dtype, an int64 shape and refcounted, contiguous row-major storage.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "opforge/dtype.h"
#include "opforge/status.h"

namespace opforge {

inline constexpr int kMaxRank = 16;

// A shape stored inline (no heap allocation on the per-op path).
class TensorShape {
 public:
  TensorShape() = default;
  TensorShape(std::initializer_list<int64_t> dims);
  // Copies only the dims in use: shapes are copied on every op call.
  TensorShape(const TensorShape& o) : rank_(o.rank_) {
    for (int i = 0; i < rank_; ++i) dims_[i] = o.dims_[i];
  }
  TensorShape& operator=(const TensorShape& o) {
    rank_ = o.rank_;
    for (int i = 0; i < rank_; ++i) dims_[i] = o.dims_[i];
    return *this;
  }
  // Trusted: the caller guarantees 0 <= rank <= kMaxRank and valid dims.
  TensorShape(const int64_t* dims, int rank) : rank_(rank) {
    for (int i = 0; i < rank; ++i) dims_[i] = dims[i];
  }

  // Validates rank, non-negative dims and that the element count fits int64.
  static Status Make(const int64_t* dims, int rank, TensorShape* out);

  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t operator[](int i) const { return dims_[i]; }
  const int64_t* dims() const { return dims_; }
  int64_t num_elements() const;  // 1 for rank 0

  void set_dim(int i, int64_t d) { dims_[i] = d; }
  void AddDim(int64_t d) { dims_[rank_++] = d; }  // caller keeps rank <= kMaxRank
  // True if every dim is >= 0 and the element count fits int64.
  bool IsValid() const;
  void InsertDim(int i, int64_t d);
  void RemoveDim(int i);

  bool operator==(const TensorShape& o) const;
  bool operator!=(const TensorShape& o) const { return !(*this == o); }
  std::string DebugString() const;  // "[2, 3]"

 private:
  int rank_ = 0;
  int64_t dims_[kMaxRank];  // only [0, rank_) is meaningful
};

// Refcounted storage. Subclasses decide where the bytes come from: owned
// aligned memory (Tensor::Allocate) or memory borrowed from elsewhere (numpy).
class TensorBuffer {
 public:
  TensorBuffer(void* data, size_t size) : data_(data), size_(size) {}
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  virtual bool writable() const { return true; }

  void Ref() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  // The sole owner skips the atomic decrement (a locked instruction costs
  // tens of cycles, several per small op call): with one reference no other
  // thread can hold or take one.
  void Unref() const {
    if (refs_.load(std::memory_order_acquire) == 1 || refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete this;
    }
  }
  bool RefCountIsOne() const { return refs_.load(std::memory_order_acquire) == 1; }

 protected:
  virtual ~TensorBuffer() = default;

 private:
  void* data_;
  size_t size_;
  mutable std::atomic<int64_t> refs_{1};
};

class Tensor {
 public:
  Tensor() = default;
  // Shares `buffer` (adds a reference). buffer->size() must cover the shape.
  Tensor(DType dtype, const TensorShape& shape, TensorBuffer* buffer);
  // Takes over the caller's reference to a new `buffer` (no Ref/Unref pair).
  static Tensor Adopt(DType dtype, const TensorShape& shape, TensorBuffer* buffer);
  Tensor(const Tensor& o);
  Tensor(Tensor&& o) noexcept;
  Tensor& operator=(const Tensor& o);
  Tensor& operator=(Tensor&& o) noexcept;
  ~Tensor();

  // Allocates 64-byte-aligned, uninitialised storage. Fails with
  // ResourceExhausted (never aborts) when the memory cannot be had.
  static Status Allocate(DType dtype, const TensorShape& shape, Tensor* out);

  bool valid() const { return dtype_ != DType::kInvalid; }
  DType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t NumElements() const { return shape_.num_elements(); }
  size_t TotalBytes() const { return static_cast<size_t>(NumElements()) * DTypeSize(dtype_); }

  void* raw_data() const { return buffer_ ? buffer_->data() : nullptr; }
  template <typename T> T* data() const { return static_cast<T*>(raw_data()); }
  TensorBuffer* buffer() const { return buffer_; }

  // The same storage viewed with another shape of the same element count.
  Tensor Reshaped(const TensorShape& shape) const;

  std::string DebugString() const;  // "Tensor<float32 [2, 3]>"

 private:
  DType dtype_ = DType::kInvalid;
  TensorShape shape_;
  TensorBuffer* buffer_ = nullptr;
};

}  // namespace opforge
