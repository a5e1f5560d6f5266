// What the Sgemm driver (sgemm.cc) shares with its small-M path
// (small_m.cc). Internal to cpp/kernels/gemm/.
#pragma once

#include <cstdint>

#include "gemm.h"
#include "microkernel.h"

namespace opforge {
namespace gemm {

// Tiles that read A in place are at most this high while B is small
// (small_m.cc says why).
constexpr int kStridedRows = 8;

// One mr-high A panel as the packed kernels read it, through the ISA's
// packing kernel where it has one for this layout.
void PackAFor(const Kernels& kr, const float* src, int64_t rs, int64_t cs, int64_t m, int64_t kc, float* dst);

// The epilogue of the register tile whose first element is C[row, col].
TileEpilogue TileEp(const Epilogue& ep, int64_t row, int64_t col);

// Whether the microkernels apply this epilogue in registers.
bool RegisterEpilogue(const Epilogue& ep, const Kernels& kr);

// Row pc of the prepacked B panel holding column jr (a multiple of nr).
const float* PanelAt(const StridedArgs& g, int nr, int64_t jr, int64_t pc);

// C[i0:i1, j0:j1] by the small-M path (small_m.cc).
void SmallM(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, int64_t i0, int64_t i1, int64_t j0,
            int64_t j1);

// Test and bench hook (ctypes): 0 keeps A in place in the small-M path, 1
// packs it for tiles higher than kStridedRows (the default); -1 leaves it.
// Returns the previous mode. SmallMPackedACount: SmallM calls (per thread's
// share) that packed A, so far in this process.
int SetSmallMPackA(int mode);
int64_t SmallMPackedACount();

}  // namespace gemm
}  // namespace opforge
