// The tiles of a threaded product, claimed one at a time. Internal to
// cpp/kernels/gemm/.
//
// Thread `who` of `threads` starts at its own share (tiles [T*who/threads,
// ...)) and then goes round the rest, taking whatever no one has claimed:
// balanced, a thread whose core is busy takes fewer (numpy's OpenBLAS
// workers spin ~0.1 s after each call; other processes), and in a loop of
// calls each core gets the same tiles each time, so its share of the
// operands is still in its L2 (M = 1, K = N = 768: a 1.2 MiB share per core;
// one shared counter handed tiles out in arrival order: 0.82x numpy's GEMV
// there, which splits statically).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace opforge {
namespace gemm {

class TileClaims {
 public:
  TileClaims(int64_t tiles, int64_t threads)
      : tiles_(tiles), threads_(threads), taken_(new std::atomic<bool>[tiles]) {
    for (int64_t t = 0; t < tiles; ++t) taken_[t].store(false, std::memory_order_relaxed);
  }

  // Calls f(tile) for each tile this thread claims.
  template <typename F>
  void Run(int64_t who, F&& f) {
    const int64_t start = tiles_ * (who % threads_) / threads_;
    for (int64_t s = 0; s < tiles_; ++s) {
      const int64_t t = (start + s) % tiles_;
      if (!taken_[t].load(std::memory_order_relaxed) && !taken_[t].exchange(true, std::memory_order_relaxed)) f(t);
    }
  }

 private:
  const int64_t tiles_, threads_;
  std::unique_ptr<std::atomic<bool>[]> taken_;
};

}  // namespace gemm
}  // namespace opforge
