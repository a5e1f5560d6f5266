// PackMatMulWeight and FusedMatMulPacked (cpp/ops/packed_matmul_ops.cc): a
// constant float32 weight packed once into the microkernels' B panels
// (gemm::PackBPanels), and the fused product over them (SgemmStrided with
// b_panels: no per-call packing, and a small-M product reads each panel as
// one contiguous stream instead of kc rows strided by n).
//
// A narrow weight (n <= nr / 2: a classifier's last layer) would fill under
// half of the one panel's columns, so it is stored as rows instead ([n, k],
// flag kRows), and from kTransposeRows rows of a on the product runs
// transposed: C^T = W A^T, the weight's n rows down the microkernel's tile
// (bias per row, activation in the same epilogue), then C^T is copied into C.
// One thread, CPU time, 64 x 512 x 10: 22.3 us in a panel, 13.8 transposed.
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

constexpr uint32_t kRows = 1;          // header flag: the weight as [n, k] rows, not panels
constexpr int64_t kTransposeRows = 16;  // from this many rows of a a rows blob runs C^T = W A^T

bool StoresRows(int64_t n, int nr) { return 2 * n <= nr; }
int64_t PayloadFloats(int64_t k, int64_t n, int nr) {
  return StoresRows(n, nr) ? n * k : gemm::PackedBFloats(k, n, nr);
}

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
  const bool rows = StoresRows(n, nr);
  const int64_t payload = 4 * PayloadFloats(k, n, nr);
  if (packed::kHeaderBytes + payload > out->NumElements() || out->NumElements() != BlobBytes(k, n)) {
    return errors::Internal("the panels do not fit the shape function's blob size");
  }
  uint8_t* dst = out->data<uint8_t>();
  // The blob's tail past the panels (sized for the widest ISA) is zeroed:
  // blobs are compared and hashed as bytes.
  std::memset(dst + packed::kHeaderBytes + payload, 0, out->NumElements() - packed::kHeaderBytes - payload);
  float* body = reinterpret_cast<float*>(dst + packed::kHeaderBytes);
  const float* w = b.data<float>();
  if (!rows) {
    gemm::PackBPanels(w, tb ? 1 : n, tb ? k : 1, k, n, body);
  } else if (tb) {
    std::memcpy(body, w, sizeof(float) * n * k);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) body[j * k + p] = w[p * n + j];
    }
  }
  packed::Header h{};
  h.format = packed::kFormatFloat;
  packed::SetLayout(&h, Layout().c_str());
  h.mr = 0, h.nr = nr, h.kgroup = 1, h.wide = 0;
  h.k = k, h.n = n, h.payload_bytes = static_cast<uint64_t>(payload);
  h.flags = rows ? kRows : 0;
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
  if (h.flags != (StoresRows(h.n, h.nr) ? kRows : 0) ||
      h.payload_bytes != static_cast<uint64_t>(4 * PayloadFloats(h.k, h.n, h.nr)) ||
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
  const float* body = reinterpret_cast<const float*>(packed::Payload(blob, h, &copy));
  const int64_t m = out->NumElements() / n;
  float* y = out->data<float>();
  if ((h.flags & kRows) == 0) {
    gemm::StridedArgs g{m, n, k, 1.0f, a.data<float>(), k, 1, nullptr, 0, 0, 0.0f, y, n};
    g.b_panels = body;
    gemm::SgemmStrided(g, ep, true);
  } else if (m < kTransposeRows) {
    // A few rows: one GEMV per row over the weight's rows (dot products, no
    // packing; M = 4, 256 x 10: 2.8 us as one transposed-B product, 1.x as GEMVs).
    for (int64_t i = 0; i < m; ++i) {
      gemm::SgemmStrided({1, n, k, 1.0f, a.data<float>() + i * k, k, 1, body, 1, k, 0.0f, y + i * n, n}, ep, true);
    }
  } else {
    static thread_local std::vector<float> yt;
    if (static_cast<int64_t>(yt.size()) < n * m) yt.resize(static_cast<size_t>(n * m));
    if (ep.bias_kind == gemm::BiasKind::kPerColumn) ep.bias_kind = gemm::BiasKind::kPerRow;
    gemm::SgemmStrided({n, m, k, 1.0f, body, k, 1, a.data<float>(), 1, k, 0.0f, yt.data(), m}, ep, true);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = yt[j * m + i];
    }
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("PackMatMulWeight", kCPU, DType::kFloat32, PackKernel);
REGISTER_KERNEL("FusedMatMulPacked", kCPU, DType::kFloat32, FusedPackedKernel);

}  // namespace opforge
