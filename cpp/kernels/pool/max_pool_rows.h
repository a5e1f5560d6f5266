// float32 max pooling, NCHW, row by row (max_pool_rows.cc): per output row a
// vertical max of the window's input rows into a -inf-bordered row, then
// per horizontal tap one vector of outputs: at column stride 1 a plain
// load, at stride 2 the even lanes of two loads (one permute), at larger
// strides a load from the row split into its stride phases. No gathers;
// any window, stride, dilation and pads; each input row is read about
// kh / sh times.
#pragma once

#include <cstdint>

namespace opforge {
namespace pool {

struct MaxPoolGeom {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
};

// Windows of up to 64 rows and 64 columns.
bool MaxPoolRowsApplies(const MaxPoolGeom& g);

// y[planes, oh, ow] = max over each window of x[planes, h, w] (a window's
// NaN wins; a window of pads only gives -inf), over the intra-op pool.
void MaxPoolRows(const MaxPoolGeom& g, const float* x, float* y);

}  // namespace pool
}  // namespace opforge
