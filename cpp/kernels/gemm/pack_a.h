// Packing of A's mr-high panels for the packed f32 GEMM (sgemm.cc).
// Internal to cpp/kernels/gemm/.
#pragma once

#include <cstdint>

#include "microkernel.h"

namespace opforge {
namespace gemm {

// One mr-high A panel: dst[p * mr + i] = A(i, p), A(i, p) = src[i * rs + p *
// cs], for i < m (rows past m are never read: the microkernel for m rows is
// called), through the ISA's kernel where it has one for the layout.
void PackAFor(const Kernels& kr, const float* src, int64_t rs, int64_t cs, int64_t m, int64_t kc, float* dst);

}  // namespace gemm
}  // namespace opforge
