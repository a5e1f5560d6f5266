// float16 and bfloat16 kernels of the ops that compute in float32: the inputs
// widen to float32, the op's float32 kernel runs (reductions, softmax and
// norms accumulate in float32 there), and each float output rounds once to
// the half type (nearest even). One adapter serves every op listed below;
// the ops declare `halftype` in their type attr.
//
// MatMul in bfloat16 has its own kernel (gemm/bf16_matmul.cc) that keeps the
// operands in bfloat16 and uses AVX512-BF16's dot product where present.
#include <cstdint>
#include <vector>

#include "half_via_float.h"
#include "opforge/half.h"
#include "opforge/kernel.h"
#include "opforge/parallel.h"

namespace opforge {
namespace {

template <typename H>
void Widen(const H* in, float* out, int64_t n) {
  ParallelFor(n, 2, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = static_cast<float>(in[i]);
  });
}

template <typename H>
void Narrow(const float* in, H* out, int64_t n) {
  ParallelFor(n, 2, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = H(in[i]);
  });
}

bool IsHalf(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

Status ToFloat(const Tensor& x, Tensor* out) {
  OF_RETURN_IF_ERROR(Tensor::Allocate(DType::kFloat32, x.shape(), out));
  if (x.dtype() == DType::kFloat16) Widen(x.data<float16>(), out->data<float>(), x.NumElements());
  else Widen(x.data<bfloat16>(), out->data<float>(), x.NumElements());
  return Status::OK();
}

}  // namespace

Status HalfViaFloat32(OpKernelContext* ctx) {
  const OpDef& op = ctx->op();
  const KernelFn f32 = op.kernels->fn[kCPU][static_cast<int>(DType::kFloat32)];
  if (f32 == nullptr) return errors::Internal("no float32 kernel to compute the half-precision call in");
  // The attrs with every half type attr set to float32.
  std::vector<AttrValue> attrs(ctx->attr_values(), ctx->attr_values() + op.attrs.size());
  for (AttrValue& a : attrs) {
    if (a.kind == AttrValue::kValue && IsHalf(a.type)) a.type = DType::kFloat32;
  }
  std::vector<Tensor> inputs(ctx->num_inputs());
  for (int i = 0; i < ctx->num_inputs(); ++i) {
    const Tensor& x = ctx->input(i);
    if (IsHalf(x.dtype())) OF_RETURN_IF_ERROR(ToFloat(x, &inputs[i]));
    else inputs[i] = x;
  }
  const int n_out = static_cast<int>(op.outputs.size());
  std::vector<TensorShape> shapes(n_out);
  for (int i = 0; i < n_out; ++i) shapes[i] = ctx->output_shape(i);
  std::vector<Tensor> outs(n_out);
  OpKernelContext sub(op, inputs.data(), ctx->num_inputs(), attrs.data(), shapes.data(), outs.data());
  OF_RETURN_IF_ERROR(f32(&sub));
  OF_RETURN_IF_ERROR(sub.lookup_error());
  for (int i = 0; i < n_out; ++i) {
    const ArgDef& arg = op.outputs[i];
    const DType want = arg.fixed_type != DType::kInvalid ? arg.fixed_type : ctx->attr_values()[arg.type_attr_index].type;
    if (!IsHalf(want) || outs[i].dtype() != DType::kFloat32) {
      ctx->set_output(i, std::move(outs[i]));
      continue;
    }
    Tensor* y = nullptr;
    OF_RETURN_IF_ERROR(ctx->allocate_output(i, &y));
    const int64_t n = outs[i].NumElements();
    if (want == DType::kFloat16) Narrow(outs[i].data<float>(), y->data<float16>(), n);
    else Narrow(outs[i].data<float>(), y->data<bfloat16>(), n);
  }
  return Status::OK();
}

// The ops whose float32 kernel computes their half-precision calls.
#define OF_HALF_VIA_FLOAT(op)                                   \
  REGISTER_KERNEL(op, kCPU, DType::kFloat16, HalfViaFloat32);       \
  REGISTER_KERNEL(op, kCPU, DType::kBFloat16, HalfViaFloat32)

// elementwise (math)
OF_HALF_VIA_FLOAT("Abs");
OF_HALF_VIA_FLOAT("Add");
OF_HALF_VIA_FLOAT("Cos");
OF_HALF_VIA_FLOAT("Div");
OF_HALF_VIA_FLOAT("Exp");
OF_HALF_VIA_FLOAT("Log");
OF_HALF_VIA_FLOAT("Maximum");
OF_HALF_VIA_FLOAT("Minimum");
OF_HALF_VIA_FLOAT("Mul");
OF_HALF_VIA_FLOAT("Neg");
OF_HALF_VIA_FLOAT("Pow");
OF_HALF_VIA_FLOAT("Relu");
OF_HALF_VIA_FLOAT("Sigmoid");
OF_HALF_VIA_FLOAT("Sin");
OF_HALF_VIA_FLOAT("Sqrt");
OF_HALF_VIA_FLOAT("Square");
OF_HALF_VIA_FLOAT("Sub");
OF_HALF_VIA_FLOAT("Tanh");
// elementwise (special)
OF_HALF_VIA_FLOAT("Ceil");
OF_HALF_VIA_FLOAT("Erf");
OF_HALF_VIA_FLOAT("Floor");
OF_HALF_VIA_FLOAT("IsInf");
OF_HALF_VIA_FLOAT("IsNan");
OF_HALF_VIA_FLOAT("Round");
OF_HALF_VIA_FLOAT("Sign");
// reductions
OF_HALF_VIA_FLOAT("ArgMax");
OF_HALF_VIA_FLOAT("ArgMin");
OF_HALF_VIA_FLOAT("Max");
OF_HALF_VIA_FLOAT("Mean");
OF_HALF_VIA_FLOAT("Min");
OF_HALF_VIA_FLOAT("Prod");
OF_HALF_VIA_FLOAT("Sum");
// softmax, norms, activations, gather
OF_HALF_VIA_FLOAT("Softmax");
OF_HALF_VIA_FLOAT("LogSoftmax");
OF_HALF_VIA_FLOAT("RmsNorm");
OF_HALF_VIA_FLOAT("Gelu");
OF_HALF_VIA_FLOAT("GeluGrad");
OF_HALF_VIA_FLOAT("LayerNorm");
OF_HALF_VIA_FLOAT("LayerNormGrad");
OF_HALF_VIA_FLOAT("Gather");
OF_HALF_VIA_FLOAT("GatherGrad");
OF_HALF_VIA_FLOAT("SparseSoftmaxCrossEntropyWithLogits");
// gradients
OF_HALF_VIA_FLOAT("SoftmaxGrad");
OF_HALF_VIA_FLOAT("RmsNormGrad");
OF_HALF_VIA_FLOAT("MatMulGrad");
OF_HALF_VIA_FLOAT("ReduceGrad");
OF_HALF_VIA_FLOAT("ReduceGradGrad");
OF_HALF_VIA_FLOAT("SliceGrad");
OF_HALF_VIA_FLOAT("ConcatGrad");
OF_HALF_VIA_FLOAT("ConcatGradGrad");
// pooling (the forward ops; ResNet's max and average pools)
OF_HALF_VIA_FLOAT("MaxPool2D");
OF_HALF_VIA_FLOAT("AvgPool2D");
OF_HALF_VIA_FLOAT("AdaptiveAvgPool2D");
// convolution (its GEMM)
OF_HALF_VIA_FLOAT("Conv2D");
OF_HALF_VIA_FLOAT("FusedConv2D");  // Conv + Relu as imported from ONNX
OF_HALF_VIA_FLOAT("Conv2DBackpropInput");
OF_HALF_VIA_FLOAT("Conv2DBackpropFilter");
// MatMul has its own half kernels: float16 in gemm/f16_matmul.cc (float32
// panels, F16C), bfloat16 in gemm/bf16_matmul.cc (AVX512-BF16).

#undef OF_HALF_VIA_FLOAT

}  // namespace opforge
