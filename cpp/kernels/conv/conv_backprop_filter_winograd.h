// The filter gradient of a float32 3x3 stride-1 convolution by Winograd
// F(3x3, 4x4): each 4x4 tile of dy and the 6x6 tile of x it sees give their
// 3x3 contribution to dW[o, c] with 36 multiplies instead of 144. The
// transform is the adjoint of the forward F(4x4, 3x3) (winograd.h):
//   dW[o, c] = G^T [ sum over tiles (A dY A^T) (.) (B^T X B) ] G
// (G, B^T, A^T the forward's matrices), i.e. 36 GEMMs [o, tiles] x [tiles, c]
// accumulated over tile blocks, then one output transform per (o, c).
// Rounding error: a few 1e-6 of the gradient's largest magnitude at 64
// channels 56x56 (im2col + GEMM about 1e-7). OPFORGE_CONV_WINOGRAD=0 turns it
// off, as for the forward.
#pragma once

#include "conv_geometry.h"

namespace opforge {
namespace conv {

// g's filter gradient (float32) runs here: WinogradApplies(g) (3x3, stride
// 1, no dilation, one group, 16+ channels each way) and 128+ tiles of 4x4
// outputs in the batch.
bool WinogradBackpropFilterApplies(const Geometry& g);

// df [o, c, 3, 3] = the filter gradient of x [n, c, h, w] against dy [n, o, oh, ow].
void WinogradBackpropFilter(const Geometry& g, const float* x, const float* dy, float* df);

}  // namespace conv
}  // namespace opforge
