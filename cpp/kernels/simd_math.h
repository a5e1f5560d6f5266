// Portable SIMD building blocks for kernels: GCC/Clang vector types of any
// width and branch-free float32/float64 exp, log, tanh and sigmoid on them.
//
// Everything here is an always-inline template over (T, kBytes), written
// with vector extensions only (no intrinsics), so one source compiles to
// SSE2, AVX2+FMA or AVX-512 code depending on the `target` of the function
// it is inlined into (see vector_math.cc for the run-time dispatch).
//
// Accuracy, max error in ulps of the result over random bit patterns, full
// ranges and edge regions (tests/test_math_accuracy.py asserts the bounds):
//   Exp      f32 1.0  f64 1.0   Cody-Waite reduction; Cephes minimax (f32),
//                               Taylor to r^13 (f64)
//   Log      f32 0.8  f64 0.8   Cephes logf; fdlibm log
//   Tanh     f32 1.3  f64 1.3   (bound 1.5) odd minimax below 0.625, else
//                               1 - 2 / (e^2|x| + 1)
//   Sigmoid  f32 2.7  f64 2.7   (bound 3) 1 / (1 + e^-|x|), mirrored
//   Sqrt     correctly rounded (the hardware instruction)
// Special values follow IEEE/numpy: exp(+-inf) = inf/0, overflow to inf,
// gradual underflow into denormals, log(+-0) = -inf, log(x<0) = NaN,
// log(denormal) accurate, tanh(-0) = -0, NaN in -> NaN out. Results do not
// depend on the instruction set beyond these bounds (FMA contraction).
#pragma once

#include <cstdint>
#include <cstring>

// Vectors go by const reference and the header silences -Wpsabi: GCC notes
// that 32/64-byte vectors change the ABI where AVX is off, but these
// always-inline helpers never make a real call.
#define OF_SIMD_INLINE inline __attribute__((always_inline))

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace opforge {
namespace simd {

template <typename T> struct FloatTraits;
template <> struct FloatTraits<float> {
  using U = uint32_t;
  using S = int32_t;
  static constexpr int kMant = 23;
  static constexpr U kBias = 127;
  static constexpr U kSign = 0x80000000u;
  static constexpr float kShifter = 0x1.8p23f;  // x + kShifter rounds x to an integer
};
template <> struct FloatTraits<double> {
  using U = uint64_t;
  using S = int64_t;
  static constexpr int kMant = 52;
  static constexpr U kBias = 1023;
  static constexpr U kSign = 0x8000000000000000ull;
  static constexpr double kShifter = 0x1.8p52;
};

// V: kBytes / sizeof(T) lanes of T; VU / VS: the same bits as unsigned /
// signed integers (comparisons of V yield VS masks of -1 / 0).
template <typename T, int kBytes>
struct Vec {
  typedef T V __attribute__((vector_size(kBytes)));
  typedef typename FloatTraits<T>::U VU __attribute__((vector_size(kBytes)));
  typedef typename FloatTraits<T>::S VS __attribute__((vector_size(kBytes)));
  static constexpr int kLanes = kBytes / static_cast<int>(sizeof(T));
};

template <typename V, typename T>
OF_SIMD_INLINE V Load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V, typename T>
OF_SIMD_INLINE void Store(T* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}
template <typename V, typename T>
OF_SIMD_INLINE V Splat(T x) {
  return V{} + x;
}
// Reinterprets the bits (a vector cast never converts values).
template <typename To, typename From>
OF_SIMD_INLINE To BitCast(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "BitCast needs equal sizes");
  return (To)v;
}

template <typename T, int B>
OF_SIMD_INLINE typename Vec<T, B>::V Abs(const typename Vec<T, B>::V& x) {
  using W = Vec<T, B>;
  return BitCast<typename W::V>(BitCast<typename W::VU>(x) & ~FloatTraits<T>::kSign);
}

// Small integers (|k| < 2^22 for float) to floats without a conversion
// instruction (int64 -> double needs AVX-512DQ otherwise).
template <typename T, int B>
OF_SIMD_INLINE typename Vec<T, B>::V IntToFloat(const typename Vec<T, B>::VS& k) {
  using W = Vec<T, B>;
  using F = FloatTraits<T>;
  const typename W::V shifter = Splat<typename W::V>(F::kShifter);
  return BitCast<typename W::V>(BitCast<typename W::VU>(k) + BitCast<typename W::VU>(shifter)) -
         shifter;
}

// p * 2^n for integral-valued n, where t = n + kShifter (n's integer in the
// low bits). The generic policy builds 2^n from integer bits as two normal
// factors whose product is exact or rounds once, so denormal results
// underflow gradually and values just below the overflow threshold stay
// finite. An instruction set may supply its own policy with the same static
// Apply (AVX-512 vscalef); a policy's Apply must not be always_inline.
template <typename T, int B>
struct GenericScale {
  using W = Vec<T, B>;
  static OF_SIMD_INLINE typename W::V Apply(const typename W::V& p, const typename W::V& n,
                                            const typename W::V& t) {
    (void)n;
    using F = FloatTraits<T>;
    const typename W::V shifter = Splat<typename W::V>(F::kShifter);
    const typename W::VS k =
        BitCast<typename W::VS>(BitCast<typename W::VU>(t) - BitCast<typename W::VU>(shifter));
    const typename W::VS k1 = k >> 1;
    const typename W::VS k2 = k - k1;
    const typename W::V s1 = BitCast<typename W::V>((BitCast<typename W::VU>(k1) + F::kBias) << F::kMant);
    const typename W::V s2 = BitCast<typename W::V>((BitCast<typename W::VU>(k2) + F::kBias) << F::kMant);
    return p * s1 * s2;
  }
};

// ---- exp

template <typename T> struct ExpConst;
template <> struct ExpConst<float> {
  static constexpr float kHi = 89.0f;     // exp(89) overflows
  static constexpr float kLo = -104.0f;   // exp(-104) rounds to 0
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693145751953125f;  // 16 significant bits: n * kLn2Hi is exact
  static constexpr float kLn2Lo = 1.428606765330187045e-6f;
};
template <> struct ExpConst<double> {
  static constexpr double kHi = 710.0;    // exp(710) overflows
  static constexpr double kLo = -746.0;   // exp(-746) rounds to 0
  static constexpr double kLog2e = 1.4426950408889634074;
  static constexpr double kLn2Hi = 6.93147180369123816490e-01;  // fdlibm split
  static constexpr double kLn2Lo = 1.90821492927058770002e-10;
};

// e^r - 1 - r for |r| <= ln2/2, divided by r^2 (so exp = 1 + r + r^2 * P).
template <typename T, int B>
OF_SIMD_INLINE typename Vec<T, B>::V ExpPoly(const typename Vec<T, B>::V& r) {
  using V = typename Vec<T, B>::V;
  if constexpr (sizeof(T) == 4) {  // Cephes expf minimax coefficients
    V p = Splat<V>(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    return p;
  } else {  // Taylor to r^13: truncation error < 5e-18
    V p = Splat<V>(1.0 / 6227020800.0);  // 1/13!
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    return p;
  }
}

template <typename T, int B, class Scale = GenericScale<T, B>>
OF_SIMD_INLINE typename Vec<T, B>::V Exp(const typename Vec<T, B>::V& x_in) {
  using W = Vec<T, B>;
  using V = typename W::V;
  using C = ExpConst<T>;
  // Clamping keeps NaN (both compares are false) and bounds n.
  V x = x_in > C::kHi ? Splat<V>(C::kHi) : x_in;
  x = x < C::kLo ? Splat<V>(C::kLo) : x;
  const V shifter = Splat<V>(FloatTraits<T>::kShifter);
  const V t = x * C::kLog2e + shifter;  // round(x / ln2) in the low mantissa bits
  const V n = t - shifter;
  V r = x - n * C::kLn2Hi;
  r = r - n * C::kLn2Lo;
  const V p = (r + r * r * ExpPoly<T, B>(r)) + T(1);
  return Scale::Apply(p, n, t);
}

// ---- log

template <typename T, int B>
OF_SIMD_INLINE typename Vec<T, B>::V Log(const typename Vec<T, B>::V& x0) {
  using W = Vec<T, B>;
  using V = typename W::V;
  using VS = typename W::VS;
  using VU = typename W::VU;
  using F = FloatTraits<T>;
  constexpr T kMinNormal = sizeof(T) == 4 ? T(0x1p-126f) : T(0x1p-1022);
  constexpr T kDenormScale = sizeof(T) == 4 ? T(0x1p23f) : T(0x1p54);
  constexpr int kDenormShift = sizeof(T) == 4 ? 23 : 54;
  // Denormals: scale into the normal range first.
  const VS tiny = x0 < kMinNormal;
  const V x = tiny ? x0 * kDenormScale : x0;
  const VU bits = BitCast<VU>(x);
  // x = m * 2^e with m in [1, 2), then m in [sqrt(1/2), sqrt(2)).
  VS e = BitCast<VS>(bits >> F::kMant) - static_cast<typename F::S>(F::kBias);
  e = e - (tiny & kDenormShift);
  V m = BitCast<V>((bits & ((typename F::U(1) << F::kMant) - 1)) | (F::kBias << F::kMant));
  const VS big = m > T(1.41421356237309504880);
  m = big ? m * T(0.5) : m;
  e = e - big;  // big is -1 where true
  const V f = m - T(1);  // exact
  const V fe = IntToFloat<T, B>(e);
  V y;
  if constexpr (sizeof(T) == 4) {  // Cephes logf: log(1+f) = f - f^2/2 + f^3 P(f)
    const V z = f * f;
    V p = Splat<V>(7.0376836292e-2f);
    p = p * f - 1.1514610310e-1f;
    p = p * f + 1.1676998740e-1f;
    p = p * f - 1.2420140846e-1f;
    p = p * f + 1.4249322787e-1f;
    p = p * f - 1.6668057665e-1f;
    p = p * f + 2.0000714765e-1f;
    p = p * f - 2.4999993993e-1f;
    p = p * f + 3.3333331174e-1f;
    V t = p * f * z;
    t = t + fe * -2.12194440e-4f;
    t = t - 0.5f * z;
    y = f + t;
    y = y + fe * 0.693359375f;
  } else {  // fdlibm e_log.c: log(1+f) = f - (hfsq - s*(hfsq+R)), s = f/(2+f)
    const V s = f / (f + 2.0);
    const V z = s * s;
    const V w = z * z;
    const V t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
    const V t2 = z * (6.666666666666735130e-01 +
                      w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    const V R = t2 + t1;
    const V hfsq = 0.5 * f * f;
    y = fe * 6.93147180369123816490e-01 - ((hfsq - (s * (hfsq + R) + fe * 1.90821492927058770002e-10)) - f);
  }
  constexpr T kInf = __builtin_inf();
  y = x0 == kInf ? Splat<V>(kInf) : y;
  y = x0 == T(0) ? Splat<V>(-kInf) : y;
  y = x0 < T(0) ? Splat<V>(T(__builtin_nan(""))) : y;
  // Two selects: GCC scalarizes the fused "x < 0 or unordered" compare.
  return x0 != x0 ? x0 : y;  // NOLINT(misc-redundant-expression)
}

// ---- tanh, sigmoid

template <typename T, int B, class Scale = GenericScale<T, B>>
OF_SIMD_INLINE typename Vec<T, B>::V Tanh(const typename Vec<T, B>::V& x) {
  using W = Vec<T, B>;
  using V = typename W::V;
  using VU = typename W::VU;
  const V ax = Abs<T, B>(x);
  // Both branches work on |x| and the sign is ORed in last (keeps tanh(-0) = -0).
  // |x| >= 0.625: 1 - 2 / (e^2|x| + 1), which saturates to 1 as exp overflows.
  const V e = Exp<T, B, Scale>(ax + ax);
  const V big = T(1) - T(2) / (e + T(1));
  // |x| < 0.625: odd minimax (Cephes tanhf / tanh).
  const V z = ax * ax;
  V small;
  if constexpr (sizeof(T) == 4) {
    V p = Splat<V>(-5.70498872745e-3f);
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    small = ax + ax * (p * z);
  } else {
    const V p = (-9.64399179425052238628e-1 * z - 9.92877231001918586564e1) * z - 1.61468768441708447952e3;
    const V q = ((z + 1.12811678491632931402e2) * z + 2.23548839060100448583e3) * z + 4.84406305325125486048e3;
    small = ax + ax * (z * (p / q));
  }
  const V r = ax < T(0.625) ? small : big;  // NaN takes the big branch and stays NaN
  return BitCast<V>(BitCast<VU>(r) | (BitCast<VU>(x) & FloatTraits<T>::kSign));
}

// 1 / (1 + e^-x) from e^-|x| only, so nothing overflows and tiny results
// keep their precision.
template <typename T, int B, class Scale = GenericScale<T, B>>
OF_SIMD_INLINE typename Vec<T, B>::V Sigmoid(const typename Vec<T, B>::V& x) {
  using W = Vec<T, B>;
  using V = typename W::V;
  using VU = typename W::VU;
  const V neg_abs = BitCast<V>(BitCast<VU>(x) | FloatTraits<T>::kSign);
  const V e = Exp<T, B, Scale>(neg_abs);
  const V r = T(1) / (T(1) + e);
  return x >= T(0) ? r : e * r;  // NaN: e * r = NaN
}

// x * Phi(x) = x/2 erfc(-x / sqrt 2), float32 only. erfc(|z|) by the
// Chebyshev fit of Numerical Recipes' erfcc, t exp(-z^2 + poly(t)) with
// t = 1 / (1 + z/2), relative error 1.2e-7 at every z, so the negative tail
// keeps its relative precision (1 + erf(z) would cancel there); Phi(x) for
// x >= 0 is 1 - erfc/2. Max relative error of the result ~2e-6 for
// |x| < 10 (1.7e-5 at -11.6, from rounding z^2); -0 below x = -12.7.
template <int B, class Scale = GenericScale<float, B>>
OF_SIMD_INLINE typename Vec<float, B>::V GeluErf(const typename Vec<float, B>::V& x) {
  using W = Vec<float, B>;
  using V = typename W::V;
  // Beyond z = 9 erfc/2 < 2e-37: taken as 0, and z clamped there, so exp
  // never returns a denormal (each costs a ~100-cycle microcode assist).
  const V za = Abs<float, B>(x) * 0.70710678118654752f;
  const V z = za < 9.0f ? za : Splat<V>(9.0f);
  const V t = 1.0f / (1.0f + 0.5f * z);
  V p = t * 0.17087277f - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  V half_erfc = 0.5f * t * Exp<float, B, Scale>(p * t - 1.26551223f - z * z);
  half_erfc = za < 9.0f ? half_erfc : Splat<V>(0.0f);
  return x * (x < 0.0f ? half_erfc : 1.0f - half_erfc);  // NaN -> NaN
}

// Lane-wise sqrt; the compiler turns it into one vector sqrt (needs -fno-math-errno).
template <typename T, int B>
OF_SIMD_INLINE typename Vec<T, B>::V Sqrt(const typename Vec<T, B>::V& x) {
  typename Vec<T, B>::V r;
  for (int i = 0; i < Vec<T, B>::kLanes; ++i) {
    if constexpr (sizeof(T) == 4) r[i] = __builtin_sqrtf(x[i]);
    else r[i] = __builtin_sqrt(x[i]);
  }
  return r;
}

}  // namespace simd
}  // namespace opforge

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
