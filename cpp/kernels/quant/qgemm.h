// opforge's 8-bit integer GEMM: C (int32) = (A - a_zero) (B - b_zero), with A
// and B each uint8 or int8, as ONNX MatMulInteger. Every combination runs as
// u8 x s8 (the operand order of the AVX-512 VNNI dot product, vpdpbusd):
// a signed A is packed as A + 128 and an unsigned B as B - 128 (one XOR of
// the sign bit), and the zero points move by the same 128. Zero points are
// not subtracted inside the loop but afterwards, from row and column sums:
//
//   sum_p (a - za)(b - zb) = sum_p a b - za colsum(b) - zb rowsum(a) + K za zb
//
// All arithmetic wraps modulo 2^32, as int32 numpy does, so results are
// exact whatever K (vpdpbusd does not saturate).
#pragma once

#include <cstdint>

namespace opforge {
namespace qgemm {

// Element (i, p) of A is a[i * rs_a + p * cs_a]; (p, j) of B is
// b[p * rs_b + j * cs_b]: transposed views (a Linear weight stored [N, K],
// im2col columns) are absorbed by the packing.
struct Args {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t rs_a = 0, cs_a = 1;
  bool a_signed = false;
  const void* b = nullptr;
  int64_t rs_b = 0, cs_b = 1;
  bool b_signed = true;
  // Zero points as int32 values (of the operand's own type): a_zero has m
  // entries when a_zero_per_row, else 1; b_zero n when b_zero_per_col.
  // nullptr means 0.
  const int32_t* a_zero = nullptr;
  bool a_zero_per_row = false;
  const int32_t* b_zero = nullptr;
  bool b_zero_per_col = false;
  int32_t* c = nullptr;
  int64_t ldc = 0;
};

// `parallel`: may split over the intra-op pool (false inside a loop that is
// itself split).
void QGemm(const Args& args, bool parallel);

// "avx512vnni", "avx2" or "generic": the microkernel in use (OPFORGE_SIMD caps
// it as for the float kernels).
const char* QGemmIsa();

}  // namespace qgemm
}  // namespace opforge
