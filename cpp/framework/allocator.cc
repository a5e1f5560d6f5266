// Owned tensor storage, 64-byte aligned. Three tiers, because per-call cost
// dominates small ops and page faults dominate large ones:
//   small  - header and data in one heap block (one malloc per tensor);
//   medium - aligned heap memory;
//   large  - mmap'd, transparent huge pages requested (OPFORGE_ALLOCATOR_HUGEPAGES=0:
//            not), and recycled through a
//            bounded cache so a fresh output does not fault in every page again.
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <new>

#include "opforge/tensor.h"

namespace opforge {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kSmallMax = 4096;              // bytes of data held inline
constexpr size_t kLargeMin = size_t{1} << 20;   // mmap from here up
constexpr size_t kHugePage = size_t{2} << 20;
// Also mmap'd and cached from here to kLargeMin, at page granularity and
// without huge pages (MappedPages): from glibc's default mmap threshold
// (128 KiB) a freed heap block may go back to the kernel (munmap, or a trim
// of the heap's top), and the next tensor of that size faults in every page
// again. A 256 x 256 float32 matmul output alternating with numpy's calls
// took 64 faults on most calls, about 100-190 us of a 0.2-0.4 ms product
// (numpy's own: none).
constexpr size_t kCachedMin = size_t{128} << 10;
constexpr size_t kPage = size_t{4} << 10;

constexpr size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t CacheLimitBytes() {
  static const size_t limit = [] {
    const char* env = std::getenv("OPFORGE_ALLOCATOR_CACHE_MB");
    long mb = env ? std::atol(env) : 512;
    return static_cast<size_t>(mb < 0 ? 0 : mb) << 20;
  }();
  return limit;
}

// OPFORGE_ALLOCATOR_HUGEPAGES=0: large blocks without MADV_HUGEPAGE (4 KiB
// pages), to tell whether a slowdown depends on transparent huge pages.
bool HugePages() {
  static const bool on = [] {
    const char* env = std::getenv("OPFORGE_ALLOCATOR_HUGEPAGES");
    return env == nullptr || std::atol(env) != 0;
  }();
  return on;
}

// Freed large blocks by mapped size; reused for requests of the same size,
// or of up to kMaxSlack times less: a graph run frees and asks for blocks of
// many sizes (one per activation shape), and exact matches alone left the
// cache holding every size it ever saw beside the live ones (peak RSS of a
// SqueezeNet at batch 8: 1.3x onnxruntime's; with best fit 1.0x).
constexpr size_t kMaxSlack = 2;

class LargeBlockCache {
 public:
  // The smallest cached block of at least `*mapped` bytes (at most kMaxSlack
  // times more); *mapped becomes its size.
  void* Take(size_t* mapped) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(*mapped);
    if (it == free_.end() || it->first > kMaxSlack * *mapped) return nullptr;
    void* p = it->second;
    *mapped = it->first;
    free_.erase(it);
    cached_ -= *mapped;
    return p;
  }
  // Returns false when the block does not fit and must be unmapped.
  bool Put(void* p, size_t mapped) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t limit = CacheLimitBytes();
    if (mapped > limit / 2) return false;
    // Evict the largest blocks first until the new one fits.
    while (cached_ + mapped > limit && !free_.empty()) {
      auto last = std::prev(free_.end());
      munmap(last->second, last->first);
      cached_ -= last->first;
      free_.erase(last);
    }
    free_.emplace(mapped, p);
    cached_ += mapped;
    return true;
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
};

LargeBlockCache& Cache() {
  static LargeBlockCache* cache = new LargeBlockCache();  // never destroyed
  return *cache;
}

class HeapBuffer final : public TensorBuffer {
 public:
  HeapBuffer(void* data, size_t size) : TensorBuffer(data, size) {}
 private:
  ~HeapBuffer() override { std::free(data()); }
};

// Header and data in one malloc'd block (aligned_alloc costs several times
// more than malloc); the data starts at the first 64-byte boundary after the
// header.
class InlineBuffer final : public TensorBuffer {
 public:
  static InlineBuffer* Create(size_t size) {
    void* block = std::malloc(sizeof(InlineBuffer) + kAlignment + (size ? size : 1));
    if (!block) return nullptr;
    const uintptr_t after = reinterpret_cast<uintptr_t>(block) + sizeof(InlineBuffer);
    void* data = reinterpret_cast<void*>(RoundUp(after, kAlignment));
    return new (block) InlineBuffer(data, size);
  }
  // Placement-constructed: release the block ourselves.
  static void operator delete(void* p) { std::free(p); }

 private:
  InlineBuffer(void* data, size_t size) : TensorBuffer(data, size) {}
  ~InlineBuffer() override = default;
};

class MappedBuffer final : public TensorBuffer {
 public:
  MappedBuffer(void* data, size_t size, size_t mapped) : TensorBuffer(data, size), mapped_(mapped) {}
 private:
  ~MappedBuffer() override {
    if (!Cache().Put(data(), mapped_)) munmap(data(), mapped_);
  }
  size_t mapped_;
};

// A block of [kCachedMin, kLargeMin): 4 KiB pages, recycled by the cache.
TensorBuffer* MappedPages(size_t bytes) {
  size_t mapped = RoundUp(bytes, kPage);
  void* p = Cache().Take(&mapped);
  if (!p) {
    p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
  }
  return new MappedBuffer(p, bytes, mapped);
}

TensorBuffer* AllocateBuffer(size_t bytes) {
  if (bytes <= kSmallMax) return InlineBuffer::Create(bytes);
  if (bytes < kCachedMin) {
    void* p = std::aligned_alloc(kAlignment, RoundUp(bytes, kAlignment));
    return p ? new HeapBuffer(p, bytes) : nullptr;
  }
  if (bytes < kLargeMin) return MappedPages(bytes);
  size_t mapped = RoundUp(bytes, kHugePage);
  void* p = Cache().Take(&mapped);
  if (!p) {
    p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
    if (HugePages()) madvise(p, mapped, MADV_HUGEPAGE);  // advisory: fewer, larger page faults
#endif
  }
  return new MappedBuffer(p, bytes, mapped);
}

}  // namespace

Status Tensor::Allocate(DType dtype, const TensorShape& shape, Tensor* out) {
  const size_t itemsize = DTypeSize(dtype);
  if (itemsize == 0) return errors::InvalidArgument("cannot allocate a tensor of dtype invalid");
  const uint64_t n = static_cast<uint64_t>(shape.num_elements());
  if (n > (std::numeric_limits<size_t>::max() - kHugePage) / itemsize) {
    return errors::ResourceExhausted("cannot allocate a ", DTypeName(dtype), " tensor of shape ",
                                     shape.DebugString(), ": its size overflows");
  }
  const size_t bytes = static_cast<size_t>(n) * itemsize;
  TensorBuffer* buf = AllocateBuffer(bytes);
  if (!buf) {
    return errors::ResourceExhausted("failed to allocate ", bytes, " bytes for a ", DTypeName(dtype),
                                     " tensor of shape ", shape.DebugString());
  }
  *out = Tensor::Adopt(dtype, shape, buf);
  return Status::OK();
}

}  // namespace opforge
