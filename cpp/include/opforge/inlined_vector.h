// A vector that keeps its first N elements inline: the per-op call path
// (inputs, attrs, shapes, outputs) allocates nothing for ordinary ops.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace opforge {

template <typename T, size_t N>
class InlinedVector {
 public:
  InlinedVector() = default;
  explicit InlinedVector(size_t n) { resize(n); }
  InlinedVector(const InlinedVector&) = delete;
  InlinedVector& operator=(const InlinedVector&) = delete;
  ~InlinedVector() {
    clear();
    if (data_ != Inline()) ::operator delete(data_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  T& back() { return data_[size_ - 1]; }

  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) Grow(capacity_ * 2);
    T* p = new (data_ + size_) T(std::forward<Args>(args)...);
    ++size_;
    return *p;
  }
  void push_back(T v) { emplace_back(std::move(v)); }

  // Default-initializes new elements. A class with a constructor or member
  // initializers runs them and nothing more: `T()` would first zero the
  // whole object (a TensorShape's 128 bytes of dims, an AttrValue, on every
  // op call). Unlike std::vector, a member with neither is left unset.
  // Scalars and trivial structs (no constructor at all) start zeroed.
  void resize(size_t n) {
    if (n > capacity_) Grow(n);
    while (size_ < n) {
      if constexpr (!std::is_trivially_default_constructible_v<T>) {
        new (data_ + size_++) T;
      } else {
        new (data_ + size_++) T();
      }
    }
    while (size_ > n) data_[--size_].~T();
  }
  void clear() { resize(0); }

 private:
  T* Inline() { return reinterpret_cast<T*>(inline_); }

  void Grow(size_t capacity) {
    T* bigger = static_cast<T*>(::operator new(capacity * sizeof(T)));
    for (size_t i = 0; i < size_; ++i) {
      new (bigger + i) T(std::move(data_[i]));
      data_[i].~T();
    }
    if (data_ != Inline()) ::operator delete(data_);
    data_ = bigger;
    capacity_ = capacity;
  }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* data_ = Inline();
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace opforge
