// How a threaded product's work is shared: the tiles by TileClaims
// (../common/claimed_for.h: each thread its own share first, then whatever
// no one has claimed, so a thread whose core is busy takes fewer: numpy's
// OpenBLAS workers spin ~0.1 s after each call, other processes), and the
// packing of A before them by SharedPhase. Internal to cpp/kernels/gemm/.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "../common/claimed_for.h"

namespace opforge {
namespace gemm {

// A shared first phase before the tiles (packing A once for every tile):
// its units are handed out from one counter, so whoever is running takes
// them, and a thread that starts late (a parked worker on an idle VM core
// took 0.1-4 ms to wake after a 0.3 s pause, measured) finds them done and
// goes straight to its tiles. A fork-join of its own for this phase made the
// caller wait for that wake-up twice (the worker's, then its own after
// parking in the join): 80-350 us to pack 256 x 256, 0.5-1.3 ms for 1024 x
// 1024, where the packing itself takes 10 and 300 us. A thread waits only
// for units another thread is running, never for one not yet started.
class SharedPhase {
 public:
  explicit SharedPhase(int64_t units) : units_(units) {}

  // Runs unclaimed units (f(unit)) until none is left, then waits until
  // every unit is done.
  template <typename F>
  void Run(F&& f) {
    for (int64_t u = next_.fetch_add(1, std::memory_order_relaxed); u < units_;
         u = next_.fetch_add(1, std::memory_order_relaxed)) {
      f(u);
      done_.fetch_add(1, std::memory_order_release);
    }
    for (int i = 0; done_.load(std::memory_order_acquire) < units_; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if ((i & 1023) == 1023) std::this_thread::yield();  // the other thread may share this core
    }
  }

 private:
  const int64_t units_;
  std::atomic<int64_t> next_{0}, done_{0};
};

}  // namespace gemm
}  // namespace opforge
