// MatMulInteger and QLinearMatMul on the 8-bit GEMM (qgemm.h). With a 2-D
// (or 1-D) b, a's leading axes fold into rows: one GEMM. Otherwise one GEMM
// per broadcast batch entry.
#include <cstdint>
#include <vector>

#include "opforge/kernel.h"
#include "opforge/parallel.h"
#include "qgemm.h"
#include "quant_common.h"

namespace opforge {
namespace quant {
namespace {

// Zero points (or requantization scales) as arrays indexed by row / column.
std::vector<int32_t> ZeroPoints(const Tensor& z) {
  std::vector<int32_t> v(static_cast<size_t>(z.NumElements()));
  for (int64_t i = 0; i < z.NumElements(); ++i) v[i] = ZeroPointAt(z, i);
  return v;
}

// y (int32, the output's shape) = (a - za) @ (b - zb), numpy.matmul shapes.
void MatMulInt(const Tensor& a, const Tensor& b, const Tensor& za, const Tensor& zb, int32_t* y) {
  const TensorShape& as = a.shape();
  const TensorShape& bs = b.shape();
  const int64_t k = as.dim(as.rank() - 1);
  const int64_t m = as.rank() == 1 ? 1 : as.dim(as.rank() - 2);
  const int64_t n = bs.rank() == 1 ? 1 : bs.dim(bs.rank() - 1);
  const std::vector<int32_t> zav = ZeroPoints(za), zbv = ZeroPoints(zb);
  qgemm::Args g;
  g.k = k, g.n = n;
  g.a_signed = a.dtype() == DType::kInt8, g.b_signed = b.dtype() == DType::kInt8;
  g.a_zero = zav.data(), g.a_zero_per_row = zav.size() > 1;
  g.b_zero = zbv.data(), g.b_zero_per_col = zbv.size() > 1;
  g.rs_a = k, g.cs_a = 1, g.rs_b = n, g.cs_b = 1, g.ldc = n;
  if (bs.rank() <= 2 && !(g.a_zero_per_row && as.rank() > 2)) {
    g.m = 1;
    for (int i = 0; i + 1 < as.rank(); ++i) g.m *= as.dim(i);
    g.a = a.raw_data(), g.b = b.raw_data(), g.c = y;
    qgemm::QGemm(g, true);
    return;
  }
  // Batched b: broadcast the batch axes (right-aligned) of a and b.
  const int ra = as.rank() >= 2 ? as.rank() - 2 : 0, rb = bs.rank() - 2;
  const int rank = ra > rb ? ra : rb;
  std::vector<int64_t> dims(rank), sa(rank, 0), sb(rank, 0);
  int64_t stride_a = m * k, stride_b = k * n;
  for (int i = rank - 1; i >= 0; --i) {
    const int ia = i - (rank - ra), ib = i - (rank - rb);
    const int64_t da = ia >= 0 ? as.dim(ia) : 1, db = ib >= 0 ? bs.dim(ib) : 1;
    dims[i] = da > db ? da : db;
    sa[i] = da == 1 ? 0 : stride_a;
    sb[i] = db == 1 ? 0 : stride_b;
    stride_a *= da, stride_b *= db;
  }
  int64_t batches = 1;
  for (int64_t d : dims) batches *= d;
  g.m = m;
  for (int64_t t = 0; t < batches; ++t) {
    int64_t rem = t, oa = 0, ob = 0;
    for (int i = rank - 1; i >= 0; --i) {
      const int64_t idx = rem % dims[i];
      rem /= dims[i];
      oa += idx * sa[i], ob += idx * sb[i];
    }
    g.a = static_cast<const uint8_t*>(a.raw_data()) + oa;
    g.b = static_cast<const uint8_t*>(b.raw_data()) + ob;
    g.c = y + t * m * n;
    qgemm::QGemm(g, true);
  }
}

Status MatMulIntegerKernel(OpKernelContext* ctx) {
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  MatMulInt(ctx->input(0), ctx->input(1), ctx->input(2), ctx->input(3), y->data<int32_t>());
  return Status::OK();
}

template <typename Q>
void Requantize(const int32_t* acc, int64_t rows, int64_t m, int64_t n, const Tensor& sa, const Tensor& sb,
                float sy, float zy, Q* y) {
  const float* av = sa.data<float>();
  const float* bv = sb.data<float>();
  const bool per_row = sa.NumElements() > 1, per_col = sb.NumElements() > 1;
  std::vector<float> col(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) col[j] = bv[per_col ? j : 0];
  ParallelFor(rows, n * 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float s = av[per_row ? r % m : 0];
      const int32_t* ar = acc + r * n;
      Q* yr = y + r * n;
      for (int64_t j = 0; j < n; ++j) {
        yr[j] = Saturate<Q>(RoundHalfEven(static_cast<float>(ar[j]) * (s * col[j] / sy)) + zy);
      }
    }
  });
}

Status QLinearMatMulKernel(OpKernelContext* ctx) {
  const Tensor &a = ctx->input(0), &sa = ctx->input(1), &za = ctx->input(2);
  const Tensor &b = ctx->input(3), &sb = ctx->input(4), &zb = ctx->input(5);
  const Tensor &sy = ctx->input(6), &zy = ctx->input(7);
  OF_RETURN_IF_ERROR(CheckScales(sa, "a_scale"));
  OF_RETURN_IF_ERROR(CheckScales(sb, "b_scale"));
  OF_RETURN_IF_ERROR(CheckScales(sy, "y_scale"));
  Tensor* y = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &y));
  if (y->NumElements() == 0) return Status::OK();
  std::vector<int32_t> acc(static_cast<size_t>(y->NumElements()));
  MatMulInt(a, b, za, zb, acc.data());
  const int64_t m = a.rank() == 1 ? 1 : a.dim(a.rank() - 2);
  const int64_t n = b.rank() == 1 ? 1 : b.dim(b.rank() - 1);
  const int64_t rows = y->NumElements() / n;
  const float s = sy.data<float>()[0], z = static_cast<float>(ZeroPointAt(zy, 0));
  if (zy.dtype() == DType::kUInt8) {
    Requantize<uint8_t>(acc.data(), rows, m, n, sa, sb, s, z, y->data<uint8_t>());
  } else {
    Requantize<int8_t>(acc.data(), rows, m, n, sa, sb, s, z, y->data<int8_t>());
  }
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("MatMulInteger", kCPU, DType::kUInt8, MatMulIntegerKernel);
REGISTER_KERNEL("MatMulInteger", kCPU, DType::kInt8, MatMulIntegerKernel);
REGISTER_KERNEL("QLinearMatMul", kCPU, DType::kUInt8, QLinearMatMulKernel);
REGISTER_KERNEL("QLinearMatMul", kCPU, DType::kInt8, QLinearMatMulKernel);

}  // namespace quant
}  // namespace opforge
