// The microkernel table shared by the per-ISA files and the driver.
// Internal to cpp/kernels/gemm/.
#pragma once

#include <cstdint>

namespace opforge {
namespace gemm {

// C[i, j] = alpha * sum_{p < kc} A(i, p) B(p, j) + beta * C[i, j] (C not read
// when beta == 0), for i < m <= mr, j < n <= nr, where A(i, p) =
// a[i * a_rs + p * a_cs] and row p of B is the nr floats at b + p * b_ld (all
// readable: the driver pads edge panels). One function per m, so edge rows
// run the same register code, only shorter.
using MicroFn = void (*)(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                         int64_t b_ld, float* c, int64_t ldc, int n, float alpha, float beta);

constexpr int kMaxMR = 16;

// The epilogue of one register tile, applied to the accumulators before the
// store (last depth block only): v = alpha * acc + beta * C; v += bias;
// v = act(v); v += residual (residual_first: v += residual before act, a
// ResNet block's Conv -> Add -> Relu). Pointers are at the tile's first row /
// column, null when absent; activation is a gemm::Activation or
// kTileHardSwish.
struct TileEpilogue {
  const float* bias_col;  // bias_col[j], j < n
  const float* bias_row;  // bias_row[i], i < m
  int activation;
  const float* residual;  // residual[i * residual_ld + j]
  int64_t residual_ld;
  bool residual_first = false;
};

// TileEpilogue::activation past gemm::Activation's values: x * clamp(x / 6 +
// 1/2, 0, 1), ONNX HardSwish (the convolutions' epilogue; MobileNetV3).
constexpr int kTileHardSwish = 16;
using MicroEpiFn = void (*)(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                            int64_t b_ld, float* c, int64_t ldc, int n, float alpha, float beta,
                            const TileEpilogue& ep);

struct Kernels {
  const char* name;
  int mr, nr;
  MicroFn packed[kMaxMR];   // a is a packed panel: a_rs == 1, a_cs == mr
  MicroFn strided[kMaxMR];  // a read in place, any strides
  // B micro-panel packing (kc x nr, zero-padded past n): dst[p * nr + j] =
  // src[p * rs + j * cs].
  void (*pack_b)(const float* src, int64_t rs, int64_t cs, int64_t n, int64_t kc, float* dst);
  // M = 1 with row p of B contiguous at b + p * b_rs: c[j] = alpha * sum_p
  // a[p * a_cs] B[p, j] + beta * c[j], j < n.
  void (*gemv_n)(int64_t k, const float* a, int64_t a_cs, const float* b, int64_t b_rs, float* c,
                 int64_t n, float alpha, float beta);
  // M = 1 with column j of B contiguous at b + j * b_cs (a weight stored
  // [N, K]): c[j] = alpha * dot(a, B[:, j]) + beta * c[j]; a contiguous.
  void (*gemv_t)(int64_t k, const float* a, const float* b, int64_t b_cs, float* c, int64_t n,
                 float alpha, float beta);
  // packed / strided with the epilogue in registers; all null where an ISA
  // has none (the driver then runs ApplyEpilogue over the stored tile).
  MicroEpiFn packed_epi[kMaxMR];
  MicroEpiFn strided_epi[kMaxMR];
  // One mr-high A panel, as sgemm.cc's PackA lays it out (dst[p * mr + i] =
  // src[i * rs + p * cs], rows past m left unspecified); null: PackA's
  // portable loop.
  void (*pack_a)(const float* src, int64_t rs, int64_t cs, int64_t m, int64_t kc, int mr, float* dst) = nullptr;
  // a packed panel (as packed[]), B's rows read in place (b_ld apart); null
  // where an ISA has none.
  MicroFn packed_a[kMaxMR] = {};
  MicroEpiFn packed_a_epi[kMaxMR] = {};
};

// M = 1, B's rows contiguous, on `threads` threads split along the depth
// (gemv_threaded.cc). False: not that case (the caller's tile grid runs it).
struct StridedArgs;
struct Epilogue;
bool GemvSplitDepth(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, int64_t threads);

// More than 64 rows, at most nr / 2 columns, B's columns contiguous (a
// weight stored [N, K]) and A's rows contiguous: row dot products through
// gemv_t, rows split over the threads when `parallel` (skinny.cc). False:
// not that case.
bool SkinnyRows(const StridedArgs& g, const Epilogue& ep, const Kernels& kr, bool parallel);

const Kernels* Avx512Kernels();  // nullptr when not compiled for x86
const Kernels* Avx2Kernels();
const Kernels* GenericKernels();

}  // namespace gemm
}  // namespace opforge
