// Kernels of the NCHWc ops (cpp/ops/nchwc_ops.cc): the reorders, the
// convolution and the global average pool. The vector loops are
// nchwc_isa.inc, compiled once per instruction set under a `#pragma GCC
// target` and chosen at run time like the other vector kernels (OPFORGE_SIMD
// caps the choice).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nchwc.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "../conv/conv_tuning.h"
#include "../simd_math.h"
#include "../vector_math.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_NCHWC_X86 1
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace opforge {
namespace nchwc {
namespace {

using int64 = int64_t;

struct Fns {
  int64 (*dense_units)(const ConvArgs&);
  void (*dense[2])(const ConvArgs&, int64, int64);
  void (*depthwise[2])(const ConvArgs&, int64, int64);
  void (*mean[2])(const float*, int64, float*, int64, int64);
  void (*max_pool[2])(const PoolArgs&, int64, int64);
  int native;  // the block that fills one register
};

template <class T>
Fns Make(const T& t, int native) {
  Fns f;
  f.dense_units = t.dense_units;
  for (int i = 0; i < 2; ++i) f.dense[i] = t.dense[i], f.depthwise[i] = t.depthwise[i], f.mean[i] = t.mean[i],
                              f.max_pool[i] = t.max_pool[i];
  f.native = native;
  return f;
}

const Fns& Get() {
  static const Fns fns = [] {
#if defined(OF_NCHWC_X86)
    const char* isa = vmath::IsaName();
    if (std::strcmp(isa, "avx512") == 0) return Make(avx512::Functions(), 16);
    if (std::strcmp(isa, "avx2") == 0) return Make(avx2::Functions(), 8);
#endif
    return Make(baseline::Functions(), 8);
  }();
  return fns;
}

int Slot(int64 block) { return block == 16 ? 1 : 0; }

Status BlockSizeKernel(OpKernelContext* ctx) {
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  y->data<int64>()[0] = Get().native;
  return Status::OK();
}

Status ReorderToKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const int64 b = ctx->attr_int("block"), want = ctx->attr_int("channels");
  if (want > 0 && x.dim(1) != want) {
    return errors::InvalidArgument("argument 'x' has ", x.dim(1), " channels, attr 'channels' is ", want);
  }
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const int64 n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3), cb = y->dim(1);
  if (y->NumElements() == 0) return Status::OK();
  const float* xs = x.data<float>();
  float* ys = y->data<float>();
  const int64 units = ReorderUnits(n, cb, hw);
  ParallelFor(units, n * cb * hw * b / units, [&](int64 u0, int64 u1) { ReorderToRange(xs, c, cb, hw, b, ys, u0, u1); });
  return Status::OK();
}

Status ReorderFromKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const int64 b = ctx->attr_int("block"), c = ctx->attr_int("channels");
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const int64 n = x.dim(0), cb = x.dim(1), hw = x.dim(2) * x.dim(3);
  const float* xs = x.data<float>();
  float* ys = y->data<float>();
  const int64 units = ReorderUnits(n, cb, hw);
  ParallelFor(units, n * cb * hw * b / units, [&](int64 u0, int64 u1) { ReorderFromRange(xs, c, cb, hw, b, ys, u0, u1); });
  return Status::OK();
}

// x's horizontal padding copied in (zeros), for the taps rows: every output
// column then reads only real columns, and a row runs as even tiles instead
// of interior tiles and checked edge columns (a 7x7 row: 4 + 3 instead of 5
// and a pair, the pair reading the whole filter slice for 8 FMAs a load).
// About 0.5 ns per float on one thread (512x7x7: 12 us against a 2.4 ms conv).
// The copy is split over the threads by bands of rows (every block of a
// band on one thread), as the rows-outer conv after it reads x and as the
// previous layer mostly wrote it, so each thread copies into its own L2 what
// it reads next (split by blocks, half of what a thread read had been copied
// by the other core). The buffer comes from the tensor allocator, whose
// block cache recycles it (a vector faulted its pages in on every call).
Status PadColumns(ConvArgs* a, Tensor* buf) {
  const int64 last = (a->ow - 1) * a->sw - a->pl + (a->kw - 1) * a->dw;  // the last column read
  const int64 pl = a->pl, pr = std::max<int64>(0, last - (a->w_ - 1));
  if (pl == 0 && pr == 0) return Status::OK();
  const int64 b = a->x_pix, w = a->w_ + pl + pr, icb = a->icb, h = a->h, rows = a->n * icb * h;
  OF_RETURN_IF_ERROR(Tensor::Allocate(DType::kFloat32, TensorShape({rows * w * b}), buf));
  const float* src = a->x;
  float* dst = buf->data<float>();
  const int64 in_row = a->w_ * b;
  ParallelFor(rows, w * b, [&](int64 r0, int64 r1) {
    for (int64 u = r0; u < r1; ++u) {  // u: (image, row, block)
      const int64 r = (u / icb / h * icb + u % icb) * h + u / icb % h;
      float* d = dst + r * w * b;
      std::memset(d, 0, sizeof(float) * pl * b);
      std::memcpy(d + pl * b, src + r * in_row, sizeof(float) * in_row);
      std::memset(d + (pl + a->w_) * b, 0, sizeof(float) * pr * b);
    }
  });
  a->x = dst, a->w_ = w, a->pl = 0;
  a->x_row = w * b, a->x_blk = a->h * w * b, a->x_img = a->icb * a->x_blk;
  a->ox_lo = 0, a->ox_hi = a->ow;
  return Status::OK();
}

int ActOf(const std::string& s) {
  return s == "relu" ? kRelu : s == "sigmoid" ? kSigmoid : s == "silu" ? kSilu : s == "hardswish" ? kHardSwish : kNone;
}

// a's geometry for one filter (fs: [O, C / groups, kh, kw]; s, d, p: its
// strides, dilations, pads) over x, with oh x ow outputs in ob blocks.
void Geometry(const Tensor& x, const int64* fs, const int64* s, const int64* d, const int64* p, int64 b, int64 groups,
              bool nchw, int64 oh, int64 ow, int64 ob, ConvArgs* a) {
  a->n = x.dim(0), a->h = x.dim(2), a->w_ = x.dim(3);
  a->oh = oh, a->ow = ow, a->ob = ob, a->kh = fs[2], a->kw = fs[3];
  if (a->y_ob == 0) a->y_ob = ob;
  a->sh = s[0], a->sw = s[1], a->dh = d[0], a->dw = d[1], a->pt = p[0], a->pl = p[1];
  const int64 hw = a->h * a->w_;
  a->c = fs[1] * groups;
  if (nchw) {  // one block of all C channels, a lane per plane
    a->icb = 1, a->ib = fs[1], a->x_img = fs[1] * hw, a->x_blk = 0, a->x_lane = hw, a->x_row = a->w_, a->x_pix = 1;
  } else {
    a->icb = x.dim(1), a->ib = b, a->x_img = a->icb * hw * b, a->x_blk = hw * b, a->x_lane = 1,
    a->x_row = a->w_ * b, a->x_pix = b;
  }
  a->ox_lo = std::min(a->ow, (a->pl + a->sw - 1) / a->sw);
  const int64 last = a->w_ - 1 + a->pl - (a->kw - 1) * a->dw;  // the interior's last column reads ix <= W - 1
  a->ox_hi = last < 0 ? 0 : std::min(a->ow, last / a->sw + 1);
}

// A dense conv's run settings (Geometry's a, its pointers set): the
// pointwise rows, the taps path (x's columns padded into *padded) and the
// threads' split. Sets *units (Table::dense).
Status PrepareDense(ConvArgs* ap, int64 b, bool nchw, Tensor* padded, int64* units) {
  ConvArgs& a = *ap;
  const Fns& f = Get();
  const int64 taps = a.kh * a.kw;
  if (a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.pt == 0 && a.pl == 0 && !nchw) {
    // A pointwise conv: the image's pixels as one row, so tiles run across row ends (7x7: 8 full tiles of 6).
    a.w_ = a.ow = a.h * a.w_, a.h = a.oh = 1, a.x_row = a.w_ * b, a.ox_lo = 0, a.ox_hi = a.ow;
  }
  if (f.native == 16 && b == 16 && !nchw && a.c % b == 0 && conv::IntelTuning()) {
    a.taps = true;
    OF_RETURN_IF_ERROR(PadColumns(&a, padded));
  }
  // Two or more threads: a thread's share is a range of units, so with the
  // groups of output blocks outside the rows each thread reads all of x and
  // its groups' share of the filter, with the rows outside each reads its
  // band of x (plus the window's halo) and all of the filter. Rows outside
  // where x is the larger operand. ResNet-18 b1, two threads, in the model,
  // three process pairs (ms, before -> after): 64 -> 128 3x3 stride 2
  // 0.48-0.54 -> 0.44-0.47 (x 784 KiB, filter 288 KiB), its 1x1 stride 2
  // 0.071-0.086 -> 0.063-0.065, 128 -> 256 1x1 stride 2 0.068-0.081 ->
  // 0.065-0.066; rows outside for a larger filter lost (the 14x14 layers,
  // x 196 KiB, filter 2.25 MiB: 0.70-0.79 -> 0.81-0.86), as for SqueezeNet's
  // 64 -> 256 3x3 at 13x13 (x 42 KiB, filter 576 KiB: 0.156 -> 0.160).
  // Intel only (measured there); SE-scaled convs keep the groups outside
  // (their scaled operand is made once per image and group).
  if (conv::IntelTuning() && NumIntraOpThreads() > 1 && a.scale == nullptr) {
    a.rows_outer = a.x_img > a.ob * b * a.icb * a.ib * taps;  // x's floats per image against the filter's
  }
  *units = f.dense_units(a);
  return Status::OK();
}

int64 DenseCost(const ConvArgs& a, int64 b) { return a.n * a.ob * a.oh * a.ow * a.kh * a.kw * a.icb * a.ib * b; }

// Runs the conv a describes (Geometry's, with its pointers set) over the intra-op pool.
Status RunConv(ConvArgs a, int64 b, int64 groups, bool nchw) {
  const Fns& f = Get();
  const int slot = Slot(b);
  if (groups != 1) {
    ParallelFor(a.n * a.ob * a.oh, a.ow * a.kh * a.kw * b, [&](int64 u0, int64 u1) { f.depthwise[slot](a, u0, u1); });
    return Status::OK();
  }
  Tensor padded;
  int64 units = 0;
  OF_RETURN_IF_ERROR(PrepareDense(&a, b, nchw, &padded, &units));
  ParallelFor(units, DenseCost(a, b) / units, [&](int64 u0, int64 u1) { f.dense[slot](a, u0, u1); });
  return Status::OK();
}

Status ConvKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& w = ctx->input(1);
  const Tensor& bias = ctx->input(2);
  const Tensor& res = ctx->input(3);
  const Tensor& scale = ctx->input(4);
  const std::vector<int64>& fs = ctx->attr_ints("filter_shape");
  const int64 b = ctx->attr_int("block"), groups = ctx->attr_int("groups");
  const bool nchw = ctx->attr("input_layout").s == "nchw";
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  // Sizes a graph's shape check may not have known.
  if (bias.NumElements() != 0 && bias.NumElements() != y->dim(1) * b) {
    return errors::InvalidArgument("argument 'bias' must hold 0 or ", y->dim(1) * b, " values, got ",
                                   bias.NumElements());
  }
  if (res.NumElements() != 0 && res.shape() != y->shape()) {
    return errors::InvalidArgument("argument 'residual' must be empty or of shape ", y->shape().DebugString(),
                                   ", got ", res.shape().DebugString());
  }
  if (scale.NumElements() != 0 && scale.NumElements() != x.dim(0) * x.dim(1) * b) {
    return errors::InvalidArgument("argument 'scale' must be empty or hold ", x.dim(0) * x.dim(1) * b,
                                   " values, got shape ", scale.shape().DebugString());
  }
  if (y->NumElements() == 0) return Status::OK();
  ConvArgs a;
  a.scale = scale.NumElements() != 0 ? scale.data<float>() : nullptr;
  a.x = x.data<float>(), a.w = w.data<float>(), a.y = y->data<float>();
  a.bias = bias.NumElements() != 0 ? bias.data<float>() : nullptr;
  a.res = res.NumElements() != 0 ? res.data<float>() : nullptr;
  a.act = ActOf(ctx->attr("activation").s);
  Geometry(x, fs.data(), ctx->attr_ints("strides").data(), ctx->attr_ints("dilations").data(),
           ctx->attr_ints("pads").data(), b, groups, nchw, y->dim(2), y->dim(3), y->dim(1), &a);
  return RunConv(a, b, groups, nchw);
}

// Dense convs of one NCHWc x, each writing its output blocks straight into
// its slice of y (a SqueezeNet fire module's expands): the slices' images
// are y_ob blocks apart. One pass over the pool for all of them: part p of
// kParts runs the same share of every conv's units (a 1x1's units cost a
// ninth of a 3x3's, so one range over both would split unevenly).
Status ConvConcatKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const int64 nf = ctx->attr_int("N");
  const Tensor& bias = ctx->input(1 + nf);
  const std::vector<int64>& fs = ctx->attr_ints("filter_shapes");
  const std::vector<int64>& s = ctx->attr_ints("strides");
  const std::vector<int64>& d = ctx->attr_ints("dilations");
  const std::vector<int64>& p = ctx->attr_ints("pads");
  const int64 b = ctx->attr_int("block");
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (bias.NumElements() != 0 && bias.NumElements() != y->dim(1) * b) {
    return errors::InvalidArgument("argument 'bias' must hold 0 or ", y->dim(1) * b, " values, got ",
                                   bias.NumElements());
  }
  if (y->NumElements() == 0) return Status::OK();
  const int act = ActOf(ctx->attr("activation").s);
  std::vector<ConvArgs> convs(nf);
  std::vector<Tensor> padded(nf);
  std::vector<int64> units(nf);
  int64 off = 0, cost = 0;  // off: the conv's first block in y
  for (int64 i = 0; i < nf; ++i) {
    const int64 ob = (fs[4 * i] + b - 1) / b;
    ConvArgs a;
    a.x = x.data<float>(), a.w = ctx->input(1 + i).data<float>();
    a.y = y->data<float>() + off * y->dim(2) * y->dim(3) * b;
    a.y_ob = y->dim(1);
    a.bias = bias.NumElements() != 0 ? bias.data<float>() + off * b : nullptr;
    a.res = nullptr, a.scale = nullptr, a.act = act;
    Geometry(x, fs.data() + 4 * i, s.data() + 2 * i, d.data() + 2 * i, p.data() + 4 * i, b, 1, false, y->dim(2),
             y->dim(3), ob, &a);
    OF_RETURN_IF_ERROR(PrepareDense(&a, b, false, &padded[i], &units[i]));
    cost += DenseCost(a, b);
    convs[i] = a;
    off += ob;
  }
  constexpr int64 kParts = 64;
  const Fns& f = Get();
  const int slot = Slot(b);
  ParallelFor(kParts, cost / kParts, [&](int64 p0, int64 p1) {
    for (int64 i = 0; i < nf; ++i) f.dense[slot](convs[i], units[i] * p0 / kParts, units[i] * p1 / kParts);
  });
  return Status::OK();
}

Status MaxPoolKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const int64 b = ctx->attr_int("block");
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const std::vector<int64>& k = ctx->attr_ints("ksize");
  const std::vector<int64>& s = ctx->attr_ints("strides");
  const std::vector<int64>& d = ctx->attr_ints("dilations");
  const std::vector<int64>& p = ctx->attr_ints("pads");
  PoolArgs a;
  a.x = x.data<float>(), a.y = y->data<float>();
  a.planes = x.dim(0) * x.dim(1), a.h = x.dim(2), a.w = x.dim(3), a.oh = y->dim(2), a.ow = y->dim(3);
  a.kh = k[0], a.kw = k[1], a.sh = s[0], a.sw = s[1], a.dh = d[0], a.dw = d[1], a.pt = p[0], a.pl = p[1];
  const Fns& f = Get();
  ParallelFor(a.planes * a.oh, a.ow * a.kh * a.kw * b, [&](int64 u0, int64 u1) { f.max_pool[Slot(b)](a, u0, u1); });
  return Status::OK();
}

Status GlobalAvgKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const int64 b = ctx->attr_int("block");
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const int64 planes = x.dim(0) * x.dim(1), pixels = x.dim(2) * x.dim(3);
  if (pixels == 0) {
    return errors::InvalidArgument("argument 'x' has no pixels to average (shape ", x.shape().DebugString(), ")");
  }
  const Fns& f = Get();
  const float* xs = x.data<float>();
  float* ys = y->data<float>();
  ParallelFor(planes, pixels * b, [&](int64 u0, int64 u1) { f.mean[Slot(b)](xs, pixels, ys, u0, u1); });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("NchwcBlockSize", kCPU, DType::kInt64, BlockSizeKernel);
REGISTER_KERNEL("ReorderToNchwc", kCPU, DType::kFloat32, ReorderToKernel);
REGISTER_KERNEL("ReorderFromNchwc", kCPU, DType::kFloat32, ReorderFromKernel);
REGISTER_KERNEL("Conv2DNchwc", kCPU, DType::kFloat32, ConvKernel);
REGISTER_KERNEL("GlobalAveragePoolNchwc", kCPU, DType::kFloat32, GlobalAvgKernel);
REGISTER_KERNEL("Conv2DNchwcConcat", kCPU, DType::kFloat32, ConvConcatKernel);
REGISTER_KERNEL("MaxPool2DNchwc", kCPU, DType::kFloat32, MaxPoolKernel);

}  // namespace nchwc
}  // namespace opforge
