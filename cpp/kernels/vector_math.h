// Vectorized loops over contiguous float32/float64 buffers, compiled for
// several instruction sets (AVX-512, AVX2+FMA, a portable baseline) and
// dispatched once at run time on the CPU's features. The loops are serial;
// kernels split work with ParallelFor and call them per chunk.
//
// OPFORGE_SIMD=baseline|avx2|avx512 caps the instruction set (tests use it to
// check every code path on one machine).
#pragma once

#include <cstdint>

namespace opforge {
namespace vmath {

// kGelu: x * Phi(x), the erf form (float32: simd::GeluErf; float64: std::erf).
enum class UnaryFn { kExp, kLog, kTanh, kSigmoid, kSqrt, kGelu };
enum class BinaryFn { kAdd, kSub, kMul, kDiv };

// y[i] = f(x[i]) for i in [0, n). `stream`: write y with non-temporal stores
// (for outputs far larger than the caches: saves the read-for-ownership).
void Unary(UnaryFn f, const float* x, float* y, int64_t n, bool stream);
void Unary(UnaryFn f, const double* x, double* y, int64_t n, bool stream);

// z[i] = a[i] op b[i] for i in [0, n).
void Binary(BinaryFn f, const float* a, const float* b, float* z, int64_t n, bool stream);
void Binary(BinaryFn f, const double* a, const double* b, double* z, int64_t n, bool stream);

// Sum of x[0, n), accumulated in double. The summation order depends only on
// n and the instruction set, never on the caller's thread count.
double Sum(const float* x, int64_t n);
double Sum(const double* x, int64_t n);

// Outputs at least this large are written with streaming stores: they would
// not stay cached anyway (half a typical last-level cache; sysconf's figure
// is unreliable in VMs), and streaming saves reading each line before
// overwriting it.
inline int64_t StreamThresholdBytes() { return int64_t{16} << 20; }

// The instruction set in use: "avx512", "avx2" or "baseline".
const char* IsaName();

}  // namespace vmath
}  // namespace opforge
