// Products of a few microseconds (below sgemm.cc's kMinParallelFma) over two
// threads, only where that cannot make them much slower than one thread.
// Internal to cpp/kernels/gemm/.
//
// A fork-join through the pool costs about as much as the product (the
// worker started 1.4-1.6 us after the caller at 64^3, whose quarter tiles
// take 1.3 us), and waking a parked worker tens of microseconds. So a loop
// of such products is served by one pool task, a session: it polls one
// shared slot for jobs (one cache line, ~0.2 us away) and leaves after
// kLinger without one. The caller publishes each product's 2-4 tiles there
// and runs its own; every tile is claimed by whoever gets to it first, and
// the caller, done with its own, claims what the worker has not: it waits
// only for tiles the worker has claimed, never for a worker that has not
// started. A session starts only when a pool worker is polling already.
//
// A split that did not pay (the worker ran nothing, or ran on the caller's
// own core, or the call took longer than the caller's first tile times the
// tile count) makes this thread run the next 1, 3, 7, ... (up to
// kMaxBackoff) products alone; one that paid resets that.
//
// OPFORGE_GEMM_SMALL_SPLIT: unset or "auto" (the above), "0" (never split);
// for tests: "shares" (always split, each side runs exactly its own tiles)
// and "caller" (always split, the caller claims every tile: the steal path).
#pragma once

#include <cstdint>

namespace opforge {
namespace gemm {

enum class SmallSplitMode : int { kOff = 0, kAuto = 1, kShares = 2, kCallerOnly = 3 };

SmallSplitMode GetSmallSplitMode();

// tile(ctx, t) computes tile t; it may run on either thread.
struct TileFn {
  void (*call)(const void* ctx, int64_t t);
  const void* ctx;
};

// Runs tiles [0, tiles) (2 <= tiles <= 4) over the caller and a pool worker
// and returns true, or returns false at once (nothing run: the caller runs
// the product alone).
bool SmallSplit(int64_t tiles, TileFn tile);

// Test and bench hooks (ctypes, tests/test_gemm_small_split.py): sets the
// mode (0-3; -1 leaves it) and returns the previous one; the counters: 0
// splits run, 1 tiles the worker ran, 2 tiles of the worker's share the
// caller ran, 3 splits that did not pay (back-off), 4 sessions started.
int SetSmallSplitMode(int mode);
int64_t SmallSplitCount(int which);

}  // namespace gemm
}  // namespace opforge
