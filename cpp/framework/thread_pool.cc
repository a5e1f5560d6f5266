// The intra-op thread pool behind ParallelFor. Workers start on first use
// (import stays cheap); the calling thread always takes a share of the work.
// Its size comes from usable_cpus.h (affinity, cgroup quota, env vars).
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "opforge/parallel.h"
#include "usable_cpus.h"
#include "wake_steering.h"

namespace opforge {
namespace {

thread_local bool in_worker = false;

// Set in a child forked after the pool started. getpid() is a system call
// (0.4-0.45 us on the dev VM), which every threaded op paid: 3 % of a
// 17 us GEMV.
std::atomic<bool> g_forked{false};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

class ThreadPool {
 public:
  explicit ThreadPool(int threads) : steering_(threads) {
    pthread_atfork(nullptr, nullptr, [] { g_forked.store(true, std::memory_order_relaxed); });
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this, i] { Loop(i); });
  }
  // Never destroyed: detached at exit so no worker is joined during teardown.
  ~ThreadPool() = delete;

  void Schedule(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
      queued_.fetch_add(1, std::memory_order_release);
      if (sleeping_.load(std::memory_order_relaxed) > 0) steering_.SteerAwayFromCaller();
    }
    // A spinning worker will see the task: skip the futex wake-up.
    if (sleeping_.load(std::memory_order_acquire) > 0) cv_.notify_one();
  }

  // Runs one queued task on the calling thread, if there is one.
  bool RunOne() {
    std::function<void()> task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (tasks_.empty()) return false;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    task();
    return true;
  }

  bool forked() const { return g_forked.load(std::memory_order_relaxed); }

  bool Queued() const { return queued_.load(std::memory_order_relaxed) > 0; }

  // A worker polling for work (it finished a task less than kSpin ago).
  bool Awake() const { return polling_.load(std::memory_order_relaxed) > 0; }

  // Wakes a parked worker without handing it anything: it runs an empty task,
  // then polls for kSpin like after any task. The caller does not wait.
  void Nudge() {
    if (sleeping_.load(std::memory_order_relaxed) == 0) return;
    Schedule([] {});
  }

 private:
  // Spin-then-park: after a task, poll for the next one for kSpin before
  // sleeping. Ops called back to back (the usual Python loop) then find the
  // worker awake; waking a parked thread costs tens of microseconds, more on
  // a VM, which is most of a 1 ms op. After the first kPauseSpin the poll
  // yields the core on every round, so a library that needs the cores right
  // after an opforge call (numpy's BLAS threads, another pool) gets them
  // instead of competing with a spinning worker.
  static constexpr auto kSpin = std::chrono::microseconds(200);
  static constexpr auto kPauseSpin = std::chrono::microseconds(20);

  bool SpinForWork() {
    struct Polling {
      std::atomic<int>& n;
      explicit Polling(std::atomic<int>& c) : n(c) { n.fetch_add(1, std::memory_order_relaxed); }
      ~Polling() { n.fetch_sub(1, std::memory_order_relaxed); }
    } polling(polling_);
    const auto start = std::chrono::steady_clock::now();
    auto now = start;
    do {
      for (int i = 0; i < 64; ++i) {
        if (queued_.load(std::memory_order_acquire) > 0) return true;
        CpuRelax();
      }
      now = std::chrono::steady_clock::now();
      if (now - start > kPauseSpin) std::this_thread::yield();
    } while (now - start < kSpin);
    return false;
  }

  void Loop(int index) {
    in_worker = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      steering_.Register(index);
    }
    for (;;) {
      SpinForWork();
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        while (tasks_.empty()) {
          steering_.Parking(index);
          sleeping_.fetch_add(1, std::memory_order_acq_rel);
          cv_.wait(lock);
          sleeping_.fetch_sub(1, std::memory_order_acq_rel);
          steering_.Woke(index);
        }
        task = std::move(tasks_.front());
        tasks_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::atomic<int> queued_{0};    // tasks_.size(), readable without the lock
  std::atomic<int> sleeping_{0};  // workers parked on cv_
  std::atomic<int> polling_{0};   // workers in SpinForWork
  std::vector<std::thread> workers_;
  WakeSteering steering_;  // sized before the workers start
};

// How long the caller polls for its workers' shares before parking (yielding
// the core after the first kJoinPauseSpin, as the workers' own spin does).
constexpr auto kJoinSpin = std::chrono::microseconds(100);
constexpr auto kJoinPauseSpin = std::chrono::microseconds(20);

// Threads inside ParallelForImpl right now (callers, not pool workers).
std::atomic<int> active_callers{0};

ThreadPool* Pool() {
  static ThreadPool* pool = new ThreadPool(NumIntraOpThreads() - 1);
  return pool;
}

}  // namespace

int NumIntraOpThreads() {
  static const int n = ConfiguredIntraOpThreads();
  return n;
}

bool IntraOpWorkerReady(bool wake) {
  if (NumIntraOpThreads() <= 1 || in_worker || active_callers.load(std::memory_order_relaxed) > 0) return false;
  ThreadPool* pool = Pool();
  if (pool->forked()) return false;
  if (pool->Awake()) return true;
  if (wake) pool->Nudge();
  return false;
}

bool ScheduleOnWorker(std::function<void()> task, bool only_if_awake) {
  if (NumIntraOpThreads() <= 1 || in_worker) return false;
  ThreadPool* pool = Pool();
  if (pool->forked() || (only_if_awake && !pool->Awake())) return false;
  pool->Schedule(std::move(task));
  return true;
}

bool IntraOpTasksQueued() { return NumIntraOpThreads() > 1 && Pool()->Queued(); }

void ParallelForImpl(int64_t total, int64_t cost_per_unit,
                     const std::function<void(int64_t, int64_t)>& fn) {
  if (total <= 0) return;
  const int threads = NumIntraOpThreads();
  const int64_t cost = std::max<int64_t>(cost_per_unit, 1);
  // Nested calls and forked children (whose workers do not exist) run inline.
  if (threads <= 1 || in_worker || total * cost < kMinParallelCost || total < 2 || Pool()->forked()) {
    fn(0, total);
    return;
  }
  // Never oversubscribe: callers already splitting work (say, a threaded
  // Dask scheduler's workers) hold cores; this one takes only what is left.
  struct Active {
    const int others = active_callers.fetch_add(1, std::memory_order_acq_rel);
    ~Active() { active_callers.fetch_sub(1, std::memory_order_acq_rel); }
  } active;
  const int64_t free_threads = threads - active.others;
  if (free_threads <= 1) {
    fn(0, total);
    return;
  }
  const int64_t max_chunks = std::max<int64_t>(1, total * cost / (kMinParallelCost / 2));
  const int64_t chunks = std::min<int64_t>({free_threads, total, max_chunks});
  const int64_t step = (total + chunks - 1) / chunks;

  // The join: workers count down under the mutex (so the caller, which
  // returns only after taking the mutex once, never frees it under them); the
  // caller polls the count for a while before parking, because waking a
  // parked thread costs tens of microseconds on a VM, a large part of a
  // 0.1 ms product whose shares end within microseconds of each other.
  struct Join {
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<int64_t> remaining;
    bool parked = false;
  };
  Join join;
  join.remaining.store(chunks - 1, std::memory_order_relaxed);
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t begin = c * step, end = std::min(total, begin + step);
    Pool()->Schedule([&join, &fn, begin, end] {
      if (begin < end) fn(begin, end);
      std::lock_guard<std::mutex> lock(join.mu);
      if (join.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1 && join.parked) join.cv.notify_all();
    });
  }
  fn(0, std::min(total, step));
  // Help drain the queue rather than wait while other callers' work waits.
  while (join.remaining.load(std::memory_order_acquire) > 0 && Pool()->RunOne()) {
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; join.remaining.load(std::memory_order_acquire) > 0; ++i) {
    CpuRelax();
    if ((i & 63) == 63) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > kJoinSpin) break;
      if (waited > kJoinPauseSpin) std::this_thread::yield();
    }
  }
  std::unique_lock<std::mutex> lock(join.mu);
  join.parked = true;
  join.cv.wait(lock, [&join] { return join.remaining.load(std::memory_order_acquire) == 0; });
}

}  // namespace opforge
