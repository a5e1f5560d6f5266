// Winograd F(4x4, 3x3) for float32 3x3 convolutions at stride 1: each 4x4
// output tile takes 36 multiplies per (in, out) channel pair instead of 144,
// as 36 GEMMs [out, in] x [in, tiles] between a 6x6 input transform and a
// 4x4 output transform (winograd_isa.inc). Rounding error grows a little
// (a few 1e-6 of the output's largest magnitude in float32, against 1e-7
// for im2col + GEMM, measured at 64 channels 56x56); OPFORGE_CONV_WINOGRAD=0
// turns it off.
#pragma once

#include "conv_gemm.h"
#include "conv_geometry.h"

namespace opforge {
namespace conv {

// g is a float32 convolution this path computes faster than im2col + GEMM
// (3x3, stride 1, no dilation, one group, enough channels and pixels).
bool WinogradApplies(const Geometry& g);

// y = act(conv(x, f) + bias) (bias may be null). `transposed`: f is the
// filter of the convolution whose input gradient this is ([g.c, g.o, 3, 3],
// used flipped and transposed): dx = WinogradForward(dy, ..., true).
// `u`: the filter already transformed (WinogradFilter; f unused), or null;
// `u_panels` > 0: u is the 36 matrices [o][c] each packed by PackPanels
// (packed_gemm.h), u_panels floats apart; `u_columns`: by PackColumnPanels
// instead (WinogradColumnFloats apart), any number of tiles.
// `y_img`: floats from one image's output to the next (0: o * oh * ow), so
// the output may be a channel slice of a wider tensor (a Concat's).
// `res`: y = act(conv + bias + res), res in y's layout; only where
// WinogradFusesResidual().
void WinogradForward(const Geometry& g, const float* x, const float* f, const float* bias, Act act, float* y,
                     bool transposed, const float* u = nullptr, int64_t u_panels = 0, bool u_columns = false,
                     int64_t y_img = 0, const float* res = nullptr);

// Whether WinogradForward adds a residual in its output transform (the
// AVX-512 and AVX2 ones), saving the caller a pass over y.
bool WinogradFusesResidual();

// g is a float32 3x3 convolution with too few tiles for WinogradApplies (batch
// 1 at 14x14) that Winograd still computes faster with U stored as column
// panels: 16 to 31 4x4 output tiles per call.
bool WinogradColumnsApplies(const Geometry& g);

// Floats of one of the 36 column-panel sets of U (o x c).
int64_t WinogradColumnFloats(int64_t o, int64_t c);

// Whether a prepacked filter stores U as GEMM panels: where the 36 GEMMs
// [o, c] x [c, tiles] would pack U[xi] on every call (cpp/kernels/gemm/
// sgemm.cc packs A above 64 rows, unless at most 128 rows and depth 256),
// and from 48 to 64 rows, which sgemm's small-M path reads in place in tiles
// of 8 rows where the panels run 12 (ResNet-18's 64 -> 64 at 56x56, two
// threads, node medians interleaved: batch 1 0.45-0.53 -> 0.41-0.51 ms,
// batch 8 2.96-3.36 -> 2.74-2.99).
inline bool WinogradPanelsPay(int64_t o, int64_t c) { return o >= 48 && !(o > 64 && o <= 128 && c <= 256); }

// u [36][o][c] = the transform of the filter f [o, c, 3, 3] (36 * o * c
// floats): what WinogradForward computes per call, done once for a constant
// weight (PackConv2DFilter).
void WinogradFilter(const float* f, int64_t o, int64_t c, float* u);

}  // namespace conv
}  // namespace opforge
