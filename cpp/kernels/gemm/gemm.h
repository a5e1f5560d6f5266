// opforge's own single-precision GEMM (BLIS-style: packed panels sized to the
// caches, register-tile microkernels per ISA chosen at run time, threads over
// the intra-op pool) with a fused epilogue. Used by MatMul / MatMulGrad and
// the fused ops; convolution lowers onto it.
//
//   C = act(alpha * op(A) op(B) + beta * C + bias) + residual
//
// All matrices row-major; op(X) = X or X^T. op(A) is M x K, op(B) is K x N,
// C is M x N with row stride ldc. beta == 0 never reads C (NaNs there vanish).
#pragma once

#include <cstdint>

namespace opforge {
namespace gemm {

enum class Activation { kNone, kRelu, kGelu /* exact, erf form */, kSilu, kSigmoid };
enum class BiasKind { kNone, kPerRow /* bias[i], length M */, kPerColumn /* bias[j], length N */ };

// Applied to each output tile right after its last K block, while it is hot
// in L1. Default-constructed: nothing.
struct Epilogue {
  BiasKind bias_kind = BiasKind::kNone;
  const float* bias = nullptr;
  Activation activation = Activation::kNone;
  const float* residual = nullptr;  // M x N, row stride residual_ld; added last
  int64_t residual_ld = 0;

  bool empty() const {
    return bias_kind == BiasKind::kNone && activation == Activation::kNone && residual == nullptr;
  }
};

// The BLAS-like entry (lda, ldb: row strides of A and B as stored).
void Sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const Epilogue& epilogue = Epilogue());

// The general form: element (i, p) of op(A) is a[i * rs_a + p * cs_a], (p, j)
// of op(B) is b[p * rs_b + j * cs_b] (any strides, 0 included: broadcasts),
// so transposed and strided views are absorbed by the packing, never copied.
// `parallel`: may split over the intra-op pool (false inside a batch loop
// that is itself split).
struct StridedArgs {
  int64_t m, n, k;
  float alpha;
  const float* a;
  int64_t rs_a, cs_a;
  const float* b;
  int64_t rs_b, cs_b;
  float beta;
  float* c;
  int64_t ldc;
  // B packed once (PackBPanels, a constant weight): when set, B is read from
  // these panels and b, rs_b, cs_b are ignored.
  const float* b_panels = nullptr;
};
void SgemmStrided(const StridedArgs& args, const Epilogue& epilogue, bool parallel);

// B packed once for SgemmStrided's b_panels: panels of SgemmPanelWidth()
// columns over the whole depth, [panel][k][nr], zero past n (the layout the
// microkernels read, so no call packs B again). Element (p, j) of B is
// b[p * rs + j * cs]. Split over the intra-op pool.
int SgemmPanelWidth();
inline int64_t PackedBFloats(int64_t k, int64_t n, int nr) { return (n + nr - 1) / nr * nr * k; }
void PackBPanels(const float* b, int64_t rs, int64_t cs, int64_t k, int64_t n, float* panels);

// "avx512", "avx2" or "generic": the microkernel in use (OPFORGE_SIMD caps it
// as for the elementwise kernels).
const char* SgemmIsa();

// Measured f32 FMA throughput of `threads` threads for about `seconds` each
// (peak.cc): the bench's reference for "% of peak".
double FmaPeakGflops(int threads, double seconds);

}  // namespace gemm
}  // namespace opforge
