// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a counter-based generator. Block b of a stream is a pure
// function of (key, counter), so element i of a random tensor does not
// depend on how the work was split across threads.
#pragma once

#include <cmath>
#include <cstdint>

namespace opforge {
namespace random {

struct Block {
  uint32_t v[4];
};

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// Ten rounds of the Philox S-box over counter `c` with key `k`.
inline Block Philox(uint64_t key, const uint32_t c_in[4]) {
  uint32_t c0 = c_in[0], c1 = c_in[1], c2 = c_in[2], c3 = c_in[3];
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(0xD2511F53u, c0, &hi0, &lo0);
    MulHiLo(0xCD9E8D57u, c2, &hi1, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Block{{c0, c1, c2, c3}};
}

// One stream: (seed, seed2) of an op call. Block `index` of the stream.
struct Stream {
  uint64_t key;
  uint64_t stream;
  Block At(uint64_t index, uint32_t sub = 0) const {
    const uint32_t c[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                           static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32) ^ sub};
    return Philox(key, c);
  }
};

// [0, 1) with 24 (float) or 53 (double) random bits.
inline float Uniform24(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
inline double Uniform53(uint32_t lo, uint32_t hi) {
  const uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
}

// Box-Muller: two standard normals from two uniforms in [0, 1).
inline void BoxMuller(double u1, double u2, double* z0, double* z1) {
  constexpr double kTwoPi = 6.28318530717958647692;
  const double r = std::sqrt(-2.0 * std::log(1.0 - u1));  // 1 - u1 is in (0, 1]
  *z0 = r * std::cos(kTwoPi * u2);
  *z1 = r * std::sin(kTwoPi * u2);
}

}  // namespace random
}  // namespace opforge
