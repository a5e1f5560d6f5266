// Intra-op parallelism: splits [0, total) across the shared thread pool when
// the work is large enough to pay for it; small work runs inline.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

namespace opforge {

// Below this many units x cost, splitting costs more than it saves.
inline constexpr int64_t kMinParallelCost = 1 << 16;

int NumIntraOpThreads();

// For work of a few microseconds, which pays a share to another thread only
// when one is already polling for work (waking a parked one costs tens of
// microseconds): true if an intra-op worker is awake now. If not and `wake`,
// wakes one in the background (the caller does not wait), so the next call of
// a loop finds it awake.
bool IntraOpWorkerReady(bool wake);

// Hands `task` to an intra-op worker without waiting for it: when
// `only_if_awake`, only if one is polling for work now (else false, nothing
// scheduled); otherwise always (waking a parked one). For work that
// coordinates with its caller by itself (cpp/kernels/gemm/small_split.cc).
// False in a forked child, a pool worker, or with one intra-op thread.
bool ScheduleOnWorker(std::function<void()> task, bool only_if_awake);

// Whether pool tasks are waiting for a worker (such a task, polling for its
// caller, hands the worker back when they are).
bool IntraOpTasksQueued();

// The pool path; call ParallelFor.
void ParallelForImpl(int64_t total, int64_t cost_per_unit,
                     const std::function<void(int64_t begin, int64_t end)>& fn);

// `cost_per_unit` is a rough count of cheap operations per unit of work.
// Small work runs inline without building a std::function.
template <typename F>
void ParallelFor(int64_t total, int64_t cost_per_unit, F&& fn) {
  if (total <= 0) return;
  if (total * (cost_per_unit > 0 ? cost_per_unit : 1) < kMinParallelCost) {
    fn(int64_t{0}, total);
    return;
  }
  ParallelForImpl(total, cost_per_unit, std::function<void(int64_t, int64_t)>(std::forward<F>(fn)));
}

}  // namespace opforge
