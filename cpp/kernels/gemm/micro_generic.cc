// Portable microkernels: a 4 x 16 tile of 16-byte vectors (GCC/Clang vector
// extensions: SSE2 on x86-64, NEON on arm64). Edge columns go through a
// register-tile copy on the stack.
#include <cstdint>
#include <cstring>
#include <utility>

#include "microkernel.h"

namespace opforge {
namespace gemm {
namespace generic {
namespace {

constexpr int MR = 4, NR = 16, L = 4, NV = NR / L;
typedef float V __attribute__((vector_size(16)));

#include "pack_isa.inc"
#include "gemv_isa.inc"

template <int M, bool kPacked>
void Tile(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_ld,
          float* c, int64_t ldc, int n, float alpha, float beta) {
  if (kPacked) a_rs = 1, a_cs = MR;
  V acc[M][NV];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = V{};
  for (int64_t p = 0; p < kc; ++p) {
    V bv[NV];
    for (int j = 0; j < NV; ++j) std::memcpy(&bv[j], b + j * L, sizeof(V));
    for (int i = 0; i < M; ++i) {
      const float ai = a[i * a_rs];
      for (int j = 0; j < NV; ++j) acc[i][j] += bv[j] * ai;
    }
    a += a_cs;
    b += b_ld;
  }
  for (int i = 0; i < M; ++i) {
    float row[NR];
    for (int j = 0; j < NV; ++j) {
      const V r = acc[i][j] * alpha;
      std::memcpy(row + j * L, &r, sizeof(V));
    }
    float* ci = c + i * ldc;
    if (beta == 0.0f) {
      for (int j = 0; j < n; ++j) ci[j] = row[j];
    } else {
      for (int j = 0; j < n; ++j) ci[j] = row[j] + beta * ci[j];
    }
  }
}

template <int... Ms>
constexpr Kernels Make(std::integer_sequence<int, Ms...>) {
  return Kernels{"generic", MR, NR, {&Tile<Ms + 1, true>...}, {&Tile<Ms + 1, false>...}, &PackB<NR>, &GemvN, &GemvT, {}, {}};
}

const Kernels kKernels = Make(std::make_integer_sequence<int, MR>());

}  // namespace
}  // namespace generic

const Kernels* GenericKernels() { return &generic::kKernels; }

}  // namespace gemm
}  // namespace opforge
