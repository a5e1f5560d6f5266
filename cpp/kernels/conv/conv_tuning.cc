// conv_tuning.h: the per-CPU choices, each with the measurement behind it.
#include "conv_tuning.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace opforge {
namespace conv {

bool IntelTuning() {
  static const bool intel = [] {
    const char* e = std::getenv("OPFORGE_CONV_TUNING");
    if (e != nullptr && std::strcmp(e, "intel") == 0) return true;
    if (e != nullptr && std::strcmp(e, "amd") == 0) return false;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    return __builtin_cpu_is("intel") != 0;
#else
    return false;
#endif
  }();
  return intel;
}

int64_t WinogradMostTiles(int64_t c, int64_t o) {
  // Zen 5: as wide as keeps a slice V[xi] ([C][tb]) or M[xi] ([O][tb]) at
  // 64 KiB (all 36 of them, kept per thread, 2.3 MiB).
  const int64_t zen = std::max<int64_t>(32, std::min<int64_t>(256, 16384 / std::max(c, o) / 32 * 32));
  // Intel (Xeon, 48 KiB L1d, 2 MiB L2): one 32-tile column panel per block,
  // so a product's V[xi] and M[xi] slices stay in L1 beside U[xi]. One
  // thread, CPU time, Conv2DPacked 3x3 with the import's blob, tb 256 -> 32:
  // 64 -> 64 at 56x56 b1 1.66 -> 1.21 ms (onnxruntime 1.35-1.45 in
  // ResNet-18), b8 15.3 -> 12.7; 128 -> 128 at 28x28 b8 10.5 -> 7.6;
  // 256 -> 256 at 14x14 b8 7.6 -> 6.2.
  return IntelTuning() ? 32 : zen;
}

}  // namespace conv
}  // namespace opforge
