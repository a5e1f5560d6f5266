// The bfloat16 GEMM driver (bf16_gemm.h) and MatMul's bfloat16 kernel.
//
// B is packed once into NR-column panels of K pairs ([panel][K/2][NR] of
// uint32: two bfloat16 of consecutive k per lane, as vdpbf16ps reads them),
// zero-padded at the edges; A is packed per block of MC rows into MR-row
// panels of pairs. Threads split the row blocks; a B panel (K/2 * NR * 4
// bytes, 64 KiB at K = 1024) serves every MR tile of a block from L2.
// K is not blocked: each output accumulates all of K in float32 and is
// rounded to bfloat16 once.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "../half_via_float.h"
#include "bf16_gemm.h"
#include "opforge/half.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace gemm {
namespace {

using bf16_avx512::MR;
using bf16_avx512::NR;
constexpr int64_t kMC = 96;  // rows of A packed at a time (8 MR tiles)

bool Detect() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  if (const char* cap = std::getenv("OPFORGE_SIMD")) {
    if (std::strcmp(cap, "baseline") == 0 || std::strcmp(cap, "avx2") == 0) ok = false;
  }
  return ok;
#else
  return false;
#endif
}

struct Free {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
std::unique_ptr<T[], Free> AlignedArray(int64_t n) {
  const size_t bytes = ((static_cast<size_t>(n) * sizeof(T) + 63) / 64) * 64;
  return std::unique_ptr<T[], Free>(static_cast<T*>(std::aligned_alloc(64, bytes ? bytes : 64)));
}

inline uint32_t Pair(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16); }

}  // namespace

bool Bf16GemmAvailable() {
  static const bool available = Detect();
  return available;
}

const char* Bf16GemmIsa() { return Bf16GemmAvailable() ? "avx512_bf16" : "float32"; }

void Bf16Gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
              bool trans_b, uint16_t* C, int64_t ldc) {
  const int64_t kp = (K + 1) / 2;
  const int64_t panels = (N + NR - 1) / NR;
  auto bpack = AlignedArray<uint32_t>(panels * kp * NR);
  uint32_t* bp_all = bpack.get();
  auto b_at = [=](int64_t k, int64_t j) -> uint16_t {
    if (k >= K || j >= N) return 0;
    return trans_b ? B[j * ldb + k] : B[k * ldb + j];
  };
  ParallelFor(panels, kp * NR, [=](int64_t pb, int64_t pe) {
    for (int64_t q = pb; q < pe; ++q) {
      uint32_t* dst = bp_all + q * kp * NR;
      for (int64_t p = 0; p < kp; ++p) {
        for (int j = 0; j < NR; ++j) dst[p * NR + j] = Pair(b_at(2 * p, q * NR + j), b_at(2 * p + 1, q * NR + j));
      }
    }
  });
  const int64_t blocks = (M + kMC - 1) / kMC;
  ParallelFor(blocks, kMC * N * kp, [=](int64_t bb, int64_t be) {
    auto apack = AlignedArray<uint32_t>(kMC * kp);
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t r0 = blk * kMC;
      const int64_t rows = M - r0 < kMC ? M - r0 : kMC;
      const int64_t tiles = (rows + MR - 1) / MR;
      for (int64_t t = 0; t < tiles; ++t) {  // [tile][kp][MR]
        uint32_t* dst = apack.get() + t * kp * MR;
        for (int i = 0; i < MR; ++i) {
          const int64_t r = r0 + t * MR + i;
          if (r >= M) {
            for (int64_t p = 0; p < kp; ++p) dst[p * MR + i] = 0;
            continue;
          }
          const uint16_t* row = A + r * lda;
          const int64_t full = K / 2;
          for (int64_t p = 0; p < full; ++p) dst[p * MR + i] = Pair(row[2 * p], row[2 * p + 1]);
          if (K % 2) dst[full * MR + i] = Pair(row[K - 1], 0);
        }
      }
      for (int64_t q = 0; q < panels; ++q) {
        const int n = static_cast<int>(N - q * NR < NR ? N - q * NR : NR);
        for (int64_t t = 0; t < tiles; ++t) {
          const int m = static_cast<int>(rows - t * MR < MR ? rows - t * MR : MR);
          bf16_avx512::Tile(kp, apack.get() + t * kp * MR, bp_all + q * kp * NR, C + (r0 + t * MR) * ldc + q * NR,
                            ldc, m, n);
        }
      }
    }
  });
}

}  // namespace gemm

namespace {

// a [..., m, k] @ b [k, n] (or b [n, k] with transpose_b) on the bfloat16
// GEMM; everything else (batched b, transpose_a, 1-D operands, a CPU
// without AVX512-BF16) computes through the float32 MatMul.
Status BFloat16MatMulKernel(OpKernelContext* ctx) {
  const Tensor& a = ctx->input(0);
  const Tensor& b = ctx->input(1);
  const bool ta = ctx->attr_bool("transpose_a"), tb = ctx->attr_bool("transpose_b");
  if (!gemm::Bf16GemmAvailable() || a.rank() < 2 || b.rank() != 2 || ta || a.NumElements() == 0 ||
      b.NumElements() == 0) {
    return HalfViaFloat32(ctx);
  }
  const int64_t K = a.dim(a.rank() - 1);
  const int64_t M = a.NumElements() / K;
  const int64_t N = tb ? b.dim(0) : b.dim(1);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (out->NumElements() == 0) return Status::OK();
  static_assert(sizeof(bfloat16) == sizeof(uint16_t), "bfloat16 is its bits");
  gemm::Bf16Gemm(M, N, K, reinterpret_cast<const uint16_t*>(a.data<bfloat16>()), K,
                 reinterpret_cast<const uint16_t*>(b.data<bfloat16>()), tb ? K : N, tb,
                 reinterpret_cast<uint16_t*>(out->data<bfloat16>()), N);
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("MatMul", kCPU, DType::kBFloat16, BFloat16MatMulKernel);

}  // namespace opforge
