// Backward-op kernels: SoftmaxGrad, RmsNormGrad, ReduceGrad (and ReduceGradGrad), SliceGrad,
// ConcatGrad, ConcatGradGrad (MatMulGrad sits beside the GEMM in linalg_kernels.cc).
// Sums over rows are accumulated in double, as the forward kernels do.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "compiler.h"

namespace opforge {
namespace {

using int64 = int64_t;

constexpr int kLanes = 16;     // independent accumulators per row
constexpr int64 kCols = 256;   // column block when the axis is not the last one
constexpr int64 kChunk = int64{1} << 15;  // elements per work unit

int NormAxis(int64 axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }

// sum(a[i] * b[i]) in double with independent lanes (vectorizes).
template <typename T>
double Dot(const T* OF_RESTRICT a, const T* OF_RESTRICT b, int64 n) {
  double lanes[kLanes] = {};
  int64 i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(a[i + l]) * static_cast<double>(b[i + l]);
  }
  double r = 0;
  for (; i < n; ++i) r += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  for (int l = 0; l < kLanes; ++l) r += lanes[l];
  return r;
}

void ZeroFill(Tensor* t, size_t elem) {
  std::memset(t->raw_data(), 0, static_cast<size_t>(t->NumElements()) * elem);
}

// ---- SoftmaxGrad: s * (g - sum(g * s)) per slice along axis ----------------

template <typename T>
Status SoftmaxGradKernel(OpKernelContext* ctx) {
  const Tensor& sm = ctx->input(0);
  const Tensor& grad = ctx->input(1);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (sm.NumElements() == 0) return Status::OK();
  const int rank = sm.rank();
  const int axis = NormAxis(ctx->attr_int("axis"), rank);
  int64 outer = 1, inner = 1;
  const int64 n = sm.dim(axis);
  for (int i = 0; i < axis; ++i) outer *= sm.dim(i);
  for (int i = axis + 1; i < rank; ++i) inner *= sm.dim(i);
  const T* s = sm.data<T>();
  const T* g = grad.data<T>();
  T* y = out->data<T>();

  if (inner == 1) {
    ParallelFor(outer, n * 4, [&](int64 b, int64 e) {
      for (int64 o = b; o < e; ++o) {
        const T* OF_RESTRICT sr = s + o * n;
        const T* OF_RESTRICT gr = g + o * n;
        T* OF_RESTRICT yr = y + o * n;
        const double dot = Dot(sr, gr, n);
        for (int64 i = 0; i < n; ++i) {
          yr[i] = static_cast<T>(static_cast<double>(sr[i]) * (static_cast<double>(gr[i]) - dot));
        }
      }
    });
    return Status::OK();
  }
  // Axis not last: walk whole contiguous rows, one column block at a time.
  const int64 cw = std::min(inner, kCols);
  const int64 ncb = (inner + cw - 1) / cw;
  ParallelFor(outer * ncb, n * cw * 4, [&](int64 b, int64 e) {
    double dot[kCols];
    for (int64 u = b; u < e; ++u) {
      const int64 o = u / ncb, col0 = (u % ncb) * cw, w = std::min(cw, inner - col0);
      const int64 base = o * n * inner + col0;
      for (int64 c = 0; c < w; ++c) dot[c] = 0;
      for (int64 r = 0; r < n; ++r) {
        const T* OF_RESTRICT sr = s + base + r * inner;
        const T* OF_RESTRICT gr = g + base + r * inner;
        for (int64 c = 0; c < w; ++c) dot[c] += static_cast<double>(sr[c]) * static_cast<double>(gr[c]);
      }
      for (int64 r = 0; r < n; ++r) {
        const T* OF_RESTRICT sr = s + base + r * inner;
        const T* OF_RESTRICT gr = g + base + r * inner;
        T* OF_RESTRICT yr = y + base + r * inner;
        for (int64 c = 0; c < w; ++c) {
          yr[c] = static_cast<T>(static_cast<double>(sr[c]) * (static_cast<double>(gr[c]) - dot[c]));
        }
      }
    }
  });
  return Status::OK();
}

// ---- RmsNormGrad -------------------------------------------------------------
//
// With r = 1 / sqrt(mean(x^2) + eps) per row: grad_x = r g w - x r^3 / d *
// sum(g w x), grad_weight = sum over rows of g x r. Rows are split into at
// most kMaxBlocks blocks fixed by the shape; each block sums its grad_weight
// part in double, and the parts are added in block order, so the result does
// not depend on the thread count.
constexpr int64 kMaxBlocks = 64;

template <typename T>
Status RmsNormGradKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& weight = ctx->input(1);
  const Tensor& grad = ctx->input(2);
  Tensor* grad_x = nullptr;
  Tensor* grad_w = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &grad_x));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &grad_w));
  const int64 total = x.NumElements();
  const int64 d = x.dim(x.rank() - 1);
  if (total == 0) {
    ZeroFill(grad_w, sizeof(T));
    return Status::OK();
  }
  const int64 rows = total / d;
  const double eps = ctx->attr_float("epsilon");
  const T* xs = x.data<T>();
  const T* w = weight.data<T>();
  const T* g = grad.data<T>();
  T* gx = grad_x->data<T>();
  const int64 block = std::max((rows + kMaxBlocks - 1) / kMaxBlocks, (kChunk + d - 1) / d);
  const int64 nblocks = (rows + block - 1) / block;
  std::vector<double> parts(static_cast<size_t>(nblocks * d));
  ParallelFor(nblocks, block * d * 8, [&](int64 b0, int64 b1) {
    for (int64 blk = b0; blk < b1; ++blk) {
      double* OF_RESTRICT pw = parts.data() + blk * d;
      for (int64 r = blk * block, r1 = std::min(rows, r + block); r < r1; ++r) {
        const T* OF_RESTRICT xr = xs + r * d;
        const T* OF_RESTRICT gr = g + r * d;
        T* OF_RESTRICT gxr = gx + r * d;
        const double inv = 1.0 / std::sqrt(Dot(xr, xr, d) / static_cast<double>(d) + eps);
        double gwx = 0;
        for (int64 i = 0; i < d; ++i) {
          gwx += static_cast<double>(gr[i]) * static_cast<double>(w[i]) * static_cast<double>(xr[i]);
        }
        const double coef = inv * inv * inv / static_cast<double>(d) * gwx;
        for (int64 i = 0; i < d; ++i) {
          const double gi = static_cast<double>(gr[i]), xi = static_cast<double>(xr[i]);
          gxr[i] = static_cast<T>(inv * gi * static_cast<double>(w[i]) - xi * coef);
          pw[i] += gi * xi * inv;
        }
      }
    }
  });
  T* gw = grad_w->data<T>();
  for (int64 i = 0; i < d; ++i) {
    double s = 0;
    for (int64 blk = 0; blk < nblocks; ++blk) s += parts[blk * d + i];
    gw[i] = static_cast<T>(s);
  }
  return Status::OK();
}

// ---- ReduceGrad --------------------------------------------------------------

// x's shape seen as the reduction sees it: for every axis, x's stride and the
// stride of the matching y element (0 on reduced axes).
struct ReduceLayout {
  int rank = 0;
  int64 dims[kMaxRank] = {}, x_stride[kMaxRank] = {}, y_stride[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  int64 count = 1;  // reduced elements per y element
};

ReduceLayout MakeLayout(const OpKernelContext* ctx, const TensorShape& x) {
  ReduceLayout L;
  L.rank = x.rank();
  const AttrValue& axis = ctx->attr("axis");
  for (int i = 0; i < L.rank; ++i) L.reduced[i] = axis.is_none();
  if (!axis.is_none()) {
    for (int64 a : axis.list_i) L.reduced[NormAxis(a, L.rank)] = true;
  }
  int64 xs = 1, ys = 1;
  for (int i = L.rank - 1; i >= 0; --i) {
    L.dims[i] = x.dim(i);
    L.x_stride[i] = xs;
    xs *= x.dim(i);
    if (L.reduced[i]) {
      L.count *= x.dim(i);
    } else {
      L.y_stride[i] = ys;
      ys *= x.dim(i);
    }
  }
  return L;
}

// Calls fn(x_offset_of_row, y_offset_of_row, y_step) for each row of x's last
// axis in [r0, r1); a 0-d x is one row of one element.
template <typename F>
void ForRows(const ReduceLayout& L, int64 r0, int64 r1, F&& fn) {
  const int last = L.rank - 1;
  const int64 y_step = L.rank ? L.y_stride[last] : 0;
  for (int64 r = r0; r < r1; ++r) {
    int64 rest = r, yo = 0;
    for (int i = last - 1; i >= 0; --i) {
      yo += (rest % L.dims[i]) * L.y_stride[i];
      rest /= L.dims[i];
    }
    fn(r * (L.rank ? L.dims[last] : 1), yo, y_step);
  }
}

template <typename T>
bool Matches(T v, T target) { return v == target || (v != v && target != target); }

template <typename T>
Status ReduceGradKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& y = ctx->input(1);
  const Tensor& grad = ctx->input(2);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64 total = x.NumElements();
  if (total == 0) return Status::OK();
  const std::string& reduction = ctx->attr("reduction").s;
  const ReduceLayout L = MakeLayout(ctx, x.shape());
  const int64 row_len = L.rank ? L.dims[L.rank - 1] : 1;
  const int64 rows = total / row_len;
  const T* g = grad.data<T>();
  T* o = out->data<T>();

  if (reduction == "sum" || reduction == "mean") {
    const T scale = reduction == "mean" ? static_cast<T>(L.count) : T(1);
    ParallelFor(rows, row_len, [&](int64 r0, int64 r1) {
      ForRows(L, r0, r1, [&](int64 xo, int64 yo, int64 ys) {
        T* OF_RESTRICT dst = o + xo;
        if (ys == 0) {
          const T v = g[yo] / scale;
          for (int64 i = 0; i < row_len; ++i) dst[i] = v;
        } else {
          const T* OF_RESTRICT src = g + yo;
          for (int64 i = 0; i < row_len; ++i) dst[i] = src[i] / scale;
        }
      });
    });
    return Status::OK();
  }
  const T* xs = x.data<T>();
  if (reduction == "max" || reduction == "min") {
    // Count the ties of each y element, then share its gradient among them.
    const T* ys_data = y.data<T>();
    std::vector<int64> ties(static_cast<size_t>(y.NumElements()), 0);
    ForRows(L, 0, rows, [&](int64 xo, int64 yo, int64 ys) {
      for (int64 i = 0; i < row_len; ++i) ties[yo + i * ys] += Matches(xs[xo + i], ys_data[yo + i * ys]);
    });
    ParallelFor(rows, row_len * 2, [&](int64 r0, int64 r1) {
      ForRows(L, r0, r1, [&](int64 xo, int64 yo, int64 ys) {
        for (int64 i = 0; i < row_len; ++i) {
          const int64 yi = yo + i * ys;
          o[xo + i] = Matches(xs[xo + i], ys_data[yi]) ? g[yi] / static_cast<T>(ties[yi]) : T(0);
        }
      });
    });
    return Status::OK();
  }
  // prod: grad times the product of the other reduced elements, as (product
  // before) * (product after) along each group, in double: zeros need no
  // special case and nothing is divided.
  int red[kMaxRank], kept[kMaxRank], nred = 0, nkept = 0;
  for (int i = 0; i < L.rank; ++i) (L.reduced[i] ? red[nred++] : kept[nkept++]) = i;
  auto offset = [&](int64 idx, const int* axes, int naxes) {
    int64 off = 0;
    for (int j = naxes - 1; j >= 0; --j) {
      off += (idx % L.dims[axes[j]]) * L.x_stride[axes[j]];
      idx /= L.dims[axes[j]];
    }
    return off;
  };
  const int64 groups = total / L.count;
  ParallelFor(groups, L.count * 8, [&](int64 q0, int64 q1) {
    std::vector<double> prefix(static_cast<size_t>(L.count));
    for (int64 q = q0; q < q1; ++q) {
      const int64 base = offset(q, kept, nkept);
      double before = 1;
      for (int64 r = 0; r < L.count; ++r) {
        prefix[r] = before;
        before *= static_cast<double>(xs[base + offset(r, red, nred)]);
      }
      double after = static_cast<double>(g[q]);
      for (int64 r = L.count - 1; r >= 0; --r) {
        const int64 at = base + offset(r, red, nred);
        o[at] = static_cast<T>(prefix[r] * after);
        after *= static_cast<double>(xs[at]);
      }
    }
  });
  return Status::OK();
}

// ---- ReduceGradGrad: zeros, or for prod the higher-order terms ------------
//
// With N directions d_0..d_{N-1}, element r of a group gets
//   g * sum over subsets S of {0..N-1} of before_r[S] * after_r[complement of S]
// where before_r[S] sums, over the ways to give each direction in S its own
// element before r, the product of those direction values and of x at the
// other elements before r (after_r: the same after r). Adding element k to
// the running sums: c[S] <- c[S] x_k + sum over j in S of c[S - j] d_j[k].
// A sum over more directions than elements is empty: it stays 0 and out of
// products, so a NaN or inf in x reaches only the terms that hold it.
template <typename T>
Status ReduceGradGradKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& grad = ctx->input(2);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  ZeroFill(out, sizeof(T));
  const int64 total = x.NumElements();
  if (total == 0 || ctx->attr("reduction").s != "prod") return Status::OK();
  const auto range = ctx->input_range("directions");
  const int nd = range.second - range.first;
  std::vector<const T*> d(static_cast<size_t>(nd));
  for (int j = 0; j < nd; ++j) d[j] = ctx->input(range.first + j).data<T>();
  const int states = 1 << nd, full = states - 1;
  std::vector<int> bits(static_cast<size_t>(states));
  for (int m = 0; m < states; ++m) bits[m] = __builtin_popcount(static_cast<unsigned>(m));
  const ReduceLayout L = MakeLayout(ctx, x.shape());
  int red[kMaxRank], kept[kMaxRank], nred = 0, nkept = 0;
  for (int i = 0; i < L.rank; ++i) (L.reduced[i] ? red[nred++] : kept[nkept++]) = i;
  auto offset = [&](int64 idx, const int* axes, int naxes) {
    int64 off = 0;
    for (int j = naxes - 1; j >= 0; --j) {
      off += (idx % L.dims[axes[j]]) * L.x_stride[axes[j]];
      idx /= L.dims[axes[j]];
    }
    return off;
  };
  const T* xs = x.data<T>();
  const T* g = grad.data<T>();
  T* o = out->data<T>();
  const int64 n = L.count;
  // Each thread keeps the running sums before every element of its group.
  if (n > (int64{1} << 26) / states) {
    return errors::ResourceExhausted("ReduceGradGrad: ", nd, " directions over groups of ", n,
                                     " elements would need ", n * states * 8 >> 20,
                                     " MiB of running sums per thread; use fewer directions or smaller groups");
  }
  // Adds element `at` to running sums c over `seen` elements so far.
  auto add = [&](std::vector<double>& c, int64 at, int64 seen) {
    const double xv = static_cast<double>(xs[at]);
    for (int m = full; m >= 0; --m) {  // c[m - j] is read before it is updated
      if (bits[m] > seen + 1) continue;
      double v = bits[m] <= seen ? c[m] * xv : 0.0;
      for (int j = 0; j < nd; ++j) {
        if ((m >> j & 1) && bits[m] - 1 <= seen) v += c[m ^ (1 << j)] * static_cast<double>(d[j][at]);
      }
      c[m] = v;
    }
  };
  ParallelFor(total / n, n * states * (nd + 2) * 2, [&](int64 q0, int64 q1) {
    std::vector<double> before(static_cast<size_t>(n * states)), c(static_cast<size_t>(states));
    std::vector<int64> at(static_cast<size_t>(n));
    for (int64 q = q0; q < q1; ++q) {
      const int64 base = offset(q, kept, nkept);
      std::fill(c.begin(), c.end(), 0.0);
      c[0] = 1;
      for (int64 r = 0; r < n; ++r) {
        at[r] = base + offset(r, red, nred);
        std::copy(c.begin(), c.end(), before.begin() + r * states);
        add(c, at[r], r);
      }
      std::fill(c.begin(), c.end(), 0.0);
      c[0] = 1;
      const double gq = static_cast<double>(g[q]);
      for (int64 r = n - 1; r >= 0; --r) {
        const double* b = before.data() + r * states;
        const int64 seen_after = n - 1 - r;
        double sum = 0;
        for (int m = 0; m < states; ++m) {
          if (bits[m] <= r && bits[full ^ m] <= seen_after) sum += b[m] * c[full ^ m];
        }
        o[at[r]] = static_cast<T>(gq * sum);
        add(c, at[r], seen_after);
      }
    }
  });
  return Status::OK();
}

// ---- SliceGrad: zeros with grad written at the slice ------------------------

template <typename T>
Status SliceGradKernel(OpKernelContext* ctx) {
  const Tensor& grad = ctx->input(1);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  ZeroFill(out, sizeof(T));
  if (grad.NumElements() == 0) return Status::OK();
  const TensorShape& xs = out->shape();
  const int rank = xs.rank();
  const T* g = grad.data<T>();
  T* o = out->data<T>();
  if (rank == 0) {
    o[0] = g[0];
    return Status::OK();
  }
  const std::vector<int64>& begin = ctx->attr_ints("begin");
  int64 x_stride[kMaxRank];
  for (int i = rank - 1, s = 1; i >= 0; --i) {
    x_stride[i] = s;
    s *= xs.dim(i);
  }
  const int64 row_len = grad.dim(rank - 1);
  const int64 rows = grad.NumElements() / row_len;
  ParallelFor(rows, row_len, [&](int64 r0, int64 r1) {
    for (int64 r = r0; r < r1; ++r) {
      int64 rest = r, xo = begin[rank - 1];
      for (int i = rank - 2; i >= 0; --i) {
        xo += (rest % grad.dim(i) + begin[i]) * x_stride[i];
        rest /= grad.dim(i);
      }
      std::memcpy(o + xo, g + r * row_len, static_cast<size_t>(row_len) * sizeof(T));
    }
  });
  return Status::OK();
}

// ---- ConcatGrad and ConcatGradGrad: a block of the concatenation ------------
//
// ConcatGrad copies values[index]'s block out of the joined tensor;
// ConcatGradGrad copies it in, into zeros. Both copy `outer` rows of `len`
// elements, `total` apart on the joined side, starting at `start`.
struct ConcatBlock {
  int64 outer = 1, len = 0, total = 0, start = 0;
};

ConcatBlock ConcatBlockOf(OpKernelContext* ctx, const TensorShape& joined) {
  const auto range = ctx->input_range("values");
  const int index = static_cast<int>(ctx->attr_int("index"));
  const int rank = joined.rank();
  const int axis = NormAxis(ctx->attr_int("axis"), rank);
  ConcatBlock b;
  int64 inner = 1, offset = 0;
  for (int i = range.first; i < range.first + index; ++i) offset += ctx->input(i).dim(axis);
  for (int i = 0; i < axis; ++i) b.outer *= joined.dim(i);
  for (int i = axis + 1; i < rank; ++i) inner *= joined.dim(i);
  b.len = ctx->input(range.first + index).dim(axis) * inner;
  b.total = joined.dim(axis) * inner;
  b.start = offset * inner;
  return b;
}

template <typename T>
Status ConcatGradKernel(OpKernelContext* ctx) {
  const Tensor& grad = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (out->NumElements() == 0) return Status::OK();
  const ConcatBlock b = ConcatBlockOf(ctx, grad.shape());
  const T* g = grad.data<T>() + b.start;
  T* o = out->data<T>();
  ParallelFor(b.outer, b.len, [&](int64 r0, int64 r1) {
    for (int64 r = r0; r < r1; ++r) std::memcpy(o + r * b.len, g + r * b.total, static_cast<size_t>(b.len) * sizeof(T));
  });
  return Status::OK();
}

template <typename T>
Status ConcatGradGradKernel(OpKernelContext* ctx) {
  const Tensor& block = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  ZeroFill(out, sizeof(T));
  if (block.NumElements() == 0) return Status::OK();
  const ConcatBlock b = ConcatBlockOf(ctx, out->shape());
  const T* in = block.data<T>();
  T* o = out->data<T>() + b.start;
  ParallelFor(b.outer, b.len, [&](int64 r0, int64 r1) {
    for (int64 r = r0; r < r1; ++r) std::memcpy(o + r * b.total, in + r * b.len, static_cast<size_t>(b.len) * sizeof(T));
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("SoftmaxGrad", kCPU, DType::kFloat32, SoftmaxGradKernel<float>);
REGISTER_KERNEL("SoftmaxGrad", kCPU, DType::kFloat64, SoftmaxGradKernel<double>);
REGISTER_KERNEL("RmsNormGrad", kCPU, DType::kFloat32, RmsNormGradKernel<float>);
REGISTER_KERNEL("RmsNormGrad", kCPU, DType::kFloat64, RmsNormGradKernel<double>);
REGISTER_KERNEL("ReduceGrad", kCPU, DType::kFloat32, ReduceGradKernel<float>);
REGISTER_KERNEL("ReduceGrad", kCPU, DType::kFloat64, ReduceGradKernel<double>);
REGISTER_KERNEL("ReduceGradGrad", kCPU, DType::kFloat32, ReduceGradGradKernel<float>);
REGISTER_KERNEL("ReduceGradGrad", kCPU, DType::kFloat64, ReduceGradGradKernel<double>);
REGISTER_KERNEL("SliceGrad", kCPU, DType::kFloat32, SliceGradKernel<float>);
REGISTER_KERNEL("SliceGrad", kCPU, DType::kFloat64, SliceGradKernel<double>);
REGISTER_KERNEL("ConcatGrad", kCPU, DType::kFloat32, ConcatGradKernel<float>);
REGISTER_KERNEL("ConcatGrad", kCPU, DType::kFloat64, ConcatGradKernel<double>);
REGISTER_KERNEL("ConcatGradGrad", kCPU, DType::kFloat32, ConcatGradGradKernel<float>);
REGISTER_KERNEL("ConcatGradGrad", kCPU, DType::kFloat64, ConcatGradGradKernel<double>);

}  // namespace opforge
