// The intra-op thread pool behind ParallelFor. Workers start on first use
// (import stays cheap); the calling thread always takes a share of the work.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "opforge/parallel.h"

namespace opforge {
namespace {

thread_local bool in_worker = false;

class ThreadPool {
 public:
  explicit ThreadPool(int threads) : owner_pid_(getpid()) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Loop(); });
  }
  // Never destroyed: detached at exit so no worker is joined during teardown.
  ~ThreadPool() = delete;

  void Schedule(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

  // Runs one queued task on the calling thread, if there is one.
  bool RunOne() {
    std::function<void()> task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (tasks_.empty()) return false;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
    return true;
  }

  bool forked() const { return getpid() != owner_pid_; }

 private:
  void Loop() {
    in_worker = true;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  const pid_t owner_pid_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> workers_;
};

int ConfiguredThreads() {
  if (const char* env = std::getenv("OPFORGE_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool* Pool() {
  static ThreadPool* pool = new ThreadPool(NumIntraOpThreads() - 1);
  return pool;
}

}  // namespace

int NumIntraOpThreads() {
  static const int n = ConfiguredThreads();
  return n;
}

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
  const int64_t max_chunks = std::max<int64_t>(1, total * cost / (kMinParallelCost / 2));
  const int64_t chunks = std::min<int64_t>({static_cast<int64_t>(threads), total, max_chunks});
  const int64_t step = (total + chunks - 1) / chunks;

  struct Join {
    std::mutex mu;
    std::condition_variable cv;
    int64_t remaining;
  };
  Join join;
  join.remaining = chunks - 1;
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t begin = c * step, end = std::min(total, begin + step);
    Pool()->Schedule([&join, &fn, begin, end] {
      if (begin < end) fn(begin, end);
      std::lock_guard<std::mutex> lock(join.mu);
      if (--join.remaining == 0) join.cv.notify_all();
    });
  }
  fn(0, std::min(total, step));
  // Help drain the queue rather than sleep while other callers' work waits.
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(join.mu);
      if (join.remaining == 0) return;
    }
    if (!Pool()->RunOne()) {
      std::unique_lock<std::mutex> lock(join.mu);
      join.cv.wait(lock, [&join] { return join.remaining == 0; });
      return;
    }
  }
}

}  // namespace opforge
