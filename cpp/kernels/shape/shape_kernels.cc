// Kernels of the shape ops (cpp/ops/shape_ops.cc). Expand, StridedSlice and
// Tile are one gather: per output axis, a table of input offsets
// (index * stride: 0 for a broadcast axis, start + i * step for a slice,
// i mod dim for a tile), walked row by row.
#include <cstdint>
#include <cstring>
#include <vector>

#include "../common/each_dtype.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "opforge/strided_slice.h"

namespace opforge {
namespace {

std::vector<int64_t> Int64s(const Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.NumElements());
}

// out[o] = in[sum over axes of table[axis][index]], out row-major.
template <typename T>
Status GatherByTables(OpKernelContext* ctx, const std::vector<std::vector<int64_t>>& tables) {
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64_t total = y->NumElements();
  if (total == 0) return Status::OK();
  const T* in = ctx->input(0).data<T>();
  T* out = y->data<T>();
  const int rank = static_cast<int>(tables.size());
  if (rank == 0) {
    out[0] = in[0];
    return Status::OK();
  }
  const std::vector<int64_t>& last = tables[rank - 1];
  const int64_t row = static_cast<int64_t>(last.size()), rows = total / row;
  ParallelFor(rows, row, [&](int64_t b, int64_t e) {
    int64_t idx[kMaxRank] = {};
    for (int64_t r = b; r < e; ++r) {
      int64_t rest = r, base = 0;
      for (int a = rank - 2; a >= 0; --a) {
        const int64_t n = static_cast<int64_t>(tables[a].size());
        idx[a] = rest % n;
        rest /= n;
        base += tables[a][idx[a]];
      }
      T* o = out + r * row;
      for (int64_t j = 0; j < row; ++j) o[j] = in[base + last[j]];
    }
  });
  return Status::OK();
}

std::vector<int64_t> Strides(const TensorShape& s) {
  std::vector<int64_t> st(s.rank());
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s.dim(i);
  }
  return st;
}

template <typename T>
Status ExpandKernel(OpKernelContext* ctx) {
  const TensorShape& in = ctx->input(0).shape();
  const TensorShape& out = ctx->output_shape(0);
  const std::vector<int64_t> st = Strides(in);
  std::vector<std::vector<int64_t>> tables(out.rank());
  for (int a = 0; a < out.rank(); ++a) {
    const int xa = a - (out.rank() - in.rank());
    const bool broadcast = xa < 0 || in.dim(xa) == 1;
    tables[a].resize(out.dim(a));
    for (int64_t i = 0; i < out.dim(a); ++i) tables[a][i] = broadcast ? 0 : i * st[xa];
  }
  return GatherByTables<T>(ctx, tables);
}

template <typename T>
Status TileKernel(OpKernelContext* ctx) {
  const TensorShape& in = ctx->input(0).shape();
  const TensorShape& out = ctx->output_shape(0);
  const std::vector<int64_t> st = Strides(in);
  std::vector<std::vector<int64_t>> tables(out.rank());
  for (int a = 0; a < out.rank(); ++a) {
    tables[a].resize(out.dim(a));
    for (int64_t i = 0; i < out.dim(a); ++i) tables[a][i] = (i % in.dim(a)) * st[a];
  }
  return GatherByTables<T>(ctx, tables);
}

template <typename T>
Status StridedSliceKernel(OpKernelContext* ctx) {
  const TensorShape& in = ctx->input(0).shape();
  std::vector<int64_t> begin, step;
  TensorShape shape;
  OF_RETURN_IF_ERROR(StridedSliceBounds(in, Int64s(ctx->input(1)), Int64s(ctx->input(2)), Int64s(ctx->input(3)),
                                        Int64s(ctx->input(4)), &begin, &step, &shape));
  if (shape != ctx->output_shape(0)) {
    return errors::Internal("the slice bounds give shape ", shape.DebugString(), " but ",
                            ctx->output_shape(0).DebugString(), " was planned");
  }
  const std::vector<int64_t> st = Strides(in);
  std::vector<std::vector<int64_t>> tables(in.rank());
  for (int a = 0; a < in.rank(); ++a) {
    tables[a].resize(shape.dim(a));
    for (int64_t i = 0; i < shape.dim(a); ++i) tables[a][i] = (begin[a] + i * step[a]) * st[a];
  }
  return GatherByTables<T>(ctx, tables);
}

template <typename T>
Status ReshapeToKernel(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0).Reshaped(ctx->output_shape(0)));
  return Status::OK();
}

template <typename T>
Status ShapeKernel(OpKernelContext* ctx) {
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const TensorShape& s = ctx->input(0).shape();
  for (int i = 0; i < s.rank(); ++i) y->data<int64_t>()[i] = s.dim(i);
  return Status::OK();
}

template <typename T>
Status FullKernel(OpKernelContext* ctx) {
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const T value = ctx->input(1).data<T>()[0];
  T* out = y->data<T>();
  ParallelFor(y->NumElements(), 1, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = value;
  });
  return Status::OK();
}

template <typename T>
Status ArangeKernel(OpKernelContext* ctx) {
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const T start = ctx->input(0).data<T>()[0], delta = ctx->input(2).data<T>()[0];
  T* out = y->data<T>();
  for (int64_t i = 0; i < y->NumElements(); ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  return Status::OK();
}

}  // namespace

OF_REGISTER_EACH_DTYPE("Shape", ShapeKernel);
OF_REGISTER_EACH_DTYPE("ReshapeTo", ReshapeToKernel);
OF_REGISTER_EACH_DTYPE("Expand", ExpandKernel);
OF_REGISTER_EACH_DTYPE("Tile", TileKernel);
OF_REGISTER_EACH_DTYPE("StridedSlice", StridedSliceKernel);
OF_REGISTER_EACH_DTYPE("ConstantOfShape", FullKernel);
OF_REGISTER_DTYPES("ArangeOf", ArangeKernel, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64);

}  // namespace opforge
