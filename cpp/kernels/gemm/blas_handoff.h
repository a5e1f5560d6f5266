// Handing a float32 product to numpy's OpenBLAS while its workers are awake.
// Internal to cpp/kernels/gemm/.
//
// OpenBLAS's worker threads busy-wait about 0.1 s (2^28 TSC cycles) after each
// call, without yielding. A product of ours started in that window shares a
// core with the spinning worker: on 2 cores our two threads got about one
// core's worth (0.5-0.6x numpy at n = 512-2048 when alternating with numpy).
// The waiting threads are ready for work, so the product goes to that BLAS
// instead, whole: it runs at numpy's speed. Only while they are on a core
// (checked per call); otherwise our own GEMM runs.
#pragma once

#include <cstdint>

#include "gemm.h"

namespace opforge {
namespace gemm {

// Runs C = op(A) op(B) (+ epilogue) on numpy's OpenBLAS when its workers are
// running right now and the operands suit cblas (alpha 1, beta 0, each of A
// and B row- or column-major). False: nothing done. OPFORGE_GEMM_HANDOFF=0
// turns it off.
bool HandOffWhileBlasAwake(const StridedArgs& g, const Epilogue& ep, int64_t threads);

// Products handed off so far in this process (tests, opforge.config).
int64_t HandoffCount();

}  // namespace gemm
}  // namespace opforge
