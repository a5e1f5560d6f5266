// Run-time dispatch of attention_small.h: attention_small_isa.inc compiled
// for the portable baseline and for AVX2+FMA (each copy in its own namespace
// under a `#pragma GCC target`, no -march), picked once by the CPU's features
// and capped by OPFORGE_SIMD as vector_math.cc's loops are.
#include "attention_small.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../simd_math.h"
#include "../vector_math.h"

namespace opforge {
namespace attention {
namespace {

namespace baseline {
#include "attention_small_isa.inc"
}  // namespace baseline

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_ATT_X86 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#include "attention_small_isa.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

using HeadFn = void (*)(const SmallHead&, float*);

HeadFn Select() {
#if defined(OF_ATT_X86)
  // vector_math picks by the same rule (CPU features, OPFORGE_SIMD cap).
  if (std::strcmp(vmath::IsaName(), "baseline") != 0) return avx2::Head;
#endif
  return baseline::Head;
}

}  // namespace

void RunSmallHead(const SmallHead& h, float* scratch) {
  static const HeadFn fn = Select();
  fn(h, scratch);
}

}  // namespace attention
}  // namespace opforge
