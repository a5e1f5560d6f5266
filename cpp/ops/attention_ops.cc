// The attention group: ApplyRotaryEmbedding (rotary position embeddings, as the
// ONNX importer fuses them), ScaledDotProductAttention, computed blockwise with an
// online softmax (the [Sq, Sk] score matrix never exists whole), and its
// backward op, which recomputes the softmax statistics instead of storing
// them. Kernels live in cpp/kernels/attention/.
#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

bool Known(int64_t d) { return !IsUnknownDim(d); }

Status CheckDim(const TensorShape& a, int i, const char* an, const TensorShape& b, int j, const char* bn,
                const char* what) {
  if (Known(a.dim(i)) && Known(b.dim(j)) && a.dim(i) != b.dim(j)) {
    return errors::InvalidArgument("argument '", an, "' ", a.DebugString(), " and argument '", bn, "' ",
                                   b.DebugString(), " differ in ", what);
  }
  return Status::OK();
}

// [B, S, H, D] (attr bshd) as [B, H, S, D]; other ranks as they are.
TensorShape AsBhsd(const TensorShape& s, bool bshd) {
  if (!bshd || s.rank() != 4) return s;
  return TensorShape({s.dim(0), s.dim(2), s.dim(1), s.dim(3)});
}

// q [B, Hq, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] (or each [B, S, H, D]
// with bshd), mask broadcastable to [B, Hq, Sq, Sk].
Status CheckAttentionInputs(InferenceContext* ctx) {
  const bool bshd = ctx->attr_bool("bshd");
  const TensorShape q = AsBhsd(ctx->input_shape(0), bshd);
  const TensorShape k = AsBhsd(ctx->input_shape(1), bshd);
  const TensorShape v = AsBhsd(ctx->input_shape(2), bshd);
  const TensorShape& m = ctx->input_shape(3);
  const char* names[] = {"query", "key", "value"};
  const TensorShape* s[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    if (s[i]->rank() != 4) {
      return errors::InvalidArgument("argument '", names[i], "' must be 4-D ",
                                     bshd ? "[batch, seq, heads, dim]" : "[batch, heads, seq, dim]", ", got ",
                                     ctx->input_shape(i).DebugString());
    }
  }
  OF_RETURN_IF_ERROR(CheckDim(q, 0, "query", k, 0, "key", "batch"));
  OF_RETURN_IF_ERROR(CheckDim(q, 0, "query", v, 0, "value", "batch"));
  OF_RETURN_IF_ERROR(CheckDim(k, 1, "key", v, 1, "value", "heads"));
  OF_RETURN_IF_ERROR(CheckDim(k, 2, "key", v, 2, "value", "sequence length"));
  OF_RETURN_IF_ERROR(CheckDim(q, 3, "query", k, 3, "key", "head dim"));
  if (Known(q.dim(1)) && Known(k.dim(1)) && (k.dim(1) == 0 || q.dim(1) % k.dim(1) != 0)) {
    return errors::InvalidArgument("argument 'query' has ", q.dim(1), " heads, not a multiple of argument 'key''s ",
                                   k.dim(1), " (grouped key/value heads must divide the query heads)");
  }
  if (m.rank() > 4) return errors::InvalidArgument("argument 'mask' must have rank <= 4, got ", m.DebugString());
  const int64_t full[4] = {q.dim(0), q.dim(1), q.dim(2), k.dim(2)};
  for (int i = 0; i < m.rank(); ++i) {
    const int64_t want = full[4 - m.rank() + i], got = m.dim(i);
    if (Known(want) && Known(got) && got != 1 && got != want) {
      return errors::InvalidArgument("argument 'mask' ", m.DebugString(), " does not broadcast to the scores [",
                                     full[0], ", ", full[1], ", ", full[2], ", ", full[3], "]");
    }
  }
  if (ctx->attr_float("scale") < 0) return errors::InvalidArgument("attr 'scale' must be >= 0 (0: 1/sqrt(dim))");
  return Status::OK();
}

// The output: query's shape with value's head dim (in query's layout).
TensorShape AttentionOutShape(InferenceContext* ctx) {
  const TensorShape& q = ctx->input_shape(0);
  return TensorShape({q.dim(0), q.dim(1), q.dim(2), ctx->input_shape(2).dim(3)});
}

Status AttentionShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckAttentionInputs(ctx));
  ctx->set_output_shape(0, AttentionOutShape(ctx));
  return Status::OK();
}

Status AttentionGradShape(InferenceContext* ctx) {
  OF_RETURN_IF_ERROR(CheckAttentionInputs(ctx));
  for (int i = 4; i < 6; ++i) {  // y and dy: the forward's output shape
    const TensorShape want = AttentionOutShape(ctx);
    const TensorShape& got = ctx->input_shape(i);
    bool ok = got.rank() == 4;
    for (int d = 0; ok && d < 4; ++d) ok = !Known(want.dim(d)) || !Known(got.dim(d)) || want.dim(d) == got.dim(d);
    if (!ok) {
      return errors::InvalidArgument("argument '", i == 4 ? "y" : "dy", "' ", got.DebugString(),
                                     " must have the attention output's shape ", want.DebugString());
    }
  }
  for (int i = 0; i < 3; ++i) ctx->set_output_shape(i, ctx->input_shape(i));
  return Status::OK();
}

// x [..., D] with D even; cos and sin of rank <= rank(x), each dim 1 or x's,
// the last one D.
Status RotaryShape(InferenceContext* ctx) {
  const TensorShape& x = ctx->input_shape(0);
  if (x.rank() < 1) return errors::InvalidArgument("argument 'x' must have rank >= 1, got a scalar");
  const int64_t d = x.dim(x.rank() - 1);
  if (Known(d) && d % 2) {
    return errors::InvalidArgument("argument 'x' ", x.DebugString(), " must have an even last dim (two halves)");
  }
  const char* names[] = {"cos", "sin"};
  for (int t = 1; t < 3; ++t) {
    const TensorShape& c = ctx->input_shape(t);
    bool ok = c.rank() >= 1 && c.rank() <= x.rank();
    for (int i = 0; ok && i < c.rank(); ++i) {
      const int64_t want = x.dim(x.rank() - c.rank() + i), got = c.dim(i);
      const bool last = i == c.rank() - 1;
      ok = !Known(want) || !Known(got) || got == want || (!last && got == 1);
    }
    if (!ok) {
      return errors::InvalidArgument("argument '", names[t - 1], "' ", c.DebugString(),
                                     " must broadcast to argument 'x' ", x.DebugString(),
                                     " with the same last dim");
    }
  }
  ctx->set_output_shape(0, x);
  return Status::OK();
}

}  // namespace

REGISTER_OP("ScaledDotProductAttention")
    .Input("query: T")
    .Input("key: T")
    .Input("value: T")
    .Input("mask: T")
    .Output("y: T")
    .Attr("T: {float32, float64, halftype}")
    .Attr("causal: bool = false")
    .Attr("scale: float = 0.0")
    .Attr("bshd: bool = false")
    .SetShapeFn(AttentionShape)
    .Gradient("query, key, value = ScaledDotProductAttentionGrad(query, key, value, mask, y, dy, causal=causal, "
              "scale=scale, bshd=bshd)")
    .Gradient("mask = None")
    .Doc(R"doc(
softmax(query @ key^T * scale + mask [+ causal mask]) @ value, computed blockwise.

Key and value blocks stream past each query row with an online softmax (a
running maximum and sum), so the [Sq, Sk] scores never exist whole. Grouped
key/value heads (Llama's grouped-query attention): query head h reads key
and value head h / (Hq / Hkv). The causal mask lets query i see keys
j <= i + Sk - Sq (aligned at the end, as with a key/value cache). A row that
sees no key gives zeros. The mask is additive (use -inf to hide a key) and
has no gradient.
float16 and bfloat16 compute in float32 and round the output once.

query: [B, Hq, Sq, D].
key: [B, Hkv, Sk, D], Hkv dividing Hq.
value: [B, Hkv, Sk, Dv].
mask: Added to the scores; broadcastable to [B, Hq, Sq, Sk] (a [1] zero for none).
causal: Hide keys after each query's position.
scale: The score scale; 0 means 1/sqrt(D).
bshd: query, key, value and y are [B, S, H, D] instead (the heads of each
  position together, as a projection's output reshaped: exported models'
  four transposes per layer are not needed). The mask keeps its layout.
y: [B, Hq, Sq, Dv] ([B, Sq, Hq, Dv] with bshd).
)doc");

REGISTER_OP("ScaledDotProductAttentionGrad")
    .Input("query: T")
    .Input("key: T")
    .Input("value: T")
    .Input("mask: T")
    .Input("y: T")
    .Input("dy: T")
    .Output("dquery: T")
    .Output("dkey: T")
    .Output("dvalue: T")
    .Attr("T: {float32, float64}")
    .Attr("causal: bool = false")
    .Attr("scale: float = 0.0")
    .Attr("bshd: bool = false")
    .SetShapeFn(AttentionGradShape)
    .NoGradient()  // second derivatives of attention are not implemented
    .Doc(R"doc(
The gradients of ScaledDotProductAttention with respect to query, key and value.

Recomputes each row's softmax statistics blockwise (no stored scores), then
dS = P * (dP - rowsum(dy * y)) as FlashAttention's backward pass does.

query: The forward's query.
key: The forward's key.
value: The forward's value.
mask: The forward's mask.
y: The forward's output.
dy: The gradient of the output.
causal: As in the forward op.
scale: As in the forward op.
bshd: As in the forward op (the gradients in their inputs' layouts).
dquery: Gradient for query.
dkey: Gradient for key (summed over the query heads sharing it).
dvalue: Gradient for value (likewise).
)doc");

REGISTER_OP("ApplyRotaryEmbedding")
    .Input("x: T")
    .Input("cos: T")
    .Input("sin: T")
    .Output("y: T")
    .Attr("T: {float32, float64}")
    .SetShapeFn(RotaryShape)
    // An inference fusion the ONNX importer makes of exported models; opforge
    // models that train compose rotary embeddings from differentiable ops.
    .NoGradient()
    .Doc(R"doc(
x * cos + rotate_half(x) * sin: rotary position embeddings in one pass.

rotate_half(x) is concat(-x[..., D/2:], x[..., :D/2]) over the last axis
(the halves form of Llama, GPT-NeoX and Hugging Face's apply_rotary_pos_emb).
The ONNX importer runs the Slice/Neg/Concat/Mul/Add pattern of exported
models as this op.

x: [..., D], D even (e.g. [batch, heads, seq, head_dim]).
cos: The cosines, broadcastable to x (each dim 1 or x's; the last one D).
sin: The sines, of the same form.
y: The rotated x, of x's shape.
)doc");

}  // namespace opforge
