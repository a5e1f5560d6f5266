// Kernels of the array ops that move or create data (Cast is in cast_kernels.cc).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/each_dtype.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

// ---- zero-copy ops -------------------------------------------------------

Status ReshapeKernel(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0).Reshaped(ctx->output_shape(0)));
  return Status::OK();
}

Status IdentityKernel(OpKernelContext* ctx) {
  ctx->set_output(0, ctx->input(0));
  return Status::OK();
}

// ---- fill ----------------------------------------------------------------

template <typename T>
void FillRange(T* out, int64_t n, T value) {
  ParallelFor(n, 1, [=](int64_t b, int64_t e) { std::fill(out + b, out + e, value); });
}

template <typename T>
Status FillKernel(OpKernelContext* ctx) {
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  FillRange(out->data<T>(), out->NumElements(), ctx->input(0).data<T>()[0]);
  return Status::OK();
}

template <typename T, int kValue>
Status ConstantLikeKernel(OpKernelContext* ctx) {
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  FillRange(out->data<T>(), out->NumElements(), static_cast<T>(kValue));
  return Status::OK();
}

// ---- odometer over the outer axes of a strided copy -----------------------

// Walks a multi-index over `rank` dims in row-major order, keeping the input
// and output element offsets that belong to it.
struct Odometer {
  int rank = 0;
  int64_t dims[kMaxRank], in_strides[kMaxRank], out_strides[kMaxRank];
  int64_t idx[kMaxRank] = {};
  int64_t in_off = 0, out_off = 0;

  void Seek(int64_t linear) {
    in_off = out_off = 0;
    for (int i = rank - 1; i >= 0; --i) {
      idx[i] = linear % dims[i];
      linear /= dims[i];
      in_off += idx[i] * in_strides[i];
      out_off += idx[i] * out_strides[i];
    }
  }
  void Next() {
    for (int i = rank - 1; i >= 0; --i) {
      in_off += in_strides[i];
      out_off += out_strides[i];
      if (++idx[i] < dims[i]) return;
      in_off -= idx[i] * in_strides[i];
      out_off -= idx[i] * out_strides[i];
      idx[i] = 0;
    }
  }
};

// ---- transpose -----------------------------------------------------------

constexpr int64_t kTile = 32;

// out[a * out_stride_a + b] = in[a + b * in_stride_b] for a < na, b < nb,
// in kTile x kTile tiles so both sides stay in cache.
template <typename T>
void TransposeTile(const T* __restrict in, int64_t in_stride_b, T* __restrict out,
                   int64_t out_stride_a, int64_t na, int64_t nb) {
  for (int64_t b0 = 0; b0 < nb; b0 += kTile) {
    const int64_t b1 = std::min(nb, b0 + kTile);
    for (int64_t a = 0; a < na; ++a) {
      T* o = out + a * out_stride_a;
      const T* i = in + a;
      for (int64_t b = b0; b < b1; ++b) o[b] = i[b * in_stride_b];
    }
  }
}

template <typename T>
Status TransposeKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64_t total = x.NumElements();
  if (total == 0) return Status::OK();
  const T* in = x.data<T>();
  T* out = y->data<T>();
  const int rank = x.rank();

  int64_t perm[kMaxRank];
  const AttrValue& pa = ctx->attr("perm");
  for (int i = 0; i < rank; ++i) {
    const int64_t p = pa.is_none() ? rank - 1 - i : pa.list_i[i];
    perm[i] = p < 0 ? p + rank : p;
  }
  int64_t in_stride[kMaxRank];
  for (int64_t i = rank - 1, s = 1; i >= 0; --i) {
    in_stride[i] = s;
    s *= x.dim(static_cast<int>(i));
  }
  // Output axes as (dim, input stride), dropping size-1 axes and merging
  // neighbours that are also neighbours in the input.
  int r = 0;
  int64_t dims[kMaxRank], istr[kMaxRank];
  for (int i = 0; i < rank; ++i) {
    const int64_t d = x.dim(static_cast<int>(perm[i]));
    const int64_t s = in_stride[perm[i]];
    if (d == 1) continue;
    if (r > 0 && istr[r - 1] == d * s) {
      dims[r - 1] *= d;
      istr[r - 1] = s;
    } else {
      dims[r] = d;
      istr[r] = s;
      ++r;
    }
  }
  if (r <= 1) {  // only the order of size-1 axes changes
    std::memcpy(out, in, total * sizeof(T));
    return Status::OK();
  }
  int64_t ostr[kMaxRank];
  for (int64_t i = r - 1, s = 1; i >= 0; --i) {
    ostr[i] = s;
    s *= dims[i];
  }
  if (istr[r - 1] == 1) {
    // The innermost axis stays innermost: copy contiguous rows.
    const int64_t row = dims[r - 1];
    Odometer od;
    od.rank = r - 1;
    for (int i = 0; i < r - 1; ++i) {
      od.dims[i] = dims[i];
      od.in_strides[i] = istr[i];
      od.out_strides[i] = ostr[i];
    }
    ParallelFor(total / row, row, [&](int64_t b, int64_t e) {
      Odometer it = od;
      it.Seek(b);
      for (int64_t k = b; k < e; ++k, it.Next()) {
        std::memcpy(out + it.out_off, in + it.in_off, row * sizeof(T));
      }
    });
    return Status::OK();
  }
  // General case: a 2-D tiled transpose between output axis q (the input's
  // innermost, stride 1) and the output's innermost axis, for each index of
  // the remaining axes.
  int q = 0;
  while (istr[q] != 1) ++q;
  Odometer od;
  od.rank = 0;
  for (int i = 0; i < r - 1; ++i) {
    if (i == q) continue;
    od.dims[od.rank] = dims[i];
    od.in_strides[od.rank] = istr[i];
    od.out_strides[od.rank] = ostr[i];
    ++od.rank;
  }
  const int64_t na = dims[q], nb = dims[r - 1];
  const int64_t a_blocks = (na + kTile - 1) / kTile;
  const int64_t outer = total / (na * nb);
  const int64_t in_b = istr[r - 1], out_a = ostr[q];
  ParallelFor(outer * a_blocks, kTile * nb * 2, [&](int64_t b, int64_t e) {
    int64_t o = b / a_blocks;
    Odometer it = od;
    it.Seek(o);
    for (int64_t u = b; u < e; ++u) {
      if (u / a_blocks != o) {
        o = u / a_blocks;
        it.Next();
      }
      const int64_t a0 = (u % a_blocks) * kTile;
      TransposeTile(in + it.in_off + a0, in_b, out + it.out_off + a0 * out_a, out_a,
                    std::min(kTile, na - a0), nb);
    }
  });
  return Status::OK();
}

// ---- concat --------------------------------------------------------------

template <typename T>
Status ConcatKernel(OpKernelContext* ctx) {
  Tensor* y;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const auto range = ctx->input_range("values");
  const TensorShape& shape = y->shape();
  const int rank = shape.rank();
  int64_t axis = ctx->attr_int("axis");
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape.dim(i);
  for (int i = static_cast<int>(axis) + 1; i < rank; ++i) inner *= shape.dim(i);
  const int64_t out_row = shape.dim(static_cast<int>(axis)) * inner;
  T* out = y->data<T>();
  ParallelFor(outer, out_row, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      T* dst = out + o * out_row;
      for (int i = range.first; i < range.second; ++i) {
        const Tensor& t = ctx->input(i);
        const int64_t n = t.dim(static_cast<int>(axis)) * inner;
        if (n == 0) continue;
        std::memcpy(dst, t.data<T>() + o * n, n * sizeof(T));
        dst += n;
      }
    }
  });
  return Status::OK();
}

// ---- slice ---------------------------------------------------------------

template <typename T>
Status SliceKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64_t total = y->NumElements();
  if (total == 0) return Status::OK();
  const std::vector<int64_t>& begin = ctx->attr_ints("begin");
  const int rank = x.rank();
  const TensorShape& os = y->shape();
  // Trailing axes taken whole join the row copied with one memcpy.
  int k = rank - 1;
  int64_t row = 1;
  while (k >= 0 && os.dim(k) == x.dim(k)) row *= os.dim(k--);
  if (k < 0) {  // the whole tensor
    std::memcpy(y->data<T>(), x.data<T>(), total * sizeof(T));
    return Status::OK();
  }
  row *= os.dim(k);
  int64_t in_stride[kMaxRank];
  for (int64_t i = rank - 1, s = 1; i >= 0; --i) {
    in_stride[i] = s;
    s *= x.dim(static_cast<int>(i));
  }
  int64_t base = 0;
  for (int i = 0; i < rank; ++i) base += begin[i] * in_stride[i];
  Odometer od;
  od.rank = k;
  for (int64_t i = k - 1, s = row; i >= 0; --i) {
    od.dims[i] = os.dim(static_cast<int>(i));
    od.in_strides[i] = in_stride[i];
    od.out_strides[i] = s;
    s *= os.dim(static_cast<int>(i));
  }
  const T* in = x.data<T>() + base;
  T* out = y->data<T>();
  ParallelFor(total / row, row, [&](int64_t b, int64_t e) {
    Odometer it = od;
    it.Seek(b);
    for (int64_t u = b; u < e; ++u, it.Next()) {
      std::memcpy(out + it.out_off, in + it.in_off, row * sizeof(T));
    }
  });
  return Status::OK();
}

template <typename T>
Status ReshapeT(OpKernelContext* ctx) { return ReshapeKernel(ctx); }
template <typename T>
Status IdentityT(OpKernelContext* ctx) { return IdentityKernel(ctx); }
template <typename T>
Status ZerosLikeT(OpKernelContext* ctx) { return ConstantLikeKernel<T, 0>(ctx); }
template <typename T>
Status OnesLikeT(OpKernelContext* ctx) { return ConstantLikeKernel<T, 1>(ctx); }

}  // namespace

OF_REGISTER_EACH_DTYPE("Reshape", ReshapeT);
OF_REGISTER_EACH_DTYPE("Identity", IdentityT);
OF_REGISTER_EACH_DTYPE("Transpose", TransposeKernel);
OF_REGISTER_EACH_DTYPE("Fill", FillKernel);
OF_REGISTER_EACH_DTYPE("Concat", ConcatKernel);
OF_REGISTER_EACH_DTYPE("Slice", SliceKernel);
OF_REGISTER_EACH_DTYPE("ZerosLike", ZerosLikeT);
OF_REGISTER_EACH_DTYPE("OnesLike", OnesLikeT);

}  // namespace opforge
