// RunDag (engine.h): a graph run's nodes in dependency order; the calling
// thread works through the ready nodes and borrows inter-op pool threads
// only while more than one node is ready.
#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>

#include "engine.h"

namespace opforge {
namespace {

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

Status RunDag(const std::vector<int>& num_deps, const std::vector<std::vector<int>>& consumers, int max_parallel,
              const std::function<Status(int)>& fn, RunStats* stats) {
  auto s = std::make_shared<DagState>();
  s->consumers = &consumers;
  s->fn = &fn;
  s->max_parallel = InterOpPoolForked() ? 1 : std::max(1, max_parallel);
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

}  // namespace opforge
