// The tile grid of a threaded f32 product (tile_grid.cc). Internal to
// cpp/kernels/gemm/.
#pragma once

#include <cstdint>

#include "microkernel.h"

namespace opforge {
namespace gemm {

struct Grid {
  int64_t tm, tn;  // tiles along M and N
};

// C (m x n, depth k) on `threads` threads; up to small_m rows A is read in
// place over all rows, so only N is cut.
Grid MakeGrid(int64_t m, int64_t n, int64_t k, const Kernels& kr, int64_t threads, int64_t small_m);

}  // namespace gemm
}  // namespace opforge
