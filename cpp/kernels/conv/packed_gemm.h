// A float32 GEMM over a filter packed once (PackConv2DFilter): the filter
// [m, k] laid out as the GEMM's A panels (kc-deep blocks of mr-high panels,
// as cpp/kernels/gemm/sgemm.cc packs A per call), so a convolution with a
// constant weight reads its filter as the microkernel wants it instead of
// re-packing it on every call (onnxruntime's prepacked conv weights).
// The columns (im2col or the input itself) are packed per call as before.
#pragma once

#include <cstdint>

#include "conv_gemm.h"

namespace opforge {
namespace conv {

// The register tile of the microkernel in use: its name (the ISA layout a
// blob records) and mr.
const char* PanelLayout();
int PanelRows();

// Floats of the panels of an m x k filter.
int64_t PanelFloats(int64_t m, int64_t k);

// Packs a (row-major [m, k]) into PanelFloats(m, k) floats (rows past m zero).
void PackPanels(const float* a, int64_t m, int64_t k, float* panels);

// C[m, n] (row stride ldc) = act(A B + bias[i] + R[i, j]) for A in panels, B
// row-major [k, n] (row stride ldb); bias and the residual R (row stride
// ldr; a ResNet block's identity) may be null. `parallel`: may split over
// the intra-op pool. `stream_b`: B is larger than L2 holds (it comes from
// L3): with few rows of panels it is packed row by row, not read in place.
void PanelGemm(const float* panels, int64_t m, int64_t n, int64_t k, const float* b, int64_t ldb, float* c,
               int64_t ldc, const float* bias, Act act, bool parallel, const float* residual = nullptr,
               int64_t ldr = 0, bool stream_b = false);

// The transposed product for few output pixels (batch 1 at 14x14 or 7x7):
// the filter packed as the microkernel's B panels (nr output channels per
// panel, PanelCols()), the pixels as its rows, so a 49-pixel output fills
// 4 row panels and a bit instead of wasting 15 of 64 columns. Same result
// and arguments as PanelGemm, with `panels` from PackColumnPanels.
int PanelCols();
int64_t ColumnPanelFloats(int64_t m, int64_t k);
void PackColumnPanels(const float* a, int64_t m, int64_t k, float* panels);
void ColumnPanelGemm(const float* panels, int64_t m, int64_t n, int64_t k, const float* b, int64_t ldb, float* c,
                     int64_t ldc, const float* bias, Act act, bool parallel, const float* residual = nullptr,
                     int64_t ldr = 0);
// The same product with the pixels as rows on both sides: Y[n, m] (row
// stride ldy) = act(A W^T + bias[i] + R[j, i]) for A [n, k] (row stride lda)
// and R [n, m] (row stride ldr, may be null). A 1x1 convolution of one pixel
// per image (an SE block's) is this with A = x and Y = y as they are: no
// transposes either way.
void ColumnPanelGemmRows(const float* panels, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, float* y,
                         int64_t ldy, const float* bias, Act act, bool parallel, const float* residual = nullptr,
                         int64_t ldr = 0);

}  // namespace conv
}  // namespace opforge
