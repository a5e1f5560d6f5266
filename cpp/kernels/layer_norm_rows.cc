// Run-time dispatch of layer_norm_rows.h: layer_norm_rows_isa.inc compiled for
// the portable baseline and for AVX2+FMA (each copy in its own namespace
// under a `#pragma GCC target`, no -march), picked once by the CPU's features
// and capped by OPFORGE_SIMD, as vector_math.cc's loops are.
#include "layer_norm_rows.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "vector_math.h"

namespace opforge {
namespace layer_norm {
namespace {

namespace baseline {
#include "layer_norm_rows_isa.inc"
}  // namespace baseline

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_LN_X86 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#include "layer_norm_rows_isa.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

using RowsFn = void (*)(const float*, const float*, const float*, float*, int64_t, int64_t, double);

RowsFn Select() {
#if defined(OF_LN_X86)
  if (std::strcmp(vmath::IsaName(), "baseline") != 0) return avx2::RowsImpl;
#endif
  return baseline::RowsImpl;
}

}  // namespace

void Rows(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t d, double eps) {
  static const RowsFn fn = Select();
  fn(x, w, b, y, rows, d, eps);
}

}  // namespace layer_norm
}  // namespace opforge
