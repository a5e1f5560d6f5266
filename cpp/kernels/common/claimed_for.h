// Pieces of work shared over the intra-op threads by claiming, for kernels
// whose ParallelFor would hand each thread one fixed range.
//
// ParallelFor gives each thread one range; when a worker has not started its
// range by the time the calling thread finishes its own (the worker was
// parked, or shares its core with another process), the caller runs that
// range too, and the whole op runs on one core. On a busy machine that is
// what a two-thread model run did for its whole life: resnet18 b1 17 -> 30
// ms, the worker's CPU time 0.9 -> 0.15 of the call's wall time, run-queue
// wait 25 ms per 30 ms call (docs/two_thread_runs.md). Here every thread
// starts at its own share of the pieces and then takes, one by one, the
// pieces no thread has claimed: a thread that starts late does less instead
// of nothing, and when all start on time each does its own share, in order
// (the same pieces each call: its operands stay in its core's cache).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "opforge/parallel.h"

namespace opforge {

// Pieces claimed one at a time: thread `who` of `threads` starts at its own
// share (pieces [P*who/threads, ...)) and then goes round the rest, taking
// whatever no one has claimed. When all start on time each does its own
// share, in order, so in a loop of calls each core gets the same pieces each
// time and its share of the operands is still in its L2 (M = 1, K = N = 768:
// a 1.2 MiB share per core; one shared counter handing pieces out in arrival
// order gave 0.82x numpy's GEMV there, which splits statically).
class TileClaims {
 public:
  TileClaims(int64_t tiles, int64_t threads)
      : tiles_(tiles), threads_(threads), taken_(new std::atomic<bool>[tiles]) {
    for (int64_t t = 0; t < tiles; ++t) taken_[t].store(false, std::memory_order_relaxed);
  }

  // Calls f(tile) for each tile this thread claims (the fork-join's join
  // orders f's writes before the caller reads them).
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

// Calls fn(piece) once for each piece in [0, pieces), over the intra-op
// threads when pieces * cost_per_piece pays for it (parallel.h).
template <typename F>
void ClaimedFor(int64_t pieces, int64_t cost_per_piece, F&& fn) {
  if (pieces <= 0) return;
  const int64_t cost = std::max<int64_t>(cost_per_piece, 1);
  const int64_t threads = std::min<int64_t>(NumIntraOpThreads(), pieces);
  if (threads <= 1 || pieces * cost < kMinParallelCost) {
    for (int64_t p = 0; p < pieces; ++p) fn(p);
    return;
  }
  TileClaims claims(pieces, threads);
  // One unit per thread: ParallelFor runs each on a thread of its own (or,
  // late, on the caller, which then finds every piece taken).
  ParallelFor(threads, pieces * cost / threads, [&](int64_t w0, int64_t w1) {
    for (int64_t who = w0; who < w1; ++who) claims.Run(who, fn);
  });
}

}  // namespace opforge
