// Kernel of GeluTanh (nn_ops.cc): x * sigmoid(x * (a + b x^2)) with
// a = 2 sqrt(2/pi), b = 0.044715 a. float32 runs gelu_tanh_isa.inc, compiled
// for the portable baseline, AVX2+FMA and AVX-512 (each copy in its own namespace
// under a `#pragma GCC target`, no -march) and picked once by the CPU's
// features as vector_math.cc's loops are: one pass instead of the six
// elementwise passes of the composed form (about 10 % of GPT-2's time).
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "simd_math.h"
#include "vector_math.h"

namespace opforge {
namespace {

constexpr double kA = 1.5957691216057308;  // 2 sqrt(2/pi)
constexpr double kB = kA * 0.044715;

namespace baseline {
constexpr int kBytes = 32;
using Scale = simd::GenericScale<float, kBytes>;
#include "gelu_tanh_isa.inc"
}  // namespace baseline

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_GELU_TANH_X86 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
constexpr int kBytes = 32;
using Scale = simd::GenericScale<float, kBytes>;
#include "gelu_tanh_isa.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
namespace avx512 {
constexpr int kBytes = 64;
using V16 = simd::Vec<float, 64>::V;
struct Scale {  // p * 2^n in one vscalef (as vector_math's AVX-512 loops)
  static inline V16 Apply(const V16& p, const V16& n, const V16&) {
    return (V16)_mm512_maskz_scalef_ps(__mmask16(0xFFFF), (__m512)p, (__m512)n);
  }
};
#include "gelu_tanh_isa.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

using RowFn = void (*)(const float*, float*, int64_t);

RowFn Select() {
#if defined(OF_GELU_TANH_X86)
  const char* isa = vmath::IsaName();  // the CPU's features, capped by OPFORGE_SIMD
  if (std::strcmp(isa, "avx512") == 0) return avx512::GeluTanhRow;
  if (std::strcmp(isa, "baseline") != 0) return avx2::GeluTanhRow;
#endif
  return baseline::GeluTanhRow;
}

Status GeluTanhF32(OpKernelContext* ctx) {
  static const RowFn fn = Select();
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const float* in = ctx->input(0).data<float>();
  float* out = y->data<float>();
  ParallelFor(y->NumElements(), 24, [&](int64_t b, int64_t e) { fn(in + b, out + b, e - b); });
  return Status::OK();
}

Status GeluTanhF64(OpKernelContext* ctx) {
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const double* in = ctx->input(0).data<double>();
  double* out = y->data<double>();
  ParallelFor(y->NumElements(), 40, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      // x * sigmoid(2z): 0.5 x (1 + tanh z) cancels in the negative tail.
      const double x = in[i], u = x * (kA + kB * (x * x)), e = std::exp(-std::fabs(u)), r = 1.0 / (1.0 + e);
      out[i] = x * (u >= 0 ? r : e * r);
    }
  });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("GeluTanh", kCPU, DType::kFloat32, GeluTanhF32);
REGISTER_KERNEL("GeluTanh", kCPU, DType::kFloat64, GeluTanhF64);

}  // namespace opforge
