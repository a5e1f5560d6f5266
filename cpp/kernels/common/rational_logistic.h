// The logistic 1 / (1 + e^-x) as a rational function, shared by the
// depthwise kernels (cpp/kernels/conv/depthwise_rows_isa.inc) and the NCHWc
// convs (cpp/kernels/nchwc/nchwc_isa.inc): onnxruntime's MLAS coefficients,
// odd degree 9 over even degree 10, |error| <= 2.2e-7 in float32, about 20
// vector operations where an exp-based sigmoid takes about 30. Each caller
// divides with its own instruction set's reciprocal.
#pragma once

namespace opforge {
namespace common {

// For a GCC vector x: *num and *den with logistic(x) = *num / *den + 0.5 for
// x >= -18; below, the caller's result is 0 (the error is absolute: silu(-inf)
// is NaN, as x * sigmoid(x); NaN stays NaN).
template <class V>
inline __attribute__((always_inline)) void RationalLogistic(const V& x, V* num, V* den) {
  const V c = x > 18.0f ? V{} + 18.0f : x;
  const V z = c * c;
  V p = z * 4.37031012579801e-11f + 1.15627324459942e-07f;
  p = p * z + 6.08574864600143e-05f;
  p = p * z + 8.51377133304701e-03f;
  p = p * z + 2.48287947061529e-01f;
  V q = z * 6.10247389755681e-13f + 5.76102136993427e-09f;
  q = q * z + 6.29106785017040e-06f;
  q = q * z + 1.70198817374094e-03f;
  q = q * z + 1.16817656904453e-01f;
  q = q * z + 9.93151921023180e-01f;
  *num = c * p;
  *den = q;
}

}  // namespace common
}  // namespace opforge
