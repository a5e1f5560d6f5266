// The AVX-512 f32 microkernel alone, on packed panels, by where its operands
// live (session 15; docs/gemm.md, "The microkernel on this Intel core"). Not built by
// CMake; from the repository root:
//
//   g++ -O3 -std=c++17 -Icpp/kernels/gemm -Icpp/kernels -o /tmp/probe bench/gemm_kernel_probe.cc
//   chrt -f 1 /tmp/probe KC PANELS LDC HUGE
//
// Calls the 12 x 32 packed kernel on PANELS A panels (kc x 12, one after the
// other: 1 keeps A in L1, 16+ streams it from L2) against one B panel (kc x
// 32, L1), each tile's C at rows LDC floats apart (32: contiguous; 2048:
// n = 2048's C, each row its own 4 KiB page, all in one L1 set), C on 2 MiB
// pages when HUGE (madvise; THP must be `madvise` or `always`). Prints
// GFLOP/s (best of 7) beside an FMA-loop peak of the same core.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../cpp/kernels/gemm/micro_avx512.cc"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__attribute__((target("avx512f,fma"), noinline)) float Spin(int64_t iters) {
  typedef float V __attribute__((vector_size(64)));
  V acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = V{} + 1.0f * i;
  V x = V{} + 0.999999f, y = V{} + 1e-7f;
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = acc[i] * x + y;
    __asm__ volatile("" : "+v"(x));
  }
  float s = 0;
  for (int i = 0; i < 24; ++i) s += acc[i][0];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int kc = argc > 1 ? std::atoi(argv[1]) : 256, na = argc > 2 ? std::atoi(argv[2]) : 16;
  const int64_t ldc = argc > 3 ? std::atoi(argv[3]) : 2048;
  const bool huge = argc > 4 && std::atoi(argv[4]) != 0;
  const opforge::gemm::Kernels* kr = opforge::gemm::Avx512Kernels();
  if (kr == nullptr || !__builtin_cpu_supports("avx512f")) return std::puts("no AVX-512"), 1;
  const int mr = kr->mr, nr = kr->nr;
  float* a = static_cast<float*>(std::aligned_alloc(64, size_t(kc) * mr * 4 * na));
  float* b = static_cast<float*>(std::aligned_alloc(64, size_t(kc) * nr * 4));
  const size_t cbytes = (size_t(ldc) * 4 * mr * na + (2 << 20)) / (2 << 20) * (2 << 20);
  float* c = static_cast<float*>(std::aligned_alloc(2 << 20, cbytes));
  if (huge) madvise(c, cbytes, MADV_HUGEPAGE);
  std::memset(c, 0, cbytes);
  for (size_t i = 0; i < size_t(kc) * mr * na; ++i) a[i] = (i % 7) * 0.01f;
  for (size_t i = 0; i < size_t(kc) * nr; ++i) b[i] = (i % 5) * 0.01f;
  for (int rep = 0; rep < 3; ++rep) {
    double best_peak = 1e9, best = 1e9;
    const int64_t spins = 200000;
    for (int t = 0; t < 7; ++t) {
      const double t0 = Now();
      volatile float s = Spin(spins);
      (void)s;
      best_peak = std::min(best_peak, Now() - t0);
    }
    const int outer = 20000000 / (kc * na);
    for (int t = 0; t < 7; ++t) {
      const double t0 = Now();
      for (int o = 0; o < outer; ++o) {
        for (int i = 0; i < na; ++i) {
          kr->packed[mr - 1](kc, a + size_t(i) * kc * mr, 1, mr, b, nr, c + size_t(i) * mr * ldc, ldc, nr, 1.0f, 1.0f);
        }
      }
      best = std::min(best, Now() - t0);
    }
    const double peak = spins * 24.0 * 32 / best_peak / 1e9, gf = double(outer) * na * kc * mr * nr * 2 / best / 1e9;
    std::printf("kc %d, %d A panels, ldc %lld%s: %.1f GFLOP/s, %.1f %% of the FMA loop's %.1f\n", kc, na,
                static_cast<long long>(ldc), huge ? " (huge pages)" : "", gf, 100 * gf / peak, peak);
  }
}
