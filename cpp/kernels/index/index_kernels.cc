// Kernels of the gathers and scatters of cpp/ops/index_ops.cc. Every index
// is checked (and a negative one wrapped) before any element moves, so a bad
// index is an error naming its flat position, never a stray write. Scatters
// apply updates in index order, one thread, because repeated indices make
// the order part of the result ('none': the last write wins).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

using int64 = int64_t;

template <typename I>
Status Wrap(I raw, int64 dim, int64 pos, int d, int64* out) {
  int64 v = static_cast<int64>(raw);
  if (v < -dim || v >= dim) {
    return errors::InvalidArgument("argument 'indices' has ", v, " at flat position ", pos,
                                   ", out of range for dim ", d, " of size ", dim, " (valid: ", -dim, " to ",
                                   dim - 1, ")");
  }
  *out = v < 0 ? v + dim : v;
  return Status::OK();
}

enum Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction ParseReduction(const std::string& s) {
  return s == "add" ? kAdd : s == "mul" ? kMul : s == "max" ? kMax : s == "min" ? kMin : kNone;
}

template <typename T>
inline bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}

template <typename T>
inline void Apply(Reduction r, T* dst, T v) {
  switch (r) {
    case kNone: *dst = v; break;
    case kAdd: *dst = static_cast<T>(*dst + v); break;
    case kMul: *dst = static_cast<T>(*dst * v); break;
    // NaN propagates, as numpy.maximum / minimum (and ONNX's reference) do.
    case kMax: if (v > *dst || IsNan(v)) *dst = v; break;
    case kMin: if (v < *dst || IsNan(v)) *dst = v; break;
  }
}

// Flat element offsets of the slices GatherND/ScatterND address: one per
// index tuple of indices [..., k] into data's first k dims.
template <typename I>
Status NDOffsets(const Tensor& data, const Tensor& indices, std::vector<int64>* offsets, int64* slice) {
  const int k = static_cast<int>(indices.dim(indices.rank() - 1));
  int64 s = 1;
  for (int i = k; i < data.rank(); ++i) s *= data.dim(i);
  *slice = s;
  const int64 n = k == 0 ? indices.NumElements() == 0 ? 0 : 1 : indices.NumElements() / k;
  int64 tuples = 1;
  for (int i = 0; i + 1 < indices.rank(); ++i) tuples *= indices.dim(i);
  offsets->assign(static_cast<size_t>(tuples), 0);
  (void)n;
  std::vector<int64> stride(k);
  int64 st = s;
  for (int j = k - 1; j >= 0; --j) {
    stride[j] = st;
    st *= data.dim(j);
  }
  const I* idx = indices.data<I>();
  for (int64 t = 0; t < tuples; ++t) {
    int64 off = 0;
    for (int j = 0; j < k; ++j) {
      int64 v;
      OF_RETURN_IF_ERROR(Wrap(idx[t * k + j], data.dim(j), t * k + j, j, &v));
      off += v * stride[j];
    }
    (*offsets)[t] = off;
  }
  return Status::OK();
}

template <typename T, typename I>
Status GatherNDKernel(OpKernelContext* ctx) {
  const Tensor& params = ctx->input(0);
  std::vector<int64> offsets;
  int64 slice;
  OF_RETURN_IF_ERROR(NDOffsets<I>(params, ctx->input(1), &offsets, &slice));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (slice == 0 || offsets.empty()) return Status::OK();
  const T* src = params.data<T>();
  T* dst = out->data<T>();
  ParallelFor(static_cast<int64>(offsets.size()), slice, [&](int64 lo, int64 hi) {
    for (int64 t = lo; t < hi; ++t) std::memcpy(dst + t * slice, src + offsets[t], sizeof(T) * slice);
  });
  return Status::OK();
}

template <typename T, typename I>
Status ScatterNDKernel(OpKernelContext* ctx) {
  const Tensor& data = ctx->input(0);
  std::vector<int64> offsets;
  int64 slice;
  OF_RETURN_IF_ERROR(NDOffsets<I>(data, ctx->input(1), &offsets, &slice));
  const Reduction r = ParseReduction(ctx->attr("reduction").s);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  T* dst = out->data<T>();
  if (data.NumElements()) std::memcpy(dst, data.data<T>(), sizeof(T) * data.NumElements());
  const T* upd = ctx->input(2).data<T>();
  for (size_t t = 0; t < offsets.size(); ++t) {
    T* row = dst + offsets[t];
    const T* u = upd + static_cast<int64>(t) * slice;
    for (int64 c = 0; c < slice; ++c) Apply(r, row + c, u[c]);
  }
  return Status::OK();
}

// For each element of indices (row-major): the flat offset into data of the
// element it addresses along axis. Shared by GatherElements and ScatterElements.
template <typename I>
Status ElementOffsets(const OpKernelContext* ctx, const Tensor& data, const Tensor& indices,
                      std::vector<int64>* offsets) {
  const int rank = data.rank();
  const int axis = static_cast<int>(ctx->attr_int("axis") < 0 ? ctx->attr_int("axis") + rank : ctx->attr_int("axis"));
  for (int d = 0; d < rank; ++d) {
    if (d != axis && indices.dim(d) > data.dim(d)) {
      return errors::InvalidArgument("argument 'indices' has shape ", indices.shape().DebugString(),
                                     ", larger than argument 'data' ", data.shape().DebugString(), " in dim ", d);
    }
  }
  std::vector<int64> stride(rank);
  int64 st = 1;
  for (int d = rank - 1; d >= 0; --d) {
    stride[d] = st;
    st *= data.dim(d);
  }
  const int64 n = indices.NumElements();
  offsets->resize(static_cast<size_t>(n));
  std::vector<int64> coord(rank, 0);
  const I* idx = indices.data<I>();
  const int64 dim = data.dim(axis);
  for (int64 i = 0; i < n; ++i) {
    int64 v;
    OF_RETURN_IF_ERROR(Wrap(idx[i], dim, i, axis, &v));
    int64 off = v * stride[axis];
    for (int d = 0; d < rank; ++d) {
      if (d != axis) off += coord[d] * stride[d];
    }
    (*offsets)[i] = off;
    for (int d = rank - 1; d >= 0; --d) {  // odometer over indices' shape
      if (++coord[d] < indices.dim(d)) break;
      coord[d] = 0;
    }
  }
  return Status::OK();
}

template <typename T, typename I>
Status GatherElementsKernel(OpKernelContext* ctx) {
  const Tensor& params = ctx->input(0);
  std::vector<int64> offsets;
  OF_RETURN_IF_ERROR(ElementOffsets<I>(ctx, params, ctx->input(1), &offsets));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const T* src = params.data<T>();
  T* dst = out->data<T>();
  ParallelFor(static_cast<int64>(offsets.size()), 2, [&](int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) dst[i] = src[offsets[i]];
  });
  return Status::OK();
}

template <typename T, typename I>
Status ScatterElementsKernel(OpKernelContext* ctx) {
  const Tensor& data = ctx->input(0);
  std::vector<int64> offsets;
  OF_RETURN_IF_ERROR(ElementOffsets<I>(ctx, data, ctx->input(1), &offsets));
  const Reduction r = ParseReduction(ctx->attr("reduction").s);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  T* dst = out->data<T>();
  if (data.NumElements()) std::memcpy(dst, data.data<T>(), sizeof(T) * data.NumElements());
  const T* upd = ctx->input(2).data<T>();
  for (size_t i = 0; i < offsets.size(); ++i) Apply(r, dst + offsets[i], upd[i]);
  return Status::OK();
}

// The kernel dtype is T; the index dtype is dispatched at run time.
#define OF_INDEX_KERNEL(name, kernel)                                                             \
  template <typename T>                                                                           \
  Status name(OpKernelContext* c) {                                                               \
    return c->input(1).dtype() == DType::kInt32 ? kernel<T, int32_t>(c) : kernel<T, int64>(c);     \
  }                                                                                               \
  static_assert(true, "")
OF_INDEX_KERNEL(GatherND, GatherNDKernel);
OF_INDEX_KERNEL(ScatterND, ScatterNDKernel);
OF_INDEX_KERNEL(GatherElements, GatherElementsKernel);
OF_INDEX_KERNEL(ScatterElements, ScatterElementsKernel);

}  // namespace

#define OF_INDEX_TYPES(op, kernel)                              \
  REGISTER_KERNEL(op, kCPU, DType::kFloat32, kernel<float>);    \
  REGISTER_KERNEL(op, kCPU, DType::kFloat64, kernel<double>);   \
  REGISTER_KERNEL(op, kCPU, DType::kInt32, kernel<int32_t>);    \
  REGISTER_KERNEL(op, kCPU, DType::kInt64, kernel<int64_t>);    \
  REGISTER_KERNEL(op, kCPU, DType::kBool, kernel<bool>)

OF_INDEX_TYPES("GatherND", GatherND);
OF_INDEX_TYPES("ScatterND", ScatterND);
OF_INDEX_TYPES("GatherElements", GatherElements);
OF_INDEX_TYPES("ScatterElements", ScatterElements);

}  // namespace opforge
