// Per-thread packing scratch, optionally on transparent huge pages.
#include "scratch.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "blocking.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace opforge {
namespace gemm {
namespace {

constexpr int64_t kHuge = int64_t{2} << 20;

struct Buffer {
  float* data = nullptr;
  int64_t floats = 0;
  ~Buffer() { std::free(data); }
};

}  // namespace

float* Scratch(int slot, int64_t count) {
  static thread_local Buffer bufs[kScratchSlots];
  Buffer& b = bufs[slot];
  if (b.floats >= count) return b.data;
  std::free(b.data);
  b.data = nullptr, b.floats = 0;
  const int64_t bytes = (count + 16) * static_cast<int64_t>(sizeof(float));  // slack, as the vector it replaced
  const bool huge = GetBlocking().huge_scratch && bytes >= kHuge;
  const int64_t size = huge ? (bytes + kHuge - 1) / kHuge * kHuge : (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(huge ? kHuge : 64, static_cast<size_t>(size));
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Before the first touch, so the pages fault in huge; a kernel without THP
  // (or with it off) refuses, and the buffer stays on small pages.
  if (huge) madvise(p, static_cast<size_t>(size), MADV_HUGEPAGE);
#endif
  std::memset(p, 0, static_cast<size_t>(size));  // zeroed, as the vector it replaced
  b.data = static_cast<float*>(p), b.floats = size / static_cast<int64_t>(sizeof(float)) - 16;
  return b.data;
}

}  // namespace gemm
}  // namespace opforge
