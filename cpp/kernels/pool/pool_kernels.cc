// Pooling kernels, NCHW: one (image, channel) plane per unit of parallel work.
// Windows are clipped to the input; padding never takes part in a max and
// counts in an average's divisor only with count_include_pad.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "../common/plane_taps.h"
#include "max_pool_rows.h"

namespace opforge {
namespace {

using int64 = int64_t;

struct Pool {
  int64 planes, h, w, oh, ow;
  int64 kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

Pool MakePool(const OpKernelContext& ctx, const TensorShape& x, const TensorShape& y) {
  Pool p;
  p.planes = x.dim(0) * x.dim(1), p.h = x.dim(2), p.w = x.dim(3), p.oh = y.dim(2), p.ow = y.dim(3);
  const auto& k = ctx.attr_ints("ksize");
  const auto& s = ctx.attr_ints("strides");
  const auto& pads = ctx.attr_ints("pads");
  p.kh = k[0], p.kw = k[1], p.sh = s[0], p.sw = s[1];
  p.pt = pads[0], p.pl = pads[1], p.pb = pads[2], p.pr = pads[3];
  p.dh = p.dw = 1;
  if (ctx.op().FindAttr("dilations") >= 0) {
    const auto& d = ctx.attr_ints("dilations");
    p.dh = d[0], p.dw = d[1];
  }
  return p;
}

// The flat index in the plane of window (i, j)'s first maximum, or -1 when
// the window has no input pixel.
template <typename T>
inline int64 ArgMaxWindow(const Pool& p, const T* x, int64 i, int64 j, T* best) {
  int64 arg = -1;
  T m = -std::numeric_limits<T>::infinity();
  for (int64 a = 0; a < p.kh; ++a) {
    const int64 ih = i * p.sh - p.pt + a * p.dh;
    if (ih < 0 || ih >= p.h) continue;
    for (int64 b = 0; b < p.kw; ++b) {
      const int64 iw = j * p.sw - p.pl + b * p.dw;
      if (iw < 0 || iw >= p.w) continue;
      const T v = x[ih * p.w + iw];
      if (arg < 0 || v > m || (v != v && m == m)) m = v, arg = ih * p.w + iw;
    }
  }
  *best = m;
  return arg;
}

// Output columns [j0, j1) whose tap at offset `off` lands inside [0, size).
inline void TapRange(int64 off, int64 s, int64 size, int64 out, int64* j0, int64* j1) {
  const int64 lo = off >= 0 ? 0 : (-off + s - 1) / s;
  const int64 hi = size - off <= 0 ? 0 : (size - off + s - 1) / s;
  *j0 = std::min(lo, out);
  *j1 = std::max(*j0, std::min(hi, out));
}

// Forward max pooling (float64 and windows the float32 paths leave: tap by
// tap over whole output rows), NaN winning.
template <typename T>
Status MaxPoolKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const Pool p = MakePool(*ctx, x.shape(), y->shape());
  const T* xd = x.data<T>();
  T* yd = y->data<T>();
  if constexpr (std::is_same_v<T, float>) {
    // float32, vectorized (AVX-512 / AVX2 / baseline): row by row where
    // output rows are a vector wide or more (1.3-2.2x the stride-phased
    // planes at ResNet's and SqueezeNet's 112- and 54-wide pools, one
    // thread) or, at stride 2, 12 wide or more (27 -> 13: 0.095 vs 0.18 ms,
    // 512 planes), else on the stride-phased planes (13 -> 6: 0.041 vs
    // 0.058 ms).
    const pool::MaxPoolGeom mg{p.planes, p.h, p.w, p.oh, p.ow, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pt, p.pl};
    const bool planes = conv::MaxPoolPlanesApplies(p.kh, p.kw, p.sh, p.sw);
    if (pool::MaxPoolRowsApplies(mg) && (p.ow >= 16 || !planes || (p.sw == 2 && p.ow >= 12))) {
      pool::MaxPoolRows(mg, xd, yd);
      return Status::OK();
    }
    if (planes) {
      conv::MaxPoolPlanes(p.planes, p.h, p.w, p.oh, p.ow, p.kh, p.kw, p.sh, p.dh, p.dw, p.pt, p.pl, xd, yd);
      return Status::OK();
    }
  }
  ParallelFor(p.planes, p.oh * p.ow * p.kh * p.kw, [&](int64 b, int64 e) {
    for (int64 u = b; u < e; ++u) {
      const T* xp = xd + u * p.h * p.w;
      T* yp = yd + u * p.oh * p.ow;
      std::fill(yp, yp + p.oh * p.ow, -std::numeric_limits<T>::infinity());
      for (int64 bb = 0; bb < p.kw; ++bb) {
        const int64 offw = bb * p.dw - p.pl;
        int64 j0, j1;
        TapRange(offw, p.sw, p.w, p.ow, &j0, &j1);
        for (int64 i = 0; i < p.oh; ++i) {
          T* yr = yp + i * p.ow;
          for (int64 a = 0; a < p.kh; ++a) {
            const int64 ih = i * p.sh - p.pt + a * p.dh;
            if (ih < 0 || ih >= p.h) continue;
            const T* xr = xp + ih * p.w + offw;
            for (int64 j = j0; j < j1; ++j) {
              const T v = xr[j * p.sw];
              yr[j] = (v > yr[j] || v != v) ? v : yr[j];
            }
          }
        }
      }
    }
  });
  return Status::OK();
}

template <typename T>
Status MaxPoolGradKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& dy = ctx->input(1);
  Tensor* dx = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &dx));
  if (dx->NumElements() == 0) return Status::OK();
  std::memset(dx->raw_data(), 0, dx->TotalBytes());
  if (dy.NumElements() == 0) return Status::OK();
  const Pool p = MakePool(*ctx, x.shape(), dy.shape());
  const T* xd = x.data<T>();
  const T* dyd = dy.data<T>();
  T* dxd = dx->data<T>();
  ParallelFor(p.planes, p.oh * p.ow * p.kh * p.kw, [&](int64 b, int64 e) {
    for (int64 u = b; u < e; ++u) {
      const T* xp = xd + u * p.h * p.w;
      const T* gp = dyd + u * p.oh * p.ow;
      T* dp = dxd + u * p.h * p.w;
      for (int64 i = 0; i < p.oh; ++i) {
        for (int64 j = 0; j < p.ow; ++j) {
          T best;
          const int64 arg = ArgMaxWindow(p, xp, i, j, &best);
          if (arg >= 0) dp[arg] += gp[i * p.ow + j];
        }
      }
    }
  });
  return Status::OK();
}

// Window (i, j)'s clipped rows [h0, h1), columns [w0, w1) and divisor.
struct Window {
  int64 h0, h1, w0, w1;
  double inv;
};

inline Window AvgWindow(const Pool& p, int64 i, int64 j, bool include_pad) {
  Window win;
  const int64 hs = i * p.sh - p.pt, ws = j * p.sw - p.pl;
  const int64 he = std::min(hs + p.kh, p.h + p.pb), we = std::min(ws + p.kw, p.w + p.pr);
  win.h0 = std::max<int64>(hs, 0), win.w0 = std::max<int64>(ws, 0);
  win.h1 = std::min(he, p.h), win.w1 = std::min(we, p.w);
  const int64 rows = std::max<int64>(0, win.h1 - win.h0), cols = std::max<int64>(0, win.w1 - win.w0);
  const int64 count = include_pad ? (he - hs) * (we - ws) : rows * cols;
  // A window of padding only (pads < kernel leave one only on an empty input):
  // 0 / 0, NaN, as numpy's mean of nothing; 0 would be a silent made-up value.
  win.inv = count > 0 ? 1.0 / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
  return win;
}

template <typename T>
Status AvgPoolKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const Pool p = MakePool(*ctx, x.shape(), y->shape());
  const bool inc = ctx->attr_bool("count_include_pad");
  const T* xd = x.data<T>();
  T* yd = y->data<T>();
  ParallelFor(p.planes, p.oh * p.ow * p.kh * p.kw, [&](int64 b, int64 e) {
    for (int64 u = b; u < e; ++u) {
      const T* xp = xd + u * p.h * p.w;
      T* yp = yd + u * p.oh * p.ow;
      for (int64 i = 0; i < p.oh; ++i) {
        for (int64 j = 0; j < p.ow; ++j) {
          const Window win = AvgWindow(p, i, j, inc);
          T s = 0;
          for (int64 r = win.h0; r < win.h1; ++r) {
            for (int64 c = win.w0; c < win.w1; ++c) s += xp[r * p.w + c];
          }
          yp[i * p.ow + j] = static_cast<T>(s * win.inv);
        }
      }
    }
  });
  return Status::OK();
}

template <typename T>
Status AvgPoolGradKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& dy = ctx->input(1);
  Tensor* dx = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &dx));
  if (dx->NumElements() == 0) return Status::OK();
  std::memset(dx->raw_data(), 0, dx->TotalBytes());
  if (dy.NumElements() == 0) return Status::OK();
  const Pool p = MakePool(*ctx, x.shape(), dy.shape());
  const bool inc = ctx->attr_bool("count_include_pad");
  const T* dyd = dy.data<T>();
  T* dxd = dx->data<T>();
  ParallelFor(p.planes, p.oh * p.ow * p.kh * p.kw, [&](int64 b, int64 e) {
    for (int64 u = b; u < e; ++u) {
      const T* gp = dyd + u * p.oh * p.ow;
      T* dp = dxd + u * p.h * p.w;
      for (int64 i = 0; i < p.oh; ++i) {
        for (int64 j = 0; j < p.ow; ++j) {
          const Window win = AvgWindow(p, i, j, inc);
          const T g = static_cast<T>(gp[i * p.ow + j] * win.inv);
          for (int64 r = win.h0; r < win.h1; ++r) {
            for (int64 c = win.w0; c < win.w1; ++c) dp[r * p.w + c] += g;
          }
        }
      }
    }
  });
  return Status::OK();
}

// Adaptive pooling: window i covers [floor(i * in / out), ceil((i + 1) * in / out)).
template <typename T, bool kGrad>
Status AdaptiveKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (out->NumElements() == 0) return Status::OK();
  if (kGrad) std::memset(out->raw_data(), 0, out->TotalBytes());
  const auto& os = ctx->attr_ints("output_size");
  const int64 planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3), oh = os[0], ow = os[1];
  if (planes == 0) return Status::OK();
  const T* src = kGrad ? ctx->input(1).data<T>() : x.data<T>();
  T* dst = out->data<T>();
  ParallelFor(planes, h * w + oh * ow, [&](int64 b, int64 e) {
    for (int64 u = b; u < e; ++u) {
      for (int64 i = 0; i < oh; ++i) {
        const int64 h0 = i * h / oh, h1 = ((i + 1) * h + oh - 1) / oh;
        for (int64 j = 0; j < ow; ++j) {
          const int64 w0 = j * w / ow, w1 = ((j + 1) * w + ow - 1) / ow;
          const double inv = 1.0 / static_cast<double>((h1 - h0) * (w1 - w0));
          if (kGrad) {
            const T g = static_cast<T>(src[u * oh * ow + i * ow + j] * inv);
            T* dp = dst + u * h * w;
            for (int64 r = h0; r < h1; ++r) {
              for (int64 c = w0; c < w1; ++c) dp[r * w + c] += g;
            }
          } else {
            const T* xp = src + u * h * w;
            T s = 0;
            for (int64 r = h0; r < h1; ++r) {
              for (int64 c = w0; c < w1; ++c) s += xp[r * w + c];
            }
            dst[u * oh * ow + i * ow + j] = static_cast<T>(s * inv);
          }
        }
      }
    }
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("MaxPool2D", kCPU, DType::kFloat32, MaxPoolKernel<float>);
REGISTER_KERNEL("MaxPool2D", kCPU, DType::kFloat64, MaxPoolKernel<double>);
REGISTER_KERNEL("MaxPool2DGrad", kCPU, DType::kFloat32, MaxPoolGradKernel<float>);
REGISTER_KERNEL("MaxPool2DGrad", kCPU, DType::kFloat64, MaxPoolGradKernel<double>);
REGISTER_KERNEL("AvgPool2D", kCPU, DType::kFloat32, AvgPoolKernel<float>);
REGISTER_KERNEL("AvgPool2D", kCPU, DType::kFloat64, AvgPoolKernel<double>);
REGISTER_KERNEL("AvgPool2DGrad", kCPU, DType::kFloat32, AvgPoolGradKernel<float>);
REGISTER_KERNEL("AvgPool2DGrad", kCPU, DType::kFloat64, AvgPoolGradKernel<double>);
REGISTER_KERNEL("AdaptiveAvgPool2D", kCPU, DType::kFloat32, AdaptiveKernel<float, false>);
REGISTER_KERNEL("AdaptiveAvgPool2D", kCPU, DType::kFloat64, AdaptiveKernel<double, false>);
REGISTER_KERNEL("AdaptiveAvgPool2DGrad", kCPU, DType::kFloat32, AdaptiveKernel<float, true>);
REGISTER_KERNEL("AdaptiveAvgPool2DGrad", kCPU, DType::kFloat64, AdaptiveKernel<double, true>);

}  // namespace opforge
