#include "py_async.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../cpp/framework/engine.h"
#include "py_convert.h"
#include "py_errors.h"
#include "py_tensor.h"

namespace opforge {
namespace py {
namespace {

// The value of one output of an AsyncOp, as a Tensor object's pending state.
class AsyncOutput final : public PendingValue {
 public:
  AsyncOutput(std::shared_ptr<AsyncOp> op, int index) : op_(std::move(op)), index_(index) {}
  Status Wait(Tensor* out) override { return op_->Wait(index_, out); }
  const std::shared_ptr<AsyncOp>& op() const { return op_; }
  int index() const { return index_; }

 private:
  std::shared_ptr<AsyncOp> op_;
  int index_;
};

}  // namespace

PyObject* SubmitBound(BoundCall& bc, std::string where) {
  const OpDef* op = bc.op;
  const size_t n = bc.values.size();
  std::vector<Tensor> values(n);
  std::vector<std::shared_ptr<AsyncOp>> producers(n);
  std::vector<int> producer_outputs(n, 0);
  for (size_t i = 0; i < n; ++i) {
    Tensor& t = bc.values[i];
    auto* out = dynamic_cast<AsyncOutput*>(bc.slots[i].pending.get());
    if (bc.slots[i].kind == BindInput::kPending && out == nullptr) {
      // Some other kind of future: its value now.
      Status s;
      Py_BEGIN_ALLOW_THREADS
      s = bc.slots[i].pending->Wait(&t);
      Py_END_ALLOW_THREADS
      if (!s.ok()) return SetError(s);
    } else if (out == nullptr && IsBorrowedFromNumpy(t.buffer())) {
      // Copied at submit: later writes to the array cannot change the result,
      // and pool threads never need the GIL to release a numpy array.
      Tensor copy;
      Status s = Tensor::Allocate(t.dtype(), t.shape(), &copy);
      if (!s.ok()) return SetError(s.WithPrefix(op->name + ": argument " + std::to_string(i) + ": "));
      if (t.TotalBytes()) std::memcpy(copy.raw_data(), t.raw_data(), t.TotalBytes());
      t = std::move(copy);
    }
    values[i] = std::move(t);  // a pending input's shell: dtype and shape
    if (out != nullptr) {
      producers[i] = out->op();
      producer_outputs[i] = out->index();
    }
  }
  std::vector<AttrValue> attrs(bc.attrs.size());
  for (size_t i = 0; i < attrs.size(); ++i) attrs[i] = std::move(bc.attrs[i]);
  auto async_op = std::make_shared<AsyncOp>(op, std::move(attrs), std::move(values), std::move(producers),
                                            std::move(producer_outputs), std::move(where));
  AsyncQueue::Global()->Submit(async_op);
  const Py_ssize_t num_out = static_cast<Py_ssize_t>(bc.output_dtypes.size());
  PyObject* tuple = num_out == 1 ? nullptr : PyTuple_New(num_out);
  for (Py_ssize_t i = 0; i < num_out; ++i) {
    PyObject* t = WrapPendingTensor(Tensor(bc.output_dtypes[i], bc.output_shapes[i].dims, nullptr),
                                    std::make_shared<AsyncOutput>(async_op, static_cast<int>(i)));
    if (num_out == 1) return t;
    if (!t) {
      Py_XDECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, i, t);
  }
  return tuple;
}

PyObject* AsyncFlush() {
  Status s;
  Py_BEGIN_ALLOW_THREADS
  s = AsyncQueue::Global()->Flush();
  Py_END_ALLOW_THREADS
  if (!s.ok()) return SetError(s);
  Py_RETURN_NONE;
}

PyObject* AsyncDrain() {
  Py_BEGIN_ALLOW_THREADS
  AsyncQueue::Global()->Drain();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyObject* AsyncQueueSize() { return PyLong_FromLongLong(AsyncQueue::Global()->queued()); }
PyObject* AsyncPending() { return PyLong_FromLongLong(AsyncQueue::Global()->pending()); }

PyObject* IsPending(PyObject* tensor) { return PyBool_FromLong(IsTensor(tensor) && PendingOf(tensor) != nullptr); }

PyObject* InterOpThreads() { return PyLong_FromLong(NumInterOpThreads()); }

}  // namespace py
}  // namespace opforge
