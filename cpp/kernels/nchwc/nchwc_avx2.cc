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

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define OF_NCHWC_X86 1  // the .inc's intrinsics (the reciprocal estimate)
#pragma GCC target("avx2,fma")
namespace opforge {
namespace nchwc {
namespace avx2 {
using int64 = int64_t;
constexpr int kBytes = 32;
#include "nchwc_isa.inc"
}  // namespace avx2
}  // namespace nchwc
}  // namespace opforge
#endif
