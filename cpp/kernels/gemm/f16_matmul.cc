// The float16 GEMM driver (f16_gemm.h) and its kernels: MatMul in float16,
// PackHalfMatMulWeight and HalfMatMulPacked (cpp/ops/packed_weight_ops.cc).
//
// A is widened once per call into float32 rows padded with zeros to whole
// MR-row tiles; work items are (tile, panel) pairs ordered panel by panel,
// so a thread's consecutive tiles reuse one B panel (k * 128 bytes: 100 KiB
// at k = 784) from L2. k is not blocked: each output accumulates all of k in
// float32 and is rounded to float16 once, after bias and activation.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../half_via_float.h"
#include "../quant/packed_blob.h"
#include "f16_gemm.h"
#include "opforge/half.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace gemm {
namespace f16 {
namespace {

void GenericTile(int64_t k, const float* a, int64_t lda, const float* bp, const float* bias, bool relu, uint16_t* c,
                 int64_t ldc, int m, int n) {
  for (int i = 0; i < m; ++i) {
    float acc[NR] = {};
    for (int64_t p = 0; p < k; ++p) {
      const float ai = a[i * lda + p];
      for (int j = 0; j < NR; ++j) acc[j] += ai * bp[p * NR + j];
    }
    for (int j = 0; j < n; ++j) {
      float v = acc[j] + (bias ? bias[j] : 0.0f);
      if (relu && v < 0.0f) v = 0.0f;
      c[i * ldc + j] = half_detail::FloatToHalfBits(v);
    }
  }
}

void GenericWiden(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = half_detail::HalfBitsToFloat(src[i]);
}

struct Impl {
  const char* name;
  TileFn tile;
  WidenFn widen;
};

Impl Select() {
  bool avx512 = false;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  if (const char* cap = std::getenv("OPFORGE_SIMD")) {  // the cap the other kernels obey
    if (std::strcmp(cap, "baseline") == 0 || std::strcmp(cap, "avx2") == 0) avx512 = false;
  }
#endif
  if (avx512 && Avx512Tile() != nullptr) return Impl{"avx512", Avx512Tile(), Avx512Widen()};
  return Impl{"generic", &GenericTile, &GenericWiden};
}

const Impl& Get() {
  static const Impl impl = Select();
  return impl;
}

}  // namespace

const char* Isa() { return Get().name; }

void PackB(const uint16_t* b, int64_t rs, int64_t cs, int64_t k, int64_t n, float* panels) {
  const int64_t np = (n + NR - 1) / NR;
  ParallelFor(np, k * NR, [=](int64_t q0, int64_t q1) {
    std::vector<float> row(NR);
    for (int64_t q = q0; q < q1; ++q) {
      float* dst = panels + q * k * NR;
      const int w = static_cast<int>(n - q * NR < NR ? n - q * NR : NR);
      for (int64_t p = 0; p < k; ++p) {
        float* d = dst + p * NR;
        if (cs == 1) {
          Get().widen(b + p * rs + q * NR, d, w);
        } else {
          for (int j = 0; j < w; ++j) d[j] = half_detail::HalfBitsToFloat(b[p * rs + (q * NR + j) * cs]);
        }
        for (int j = w; j < NR; ++j) d[j] = 0.0f;
      }
    }
  });
}

void Gemm(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda, const float* panels, const float* bias,
          bool relu, uint16_t* c, int64_t ldc) {
  const Impl& impl = Get();
  const int64_t tiles = (m + MR - 1) / MR, np = (n + NR - 1) / NR;
  // Kept per thread: a fresh 100s-of-KiB buffer per call costs an mmap and page faults.
  static thread_local std::vector<float> aw;
  if (aw.size() < static_cast<size_t>(tiles * MR * k)) aw.resize(static_cast<size_t>(tiles * MR * k));
  float* af = aw.data();
  ParallelFor(tiles * MR, k, [=, &impl](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (r < m) {
        impl.widen(a + r * lda, af + r * k, k);
      } else {
        std::memset(af + r * k, 0, sizeof(float) * k);
      }
    }
  });
  // The bias of the last panel, zero-padded to NR (the tile reads NR values).
  float tail[NR] = {};
  if (bias != nullptr) {
    for (int64_t j = (np - 1) * NR; j < n; ++j) tail[j - (np - 1) * NR] = bias[j];
  }
  ParallelFor(tiles * np, MR * NR * k, [=, &impl, &tail](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t q = w / tiles, t = w % tiles;
      const int mm = static_cast<int>(m - t * MR < MR ? m - t * MR : MR);
      const int nn = static_cast<int>(n - q * NR < NR ? n - q * NR : NR);
      const float* bq = bias == nullptr ? nullptr : (nn == NR ? bias + q * NR : tail);
      impl.tile(k, af + t * MR * k, k, panels + q * k * NR, bq, relu, c + t * MR * ldc + q * NR, ldc, mm, nn);
    }
  });
}

}  // namespace f16
}  // namespace gemm

namespace {

using gemm::f16::NR;

const uint16_t* Bits(const Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data<float16>()); }

// a [..., m, k] @ b [k, n] (or b [n, k] with transpose_b): B widened into
// panels for this call. Batched b, transpose_a and 1-D operands go through
// the float32 MatMul (the widening adapter).
Status HalfMatMulKernel(OpKernelContext* ctx) {
  const Tensor& a = ctx->input(0);
  const Tensor& b = ctx->input(1);
  const bool ta = ctx->attr_bool("transpose_a"), tb = ctx->attr_bool("transpose_b");
  if (a.rank() < 2 || b.rank() != 2 || ta || a.NumElements() == 0 || b.NumElements() == 0) {
    return HalfViaFloat32(ctx);
  }
  const int64_t k = a.dim(a.rank() - 1), m = a.NumElements() / k;
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (out->NumElements() == 0) return Status::OK();
  std::vector<float> panels(static_cast<size_t>(gemm::f16::PanelFloats(k, n)));
  gemm::f16::PackB(Bits(b), tb ? 1 : n, tb ? k : 1, k, n, panels.data());
  gemm::f16::Gemm(m, n, k, Bits(a), k, panels.data(), nullptr, false,
                  reinterpret_cast<uint16_t*>(out->data<float16>()), n);
  return Status::OK();
}

Status PackHalfKernel(OpKernelContext* ctx) {
  const Tensor& b = ctx->input(0);
  const bool tb = ctx->attr_bool("transpose_b");
  const int64_t k = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64_t payload = 4 * gemm::f16::PanelFloats(k, n);
  if (packed::kHeaderBytes + payload != out->NumElements()) {
    return errors::Internal("PackHalfMatMulWeight: the blob size does not match the shape function's");
  }
  uint8_t* dst = out->data<uint8_t>();
  gemm::f16::PackB(Bits(b), tb ? 1 : n, tb ? k : 1, k, n, reinterpret_cast<float*>(dst + packed::kHeaderBytes));
  packed::Header h{};
  h.format = packed::kFormatHalf;
  packed::SetLayout(&h, "f32x32");
  h.mr = 0, h.nr = NR, h.kgroup = 1, h.wide = 0;
  h.k = k, h.n = n, h.payload_bytes = static_cast<uint64_t>(payload);
  packed::WriteHeader(h, dst);
  return Status::OK();
}

Status HalfMatMulPackedKernel(OpKernelContext* ctx) {
  const Tensor& a = ctx->input(0);
  const Tensor& blob = ctx->input(1);
  const Tensor& bias = ctx->input(2);
  const int64_t k = a.dim(a.rank() - 1), n = ctx->attr_int("n");
  packed::Header h;
  OF_RETURN_IF_ERROR(packed::ReadHeader(blob, "packed", packed::kFormatHalf, &h));
  if (std::strncmp(h.layout, "f32x32", sizeof(h.layout)) != 0 || h.nr != NR ||
      h.payload_bytes != static_cast<uint64_t>(4 * gemm::f16::PanelFloats(h.k, h.n)) ||
      blob.NumElements() != packed::kHeaderBytes + static_cast<int64_t>(h.payload_bytes)) {
    return errors::InvalidArgument("argument 'packed' is not a packed weight of this op: its layout or payload "
                                   "size does not match k = ", h.k, ", n = ", h.n);
  }
  if (h.k != k) {
    return errors::InvalidArgument("argument 'packed' holds a weight with ", h.k,
                                   " rows, but the inner dimension of argument 'a' is ", k);
  }
  if (h.n != n) {
    return errors::InvalidArgument("argument 'packed' holds a weight with ", h.n, " columns, but attr 'n' is ", n);
  }
  const std::string& act = ctx->attr_string("activation");
  if (act != "none" && act != "relu") {
    return errors::InvalidArgument("attr 'activation' must be 'none' or 'relu', got '", act, "'");
  }
  if (bias.NumElements() != 0 && bias.NumElements() != n) {  // unknown in a graph's shape check
    return errors::InvalidArgument("argument 'bias' must hold 0 or ", n, " values, got ", bias.NumElements());
  }
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (out->NumElements() == 0) return Status::OK();
  std::vector<uint8_t> copy;
  const float* panels = reinterpret_cast<const float*>(packed::Payload(blob, h, &copy));
  std::vector<float> bf;
  if (bias.NumElements() > 0) {
    bf.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) bf[j] = static_cast<float>(bias.data<float16>()[j]);
  }
  gemm::f16::Gemm(out->NumElements() / n, n, k, Bits(a), k, panels, bf.empty() ? nullptr : bf.data(), act == "relu",
                  reinterpret_cast<uint16_t*>(out->data<float16>()), n);
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("MatMul", kCPU, DType::kFloat16, HalfMatMulKernel);
REGISTER_KERNEL("PackHalfMatMulWeight", kCPU, DType::kFloat16, PackHalfKernel);
REGISTER_KERNEL("HalfMatMulPacked", kCPU, DType::kFloat16, HalfMatMulPackedKernel);

}  // namespace opforge
