// bfloat16 GEMM with float32 accumulation: C = A * op(B), all row-major,
// A is M x K, op(B) is K x N (B is N x K when trans_b), C is M x N, rounded
// to bfloat16 once at the end (nearest even). The operands stay in bfloat16
// (half the bytes of float32); the dot products run on AVX512-BF16's
// vdpbf16ps (two products per float32 lane per instruction).
#pragma once

#include <cstdint>

namespace opforge {
namespace gemm {

// True when the CPU has AVX512-BF16 and OPFORGE_SIMD does not cap below
// avx512 (avx2/baseline: MatMul then widens to float32 and runs its float32
// GEMM, the AVX2 and portable paths).
bool Bf16GemmAvailable();

// "avx512_bf16", or "float32" (the widening fallback).
const char* Bf16GemmIsa();

// Requires Bf16GemmAvailable(). Elements are bfloat16 bit patterns.
void Bf16Gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
              bool trans_b, uint16_t* C, int64_t ldc);

namespace bf16_avx512 {
constexpr int MR = 12, NR = 32;
// One MR x NR tile over kp pairs of K: ap is [kp][MR] packed pairs of A, bp
// [kp][NR] packed pairs of B; rows >= m and columns >= n are not stored.
void Tile(int64_t kp, const uint32_t* ap, const uint32_t* bp, uint16_t* c, int64_t ldc, int m, int n);
}  // namespace bf16_avx512

}  // namespace gemm
}  // namespace opforge
