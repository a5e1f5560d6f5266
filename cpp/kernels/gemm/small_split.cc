// See small_split.h.
#include "small_split.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "opforge/parallel.h"

namespace opforge {
namespace gemm {
namespace {

using Clock = std::chrono::steady_clock;

// A session polls this long after its last job before it hands the worker
// back to the pool (at once when a pool task is queued).
constexpr auto kLinger = std::chrono::microseconds(25);
// A call this soon after the previous one on the same thread is part of a
// loop: worth waking a parked worker for the calls that follow.
constexpr auto kLoopGap = std::chrono::microseconds(100);
// At most one wake-up per this long: a wake-up is a futex call on the caller
// (1-5 us, as long as the product) and under load the woken worker may take
// milliseconds to run.
constexpr auto kNudgeGap = std::chrono::milliseconds(1);
// Products run alone after a run of splits that did not pay, at most (about
// 1 ms of 64^3 products).
constexpr int64_t kMaxBackoff = 256;
// The caller spins this long for a tile the worker claimed, then yields (the
// worker may be waiting for the caller's core).
constexpr auto kJoinSpin = std::chrono::microseconds(20);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// The one job slot. state: seq << 16 | tile count << 8 | claimed tiles (bit
// t); a job is open while some tile is unclaimed. Written by the owning
// caller (call, ctx, then state with release), claimed by compare-exchange.
struct alignas(64) Slot {
  std::atomic<uint64_t> state{0};
  std::atomic<int64_t> worker_done{0};  // tiles of this job the worker finished
  std::atomic<int> worker_cpu{-1};
  std::atomic<void (*)(const void*, int64_t)> call{nullptr};
  std::atomic<const void*> ctx{nullptr};
};
Slot g_slot;
alignas(64) std::atomic<bool> g_live{false};   // a session is scheduled or running
alignas(64) std::atomic<bool> g_owned{false};  // a caller is using the slot

std::atomic<int> g_mode{-1};
std::atomic<int64_t> g_counts[5];
void Count(int which, int64_t n) { g_counts[which].fetch_add(n, std::memory_order_relaxed); }

int ModeFromEnv() {
  const char* v = std::getenv("OPFORGE_GEMM_SMALL_SPLIT");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0 || std::strcmp(v, "1") == 0) {
    return static_cast<int>(SmallSplitMode::kAuto);
  }
  if (std::strcmp(v, "shares") == 0) return static_cast<int>(SmallSplitMode::kShares);
  if (std::strcmp(v, "caller") == 0) return static_cast<int>(SmallSplitMode::kCallerOnly);
  return static_cast<int>(SmallSplitMode::kOff);  // "0", "off", anything else
}

struct SplitState {
  int64_t skip = 0, backoff = 0;
  Clock::time_point last{}, last_nudge{};
};
thread_local SplitState t_state;

bool TryClaim(int64_t t) {
  uint64_t s = g_slot.state.load(std::memory_order_relaxed);
  while (!(s >> t & 1)) {
    if (g_slot.state.compare_exchange_weak(s, s | uint64_t{1} << t, std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

// The worker's side: claims open tiles (from the middle, where its share
// starts) until kLinger passes without one.
void Session() {
  Clock::time_point idle = Clock::now();
  for (uint64_t spins = 1;; ++spins) {
    uint64_t s = g_slot.state.load(std::memory_order_acquire);
    const int64_t tiles = static_cast<int64_t>(s >> 8 & 0xff);
    const uint64_t bits = s & 0xff, full = (uint64_t{1} << tiles) - 1;
    if (tiles > 0 && bits != full) {
      int64_t t = tiles / 2;
      while (bits >> t & 1) t = (t + 1) % tiles;
      if (g_slot.state.compare_exchange_weak(s, s | uint64_t{1} << t, std::memory_order_acq_rel,
                                             std::memory_order_relaxed)) {
        g_slot.worker_cpu.store(sched_getcpu(), std::memory_order_relaxed);
        g_slot.call.load(std::memory_order_relaxed)(g_slot.ctx.load(std::memory_order_relaxed), t);
        g_slot.worker_done.fetch_add(1, std::memory_order_release);
        idle = Clock::now();
      }
      continue;
    }
    CpuRelax();
    // Other work for the pool (a larger op after the last small product)
    // gets the worker at once.
    if ((spins & 15) == 0 && IntraOpTasksQueued()) break;
    if ((spins & 63) == 0 && Clock::now() - idle > kLinger) break;
  }
  g_live.store(false, std::memory_order_release);
}

// Whether a session is live now (starting one if none is: only on a worker
// already polling when only_if_awake).
bool EnsureSession(bool only_if_awake) {
  static const bool registered = [] {
    // A forked child has no pool workers and so no session.
    pthread_atfork(nullptr, nullptr, [] {
      g_live.store(false, std::memory_order_relaxed);
      g_owned.store(false, std::memory_order_relaxed);
    });
    return true;
  }();
  (void)registered;
  bool live = false;
  if (!g_live.compare_exchange_strong(live, true, std::memory_order_acq_rel)) return true;
  if (!ScheduleOnWorker(&Session, only_if_awake)) {
    g_live.store(false, std::memory_order_release);
    return false;
  }
  Count(4, 1);
  return true;
}

// kAuto: whether to try this call (back-off; a session live or startable).
bool Wanted() {
  SplitState& s = t_state;
  const Clock::time_point now = Clock::now();
  const bool loop = now - s.last < kLoopGap;
  s.last = now;
  if (s.skip > 0) {
    --s.skip;
    return false;
  }
  if (EnsureSession(true)) return true;
  if (loop && now - s.last_nudge > kNudgeGap) {
    s.last_nudge = now;
    IntraOpWorkerReady(true);
  }
  return false;
}

}  // namespace

SmallSplitMode GetSmallSplitMode() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (m < 0) {
    m = ModeFromEnv();
    g_mode.store(m, std::memory_order_relaxed);
  }
  return static_cast<SmallSplitMode>(m);
}

bool SmallSplit(int64_t tiles, TileFn tile) {
  const SmallSplitMode mode = GetSmallSplitMode();
  if (mode == SmallSplitMode::kOff || tiles < 2 || tiles > 8) return false;
  if (mode == SmallSplitMode::kAuto && !Wanted()) return false;
  if (mode == SmallSplitMode::kShares && !EnsureSession(false)) return false;
  if (g_owned.exchange(true, std::memory_order_acquire)) return false;  // another thread's product is in the slot
  const Clock::time_point start = Clock::now();
  g_slot.worker_done.store(0, std::memory_order_relaxed);
  g_slot.worker_cpu.store(-1, std::memory_order_relaxed);
  g_slot.call.store(tile.call, std::memory_order_relaxed);
  g_slot.ctx.store(tile.ctx, std::memory_order_relaxed);
  uint64_t open = ((g_slot.state.load(std::memory_order_relaxed) >> 16) + 1) << 16 | static_cast<uint64_t>(tiles) << 8;
  if (mode == SmallSplitMode::kCallerOnly) open |= (uint64_t{1} << tiles) - 1 - ((uint64_t{1} << tiles / 2) - 1);
  g_slot.state.store(open, std::memory_order_release);
  // Own share first, then the worker's from its far end (it starts at tiles / 2).
  const int64_t half = tiles / 2;
  int64_t mine = 0, stolen = 0;
  Clock::duration first{};
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t t = i < half ? i : tiles - 1 - (i - half);
    if (mode == SmallSplitMode::kShares && t >= half) break;
    if (mode == SmallSplitMode::kCallerOnly && t >= half) {  // reserved above so no worker takes them
      tile.call(tile.ctx, t);
      ++mine, ++stolen;
      continue;
    }
    if (!TryClaim(t)) continue;
    const Clock::time_point t0 = Clock::now();
    tile.call(tile.ctx, t);
    if (i == 0) first = Clock::now() - t0;
    ++mine;
    if (t >= half) ++stolen;
  }
  // kShares: the worker's share is claimed by the worker (a session that
  // ended meanwhile is started again).
  while (mode == SmallSplitMode::kShares &&
         (g_slot.state.load(std::memory_order_acquire) & 0xff) != (uint64_t{1} << tiles) - 1) {
    if (!EnsureSession(false)) {  // no worker to be had (forked): the caller takes them
      for (int64_t t = half; t < tiles; ++t) {
        if (TryClaim(t)) tile.call(tile.ctx, t), ++mine, ++stolen;
      }
    }
    CpuRelax();
  }
  // Wait only for the tiles the worker claimed.
  const int64_t theirs = tiles - mine;
  const Clock::time_point wait = Clock::now();
  for (int i = 0; g_slot.worker_done.load(std::memory_order_acquire) < theirs; ++i) {
    CpuRelax();
    if ((i & 63) == 63 && Clock::now() - wait > kJoinSpin) sched_yield();
  }
  const int worker_cpu = g_slot.worker_cpu.load(std::memory_order_relaxed);
  g_owned.store(false, std::memory_order_release);
  const Clock::duration elapsed = Clock::now() - start;
  Count(0, 1), Count(1, theirs), Count(2, stolen);
  if (mode != SmallSplitMode::kAuto) return true;
  SplitState& s = t_state;
  if (theirs > 0 && worker_cpu != sched_getcpu() && elapsed < first * tiles) {
    s.backoff = 0;
  } else {
    s.backoff = std::min(2 * s.backoff + 1, kMaxBackoff);
    s.skip = s.backoff;
    Count(3, 1);
  }
  return true;
}

int SetSmallSplitMode(int mode) {
  const int before = static_cast<int>(GetSmallSplitMode());
  if (mode >= 0 && mode <= 3) {
    g_mode.store(mode, std::memory_order_relaxed);
    t_state = {};
  }
  return before;
}

int64_t SmallSplitCount(int which) {
  return which >= 0 && which < 5 ? g_counts[which].load(std::memory_order_relaxed) : -1;
}

}  // namespace gemm
}  // namespace opforge
