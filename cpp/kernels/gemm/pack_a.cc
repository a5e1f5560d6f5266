// Packing of A's mr-high panels (pack_a.h), the portable loops.
#include "pack_a.h"

namespace opforge {
namespace gemm {
namespace {

// One mr-high A panel: dst[p * mr + i] = A(i, p) for i < m (rows past m are
// never read: the microkernel for m rows is called).
void PackA(const float* src, int64_t rs, int64_t cs, int64_t m, int64_t kc, int mr, float* dst) {
  if (rs == 1) {
    for (int64_t p = 0; p < kc; ++p) {
      const float* s = src + p * cs;
      for (int64_t i = 0; i < m; ++i) dst[p * mr + i] = s[i];
    }
    return;
  }
  // Row-major A: 8 depths at a time, so each source row is read in runs.
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    for (int64_t i = 0; i < m; ++i) {
      const float* s = src + i * rs + p * cs;
      for (int q = 0; q < 8; ++q) dst[(p + q) * mr + i] = s[q * cs];
    }
  }
  for (; p < kc; ++p) {
    for (int64_t i = 0; i < m; ++i) dst[p * mr + i] = src[i * rs + p * cs];
  }
}

}  // namespace

// PackA through the ISA's kernel where it has one for this layout (row-major A).
void PackAFor(const Kernels& kr, const float* src, int64_t rs, int64_t cs, int64_t m, int64_t kc, float* dst) {
  if (kr.pack_a != nullptr && cs == 1 && rs != 1) {
    kr.pack_a(src, rs, cs, m, kc, kr.mr, dst);
  } else {
    PackA(src, rs, cs, m, kc, kr.mr, dst);
  }
}

}  // namespace gemm
}  // namespace opforge
