// Conv2D and its backward ops, lowered onto GEMM per (image, group):
//   forward        y_g  [og, P] = W_g [og, K] * col [K, P]
//   input grad     col  [K, P]  = W_g^T * dy_g, scattered back by col2im
//   filter grad    dW_g [og, K] = sum over images of dy_g * col^T
// with K = cg * kh * kw and P = oh * ow. A pointwise convolution skips
// im2col (x is its own column matrix); depthwise runs a direct kernel.
// When there are at least as many (image, group) items as threads they run
// in parallel, one single-threaded GEMM each; otherwise each GEMM is threaded.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <type_traits>
#include <string>
#include <mutex>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "conv_backprop_batched.h"
#include "conv_backprop_filter_winograd.h"
#include "conv_gemm.h"
#include "conv_geometry.h"
#include "depthwise.h"
#include "im2col.h"
#include "winograd.h"

namespace opforge {
namespace conv {
namespace {

using int64 = int64_t;

// Runs fn(item, col, in_worker) over n*groups items, each with a column
// buffer of `col_size` elements of its own.
template <typename T, typename F>
void ForEachItem(const Geometry& g, int64 col_size, int64 cost, F&& fn) {
  const int64 items = g.n * g.groups;
  if (items > 1 && items >= NumIntraOpThreads()) {
    ParallelFor(items, cost, [&](int64 b, int64 e) {
      ScratchBuffer<T> col(col_size);
      for (int64 u = b; u < e; ++u) fn(u, col.data(), true);
    });
  } else {
    ScratchBuffer<T> col(col_size);
    for (int64 u = 0; u < items; ++u) fn(u, col.data(), false);
  }
}

// bias + activation over `rows` rows of `p` outputs (the paths without a
// GEMM epilogue: float64, depthwise).
template <typename T>
void BiasAct(const EpiOf<T>& e, T* y, int64 row0, int64 rows, int64 p) {
  if constexpr (std::is_same_v<T, float>) {
    BiasActRows(e.act, y, e.bias != nullptr ? e.bias + row0 : nullptr, rows, p);
    return;
  }
  for (int64 r = 0; r < rows; ++r) {
    T* v = y + r * p;
    if (e.bias != nullptr) {
      const T b = e.bias[row0 + r];
      for (int64 j = 0; j < p; ++j) v[j] += b;
    }
    switch (e.act) {
      case Act::kRelu:
        for (int64 j = 0; j < p; ++j) v[j] = v[j] > T(0) ? v[j] : T(0);
        break;
      case Act::kSigmoid:
        for (int64 j = 0; j < p; ++j) v[j] = T(1) / (T(1) + std::exp(-v[j]));
        break;
      case Act::kSilu:
        for (int64 j = 0; j < p; ++j) v[j] = v[j] / (T(1) + std::exp(-v[j]));
        break;
      case Act::kHardSwish:
        for (int64 j = 0; j < p; ++j) v[j] = v[j] * std::min(std::max(v[j] * T(1.0 / 6) + T(0.5), T(0)), T(1));
        break;
      case Act::kNone:
        break;
    }
  }
}

// Small outputs in a batch (ResNet's 14x14 and 7x7 stages): one GEMM over
// the column matrices of all images side by side, [K, n * P], instead of one
// per image, each of which packed the whole filter again for a few dozen
// columns; the [O, n * P] product is then copied out image by image.
constexpr int64 kBatchedPixels = 256;
constexpr int64 kBatchedColumnElems = int64{8} << 20;  // 32 MiB of float32 columns at most

template <typename T>
void BatchedForward(const Geometry& g, const T* xd, const T* fd, T* yd, const EpiOf<T>& e) {
  const int64 K = g.k(), P = g.p(), NP = g.n * P;
  ScratchBuffer<T> col(K * NP), prod(g.o * NP);
  const bool pw = g.pointwise();
  // Cost per unit: K / c (one group) as kh * kw, since c may be 0.
  ParallelFor(g.n * g.c, g.kh * g.kw * P, [&](int64 b, int64 end) {
    for (int64 u = b; u < end; ++u) {
      const int64 n = u / g.c, c = u % g.c;
      const T* xc = xd + n * g.c * g.h * g.w;
      T* dst = col.data() + n * P;
      if (pw) {
        std::memcpy(dst + c * NP, xc + c * P, sizeof(T) * P);
      } else {
        Im2ColRange(g, xc, dst, c, c + 1, NP);
      }
    }
  });
  EpiOf<T> in_gemm = e, after;
  if (e.act == Act::kHardSwish) in_gemm.act = Act::kNone, after.act = Act::kHardSwish;
  if (!GemmEpilogue<T>(false, false, g.o, NP, K, fd, K, col.data(), NP, prod.data(), NP, false, in_gemm, 0)) {
    after = e;
  }
  ParallelFor(g.n * g.o, P * (after.empty() ? 1 : 4), [&](int64 b, int64 end) {
    for (int64 u = b; u < end; ++u) {
      const int64 n = u / g.o, o = u % g.o;
      T* yo = yd + u * P;
      std::memcpy(yo, prod.data() + o * NP + n * P, sizeof(T) * P);
      if (!after.empty()) BiasAct(after, yo, o, 1, P);
    }
  });
}

// y = act(Conv2D(x, f) + bias); `e` empty for a plain Conv2D.
template <typename T>
void Forward(const Geometry& g, const T* xd, const T* fd, T* yd, const EpiOf<T>& e) {
  const int64 K = g.k(), P = g.p();
  if constexpr (std::is_same_v<T, float>) {
    if (g.groups == g.c && g.groups > 1 && DepthwiseFastPath(g)) {
      DepthwiseForward(g, xd, fd, e.bias, e.act, yd);
      return;
    }
    if (WinogradApplies(g)) {
      WinogradForward(g, xd, fd, e.bias, e.act, yd, false);
      return;
    }
  }
  if (g.depthwise()) {
    ParallelFor(g.n * g.c, P * g.kh * g.kw, [&](int64 b, int64 end) {
      for (int64 u = b; u < end; ++u) {
        DepthwiseChannel(g, xd + u * g.h * g.w, fd + (u % g.c) * g.kh * g.kw, yd + u * P,
                         e.bias != nullptr ? e.bias[u % g.c] : T(0));
        if (e.act != Act::kNone) {
          EpiOf<T> act_only;
          act_only.act = e.act;
          BiasAct(act_only, yd + u * P, 0, 1, P);
        }
      }
    });
    return;
  }
  const bool pw = g.pointwise();
  if (g.groups == 1 && g.n > 1 && P < kBatchedPixels && K * g.n * P <= kBatchedColumnElems) {
    BatchedForward(g, xd, fd, yd, e);
    return;
  }
  ForEachItem<T>(g, pw ? 0 : K * P, g.og * P * K, [&](int64 u, T* col, bool in_worker) {
    const int64 n = u / g.groups, gi = u % g.groups;
    const T* xg = xd + (n * g.c + gi * g.cg) * g.h * g.w;
    T* yg = yd + (n * g.o + gi * g.og) * P;
    if (!pw) Im2Col(g, xg, col, !in_worker);
    // The GEMM epilogue has no hard-swish: the bias goes in it, the
    // activation runs after.
    EpiOf<T> in_gemm = e, after;
    if (e.act == Act::kHardSwish) in_gemm.act = Act::kNone, after.act = Act::kHardSwish;
    if (!GemmEpilogue<T>(false, false, g.og, P, K, fd + gi * g.og * K, K, pw ? xg : col, P, yg, P, in_worker,
                         in_gemm, gi * g.og)) {
      after = e;
    }
    if (!after.empty()) BiasAct(after, yg, gi * g.og, g.og, P);
  });
}

template <typename T>
Status Conv2DKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& f = ctx->input(1);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  Forward<T>(MakeGeometry(*ctx, x.shape(), f.shape(), y->shape()), x.data<T>(), f.data<T>(), y->data<T>(), EpiOf<T>());
  return Status::OK();
}

template <typename T>
Status FusedConv2DKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& f = ctx->input(1);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  EpiOf<T> e;
  e.bias = ctx->input(2).data<T>();
  const std::string& act = ctx->attr("activation").s;
  e.act = act == "relu"        ? Act::kRelu
          : act == "sigmoid"   ? Act::kSigmoid
          : act == "silu"      ? Act::kSilu
          : act == "hardswish" ? Act::kHardSwish
                               : Act::kNone;
  Forward<T>(MakeGeometry(*ctx, x.shape(), f.shape(), y->shape()), x.data<T>(), f.data<T>(), y->data<T>(), e);
  return Status::OK();
}

// dx = col2im(W^T dy) for Geometry g (dx overwritten).
// The input gradient of a 3x3 stride-1 convolution as a forward one: dy
// convolved with the filter rotated by 180 degrees and transposed, pads
// 2 - pad (negative ones just skip rows of dy).
inline Geometry TransposedGeometry(const Geometry& g) {
  Geometry t = g;
  t.c = g.o, t.h = g.oh, t.w = g.ow, t.o = g.c, t.oh = g.h, t.ow = g.w;
  t.pt = g.kh - 1 - g.pt, t.pl = g.kw - 1 - g.pl;
  t.cg = t.c / t.groups, t.og = t.o / t.groups;
  return t;
}

template <typename T>
void BackpropInput(const Geometry& g, const T* fd, const T* dyd, T* dxd) {
  if constexpr (std::is_same_v<T, float>) {
    const Geometry t = TransposedGeometry(g);
    if (WinogradApplies(t)) {
      WinogradForward(t, dyd, fd, nullptr, Act::kNone, dxd, true);
      return;
    }
  }
  if (BatchedBackpropApplies(g)) {
    BatchedBackpropInput(g, fd, dyd, dxd);
    return;
  }
  std::memset(dxd, 0, sizeof(T) * g.n * g.c * g.h * g.w);
  const int64 K = g.k(), P = g.p();
  if (P == 0) return;
  const bool pw = g.pointwise();
  ForEachItem<T>(g, pw ? 0 : K * P, g.og * P * K, [&](int64 u, T* col, bool in_worker) {
    const int64 n = u / g.groups, gi = u % g.groups;
    const T* dyg = dyd + (n * g.o + gi * g.og) * P;
    T* dxg = dxd + (n * g.c + gi * g.cg) * g.h * g.w;
    Gemm<T>(true, false, K, P, g.og, fd + gi * g.og * K, K, dyg, P, pw ? dxg : col, P, in_worker);
    if (!pw) Col2Im(g, col, dxg, !in_worker);
  });
}

template <typename T>
Status Conv2DBackpropInputKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& f = ctx->input(1);
  const Tensor& dy = ctx->input(2);
  Tensor* dx = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &dx));
  if (dx->NumElements() == 0) return Status::OK();
  BackpropInput<T>(MakeGeometry(*ctx, x.shape(), f.shape(), dy.shape()), f.data<T>(), dy.data<T>(), dx->data<T>());
  return Status::OK();
}

// ConvTranspose2D(x, filter) is Conv2D's input gradient with x as dy and y
// as the convolution's input.
template <typename T>
Status ConvTranspose2DKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& f = ctx->input(1);
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  BackpropInput<T>(MakeGeometry(*ctx, y->shape(), f.shape(), x.shape()), f.data<T>(), x.data<T>(), y->data<T>());
  return Status::OK();
}

template <typename T>
Status Conv2DBackpropFilterKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& f = ctx->input(1);
  const Tensor& dy = ctx->input(2);
  Tensor* df = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &df));
  if (df->NumElements() == 0) return Status::OK();
  T* dfd = df->data<T>();
  const int64 total = df->NumElements();
  std::memset(dfd, 0, sizeof(T) * total);
  const Geometry g = MakeGeometry(*ctx, x.shape(), f.shape(), dy.shape());
  if (dy.NumElements() == 0) return Status::OK();
  const T* xd = x.data<T>();
  const T* dyd = dy.data<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (WinogradBackpropFilterApplies(g)) {
      WinogradBackpropFilter(g, xd, dyd, dfd);
      return Status::OK();
    }
  }
  if (BatchedBackpropApplies(g)) {
    BatchedBackpropFilter(g, xd, dyd, dfd);
    return Status::OK();
  }
  const int64 K = g.k(), P = g.p();
  const bool pw = g.pointwise();
  // One image's contribution to group gi's rows of an accumulator.
  auto one = [&](int64 u, T* col, T* tmp, T* acc, bool in_worker) {
    const int64 n = u / g.groups, gi = u % g.groups;
    const T* xg = xd + (n * g.c + gi * g.cg) * g.h * g.w;
    if (!pw) Im2Col(g, xg, col, !in_worker);
    T* a = acc + gi * g.og * K;
    // One image: its product is the gradient, written in place.
    Gemm<T>(false, true, g.og, K, P, dyd + (n * g.o + gi * g.og) * P, P, pw ? xg : col, P, g.n == 1 ? a : tmp, K,
            in_worker);
    if (g.n > 1) {
      for (int64 i = 0; i < g.og * K; ++i) a[i] += tmp[i];
    }
  };
  const int64 items = g.n * g.groups;
  const int64 col_size = pw ? 0 : K * P;
  if (items > 1 && items >= NumIntraOpThreads()) {
    std::mutex mu;
    ParallelFor(items, g.og * P * K, [&](int64 b, int64 e) {
      ScratchBuffer<T> col(col_size), tmp(g.og * K);
      std::vector<T> acc(static_cast<size_t>(total), T(0));
      for (int64 u = b; u < e; ++u) one(u, col.data(), tmp.data(), acc.data(), true);
      std::lock_guard<std::mutex> lock(mu);
      for (int64 i = 0; i < total; ++i) dfd[i] += acc[i];
    });
  } else {
    ScratchBuffer<T> col(col_size), tmp(g.og * K);
    for (int64 u = 0; u < items; ++u) one(u, col.data(), tmp.data(), dfd, false);
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("Conv2D", kCPU, DType::kFloat32, Conv2DKernel<float>);
REGISTER_KERNEL("Conv2D", kCPU, DType::kFloat64, Conv2DKernel<double>);
REGISTER_KERNEL("Conv2DBackpropInput", kCPU, DType::kFloat32, Conv2DBackpropInputKernel<float>);
REGISTER_KERNEL("Conv2DBackpropInput", kCPU, DType::kFloat64, Conv2DBackpropInputKernel<double>);
REGISTER_KERNEL("FusedConv2D", kCPU, DType::kFloat32, FusedConv2DKernel<float>);
REGISTER_KERNEL("FusedConv2D", kCPU, DType::kFloat64, FusedConv2DKernel<double>);
REGISTER_KERNEL("ConvTranspose2D", kCPU, DType::kFloat32, ConvTranspose2DKernel<float>);
REGISTER_KERNEL("ConvTranspose2D", kCPU, DType::kFloat64, ConvTranspose2DKernel<double>);
REGISTER_KERNEL("Conv2DBackpropFilter", kCPU, DType::kFloat32, Conv2DBackpropFilterKernel<float>);
REGISTER_KERNEL("Conv2DBackpropFilter", kCPU, DType::kFloat64, Conv2DBackpropFilterKernel<double>);

}  // namespace conv
}  // namespace opforge
