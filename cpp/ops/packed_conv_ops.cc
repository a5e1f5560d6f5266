// Convolution over a constant filter packed once, as onnxruntime prepacks
// constant conv weights at load: PackConv2DFilter lays the filter out as the
// GEMM microkernel reads it (and, for a 3x3 filter, also stores its Winograd
// transform), behind the checked header of cpp/kernels/quant/packed_blob.h;
// Conv2DPacked reads it instead of re-packing (or re-transforming) the
// filter on every call. A truncated, edited or foreign blob is an
// InvalidArgumentError naming argument 'packed'. Blobs are a per-process
// cache: the panels depend on the ISA (one packed under another
// OPFORGE_SIMD is refused).
#include <cstdint>
#include <string>
#include <vector>

#include "conv_shape.h"
#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace {

constexpr int64_t kHeader = 128;

int64_t Up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Whether a blob of filter [o, c, kh, kw] carries the Winograd transform:
// the same rule in the shape function and the kernel (packed_conv_kernels.cc).
bool StoresWinograd(bool want, int64_t o, int64_t c, int64_t kh, int64_t kw) {
  return want && kh == 3 && kw == 3 && o >= 16 && c >= 16;
}

// Bytes: the header, room for the Winograd transform (36 matrices [o][c], or
// as GEMM panels of at most o + 15 rows, padded to 64 bytes) when stored, then the panels of the largest register tile any
// ISA uses (mr <= 16: at most o + 15 rows), so the shape does not depend
// on the CPU.
Status PackShape(InferenceContext* ctx) {
  const TensorShape& f = ctx->input_shape(0);
  if (f.rank() != 4) {
    return errors::InvalidArgument("argument 'filter' must be 4-D [out_channels, in_channels, kh, kw], got shape ",
                                   f.DebugString());
  }
  for (int i = 0; i < 4; ++i) {
    if (IsUnknownDim(f.dim(i)) || f.dim(i) < 1 || f.dim(i) > (int64_t{1} << 20)) {
      return errors::InvalidArgument("argument 'filter' must have a known shape with dims in [1, 2^20] (a constant "
                                     "weight), got ", f.DebugString());
    }
  }
  const int64_t o = f.dim(0), c = f.dim(1), k = c * f.dim(2) * f.dim(3);
  if (k > (int64_t{1} << 24) || o * k > (int64_t{1} << 32)) {
    return errors::InvalidArgument("argument 'filter' is too large to pack: ", f.DebugString());
  }
  const bool stores = StoresWinograd(ctx->attr_bool("winograd"), o, c, f.dim(2), f.dim(3));
  const bool panels = ctx->attr_bool("panels");
  const bool columns = ctx->attr_bool("columns");
  if (columns && !panels) {
    return errors::InvalidArgument("attr 'columns' needs attr 'panels' true (it is a layout of the panels)");
  }
  if (!panels && !stores) {
    return errors::InvalidArgument("attr 'panels' may be false only where the Winograd transform is stored (winograd "
                                   "true, a 3x3 filter with 16 or more input and output channels), got filter ",
                                   f.DebugString());
  }
  const int64_t wino = stores ? Up(4 * 36 * (o + (columns ? 31 : 15)) * c, 64) : 0;  // columns: as column panels
  // Column panels: nr <= 32 output channels each.
  ctx->set_output_shape(0, TensorShape({kHeader + wino + (!panels ? 0 : columns ? 4 * (o + 31) * k : 4 * (o + 15) * k)}));
  return Status::OK();
}

// x [N, C, H, W] with the filter of attr 'filter_shape' -> y [N, O, OH, OW].
Status Conv2DPackedY(InferenceContext* ctx, TensorShape* out) {
  const std::vector<int64_t>& fs = ctx->attr_ints("filter_shape");
  if (fs.size() != 4 || fs[0] < 1 || fs[1] < 1 || fs[2] < 1 || fs[3] < 1) {
    return errors::InvalidArgument("attr 'filter_shape' must be 4 ints >= 1 [out_channels, in_channels, kh, kw], got ",
                                   ListString(fs));
  }
  if (ctx->input_shape(1).rank() != 1) {
    return errors::InvalidArgument("argument 'packed' must be 1-D (a PackConv2DFilter output), got ",
                                   ctx->input_shape(1).DebugString());
  }
  TensorShape y;
  if (fs[0] > (int64_t{1} << 20) || fs[1] > (int64_t{1} << 20) || fs[2] > (int64_t{1} << 20) || fs[3] > (int64_t{1} << 20)) {
    return errors::InvalidArgument("attr 'filter_shape' dims must be at most 2^20, got ", ListString(fs));
  }
  OF_RETURN_IF_ERROR(conv_shape::ConvForwardShape(ctx->input_shape(0), TensorShape({fs[0], fs[1], fs[2], fs[3]}), ctx, &y, 1));
  const TensorShape& b = ctx->input_shape(2);
  if (b.rank() != 1 || (!IsUnknownDim(b.dim(0)) && b.dim(0) != fs[0] && b.dim(0) != 0)) {
    return errors::InvalidArgument("argument 'bias' must be 1-D of length out_channels ", fs[0],
                                   " or empty, got shape ", b.DebugString());
  }
  OF_RETURN_IF_ERROR(conv_shape::CheckConvActivation(ctx));
  *out = y;
  return Status::OK();
}

Status Conv2DPackedShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(Conv2DPackedY(ctx, &y));
  ctx->set_output_shape(0, y);
  return Status::OK();
}

// Conv2DPacked's shape, and the residual exactly y's shape (no broadcasting).
Status Conv2DPackedAddShape(InferenceContext* ctx) {
  TensorShape y;
  OF_RETURN_IF_ERROR(Conv2DPackedY(ctx, &y));
  const TensorShape& r = ctx->input_shape(3);
  bool same = r.rank() == y.rank();
  for (int i = 0; same && i < r.rank(); ++i) {
    same = IsUnknownDim(r.dim(i)) || IsUnknownDim(y.dim(i)) || r.dim(i) == y.dim(i);
  }
  if (!same) {
    return errors::InvalidArgument("argument 'residual' must have the output's shape ", y.DebugString(), ", got ",
                                   r.DebugString());
  }
  ctx->set_output_shape(0, y);
  return Status::OK();
}


// x [N, C, H, W] through each filter of attr 'filter_shapes' (4 ints per
// conv) with its window (strides / dilations 2 ints, pads 4 ints per conv):
// y [N, sum of out_channels, OH, OW], every conv's OH x OW the same.
Status Conv2DPackedConcatShape(InferenceContext* ctx) {
  const int64_t n = ctx->attr_int("N");
  const TensorShape& x = ctx->input_shape(0);
  if (x.rank() != 4) {
    return errors::InvalidArgument("argument 'x' must be 4-D [batch, channels, height, width], got shape ",
                                   x.DebugString());
  }
  int64_t o = 0, oh, ow;
  OF_RETURN_IF_ERROR(conv_shape::ConcatConvWindows(
      ctx, x, int64_t{1} << 20,
      [&](int64_t i, const int64_t* f) -> Status {
        if (!IsUnknownDim(x.dim(1)) && x.dim(1) != f[1]) {
          return errors::InvalidArgument("argument 'x' has ", x.dim(1), " channels but filter ", i,
                                         " of attr 'filter_shapes' reads ", f[1]);
        }
        if (ctx->input_shape(1 + i).rank() != 1) {
          return errors::InvalidArgument("argument 'packed' item ", i,
                                         " must be 1-D (a PackConv2DFilter output), got ",
                                         ctx->input_shape(1 + i).DebugString());
        }
        o += f[0];
        return Status::OK();
      },
      &oh, &ow));
  const TensorShape& b = ctx->input_shape(1 + n);
  if (b.rank() != 1 || (!IsUnknownDim(b.dim(0)) && b.dim(0) != o && b.dim(0) != 0)) {
    return errors::InvalidArgument("argument 'bias' must be 1-D of length ", o, " (all filters' out_channels) or "
                                   "empty, got shape ", b.DebugString());
  }
  OF_RETURN_IF_ERROR(conv_shape::CheckConvActivation(ctx));
  ctx->set_output_shape(0, TensorShape({x.dim(0), o, oh, ow}));
  return Status::OK();
}

}  // namespace

REGISTER_OP("PackConv2DFilter")
    .Input("filter: T")
    .Attr("winograd: bool = true")
    .Attr("panels: bool = true")
    .Attr("columns: bool = false")
    .Output("packed: uint8")
    .Attr("T: {float32}")
    .SetShapeFn(PackShape)
    .NoGradient()  // an opaque blob
    .Doc(R"doc(
Packs a constant Conv2D filter once for Conv2DPacked.

The blob holds the filter as the float32 GEMM's panels for this CPU's ISA
and, for a 3x3 filter with 16 or more input and output channels (when
winograd is true), its Winograd F(4x4, 3x3) transform, behind a checked
header. It is valid in this process (and processes on the same ISA); a blob
from another ISA is refused.

filter: The weights, [out_channels, in_channels, kernel_height, kernel_width] (one group).
winograd: Also store the Winograd transform of a 3x3 filter (4x the filter's size), used where the convolution takes that path.
panels: Store the GEMM panels. False (only with the Winograd transform stored) keeps the transform alone, for a filter whose every call takes the Winograd path; Conv2DPacked refuses such a blob on a call that does not.
columns: Store the panels for the transposed product (output channels across the microkernel's columns, the output pixels down its rows), for a filter whose calls have few output pixels (batch 1 at 14x14 or 7x7): a 49-pixel output then wastes no column of the register tile. Any call may use such a blob.
packed: The opaque packed filter (uint8 bytes).
)doc");

REGISTER_OP("Conv2DPacked")
    .Input("x: T")
    .Input("packed: uint8")
    .Input("bias: T")
    .Attr("filter_shape: list(int)")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("pads: list(int) = [0, 0, 0, 0]")
    .Attr("dilations: list(int) = [1, 1]")
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(Conv2DPackedShape)
    // An inference fast path over a constant weight (the ONNX importer's
    // Conv): the filter is a blob, so there is no filter gradient to give.
    .NoGradient()
    .Doc(R"doc(
activation(Conv2D(x, filter) + bias) over a filter packed once by PackConv2DFilter (one group).

The same result as FusedConv2D (Conv2D when bias is empty and activation is
'none'), without re-packing or re-transforming the filter on every call.

x: The input, [batch, in_channels, height, width].
packed: The filter, from PackConv2DFilter (checked against filter_shape).
bias: One value per output channel, or empty for none.
filter_shape: The filter's shape [out_channels, in_channels, kernel_height, kernel_width].
strides: Stride along height and width.
pads: Zero padding [top, left, bottom, right].
dilations: Dilation along height and width.
activation: 'none', 'relu', 'sigmoid', 'silu' (x * sigmoid(x)) or 'hardswish'.
y: The output, [batch, out_channels, out_height, out_width].
)doc");

REGISTER_OP("Conv2DPackedAdd")
    .Input("x: T")
    .Input("packed: uint8")
    .Input("bias: T")
    .Input("residual: T")
    .Attr("filter_shape: list(int)")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("pads: list(int) = [0, 0, 0, 0]")
    .Attr("dilations: list(int) = [1, 1]")
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(Conv2DPackedAddShape)
    .NoGradient()  // as Conv2DPacked: an inference path over a packed constant weight
    .Doc(R"doc(
activation(Conv2D(x, filter) + bias + residual) over a filter packed once by PackConv2DFilter (one group).

A ResNet block's Conv -> BatchNorm (folded) -> Add(identity) -> Relu as one
op. The residual is added to the GEMM's accumulators with the bias, before
the activation, so the sum is never stored and read back.

x: The input, [batch, in_channels, height, width].
packed: The filter, from PackConv2DFilter (checked against filter_shape).
bias: One value per output channel, or empty for none.
residual: Added before the activation; exactly the output's shape [batch, out_channels, out_height, out_width].
filter_shape: The filter's shape [out_channels, in_channels, kernel_height, kernel_width].
strides: Stride along height and width.
pads: Zero padding [top, left, bottom, right].
dilations: Dilation along height and width.
activation: 'none', 'relu', 'sigmoid', 'silu' (x * sigmoid(x)) or 'hardswish'.
y: The output, [batch, out_channels, out_height, out_width].
)doc");

REGISTER_OP("Conv2DPackedConcat")
    .Input("x: T")
    .Input("packed: N * uint8")
    .Input("bias: T")
    .Attr("N: int >= 1")
    .Attr("filter_shapes: list(int)")
    .Attr("strides: list(int)")
    .Attr("pads: list(int)")
    .Attr("dilations: list(int)")
    .Attr("activation: string = 'none'")
    .Output("y: T")
    .Attr("T: {float32}")
    .SetShapeFn(Conv2DPackedConcatShape)
    .NoGradient()  // as Conv2DPacked: an inference path over packed constant weights
    .Doc(R"doc(
Concat([activation(Conv2D(x, filter_i) + bias_i) for each packed filter], axis=1) with no Concat.

Each convolution writes straight into its channel slice of the output (a
SqueezeNet fire module's 1x1 and 3x3 expand convolutions over one input),
so the pieces are never stored apart and copied together.

x: The input, [batch, in_channels, height, width], read by every filter.
packed: The filters, each from PackConv2DFilter (checked against its filter_shapes entry).
bias: All filters' biases one after another (sum of out_channels values), or empty for none.
filter_shapes: 4 ints per filter, [out_channels, in_channels, kernel_height, kernel_width].
strides: 2 ints per filter: stride along height and width.
pads: 4 ints per filter: zero padding [top, left, bottom, right].
dilations: 2 ints per filter: dilation along height and width.
activation: 'none', 'relu', 'sigmoid', 'silu' (x * sigmoid(x)) or 'hardswish', for every filter.
y: The output, [batch, sum of out_channels, out_height, out_width]; every filter's out_height x out_width must agree.
)doc");

}  // namespace opforge
