// Window taps over NCHW planes, shared by the convolution and pooling
// families: max pooling runs on the depthwise convolution's stride-phased
// planes (cpp/kernels/conv/depthwise*), -inf in the pads.
#pragma once

#include <cstdint>

namespace opforge {
namespace conv {

// True when MaxPoolPlanes handles the window (equal strides up to 4, at most
// 49 taps; any dilation and pads).
bool MaxPoolPlanesApplies(int64_t kh, int64_t kw, int64_t sh, int64_t sw);

// float32 max pooling of `planes` planes x [h, w] into y [oh, ow] (pads top
// pt, left pl; the bottom and right ones implied by oh, ow), over the
// intra-op pool; a window's first NaN wins, a window of pads only gives -inf.
void MaxPoolPlanes(int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t s,
                   int64_t dh, int64_t dw, int64_t pt, int64_t pl, const float* x, float* y);

}  // namespace conv
}  // namespace opforge
