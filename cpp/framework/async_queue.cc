// Async mode's queue (engine.h): AsyncOps wait on the ops that produce
// their inputs and run on the inter-op pool once those are done; errors are
// kept until a read or a flush observes them.
#include <algorithm>
#include <memory>
#include <mutex>

#include "engine.h"

namespace opforge {

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
