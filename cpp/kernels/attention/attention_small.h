// Float32 attention for short sequences and narrow heads (exported BERT,
// GPT-2, Llama and ViT layers: 16-64 keys, 16-64 dims per head), where the
// blocked kernel's two sgemm calls per block cost more than their math.
// Direct loops over a transposed copy of the head's keys instead, compiled
// per instruction set and dispatched at run time (like vector_math.cc).
#pragma once

#include <cstdint>

namespace opforge {
namespace attention {

// One (batch, head): q [sq, d], k [sk, d], v [sk, dv] -> y [sq, dv], row i of
// each at i * its row stride (qs, ks, vs, ys: d or dv when the head is dense,
// heads * d when the heads of a position sit together, [B, S, H, D]).
// mask row i is mask + i * mrow_stride, its key j at j * mcol_stride (0: broadcast).
// scratch holds SmallScratch(sq, sk, d) floats.
struct SmallHead {
  const float *q, *k, *v, *mask;
  int64_t mrow_stride, mcol_stride;
  int64_t sq, sk, d, dv;
  float scale;
  bool causal;
  float* y;
  int64_t qs, ks, vs, ys;
};

// Whether the direct loops beat the blocked sgemm kernel at these sizes.
inline bool UseSmall(int64_t sq, int64_t sk, int64_t d, int64_t dv) {
  return sk <= 256 && d <= 256 && dv <= 256 && sq * sk <= 256 * 256;
}

inline int64_t PaddedKeys(int64_t sk) { return (sk + 7) / 8 * 8; }
inline int64_t SmallScratch(int64_t sq, int64_t sk, int64_t d) { return (d + 4 + sq) * PaddedKeys(sk); }

void RunSmallHead(const SmallHead& h, float* scratch);

}  // namespace attention
}  // namespace opforge
