// Run-time dispatch for vector_math.h: the loops of vector_math_isa.inc are
// compiled once per instruction set (each copy in its own namespace under a
// `#pragma GCC target`, so the default build stays portable, no -march), and
// the first call picks the widest set the CPU supports.
#include "vector_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "simd_math.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OF_VM_X86 1
#include <immintrin.h>
#endif

#define OF_LAMBDA_INLINE __attribute__((always_inline))

// Template instances of simd_math.h are reported at the end of this file:
// see the -Wpsabi note there.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace opforge {
namespace vmath {
namespace {

struct Table {
  const char* name;
  void (*unary_f32[6])(const float*, float*, int64_t, bool);
  void (*unary_f64[6])(const double*, double*, int64_t, bool);
  void (*binary_f32[4])(const float*, const float*, float*, int64_t, bool);
  void (*binary_f64[4])(const double*, const double*, double*, int64_t, bool);
  double (*sum_f32)(const float*, int64_t);
  double (*sum_f64)(const double*, int64_t);
};

// Portable: 16-byte vectors (SSE2 on x86-64, NEON on arm64, scalar elsewhere).
namespace baseline {
constexpr int kBytes = 16;
#include "vector_math_isa.inc"
}  // namespace baseline

#if defined(OF_VM_X86)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
constexpr int kBytes = 32;
#include "vector_math_isa.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
namespace avx512 {
constexpr int kBytes = 64;
#include "vector_math_isa.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

// 0 baseline, 1 avx2, 2 avx512: the best the CPU has, capped by OPFORGE_SIMD.
int SelectLevel() {
  int level = 0;
#if defined(OF_VM_X86)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = 1;
  if (level == 1 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) {
    level = 2;
  }
#endif
  if (const char* cap = std::getenv("OPFORGE_SIMD")) {
    if (std::strcmp(cap, "baseline") == 0) level = 0;
    else if (std::strcmp(cap, "avx2") == 0) level = std::min(level, 1);
  }
  return level;
}

Table MakeTable() {
  Table t;
  const int level = SelectLevel();
#if defined(OF_VM_X86)
  if (level == 2) {
    avx512::Fill(&t);
    t.name = "avx512";
    return t;
  }
  if (level == 1) {
    avx2::Fill(&t);
    t.name = "avx2";
    return t;
  }
#endif
  (void)level;
  baseline::Fill(&t);
  t.name = "baseline";
  return t;
}

const Table& Get() {
  static const Table table = MakeTable();
  return table;
}

}  // namespace

void Unary(UnaryFn f, const float* x, float* y, int64_t n, bool stream) {
  Get().unary_f32[static_cast<int>(f)](x, y, n, stream);
}
void Unary(UnaryFn f, const double* x, double* y, int64_t n, bool stream) {
  Get().unary_f64[static_cast<int>(f)](x, y, n, stream);
}
void Binary(BinaryFn f, const float* a, const float* b, float* z, int64_t n, bool stream) {
  Get().binary_f32[static_cast<int>(f)](a, b, z, n, stream);
}
void Binary(BinaryFn f, const double* a, const double* b, double* z, int64_t n, bool stream) {
  Get().binary_f64[static_cast<int>(f)](a, b, z, n, stream);
}
double Sum(const float* x, int64_t n) { return Get().sum_f32(x, n); }
double Sum(const double* x, int64_t n) { return Get().sum_f64(x, n); }
const char* IsaName() { return Get().name; }

}  // namespace vmath
}  // namespace opforge
