// The float32 microkernels the packed-filter GEMMs run on (packed_gemm.cc
// picks them by ISA), for the conv drivers beside it that call them
// directly (gather_gemm.cc). Internal to cpp/kernels/conv/.
#pragma once

#include "conv_gemm.h"

#ifdef OF_CONV_OWN_SGEMM
#include "../gemm/microkernel.h"

namespace opforge {
namespace conv {

const gemm::Kernels& PanelKernels();
// The microkernels' in-register activation for `act` (TileEpilogue::activation).
int PanelActivation(Act act);

}  // namespace conv
}  // namespace opforge
#endif
