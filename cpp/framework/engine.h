// The engine behind graph mode (Session.run) and async mode, in three
// files: inter_op_pool.cc (the pool), dag_scheduler.cc (RunDag),
// async_queue.cc (AsyncOp, AsyncQueue). Nodes with
// dependency counts, run on an inter-op pool that is separate from the
// intra-op pool of ParallelFor (so kernels keep their own parallelism).
//
// Graph runs are DagRuns: the caller's thread works through the ready nodes
// itself and borrows pool threads only while more than one node is ready
// (a lone ready node never changes threads). Async mode submits AsyncOps one
// at a time; each waits on the AsyncOps that produce its inputs and runs on
// the pool when they are done. Both call Execute() per node.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor.h"  // Execute, RunKernel, InferOutputs
#include "opforge/registry.h"

namespace opforge {

// InferOutputs (executor.h) given tensors whose storage may be absent:
// graph nodes and pending async values have a dtype and a shape only.
inline Status InferFromTensors(const OpDef& op, const Tensor* inputs, int num_inputs, AttrValue* attrs,
                               DType* out_dtypes, TensorShape* out_shapes) {
  std::vector<InputSpec> specs(static_cast<size_t>(num_inputs));
  for (int i = 0; i < num_inputs; ++i) {
    // A value is known where the tensor has storage (or needs none).
    const bool known = inputs[i].buffer() != nullptr || inputs[i].NumElements() == 0;
    specs[i] = InputSpec{inputs[i].dtype(), &inputs[i].shape(), known ? &inputs[i] : nullptr};
  }
  return InferOutputs(op, specs.data(), num_inputs, attrs, out_shapes, out_dtypes);
}

// Worker threads of the inter-op pool: OPFORGE_INTER_OP_THREADS, else the
// number of cores. Started on first use; never joined (detached at exit).
int NumInterOpThreads();
void ScheduleInterOp(std::function<void()> fn);
// True in a child forked after the pool started: it has no workers.
bool InterOpPoolForked();

// What a run can report about itself (tests observe pruning, concurrency and
// freeing through it).
struct RunStats {
  int64_t nodes_run = 0;
  int64_t max_concurrent = 0;   // nodes running at the same moment
  int64_t peak_bytes = 0;       // live intermediate bytes, at most
};

// Runs a DAG of `num_deps.size()` nodes: node i may start once num_deps[i]
// of its producers finished (consumers[i] lists the nodes that wait on i,
// once per edge). fn(i) runs node i. At most `max_parallel` nodes run at
// once; the calling thread is one of them. After the first error no new
// node starts; the first error is returned once the running ones finish.
Status RunDag(const std::vector<int>& num_deps, const std::vector<std::vector<int>>& consumers, int max_parallel,
              const std::function<Status(int)>& fn, RunStats* stats);

// One op submitted in async mode.
class AsyncOp : public std::enable_shared_from_this<AsyncOp> {
 public:
  // Inputs are flattened; producers[k] is the pending op whose output
  // producer_outputs[k] becomes input k (null where inputs[k] is a value).
  AsyncOp(const OpDef* op, std::vector<AttrValue> attrs, std::vector<Tensor> inputs,
          std::vector<std::shared_ptr<AsyncOp>> producers, std::vector<int> producer_outputs, std::string where);

  const OpDef& op() const { return *op_; }
  const std::string& where() const { return where_; }

  // Blocks until the op ran (the caller releases the GIL), then gives
  // output i or the op's error (also the error of a failed producer).
  Status Wait(int i, Tensor* out);
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Marks the error of this op (or of the op it inherited it from) as seen.
  void MarkObserved();

 private:
  friend class AsyncQueue;
  // Runs the kernel; returns a dependent this made ready (the caller runs
  // it next), others go to the pool.
  std::shared_ptr<AsyncOp> Run();

  const OpDef* op_;
  std::vector<AttrValue> attrs_;
  std::vector<Tensor> inputs_;
  std::vector<std::shared_ptr<AsyncOp>> producers_;  // dropped once run
  std::vector<int> producer_outputs_;
  std::string where_;

  std::vector<Tensor> outputs_;
  Status status_;
  std::shared_ptr<AsyncOp> root_error_;  // the op whose kernel failed first (maybe this)
  std::atomic<bool> done_{false};
  // Guarded by the queue's mutex:
  int waiting_on_ = 0;
  std::vector<std::shared_ptr<AsyncOp>> dependents_;
  bool observed_ = false;
  int waiters_ = 0;  // threads blocked in Wait()
};

// The process-wide queue of async mode.
class AsyncQueue {
 public:
  static AsyncQueue* Global();

  // Takes the op; it runs on the inter-op pool once its producers are done.
  void Submit(std::shared_ptr<AsyncOp> op);
  // Blocks until every submitted op has run; then returns the first kernel
  // error that no read has observed (and forgets it), else OK.
  Status Flush();
  // Blocks until the queue is empty (for interpreter exit); forgets errors.
  void Drain();
  int64_t queued() const;   // submitted, not started
  int64_t pending() const;  // queued plus running

 private:
  friend class AsyncOp;
  void Schedule(std::shared_ptr<AsyncOp> op);
  std::shared_ptr<AsyncOp> Finished(const std::shared_ptr<AsyncOp>& op);

  mutable std::mutex mu_;
  std::condition_variable cv_;  // an op someone waits on finished, or the queue emptied
  int flushers_ = 0;            // threads in Flush() or Drain(); guarded by mu_
  std::atomic<int64_t> queued_{0}, running_{0};  // written under mu_ or before Run

  std::vector<std::shared_ptr<AsyncOp>> unobserved_;  // failed roots, in failure order
};

}  // namespace opforge
