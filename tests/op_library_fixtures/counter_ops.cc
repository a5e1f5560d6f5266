// A stateful op built out of tree with the SDK: a counter kept as a
// resource (per Session in graph mode, per process in eager mode), reached
// through the kernel context.
#include <memory>
#include <mutex>

#include "opforge/opforge.h"

namespace opforge {
namespace {
struct Counter : ResourceBase {
  int64_t next = 0;
  std::string DebugString() const override { return "Counter"; }
};

Status CounterNextKernel(OpKernelContext* ctx) {
  std::shared_ptr<Counter> c;
  OF_RETURN_IF_ERROR(ctx->LookupOrCreateResource<Counter>("counter", &c, [](std::shared_ptr<Counter>* out) {
    *out = std::make_shared<Counter>();
    return Status::OK();
  }));
  std::lock_guard<std::mutex> lock(c->mu());
  const int64_t step = ctx->input(0).data<int64_t>()[0];
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  c->next += step;
  out->data<int64_t>()[0] = c->next;
  return Status::OK();
}

Status ScalarShape(InferenceContext* ctx) {
  ctx->set_output_shape(0, TensorShape());
  return Status::OK();
}
}  // namespace

REGISTER_OP("CounterNext")
    .Attr("counter: resource")
    .Input("step: int64")
    .Output("value: int64")
    .SetIsStateful()
    .SetShapeFn(ScalarShape)
    .NoGradient()
    .Doc("Adds step to the counter and returns it.\n\ncounter: The counter's name.\nstep: What to add.\nvalue: The new count.");
REGISTER_KERNEL("CounterNext", kCPU, DType::kInt64, CounterNextKernel);
}  // namespace opforge
