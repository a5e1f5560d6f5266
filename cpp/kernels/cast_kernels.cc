// Cast kernels: registered per source dtype, switching on the target dtype.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

// Float -> int is UB in C++ for NaN, inf and out-of-range values; map those to
// the target's minimum, which is what x86's cvtt* instructions (and numpy) give.
template <typename I, typename F>
inline I FloatToInt(F x) {
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());  // -2^(bits-1), exact
  return (x >= lo && x < -lo) ? static_cast<I>(x) : std::numeric_limits<I>::min();
}

template <typename Src, typename Dst>
inline Dst Convert(Src x) {
  if constexpr (std::is_same_v<Dst, bool>) {
    return x != Src(0);  // NaN != 0, so NaN -> true like numpy
  } else if constexpr (std::is_same_v<Src, bool>) {
    return x ? Dst(1) : Dst(0);
  } else if constexpr (std::is_floating_point_v<Src> && std::is_integral_v<Dst>) {
    return FloatToInt<Dst>(x);
  } else if constexpr (std::is_integral_v<Src> && std::is_integral_v<Dst>) {
    // Narrowing wraps modulo 2^bits (done in unsigned so it is well-defined).
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
    case DType::kFloat32: return CastTo<Src, float>(x, ctx);
    case DType::kFloat64: return CastTo<Src, double>(x, ctx);
    case DType::kInt32: return CastTo<Src, int32_t>(x, ctx);
    case DType::kInt64: return CastTo<Src, int64_t>(x, ctx);
    case DType::kBool: return CastTo<Src, bool>(x, ctx);
    default:
      return errors::InvalidArgument("attr 'dtype' is ", DTypeName(dst),
                                     ", which Cast does not support");
  }
}

}  // namespace

REGISTER_KERNEL("Cast", kCPU, DType::kFloat32, CastKernel<float>);
REGISTER_KERNEL("Cast", kCPU, DType::kFloat64, CastKernel<double>);
REGISTER_KERNEL("Cast", kCPU, DType::kInt32, CastKernel<int32_t>);
REGISTER_KERNEL("Cast", kCPU, DType::kInt64, CastKernel<int64_t>);
REGISTER_KERNEL("Cast", kCPU, DType::kBool, CastKernel<bool>);

}  // namespace opforge
