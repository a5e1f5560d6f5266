// Per-thread, 64-byte-aligned scratch buffers that grow and are kept for the
// thread's life: the packing buffers of the GEMM drivers (sgemm.cc,
// small_m.cc, quant/qgemm.cc). Each caller owns its own slots (below), so a
// driver's buffers are never another's while both are live.
#pragma once

#include <cstdint>
#include <vector>

namespace opforge {
namespace gemm {

enum ScratchSlot : int {
  kScratchB = 0,        // sgemm: a block of B panels (Packed) or one panel (SmallM)
  kScratchA = 1,        // sgemm: a block of A panels (Packed) or all of A (SmallM)
  kScratchPrepackA = 2,  // sgemm: all of A packed once for a threaded call's tiles
  kScratchQuant = 3,    // qgemm: four slots from here
  kScratchSlots = 7,
};

inline void* ScratchBytes(int slot, int64_t bytes) {
  static thread_local std::vector<char> bufs[kScratchSlots];
  std::vector<char>& v = bufs[slot];
  if (static_cast<int64_t>(v.size()) < bytes + 64) v.resize(bytes + 64);
  const uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<void*>((p + 63) & ~uintptr_t{63});
}

inline float* ScratchFloats(int slot, int64_t count) {
  return static_cast<float*>(ScratchBytes(slot, count * int64_t{sizeof(float)}));
}

}  // namespace gemm
}  // namespace opforge
