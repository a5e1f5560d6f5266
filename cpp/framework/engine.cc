#include "engine.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <thread>

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
  explicit InterOpPool(int threads) {
    pthread_atfork(nullptr, nullptr, [] { g_forked.store(true, std::memory_order_relaxed); });
    for (int i = 0; i < threads; ++i) std::thread([this] { Loop(); }).detach();
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

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
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
        cv_.wait(lock, [this] { return !tasks_.empty(); });
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

// The shared state of one RunDag call. Shared with the helpers it asked the
// pool for: the caller returns once no node is running, without waiting for
// helpers that have not started yet (on a busy machine a wake-up can take a
// scheduler time slice); those find the run over and leave, touching only
// this state (fn and consumers live on the caller's stack).
struct DagState {
  const std::vector<std::vector<int>>* consumers;
  const std::function<Status(int)>* fn;
  int max_parallel;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> deps;
  std::deque<int> ready;
  int64_t remaining = 0;
  int running = 0, helpers = 0, idle = 0, starting = 0;
  bool over = false;  // the caller has returned
  Status status;
  RunStats stats;
};

void Work(const std::shared_ptr<DagState>& s, bool helper);

// Borrows pool threads for the ready nodes that no thread is about to take.
void SpawnHelpers(const std::shared_ptr<DagState>& s) {
  while (s->helpers < s->max_parallel - 1 && static_cast<int>(s->ready.size()) > s->idle + s->starting) {
    ++s->helpers;
    ++s->starting;
    ScheduleInterOp([s] { Work(s, true); });
  }
}

void Work(const std::shared_ptr<DagState>& s, bool helper) {
  std::unique_lock<std::mutex> lock(s->mu);
  if (helper) --s->starting;
  for (;;) {
    if (s->over || !s->status.ok() || s->remaining == 0) break;
    if (s->ready.empty()) {
      if (helper) break;
      ++s->idle;
      s->cv.wait(lock);
      --s->idle;
      continue;
    }
    const int i = s->ready.front();
    s->ready.pop_front();
    ++s->running;
    s->stats.max_concurrent = std::max<int64_t>(s->stats.max_concurrent, s->running);
    if (!s->ready.empty()) SpawnHelpers(s);
    lock.unlock();
    Status st = (*s->fn)(i);
    lock.lock();
    --s->running;
    --s->remaining;
    ++s->stats.nodes_run;
    if (!st.ok()) {
      if (s->status.ok()) s->status = st;
    } else {
      for (int c : (*s->consumers)[i]) {
        if (--s->deps[c] == 0) s->ready.push_back(c);
      }
    }
    s->cv.notify_all();
  }
  if (helper) {
    --s->helpers;
    return;
  }
  // Only nodes still running use fn: wait for those, not for idle helpers.
  s->cv.wait(lock, [&] { return s->running == 0; });
  s->over = true;
}

}  // namespace

int NumInterOpThreads() {
  static const int n = ConfiguredInterOpThreads();
  return n;
}

void ScheduleInterOp(std::function<void()> fn) {
  if (Pool()->forked()) {
    fn();  // no workers in a forked child: run inline
    return;
  }
  Pool()->Schedule(std::move(fn));
}

Status RunDag(const std::vector<int>& num_deps, const std::vector<std::vector<int>>& consumers, int max_parallel,
              const std::function<Status(int)>& fn, RunStats* stats) {
  auto s = std::make_shared<DagState>();
  s->consumers = &consumers;
  s->fn = &fn;
  s->max_parallel = Pool()->forked() ? 1 : std::max(1, max_parallel);
  s->deps = num_deps;
  s->remaining = static_cast<int64_t>(num_deps.size());
  for (size_t i = 0; i < num_deps.size(); ++i) {
    if (num_deps[i] == 0) s->ready.push_back(static_cast<int>(i));
  }
  Work(s, false);
  std::lock_guard<std::mutex> lock(s->mu);
  if (stats) {
    stats->nodes_run = s->stats.nodes_run;
    stats->max_concurrent = s->stats.max_concurrent;
  }
  return s->status;
}

// ---------------------------------------------------------------- async ops

AsyncOp::AsyncOp(const OpDef* op, std::vector<AttrValue> attrs, std::vector<Tensor> inputs,
                 std::vector<std::shared_ptr<AsyncOp>> producers, std::vector<int> producer_outputs,
                 std::string where)
    : op_(op),
      attrs_(std::move(attrs)),
      inputs_(std::move(inputs)),
      producers_(std::move(producers)),
      producer_outputs_(std::move(producer_outputs)),
      where_(std::move(where)) {}

std::shared_ptr<AsyncOp> AsyncOp::Run() {
  for (size_t k = 0; k < producers_.size(); ++k) {
    const AsyncOp* p = producers_[k].get();
    if (p == nullptr) continue;
    if (!p->status_.ok()) {
      // Computed from a failed tensor: fail too, naming the op that failed.
      status_ = Status(p->status_.code(), op_->name + " (submitted at " + where_ + "): input " +
                                              std::to_string(k) + " comes from a failed op: " +
                                              p->root_error_->status_.message());
      root_error_ = p->root_error_;
      break;
    }
    inputs_[k] = p->outputs_[producer_outputs_[k]];
  }
  producers_.clear();  // intermediates are freed once their last reader ran
  if (status_.ok()) {
    outputs_.resize(op_->outputs.size());
    Status s = Execute(*op_, inputs_.data(), static_cast<int>(inputs_.size()), attrs_.data(), outputs_.data());
    if (!s.ok()) {
      status_ = Status(s.code(), s.message() + " (submitted at " + where_ + ")");
      root_error_ = shared_from_this();
      outputs_.clear();
    }
  }
  inputs_.clear();
  attrs_.clear();
  return AsyncQueue::Global()->Finished(shared_from_this());
}

Status AsyncOp::Wait(int i, Tensor* out) {
  if (!done()) {
    AsyncQueue* q = AsyncQueue::Global();
    std::unique_lock<std::mutex> lock(q->mu_);
    ++waiters_;
    q->cv_.wait(lock, [this] { return done(); });
    --waiters_;
  }
  if (!status_.ok()) {
    MarkObserved();
    return status_;
  }
  *out = outputs_[i];
  return Status::OK();
}

void AsyncOp::MarkObserved() {
  if (!root_error_) return;
  AsyncQueue* q = AsyncQueue::Global();
  std::lock_guard<std::mutex> lock(q->mu_);
  if (root_error_->observed_) return;
  root_error_->observed_ = true;
  auto& list = q->unobserved_;
  list.erase(std::remove(list.begin(), list.end(), root_error_), list.end());
}

AsyncQueue* AsyncQueue::Global() {
  static AsyncQueue* q = new AsyncQueue();  // never destroyed: used by detached workers
  return q;
}

void AsyncQueue::Submit(std::shared_ptr<AsyncOp> op) {
  bool ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.fetch_add(1, std::memory_order_relaxed);
    for (const auto& p : op->producers_) {
      if (p && !p->done()) {
        p->dependents_.push_back(op);
        ++op->waiting_on_;
      }
    }
    ready = op->waiting_on_ == 0;
  }
  if (ready) Schedule(std::move(op));
}

void AsyncQueue::Schedule(std::shared_ptr<AsyncOp> op) {
  ScheduleInterOp([this, op]() mutable {
    // A chain continues on this thread: each op hands back one dependent it
    // made ready (no queueing, no wake-up per link).
    while (op) {
      running_.fetch_add(1, std::memory_order_relaxed);  // before queued_ drops: pending() never dips
      queued_.fetch_sub(1, std::memory_order_relaxed);
      op = op->Run();
    }
  });
}

std::shared_ptr<AsyncOp> AsyncQueue::Finished(const std::shared_ptr<AsyncOp>& op) {
  std::vector<std::shared_ptr<AsyncOp>> ready;
  bool notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    op->done_.store(true, std::memory_order_release);
    running_.fetch_sub(1, std::memory_order_relaxed);
    // Wake waiters only when what they wait for happened (a flush waiting on
    // 10,000 tiny ops is not woken 10,000 times).
    notify = op->waiters_ > 0 || (flushers_ > 0 && queued_ + running_ == 0);
    if (op->root_error_ == op) unobserved_.push_back(op);
    for (auto& d : op->dependents_) {
      if (--d->waiting_on_ == 0) ready.push_back(std::move(d));
    }
    op->dependents_.clear();
  }
  if (notify) cv_.notify_all();
  if (ready.empty()) return nullptr;
  for (size_t i = 1; i < ready.size(); ++i) Schedule(std::move(ready[i]));
  return std::move(ready[0]);
}

Status AsyncQueue::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  ++flushers_;
  cv_.wait(lock, [this] { return queued_ + running_ == 0; });
  --flushers_;
  if (unobserved_.empty()) return Status::OK();
  std::shared_ptr<AsyncOp> first = unobserved_.front();
  const size_t more = unobserved_.size() - 1;
  for (auto& op : unobserved_) op->observed_ = true;
  unobserved_.clear();
  std::string msg = first->status_.message();
  if (more) msg += " (and " + std::to_string(more) + " more failed op" + (more > 1 ? "s" : "") + ")";
  return Status(first->status_.code(), msg);
}

void AsyncQueue::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  ++flushers_;
  cv_.wait(lock, [this] { return queued_ + running_ == 0; });
  --flushers_;
  unobserved_.clear();
}

int64_t AsyncQueue::queued() const { return queued_.load(std::memory_order_relaxed); }

int64_t AsyncQueue::pending() const {
  return running_.load(std::memory_order_relaxed) + queued_.load(std::memory_order_relaxed);
}

}  // namespace opforge
