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
// A float32 result instead of the int32 one: y[i, j] = float(c[i, j] +
// off[j]) * scale[j] + bias[j], then relu (off and bias may be null; off
// wraps, a zero-point correction that is one per column). Written over C's
// bytes; the VNNI microkernel applies it to the tile in its registers.
struct FloatEpilogue {
  const float* scale = nullptr;
  const float* bias = nullptr;
  const uint32_t* off = nullptr;
  bool relu = false;
};

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
  // Prepacked B (PackPanels, below; a constant weight packed once): b and
  // b_zero are then unused, and b_zero_eff (the n zero points, already
  // shifted for the packing) and b_colsum (the n column sums of the packed
  // bytes) come with the panels.
  const void* b_packed = nullptr;
  const int32_t* b_zero_eff = nullptr;
  const uint32_t* b_colsum = nullptr;
  // Called on each finished tile of C (rows i0..i0+m, columns j0..j0+n),
  // after the zero points are applied, while it is in cache: an epilogue
  // (e.g. rescaling to float32 in place).
  void (*finish)(const void* ctx, int32_t* c, int64_t ldc, int64_t i0, int m, int64_t j0, int n) = nullptr;
  const void* finish_ctx = nullptr;
  // Set: C's tiles end as float32 (FloatEpilogue), after the zero points
  // and before `finish`.
  const FloatEpilogue* epilogue = nullptr;
};

// `parallel`: may split over the intra-op pool (false inside a loop that is
// itself split).
void QGemm(const Args& args, bool parallel);

// The packed-panel layout of the microkernel in use (a prepacked B is only
// valid for the layout it was packed for).
struct Layout {
  const char* isa;
  int mr, nr, kgroup;
  bool wide;  // int16 panels (AVX2) rather than bytes
};
Layout CurrentLayout();

// Bytes of the panels of a K x N operand packed for CurrentLayout().
int64_t PackedPanelBytes(int64_t k, int64_t n);

// Packs all of B (g.b, its strides, b_signed, b_zero; g.k, g.n) into
// `panels` (PackedPanelBytes bytes, 64-byte aligned), and its n effective
// zero points and column sums, for QGemm with Args::b_packed.
void PackPanels(const Args& g, void* panels, int32_t* zb_eff, uint32_t* colsum);

// "avx512vnni", "avx2" or "generic": the microkernel in use (OPFORGE_SIMD caps
// it as for the float kernels).
const char* QGemmIsa();

}  // namespace qgemm
}  // namespace opforge
