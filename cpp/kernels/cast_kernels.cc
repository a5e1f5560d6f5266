// Cast kernels: registered per source dtype, switching on the target dtype.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/each_dtype.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

// Float -> int is UB in C++ for NaN, inf and out-of-range values. For int32
// and int64 those map to the target's minimum, which is what x86's cvtt*
// instructions (and numpy) give. The narrow ints (8 and 16 bits, and the
// unsigned ones) saturate instead -- values below the range give the
// minimum, above it the maximum, NaN gives 0 -- as ONNX's saturating casts
// and ml_dtypes do; numpy's answer there is platform-defined.
template <typename I, typename F>
inline I FloatToInt(F x) {
  if constexpr (std::is_same_v<I, int32_t> || std::is_same_v<I, int64_t>) {
    constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());  // -2^(bits-1), exact
    return (x >= lo && x < -lo) ? static_cast<I>(x) : std::numeric_limits<I>::min();
  } else {
    if (x != x) return I(0);
    // Both bounds are exact in float for every narrow int and for uint32/uint64's
    // 2^bits (the limit compared against is one past the max).
    constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());
    const F hi_excl = static_cast<F>(std::numeric_limits<I>::max() / 2 + 1) * F(2);  // 2^bits(-1), exact
    if (x <= lo) return std::numeric_limits<I>::min();
    if (x >= hi_excl) return std::numeric_limits<I>::max();
    return static_cast<I>(x);
  }
}

template <typename Src, typename Dst>
inline Dst Convert(Src x) {
  if constexpr (kIsHalf<Src>) {
    return Convert<float, Dst>(static_cast<float>(x));
  } else if constexpr (kIsHalf<Dst>) {
    if constexpr (std::is_same_v<Src, bool>) return Dst(x ? 1.0f : 0.0f);
    else return Dst(x);  // rounded once, from double and int64 too
  } else if constexpr (std::is_same_v<Dst, bool>) {
    return x != Src(0);  // NaN != 0, so NaN -> true like numpy
  } else if constexpr (std::is_same_v<Src, bool>) {
    return x ? Dst(1) : Dst(0);
  } else if constexpr (std::is_floating_point_v<Src> && std::is_integral_v<Dst>) {
    return FloatToInt<Dst>(x);
  } else if constexpr (std::is_integral_v<Src> && std::is_integral_v<Dst>) {
    // Narrowing and sign changes wrap modulo 2^bits (in unsigned, so well-defined), like numpy.
    return static_cast<Dst>(static_cast<std::make_unsigned_t<Dst>>(x));
  } else {
    return static_cast<Dst>(x);
  }
}

template <typename Src, typename Dst>
Status CastTo(const Tensor& x, OpKernelContext* ctx) {
  Tensor* y;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const Src* in = x.data<Src>();
  Dst* out = y->data<Dst>();
  ParallelFor(x.NumElements(), 2, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = Convert<Src, Dst>(in[i]);
  });
  return Status::OK();
}

template <typename Src>
Status CastKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const DType dst = ctx->attr_type("dtype");
  if (dst == x.dtype()) {  // nothing to convert: share the buffer
    ctx->set_output(0, x);
    return Status::OK();
  }
  switch (dst) {
#define OF_CAST_CASE(e, v, nm, np, ctype, ...) \
  case DType::e: return CastTo<Src, ctype>(x, ctx);
    OPFORGE_DTYPES(OF_CAST_CASE)
#undef OF_CAST_CASE
    default:
      return errors::InvalidArgument("attr 'dtype' is ", DTypeName(dst), ", which Cast does not support");
  }
}

}  // namespace

OF_REGISTER_EACH_DTYPE("Cast", CastKernel);

}  // namespace opforge
