// Per-thread packing scratch of the f32 GEMM (sgemm.cc). Internal to
// cpp/kernels/gemm/.
#pragma once

#include <cstdint>

namespace opforge {
namespace gemm {

// Slots: 0 packed B, 1 packed A, 2 the A a threaded call packs once for all
// its threads, 3 the C tiles of a product deeper than one kc block
// (sgemm.cc's CTiles).
constexpr int kScratchSlots = 4;

// At least `count` floats, 64-byte aligned, this thread's, kept between
// calls (grown, never shrunk). With Blocking::huge_scratch, buffers of 2 MiB
// or more are 2 MiB-aligned and advised as transparent huge pages (see
// blocking.cc for why).
float* Scratch(int slot, int64_t count);

}  // namespace gemm
}  // namespace opforge
