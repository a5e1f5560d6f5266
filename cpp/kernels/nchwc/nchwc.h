// The NCHWc convolution's geometry, shared by the dispatch (nchwc_kernels.cc)
// and the per-ISA loops (nchwc_isa.inc).
#pragma once

#include <cstdint>

namespace opforge {
namespace nchwc {

enum Act { kNone = 0, kRelu, kSigmoid, kSilu, kHardSwish };

struct ConvArgs {
  const float* x;
  const float* w;
  const float* bias;  // ob * B floats, or null
  const float* res;   // y's shape, or null
  const float* scale; // [n, icb, B] factors of x's channels, or null
  float* y;
  // Output blocks per image of y's buffer: ob, or more where y is a slice of
  // a Concat's output (Conv2DNchwcConcat: each conv writes its blocks in place).
  int64_t y_ob = 0;
  int64_t n, icb, ib, c;  // images; input blocks; lanes per input block (B, or C for NCHW input); channels
  int64_t h, w_, oh, ow, ob, kh, kw, sh, sw, dh, dw, pt, pl;
  // Floats between input elements: image, block, lane, row, column.
  int64_t x_img, x_blk, x_lane, x_row, x_pix;
  int act;
  // Output columns [ox_lo, ox_hi) read no padding column at any tap.
  int64_t ox_lo, ox_hi;
  // Rows of 3 or 4 output blocks run as DenseRowTaps (nchwc_taps_isa.inc):
  // Intel, blocks of 16, an NCHWc input of full blocks, x's columns padded.
  bool taps = false;
  // Units with output rows outside the groups of output blocks (each thread
  // a band of rows over all blocks), not groups outside rows.
  bool rows_outer = false;
};

// The reorders (nchwc_reorder.cc) in units of (image, channel block, chunk
// of pixels), ReorderUnits of them: NCHW x [n, c, hw] into NCHWc y [n, cb,
// hw, b] (lanes past c zero), and back.
int64_t ReorderUnits(int64_t n, int64_t cb, int64_t hw);
void ReorderToRange(const float* x, int64_t c, int64_t cb, int64_t hw, int64_t b, float* y, int64_t u0, int64_t u1);
void ReorderFromRange(const float* x, int64_t c, int64_t cb, int64_t hw, int64_t b, float* y, int64_t u0,
                      int64_t u1);

// Max pooling over NCHWc planes: units (image, block, output row).
struct PoolArgs {
  const float* x;
  float* y;
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
};

// The vector loops of one instruction set (nchwc_isa.inc, one translation
// unit each: compiled together they were the build's longest step).
struct Table {
  int64_t (*dense_units)(const ConvArgs&);
  void (*dense[2])(const ConvArgs&, int64_t, int64_t);
  void (*depthwise[2])(const ConvArgs&, int64_t, int64_t);
  void (*mean[2])(const float*, int64_t, float*, int64_t, int64_t);
  void (*max_pool[2])(const PoolArgs&, int64_t, int64_t);
};
namespace baseline { const Table& Functions(); }
namespace avx2 { const Table& Functions(); }
namespace avx512 { const Table& Functions(); }

}  // namespace nchwc
}  // namespace opforge
