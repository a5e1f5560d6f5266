// float16 GEMM with float32 accumulation over a prepacked B:
//   C = act(A B + bias), rounded to float16 once per output.
// B is widened to float32 once, into panels of NR = 32 columns ([panel][k][32],
// zero past n): PackHalfMatMulWeight does it at import for a constant weight,
// MatMul's float16 kernel per call otherwise. A (float16, row-major) is
// widened per call (F16C vcvtph2ps); the AVX-512 microkernel keeps a 12 x 32
// tile in float32 registers over all of k and rounds in its epilogue
// (vcvtps2ph, nearest even). Without AVX-512 a portable tile runs.
#pragma once

#include <cstdint>

namespace opforge {
namespace gemm {
namespace f16 {

constexpr int MR = 12, NR = 32;

// Floats of the panels of a k x n weight.
inline int64_t PanelFloats(int64_t k, int64_t n) { return (n + NR - 1) / NR * NR * k; }

// Widens B (float16 bits; element (p, j) at b[p * rs + j * cs]) into panels.
void PackB(const uint16_t* b, int64_t rs, int64_t cs, int64_t k, int64_t n, float* panels);

// C (float16 bits, row stride ldc) = act(A B + bias) for A [m, k] (float16
// bits, row stride lda); bias: n float32 values or null; relu or none.
void Gemm(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda, const float* panels, const float* bias,
          bool relu, uint16_t* c, int64_t ldc);

// "avx512" or "generic".
const char* Isa();

// One MR x NR tile over all of k: a is MR float32 rows (row stride lda; the
// driver pads A with zero rows to whole tiles), bp one
// panel [k][NR]; bias NR values (zero past n) or null. Rows >= m and columns
// >= n are not stored.
using TileFn = void (*)(int64_t k, const float* a, int64_t lda, const float* bp, const float* bias, bool relu,
                        uint16_t* c, int64_t ldc, int m, int n);
TileFn Avx512Tile();  // nullptr when not compiled for x86
// dst[i] = float(src[i]) for float16 bits (vcvtph2ps).
using WidenFn = void (*)(const uint16_t* src, float* dst, int64_t n);
WidenFn Avx512Widen();

}  // namespace f16
}  // namespace gemm
}  // namespace opforge
