#include "opforge/tensor.h"

#include <cstdlib>
#include <limits>
#include <new>
#include <sstream>

namespace opforge {

TensorShape::TensorShape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) dims_[rank_++] = d;
}

Status TensorShape::Make(const int64_t* dims, int rank, TensorShape* out) {
  if (rank < 0 || rank > kMaxRank) {
    return errors::InvalidArgument("rank ", rank, " exceeds the maximum rank ", kMaxRank);
  }
  int64_t n = 1;
  bool overflow = false;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 0) {
      return errors::InvalidArgument("dimension ", i, " is negative (", dims[i], ")");
    }
    if (dims[i] != 0 && n > std::numeric_limits<int64_t>::max() / dims[i]) overflow = true;
    else n *= dims[i];
  }
  // A zero anywhere makes the product 0, whatever overflowed before it.
  for (int i = 0; i < rank; ++i) if (dims[i] == 0) overflow = false;
  if (overflow) return errors::InvalidArgument("the number of elements overflows int64");
  out->rank_ = rank;
  for (int i = 0; i < rank; ++i) out->dims_[i] = dims[i];
  return Status::OK();
}

bool TensorShape::IsValid() const {
  TensorShape checked;
  return Make(dims_, rank_, &checked).ok();
}

int64_t TensorShape::num_elements() const {
  // Unsigned: Make() admits shapes like [2^62, 4, 0] whose partial products
  // overflow before the 0; wrapping is defined and still ends at the product.
  uint64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= static_cast<uint64_t>(dims_[i]);
  return static_cast<int64_t>(n);
}

void TensorShape::InsertDim(int i, int64_t d) {
  for (int j = rank_; j > i; --j) dims_[j] = dims_[j - 1];
  dims_[i] = d;
  ++rank_;
}

void TensorShape::RemoveDim(int i) {
  for (int j = i; j + 1 < rank_; ++j) dims_[j] = dims_[j + 1];
  --rank_;
}

bool TensorShape::operator==(const TensorShape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i) if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string TensorShape::DebugString() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < rank_; ++i) {
    os << (i ? ", " : "");
    if (dims_[i] == -1) os << "None";  // an unknown dim of a graph shape
    else os << dims_[i];
  }
  os << ']';
  return os.str();
}

Tensor::Tensor(DType dtype, const TensorShape& shape, TensorBuffer* buffer)
    : dtype_(dtype), shape_(shape), buffer_(buffer) {
  if (buffer_) buffer_->Ref();
}
Tensor Tensor::Adopt(DType dtype, const TensorShape& shape, TensorBuffer* buffer) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.buffer_ = buffer;
  return t;
}
Tensor::Tensor(const Tensor& o) : dtype_(o.dtype_), shape_(o.shape_), buffer_(o.buffer_) {
  if (buffer_) buffer_->Ref();
}
Tensor::Tensor(Tensor&& o) noexcept : dtype_(o.dtype_), shape_(o.shape_), buffer_(o.buffer_) {
  o.buffer_ = nullptr;
  o.dtype_ = DType::kInvalid;
}
Tensor& Tensor::operator=(const Tensor& o) {
  if (this != &o) {
    if (o.buffer_) o.buffer_->Ref();
    if (buffer_) buffer_->Unref();
    dtype_ = o.dtype_;
    shape_ = o.shape_;
    buffer_ = o.buffer_;
  }
  return *this;
}
Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    if (buffer_) buffer_->Unref();
    dtype_ = o.dtype_;
    shape_ = o.shape_;
    buffer_ = o.buffer_;
    o.buffer_ = nullptr;
    o.dtype_ = DType::kInvalid;
  }
  return *this;
}
Tensor::~Tensor() {
  if (buffer_) buffer_->Unref();
}

Tensor Tensor::Reshaped(const TensorShape& shape) const { return Tensor(dtype_, shape, buffer_); }

std::string Tensor::DebugString() const {
  return std::string("Tensor<") + DTypeName(dtype_) + " " + shape_.DebugString() + ">";
}

}  // namespace opforge
