// PackMatMulWeight and FusedMatMulPacked (cpp/ops/packed_matmul_ops.cc): a
// constant float32 weight packed once into the microkernels' B panels
// (gemm::PackBPanels), and the fused product over them (SgemmStrided with
// b_panels: no per-call packing, and a small-M product reads each panel as
// one contiguous stream instead of kc rows strided by n).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../quant/packed_blob.h"
#include "gemm.h"
#include "opforge/kernel.h"

namespace opforge {
namespace {

// The layout name a blob's panels were packed for: the ISA, whose panel
// width the header also records.
std::string Layout() { return std::string("sgemm-") + gemm::SgemmIsa(); }

// The blob's bytes as PackMatMulWeight's shape function sizes it: the
// header and panels 32 wide (the widest ISA's), whatever the ISA in use.
int64_t BlobBytes(int64_t k, int64_t n) { return packed::kHeaderBytes + 4 * k * ((n + 31) / 32 * 32); }

Status PackKernel(OpKernelContext* ctx) {
  const Tensor& b = ctx->input(0);
  const bool tb = ctx->attr_bool("transpose_b");
  const int64_t k = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const int nr = gemm::SgemmPanelWidth();
  const int64_t payload = 4 * gemm::PackedBFloats(k, n, nr);
  if (packed::kHeaderBytes + payload > out->NumElements() || out->NumElements() != BlobBytes(k, n)) {
    return errors::Internal("the panels do not fit the shape function's blob size");
  }
  uint8_t* dst = out->data<uint8_t>();
  // The blob's tail past the panels (sized for the widest ISA) is zeroed:
  // blobs are compared and hashed as bytes.
  std::memset(dst + packed::kHeaderBytes + payload, 0, out->NumElements() - packed::kHeaderBytes - payload);
  gemm::PackBPanels(b.data<float>(), tb ? 1 : n, tb ? k : 1, k, n,
                    reinterpret_cast<float*>(dst + packed::kHeaderBytes));
  packed::Header h{};
  h.format = packed::kFormatFloat;
  packed::SetLayout(&h, Layout().c_str());
  h.mr = 0, h.nr = nr, h.kgroup = 1, h.wide = 0;
  h.k = k, h.n = n, h.payload_bytes = static_cast<uint64_t>(payload);
  packed::WriteHeader(h, dst);
  return Status::OK();
}

Status ParseActivation(const std::string& act, gemm::Activation* out) {
  if (act == "none") *out = gemm::Activation::kNone;
  else if (act == "relu") *out = gemm::Activation::kRelu;
  else if (act == "gelu") *out = gemm::Activation::kGelu;
  else if (act == "silu") *out = gemm::Activation::kSilu;
  else if (act == "sigmoid") *out = gemm::Activation::kSigmoid;
  else {
    return errors::InvalidArgument("attr 'activation' must be 'none', 'relu', 'gelu', 'silu' or "
                                   "'sigmoid', got '", act, "'");
  }
  return Status::OK();
}

Status FusedPackedKernel(OpKernelContext* ctx) {
  const Tensor& a = ctx->input(0);
  const Tensor& blob = ctx->input(1);
  const Tensor& bias = ctx->input(2);
  const int64_t k = a.dim(a.rank() - 1), n = ctx->attr_int("n");
  packed::Header h;
  OF_RETURN_IF_ERROR(packed::ReadHeader(blob, "packed", packed::kFormatFloat, &h));
  const std::string layout = Layout();
  if (std::strncmp(h.layout, layout.c_str(), sizeof(h.layout)) != 0 || h.nr != gemm::SgemmPanelWidth()) {
    return errors::InvalidArgument("argument 'packed' was packed for '",
                                   std::string(h.layout, strnlen(h.layout, sizeof(h.layout))), "' (panel width ",
                                   h.nr, "), this process runs '", layout,
                                   "': pack the weight again in this process (PackMatMulWeight)");
  }
  if (h.payload_bytes != static_cast<uint64_t>(4 * gemm::PackedBFloats(h.k, h.n, h.nr)) ||
      blob.NumElements() != BlobBytes(h.k, h.n)) {
    return errors::InvalidArgument("argument 'packed' is not a packed weight of this op: its "
                                   "payload or total size does not match k = ", h.k, ", n = ", h.n);
  }
  if (h.k != k) {
    return errors::InvalidArgument("argument 'packed' holds a weight with ", h.k,
                                   " rows, but the inner dimension of argument 'a' is ", k);
  }
  if (h.n != n) {
    return errors::InvalidArgument("argument 'packed' holds a weight with ", h.n,
                                   " columns, but attr 'n' is ", n);
  }
  gemm::Epilogue ep;
  OF_RETURN_IF_ERROR(ParseActivation(ctx->attr_string("activation"), &ep.activation));
  if (bias.NumElements() != 0 && bias.NumElements() != n) {  // unknown in a graph's shape check
    return errors::InvalidArgument("argument 'bias' must hold 0 or ", n, " values, got ",
                                   bias.NumElements());
  }
  if (bias.NumElements() == n) ep.bias_kind = gemm::BiasKind::kPerColumn, ep.bias = bias.data<float>();
  Tensor* out = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  if (out->NumElements() == 0) return Status::OK();
  std::vector<uint8_t> copy;
  gemm::StridedArgs g{out->NumElements() / n, n, k, 1.0f, a.data<float>(), k, 1, nullptr, 0, 0, 0.0f,
                      out->data<float>(), n};
  g.b_panels = reinterpret_cast<const float*>(packed::Payload(blob, h, &copy));
  gemm::SgemmStrided(g, ep, true);
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("PackMatMulWeight", kCPU, DType::kFloat32, PackKernel);
REGISTER_KERNEL("FusedMatMulPacked", kCPU, DType::kFloat32, FusedPackedKernel);

}  // namespace opforge
