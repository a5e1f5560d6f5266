// One instruction set's NCHWc loops (nchwc_isa.inc; see nchwc.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nchwc.h"
#include "opforge/parallel.h"

#include "../common/rational_logistic.h"
#include "../simd_math.h"
#include "../vector_math.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace opforge {
namespace nchwc {
namespace baseline {
using int64 = int64_t;
constexpr int kBytes = 16;
#include "nchwc_isa.inc"
}  // namespace baseline
}  // namespace nchwc
}  // namespace opforge
