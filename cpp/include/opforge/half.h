// The two 16-bit float storage types, float16 (IEEE binary16) and bfloat16
// (the top half of a float32). Kernels compute in float32: these types only
// convert, compare through float and hold bits, so a kernel template written
// for float works on them through `float(x)` / `T(f)`.
//
// Conversions from float round to nearest even (as numpy and ml_dtypes do);
// NaN stays NaN (quiet), overflow becomes infinity.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace opforge {

namespace half_detail {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);                               // to nearest even
  return static_cast<uint16_t>((u + rounding) >> 16);
}

// IEEE binary16 from float32, round to nearest even (subnormals included).
inline uint16_t FloatToHalfBits(float f) {
  const uint32_t u = FloatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                                // below the smallest normal
    // Adding 0.5 (as float) aligns the subnormal's bits at the bottom and
    // lets the FPU round to nearest even.
    const float shifted = BitsFloat(a) + 0.5f;
    return static_cast<uint16_t>(sign | (FloatBits(shifted) - 0x3f000000u));
  }
  const uint32_t mant_odd = (a >> 13) & 1u;
  const uint32_t r = a + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (r >> 13));
}

inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return BitsFloat(sign | 0x7f800000u | (m << 13));                     // inf, NaN
  if (e == 0) return BitsFloat(sign | FloatBits(static_cast<float>(m) * 5.9604644775390625e-8f));  // m * 2^-24
  return BitsFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// double -> float rounding toward zero, with the last bit set when inexact
// ("round to odd"): rounding that float again to a type of <= 22 mantissa bits
// gives what rounding the double directly would.
inline float RoundToOddFloat(double d) {
  float f = static_cast<float>(d);
  if (!(static_cast<double>(f) != d) || f != f) return f;  // exact, or NaN
  const double af = f < 0 ? -static_cast<double>(f) : static_cast<double>(f);
  const double ad = d < 0 ? -d : d;
  uint32_t u = FloatBits(f);
  if (af > ad) u -= 1;  // rounded away from zero: step back toward it (also from inf)
  return BitsFloat(u | 1u);
}

inline float BFloat16BitsToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

// A 16-bit float that holds bits and converts through float. kBrain picks
// bfloat16's layout (else IEEE binary16).
template <bool kBrain>
struct Half16 {
  uint16_t bits;
  Half16() = default;
  // From any arithmetic value, rounded once to nearest even (wider values
  // reach float by round-to-odd, which keeps the second rounding exact).
  template <typename A, typename = std::enable_if_t<std::is_arithmetic_v<A>>>
  explicit Half16(A v) {
    const float f = std::is_same_v<A, float> ? static_cast<float>(v) : RoundToOddFloat(static_cast<double>(v));
    bits = kBrain ? FloatToBFloat16Bits(f) : FloatToHalfBits(f);
  }
  static Half16 FromBits(uint16_t b) {
    Half16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return kBrain ? BFloat16BitsToFloat(bits) : HalfBitsToFloat(bits); }
  // To other arithmetic types through float (float -> int is C++'s: in range only).
  template <typename A, typename = std::enable_if_t<std::is_arithmetic_v<A> && !std::is_same_v<A, float>>>
  explicit operator A() const { return static_cast<A>(static_cast<float>(*this)); }
  friend bool operator==(Half16 a, Half16 b) { return float(a) == float(b); }
  friend bool operator!=(Half16 a, Half16 b) { return float(a) != float(b); }
  friend bool operator<(Half16 a, Half16 b) { return float(a) < float(b); }
  friend bool operator<=(Half16 a, Half16 b) { return float(a) <= float(b); }
  friend bool operator>(Half16 a, Half16 b) { return float(a) > float(b); }
  friend bool operator>=(Half16 a, Half16 b) { return float(a) >= float(b); }
};

}  // namespace half_detail

using float16 = half_detail::Half16<false>;
using bfloat16 = half_detail::Half16<true>;
static_assert(sizeof(float16) == 2 && std::is_trivially_copyable_v<float16>, "float16 is 2 raw bytes");
static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>, "bfloat16 is 2 raw bytes");

// True for float16 and bfloat16: kernels widen these to float to compute.
template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// The type a kernel computes T in: float for the 16-bit floats, T otherwise.
template <typename T>
using ComputeType = std::conditional_t<kIsHalf<T>, float, T>;

}  // namespace opforge
