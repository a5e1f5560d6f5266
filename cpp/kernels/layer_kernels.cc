// Kernels of the training block of nn_ops.cc: Gelu, LayerNorm, Gather,
// sparse softmax cross-entropy, DropoutMask, and their backward ops.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "compiler.h"
#include "elementwise.h"
#include "layer_norm_rows.h"
#include "vector_math.h"

namespace opforge {
namespace {

using int64 = int64_t;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <typename T>
Status GeluKernel(OpKernelContext* ctx) {
  // x/2 erfc(-x/sqrt 2): 1 + erf(x/sqrt 2) would cancel in the negative tail.
  return elementwise::UnaryOp<T>(ctx, [](T x) { return static_cast<T>(x * (0.5 * std::erfc(-x * kSqrtHalf))); }, 20);
}

// float32 (and float16/bfloat16, which widen to it): the vector GELU of
// vector_math.h (simd::GeluErf, relative error <= 2e-6 for |x| < 10, the
// negative tail included), not a double std::erf per element: about 15 % of
// a quantized BERT's time was this op.
template <>
Status GeluKernel<float>(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64 n = y->NumElements();
  const float* in = x.data<float>();
  float* out = y->data<float>();
  const bool stream = n * static_cast<int64>(sizeof(float)) >= vmath::StreamThresholdBytes();
  ParallelFor(n, 20, [&](int64 b, int64 e) { vmath::Unary(vmath::UnaryFn::kGelu, in + b, out + b, e - b, stream); });
  return Status::OK();
}

template <typename T>
Status GeluGradKernel(OpKernelContext* ctx) {
  return elementwise::BinaryOp<T>(
      ctx,
      [](T dy, T x) {
        const double xd = x;
        const double cdf = 0.5 * (1.0 + std::erf(xd * kSqrtHalf));
        return static_cast<T>(dy * (cdf + xd * kInvSqrt2Pi * std::exp(-0.5 * xd * xd)));
      },
      30);
}

// Mean and 1/sqrt(var + eps) of one row, in double. The mean is x[0] plus
// that of x - x[0], so a constant row's is exact (layer_norm_rows_isa.inc).
template <typename T>
void RowMoments(const T* x, int64 d, double eps, double* mean, double* rstd) {
  const double x0 = static_cast<double>(x[0]);
  double s = 0;
  for (int64 i = 0; i < d; ++i) s += static_cast<double>(x[i]) - x0;
  const double m = x0 + s / static_cast<double>(d);
  double q = 0;
  for (int64 i = 0; i < d; ++i) {
    const double c = static_cast<double>(x[i]) - m;
    q += c * c;
  }
  *mean = m;
  *rstd = 1.0 / std::sqrt(q / static_cast<double>(d) + eps);
}

template <typename T>
Status LayerNormKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64 total = x.NumElements();
  const int64 d = x.dim(x.rank() - 1);
  if (total == 0 || d == 0) return Status::OK();
  const double eps = ctx->attr_float("epsilon");
  const T* in = x.data<T>();
  const T* w = ctx->input(1).data<T>();
  const T* b = ctx->input(2).data<T>();
  T* y = out->data<T>();
  ParallelFor(total / d, d * 6, [&](int64 lo, int64 hi) {
    if constexpr (std::is_same_v<T, float>) {  // vector loops per ISA (layer_norm_rows.h)
      layer_norm::Rows(in + lo * d, w, b, y + lo * d, hi - lo, d, eps);
      return;
    }
    for (int64 r = lo; r < hi; ++r) {
      const T* OF_RESTRICT xr = in + r * d;
      T* OF_RESTRICT yr = y + r * d;
      double mean, rstd;
      RowMoments(xr, d, eps, &mean, &rstd);
      const T m = static_cast<T>(mean), s = static_cast<T>(rstd);
      for (int64 i = 0; i < d; ++i) yr[i] = (xr[i] - m) * s * w[i] + b[i];
    }
  });
  return Status::OK();
}

// Sums rows of a [rows, d] product per column into double, for dweight/dbias.
// Parallel over column blocks, so threads never share an accumulator.
template <typename F>
void ColumnSums(int64 rows, int64 d, F term, double* out) {
  constexpr int64 kBlock = 64;
  ParallelFor((d + kBlock - 1) / kBlock, rows * kBlock * 4, [&](int64 lo, int64 hi) {
    for (int64 cb = lo; cb < hi; ++cb) {
      const int64 c0 = cb * kBlock, c1 = std::min(d, c0 + kBlock);
      for (int64 c = c0; c < c1; ++c) out[c] = 0;
      for (int64 r = 0; r < rows; ++r) {
        for (int64 c = c0; c < c1; ++c) out[c] += term(r, c);
      }
    }
  });
}

// LayerNormGrad (center = true); center = false is the RMS-norm form, kept for an RmsNormGrad
// that wants the fused dweight (RmsNorm's backward op lives in grad_ops.cc).
template <typename T, bool kCenter>
Status NormGradKernel(OpKernelContext* ctx) {
  const Tensor& dyt = ctx->input(0);
  const Tensor& x = ctx->input(1);
  const int nout = ctx->num_outputs();
  Tensor* outs[3] = {};
  for (int i = 0; i < nout; ++i) OF_RETURN_IF_ERROR(ctx->allocate_output(i, &outs[i]));
  const int64 total = x.NumElements();
  const int64 d = x.dim(x.rank() - 1);
  for (int i = 1; i < nout; ++i) {
    for (int64 c = 0; c < d; ++c) outs[i]->data<T>()[c] = 0;
  }
  if (total == 0 || d == 0) return Status::OK();
  const int64 rows = total / d;
  const double eps = ctx->attr_float("epsilon");
  const T* xin = x.data<T>();
  const T* dy = dyt.data<T>();
  const T* w = ctx->input(2).data<T>();
  T* dx = outs[0]->data<T>();
  std::vector<double> mean(rows), rstd(rows);
  ParallelFor(rows, d * 10, [&](int64 lo, int64 hi) {
    for (int64 r = lo; r < hi; ++r) {
      const T* xr = xin + r * d;
      const T* gr = dy + r * d;
      double m = 0, s;
      if (kCenter) {
        RowMoments(xr, d, eps, &m, &s);
      } else {
        double q = 0;
        for (int64 i = 0; i < d; ++i) q += static_cast<double>(xr[i]) * xr[i];
        s = 1.0 / std::sqrt(q / static_cast<double>(d) + eps);
      }
      mean[r] = m;
      rstd[r] = s;
      // xhat = (x - m) * s; g = dy * w;
      // dx = s * (g - [mean(g)] - xhat * mean(g * xhat))   ([..] only when centering)
      double sg = 0, sgx = 0;
      for (int64 i = 0; i < d; ++i) {
        const double g = static_cast<double>(gr[i]) * w[i];
        sg += g;
        sgx += g * (static_cast<double>(xr[i]) - m) * s;
      }
      const double mg = kCenter ? sg / static_cast<double>(d) : 0.0;
      const double mgx = sgx / static_cast<double>(d);
      for (int64 i = 0; i < d; ++i) {
        const double g = static_cast<double>(gr[i]) * w[i];
        const double xh = (static_cast<double>(xr[i]) - m) * s;
        dx[r * d + i] = static_cast<T>(s * (g - mg - xh * mgx));
      }
    }
  });
  std::vector<double> acc(d);
  ColumnSums(rows, d, [&](int64 r, int64 c) {
    return static_cast<double>(dy[r * d + c]) * (static_cast<double>(xin[r * d + c]) - mean[r]) * rstd[r];
  }, acc.data());
  for (int64 c = 0; c < d; ++c) outs[1]->data<T>()[c] = static_cast<T>(acc[c]);
  if (kCenter) {
    ColumnSums(rows, d, [&](int64 r, int64 c) { return static_cast<double>(dy[r * d + c]); }, acc.data());
    for (int64 c = 0; c < d; ++c) outs[2]->data<T>()[c] = static_cast<T>(acc[c]);
  }
  return Status::OK();
}

// Every index in [0, rows), else an error naming the first bad one.
template <typename I>
Status CheckIndices(const Tensor& t, int64 rows, const char* arg, const char* what) {
  const I* p = t.data<I>();
  const int64 n = t.NumElements();
  for (int64 i = 0; i < n; ++i) {
    if (p[i] < 0 || p[i] >= rows) {
      return errors::InvalidArgument("argument '", arg, "' has ", static_cast<int64>(p[i]), " at flat position ", i,
                                     ", out of range for ", what, " ", rows, " (valid: 0 to ", rows - 1, ")");
    }
  }
  return Status::OK();
}

template <typename T, typename I>
Status GatherKernel(OpKernelContext* ctx) {
  const Tensor& params = ctx->input(0);
  const Tensor& indices = ctx->input(1);
  const int64 rows = params.dim(0);
  OF_RETURN_IF_ERROR(CheckIndices<I>(indices, rows, "indices", "argument 'params' with rows"));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64 n = indices.NumElements();
  const int64 inner = rows == 0 ? 0 : params.NumElements() / rows;
  if (n == 0 || inner == 0) return Status::OK();
  const T* src = params.data<T>();
  const I* idx = indices.data<I>();
  T* dst = out->data<T>();
  ParallelFor(n, inner, [&](int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) {
      std::memcpy(dst + i * inner, src + static_cast<int64>(idx[i]) * inner, sizeof(T) * inner);
    }
  });
  return Status::OK();
}

template <typename T, typename I>
Status GatherGradKernel(OpKernelContext* ctx) {
  const Tensor& params = ctx->input(0);
  const Tensor& indices = ctx->input(1);
  const int64 rows = params.dim(0);
  OF_RETURN_IF_ERROR(CheckIndices<I>(indices, rows, "indices", "argument 'params' with rows"));
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  T* d = out->data<T>();
  const int64 total = params.NumElements();
  for (int64 i = 0; i < total; ++i) d[i] = 0;
  const int64 inner = rows == 0 ? 0 : total / rows;
  const int64 n = indices.NumElements();
  const I* idx = indices.data<I>();
  const T* dy = ctx->input(2).data<T>();
  // Repeated indices add into one row: parallel over columns, never rows.
  ParallelFor(inner, n, [&](int64 lo, int64 hi) {
    for (int64 i = 0; i < n; ++i) {
      T* OF_RESTRICT row = d + static_cast<int64>(idx[i]) * inner;
      const T* OF_RESTRICT g = dy + i * inner;
      for (int64 c = lo; c < hi; ++c) row[c] += g[c];
    }
  });
  return Status::OK();
}

template <typename T, typename I>
Status SparseXentKernel(OpKernelContext* ctx) {
  const Tensor& f = ctx->input(0);
  const Tensor& labels = ctx->input(1);
  const int64 batch = f.dim(0), classes = f.dim(1);
  OF_RETURN_IF_ERROR(CheckIndices<I>(labels, classes, "labels", "argument 'features' with classes"));
  Tensor *loss = nullptr, *back = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &loss));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &back));
  if (batch == 0) return Status::OK();
  const T* in = f.data<T>();
  const I* lab = labels.data<I>();
  T* l = loss->data<T>();
  T* bp = back->data<T>();
  ParallelFor(batch, classes * 20, [&](int64 lo, int64 hi) {
    for (int64 r = lo; r < hi; ++r) {
      const T* OF_RESTRICT x = in + r * classes;
      T* OF_RESTRICT g = bp + r * classes;
      T m = x[0];
      for (int64 c = 1; c < classes; ++c) m = (x[c] > m || x[c] != x[c]) ? x[c] : m;
      double s = 0;
      for (int64 c = 0; c < classes; ++c) {
        const double e = std::exp(static_cast<double>(x[c]) - m);
        g[c] = static_cast<T>(e);
        s += e;
      }
      const double inv = 1.0 / s;
      for (int64 c = 0; c < classes; ++c) g[c] = static_cast<T>(g[c] * inv);
      const int64 y = static_cast<int64>(lab[r]);
      g[y] -= 1;
      l[r] = static_cast<T>(std::log(s) - (static_cast<double>(x[y]) - m));
    }
  });
  return Status::OK();
}

// splitmix64: a good 64-bit mix, so mask[i] depends only on (seed, i).
inline uint64_t Mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
Status DropoutMaskKernel(OpKernelContext* ctx) {
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const double rate = ctx->attr_float("rate");
  const uint64_t key = Mix(static_cast<uint64_t>(ctx->attr_int("seed")));
  // Keep when the top 53 bits, as a fraction of 2^53, are >= rate.
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(rate * 9007199254740992.0));
  const T keep = static_cast<T>(1.0 / (1.0 - rate));
  T* m = out->data<T>();
  ParallelFor(out->NumElements(), 8, [&](int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) m[i] = (Mix(key ^ static_cast<uint64_t>(i)) >> 11) >= threshold ? keep : T(0);
  });
  return Status::OK();
}

REGISTER_KERNEL("Gelu", kCPU, DType::kFloat32, GeluKernel<float>);
REGISTER_KERNEL("Gelu", kCPU, DType::kFloat64, GeluKernel<double>);
REGISTER_KERNEL("GeluGrad", kCPU, DType::kFloat32, GeluGradKernel<float>);
REGISTER_KERNEL("GeluGrad", kCPU, DType::kFloat64, GeluGradKernel<double>);
REGISTER_KERNEL("LayerNorm", kCPU, DType::kFloat32, LayerNormKernel<float>);
REGISTER_KERNEL("LayerNorm", kCPU, DType::kFloat64, LayerNormKernel<double>);
REGISTER_KERNEL("LayerNormGrad", kCPU, DType::kFloat32, NormGradKernel<float, true>);
REGISTER_KERNEL("LayerNormGrad", kCPU, DType::kFloat64, NormGradKernel<double, true>);
REGISTER_KERNEL("DropoutMask", kCPU, DType::kFloat32, DropoutMaskKernel<float>);
REGISTER_KERNEL("DropoutMask", kCPU, DType::kFloat64, DropoutMaskKernel<double>);

// The kernel dtype is T; the index dtype is dispatched at run time.
template <typename T> Status Gather(OpKernelContext* c) {
  return c->input(1).dtype() == DType::kInt32 ? GatherKernel<T, int32_t>(c) : GatherKernel<T, int64_t>(c);
}
template <typename T> Status GatherGrad(OpKernelContext* c) {
  return c->input(1).dtype() == DType::kInt32 ? GatherGradKernel<T, int32_t>(c) : GatherGradKernel<T, int64_t>(c);
}
template <typename T> Status SparseXent(OpKernelContext* c) {
  return c->input(1).dtype() == DType::kInt32 ? SparseXentKernel<T, int32_t>(c) : SparseXentKernel<T, int64_t>(c);
}

REGISTER_KERNEL("Gather", kCPU, DType::kFloat32, Gather<float>);
REGISTER_KERNEL("Gather", kCPU, DType::kFloat64, Gather<double>);
REGISTER_KERNEL("Gather", kCPU, DType::kInt32, Gather<int32_t>);
REGISTER_KERNEL("Gather", kCPU, DType::kInt64, Gather<int64_t>);
// 8-bit tables: quantize_dynamic's quantized embeddings (Gather, then DequantizeLinear).
REGISTER_KERNEL("Gather", kCPU, DType::kUInt8, Gather<uint8_t>);
REGISTER_KERNEL("Gather", kCPU, DType::kInt8, Gather<int8_t>);
REGISTER_KERNEL("GatherGrad", kCPU, DType::kFloat32, GatherGrad<float>);
REGISTER_KERNEL("GatherGrad", kCPU, DType::kFloat64, GatherGrad<double>);
REGISTER_KERNEL("SparseSoftmaxCrossEntropyWithLogits", kCPU, DType::kFloat32, SparseXent<float>);
REGISTER_KERNEL("SparseSoftmaxCrossEntropyWithLogits", kCPU, DType::kFloat64, SparseXent<double>);

}  // namespace
}  // namespace opforge
