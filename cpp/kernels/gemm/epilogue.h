// Applies an Epilogue to one finished output tile. Internal to gemm/.
#pragma once

#include <cstdint>

#include "gemm.h"

namespace opforge {
namespace gemm {

// Tile C[row0 : row0 + m, col0 : col0 + n] at c (row stride ldc).
void ApplyEpilogue(const Epilogue& ep, float* c, int64_t ldc, int64_t row0, int64_t col0,
                   int64_t m, int64_t n);

}  // namespace gemm
}  // namespace opforge
