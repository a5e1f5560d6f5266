// Collective op declarations of the MPI library (group "mpi"): loaded with
// load_op_library by opforge.distributed, like any user's library.
#include "opforge/opforge.h"
#include "mpi_comm.h"

namespace opforge {
namespace {

Status NeedInit(InferenceContext*) { return mpi::CheckReady(); }

Status SameShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(NeedInit(ctx));
  return shape_fns::Unchanged(ctx);
}

// Static shape: every rank's first dim equal, unknown if x's is (the
// kernel gives the real shape when they differ: eager, async, and graphs
// whose x has an unknown first dim, e.g. a [None, ...] placeholder).
Status GatherShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(NeedInit(ctx));
  TensorShape s = ctx->input_shape(0);
  if (s.rank() == 0) return errors::InvalidArgument("input 'x' must have at least one dimension, got a scalar");
  if (!IsUnknownDim(s.dim(0))) s.set_dim(0, s.dim(0) * mpi::Size());
  ctx->set_output_shape(0, s);
  return Status::OK();
}

Status AlltoallShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(NeedInit(ctx));
  const TensorShape& s = ctx->input_shape(0);
  if (s.rank() == 0 || (!IsUnknownDim(s.dim(0)) && s.dim(0) % mpi::Size() != 0)) {
    return errors::InvalidArgument("input 'x' needs a first dimension divisible by the number of processes (",
                                   mpi::Size(), "), got shape ", s.DebugString());
  }
  ctx->set_output_shape(0, s);
  return Status::OK();
}

Status FusedShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(NeedInit(ctx));
  int64_t total = 0;
  for (int i = 0; i < ctx->num_inputs(); ++i) total += ctx->input_shape(i).num_elements();
  ctx->set_output_shape(0, TensorShape({total}));
  return Status::OK();
}

}  // namespace

REGISTER_OP("MpiAllreduce")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64, int32, int64}")
    .Attr("op: string = 'sum'")
    .Attr("prescale: float = 1.0")
    .Attr("postscale: float = 1.0")
    .Attr("name: string = ''")
    .SetShapeFn(SameShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .Gradient("x = MpiAllreduceGrad(x, y, dy, op=op, prescale=prescale, postscale=postscale, name=name)")
    .Doc(R"doc(
Reduces `x` element-wise across all processes; every process gets the result.

x: This process's tensor; shape, dtype and name must match on every process.
y: postscale * reduce(prescale * x over processes); average divides the sum by the process count.
op: The reduction: 'sum', 'average', 'min' or 'max'.
prescale: Multiplies x before the reduction (floating dtypes).
postscale: Multiplies the result (floating dtypes).
name: The tensor's name in error messages and the cross-process check.
)doc");

REGISTER_OP("MpiAllreduceGrad")
    .Input("x: T")
    .Input("y: T")
    .Input("dy: T")
    .Output("dx: T")
    .Attr("T: {float32, float64}")
    .Attr("op: string = 'sum'")
    .Attr("prescale: float = 1.0")
    .Attr("postscale: float = 1.0")
    .Attr("name: string = ''")
    .SetShapeFn(SameShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .NoGradient()
    .Doc(R"doc(
The gradient of MpiAllreduce: every process's loss depends on y, so dx is the
same allreduce of dy for sum and average, and for min and max the sum of dy
over processes where x was the extreme.

x: The forward input.
y: The forward output.
dy: The gradient flowing into y on this process.
dx: The gradient of x.
op: The forward reduction.
prescale: The forward prescale.
postscale: The forward postscale.
name: The tensor's name.
)doc");

REGISTER_OP("MpiAllgather")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64, int32, int64, bool}")
    .Attr("name: string = ''")
    .SetShapeFn(GatherShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .Gradient("x = MpiAllgatherGrad(x, dy, name=name)")
    .Doc(R"doc(
Concatenates every process's `x` along the first dimension, in rank order.

x: This process's rows; the first dimension may differ across processes, the others must match.
y: The rows of all processes.
name: The tensor's name in error messages and the cross-process check.
)doc");

REGISTER_OP("MpiAllgatherGrad")
    .Input("x: T")
    .Input("dy: T")
    .Output("dx: T")
    .Attr("T: {float32, float64}")
    .Attr("name: string = ''")
    .SetShapeFn(SameShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .NoGradient()
    .Doc(R"doc(
The gradient of MpiAllgather: dy summed over processes, sliced to this process's rows.

x: The forward input (its rows are this process's slice).
dy: The gradient flowing into the gathered tensor on this process.
dx: The gradient of x.
name: The tensor's name.
)doc");

REGISTER_OP("MpiBroadcast")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64, int32, int64, bool}")
    .Attr("root: int >= 0 = 0")
    .Attr("name: string = ''")
    .SetShapeFn(SameShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .Gradient("x = MpiBroadcastGrad(dy, root=root, name=name)")
    .Doc(R"doc(
Copies the root process's `x` to every process.

x: The tensor (its values matter on the root only; the shape must match everywhere).
y: The root's x.
root: The rank whose tensor is sent.
name: The tensor's name in error messages and the cross-process check.
)doc");

REGISTER_OP("MpiBroadcastGrad")
    .Input("dy: T")
    .Output("dx: T")
    .Attr("T: {float32, float64}")
    .Attr("root: int >= 0 = 0")
    .Attr("name: string = ''")
    .SetShapeFn(SameShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .NoGradient()
    .Doc(R"doc(
The gradient of MpiBroadcast: dy summed over processes on the root, zeros elsewhere.

dy: The gradient flowing into the broadcast tensor on this process.
dx: The gradient of the root's x (zeros on other ranks).
root: The forward root.
name: The tensor's name.
)doc");

REGISTER_OP("MpiAlltoall")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64, int32, int64, bool}")
    .Attr("name: string = ''")
    .SetShapeFn(AlltoallShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .Gradient("x = MpiAlltoall(dy, name=name)")
    .Doc(R"doc(
Splits `x` into equal blocks of rows, one per process, sends block i to
process i and concatenates the blocks received, in rank order.

x: This process's tensor; its first dimension is divisible by the process count.
y: Block r of y is block (this rank) of process r's x.
name: The tensor's name in error messages and the cross-process check.
)doc");

REGISTER_OP("MpiBarrier")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float32, float64, int32, int64, bool}")
    .Attr("name: string = ''")
    .SetShapeFn(SameShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .NoGradient()
    .Doc(R"doc(
Waits until every process reaches it, then returns x (an ordering point in graphs).

x: Any tensor, passed through.
y: x, after all processes arrived.
name: The barrier's name in error messages and the cross-process check.
)doc");

REGISTER_OP("MpiGroupedAllreduce")
    .Input("xs: N * T")
    .Output("fused: T")
    .Attr("T: {float32, float64}")
    .Attr("N: int >= 1")
    .Attr("op: string = 'average'")
    .Attr("fusion_bytes: int >= 1 = 4194304")
    .Attr("name: string = ''")
    .SetShapeFn(FusedShape)
    .SetIsStateful()  // communicates: graphs never merge, fold or drop it
    .NoGradient()  // applied to gradients, after the backward pass
    .Doc(R"doc(
Allreduces many tensors with few messages (horovod's tensor fusion): they are
packed one after another into `fused`, which is reduced in place in chunks of
up to `fusion_bytes` (one MPI call each); one cross-process check covers the
whole group. Callers split `fused` back into the tensors' shapes.

xs: The tensors (gradients), in the same order and shapes on every process.
fused: The reduced tensors, flattened and concatenated in order.
op: 'sum' or 'average' (each tensor is divided by the process count as it is packed).
fusion_bytes: The most bytes one MPI call reduces.
name: The group's name in error messages and the cross-process check.
)doc");

}  // namespace opforge
