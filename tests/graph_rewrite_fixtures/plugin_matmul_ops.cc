// A plugin MatMul for tests/test_graph_util.py: 2-D float32 a @ b, computed
// in float64 accumulators row by row (another kernel than the built-in's,
// the same product to rounding). Built with the SDK only, as a user would.
#include <vector>

#include "opforge/opforge.h"

namespace opforge {
namespace {

Status MatMulShape(InferenceContext* ctx) {
  const TensorShape& a = ctx->input_shape(0);
  const TensorShape& b = ctx->input_shape(1);
  if (a.rank() != 2 || b.rank() != 2) {
    return errors::InvalidArgument("a and b must be matrices, got ranks ", a.rank(), " and ", b.rank());
  }
  if (!IsUnknownDim(a.dim(1)) && !IsUnknownDim(b.dim(0)) && a.dim(1) != b.dim(0)) {
    return errors::InvalidArgument("a has ", a.dim(1), " columns but b has ", b.dim(0), " rows");
  }
  const int64_t dims[2] = {a.dim(0), b.dim(1)};
  TensorShape out;
  OF_RETURN_IF_ERROR(MakeShape(dims, 2, &out));
  ctx->set_output_shape(0, out);
  return Status::OK();
}

Status PluginMatMulKernel(OpKernelContext* ctx) {
  const Tensor& a = ctx->input(0);
  const Tensor& b = ctx->input(1);
  Tensor* c = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &c));
  const int64_t m = a.shape().dim(0), k = a.shape().dim(1), n = b.shape().dim(1);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c->data<float>();
  std::vector<double> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) row[j] = 0;
    for (int64_t p = 0; p < k; ++p) {
      const double x = pa[i * k + p];
      for (int64_t j = 0; j < n; ++j) row[j] += x * pb[p * n + j];
    }
    for (int64_t j = 0; j < n; ++j) pc[i * n + j] = static_cast<float>(row[j]);
  }
  return Status::OK();
}

}  // namespace

REGISTER_OP("PluginMatMul")
    .Input("a: float32")
    .Input("b: float32")
    .Output("product: float32")
    .SetShapeFn(MatMulShape)
    .NoGradient()
    .Doc(R"doc(
The matrix product a @ b of two float32 matrices (a test plugin).

a: The left matrix, [m, k].
b: The right matrix, [k, n].
product: a @ b, [m, n].
)doc");
REGISTER_KERNEL("PluginMatMul", kCPU, DType::kFloat32, PluginMatMulKernel);

}  // namespace opforge
