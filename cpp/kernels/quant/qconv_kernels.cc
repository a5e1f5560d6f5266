// ConvInteger and QLinearConv (NCHW), lowered per (image, group) onto the
// 8-bit GEMM: y_g [og, P] = (W_g - w_zero) [og, K] x (col - x_zero) [K, P],
// K = cg * kh * kw, P = oh * ow. The column matrix pads with x's zero point
// (a real 0); a pointwise convolution reads x in place. When there are at
// least as many items as threads they run in parallel, each GEMM on one
// thread; otherwise each GEMM is threaded.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "qgemm.h"
#include "quant_common.h"

namespace opforge {
namespace quant {
namespace {

struct Geom {
  int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, dh, dw, pt, pl, groups, cg, og;
  int64_t k() const { return cg * kh * kw; }
  int64_t p() const { return oh * ow; }
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh == h && ow == w; }
};

Geom MakeGeom(const OpContext& ctx, const TensorShape& x, const TensorShape& f, const TensorShape& y) {
  const auto& s = ctx.attr_ints("strides");
  const auto& d = ctx.attr_ints("dilations");
  const auto& p = ctx.attr_ints("pads");
  Geom g;
  g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.o = f.dim(0), g.kh = f.dim(2), g.kw = f.dim(3), g.oh = y.dim(2), g.ow = y.dim(3);
  g.sh = s[0], g.sw = s[1], g.dh = d[0], g.dw = d[1], g.pt = p[0], g.pl = p[1];
  g.groups = ctx.attr_int("groups"), g.cg = g.c / g.groups, g.og = g.o / g.groups;
  return g;
}

// One image's channel group [cg, h, w] as its column matrix [K, P], bytes,
// `pad` where a tap falls outside the image.
void Im2Col(const Geom& g, const uint8_t* x, uint8_t pad, uint8_t* col) {
  const int64_t P = g.p();
  for (int64_t c = 0; c < g.cg; ++c) {
    for (int64_t a = 0; a < g.kh; ++a) {
      for (int64_t b = 0; b < g.kw; ++b) {
        uint8_t* row = col + ((c * g.kh + a) * g.kw + b) * P;
        for (int64_t i = 0; i < g.oh; ++i) {
          const int64_t ih = i * g.sh + a * g.dh - g.pt;
          uint8_t* r = row + i * g.ow;
          if (ih < 0 || ih >= g.h) {
            std::memset(r, pad, g.ow);
            continue;
          }
          const uint8_t* xr = x + (c * g.h + ih) * g.w;
          for (int64_t j = 0; j < g.ow; ++j) {
            const int64_t iw = j * g.sw + b * g.dw - g.pl;
            r[j] = iw >= 0 && iw < g.w ? xr[iw] : pad;
          }
        }
      }
    }
  }
}

// acc (int32 [n, o, P]) = ConvInteger(x, w) with the zero points given.
void ConvInt(const Geom& g, const Tensor& x, const Tensor& w, const Tensor& xz, const Tensor& wz, int32_t* acc) {
  const int64_t K = g.k(), P = g.p();
  const int32_t xzero = ZeroPointAt(xz, 0);
  std::vector<int32_t> wzero(static_cast<size_t>(wz.NumElements()));
  for (int64_t i = 0; i < wz.NumElements(); ++i) wzero[i] = ZeroPointAt(wz, i);
  const bool pw = g.pointwise();
  const uint8_t* xd = static_cast<const uint8_t*>(x.raw_data());
  const uint8_t* wd = static_cast<const uint8_t*>(w.raw_data());
  auto item = [&](int64_t u, uint8_t* col, bool parallel) {
    const int64_t n = u / g.groups, gi = u % g.groups;
    const uint8_t* xg = xd + (n * g.c + gi * g.cg) * g.h * g.w;
    if (!pw) Im2Col(g, xg, static_cast<uint8_t>(xzero), col);
    qgemm::Args a;
    a.m = g.og, a.n = P, a.k = K;
    a.a = wd + gi * g.og * K, a.rs_a = K, a.cs_a = 1, a.a_signed = w.dtype() == DType::kInt8;
    a.b = pw ? xg : col, a.rs_b = P, a.cs_b = 1, a.b_signed = x.dtype() == DType::kInt8;
    a.a_zero = wzero.size() > 1 ? wzero.data() + gi * g.og : wzero.data(), a.a_zero_per_row = wzero.size() > 1;
    a.b_zero = &xzero;
    a.c = acc + (n * g.o + gi * g.og) * P, a.ldc = P;
    qgemm::QGemm(a, parallel);
  };
  const int64_t items = g.n * g.groups;
  const int64_t col_size = pw ? 0 : K * P;
  if (items > 1 && items >= NumIntraOpThreads()) {
    ParallelFor(items, g.og * P * K, [&](int64_t b, int64_t e) {
      std::vector<uint8_t> col(static_cast<size_t>(col_size));
      for (int64_t u = b; u < e; ++u) item(u, col.data(), false);
    });
  } else {
    std::vector<uint8_t> col(static_cast<size_t>(col_size));
    for (int64_t u = 0; u < items; ++u) item(u, col.data(), true);
  }
}

Status ConvIntegerKernel(OpKernelContext* ctx) {
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const Geom g = MakeGeom(*ctx, ctx->input(0).shape(), ctx->input(1).shape(), y->shape());
  ConvInt(g, ctx->input(0), ctx->input(1), ctx->input(2), ctx->input(3), y->data<int32_t>());
  return Status::OK();
}

template <typename Q>
void RequantizeConv(const Geom& g, const int32_t* acc, const int32_t* bias, float sx, const Tensor& sw, float sy,
                    float zy, Q* y) {
  const int64_t P = g.p();
  const float* wv = sw.data<float>();
  const bool per_o = sw.NumElements() > 1;
  ParallelFor(g.n * g.o, P * 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r % g.o;
      const float mult = sx * wv[per_o ? o : 0] / sy;
      const uint32_t b = static_cast<uint32_t>(bias[o]);
      for (int64_t j = 0; j < P; ++j) {
        const int32_t v = static_cast<int32_t>(static_cast<uint32_t>(acc[r * P + j]) + b);
        y[r * P + j] = Saturate<Q>(RoundHalfEven(static_cast<float>(v) * mult) + zy);
      }
    }
  });
}

Status QLinearConvKernel(OpKernelContext* ctx) {
  const Tensor &x = ctx->input(0), &sx = ctx->input(1), &zx = ctx->input(2);
  const Tensor &w = ctx->input(3), &sw = ctx->input(4), &zw = ctx->input(5);
  const Tensor &sy = ctx->input(6), &zy = ctx->input(7), &bias = ctx->input(8);
  OF_RETURN_IF_ERROR(CheckScales(sx, "x_scale"));
  OF_RETURN_IF_ERROR(CheckScales(sw, "w_scale"));
  OF_RETURN_IF_ERROR(CheckScales(sy, "y_scale"));
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const Geom g = MakeGeom(*ctx, x.shape(), w.shape(), y->shape());
  std::vector<int32_t> acc(static_cast<size_t>(y->NumElements()));
  ConvInt(g, x, w, zx, zw, acc.data());
  const float s = sx.data<float>()[0], ys = sy.data<float>()[0], z = static_cast<float>(ZeroPointAt(zy, 0));
  if (zy.dtype() == DType::kUInt8) {
    RequantizeConv<uint8_t>(g, acc.data(), bias.data<int32_t>(), s, sw, ys, z, y->data<uint8_t>());
  } else {
    RequantizeConv<int8_t>(g, acc.data(), bias.data<int32_t>(), s, sw, ys, z, y->data<int8_t>());
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("ConvInteger", kCPU, DType::kUInt8, ConvIntegerKernel);
REGISTER_KERNEL("ConvInteger", kCPU, DType::kInt8, ConvIntegerKernel);
REGISTER_KERNEL("QLinearConv", kCPU, DType::kUInt8, QLinearConvKernel);
REGISTER_KERNEL("QLinearConv", kCPU, DType::kInt8, QLinearConvKernel);

}  // namespace quant
}  // namespace opforge
