// How a threaded product's C is cut into tiles (sgemm.cc claims them one at
// a time, claims.h).
#include "tile_grid.h"

#include <algorithm>

#include "blocking.h"

namespace opforge {
namespace gemm {

// The tile grid of a threaded product: about Blocking::tiles_per_thread
// tiles per thread, cut from the longer side first, no tile thinner than two
// register tiles of rows or kMinTileCols columns (narrower ones re-pack their
// share of A and B too often). Where the blocking asks for one tile per
// thread (a 2 MiB L2: Intel Sapphire Rapids), B larger than half the L2 is
// cut by columns first, since every row of tiles packs its columns of B
// again (n = 2048 in 4 x 2 tiles packed B four times, 6 % of the samples),
// unless two tiles per thread, cut from the longer side, make C's tile fit
// in half the L2 across the depth blocks (n = 1024: 512 x 512 tiles).
// Sapphire Rapids, two threads, chrt -f 1, against numpy (four tiles per
// thread / one / two): n = 256 1.13 / 1.25 / 1.10x, 512 1.12 / 1.18-1.20 /
// 1.11x, 1024 1.12-1.13 / 1.11-1.12 / 1.19-1.21x, 2048 0.93-0.95 / 1.04 /
// 0.98x.
constexpr int64_t kMinTileCols = 64;
Grid MakeGrid(int64_t m, int64_t n, int64_t k, const Kernels& kr, int64_t threads, int64_t small_m) {
  const int64_t units_m = (m + kr.mr - 1) / kr.mr, units_n = (n + kr.nr - 1) / kr.nr;
  const Blocking& bl = GetBlocking();
  // Small M runs unpacked over the whole of A: cut along N only.
  const bool rows_ok = m > small_m;
  auto cut = [&](int64_t per_thread, bool columns_first) {
    Grid g{1, 1};
    while (g.tm * g.tn < per_thread * threads) {
      const int64_t h = m / g.tm, w = n / g.tn;
      const bool can_m = rows_ok && units_m >= 4 * g.tm, can_n = units_n >= 2 * g.tn && w >= 2 * kMinTileCols;
      if (can_m && ((h >= w && !columns_first) || !can_n)) {
        g.tm *= 2;
      } else if (can_n) {
        g.tn *= 2;
      } else {
        break;
      }
    }
    return g;
  };
  // Small M is bound by reading B: one share per thread, so each core reads
  // the same columns of B on every call (from its L2 when they fit). With
  // four tiles each, a worker that started a few microseconds late found the
  // caller in its share: 0.87x numpy at M = 1, K = N = 768, W [N, K], against
  // 0.97x, and 1.34x against 1.44x at M = 16, N = 3072.
  Grid g;
  if (!rows_ok) {
    g = cut(1, false);
  } else if (bl.tiles_per_thread != 1) {
    g = cut(bl.tiles_per_thread, false);
  } else {
    const int64_t half_l2 = L2BytesPerCore() / 2;
    auto c_bytes = [&](const Grid& t) { return (m / t.tm) * (n / t.tn) * int64_t{sizeof(float)}; };
    g = cut(1, k * n * int64_t{sizeof(float)} > half_l2);
    if (c_bytes(g) > half_l2) {
      const Grid two = cut(2, false);
      if (c_bytes(two) <= half_l2) g = two;
    }
  }
  // At least one tile per thread when the shape allows it at all.
  if (g.tm * g.tn < threads) {
    if (rows_ok && units_m >= threads) g.tm = std::max(g.tm, threads);
    else g.tn = std::min(units_n, std::max(g.tn, threads));
  }
  return g;
}

}  // namespace gemm
}  // namespace opforge
