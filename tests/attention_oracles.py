"""test_bad_input oracles for ScaledDotProductAttention and its backward op, and ApplyRotaryEmbedding
(robustness_oracles.py merges them into ORACLES): float64 numpy with whole
score matrices, the kernel's blockwise online softmax's independent twin.
Shapes are small and sometimes inconsistent; values small and finite."""
import numpy as np
from hypothesis import strategies as st

from opforge.testing.check.inputs import array, quiet


def _gen(draw, dtype, grad=False):
    b, hkv, g, sq, sk, d, dv = (draw(st.integers(lo, hi)) for lo, hi in
                                ((0, 2), (1, 2), (1, 2), (0, 4), (0, 4), (1, 3), (1, 3)))
    shapes = [(b, hkv * g, sq, d), (b, hkv, sk, d), (b, hkv, sk, dv)]
    if not draw(st.integers(0, 7)):  # an inconsistent shape
        i = draw(st.integers(0, 2))
        shapes[i] = tuple(draw(st.lists(st.integers(0, 3), min_size=3, max_size=5)))
    mshape = draw(st.sampled_from([(1,), (sk,), (sq, sk), (1, 1, sq, sk), (b, 1, 1, sk), (3, 5)]))
    args = [array(draw, dtype, s, small=True, finite=True) for s in shapes]
    args.append(array(draw, dtype, mshape, small=True, finite=True))
    if grad:
        out = (b, hkv * g, sq, dv) if draw(st.integers(0, 7)) else (b, 1, sq, dv + 1)
        args += [array(draw, dtype, out, small=True, finite=True) for _ in range(2)]
    attrs = {"causal": draw(st.booleans()), "scale": draw(st.sampled_from([0.0, 0.5, -1.0]))}
    if draw(st.integers(0, 3)) == 0:  # [B, S, H, D]: query, key, value (y, dy) heads-last; the mask as it is
        attrs["bshd"] = True
        args = [a if i == 3 else _swap(a) for i, a in enumerate(args)]
    return tuple(args), attrs


def _swap(a):
    """[B, H, S, D] <-> [B, S, H, D] (other ranks unchanged)."""
    return np.ascontiguousarray(np.swapaxes(a, 1, 2)) if a.ndim == 4 else a


def _check(q, k, v, mask, scale):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError("rank")
    if q.shape[0] != k.shape[0] or q.shape[0] != v.shape[0] or k.shape[1] != v.shape[1] or \
            k.shape[2] != v.shape[2] or q.shape[3] != k.shape[3]:
        raise ValueError("shapes")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError("heads")
    full = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    if mask.ndim > 4 or any(m != 1 and m != f for m, f in zip(mask.shape[::-1], full[::-1])):
        raise ValueError("mask")
    if scale < 0:
        raise ValueError("scale")


def _probs(q, k, mask, causal, scale):
    g = q.shape[1] // k.shape[1]
    k = np.repeat(k.astype(np.float64), g, axis=1)
    sc = scale if scale > 0 else 1 / np.sqrt(q.shape[-1])
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * sc + mask.astype(np.float64)
    sq, sk = s.shape[-2:]
    if causal:
        s = np.where(np.tril(np.ones((sq, sk), bool), sk - sq), s, -np.inf)
    m = s.max(-1, keepdims=True) if sk else np.zeros(s.shape[:-1] + (1,))
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    den = e.sum(-1, keepdims=True)
    return np.where(den > 0, e / np.where(den > 0, den, 1), 0.0), sc, g


@quiet
def attention(query, key, value, mask, causal, scale, bshd=False):
    if bshd:
        if min(a.ndim for a in (query, key, value)) != 4:
            raise ValueError("rank")
        return _swap(attention(*(_swap(a) for a in (query, key, value)), mask, causal, scale))
    _check(query, key, value, mask, scale)
    p, _, g = _probs(query, key, mask, causal, scale)
    return (p @ np.repeat(value.astype(np.float64), g, axis=1)).astype(query.dtype)


@quiet
def attention_grad(query, key, value, mask, y, dy, causal, scale, bshd=False):
    if bshd:
        if min(a.ndim for a in (query, key, value, y, dy)) != 4:
            raise ValueError("rank")
        q, k, v, y, dy = (_swap(a) for a in (query, key, value, y, dy))
        return tuple(_swap(a) for a in attention_grad(q, k, v, mask, y, dy, causal, scale))
    _check(query, key, value, mask, scale)
    want = query.shape[:3] + value.shape[3:]
    if y.shape != want or dy.shape != want:
        raise ValueError("y/dy shape")
    p, sc, g = _probs(query, key, mask, causal, scale)
    v = np.repeat(value.astype(np.float64), g, axis=1)
    k = np.repeat(key.astype(np.float64), g, axis=1)
    dy64 = dy.astype(np.float64)
    dp = dy64 @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dy64 * y.astype(np.float64)).sum(-1, keepdims=True)) * sc
    dq = ds @ k
    fold = lambda t: t.reshape(t.shape[0], key.shape[1], g, *t.shape[2:]).sum(2)  # noqa: E731
    dk = fold(np.swapaxes(ds, -1, -2) @ query.astype(np.float64))
    dv = fold(np.swapaxes(p, -1, -2) @ dy64)
    return tuple(a.astype(query.dtype) for a in (dq, dk, dv))


def _gen_rotary(draw, dtype):
    lead = draw(st.lists(st.integers(0, 3), min_size=0, max_size=3))
    x_shape = tuple(lead) + (draw(st.sampled_from([0, 2, 4, 6, 3])),)

    def table():
        k = draw(st.integers(1, len(x_shape)))
        dims = [1 if draw(st.booleans()) else n for n in x_shape[len(x_shape) - k:-1]] + [x_shape[-1]]
        if not draw(st.integers(0, 7)):  # an inconsistent shape
            dims[draw(st.integers(0, len(dims) - 1))] += 1
        return tuple(dims)
    return tuple(array(draw, dtype, s, small=True, finite=True) for s in (x_shape, table(), table())), {}


@quiet
def rotary(x, cos, sin):
    if x.ndim < 1 or x.shape[-1] % 2:
        raise ValueError("x")
    for c in (cos, sin):
        if not 1 <= c.ndim <= x.ndim or c.shape[-1] != x.shape[-1] or any(
                n not in (1, m) for n, m in zip(c.shape[:-1], x.shape[x.ndim - c.ndim:-1])):
            raise ValueError("cos/sin")
    h = x.shape[-1] // 2
    x64 = x.astype(np.float64)
    rot = np.concatenate([-x64[..., h:], x64[..., :h]], axis=-1)
    return (x64 * cos + rot * sin).astype(x.dtype)


ATTENTION_ORACLES = {
    "ApplyRotaryEmbedding": (_gen_rotary, rotary),
    "ScaledDotProductAttention": (_gen, attention),
    "ScaledDotProductAttentionGrad": (lambda d, t: _gen(d, t, grad=True), attention_grad),
}
ATTENTION_SUMS = set(ATTENTION_ORACLES)
