// CPU kernels of the collectives. Each one: take its turn (the collective
// lock, which also checks MPI is up: mpi::Turn), exchange metadata with every rank (bounded wait; a mismatch
// fails everywhere before data moves), then move the data with MPI.
#include <algorithm>
#include <climits>
#include <cstring>
#include <sstream>
#include <vector>

#include "opforge/opforge.h"
#include "mpi_comm.h"

namespace opforge {
namespace {

enum class Reduce { kSum, kAverage, kMin, kMax };

Status ParseReduce(const std::string& op, bool allow_minmax, Reduce* out) {
  if (op == "sum") *out = Reduce::kSum;
  else if (op == "average") *out = Reduce::kAverage;
  else if (allow_minmax && op == "min") *out = Reduce::kMin;
  else if (allow_minmax && op == "max") *out = Reduce::kMax;
  else return errors::InvalidArgument("attr 'op' must be one of ", allow_minmax ? "'sum', 'average', 'min', 'max'" : "'sum', 'average'", ", got '", op, "'");
  return Status::OK();
}

MPI_Op ToMpiOp(Reduce r) {
  return r == Reduce::kMin ? MPI_MIN : r == Reduce::kMax ? MPI_MAX : MPI_SUM;
}

std::string ShapeText(const TensorShape& s, bool hide_dim0) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < s.rank(); ++i) {
    os << (i ? ", " : "");
    if (i == 0 && hide_dim0) os << "*"; else os << s.dim(i);
  }
  os << "]";
  return os.str();
}

// The metadata a collective agrees on: op, name, dtype, shape and attrs.
mpi::Meta MakeMeta(OpKernelContext* ctx, const Tensor& x, const std::string& extra, bool hide_dim0) {
  const std::string& name = ctx->attr("name").s;
  mpi::Meta m;
  m.key = ctx->op().name + "|" + name + "|" + DTypeName(x.dtype()) + ShapeText(x.shape(), hide_dim0) + "|" + extra;
  m.describe = "'" + name + "' " + DTypeName(x.dtype()) + ShapeText(x.shape(), false) + (extra.empty() ? "" : " " + extra);
  m.dim0 = x.rank() > 0 ? x.dim(0) : 0;
  return m;
}

std::string What(OpKernelContext* ctx) {
  const std::string& name = ctx->attr("name").s;
  // The executor prefixes the op's name.
  return name.empty() ? std::string("unnamed tensor") : "tensor '" + name + "'";
}

Status CheckCount(int64_t n, const std::string& what) {
  if (n > INT_MAX) return errors::InvalidArgument(what, ": more than 2^31-1 elements in one MPI call");
  return Status::OK();
}

template <typename T>
void Scale(T* data, int64_t n, double factor) {
  if (factor == 1.0) return;
  const T f = static_cast<T>(factor);
  ParallelFor(n, 2, [&](int64_t b, int64_t e) { for (int64_t i = b; i < e; ++i) data[i] *= f; });
}

template <typename T>
Status AllreduceKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  Reduce r;
  OF_RETURN_IF_ERROR(ParseReduce(ctx->attr("op").s, true, &r));
  const double pre = ctx->attr_float("prescale"), post = ctx->attr_float("postscale");
  const bool floating = IsFloating(DTypeOf<T>::value);
  if (!floating && (r == Reduce::kAverage || pre != 1.0 || post != 1.0)) {
    return errors::InvalidArgument("op 'average' and attrs 'prescale', 'postscale' need a floating dtype, got ",
                                   DTypeName(DTypeOf<T>::value));
  }
  const Tensor& x = ctx->input(0);
  const std::string what = What(ctx);
  std::ostringstream extra;
  extra << "op=" << ctx->attr("op").s << " prescale=" << pre << " postscale=" << post;
  OF_RETURN_IF_ERROR(mpi::Handshake(what.c_str(), MakeMeta(ctx, x, extra.str(), false), nullptr));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64_t n = x.NumElements();
  if (n == 0) return Status::OK();
  OF_RETURN_IF_ERROR(CheckCount(n, what));
  const void* send = x.raw_data();
  if (pre != 1.0) {
    const T* src = x.data<T>();
    T* dst = out->data<T>();
    const T f = static_cast<T>(pre);
    ParallelFor(n, 2, [&](int64_t b, int64_t e) { for (int64_t i = b; i < e; ++i) dst[i] = src[i] * f; });
    send = MPI_IN_PLACE;
  }
  OF_RETURN_IF_ERROR(mpi::FromMpi(MPI_Allreduce(send, out->raw_data(), static_cast<int>(n), mpi::ToMpi(x.dtype()),
                                                ToMpiOp(r), mpi::Comm()),
                                  what.c_str()));
  Scale(out->data<T>(), n, post * (r == Reduce::kAverage ? 1.0 / mpi::Size() : 1.0));
  return Status::OK();
}

template <typename T>
Status AllreduceGradKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  Reduce r;
  OF_RETURN_IF_ERROR(ParseReduce(ctx->attr("op").s, true, &r));
  const double pre = ctx->attr_float("prescale"), post = ctx->attr_float("postscale");
  const Tensor &x = ctx->input(0), &y = ctx->input(1), &dy = ctx->input(2);
  const std::string what = What(ctx);
  OF_RETURN_IF_ERROR(mpi::Handshake(what.c_str(), MakeMeta(ctx, dy, "op=" + ctx->attr("op").s, false), nullptr));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64_t n = dy.NumElements();
  if (n == 0) return Status::OK();
  OF_RETURN_IF_ERROR(CheckCount(n, what));
  OF_RETURN_IF_ERROR(mpi::FromMpi(MPI_Allreduce(dy.raw_data(), out->raw_data(), static_cast<int>(n),
                                                mpi::ToMpi(dy.dtype()), MPI_SUM, mpi::Comm()),
                                  what.c_str()));
  T* d = out->data<T>();
  const double scale = pre * post * (r == Reduce::kAverage ? 1.0 / mpi::Size() : 1.0);
  if (r == Reduce::kMin || r == Reduce::kMax) {
    // This rank's x reached y where it was the extreme (same arithmetic as the forward).
    const T *xs = x.data<T>(), *ys = y.data<T>();
    const T tp = static_cast<T>(pre), tq = static_cast<T>(post);
    for (int64_t i = 0; i < n; ++i) {
      const T reached = static_cast<T>(static_cast<T>(xs[i] * tp) * tq);
      d[i] = reached == ys[i] ? static_cast<T>(d[i] * scale) : T(0);
    }
  } else {
    Scale(d, n, scale);
  }
  return Status::OK();
}

template <typename T>
Status AllgatherKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  const Tensor& x = ctx->input(0);
  const std::string what = What(ctx);
  const int size = mpi::Size();
  std::vector<int64_t> dim0s(size);
  OF_RETURN_IF_ERROR(mpi::Handshake(what.c_str(), MakeMeta(ctx, x, "", true), dim0s.data()));
  int64_t row = 1;
  for (int i = 1; i < x.rank(); ++i) row *= x.dim(i);
  std::vector<int> counts(size), displs(size);
  int64_t total = 0;
  for (int i = 0; i < size; ++i) {
    OF_RETURN_IF_ERROR(CheckCount(total + dim0s[i] * row, what));
    counts[i] = static_cast<int>(dim0s[i] * row);
    displs[i] = static_cast<int>(total);
    total += dim0s[i] * row;
  }
  TensorShape shape = x.shape();
  int64_t rows = 0;
  for (int64_t d : dim0s) rows += d;
  shape.set_dim(0, rows);
  // A graph plans every shape from its feeds before the data moves (this
  // rank's rows times the process count): the ops after the gather would
  // read it with the wrong shape. All ranks see the same dim0s: all fail.
  if (!ctx->node_name().empty() && std::count(dim0s.begin(), dim0s.end(), dim0s[0]) != size) {
    std::string dims;
    for (int i = 0; i < size; ++i) dims += (i ? ", " : "") + std::to_string(dim0s[i]);
    return errors::InvalidArgument(what, ": in a graph every process must gather the same number of rows, got [",
                                   dims, "] (by rank); gather eagerly or in async mode, or pad to equal rows");
  }
  Tensor result;
  OF_RETURN_IF_ERROR(Tensor::Allocate(x.dtype(), shape, &result));
  if (total > 0) {
    OF_RETURN_IF_ERROR(mpi::FromMpi(MPI_Allgatherv(x.raw_data(), counts[mpi::Rank()], mpi::ToMpi(x.dtype()),
                                                   result.raw_data(), counts.data(), displs.data(),
                                                   mpi::ToMpi(x.dtype()), mpi::Comm()),
                                    what.c_str()));
  }
  ctx->set_output(0, std::move(result));
  return Status::OK();
}

template <typename T>
Status AllgatherGradKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  const Tensor &x = ctx->input(0), &dy = ctx->input(1);
  const std::string what = What(ctx);
  const int size = mpi::Size();
  std::vector<int64_t> dim0s(size);
  OF_RETURN_IF_ERROR(mpi::Handshake(what.c_str(), MakeMeta(ctx, x, "dy" + ShapeText(dy.shape(), false), true),
                                    dim0s.data()));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  int64_t row = 1;
  for (int i = 1; i < x.rank(); ++i) row *= x.dim(i);
  std::vector<int> counts(size);
  for (int i = 0; i < size; ++i) {
    OF_RETURN_IF_ERROR(CheckCount(dim0s[i] * row, what));
    counts[i] = static_cast<int>(dim0s[i] * row);
  }
  int64_t rows = 0;
  for (int64_t d : dim0s) rows += d;
  if (dy.rank() != x.rank() || dy.NumElements() != rows * row) {
    return errors::InvalidArgument(what, ": input 'dy' has shape ", dy.shape().DebugString(), ", but the gathered ",
                                   "tensor has ", rows, " rows of ", ShapeText(x.shape(), true));
  }
  // Sum dy over ranks and keep this rank's rows: one reduce-scatter.
  OF_RETURN_IF_ERROR(CheckCount(dy.NumElements(), what));
  OF_RETURN_IF_ERROR(mpi::FromMpi(MPI_Reduce_scatter(dy.raw_data(), out->raw_data(), counts.data(),
                                                     mpi::ToMpi(dy.dtype()), MPI_SUM, mpi::Comm()),
                                  what.c_str()));
  return Status::OK();
}

Status CheckRoot(OpKernelContext* ctx) {
  const int64_t root = ctx->attr_int("root");
  if (root >= mpi::Size()) {
    return errors::InvalidArgument("attr 'root' is ", root, " but there are only ", mpi::Size(), " processes");
  }
  return Status::OK();
}

// What a broadcast and its gradient agree on first: a valid root, then
// the tensor's metadata with the root beside it (a root differing across
// ranks is a mismatch like a shape).
Status RootedHandshake(OpKernelContext* ctx, const Tensor& t, const std::string& what, int* root) {
  OF_RETURN_IF_ERROR(CheckRoot(ctx));
  *root = static_cast<int>(ctx->attr_int("root"));
  OF_RETURN_IF_ERROR(mpi::Handshake(what.c_str(), MakeMeta(ctx, t, "root=" + std::to_string(*root), false), nullptr));
  return CheckCount(t.NumElements(), what);
}

template <typename T>
Status BroadcastKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  const Tensor& x = ctx->input(0);
  const std::string what = What(ctx);
  int root = 0;
  OF_RETURN_IF_ERROR(RootedHandshake(ctx, x, what, &root));
  Tensor result = x;  // the root sends its own buffer (MPI only reads it there)
  if (mpi::Rank() != root) OF_RETURN_IF_ERROR(Tensor::Allocate(x.dtype(), x.shape(), &result));
  if (x.NumElements() > 0) {
    OF_RETURN_IF_ERROR(mpi::FromMpi(MPI_Bcast(result.raw_data(), static_cast<int>(x.NumElements()),
                                              mpi::ToMpi(x.dtype()), root, mpi::Comm()),
                                    what.c_str()));
  }
  ctx->set_output(0, std::move(result));
  return Status::OK();
}

template <typename T>
Status BroadcastGradKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  const Tensor& dy = ctx->input(0);
  const std::string what = What(ctx);
  int root = 0;
  OF_RETURN_IF_ERROR(RootedHandshake(ctx, dy, what, &root));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64_t n = dy.NumElements();
  if (n == 0) return Status::OK();
  OF_RETURN_IF_ERROR(mpi::FromMpi(MPI_Reduce(dy.raw_data(), out->raw_data(), static_cast<int>(n),
                                             mpi::ToMpi(dy.dtype()), MPI_SUM, root, mpi::Comm()),
                                  what.c_str()));
  if (mpi::Rank() != root) std::memset(out->raw_data(), 0, out->TotalBytes());
  return Status::OK();
}

template <typename T>
Status AlltoallKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  const Tensor& x = ctx->input(0);
  const std::string what = What(ctx);
  OF_RETURN_IF_ERROR(mpi::Handshake(what.c_str(), MakeMeta(ctx, x, "", false), nullptr));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64_t block = x.NumElements() / mpi::Size();
  if (block == 0) return Status::OK();
  OF_RETURN_IF_ERROR(CheckCount(block, what));
  const MPI_Datatype t = mpi::ToMpi(x.dtype());
  OF_RETURN_IF_ERROR(mpi::FromMpi(MPI_Alltoall(x.raw_data(), static_cast<int>(block), t, out->raw_data(),
                                               static_cast<int>(block), t, mpi::Comm()),
                                  what.c_str()));
  return Status::OK();
}

template <typename T>
Status BarrierKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  // The handshake is the barrier: every rank's record must arrive (bounded wait).
  mpi::Meta m;
  m.key = "barrier|" + ctx->attr("name").s;
  m.describe = "barrier '" + ctx->attr("name").s + "'";
  OF_RETURN_IF_ERROR(mpi::Handshake(What(ctx).c_str(), m, nullptr));
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}

template <typename T>
Status GroupedAllreduceKernel(OpKernelContext* ctx) {
  mpi::Turn turn(ctx->attr("name").s);
  OF_RETURN_IF_ERROR(turn.status());
  Reduce r;
  OF_RETURN_IF_ERROR(ParseReduce(ctx->attr("op").s, false, &r));
  const int n = ctx->num_inputs();
  const std::string& name = ctx->attr("name").s;
  const std::string what = name.empty() ? std::string("unnamed group") : "group '" + name + "'";
  // One check for the group: every shape goes into the key, a summary into the message.
  mpi::Meta m;
  int64_t total = 0;
  m.key = name + "|" + DTypeName(DTypeOf<T>::value) + "|" + ctx->attr("op").s;
  for (int i = 0; i < n; ++i) {
    m.key += ShapeText(ctx->input(i).shape(), false);
    total += ctx->input(i).NumElements();
  }
  m.describe = "'" + name + "' " + std::to_string(n) + " " + DTypeName(DTypeOf<T>::value) + " tensors of " +
               std::to_string(total) + " elements (first " + ShapeText(ctx->input(0).shape(), false) + ")";
  OF_RETURN_IF_ERROR(mpi::Handshake(what.c_str(), m, nullptr));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  T* fused = out->data<T>();
  // Pack in order (an average divides while packing: no extra pass over the
  // buffer), then reduce the packed tensors in place, chunk by chunk.
  const T scale = static_cast<T>(r == Reduce::kAverage ? 1.0 / mpi::Size() : 1.0);
  int64_t at = 0;
  for (int i = 0; i < n; ++i) {
    const Tensor& x = ctx->input(i);
    const int64_t count = x.NumElements();
    if (scale == T(1)) {
      if (count > 0) std::memcpy(fused + at, x.raw_data(), x.TotalBytes());
    } else {
      const T* src = x.data<T>();
      T* dst = fused + at;
      for (int64_t j = 0; j < count; ++j) dst[j] = src[j] * scale;
    }
    at += count;
  }
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(ctx->attr_int("fusion_bytes") / sizeof(T), INT_MAX));
  for (int64_t b = 0; b < total; b += chunk) {
    const int count = static_cast<int>(std::min(chunk, total - b));
    OF_RETURN_IF_ERROR(mpi::FromMpi(MPI_Allreduce(MPI_IN_PLACE, fused + b, count, mpi::ToMpi(DTypeOf<T>::value),
                                                  MPI_SUM, mpi::Comm()),
                                    what.c_str()));
  }
  return Status::OK();
}

}  // namespace

#define OF_MPI_KERNELS(op, fn, ...) REGISTER_KERNEL(op, kCPU, DType::kFloat32, fn<float>); \
  REGISTER_KERNEL(op, kCPU, DType::kFloat64, fn<double>)
#define OF_MPI_INT_KERNELS(op, fn) REGISTER_KERNEL(op, kCPU, DType::kInt32, fn<int32_t>); \
  REGISTER_KERNEL(op, kCPU, DType::kInt64, fn<int64_t>)

OF_MPI_KERNELS("MpiAllreduce", AllreduceKernel);
OF_MPI_INT_KERNELS("MpiAllreduce", AllreduceKernel);
OF_MPI_KERNELS("MpiAllreduceGrad", AllreduceGradKernel);
OF_MPI_KERNELS("MpiAllgather", AllgatherKernel);
OF_MPI_INT_KERNELS("MpiAllgather", AllgatherKernel);
REGISTER_KERNEL("MpiAllgather", kCPU, DType::kBool, AllgatherKernel<bool>);
OF_MPI_KERNELS("MpiAllgatherGrad", AllgatherGradKernel);
OF_MPI_KERNELS("MpiBroadcast", BroadcastKernel);
OF_MPI_INT_KERNELS("MpiBroadcast", BroadcastKernel);
REGISTER_KERNEL("MpiBroadcast", kCPU, DType::kBool, BroadcastKernel<bool>);
OF_MPI_KERNELS("MpiBroadcastGrad", BroadcastGradKernel);
OF_MPI_KERNELS("MpiAlltoall", AlltoallKernel);
OF_MPI_INT_KERNELS("MpiAlltoall", AlltoallKernel);
REGISTER_KERNEL("MpiAlltoall", kCPU, DType::kBool, AlltoallKernel<bool>);
OF_MPI_KERNELS("MpiBarrier", BarrierKernel);
OF_MPI_INT_KERNELS("MpiBarrier", BarrierKernel);
REGISTER_KERNEL("MpiBarrier", kCPU, DType::kBool, BarrierKernel<bool>);
OF_MPI_KERNELS("MpiGroupedAllreduce", GroupedAllreduceKernel);

}  // namespace opforge
