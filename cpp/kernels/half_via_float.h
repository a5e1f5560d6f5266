// The float16/bfloat16 kernel that computes through the op's float32 kernel
// (half_kernels.cc): inputs widen to float32, outputs round once to the half type.
#pragma once

#include "opforge/kernel.h"

namespace opforge {

Status HalfViaFloat32(OpKernelContext* ctx);

}  // namespace opforge
