// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: elementwise
// loops over [outer, channels, inner] (quant_common.h), split over the
// intra-op pool for large tensors.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "quant_common.h"

namespace opforge {
namespace quant {
namespace {

// y[i] = QuantizeOne(x[i]) over [outer, channels, inner].
template <typename Q>
void QuantizeLoop(const float* x, const float* scale, const Tensor& zp, const AxisView& v, Q* y) {
  const int64_t rows = v.outer * v.channels;
  ParallelFor(rows, v.inner * 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r % v.channels;
      QuantizeRow<Q>(x + r * v.inner, v.inner, scale[c], ZeroPointAt(zp, c), y + r * v.inner);
    }
  });
}

Status QuantizeLinearKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& scale = ctx->input(1);
  const Tensor& zp = ctx->input(2);
  OF_RETURN_IF_ERROR(CheckScales(scale, "y_scale"));
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const AxisView v = MakeAxisView(x.shape(), ctx->attr_int("axis"), scale.NumElements() > 1);
  const float* xd = x.data<float>();
  const float* sd = scale.data<float>();
  switch (zp.dtype()) {
    case DType::kUInt8: QuantizeLoop<uint8_t>(xd, sd, zp, v, y->data<uint8_t>()); break;
    case DType::kInt8: QuantizeLoop<int8_t>(xd, sd, zp, v, y->data<int8_t>()); break;
    case DType::kUInt16: QuantizeLoop<uint16_t>(xd, sd, zp, v, y->data<uint16_t>()); break;
    default: QuantizeLoop<int16_t>(xd, sd, zp, v, y->data<int16_t>()); break;
  }
  return Status::OK();
}

template <typename T>
Status DequantizeLinearKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& scale = ctx->input(1);
  const Tensor& zp = ctx->input(2);
  OF_RETURN_IF_ERROR(CheckScales(scale, "x_scale"));
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  const AxisView v = MakeAxisView(x.shape(), ctx->attr_int("axis"), scale.NumElements() > 1);
  const T* xd = x.data<T>();
  float* yd = y->data<float>();
  ParallelFor(v.outer * v.channels, v.inner * 2, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r % v.channels;
      const float s = scale.data<float>()[c];
      const int32_t z = ZeroPointAt(zp, c);
      const T* xr = xd + r * v.inner;
      float* yr = yd + r * v.inner;
      // int32 x - zp wraps like onnxruntime's; 8-bit never overflows.
      for (int64_t i = 0; i < v.inner; ++i) {
        yr[i] = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(xr[i]) - static_cast<uint32_t>(z))) * s;
      }
    }
  });
  return Status::OK();
}

Status DynamicQuantizeLinearKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  Tensor *y = nullptr, *ys = nullptr, *yz = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &ys));
  OF_RETURN_IF_ERROR(ctx->allocate_output(2, &yz));
  const float* xd = x.data<float>();
  const int64_t n = x.NumElements();
  float scale = 1.0f;
  uint8_t zero = 0;
  OF_RETURN_IF_ERROR(DynamicRange(xd, n, &scale, &zero));
  ys->data<float>()[0] = scale;
  yz->data<uint8_t>()[0] = zero;
  uint8_t* yd = y->data<uint8_t>();
  ParallelFor(n, 4, [&](int64_t b, int64_t e) { QuantizeRowDynamic(xd + b, e - b, scale, int32_t(zero), yd + b); });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("QuantizeLinear", kCPU, DType::kFloat32, QuantizeLinearKernel);
REGISTER_KERNEL("DequantizeLinear", kCPU, DType::kUInt8, DequantizeLinearKernel<uint8_t>);
REGISTER_KERNEL("DequantizeLinear", kCPU, DType::kInt8, DequantizeLinearKernel<int8_t>);
REGISTER_KERNEL("DequantizeLinear", kCPU, DType::kUInt16, DequantizeLinearKernel<uint16_t>);
REGISTER_KERNEL("DequantizeLinear", kCPU, DType::kInt16, DequantizeLinearKernel<int16_t>);
REGISTER_KERNEL("DequantizeLinear", kCPU, DType::kInt32, DequantizeLinearKernel<int32_t>);
REGISTER_KERNEL("DynamicQuantizeLinear", kCPU, DType::kFloat32, DynamicQuantizeLinearKernel);

}  // namespace quant
}  // namespace opforge
