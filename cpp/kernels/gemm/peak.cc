// The machine's f32 FMA peak, measured (bench/ prints GFLOP/s beside it): a
// loop of independent register FMAs at the widest ISA the GEMM uses, on
// `threads` threads at once. Reached from Python through ctypes
// (bench/gemm_table.py), like opforge.config reaches blas_loader.h.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gemm.h"

namespace opforge {
namespace gemm {
namespace {

constexpr int kChains = 24;  // > latency x pipes on every current core

template <int kBytes>
struct VecOf {
  typedef float type __attribute__((vector_size(kBytes)));
};

template <int kBytes>
__attribute__((always_inline)) inline double Spin(int64_t iters) {
  using V = typename VecOf<kBytes>::type;
  V acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = V{} + 1.0f * i;
  V x = V{} + 0.999999f, y = V{} + 1e-7f;
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * x + y;
    __asm__ volatile("" : "+v"(x));  // keep the loop
  }
  float s = 0;
  for (int i = 0; i < kChains; ++i) s += acc[i][0];
  return s;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx512f,fma"))) double Spin512(int64_t n) { return Spin<64>(n); }
__attribute__((target("avx2,fma"))) double Spin256(int64_t n) { return Spin<32>(n); }
#endif
double Spin128(int64_t n) { return Spin<16>(n); }

}  // namespace

// GFLOP/s of `threads` threads each running FMAs for about `seconds`.
// Exported (opforge::*, cmake/pywrap_exports.map): ctypes finds it as
// _ZN7opforge4gemm13FmaPeakGflopsEid.
double FmaPeakGflops(int threads, double seconds) {
  const char* isa = SgemmIsa();
  int lanes = 4;
  double (*spin)(int64_t) = Spin128;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if (std::strcmp(isa, "avx512") == 0) spin = Spin512, lanes = 16;
  else if (std::strcmp(isa, "avx2") == 0) spin = Spin256, lanes = 8;
#endif
  threads = std::max(threads, 1);
  // Calibrate the iteration count on one thread.
  int64_t iters = 1 << 16;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile double sink = spin(iters);
    (void)sink;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt > 0.02) {
      iters = static_cast<int64_t>(iters * seconds / dt) + 1;
      break;
    }
    iters *= 4;
  }
  std::vector<double> secs(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const auto t0 = std::chrono::steady_clock::now();
      volatile double sink = spin(iters);
      (void)sink;
      secs[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  for (auto& th : pool) th.join();
  double total = 0;
  for (int t = 0; t < threads; ++t) total += 2.0 * kChains * lanes * iters / secs[t];
  return total / 1e9;
}

}  // namespace gemm
}  // namespace opforge
