// Constant int8 weights packed once (packed_blob.h, format 1):
// PackMatMulIntegerWeight writes the 8-bit GEMM's B panels for the ISA in
// use, with each column's effective zero point and sum; MatMulIntegerPacked
// and DynamicQuantizeMatMul multiply by them without packing B again (what
// onnxruntime does with constant initializers). The payload after the header:
//   int32 zb_eff[n] | pad to 64 | uint32 colsum[n] | pad to 64 | panels
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "packed_blob.h"
#include "qgemm.h"
#include "quant_common.h"

namespace opforge {
namespace quant {
namespace {

using packed::Header;

int64_t PayloadBytes(int64_t k, int64_t n) { return 2 * packed::Round64(4 * n) + qgemm::PackedPanelBytes(k, n); }

Status PackKernel(OpKernelContext* ctx) {
  const Tensor& b = ctx->input(0);
  const Tensor& zb = ctx->input(1);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int64_t k = b.dim(0), n = b.dim(1);
  uint8_t* dst = out->data<uint8_t>();
  const int64_t payload = PayloadBytes(k, n);
  if (packed::kHeaderBytes + payload > out->NumElements()) {  // the shape function's bound is the largest layout's
    return errors::Internal("PackMatMulIntegerWeight: the blob is too small for this ISA's layout");
  }
  std::memset(dst, 0, static_cast<size_t>(out->NumElements()));
  std::vector<int32_t> zv(static_cast<size_t>(zb.NumElements()));
  for (int64_t j = 0; j < zb.NumElements(); ++j) zv[j] = ZeroPointAt(zb, j);
  qgemm::Args g;
  g.k = k, g.n = n, g.b = b.raw_data(), g.rs_b = n, g.cs_b = 1;
  g.b_signed = b.dtype() == DType::kInt8;
  g.b_zero = zv.data(), g.b_zero_per_col = zv.size() > 1;
  const int64_t sums = packed::Round64(4 * n);
  uint8_t* body = dst + packed::kHeaderBytes;
  qgemm::PackPanels(g, body + 2 * sums, reinterpret_cast<int32_t*>(body), reinterpret_cast<uint32_t*>(body + sums));
  const qgemm::Layout l = qgemm::CurrentLayout();
  Header h{};
  h.format = packed::kFormatInt8;
  packed::SetLayout(&h, l.isa);
  h.mr = l.mr, h.nr = l.nr, h.kgroup = l.kgroup, h.wide = l.wide ? 1 : 0;
  h.k = k, h.n = n, h.payload_bytes = static_cast<uint64_t>(payload);
  h.flags = g.b_signed ? 1 : 0;
  packed::WriteHeader(h, dst);
  return Status::OK();
}

// A validated int8 blob for a [.., k] @ [k, n] product.
struct PackedB {
  const int32_t* zb_eff = nullptr;
  const uint32_t* colsum = nullptr;
  const void* panels = nullptr;
  std::vector<uint8_t> copy;
};

Status OpenPacked(const Tensor& blob, int64_t k, int64_t n, PackedB* pb) {
  Header h;
  OF_RETURN_IF_ERROR(packed::ReadHeader(blob, "packed", packed::kFormatInt8, &h));
  const qgemm::Layout l = qgemm::CurrentLayout();
  if (std::strncmp(h.layout, l.isa, sizeof(h.layout)) != 0 || h.mr != l.mr || h.nr != l.nr ||
      h.kgroup != l.kgroup || h.wide != (l.wide ? 1 : 0)) {
    return errors::InvalidArgument("argument 'packed' was packed for the '", std::string(h.layout, strnlen(h.layout, 16)),
                                   "' 8-bit GEMM, but this process runs '", l.isa,
                                   "' (another CPU, or OPFORGE_SIMD): pack the weight again here "
                                   "(PackMatMulIntegerWeight)");
  }
  // The blob's size is PackMatMulIntegerWeight's (the largest layout's bound).
  const int64_t size = packed::kHeaderBytes + 2 * packed::Round64(4 * h.n) + 2 * ((h.n + 31) / 32 * 32) *
                                                                               ((h.k + 3) / 4 * 4);
  if (h.payload_bytes != static_cast<uint64_t>(PayloadBytes(h.k, h.n)) || blob.NumElements() != size) {
    return errors::InvalidArgument("argument 'packed' is not a packed weight of this op: its size (",
                                   blob.NumElements(), " bytes, payload ", h.payload_bytes,
                                   ") does not match k = ", h.k, ", n = ", h.n);
  }
  if (h.k != k) {
    return errors::InvalidArgument("argument 'packed' holds a weight with ", h.k,
                                   " rows, but the inner dimension of argument '", "a' is ", k);
  }
  if (h.n != n) {
    return errors::InvalidArgument("argument 'packed' holds a weight with ", h.n, " columns, but attr 'n' is ", n);
  }
  const uint8_t* p = packed::Payload(blob, h, &pb->copy);
  const int64_t sums = packed::Round64(4 * n);
  pb->zb_eff = reinterpret_cast<const int32_t*>(p);
  pb->colsum = reinterpret_cast<const uint32_t*>(p + sums);
  pb->panels = p + 2 * sums;
  return Status::OK();
}

qgemm::Args PackedArgs(const PackedB& pb, int64_t rows, int64_t k, int64_t n, const void* a, bool a_signed,
                       const int32_t* a_zero, int32_t* c) {
  qgemm::Args g;
  g.m = rows, g.k = k, g.n = n;
  g.a = a, g.rs_a = k, g.cs_a = 1, g.a_signed = a_signed, g.a_zero = a_zero;
  g.b_packed = pb.panels, g.b_zero_eff = pb.zb_eff, g.b_colsum = pb.colsum;
  g.c = c, g.ldc = n;
  return g;
}

Status MatMulIntegerPackedKernel(OpKernelContext* ctx) {
  const Tensor& a = ctx->input(0);
  const int64_t k = a.dim(a.rank() - 1), n = ctx->attr_int("n");
  PackedB pb;
  OF_RETURN_IF_ERROR(OpenPacked(ctx->input(2), k, n, &pb));
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  if (ctx->input(1).NumElements() != 1) {
    return errors::InvalidArgument("argument 'a_zero_point' must be a scalar, got ", ctx->input(1).NumElements(),
                                   " values");
  }
  const int32_t za = ZeroPointAt(ctx->input(1), 0);
  qgemm::QGemm(PackedArgs(pb, y->NumElements() / n, k, n, a.raw_data(), a.dtype() == DType::kInt8, &za,
                          y->data<int32_t>()),
               true);
  return Status::OK();
}

Status DynamicQuantizeMatMulKernel(OpKernelContext* ctx) {
  const Tensor& x = ctx->input(0);
  const Tensor& sb = ctx->input(2);
  const Tensor& bias = ctx->input(3);
  const int64_t k = x.dim(x.rank() - 1), n = ctx->attr_int("n");
  PackedB pb;
  OF_RETURN_IF_ERROR(OpenPacked(ctx->input(1), k, n, &pb));
  OF_RETURN_IF_ERROR(CheckScales(sb, "b_scale"));
  // Sizes the shape function could not see (unknown dims in a graph).
  if (sb.NumElements() != 1 && sb.NumElements() != n) {
    return errors::InvalidArgument("argument 'b_scale' must hold 1 or ", n, " values, got ", sb.NumElements());
  }
  if (bias.NumElements() != 0 && bias.NumElements() != n) {
    return errors::InvalidArgument("argument 'bias' must hold 0 or ", n, " values, got ", bias.NumElements());
  }
  const std::string& act = ctx->attr_string("activation");
  if (act != "none" && act != "relu") {
    return errors::InvalidArgument("attr 'activation' must be 'none' or 'relu', got '", act, "'");
  }
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  const float* xd = x.data<float>();
  const int64_t count = x.NumElements();
  float xs = 1.0f;
  uint8_t xz = 0;
  OF_RETURN_IF_ERROR(DynamicRange(xd, count, &xs, &xz));
  static thread_local std::vector<uint8_t> xq;  // the GEMM reads these rows in place (qgemm.cc)
  if (static_cast<int64_t>(xq.size()) < count) xq.resize(static_cast<size_t>(count));
  uint8_t* q = xq.data();
  ParallelFor(count, 4, [&](int64_t b, int64_t e) { QuantizeRowDynamic(xd + b, e - b, xs, int32_t(xz), q + b); });
  static_assert(sizeof(float) == sizeof(int32_t), "y's float32 bytes hold the int32 products first");
  static thread_local std::vector<float> scale;
  scale.resize(static_cast<size_t>(n));
  const float* sbv = sb.data<float>();
  for (int64_t j = 0; j < n; ++j) scale[j] = xs * sbv[sb.NumElements() > 1 ? j : 0];
  // A symmetric weight (every packed zero point 0, as quantize_dynamic's
  // int8 weights) leaves one correction per column, -x_zero * colsum[j]:
  // the epilogue adds it, and the GEMM applies no zero points.
  bool symmetric = true;
  for (int64_t j = 0; j < n && symmetric; ++j) symmetric = pb.zb_eff[j] == 0;
  static thread_local std::vector<uint32_t> off;
  if (symmetric) {
    off.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) off[j] = 0u - static_cast<uint32_t>(xz) * pb.colsum[j];
  }
  qgemm::FloatEpilogue ep;  // y = (acc + off[j]) * (x_scale * b_scale[j]) + bias[j], then the activation
  ep.scale = scale.data(), ep.bias = bias.NumElements() ? bias.data<float>() : nullptr;
  ep.off = symmetric ? off.data() : nullptr, ep.relu = act == "relu";
  const int32_t za = xz;
  qgemm::Args g = PackedArgs(pb, count / k, k, n, q, false, symmetric ? nullptr : &za,
                             reinterpret_cast<int32_t*>(y->data<float>()));
  g.epilogue = &ep;
  qgemm::QGemm(g, true);
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("PackMatMulIntegerWeight", kCPU, DType::kUInt8, PackKernel);
REGISTER_KERNEL("PackMatMulIntegerWeight", kCPU, DType::kInt8, PackKernel);
REGISTER_KERNEL("MatMulIntegerPacked", kCPU, DType::kUInt8, MatMulIntegerPackedKernel);
REGISTER_KERNEL("MatMulIntegerPacked", kCPU, DType::kInt8, MatMulIntegerPackedKernel);
REGISTER_KERNEL("DynamicQuantizeMatMul", kCPU, DType::kFloat32, DynamicQuantizeMatMulKernel);

}  // namespace quant
}  // namespace opforge
