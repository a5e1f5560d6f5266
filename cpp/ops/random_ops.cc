// Random ops: counter-based (Philox4x32-10, cpp/kernels/random/), so a
// result depends only on (seed, seed2, shape), never on the thread count.
// seed keys the generator; seed2 picks the stream: opforge.random derives
// both from the global and per-op seeds and advances seed2 per call.
#include <cstdint>

#include "opforge/op.h"
#include "opforge/shape_inference.h"
#include "shape_checks.h"

namespace opforge {
namespace {

// Output 0 has the shape of attr 'shape'.
Status ShapeFromAttr(InferenceContext* ctx) {
  const std::vector<int64_t>& dims = ctx->attr_ints("shape");
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return errors::InvalidArgument("attr 'shape' ", ListString(dims), " has rank ", dims.size(),
                                   "; at most ", kMaxRank, " is supported");
  }
  for (int64_t d : dims) {
    if (d < 0) return errors::InvalidArgument("attr 'shape' ", ListString(dims), " has negative dim ", d);
  }
  TensorShape out;
  Status s = TensorShape::Make(dims.data(), static_cast<int>(dims.size()), &out);
  if (!s.ok()) return errors::InvalidArgument("attr 'shape' ", ListString(dims), ": ", s.message());
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status UniformIntShape(InferenceContext* ctx) {
  const int64_t lo = ctx->attr_int("minval"), hi = ctx->attr_int("maxval");
  if (lo >= hi) {
    return errors::InvalidArgument("attr 'minval' (", lo, ") must be less than attr 'maxval' (", hi, ")");
  }
  if (ctx->attr_type("dtype") == DType::kInt32 && (lo < INT32_MIN || hi - 1 > INT32_MAX)) {
    return errors::InvalidArgument("attrs 'minval' and 'maxval' [", lo, ", ", hi, ") do not fit dtype int32");
  }
  return ShapeFromAttr(ctx);
}

Status ShuffleShape(InferenceContext* ctx) {
  if (ctx->input_shape(0).rank() == 0) {
    return errors::InvalidArgument("argument 'x' must have rank >= 1 (it is shuffled along dim 0), got a scalar");
  }
  return shape_fns::Unchanged(ctx);
}

}  // namespace

REGISTER_OP("RandomUniform")
    .Attr("shape: shape")
    .Attr("dtype: {float32, float64} = float32")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Output("y: dtype")
    .SetShapeFn(ShapeFromAttr)
    .SetIsStateful()  // in a graph each run draws anew (a per-Session draw counter)
    .NoGradient()  // a draw does not depend on any differentiable input
    .Doc(R"doc(
Uniform random values in [0, 1) (24 random bits for float32, 53 for float64).

Element i is a pure function of (seed, seed2, i) through Philox4x32-10, so the
result is the same for every thread count. opforge.random.uniform scales it.

shape: The shape of the result.
dtype: The float dtype of the result.
seed: Keys the generator (opforge.random derives it from the global and op seeds).
seed2: Selects the stream (opforge.random advances it on every call).
y: Uniform values in [0, 1).
)doc");

REGISTER_OP("RandomStandardNormal")
    .Attr("shape: shape")
    .Attr("dtype: {float32, float64} = float32")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Output("y: dtype")
    .SetShapeFn(ShapeFromAttr)
    .SetIsStateful()  // in a graph each run draws anew (a per-Session draw counter)
    .NoGradient()
    .Doc(R"doc(
Standard normal random values (mean 0, standard deviation 1), by Box-Muller over Philox4x32-10.

shape: The shape of the result.
dtype: The float dtype of the result.
seed: Keys the generator.
seed2: Selects the stream.
y: Normal values.
)doc");

REGISTER_OP("TruncatedNormal")
    .Attr("shape: shape")
    .Attr("dtype: {float32, float64} = float32")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Output("y: dtype")
    .SetShapeFn(ShapeFromAttr)
    .SetIsStateful()  // in a graph each run draws anew (a per-Session draw counter)
    .NoGradient()
    .Doc(R"doc(
Standard normal values restricted to [-2, 2] (redrawn outside), as TensorFlow's truncated_normal.

Each element rejects on its own sub-stream, so results do not depend on the thread count.

shape: The shape of the result.
dtype: The float dtype of the result.
seed: Keys the generator.
seed2: Selects the stream.
y: Values in [-2, 2], standard deviation about 0.88.
)doc");

REGISTER_OP("RandomUniformInt")
    .Attr("shape: shape")
    .Attr("minval: int")
    .Attr("maxval: int")
    .Attr("dtype: {int32, int64} = int64")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Output("y: dtype")
    .SetShapeFn(UniformIntShape)
    .SetIsStateful()  // in a graph each run draws anew (a per-Session draw counter)
    .NoGradient()
    .Doc(R"doc(
Uniform random integers in [minval, maxval).

shape: The shape of the result.
minval: The smallest value drawn.
maxval: One past the largest value drawn; must be greater than minval.
dtype: The integer dtype of the result.
seed: Keys the generator.
seed2: Selects the stream.
y: Integers in [minval, maxval).
)doc");

REGISTER_OP("RandomShuffle")
    .Input("x: T")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Output("y: T")
    .Attr("T: {float32, float64, int32, int64, bool}")
    .SetShapeFn(ShuffleShape)
    .SetIsStateful()  // in a graph each run draws anew (a per-Session draw counter)
    .NoGradient()  // the permutation is not an output; gather with opforge.randperm to differentiate
    .Doc(R"doc(
x with its rows (dim 0) in a random order (Fisher-Yates over Philox4x32-10).

x: The tensor to shuffle, rank >= 1.
seed: Keys the generator.
seed2: Selects the stream.
y: The rows of x, permuted.
)doc");

}  // namespace opforge
