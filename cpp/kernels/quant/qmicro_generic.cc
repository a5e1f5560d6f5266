// Portable microkernels: a 4 x 16 tile over the byte format of the VNNI
// kernel (u8 A, s8 B, groups of four depths), in plain C++ the compiler may
// vectorize for the baseline ISA.
#include <cstdint>
#include <utility>

#include "qmicrokernel.h"

namespace opforge {
namespace qgemm {
namespace generic {
namespace {

constexpr int MR = 4, NR = 16, KG = 4;

template <int M>
void Tile(int64_t kq, const void* av, const void* bv, int32_t* c, int64_t ldc, int n, bool accumulate) {
  const uint8_t* a = static_cast<const uint8_t*>(av);
  const int8_t* b = static_cast<const int8_t*>(bv);
  uint32_t acc[M][NR] = {};  // unsigned: wraps as int32 numpy does, without UB
  for (int64_t q = 0; q < kq; ++q) {
    for (int i = 0; i < M; ++i) {
      const uint8_t* ai = a + i * KG;
      for (int j = 0; j < NR; ++j) {
        const int8_t* bj = b + j * KG;
        acc[i][j] += static_cast<uint32_t>(ai[0] * bj[0] + ai[1] * bj[1] + ai[2] * bj[2] + ai[3] * bj[3]);
      }
    }
    a += MR * KG;
    b += NR * KG;
  }
  for (int i = 0; i < M; ++i) {
    int32_t* ci = c + i * ldc;
    for (int j = 0; j < n; ++j) {
      ci[j] = static_cast<int32_t>((accumulate ? static_cast<uint32_t>(ci[j]) : 0u) + acc[i][j]);
    }
  }
}

template <int... Ms>
constexpr QKernels Make(std::integer_sequence<int, Ms...>) {
  return QKernels{"generic", MR, NR, KG, false, {&Tile<Ms + 1>...}, {}};
}

const QKernels kKernels = Make(std::make_integer_sequence<int, MR>());

}  // namespace
}  // namespace generic

const QKernels* GenericKernels() { return &generic::kKernels; }

}  // namespace qgemm
}  // namespace opforge
