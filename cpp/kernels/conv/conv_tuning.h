// Convolution block sizes that differ by CPU, chosen at run time from what
// the CPU reports (they were tuned on a Zen 5 machine first; the Intel ones
// were measured on a Sapphire-Rapids-class Xeon).
#pragma once

#include <cstdint>

namespace opforge {
namespace conv {

// Whether the conv kernels use their Intel settings: the CPU's vendor is
// Intel (CPUID), unless OPFORGE_CONV_TUNING=amd or =intel says otherwise
// (for benches and tests on either machine).
bool IntelTuning();

// The most tiles in one Winograd block (a multiple of 32) for c input and o
// output channels.
int64_t WinogradMostTiles(int64_t c, int64_t o);

}  // namespace conv
}  // namespace opforge
