// FusedMatMul (activation(op(a) op(b) + bias) through the GEMM's epilogue:
// one pass, the bias and activation applied per output tile while it is in
// cache) and the first half of its gradient, FusedMatMulActivationGrad
// (dy * activation'(pre)); the second half is MatMulGrad. The second-order
// term of that gradient, FusedMatMulActivationGradGrad, closes the loop.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gemm/gemm.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "vector_math.h"

namespace opforge {
namespace {

gemm::Activation ParseActivation(const std::string& act) {
  return act == "relu"      ? gemm::Activation::kRelu
         : act == "gelu"    ? gemm::Activation::kGelu
         : act == "silu"    ? gemm::Activation::kSilu
         : act == "sigmoid" ? gemm::Activation::kSigmoid
                            : gemm::Activation::kNone;
}

// The product's rows m, columns n and depth k from the FusedMatMul inputs.
struct Dims {
  int64_t m, n, k;
};
Dims ProductDims(const Tensor& a, const Tensor& bias, bool ta, int64_t out_elements) {
  const int64_t n = bias.dim(0);
  return {n == 0 ? 0 : out_elements / n, n, ta ? a.dim(0) : a.dim(a.rank() - 1)};
}

// out = activation(op(a) op(b) + bias).
void Forward(const Tensor& a, const Tensor& b, const Tensor& bias, bool ta, bool tb, gemm::Activation act,
             const Dims& d, float* out) {
  gemm::Epilogue ep;
  ep.bias_kind = gemm::BiasKind::kPerColumn;
  ep.bias = bias.data<float>();
  ep.activation = act;
  gemm::Sgemm(ta, tb, d.m, d.n, d.k, 1.0f, a.data<float>(), ta ? d.m : d.k, b.data<float>(), tb ? d.k : d.n, 0.0f,
              out, d.n, ep);
}

Status FusedMatMulKernel(OpKernelContext* ctx) {
  const Tensor& a = ctx->input(0);
  const Tensor& b = ctx->input(1);
  const Tensor& bias = ctx->input(2);
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const bool ta = ctx->attr_bool("transpose_a"), tb = ctx->attr_bool("transpose_b");
  const Dims d = ProductDims(a, bias, ta, out->NumElements());
  if (d.m == 0 || d.n == 0) return Status::OK();
  Forward(a, b, bias, ta, tb, ParseActivation(ctx->attr("activation").s), d, out->data<float>());
  return Status::OK();
}

// dpre[i] = dy[i] * activation'(pre[i]) for i in [0, n): relu and sigmoid
// read y, gelu and silu pre.
void ActivationGradRange(gemm::Activation act, const float* dy, const float* y, const float* pre, float* dpre,
                         int64_t n) {
  switch (act) {
    case gemm::Activation::kNone:
      for (int64_t i = 0; i < n; ++i) dpre[i] = dy[i];
      break;
    case gemm::Activation::kRelu:
      // Both loads unconditional, so the loop is a vector blend, not a
      // branch per element (15 us against 2.5 at 64 x 256).
      for (int64_t i = 0; i < n; ++i) {
        const float d = dy[i];
        dpre[i] = y[i] > 0.0f ? d : 0.0f;
      }
      break;
    case gemm::Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) dpre[i] = dy[i] * y[i] * (1.0f - y[i]);
      break;
    case gemm::Activation::kSilu:
      // silu'(x) = s + x s (1 - s), s = sigmoid(x).
      vmath::Unary(vmath::UnaryFn::kSigmoid, pre, dpre, n, false);
      for (int64_t i = 0; i < n; ++i) {
        const float s = dpre[i];
        dpre[i] = dy[i] * (s + pre[i] * s * (1.0f - s));
      }
      break;
    case gemm::Activation::kGelu:
      // gelu'(x) = Phi(x) + x phi(x) (the exact, erf form).
      for (int64_t i = 0; i < n; ++i) {
        const float x = pre[i];
        const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752f));
        const float pdf = 0.39894228040143268f * std::exp(-0.5f * x * x);
        dpre[i] = dy[i] * (cdf + x * pdf);
      }
      break;
  }
}

// dpre = dy * activation'(pre). relu and sigmoid read the output y; gelu
// and silu need pre itself, recomputed by one GEMM with the bias epilogue
// (cheaper than keeping it alive from the forward pass for every layer).
Status FusedMatMulActivationGradKernel(OpKernelContext* ctx) {
  const Tensor& dy_t = ctx->input(0);
  const Tensor& y_t = ctx->input(1);
  const Tensor& a = ctx->input(2);
  const Tensor& b = ctx->input(3);
  const Tensor& bias = ctx->input(4);
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  const bool ta = ctx->attr_bool("transpose_a"), tb = ctx->attr_bool("transpose_b");
  const int64_t total = out->NumElements();
  const Dims d = ProductDims(a, bias, ta, total);
  if (total == 0) return Status::OK();
  if (d.m * d.n != total) {
    return errors::InvalidArgument("FusedMatMulActivationGrad: argument 'y' has ", total,
                                   " elements, the product of a and b ", d.m * d.n);
  }
  const gemm::Activation act = ParseActivation(ctx->attr("activation").s);
  const float* dy = dy_t.data<float>();
  const float* y = y_t.data<float>();
  float* dpre = out->data<float>();
  std::vector<float> pre_buf;
  const float* pre = nullptr;
  if (act == gemm::Activation::kGelu || act == gemm::Activation::kSilu) {
    pre_buf.resize(total);
    Forward(a, b, bias, ta, tb, gemm::Activation::kNone, d, pre_buf.data());
    pre = pre_buf.data();
  }
  ParallelFor(total, 8, [&](int64_t i0, int64_t i1) {
    ActivationGradRange(act, dy + i0, y + i0, pre == nullptr ? nullptr : pre + i0, dpre + i0, i1 - i0);
  });
  return Status::OK();
}

// A FusedMatMul layer's backward in one op. dpre and the bias's column sums
// come from one pass over dy (and y) in fixed blocks of kSumRows rows, each
// block's sums in float while its rows are in L1, the blocks' sums added in
// order in double: the same sums on any thread count. Then MatMulGrad's two
// products read dpre while it is still cached (the unfused path wrote dpre,
// summed it in a pass of its own, then multiplied). Column blocks instead
// (64 wide, rows 4 KiB apart) ran the pass 6x slower than relu grad + sum.
constexpr int64_t kSumRows = 16;

// The products of MatMulGrad(a, b, dpre) for FusedMatMul's operands (a
// [m, k], or [k, m] with ta, rows folded; b 2-D), by the cases of op(a)
// op(b) = pre: grad_a = dpre op(b)^T, grad_b = op(a)^T dpre, each stored in
// its operand's layout.
void ProductGrads(const float* dpre, const float* a, const float* b, bool ta, bool tb, const Dims& d, float* ga,
                  float* gb) {
  const int64_t m = d.m, n = d.n, k = d.k;
  if (ga != nullptr) {
    if (!ta) {
      gemm::Sgemm(false, !tb, m, k, n, 1.0f, dpre, n, b, tb ? k : n, 0.0f, ga, k);
    } else {
      gemm::Sgemm(tb, true, k, m, n, 1.0f, b, tb ? k : n, dpre, n, 0.0f, ga, m);
    }
  }
  if (gb != nullptr) {
    if (!tb) {
      gemm::Sgemm(!ta, false, k, n, m, 1.0f, a, ta ? m : k, dpre, n, 0.0f, gb, n);
    } else {
      gemm::Sgemm(true, ta, n, k, m, 1.0f, dpre, n, a, ta ? m : k, 0.0f, gb, k);
    }
  }
}

Status FusedMatMulGradKernel(OpKernelContext* ctx) {
  const Tensor& dy_t = ctx->input(0);
  const Tensor& y_t = ctx->input(1);
  const Tensor& a = ctx->input(2);
  const Tensor& b = ctx->input(3);
  const Tensor& bias = ctx->input(4);
  Tensor *ga_t, *gb_t, *gbias_t;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &ga_t));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &gb_t));
  OF_RETURN_IF_ERROR(ctx->allocate_output(2, &gbias_t));
  const bool ta = ctx->attr_bool("transpose_a"), tb = ctx->attr_bool("transpose_b");
  const bool want_a = ctx->attr_bool("compute_grad_a"), want_b = ctx->attr_bool("compute_grad_b");
  const bool want_bias = ctx->attr_bool("compute_grad_bias");
  const int64_t total = y_t.NumElements();
  const Dims d = ProductDims(a, bias, ta, total);
  float* ga = ga_t->data<float>();
  float* gb = gb_t->data<float>();
  float* gbias = gbias_t->data<float>();
  auto zero = [](Tensor* t) {
    float* z = t->data<float>();
    ParallelFor(t->NumElements(), 1, [&](int64_t i0, int64_t i1) { std::fill(z + i0, z + i1, 0.0f); });
  };
  if (!want_a || total == 0) zero(ga_t);
  if (!want_b || total == 0) zero(gb_t);
  if (!want_bias || total == 0) zero(gbias_t);
  if (total == 0 || (!want_a && !want_b && !want_bias)) return Status::OK();
  if (d.m * d.n != total) {
    return errors::InvalidArgument("FusedMatMulGrad: argument 'y' has ", total, " elements, the product of a and b ",
                                   d.m * d.n);
  }
  const gemm::Activation act = ParseActivation(ctx->attr("activation").s);
  const float* dy = dy_t.data<float>();
  const float* y = y_t.data<float>();
  std::vector<float> pre_buf;
  const float* pre = nullptr;
  if (act == gemm::Activation::kGelu || act == gemm::Activation::kSilu) {
    pre_buf.resize(total);
    Forward(a, b, bias, ta, tb, gemm::Activation::kNone, d, pre_buf.data());
    pre = pre_buf.data();
  }
  // dpre: a tensor from the framework's allocator (it caches large blocks:
  // no page faults per call).
  Tensor dpre_t;
  OF_RETURN_IF_ERROR(Tensor::Allocate(DType::kFloat32, y_t.shape(), &dpre_t));
  float* dpre = dpre_t.data<float>();
  const int64_t m = d.m, n = d.n, chunks = (m + kSumRows - 1) / kSumRows;
  std::vector<float> partial(want_bias ? chunks * n : 0);
  ParallelFor(chunks, kSumRows * n * 4, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t i0 = c * kSumRows, i1 = std::min(m, i0 + kSumRows), o = i0 * n;
      ActivationGradRange(act, dy + o, y + o, pre == nullptr ? nullptr : pre + o, dpre + o, (i1 - i0) * n);
      if (!want_bias) continue;
      float* part = partial.data() + c * n;
      std::copy(dpre + o, dpre + o + n, part);
      for (int64_t i = i0 + 1; i < i1; ++i) {
        const float* row = dpre + i * n;
        for (int64_t j = 0; j < n; ++j) part[j] += row[j];
      }
    }
  });
  if (want_bias) {
    ParallelFor(n, chunks * 2, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        double s = 0.0;
        for (int64_t c = 0; c < chunks; ++c) s += partial[c * n + j];
        gbias[j] = static_cast<float>(s);
      }
    });
  }
  ProductGrads(dpre, a.data<float>(), b.data<float>(), ta, tb, d, want_a ? ga : nullptr, want_b ? gb : nullptr);
  return Status::OK();
}

// ddpre * dy * act''(pre): zero for none and relu (act'' = 0 almost
// everywhere), so the second derivative through a fused relu layer is exact;
// the smooth activations are refused rather than answered wrongly.
Status FusedMatMulActivationGradGradKernel(OpKernelContext* ctx) {
  const std::string& act = ctx->attr("activation").s;
  if (act != "none" && act != "relu") {
    return errors::Unimplemented("FusedMatMulActivationGradGrad: argument 'activation' is '", act,
                                 "': the second derivative of a FusedMatMul is implemented for 'none' and "
                                 "'relu' only; "
                                 "differentiate the unfused ops (MatMul, Add, ", act, ") instead");
  }
  Tensor* out;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &out));
  float* z = out->data<float>();
  const int64_t total = out->NumElements();
  ParallelFor(total, 1, [&](int64_t i0, int64_t i1) { std::fill(z + i0, z + i1, 0.0f); });
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("FusedMatMulActivationGradGrad", kCPU, DType::kFloat32, FusedMatMulActivationGradGradKernel);
REGISTER_KERNEL("FusedMatMul", kCPU, DType::kFloat32, FusedMatMulKernel);
REGISTER_KERNEL("FusedMatMulActivationGrad", kCPU, DType::kFloat32, FusedMatMulActivationGradKernel);
REGISTER_KERNEL("FusedMatMulGrad", kCPU, DType::kFloat32, FusedMatMulGradKernel);

}  // namespace opforge
