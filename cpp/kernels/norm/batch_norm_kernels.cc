// BatchNorm and BatchNormGrad over axis 1 of [N, C, S...]: one channel per
// unit of parallel work; a channel is N runs of S contiguous elements.
// Statistics and reductions accumulate in double.
#include <cmath>
#include <cstdint>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

using int64 = int64_t;

struct Layout {
  int64 n, c, s;  // x viewed as [n, c, s]
  int64 m() const { return n * s; }
};

Layout MakeLayout(const TensorShape& x) {
  Layout l{x.dim(0), x.dim(1), 1};
  for (int i = 2; i < x.rank(); ++i) l.s *= x.dim(i);
  return l;
}

// Calls fn(offset, length) for each contiguous run of channel c.
template <typename F>
inline void ForRuns(const Layout& l, int64 c, F&& fn) {
  for (int64 i = 0; i < l.n; ++i) fn((i * l.c + c) * l.s, l.s);
}

template <typename T>
Status BatchNormKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor *y = nullptr, *bm = nullptr, *bv = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &bm));
  OF_RETURN_IF_ERROR(ctx->allocate_output(2, &bv));
  const Layout l = MakeLayout(x.shape());
  const T* xd = x.data<T>();
  const T* scale = ctx->input(1).data<T>();
  const T* offset = ctx->input(2).data<T>();
  const T* mean = ctx->input(3).data<T>();
  const T* var = ctx->input(4).data<T>();
  T* yd = y->data<T>();
  T* bmd = bm->data<T>();
  T* bvd = bv->data<T>();
  const double eps = ctx->attr_float("epsilon");
  const bool training = ctx->attr_bool("training");
  ParallelFor(l.c, l.m() * (training ? 4 : 2), [&](int64 b, int64 e) {
    for (int64 c = b; c < e; ++c) {
      double m = mean[c], v = var[c];
      if (training) {
        // The mean of x - x0 plus x0 (x0: the channel's first element), so a
        // constant channel's mean is exact and its variance 0, as numpy's.
        const double x0 = l.m() > 0 ? static_cast<double>(xd[c * l.s]) : 0.0;
        double sum = 0, sq = 0;
        ForRuns(l, c, [&](int64 o, int64 len) {
          for (int64 j = 0; j < len; ++j) sum += xd[o + j] - x0;
        });
        m = l.m() > 0 ? x0 + sum / l.m() : 0.0;
        ForRuns(l, c, [&](int64 o, int64 len) {
          for (int64 j = 0; j < len; ++j) {
            const double d = xd[o + j] - m;
            sq += d * d;
          }
        });
        v = l.m() > 0 ? sq / l.m() : 0.0;
      }
      bmd[c] = static_cast<T>(m);
      bvd[c] = static_cast<T>(v);
      const double k = scale[c] / std::sqrt(v + eps);
      // (x - m) k + offset, not x k + (offset - m k): k may be inf (v + epsilon == 0).
      const T kt = static_cast<T>(k), mt = static_cast<T>(m), ot = offset[c];
      ForRuns(l, c, [&](int64 o, int64 len) {
        for (int64 j = 0; j < len; ++j) yd[o + j] = (xd[o + j] - mt) * kt + ot;
      });
    }
  });
  return Status::OK();
}

template <typename T>
Status BatchNormGradKernel(OpKernelContext* ctx) {
  const Tensor& dy = ctx->input(0);
  const Tensor& x = ctx->input(1);
  Tensor* out[5];
  for (int i = 0; i < 5; ++i) OF_RETURN_IF_ERROR(ctx->allocate_output(i, &out[i]));
  const Layout l = MakeLayout(x.shape());
  const T* dyd = dy.data<T>();
  const T* xd = x.data<T>();
  const T* scale = ctx->input(2).data<T>();
  const T* mean = ctx->input(3).data<T>();
  const T* var = ctx->input(4).data<T>();
  const T* dbm = ctx->input(5).data<T>();
  const T* dbv = ctx->input(6).data<T>();
  T* dx = out[0]->data<T>();
  T *dscale = out[1]->data<T>(), *doffset = out[2]->data<T>(), *dmean = out[3]->data<T>(),
    *dvar = out[4]->data<T>();
  const double eps = ctx->attr_float("epsilon");
  const bool training = ctx->attr_bool("training");
  const double M = static_cast<double>(l.m());
  ParallelFor(l.c, l.m() * 4, [&](int64 b, int64 e) {
    for (int64 c = b; c < e; ++c) {
      const double m = mean[c], r = 1.0 / std::sqrt(static_cast<double>(var[c]) + eps);
      double sdy = 0, sdyc = 0;  // sum(dy), sum(dy (x - m))
      ForRuns(l, c, [&](int64 o, int64 len) {
        for (int64 j = 0; j < len; ++j) {
          sdy += dyd[o + j];
          sdyc += dyd[o + j] * (xd[o + j] - m);
        }
      });
      dscale[c] = static_cast<T>(sdyc * r);
      doffset[c] = static_cast<T>(sdy);
      const double sr = scale[c] * r;
      if (training) {
        dmean[c] = dvar[c] = T(0);
        if (M == 0) continue;
        // dx = sr (dy - sdy / M - (x - m) r^2 sdyc / M) + dbm / M + 2 dbv (x - m) / M
        const double a = sr, cx = 2.0 * dbv[c] / M - sr * r * r * sdyc / M;
        const double c0 = dbm[c] / M - sr * sdy / M - cx * m;
        const T at = static_cast<T>(a), cxt = static_cast<T>(cx), c0t = static_cast<T>(c0);
        ForRuns(l, c, [&](int64 o, int64 len) {
          for (int64 j = 0; j < len; ++j) dx[o + j] = at * dyd[o + j] + cxt * xd[o + j] + c0t;
        });
      } else {
        dmean[c] = static_cast<T>(dbm[c] - sr * sdy);
        dvar[c] = static_cast<T>(dbv[c] - 0.5 * sr * r * r * sdyc);
        const T st = static_cast<T>(sr);
        ForRuns(l, c, [&](int64 o, int64 len) {
          for (int64 j = 0; j < len; ++j) dx[o + j] = dyd[o + j] * st;
        });
      }
    }
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("BatchNorm", kCPU, DType::kFloat32, BatchNormKernel<float>);
REGISTER_KERNEL("BatchNorm", kCPU, DType::kFloat64, BatchNormKernel<double>);
REGISTER_KERNEL("BatchNormGrad", kCPU, DType::kFloat32, BatchNormGradKernel<float>);
REGISTER_KERNEL("BatchNormGrad", kCPU, DType::kFloat64, BatchNormGradKernel<double>);

}  // namespace opforge
