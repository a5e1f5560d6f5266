// ResizeBilinear and its backward op, NCHW: the taps (two source indices and
// a weight) of each output row and column are computed once, then every
// (image, channel) plane is one unit of parallel work.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

using int64 = int64_t;

struct Tap {
  int64 i0, i1;
  double w;  // weight of i1
};

std::vector<Tap> Taps(const std::string& mode, int64 in, int64 out, double scale) {
  std::vector<Tap> taps(out);
  for (int64 o = 0; o < out; ++o) {
    double u;
    if (mode == "align_corners") {
      u = out == 1 ? 0.0 : static_cast<double>(o) * (in - 1) / (out - 1);
    } else if (mode == "asymmetric") {
      u = o / scale;
    } else if (mode == "pytorch_half_pixel" && out == 1) {
      u = 0.0;
    } else {
      u = (o + 0.5) / scale - 0.5;
    }
    u = std::min(std::max(u, 0.0), static_cast<double>(in - 1));
    const int64 i0 = static_cast<int64>(std::floor(u));
    taps[o] = {i0, std::min(i0 + 1, in - 1), u - i0};
  }
  return taps;
}

struct Plan {
  int64 planes, h, w, oh, ow;
  std::vector<Tap> rows, cols;
};

Plan MakePlan(const OpKernelContext& ctx, const TensorShape& x) {
  Plan p;
  p.planes = x.dim(0) * x.dim(1), p.h = x.dim(2), p.w = x.dim(3);
  const auto& size = ctx.attr_ints("size");
  const auto& scales = ctx.attr("scales").list_f;
  const std::string& mode = ctx.attr("coordinate_mode").s;
  p.oh = size[0], p.ow = size[1];
  const double sh = scales.empty() ? static_cast<double>(p.oh) / p.h : scales[0];
  const double sw = scales.empty() ? static_cast<double>(p.ow) / p.w : scales[1];
  p.rows = Taps(mode, p.h, p.oh, sh);
  p.cols = Taps(mode, p.w, p.ow, sw);
  return p;
}

template <typename T>
Status ResizeBilinearKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const Plan p = MakePlan(*ctx, x.shape());
  const T* xd = x.data<T>();
  T* yd = y->data<T>();
  ParallelFor(p.planes, p.oh * p.ow * 6, [&](int64 b, int64 e) {
    std::vector<T> top(p.ow), bottom(p.ow);
    for (int64 u = b; u < e; ++u) {
      const T* xp = xd + u * p.h * p.w;
      T* yp = yd + u * p.oh * p.ow;
      for (int64 i = 0; i < p.oh; ++i) {
        const Tap& r = p.rows[i];
        const T* x0 = xp + r.i0 * p.w;
        const T* x1 = xp + r.i1 * p.w;
        const T wr = static_cast<T>(r.w);
        T* out = yp + i * p.ow;
        for (int64 j = 0; j < p.ow; ++j) {
          const Tap& c = p.cols[j];
          const T wc = static_cast<T>(c.w);
          const T t = x0[c.i0] + wc * (x0[c.i1] - x0[c.i0]);
          const T d = x1[c.i0] + wc * (x1[c.i1] - x1[c.i0]);
          out[j] = t + wr * (d - t);
        }
      }
    }
  });
  return Status::OK();
}

template <typename T>
Status ResizeBilinearGradKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& dy = ctx->input(1);
  Tensor* dx = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &dx));
  if (dx->NumElements() == 0) return Status::OK();
  T* dxd = dx->data<T>();
  std::memset(dxd, 0, sizeof(T) * dx->NumElements());
  const Plan p = MakePlan(*ctx, x.shape());
  const T* dyd = dy.data<T>();
  ParallelFor(p.planes, p.oh * p.ow * 8, [&](int64 b, int64 e) {
    for (int64 u = b; u < e; ++u) {
      T* dxp = dxd + u * p.h * p.w;
      const T* g = dyd + u * p.oh * p.ow;
      for (int64 i = 0; i < p.oh; ++i) {
        const Tap& r = p.rows[i];
        T* x0 = dxp + r.i0 * p.w;
        T* x1 = dxp + r.i1 * p.w;
        const T wr = static_cast<T>(r.w);
        for (int64 j = 0; j < p.ow; ++j) {
          const Tap& c = p.cols[j];
          const T wc = static_cast<T>(c.w);
          const T v = g[i * p.ow + j];
          const T vt = v * (1 - wr), vb = v * wr;
          x0[c.i0] += vt * (1 - wc);
          x0[c.i1] += vt * wc;
          x1[c.i0] += vb * (1 - wc);
          x1[c.i1] += vb * wc;
        }
      }
    }
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("ResizeBilinear", kCPU, DType::kFloat32, ResizeBilinearKernel<float>);
REGISTER_KERNEL("ResizeBilinear", kCPU, DType::kFloat64, ResizeBilinearKernel<double>);
REGISTER_KERNEL("ResizeBilinearGrad", kCPU, DType::kFloat32, ResizeBilinearGradKernel<float>);
REGISTER_KERNEL("ResizeBilinearGrad", kCPU, DType::kFloat64, ResizeBilinearGradKernel<double>);

}  // namespace opforge
