// Kernels of ApplyRotaryEmbedding (cpp/ops/attention_ops.cc): one pass over
// x's rows of D values; the cos/sin row of each comes from broadcast strides
// (0 over the dims they repeat along).
#include <cstdint>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

// Strides of c over x's leading dims (0 where c has size 1 or no dim).
std::vector<int64_t> RowStrides(const Tensor& x, const Tensor& c) {
  const int r = x.rank(), rc = c.rank();
  std::vector<int64_t> st(r > 0 ? r - 1 : 0, 0);
  int64_t stride = c.dim(rc - 1);
  for (int i = r - 2; i >= 0; --i) {
    const int ci = i - (r - rc);
    if (ci < 0) break;
    if (c.dim(ci) != 1) st[i] = stride;
    stride *= c.dim(ci);
  }
  return st;
}

template <typename T>
Status RotaryKernel(OpKernelContext* ctx) {
  const Tensor &x = ctx->input(0), &cos_t = ctx->input(1), &sin_t = ctx->input(2);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int r = x.rank();
  const int64_t d = x.dim(r - 1), h = d / 2;
  if (d == 0 || x.NumElements() == 0) return Status::OK();
  const int64_t rows = x.NumElements() / d;
  const std::vector<int64_t> cs = RowStrides(x, cos_t), ss = RowStrides(x, sin_t);
  std::vector<int64_t> dims(r - 1);
  for (int i = 0; i < r - 1; ++i) dims[i] = x.dim(i);
  const T *xp = x.data<T>(), *cp = cos_t.data<T>(), *sp = sin_t.data<T>();
  T* yp = out->data<T>();
  ParallelFor(rows, d * 4, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t co = 0, so = 0;
      for (int64_t i = r - 2, rest = row; i >= 0; --i) {
        const int64_t idx = rest % dims[i];
        rest /= dims[i];
        co += idx * cs[i];
        so += idx * ss[i];
      }
      const T *xi = xp + row * d, *c = cp + co, *s = sp + so;
      T* yi = yp + row * d;
      for (int64_t j = 0; j < h; ++j) yi[j] = xi[j] * c[j] - xi[j + h] * s[j];
      for (int64_t j = h; j < d; ++j) yi[j] = xi[j] * c[j] + xi[j - h] * s[j];
    }
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("ApplyRotaryEmbedding", kCPU, DType::kFloat32, RotaryKernel<float>);
REGISTER_KERNEL("ApplyRotaryEmbedding", kCPU, DType::kFloat64, RotaryKernel<double>);

}  // namespace opforge
