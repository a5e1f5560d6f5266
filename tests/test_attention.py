"""The fused ScaledDotProductAttention op, of.nn.functional.scaled_dot_product_attention and
of.nn.MultiheadAttention, against a numpy reference (and PyTorch when installed)."""

import numpy as np
import pytest

import opforge as of
from opforge import errors
from opforge.nn import functional as F

RNG = np.random.default_rng(4)


def reference(q, k, v, mask=None, causal=False, scale=None):
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * (scale or 1 / np.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, sk), bool), sk - sq), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    den = p.sum(-1, keepdims=True)
    return np.where(den > 0, (p / np.where(den > 0, den, 1)) @ v, 0.0)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hq,hkv,sq,sk", [(2, 2, 5, 5), (4, 2, 3, 70), (6, 1, 1, 130), (2, 1, 129, 129)])
def test_matches_the_reference(dtype, tol, causal, hq, hkv, sq, sk):
    b, d, dv = 2, 8, 6
    q = RNG.standard_normal((b, hq, sq, d)).astype(dtype)
    k = RNG.standard_normal((b, hkv, sk, d)).astype(dtype)
    v = RNG.standard_normal((b, hkv, sk, dv)).astype(dtype)
    mask = RNG.standard_normal((1, 1, sq, sk)).astype(dtype)
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal).numpy()
    np.testing.assert_allclose(got, reference(q, k, v, mask, causal), rtol=tol, atol=tol)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq,sk,mask_shape", [(17, 17, (1,)), (6, 23, (2, 1, 6, 23)), (9, 9, (9, 1)),
                                              (5, 300, (1, 300))])
def test_float32_paths_wide_heads(causal, sq, sk, mask_shape):
    # Short rows (the per-head vector loops: padded keys, 4-row tiles, dv 19 = 16 + a
    # scalar tail), and 300 keys (the blocked sgemm kernel). A mask that is -inf
    # for whole rows gives zeros there.
    b, hq, hkv, d, dv = 2, 4, 2, 16, 19
    q = RNG.standard_normal((b, hq, sq, d)).astype(np.float32)
    k = RNG.standard_normal((b, hkv, sk, d)).astype(np.float32)
    v = RNG.standard_normal((b, hkv, sk, dv)).astype(np.float32)
    mask = RNG.standard_normal(mask_shape).astype(np.float32)
    if mask.ndim == 4:
        mask[0, 0, 2] = -np.inf  # batch 0, query 2: no key
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal).numpy()
    want = reference(*(a.astype(np.float64) for a in (q, k, v, mask)), causal=causal)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_float16_computes_in_float32_and_rounds_once(causal):
    q, k = RNG.standard_normal((2, 4, 7, 8)), RNG.standard_normal((2, 2, 9, 8))
    v, mask = RNG.standard_normal((2, 2, 9, 6)), RNG.standard_normal((7, 9))
    h = [a.astype(np.float16) for a in (q, k, v, mask)]
    got = F.scaled_dot_product_attention(*h[:3], attn_mask=h[3], is_causal=causal).numpy()
    assert got.dtype == np.float16
    # The float64 reference on the same float16 inputs, rounded once to float16.
    want = reference(*[a.astype(np.float64) for a in h[:3]], h[3].astype(np.float64), causal)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-3, atol=1e-3)


def test_bool_mask_scale_and_rows_that_see_nothing():
    q, k, v = (RNG.standard_normal((1, 2, 3, 4)) for _ in range(3))
    keep = np.array([[True, False, True], [False, False, False], [True, True, True]])
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=0.3).numpy()
    want = reference(q, k, v, np.where(keep, 0.0, -np.inf), scale=0.3)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert (got[:, :, 1] == 0).all()  # the row with every key hidden


def test_gradients_match_finite_differences():
    q, k, v = RNG.standard_normal((1, 4, 3, 5)), RNG.standard_normal((1, 2, 4, 5)), RNG.standard_normal((1, 2, 4, 3))
    mask = RNG.standard_normal((3, 4))
    for causal in (False, True):
        of.testing.check_gradients(
            lambda a, b, c, causal=causal: F.scaled_dot_product_attention(a, b, c, attn_mask=mask, is_causal=causal),
            [q, k, v], atol=1e-6, rtol=1e-5, delta=1e-6)


def test_bad_input_names_the_op_and_argument():
    q = np.zeros((1, 3, 2, 4), np.float32)
    k = np.zeros((1, 2, 2, 4), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="ScaledDotProductAttention: argument 'query' has 3 heads"):
        F.scaled_dot_product_attention(q, k, k)
    with pytest.raises(errors.InvalidArgumentError, match="argument 'mask'"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=np.zeros((5, 2), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="must be 4-D"):
        F.scaled_dot_product_attention(q[0], q[0], q[0])


def test_multihead_attention_matches_torch():
    torch = pytest.importorskip("torch")
    e, h, b, s = 16, 4, 2, 5
    ours = of.nn.MultiheadAttention(e, h, seed=1)
    theirs = torch.nn.MultiheadAttention(e, h, batch_first=True).double()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.from_numpy(ours.in_proj_weight.numpy().astype(np.float64)))
        theirs.in_proj_bias.copy_(torch.from_numpy(RNG.standard_normal(3 * e)))
        theirs.out_proj.weight.copy_(torch.from_numpy(ours.out_proj.weight.numpy().astype(np.float64)))
        theirs.out_proj.bias.copy_(torch.from_numpy(RNG.standard_normal(e)))
    ours.in_proj_bias.numpy()[...] = theirs.in_proj_bias.detach().numpy()
    ours.out_proj.bias.numpy()[...] = theirs.out_proj.bias.detach().numpy()
    x = RNG.standard_normal((b, s, e)).astype(np.float32)
    mask = torch.triu(torch.full((s, s), float("-inf")), 1)
    want = theirs(*(torch.from_numpy(x.astype(np.float64)),) * 3, attn_mask=mask, need_weights=False)[0]
    got = ours(x, x, x, is_causal=True)[0].numpy()
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_multihead_attention_matches_numpy():
    e, h, b, s = 8, 2, 1, 4
    layer = of.nn.MultiheadAttention(e, h, seed=3)
    x = RNG.standard_normal((b, s, e)).astype(np.float32)
    w, bias = layer.in_proj_weight.numpy(), layer.in_proj_bias.numpy()
    q, k, v = (x @ w[i * e:(i + 1) * e].T + bias[i * e:(i + 1) * e] for i in range(3))
    split = lambda t: t.reshape(b, s, h, e // h).transpose(0, 2, 1, 3)  # noqa: E731
    y = reference(split(q), split(k), split(v)).transpose(0, 2, 1, 3).reshape(b, s, e)
    want = y @ layer.out_proj.weight.numpy().T + layer.out_proj.bias.numpy()
    np.testing.assert_allclose(layer(x, x, x)[0].numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,sq,sk", [(np.float32, 9, 9), (np.float32, 5, 300), (np.float64, 6, 11),
                                         (np.float16, 7, 9)])
def test_bshd_layout_equals_the_transposed_op(dtype, sq, sk):
    # bshd: query/key/value/y as [B, S, H, D] (each path: the short-row loops, the
    # blocked sgemm kernel at 300 keys, the double kernel, float16 through float32),
    # bit for bit the [B, H, S, D] op on transposed copies; grouped heads, a mask.
    b, hq, hkv, d, dv = 2, 4, 2, 16, 19
    q = RNG.standard_normal((b, sq, hq, d)).astype(dtype)
    k = RNG.standard_normal((b, sk, hkv, d)).astype(dtype)
    v = RNG.standard_normal((b, sk, hkv, dv)).astype(dtype)
    mask = RNG.standard_normal((1, 1, sq, sk)).astype(dtype)
    t = lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3))  # noqa: E731
    for causal in (False, True):
        got = of.ops.scaled_dot_product_attention(q, k, v, mask, causal=causal, bshd=True).numpy()
        want = of.ops.scaled_dot_product_attention(t(q), t(k), t(v), mask, causal=causal).numpy()
        assert got.shape == (b, sq, hq, dv)
        np.testing.assert_array_equal(got, t(want))


def test_bshd_gradients_and_bad_shapes():
    t = lambda a: a.transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = RNG.standard_normal((1, 3, 4, 5)), RNG.standard_normal((1, 4, 2, 5)), RNG.standard_normal((1, 4, 2, 3))
    mask = RNG.standard_normal((3, 4))
    of.testing.check_gradients(
        lambda a, b, c: of.ops.scaled_dot_product_attention(a, b, c, mask, causal=True, bshd=True),
        [q, k, v], atol=1e-6, rtol=1e-5, delta=1e-6)
    np.testing.assert_allclose(
        of.ops.scaled_dot_product_attention(q, k, v, mask, bshd=True).numpy(),
        t(reference(t(q), t(k), t(v), mask)), rtol=1e-12, atol=1e-12)
    with pytest.raises(errors.InvalidArgumentError, match=r"argument 'query' has 3 heads"):
        of.ops.scaled_dot_product_attention(np.zeros((1, 2, 3, 4)), np.zeros((1, 2, 2, 4)),
                                            np.zeros((1, 2, 2, 4)), np.zeros(1), bshd=True)
    with pytest.raises(errors.InvalidArgumentError, match=r"\[batch, seq, heads, dim\]"):
        of.ops.scaled_dot_product_attention(q[0], q[0], q[0], np.zeros(1), bshd=True)
