// PackConv2DFilter and Conv2DPacked (cpp/ops/packed_conv_ops.cc): a constant
// filter packed once into the GEMM's panels (packed_gemm.h) and, for 3x3,
// its Winograd transform (winograd.h); the convolution then takes the same
// routes as FusedConv2D (conv_kernels.cc) without the per-call packing.
//
// Payload (after the 128-byte header of packed_blob.h, format 3): the
// Winograd transform [36][o][c] when flag bit 0 is set (padded to 64
// bytes; as 36 column-panel sets when flag bit 3 is set too), then the panels (absent when flag bit 2 is set: panels=false). Header: layout = the microkernel's ISA, mr its
// rows, kgroup / wide = kh / kw, k = c * kh * kw, n = o.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

#include "../common/claimed_for.h"
#include "../quant/packed_blob.h"
#include "conv_gemm.h"
#include "conv_geometry.h"
#include "depthwise.h"
#include "gather_gemm.h"
#include "im2col.h"
#include "packed_conv.h"
#include "packed_gemm.h"
#include "winograd.h"

namespace opforge {
namespace conv {
namespace {

using int64 = int64_t;

constexpr uint32_t kFormatConv = 3;  // beside packed_blob.h's 1 (int8) and 2 (float16)
constexpr uint32_t kFlagWinograd = 1;
constexpr uint32_t kFlagWinogradPanels = 2;  // the transform as 36 panel sets (WinogradPanelsPay)
constexpr uint32_t kFlagNoPanels = 4;        // the transform alone, no GEMM panels (attr panels=false)
constexpr uint32_t kFlagColumns = 8;         // the panels as the transposed product's B (attr columns=true)

int64 Up(int64 v, int64 to) { return (v + to - 1) / to * to; }

// As StoresWinograd in packed_conv_ops.cc.
bool StoresWinograd(bool want, int64 o, int64 c, int64 kh, int64 kw) {
  return want && kh == 3 && kw == 3 && o >= 16 && c >= 16;
}

// The transform's room: 36 matrices [o][c], or 36 panel sets of at most
// (o + 15) x c floats (the shape function cannot know mr); with `columns`,
// 36 column-panel sets of at most (o + 31) x c (few tiles: winograd.h).
int64 WinoBytes(bool stored, bool columns, int64 o, int64 c) {
  return stored ? Up(4 * 36 * (o + (columns ? 31 : 15)) * c, 64) : 0;
}

// The tensor size the shape function gives a blob of this filter (column
// panels: nr <= 32 output channels each).
int64 BlobBytes(bool wino, bool panels, bool columns, int64 o, int64 c, int64 k) {
  return packed::kHeaderBytes + WinoBytes(wino, columns, o, c) + (!panels ? 0 : columns ? 4 * (o + 31) * k : 4 * (o + 15) * k);
}

// The flags a blob of this filter carries.
uint32_t Flags(bool wino, bool panels, bool columns, int64 o, int64 c) {
  return (!wino ? 0 : !columns && WinogradPanelsPay(o, c) ? kFlagWinograd | kFlagWinogradPanels : kFlagWinograd) |
         (panels ? 0 : kFlagNoPanels) | (columns ? kFlagColumns : 0);
}

// Floats of the stored panels.
int64 PanelPayloadFloats(bool panels, bool columns, int64 o, int64 k) {
  return !panels ? 0 : columns ? ColumnPanelFloats(o, k) : PanelFloats(o, k);
}

Status PackKernel(OpKernelContext* ctx) {
  const Tensor& f = ctx->input(0);
  const int64 o = f.dim(0), c = f.dim(1), kh = f.dim(2), kw = f.dim(3), k = c * kh * kw;
  const bool wino = StoresWinograd(ctx->attr_bool("winograd"), o, c, kh, kw);
  const bool panels = ctx->attr_bool("panels") || !wino;  // the shape function refuses panels=false without wino
  const bool columns = panels && ctx->attr_bool("columns");
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (out->NumElements() != BlobBytes(wino, panels, columns, o, c, k)) {
    return errors::Internal("PackConv2DFilter: the blob size does not match the shape function's");
  }
  uint8_t* dst = out->data<uint8_t>();
  std::memset(dst, 0, static_cast<size_t>(out->NumElements()));
  uint8_t* payload = dst + packed::kHeaderBytes;
  const int64 wbytes = WinoBytes(wino, columns, o, c);
  if (wino && columns) {  // U as column panels (WinogradColumnsApplies)
    ScratchBuffer<float> u(36 * o * c);
    WinogradFilter(f.data<float>(), o, c, u.data());
    float* dst_u = reinterpret_cast<float*>(payload);
    for (int xi = 0; xi < 36; ++xi) PackColumnPanels(u.data() + xi * o * c, o, c, dst_u + xi * WinogradColumnFloats(o, c));
  } else if (wino && WinogradPanelsPay(o, c)) {
    ScratchBuffer<float> u(36 * o * c);
    WinogradFilter(f.data<float>(), o, c, u.data());
    float* dst_u = reinterpret_cast<float*>(payload);
    for (int xi = 0; xi < 36; ++xi) PackPanels(u.data() + xi * o * c, o, c, dst_u + xi * PanelFloats(o, c));
  } else if (wino) {
    WinogradFilter(f.data<float>(), o, c, reinterpret_cast<float*>(payload));
  }
  if (columns) {
    PackColumnPanels(f.data<float>(), o, k, reinterpret_cast<float*>(payload + wbytes));
  } else if (panels) {
    PackPanels(f.data<float>(), o, k, reinterpret_cast<float*>(payload + wbytes));
  }
  packed::Header h{};
  h.format = kFormatConv;
  packed::SetLayout(&h, PanelLayout());
  h.mr = PanelRows(), h.nr = columns ? PanelCols() : 0, h.kgroup = static_cast<int32_t>(kh), h.wide = static_cast<int32_t>(kw);
  h.k = k, h.n = o;
  h.payload_bytes = static_cast<uint64_t>(wbytes + 4 * PanelPayloadFloats(panels, columns, o, k));
  h.flags = Flags(wino, panels, columns, o, c);
  packed::WriteHeader(h, dst);
  return Status::OK();
}

// The blob `t` checked against filter [o, c, kh, kw]: everything the kernel
// reads from it is within the tensor.
Status CheckBlob(const Tensor& t, const std::vector<int64>& fs, packed::Header* h) {
  OF_RETURN_IF_ERROR(packed::ReadHeader(t, "packed", kFormatConv, h));
  const int64 o = fs[0], c = fs[1], kh = fs[2], kw = fs[3], k = c * kh * kw;
  if (h->n != o || h->k != k || h->kgroup != kh || h->wide != kw) {
    return errors::InvalidArgument("argument 'packed' holds a filter of ", h->n, " outputs, depth ", h->k, " and a ",
                                   h->kgroup, "x", h->wide, " kernel, but attr 'filter_shape' is [", o, ", ", c, ", ",
                                   kh, ", ", kw, "]");
  }
  if (std::strncmp(h->layout, PanelLayout(), sizeof(h->layout)) != 0 || h->mr != PanelRows()) {
    return errors::InvalidArgument("argument 'packed' was packed for the '",
                                   std::string(h->layout, strnlen(h->layout, sizeof(h->layout))),
                                   "' GEMM layout; this process runs '", PanelLayout(), "': pack it again here");
  }
  const bool wino = (h->flags & kFlagWinograd) != 0, panels = (h->flags & kFlagNoPanels) == 0;
  const bool columns = (h->flags & kFlagColumns) != 0;
  // The transform in either layout reads correctly (its flag says which), so
  // a blob packed where WinogradPanelsPay decided otherwise (an older build)
  // stays valid; the room reserved is the same.
  const uint32_t expect = Flags(wino, panels, columns, o, c);
  const bool flags_ok = h->flags == expect || (wino && !columns && (h->flags ^ expect) == kFlagWinogradPanels);
  if (!flags_ok || (wino && !StoresWinograd(true, o, c, kh, kw)) ||
      (!wino && !panels) || (columns && (!panels || h->nr != PanelCols())) || (!columns && h->nr != 0) ||
      h->payload_bytes != static_cast<uint64_t>(WinoBytes(wino, columns, o, c) + 4 * PanelPayloadFloats(panels, columns, o, k)) ||
      t.NumElements() != BlobBytes(wino, panels, columns, o, c, k)) {
    return errors::InvalidArgument("argument 'packed' is not a packed weight of this op: its flags or payload size "
                                   "do not match attr 'filter_shape'");
  }
  return Status::OK();
}

// y = act(y + r) over n floats, in blocks over the pool.
void AddAct(Act act, const float* r, float* y, int64 n) {
  constexpr int64 kBlock = 4096;
  ParallelFor((n + kBlock - 1) / kBlock, kBlock * 2, [&](int64 b0, int64 b1) {
    for (int64 b = b0; b < b1; ++b) {
      const int64 j0 = b * kBlock, len = std::min(kBlock, n - j0);
      for (int64 j = j0; j < j0 + len; ++j) y[j] += r[j];
      BiasActRows(act, y + j0, nullptr, 1, len);
    }
  });
}

// Output rows [i0, i1) of image x as the column matrix (row stride ld), over
// the threads: by input channel, or by output row where there are more rows
// than channels (a stem's 3 channels split 2 + 1; its rows split evenly, and
// each thread then holds the columns its share of the GEMM reads first).
void ImColumnsParallel(const Geometry& g, const float* x, float* col, int64 ld, int64 i0, int64 i1) {
  const int64 K = g.k();
  if (i1 - i0 > g.c) {
    ParallelFor(i1 - i0, K * g.ow, [&](int64 r0, int64 r1) {
      Im2ColRange(g, x, col + r0 * g.ow, 0, g.c, ld, i0 + r0, i0 + r1);
    });
  } else {
    ParallelFor(g.c, g.kh * g.kw * (i1 - i0) * g.ow,  // K / c, c may be 0
                [&](int64 c0, int64 c1) { Im2ColRange(g, x, col, c0, c1, ld, i0, i1); });
  }
}

// n floats: a loop for a few (an SE block's 1x1 output is one pixel per
// image: a memcpy call per float cost EfficientNet-B0's 48 -> 1152 layer at
// batch 8 more than its product).
inline void Copy(const float* src, float* dst, int64 n) {
  if (n >= 16) {
    std::memcpy(dst, src, sizeof(float) * n);
  } else {
    for (int64 j = 0; j < n; ++j) dst[j] = src[j];
  }
}

// Small outputs in a batch: one GEMM over all images' columns side by side
// (as BatchedForward in conv_kernels.cc).
constexpr int64 kBatchedPixels = 256;
constexpr int64 kBatchedColumnElems = int64{8} << 20;
// The most floats of a column matrix per image (at least one output row):
// under 1 MiB, so it comes from the heap, not a 2 MiB-rounded mapping.
constexpr int64 kChunkColumnElems = 240 << 10;
constexpr int64 kL2Bytes = int64{2} << 20;  // over this, an input is taken to stream from L3

// y = act(conv(x) + bias + res); res ([n, o, oh, ow]) may be null; image n's
// output at y + n * y_img (a channel slice of a Concat's output when y_img
// exceeds o * oh * ow).
void GemmForward(const Geometry& g, const float* x, const float* panels, bool columns, const float* bias, Act act,
                 const float* res, float* y, int64 y_img) {
  const int64 K = g.k(), P = g.p();
  // A pointwise conv's B is its input: one larger than L2 comes from L3
  // image after image (batch 8's 54x54 planes), so the GEMM packs a narrow
  // filter's B row by row (an im2col chunk was just written: in L2).
  const bool cold = g.pointwise() && g.n * g.c * g.h * g.w * int64{4} > kL2Bytes;
  auto panel_gemm = [&](const float* pa, int64 m, int64 n, int64 k, const float* b, int64 ldb, float* c, int64 ldc,
                        const float* bi, Act a, bool parallel, const float* r, int64 ldr) {
    if (columns) return ColumnPanelGemm(pa, m, n, k, b, ldb, c, ldc, bi, a, parallel, r, ldr);
    PanelGemm(pa, m, n, k, b, ldb, c, ldc, bi, a, parallel, r, ldr, cold);
  };
  const bool pw = g.pointwise();
  if (pw && P == 1 && columns) {  // x [n, c] and y [n, o] are the transposed product's rows as they are
    ColumnPanelGemmRows(panels, g.o, g.n, K, x, K, y, y_img, bias, act, true, res, g.o);
    return;
  }
  if (g.n > 1 && P < kBatchedPixels && K * g.n * P <= kBatchedColumnElems) {
    const int64 NP = g.n * P;
    ScratchBuffer<float> col(K * NP), prod(g.o * NP);
    ParallelFor(g.n * g.c, g.kh * g.kw * P, [&](int64 b, int64 end) {  // K / c, c may be 0
      // (n, c) stepped, not divided out of u: at one pixel per image the
      // divisions cost more than the copies.
      for (int64 u = b, n = b / g.c, c = b % g.c; u < end; ++u, c = c + 1 == g.c ? 0 : c + 1, n += c == 0) {
        const float* xc = x + n * g.c * g.h * g.w;
        float* dst = col.data() + n * P;
        if (pw) {
          Copy(xc + c * P, dst + c * NP, P);
        } else {
          Im2ColRange(g, xc, dst, c, c + 1, NP);
        }
      }
    });
    // With a residual (in y's layout, not the product's) the activation
    // waits for the copy back, which adds it.
    panel_gemm(panels, g.o, NP, K, col.data(), NP, prod.data(), NP, bias,
               res != nullptr ? Act::kNone : act, true, nullptr, 0);
    ParallelFor(g.n * g.o, P, [&](int64 b, int64 end) {
      for (int64 u = b, n = b / g.o, i = b % g.o; u < end; ++u, i = i + 1 == g.o ? 0 : i + 1, n += i == 0) {
        const float* src = prod.data() + i * NP + n * P;
        float* yu = y + n * y_img + i * P;
        if (res == nullptr) {
          Copy(src, yu, P);
          continue;
        }
        for (int64 j = 0; j < P; ++j) yu[j] = src[j] + res[u * P + j];
        BiasActRows(act, yu, nullptr, 1, P);
      }
    });
    return;
  }
  // The column matrix in chunks of output rows (as MLAS bounds its working
  // buffer): a stem's [147, 112 * 112] would be 7 MiB of peak memory.
  const int64 rows = std::min(g.oh, std::max<int64>(1, kChunkColumnElems / std::max<int64>(1, K * g.ow)));
  const int64 chunk = pw || (!columns && res == nullptr && GatherGemmApplies(g)) ? 0 : K * rows * g.ow;
  const bool gather = !columns && res == nullptr && GatherGemmApplies(g);
  auto one = [&](int64 n, float* col, bool in_worker) {
    const float* xn = x + n * g.c * g.h * g.w;
    float* yn = y + n * y_img;
    const float* rn = res != nullptr ? res + n * g.o * P : nullptr;
    if (pw) {
      panel_gemm(panels, g.o, P, K, xn, P, yn, P, bias, act, !in_worker, rn, P);
      return;
    }
    if (gather) {  // no column matrix: pixel panels straight from the input's phase planes
      GatherGemm(g, xn, panels, bias, act, yn, !in_worker);
      return;
    }
    for (int64 i0 = 0; i0 < g.oh; i0 += rows) {
      const int64 i1 = std::min(g.oh, i0 + rows), cols = (i1 - i0) * g.ow;
      if (in_worker) {
        Im2ColRange(g, xn, col, 0, g.c, cols, i0, i1);
      } else {
        ImColumnsParallel(g, xn, col, cols, i0, i1);
      }
      panel_gemm(panels, g.o, cols, K, col, cols, yn + i0 * g.ow, P, bias, act, !in_worker,
                 rn != nullptr ? rn + i0 * g.ow : nullptr, P);
    }
  };
  if (g.n > 1 && g.n >= NumIntraOpThreads()) {
    // Images claimed one at a time (claimed_for.h); each thread keeps its
    // column chunk between calls, as Winograd keeps its buffers.
    ClaimedFor(g.n, g.o * P * K, [&](int64 n) {
      static thread_local std::vector<float> col;
      if (col.size() < static_cast<size_t>(chunk)) col.resize(static_cast<size_t>(chunk));
      one(n, col.data(), true);
    });
  } else {
    ScratchBuffer<float> col(chunk);
    for (int64 n = 0; n < g.n; ++n) one(n, col.data(), false);
  }
}

}  // namespace

Status PackedConvInto(const Geometry& g, const Tensor& blob, const std::vector<int64>& fs, const float* x,
                      const float* b, Act act, const float* r, float* y, int64 y_img) {
  packed::Header h;
  OF_RETURN_IF_ERROR(CheckBlob(blob, fs, &h));
  const int64 y_size = g.n * g.o * g.p();
  if (y_size == 0) return Status::OK();
  std::vector<uint8_t> copy;
  const uint8_t* payload = packed::Payload(blob, h, &copy);
  const bool wino = (h.flags & kFlagWinograd) != 0, columns = (h.flags & kFlagColumns) != 0;
  // The residual goes in before the activation: in the output transform where
  // it can, else in one pass after (not the Add's and the Relu's). With a
  // residual y_img is the output's own.
  const bool fuse = r != nullptr && WinogradFusesResidual();
  const Act wact = r != nullptr && !fuse ? Act::kNone : act;
  const float* wres = fuse ? r : nullptr;
  if (wino && columns && (WinogradApplies(g) || WinogradColumnsApplies(g))) {
    WinogradForward(g, x, nullptr, b, wact, y, false, reinterpret_cast<const float*>(payload),
                    WinogradColumnFloats(g.o, g.c), true, y_img, wres);
    if (r != nullptr && !fuse) AddAct(act, r, y, y_size);
    return Status::OK();
  }
  if (wino && !columns && WinogradApplies(g)) {
    WinogradForward(g, x, nullptr, b, wact, y, false, reinterpret_cast<const float*>(payload),
                    (h.flags & kFlagWinogradPanels) != 0 ? PanelFloats(g.o, g.c) : 0, false, y_img, wres);
    if (r != nullptr && !fuse) AddAct(act, r, y, y_size);
    return Status::OK();
  }
  if ((h.flags & kFlagNoPanels) != 0) {
    return errors::InvalidArgument("argument 'packed' holds the Winograd transform alone (packed with panels=false), "
                                   "which this call cannot use (its shape, or OPFORGE_CONV_WINOGRAD=0): pack the "
                                   "filter with panels=true");
  }
  GemmForward(g, x, reinterpret_cast<const float*>(payload + WinoBytes(wino, columns, g.o, g.c)), columns, b, act, r,
              y, y_img);
  return Status::OK();
}

namespace {

// Conv2DPacked, and Conv2DPackedAdd with its residual (`res`, else null).
Status PackedConv(OpKernelContext* ctx, const Tensor* res) {
  const Tensor& x = ctx->input(0);
  const Tensor& blob = ctx->input(1);
  const Tensor& bias = ctx->input(2);
  const std::vector<int64>& fs = ctx->attr_ints("filter_shape");
  if (bias.NumElements() != 0 && bias.NumElements() != fs[0]) {  // unknown in a graph's shape check
    return errors::InvalidArgument("argument 'bias' must hold 0 or ", fs[0], " values, got ", bias.NumElements());
  }
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (res != nullptr && !(res->shape() == y->shape())) {  // unknown in a graph's shape check
    return errors::InvalidArgument("argument 'residual' must have the output's shape ", y->shape().DebugString(),
                                   ", got ", res->shape().DebugString());
  }
  packed::Header h;
  OF_RETURN_IF_ERROR(CheckBlob(blob, fs, &h));
  if (y->NumElements() == 0) return Status::OK();
  const Geometry g = PackedGeometry(x.shape(), fs, y->dim(2), y->dim(3), ctx->attr_ints("strides").data(),
                                    ctx->attr_ints("dilations").data(), ctx->attr_ints("pads").data());
  return PackedConvInto(g, blob, fs, x.data<float>(), bias.NumElements() != 0 ? bias.data<float>() : nullptr,
                        ActOf(ctx->attr("activation").s), res != nullptr ? res->data<float>() : nullptr,
                        y->data<float>(), g.o * g.p());
}

Status Conv2DPackedKernel(OpKernelContext* ctx) { return PackedConv(ctx, nullptr); }
Status Conv2DPackedAddKernel(OpKernelContext* ctx) { return PackedConv(ctx, &ctx->input(3)); }

}  // namespace

REGISTER_KERNEL("PackConv2DFilter", kCPU, DType::kFloat32, PackKernel);
REGISTER_KERNEL("Conv2DPacked", kCPU, DType::kFloat32, Conv2DPackedKernel);
REGISTER_KERNEL("Conv2DPackedAdd", kCPU, DType::kFloat32, Conv2DPackedAddKernel);

}  // namespace conv
}  // namespace opforge
