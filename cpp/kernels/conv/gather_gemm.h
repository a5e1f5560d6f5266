// A convolution's GEMM with its column matrix never written (implicit
// GEMM): the input is split once into phase planes (one per stride phase,
// zero-padded; only the phases some tap reads), where every row of the
// column matrix is a run of a plane, and each 32-pixel panel of B is
// copied straight from them into the microkernel's layout. Replaces im2col (a write of the whole column matrix
// and a re-read to pack it: 17% of SqueezeNet's 7x7 stride-2 stem).
#pragma once

#include <cstdint>

#include "conv_gemm.h"
#include "conv_geometry.h"

namespace opforge {
namespace conv {

// Whether GatherGemm runs g with filter panels from PackPanels: up to four
// 256-deep blocks (K <= 1024) and the filter's panels few enough (<= 16
// row panels) to stay in L2 while every pixel panel streams past them; the
// own GEMM built in.
bool GatherGemmApplies(const Geometry& g);

// One image: y [o, oh * ow] = act(conv(x) + bias) for x [c, h, w] and the
// filter's panels (PackPanels of [o, c * kh * kw]); `parallel`: may split
// the pixel panels over the intra-op pool.
void GatherGemm(const Geometry& g, const float* x, const float* panels, const float* bias, Act act, float* y,
                bool parallel);

}  // namespace conv
}  // namespace opforge
