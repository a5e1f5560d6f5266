// The fused epilogue, one tile row at a time while the tile is in L1:
// bias, activation (the vectorized, ISA-dispatched vmath loops for the
// transcendental ones), residual.
#include "epilogue.h"

#include <algorithm>
#include <cmath>

#include "../vector_math.h"

namespace opforge {
namespace gemm {

void ApplyEpilogue(const Epilogue& ep, float* c, int64_t ldc, int64_t row0, int64_t col0,
                   int64_t m, int64_t n) {
  float tmp[256];
  for (int64_t i = 0; i < m; ++i) {
    float* r = c + i * ldc;
    if (ep.bias_kind == BiasKind::kPerColumn) {
      const float* bias = ep.bias + col0;
      for (int64_t j = 0; j < n; ++j) r[j] += bias[j];
    } else if (ep.bias_kind == BiasKind::kPerRow) {
      const float bias = ep.bias[row0 + i];
      for (int64_t j = 0; j < n; ++j) r[j] += bias;
    }
    switch (ep.activation) {
      case Activation::kNone:
        break;
      case Activation::kRelu:
        for (int64_t j = 0; j < n; ++j) r[j] = std::max(r[j], 0.0f);
        break;
      case Activation::kSigmoid:
        vmath::Unary(vmath::UnaryFn::kSigmoid, r, r, n, false);
        break;
      case Activation::kSilu:
        for (int64_t j0 = 0; j0 < n; j0 += 256) {
          const int64_t w = std::min<int64_t>(256, n - j0);
          vmath::Unary(vmath::UnaryFn::kSigmoid, r + j0, tmp, w, false);
          for (int64_t j = 0; j < w; ++j) r[j0 + j] *= tmp[j];
        }
        break;
      case Activation::kGelu:
        // The erf form, as the Gelu op, to ~2e-6 relative (simd::GeluErf).
        vmath::Unary(vmath::UnaryFn::kGelu, r, r, n, false);
        break;
    }
    if (ep.residual != nullptr) {
      const float* res = ep.residual + (row0 + i) * ep.residual_ld + col0;
      for (int64_t j = 0; j < n; ++j) r[j] += res[j];
    }
  }
}

}  // namespace gemm
}  // namespace opforge
