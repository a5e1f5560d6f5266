// The inter-op pool (engine.h): worker threads that graph runs borrow
// (dag_scheduler.cc) and async ops run on (async_queue.cc).
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <thread>

#include "engine.h"
#include "wake_steering.h"

namespace opforge {
namespace {

// Spinning before sleeping: a worker whose queue ran dry polls it for a
// short while (OPFORGE_INTER_OP_SPIN_US, default 50 µs; 0 never spins)
// before it blocks. A producer that submits faster than that (a Python loop
// of async ops, a DAG handing nodes to helpers) then never pays a futex wake
// per task, and the worker no context switch. One worker spins at a time,
// so an idle pool costs at most one core for that window after each burst,
// and it yields that core to any other runnable thread.
int64_t SpinNanos() {
  static const int64_t ns = [] {
    const char* env = std::getenv("OPFORGE_INTER_OP_SPIN_US");
    const long us = env != nullptr && *env != '\0' ? std::atol(env) : 50;
    return static_cast<int64_t>(std::clamp<long>(us, 0, 10000)) * 1000;
  }();
  return ns;
}

// Set in a child forked after the pool started (getpid() is a system call:
// too slow to ask per task).
std::atomic<bool> g_forked{false};

class InterOpPool {
 public:
  explicit InterOpPool(int threads) : steering_(threads) {
    pthread_atfork(nullptr, nullptr, [] { g_forked.store(true, std::memory_order_relaxed); });
    for (int i = 0; i < threads; ++i) std::thread([this, i] { Loop(i); }).detach();
  }
  ~InterOpPool() = delete;  // never destroyed: workers may outlive main()

  // A forked child has no workers: everything runs on the calling thread.
  bool forked() const { return g_forked.load(std::memory_order_relaxed); }

  void Schedule(std::function<void()> fn) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(fn));
      num_tasks_.store(tasks_.size(), std::memory_order_release);
      // Busy workers come back for it, and a spinning one sees it: no futex call.
      wake = idle_ > 0 && spinners_ == 0;
      if (wake) steering_.SteerAwayFromCaller();
    }
    if (wake) cv_.notify_one();
  }

 private:
  // Polls for a task without the lock; true if one appeared in time.
  bool Spin() {
    const int64_t budget = SpinNanos();
    if (budget == 0) return false;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1;; ++i) {
      if (num_tasks_.load(std::memory_order_acquire) > 0) return true;
      // Yield rather than pause: on a loaded machine the spinner must not
      // take the core from the thread that is producing its work.
      std::this_thread::yield();
      if ((i & 7) == 0 && std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                                 start).count() > budget) {
        return false;
      }
    }
  }

  void Loop(int index) {
    std::unique_lock<std::mutex> lock(mu_);
    steering_.Register(index);
    for (;;) {
      if (tasks_.empty() && spinners_ == 0) {
        ++spinners_;
        lock.unlock();
        Spin();
        lock.lock();
        --spinners_;
      }
      if (tasks_.empty()) {
        // Schedule() holds mu_ while it reads spinners_ and idle_: a task
        // pushed after this check finds idle_ > 0 and wakes a sleeper.
        ++idle_;
        while (tasks_.empty()) {
          steering_.Parking(index);
          cv_.wait(lock);
          steering_.Woke(index);
        }
        --idle_;
      }
      std::function<void()> fn = std::move(tasks_.front());
      tasks_.pop_front();
      num_tasks_.store(tasks_.size(), std::memory_order_release);
      // More work than this thread takes and nobody polling: hand it on.
      if (!tasks_.empty() && idle_ > 0 && spinners_ == 0) cv_.notify_one();
      lock.unlock();
      fn();
      fn = nullptr;  // the task's captures die outside the lock
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::atomic<size_t> num_tasks_{0};  // tasks_.size(), for spinners
  int idle_ = 0, spinners_ = 0;
  WakeSteering steering_;  // sized before the workers start
};

int ConfiguredInterOpThreads() {
  if (const char* env = std::getenv("OPFORGE_INTER_OP_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  return std::max(2u, std::thread::hardware_concurrency());
}

InterOpPool* Pool() {
  static InterOpPool* pool = new InterOpPool(NumInterOpThreads());
  return pool;
}
}  // namespace

int NumInterOpThreads() {
  static const int n = ConfiguredInterOpThreads();
  return n;
}

bool InterOpPoolForked() { return Pool()->forked(); }

void ScheduleInterOp(std::function<void()> fn) {
  if (Pool()->forked()) {
    fn();  // no workers in a forked child: run inline
    return;
  }
  Pool()->Schedule(std::move(fn));
}

}  // namespace opforge
