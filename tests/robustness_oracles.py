"""numpy oracles for every built-in op, used by test_bad_input.py.

Each entry draws a call (positional inputs, attr kwargs) for one dtype and
computes what numpy returns for it. The draws deliberately include invalid
shapes, axes and attrs: when the oracle raises (ValueError, IndexError,
MemoryError) the op must raise the matching opforge.errors class instead.
Where opforge documents a stricter rule than numpy (no promotion, Fill's
single value, Slice's bounds), the oracle raises ValueError to say so.
"""

import itertools
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from opforge.testing.check.inputs import (  # noqa: F401  (re-exported for the tests)
    NP, NP_NAMES, SPECIALS, array, axis_list, broadcastable_shapes, elements, numpy_dtype, quiet, shapes)


def unary(fn, small=False):
    def gen(draw, dtype):
        return (array(draw, dtype, draw(shapes()), small),), {}
    return gen, quiet(fn)


def binary(fn):
    def gen(draw, dtype):
        a, b = broadcastable_shapes(draw, 2)
        return (array(draw, dtype, a), array(draw, dtype, b)), {}
    return gen, quiet(fn)


def sigmoid(x):
    x64 = x.astype(np.float64)
    return np.where(x64 >= 0, 1 / (1 + np.exp(-x64)), np.exp(x64) / (1 + np.exp(x64))).astype(x.dtype)


def reduction(fn, keep_dtype=False):
    def gen(draw, dtype):
        x = array(draw, dtype, draw(shapes()), small=True)
        return (x,), {"axis": axis_list(draw, x.ndim), "keepdims": draw(st.booleans())}

    def oracle(x, axis, keepdims):
        ax = tuple(axis) if isinstance(axis, list) else axis
        if x.ndim == 0 and ax not in (None, ()):
            raise ValueError("numpy's legacy axis 0 of a 0-d array: opforge rejects it")
        extra = {"dtype": x.dtype} if keep_dtype else {}
        return np.asarray(fn(x, axis=ax, keepdims=keepdims, **extra), dtype=x.dtype)
    return gen, quiet(oracle)


def arg_reduction(fn):
    def gen(draw, dtype):
        x = array(draw, dtype, draw(shapes()), small=True)
        return (x,), {"axis": draw(st.one_of(st.none(), st.integers(-x.ndim - 1, x.ndim))),
                      "keepdims": draw(st.booleans())}

    def oracle(x, axis, keepdims):
        return np.asarray(fn(x, axis=axis, keepdims=keepdims), dtype=np.int64)
    return gen, quiet(oracle)


def select_gen(draw, dtype):
    c, a, b = broadcastable_shapes(draw, 3)
    return (array(draw, np.bool_, c), array(draw, dtype, a), array(draw, dtype, b)), {}


def matmul_gen(draw, dtype):
    if draw(st.booleans()):
        a, b = draw(shapes(0, 4)), draw(shapes(0, 4))
    else:  # mostly-valid operands: stacks of [m, k] @ [k, n]
        m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
        batch = draw(shapes(0, 2))
        a, b = batch + (m, k), (draw(st.sampled_from([(), batch[-1:]])) + (k, n))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    x, y = array(draw, dtype, a, small=True), array(draw, dtype, b, small=True)
    # transpose flags transpose the stored matrices: hand over the transposes.
    if ta and x.ndim >= 2:
        x = np.ascontiguousarray(np.swapaxes(x, -1, -2))
    if tb and y.ndim >= 2:
        y = np.ascontiguousarray(np.swapaxes(y, -1, -2))
    return (x, y), {"transpose_a": ta, "transpose_b": tb}


@quiet
def matmul(a, b, transpose_a, transpose_b):
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("0-d")
    if transpose_a and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if transpose_b and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    return np.asarray(np.matmul(a, b), dtype=a.dtype)


def fused_mat_mul_gen(draw, dtype):
    m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    a = (k, m) if ta else draw(shapes(0, 1)) + (m, k)
    bias = (draw(st.sampled_from([n, n + 1])),)  # sometimes the wrong length
    x, y, z = (array(draw, dtype, s, small=True) for s in (a, (n, k) if tb else (k, n), bias))
    act = draw(st.sampled_from(["none", "relu"]))
    return (x, y, z), {"transpose_a": ta, "transpose_b": tb, "activation": act}


def fused_mat_mul(a, b, bias, transpose_a, transpose_b, activation):
    if a.dtype != np.float32:
        raise TypeError("float32 only")
    if b.ndim != 2 or a.ndim < 1 or (transpose_a and a.ndim != 2):
        raise ValueError("ranks")
    a = a.T if transpose_a else a
    b = b.T if transpose_b else b
    if a.shape[-1] != b.shape[0] or bias.shape != (b.shape[1],):
        raise ValueError("shapes")
    z = np.matmul(a, b) + bias
    return np.asarray(np.maximum(z, 0) if activation == "relu" else z, dtype=a.dtype)


def fused_mat_mul_activation_grad_gen(draw, dtype):
    (a, b, bias), attrs = fused_mat_mul_gen(draw, dtype)
    attrs["activation"] = draw(st.sampled_from(["none", "relu", "sigmoid"]))
    try:
        shape = fused_mat_mul(a, b, bias, **dict(attrs, activation="none")).shape
    except (TypeError, ValueError):
        shape = (2, 3)
    y_shape = draw(st.sampled_from([shape, shape, shape[:-1] + (shape[-1] + 1,) if shape else (1,)]))
    dy, y = (array(draw, dtype, s, small=True) for s in (draw(st.sampled_from([y_shape, y_shape, shape])), y_shape))
    return (dy, y, a, b, bias), attrs


def fused_mat_mul_activation_grad(dy, y, a, b, bias, transpose_a, transpose_b, activation):
    fwd = fused_mat_mul(a, b, bias, transpose_a, transpose_b, "none")
    if dy.shape != y.shape or y.shape != fwd.shape:
        raise ValueError("shapes")
    d = {"none": dy, "relu": np.where(y > 0, dy, 0), "sigmoid": dy * y * (1 - y)}[activation]
    return np.asarray(d, dtype=np.float32)


def fused_mat_mul_activation_grad_grad_gen(draw, dtype):
    (dy, y, a, b, bias), attrs = fused_mat_mul_activation_grad_gen(draw, dtype)
    attrs["activation"] = draw(st.sampled_from(["none", "relu"]))  # the others raise UnimplementedError
    ddpre = array(draw, dtype, draw(st.sampled_from([y.shape, y.shape, dy.shape])), small=True)
    return (ddpre, dy, y, a, b, bias), attrs


def fused_mat_mul_activation_grad_grad(ddpre, dy, y, a, b, bias, transpose_a, transpose_b, activation):
    fused_mat_mul_activation_grad(dy, y, a, b, bias, transpose_a, transpose_b, activation)  # its checks
    if ddpre.shape != y.shape:
        raise ValueError("shapes")
    return np.zeros(y.shape, np.float32)  # act'' = 0 for none and relu


def cast_gen(draw, dtype):
    return (array(draw, dtype, draw(shapes())),), {"dtype": draw(st.sampled_from(NP_NAMES))}


@quiet
def cast(x, dtype):
    return saturating_cast(x, numpy_dtype(dtype))


def saturating_cast(x, target):
    """x.astype(target), with Cast's documented float -> narrow-int rule
    (8/16-bit and unsigned ints saturate, NaN -> 0), where numpy's answer is
    platform-defined."""
    floating = x.dtype.kind == "f" or x.dtype.kind == "V"
    if not floating or target.kind not in "iu" or target in (np.dtype(np.int32), np.dtype(np.int64)):
        return x.astype(target)
    xf = x.astype(np.float64)
    info = np.iinfo(target)
    lo, hi = xf <= float(info.min), xf >= float(info.max // 2 + 1) * 2.0
    mid = ~(np.isnan(xf) | lo | hi)
    out = np.zeros(x.shape, target)
    out[mid] = np.trunc(xf[mid]).astype(target)
    out[lo], out[hi] = info.min, info.max
    return out


def concat_gen(draw, dtype):
    rank = draw(st.integers(0, 3))
    base = list(draw(shapes(rank, rank)))
    axis = draw(st.integers(-rank - 1, rank))
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        s = list(base)
        if rank and -rank <= axis < rank:
            s[axis] = draw(st.integers(0, 3))
        if draw(st.integers(0, 5)) == 0:
            s = list(draw(shapes(0, 3)))
        parts.append(array(draw, dtype, tuple(s)))
    return (parts,), {"axis": axis}


@quiet
def concat(values, axis):
    return np.concatenate(values, axis=axis)


def fill_gen(draw, dtype):
    shape = draw(st.lists(st.one_of(st.integers(0, 4), st.integers(-2, -1), st.sampled_from([2**40, 2**62])),
                          max_size=4))
    value = array(draw, dtype, draw(st.sampled_from([(), (1,), (1, 1), (2,), (0,)])))
    return (shape, value), {}


@quiet
def fill(shape, value):
    if value.size != 1:
        raise ValueError("value must hold exactly one element")
    if 0 in shape and all(d >= 0 for d in shape):
        return _EmptyOf(shape, value.dtype)  # numpy refuses huge dims even next to a 0
    return np.full(shape, value.reshape(()), dtype=value.dtype)


class _EmptyOf:
    """An empty result whose shape numpy itself cannot represent."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


def reshape_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    shape = draw(st.one_of(
        st.permutations(list(x.shape)).map(list),
        st.lists(st.one_of(st.integers(-2, 6), st.sampled_from([2**62])), max_size=4),
        st.just([-1]), st.just([x.size, -1])))
    return (x, shape), {}


@quiet
def reshape(x, shape):
    if any(d < -1 for d in shape):
        raise ValueError("opforge allows only -1 as a negative dim; numpy takes any negative as -1")
    if x.size == 0 and shape.count(-1) == 1 and 0 not in shape:
        shape = [0 if d == -1 else d for d in shape]  # the -1 is inferred as 0
    if 0 in shape and x.size == 0 and all(d >= 0 for d in shape):
        return _EmptyOf(shape, x.dtype)  # numpy refuses huge dims even next to a 0
    return np.reshape(x, shape)


def slice_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    n = x.ndim + draw(st.sampled_from([0, 0, 0, 0, -1, 1]))
    begin = draw(st.lists(st.integers(-1, 5), min_size=max(n, 0), max_size=max(n, 0)))
    size = draw(st.lists(st.integers(-2, 5), min_size=max(n, 0), max_size=max(n, 0)))
    return (x, begin, size), {}


def slice_(x, begin, size):
    if len(begin) != x.ndim or len(size) != x.ndim:
        raise ValueError("one entry per axis")
    index = []
    for b, s, d in zip(begin, size, x.shape):
        if not 0 <= b <= d:
            raise ValueError("begin out of range")
        s = d - b if s == -1 else s
        if not 0 <= s <= d - b:
            raise ValueError("size out of range")
        index.append(slice(b, b + s))
    return x[tuple(index)]


def transpose_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    perm = draw(st.one_of(st.none(), st.permutations(range(x.ndim)).map(list),
                          st.lists(st.integers(-x.ndim - 1, x.ndim), max_size=x.ndim + 1)))
    return (x,), {"perm": perm}


def softmax_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    return (x,), {"axis": draw(st.integers(-x.ndim - 1, x.ndim))}


@quiet
def softmax(logits, axis):
    if logits.ndim == 0:
        raise ValueError("0-d")
    np.empty(logits.shape).sum(axis)  # raises AxisError like the op
    if logits.size == 0:
        return logits.copy()
    x = logits.astype(np.float64)
    e = np.exp(x - x.max(axis, keepdims=True))
    return (e / e.sum(axis, keepdims=True)).astype(logits.dtype)


@quiet
def log_softmax(logits, axis):
    if logits.ndim == 0:
        raise ValueError("0-d")
    np.empty(logits.shape).sum(axis)  # raises AxisError like the op
    if logits.size == 0:
        return logits.copy()
    x = logits.astype(np.float64)
    s = x - x.max(axis, keepdims=True)
    return (s - np.log(np.exp(s).sum(axis, keepdims=True))).astype(logits.dtype)


def rms_norm_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()), small=True)
    wshape = draw(st.one_of(st.just(x.shape[-1:]), shapes(0, 2)))
    eps = draw(st.one_of(st.just(1e-6), st.floats(0, 1), st.floats(-1, -1e-9), st.just(float("nan"))))
    return (x, array(draw, dtype, wshape, small=True)), {"epsilon": eps}


@quiet
def rms_norm(x, weight, epsilon):
    if x.ndim == 0 or weight.shape != x.shape[-1:] or not epsilon >= 0:
        raise ValueError("bad rms_norm input")
    x64 = x.astype(np.float64)
    return (x64 / np.sqrt(np.mean(x64 ** 2, axis=-1, keepdims=True) + epsilon) * weight).astype(x.dtype)


# ---- backward ops (gen_grad_ops): the gradient of sum(grad * forward(x)).
# Values are quarter-integers (plus NaN/inf) so float64 formulas in numpy
# and the kernels' float64 accumulation round alike.

def grad_elements(dtype):
    return st.one_of(st.integers(-12, 12).map(lambda v: v / 4), st.sampled_from([np.nan, np.inf, -np.inf, 0.0]))


def grad_array(draw, dtype, shape):
    return draw(hnp.arrays(np.dtype(dtype), shape, elements=grad_elements(dtype)))


def like_or_other(draw, shape):
    """Usually `shape`; sometimes an arbitrary one (a mismatch to reject)."""
    return tuple(shape) if draw(st.integers(0, 4)) else draw(shapes())


def softmax_grad_gen(draw, dtype):
    s = grad_array(draw, dtype, draw(shapes()))
    g = grad_array(draw, dtype, like_or_other(draw, s.shape))
    return (s, g), {"axis": draw(st.integers(-s.ndim - 1, s.ndim))}


@quiet
def softmax_grad(softmax, grad, axis):
    if softmax.ndim == 0 or grad.shape != softmax.shape:
        raise ValueError("bad softmax_grad input")
    np.empty(softmax.shape).sum(axis)  # raises AxisError like the op
    s, g = softmax.astype(np.float64), grad.astype(np.float64)
    return (s * (g - (g * s).sum(axis, keepdims=True))).astype(softmax.dtype)


def rms_norm_grad_gen(draw, dtype):
    x = grad_array(draw, dtype, draw(shapes()))
    wshape = draw(st.one_of(st.just(x.shape[-1:]), shapes(0, 2)))
    eps = draw(st.one_of(st.just(1e-6), st.just(0.25), st.floats(-1, -1e-9), st.just(float("nan"))))
    return (x, grad_array(draw, dtype, wshape), grad_array(draw, dtype, like_or_other(draw, x.shape))), \
        {"epsilon": eps}


@quiet
def rms_norm_grad(x, weight, grad, epsilon):
    if x.ndim == 0 or weight.shape != x.shape[-1:] or grad.shape != x.shape or not epsilon >= 0:
        raise ValueError("bad rms_norm_grad input")
    x64, w, g = x.astype(np.float64), weight.astype(np.float64), grad.astype(np.float64)
    d = x.shape[-1]
    r = 1 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + epsilon)
    gx = r * g * w - x64 * (r * r * r / d) * np.sum(g * w * x64, -1, keepdims=True)
    gw = np.sum(g * x64 * r, tuple(range(x.ndim - 1)))
    return gx.astype(x.dtype), gw.astype(x.dtype)


def mat_mul_grad_gen(draw, dtype):
    (a, b), attrs = matmul_gen(draw, dtype)
    try:
        shape = matmul(a, b, **attrs).shape
    except ValueError:
        shape = draw(shapes())
    return (a, b, grad_array(draw, dtype, like_or_other(draw, shape))), attrs


def _unbroadcast(g, shape):
    g = g.sum(tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    return g.sum(tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1), keepdims=True)


@quiet
def mat_mul_grad(a, b, grad, transpose_a, transpose_b):
    if matmul(a, b, transpose_a, transpose_b).shape != grad.shape:
        raise ValueError("grad must have the product's shape")
    ta, tb = transpose_a and a.ndim >= 2, transpose_b and b.ndim >= 2
    a2 = a[None, :] if a.ndim == 1 else (np.swapaxes(a, -1, -2) if ta else a)
    b2 = b[:, None] if b.ndim == 1 else (np.swapaxes(b, -1, -2) if tb else b)
    g2 = grad if a.ndim > 1 else np.expand_dims(grad, -1 if b.ndim == 1 else -2)
    g2 = g2[..., None] if b.ndim == 1 else g2
    a2, b2, g2 = (v.astype(np.float64) for v in (a2, b2, g2))
    da = _unbroadcast(g2 @ np.swapaxes(b2, -1, -2), a2.shape)
    db = _unbroadcast(np.swapaxes(a2, -1, -2) @ g2, b2.shape)
    da = da.reshape(a.shape) if a.ndim == 1 else (np.swapaxes(da, -1, -2) if ta else da)
    db = db.reshape(b.shape) if b.ndim == 1 else (np.swapaxes(db, -1, -2) if tb else db)
    return da.astype(a.dtype), db.astype(b.dtype)


REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


def reduce_grad_gen(draw, dtype):
    x = grad_array(draw, dtype, draw(shapes(max_side=3)))
    reduction = draw(st.sampled_from(list(REDUCTIONS) + ["median", ""]))
    axis, keepdims = axis_list(draw, x.ndim), draw(st.booleans())
    try:
        y = np.asarray(REDUCTIONS[reduction](x, axis=tuple(axis) if isinstance(axis, list) else axis,
                                             keepdims=keepdims), dtype)
        shape = y.shape
    except (KeyError, ValueError, IndexError):
        y, shape = grad_array(draw, dtype, draw(shapes())), None
    g = grad_array(draw, dtype, like_or_other(draw, y.shape if shape is None else shape))
    return (x, y, g), {"reduction": reduction, "axis": axis, "keepdims": keepdims}


@quiet
def reduce_grad(x, y, grad, reduction, axis, keepdims):
    if reduction not in REDUCTIONS:
        raise ValueError("unknown reduction")
    ax = tuple(axis) if isinstance(axis, list) else axis
    if x.ndim == 0 and ax not in (None, ()):
        raise ValueError("numpy's legacy axis 0 of a 0-d array: opforge rejects it")
    reduced = np.sum(np.empty(x.shape), axis=ax, keepdims=True)  # raises on bad axes
    if reduction in ("max", "min"):
        np.max(np.empty(x.shape), axis=ax)  # raises on zero-size reductions
    out_shape = np.sum(np.empty(x.shape), axis=ax, keepdims=keepdims).shape
    if y.shape != out_shape or grad.shape != out_shape:
        raise ValueError("y and grad must have the reduced shape")
    x64 = x.astype(np.float64)
    y64 = y.astype(np.float64).reshape(reduced.shape)
    g = np.broadcast_to(grad.astype(np.float64).reshape(reduced.shape), x.shape)
    if reduction == "sum":
        out = g
    elif reduction == "mean":
        out = g / max(x.size // max(reduced.size, 1), 1)
    elif reduction in ("max", "min"):
        mask = (x64 == y64) | (np.isnan(x64) & np.isnan(y64))
        out = np.where(mask, g / np.maximum(mask.sum(ax, keepdims=True), 1), 0)
    else:
        out = np.empty_like(x64)
        for i in np.ndindex(x.shape):
            others = x64.copy()
            others[i] = 1
            out[i] = np.broadcast_to(np.prod(others, ax, keepdims=True), x.shape)[i] * g[i]
    return np.asarray(out, dtype=x.dtype)


def reduce_grad_grad_gen(draw, dtype):
    (x, y, g), attrs = reduce_grad_gen(draw, dtype)
    n = draw(st.integers(1, 2))
    return (x, y, g, [grad_array(draw, dtype, like_or_other(draw, x.shape)) for _ in range(n)]), attrs


@quiet
def reduce_grad_grad(x, y, grad, directions, reduction, axis, keepdims):
    """For prod, element j: grad * the sum over distinct other elements
    i1..iN of j's group of directions[0][i1] * ... * directions[N-1][iN] *
    (the product of the rest of the group); else zeros."""
    reduce_grad(x, y, grad, reduction, axis, keepdims)  # raises like ReduceGrad
    if any(d.shape != x.shape for d in directions):
        raise ValueError("directions must have x's shape")
    if reduction != "prod":
        return np.zeros(x.shape, x.dtype)
    axis = [axis] if isinstance(axis, int) else axis
    ax = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
    x64, ds = x.astype(np.float64), [d.astype(np.float64) for d in directions]
    g = np.broadcast_to(grad.astype(np.float64).reshape(np.sum(x64, ax, keepdims=True).shape), x.shape)
    out = np.zeros(x.shape)
    for j in np.ndindex(x.shape):
        group = [i for i in np.ndindex(x.shape) if all(i[k] == j[k] for k in range(x.ndim) if k not in ax)]
        for picked in itertools.permutations([i for i in group if i != j], len(ds)):
            term = np.prod([d[i] for d, i in zip(ds, picked)])
            rest = [x64[i] for i in group if i != j and i not in picked]
            out[j] += term * np.prod(rest)  # an empty product is 1, as the kernel's
    return (g * out).astype(x.dtype)  # grad times the sum (even an empty one, as the kernel)


def slice_grad_gen(draw, dtype):
    (x, begin, size), _ = slice_gen(draw, dtype)
    try:
        shape = slice_(x, begin, size).shape
    except ValueError:
        shape = draw(shapes())
    return (x, grad_array(draw, dtype, like_or_other(draw, shape))), {"begin": begin, "size": size}


def slice_grad(x, grad, begin, size):
    index = slice_(np.empty(x.shape, bool), begin, size)  # raises like Slice
    if grad.shape != index.shape:
        raise ValueError("grad must have the slice's shape")
    out = np.zeros(x.shape, x.dtype)
    out[tuple(slice(b, b + n) for b, n in zip(begin, index.shape))] = grad
    return out


def concat_grad_gen(draw, dtype):
    (values,), attrs = concat_gen(draw, dtype)
    try:
        shape = np.concatenate([np.empty(v.shape) for v in values], attrs["axis"]).shape
    except (ValueError, IndexError):
        shape = draw(shapes())
    index = draw(st.integers(-1, len(values)))
    return (grad_array(draw, dtype, like_or_other(draw, shape)), values), {**attrs, "index": index}


def concat_grad(grad, values, axis, index):
    if not 0 <= index < len(values):
        raise ValueError("index out of range")
    joined = np.concatenate([np.empty(v.shape) for v in values], axis)  # raises like Concat
    if grad.shape != joined.shape:
        raise ValueError("grad must have the joined shape")
    start = sum(v.shape[axis] for v in values[:index])
    piece = [slice(None)] * grad.ndim
    piece[axis] = slice(start, start + values[index].shape[axis])
    return grad[tuple(piece)].copy()


def concat_grad_grad_gen(draw, dtype):
    (grad, values), attrs = concat_grad_gen(draw, dtype)
    index = attrs["index"]
    shape = values[index].shape if 0 <= index < len(values) else draw(shapes())
    return (grad_array(draw, dtype, like_or_other(draw, shape)), values), attrs


def concat_grad_grad(block, values, axis, index):
    if not 0 <= index < len(values):
        raise ValueError("index out of range")
    parts = [np.zeros(v.shape, block.dtype) for v in values]
    np.concatenate(parts, axis)  # raises like Concat
    if block.shape != values[index].shape:
        raise ValueError("block must have values[index]'s shape")
    parts[index] = block
    return np.concatenate(parts, axis)


# op name -> (draw(draw, dtype) -> (args, kwargs), numpy oracle)
ORACLES = {
    "Abs": unary(np.abs), "Cos": unary(np.cos), "Exp": unary(np.exp), "Log": unary(np.log),
    "Neg": unary(np.negative), "Relu": unary(lambda x: np.maximum(x, np.zeros((), x.dtype))),
    "Sigmoid": unary(sigmoid), "Sin": unary(np.sin), "Sqrt": unary(np.sqrt), "Square": unary(np.square),
    "Tanh": unary(np.tanh), "LogicalNot": unary(np.logical_not), "Identity": unary(np.array),
    "OnesLike": unary(np.ones_like), "ZerosLike": unary(np.zeros_like),
    "Erf": unary(lambda x: np.vectorize(math.erf, otypes=[x.dtype])(x).astype(x.dtype)),
    "Floor": unary(np.floor), "Ceil": unary(np.ceil), "Round": unary(np.round), "Sign": unary(np.sign),
    "IsNan": unary(np.isnan), "IsInf": unary(np.isinf),
    "Add": binary(np.add), "Sub": binary(np.subtract), "Mul": binary(np.multiply),
    "Div": binary(np.true_divide), "Pow": binary(np.power), "Maximum": binary(np.maximum),
    "Minimum": binary(np.minimum), "Equal": binary(np.equal), "NotEqual": binary(np.not_equal),
    "Greater": binary(np.greater), "GreaterEqual": binary(np.greater_equal), "Less": binary(np.less),
    "LessEqual": binary(np.less_equal), "LogicalAnd": binary(np.logical_and),
    "LogicalOr": binary(np.logical_or),
    "Select": (select_gen, quiet(np.where)),
    "Sum": reduction(np.sum, keep_dtype=True), "Prod": reduction(np.prod, keep_dtype=True),
    "Mean": reduction(np.mean), "Max": reduction(np.max), "Min": reduction(np.min),
    "ArgMax": arg_reduction(np.argmax), "ArgMin": arg_reduction(np.argmin),
    "MatMul": (matmul_gen, matmul), "FusedMatMul": (fused_mat_mul_gen, fused_mat_mul),
    "FusedMatMulActivationGrad": (fused_mat_mul_activation_grad_gen, fused_mat_mul_activation_grad),
    "FusedMatMulActivationGradGrad": (fused_mat_mul_activation_grad_grad_gen, fused_mat_mul_activation_grad_grad),
    "Cast": (cast_gen, cast), "Concat": (concat_gen, concat),
    "Fill": (fill_gen, fill), "Reshape": (reshape_gen, reshape), "Slice": (slice_gen, slice_),
    "Transpose": (transpose_gen, quiet(lambda x, perm: np.transpose(x, perm))), "Softmax": (softmax_gen, softmax),
    "LogSoftmax": (softmax_gen, log_softmax),
    "RmsNorm": (rms_norm_gen, rms_norm),
    "SoftmaxGrad": (softmax_grad_gen, softmax_grad), "RmsNormGrad": (rms_norm_grad_gen, rms_norm_grad),
    "MatMulGrad": (mat_mul_grad_gen, mat_mul_grad), "ReduceGrad": (reduce_grad_gen, reduce_grad),
    "ReduceGradGrad": (reduce_grad_grad_gen, reduce_grad_grad),
    "SliceGrad": (slice_grad_gen, slice_grad), "ConcatGrad": (concat_grad_gen, concat_grad),
    "ConcatGradGrad": (concat_grad_grad_gen, concat_grad_grad),
}

# Float ops whose results are sums or transcendental: compared to a tolerance
# (scaled by the inputs' magnitude for the sums); everything else is exact.
SUMS = {"Sum", "Mean", "Prod", "MatMul", "FusedMatMul", "Softmax", "LogSoftmax", "RmsNorm", "SoftmaxGrad", "RmsNormGrad",
        "MatMulGrad", "ReduceGrad", "ReduceGradGrad"}
# Sums of products of two inputs: the tolerance scales with magnitude squared.
PRODUCTS = {"MatMul", "FusedMatMul", "MatMulGrad", "SoftmaxGrad", "RmsNormGrad"}
EmptyOf = _EmptyOf


# ---- training ops (issue 12): layers, losses, backward ops, optimizer updates


def _erf(x):
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


def _erfc(x):
    from math import erfc
    return np.vectorize(erfc, otypes=[np.float64])(x)


@quiet
def gelu(x):
    # x/2 erfc(-x/sqrt 2): the 1 + erf form cancels in the negative tail (relative error 1 below x = -8)
    x64 = x.astype(np.float64)
    return (x64 * 0.5 * _erfc(-x64 / np.sqrt(2))).astype(x.dtype)


def gelu_tanh(x):
    # x * sigmoid(2z), the same function as 0.5 x (1 + tanh z) without its
    # cancellation in the negative tail (0.7 % off at x = -7 even in double).
    x64 = x.astype(np.float64)
    u = 2 * np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)
    with np.errstate(over="ignore", invalid="ignore"):
        return (x64 / (1 + np.exp(-u))).astype(x.dtype)


def same_shape_gen(n, small=True):
    """n arrays, usually of one shape, sometimes of a random other one."""
    def gen(draw, dtype):
        shape = draw(shapes())
        return tuple(array(draw, dtype, shape if draw(st.integers(0, 5)) else draw(shapes()), small)
                     for _ in range(n)), {}
    return gen


def _same_shapes(*arrays):
    if any(a.shape != arrays[0].shape for a in arrays):
        raise ValueError("shapes differ")


@quiet
def gelu_grad(dy, x):
    _same_shapes(dy, x)
    x64 = x.astype(np.float64)
    pdf = np.exp(-0.5 * x64 * x64) / np.sqrt(2 * np.pi)
    return (dy * (0.5 * (1 + _erf(x64 / np.sqrt(2))) + x64 * pdf)).astype(x.dtype)


def _norm_check(x, weights, epsilon):
    if x.ndim == 0 or any(w.shape != x.shape[-1:] for w in weights) or not epsilon >= 0:
        raise ValueError("bad norm input")


def layer_norm_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()), small=True)
    ws = [array(draw, dtype, draw(st.one_of(st.just(x.shape[-1:]), shapes(0, 2))), small=True) for _ in range(2)]
    eps = draw(st.one_of(st.just(1e-5), st.floats(1e-3, 1), st.floats(-1, -1e-9), st.just(float("nan"))))
    return (x, *ws), {"epsilon": eps}


def _moments(x64, eps, center):
    # The mean as x[0] + mean(x - x[0]): exact for a constant row (its centred values 0), which a plain sum of
    # float64 values is not always.
    m = x64[..., :1] + (x64 - x64[..., :1]).mean(-1, keepdims=True) if center else 0.0
    return m, 1 / np.sqrt(((x64 - m) ** 2).mean(-1, keepdims=True) + eps)


@quiet
def layer_norm(x, weight, bias, epsilon):
    _norm_check(x, (weight, bias), epsilon)
    if x.shape[-1] == 0:
        return x.copy()
    x64 = x.astype(np.float64)
    m, r = _moments(x64, epsilon, True)
    return ((x64 - m) * r * weight + bias).astype(x.dtype)


def norm_grad_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes(min_rank=1)), small=True)
    dy = array(draw, dtype, x.shape if draw(st.integers(0, 5)) else draw(shapes()), small=True)
    w = array(draw, dtype, draw(st.one_of(st.just(x.shape[-1:]), shapes(0, 2))), small=True)
    eps = draw(st.one_of(st.just(1e-5), st.floats(1e-2, 1), st.floats(-1, -1e-9)))
    return (dy, x, w), {"epsilon": eps}


def _norm_grad(dy, x, weight, epsilon, center):
    _norm_check(x, (weight,), epsilon)
    _same_shapes(x, dy)
    d = x.shape[-1]
    x64, g64 = x.astype(np.float64), dy.astype(np.float64)
    if d == 0:
        return (x.copy(), np.zeros(weight.shape, x.dtype)) + ((np.zeros(weight.shape, x.dtype),) if center else ())
    m, r = _moments(x64, epsilon, center)
    xh = (x64 - m) * r
    g = g64 * weight
    mg = g.mean(-1, keepdims=True) if center else 0.0
    dx = r * (g - mg - xh * (g * xh).mean(-1, keepdims=True))
    rows = (g64 * xh).reshape(-1, d)
    out = (dx.astype(x.dtype), rows.sum(0).astype(x.dtype))
    return out + ((g64.reshape(-1, d).sum(0).astype(x.dtype),) if center else ())


layer_norm_grad = quiet(lambda dy, x, weight, epsilon: _norm_grad(dy, x, weight, epsilon, True))


def gather_gen(draw, dtype, grad=False):
    params = array(draw, dtype, draw(shapes(max_rank=3)))
    rows = params.shape[0] if params.ndim else 1
    itype = draw(st.sampled_from([np.int32, np.int64]))
    ishape = draw(shapes(max_rank=2))
    ints = st.integers(0, max(rows - 1, 0)) if draw(st.integers(0, 5)) and rows else st.integers(-3, rows + 3)
    indices = draw(hnp.arrays(itype, ishape, elements=ints))
    if not grad:
        return (params, indices), {}
    out = ishape + params.shape[1:]
    return (params, indices, array(draw, dtype, out if draw(st.integers(0, 5)) else draw(shapes()), small=True)), {}


def _check_gather(params, indices):
    if params.ndim == 0 or indices.ndim + params.ndim - 1 > 16:
        raise ValueError("bad gather input")
    if indices.size and (indices.min() < 0 or indices.max() >= params.shape[0]):
        raise IndexError("index out of range")


@quiet
def gather(params, indices):
    _check_gather(params, indices)
    return params[indices]


@quiet
def gather_grad(params, indices, dy):
    _check_gather(params, indices)
    if dy.shape != indices.shape + params.shape[1:]:
        raise ValueError("dy shape")
    out = np.zeros(params.shape, params.dtype)
    np.add.at(out, indices, dy)
    return out


def xent_gen(draw, dtype):
    f = array(draw, dtype, draw(st.one_of(hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=5),
                                          shapes())), small=True)
    batch = f.shape[0] if f.ndim else 0
    classes = f.shape[1] if f.ndim == 2 else 1
    lshape = (batch,) if draw(st.integers(0, 5)) else draw(shapes(max_rank=2))
    ints = st.integers(0, max(classes - 1, 0)) if draw(st.integers(0, 5)) else st.integers(-2, classes + 2)
    labels = draw(hnp.arrays(draw(st.sampled_from([np.int32, np.int64])), lshape, elements=ints))
    return (f, labels), {}


@quiet
def sparse_xent(features, labels):
    if features.ndim != 2 or labels.shape != features.shape[:1] or (features.shape[1] == 0 and features.shape[0]):
        raise ValueError("bad shapes")
    if labels.size and (labels.min() < 0 or labels.max() >= features.shape[1]):
        raise IndexError("label out of range")
    if features.shape[0] == 0:
        return np.zeros((0,), features.dtype), features.copy()
    f = features.astype(np.float64)
    m = np.nanmax(f, axis=1, keepdims=True) if not np.isnan(f).any() else f.max(1, keepdims=True)
    e = np.exp(f - m)
    s = e.sum(1, keepdims=True)
    idx = np.arange(f.shape[0])
    loss = np.log(s[:, 0]) - (f[idx, labels] - m[:, 0])
    back = e / s
    back[idx, labels] -= 1
    return loss.astype(features.dtype), back.astype(features.dtype)


def dropout_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    rate = draw(st.one_of(st.just(0.0), st.just(0.5), st.floats(0, 0.99), st.floats(1, 2), st.floats(-1, -1e-9)))
    return (x,), {"rate": rate, "seed": draw(st.integers(-2**63, 2**63 - 1))}


@quiet
def dropout_mask(x, rate, seed):
    """Checked structurally in test_bad_input (values: 0 or 1/(1-rate)); here only the shape and errors."""
    if not 0 <= rate < 1:
        raise ValueError("rate")
    return DropoutValues(x.shape, x.dtype, rate)


class DropoutValues:
    def __init__(self, shape, dtype, rate):
        self.shape, self.dtype, self.rate = shape, dtype, rate


def update_gen(n):
    def gen(draw, dtype):
        (arrays, _) = same_shape_gen(n)(draw, dtype)
        lr = draw(st.one_of(st.just(0.1), st.floats(0, 1), st.just(-1.0), st.just(float("inf"))))
        wd = draw(st.one_of(st.just(0.0), st.floats(0, 0.1)))
        kw = {"lr": lr, "weight_decay": wd}
        if n == 3:
            kw.update(momentum=draw(st.sampled_from([0.0, 0.9, -0.5])), nesterov=draw(st.booleans()))
        if n == 4:
            kw.update(step=draw(st.integers(1, 5)), beta1=draw(st.sampled_from([0.9, 0.0, 1.0])),
                      beta2=draw(st.sampled_from([0.999, 0.5])), epsilon=draw(st.sampled_from([1e-8, 1e-3])))
        return arrays, kw
    return gen


def _lr_ok(**kw):
    for k in ("lr", "weight_decay", "momentum", "epsilon"):
        if k in kw and not (0 <= kw[k] < np.inf):
            raise ValueError(k)


@quiet
def apply_gradient_descent(var, grad, lr, weight_decay):
    _lr_ok(lr=lr, weight_decay=weight_decay)
    _same_shapes(var, grad)
    t = var.dtype.type
    return var - t(lr) * (grad + t(weight_decay) * var)


@quiet
def apply_momentum(var, accum, grad, lr, momentum, weight_decay, nesterov):
    _lr_ok(lr=lr, weight_decay=weight_decay, momentum=momentum)
    _same_shapes(var, accum, grad)
    t = var.dtype.type
    g = grad + t(weight_decay) * var
    a = t(momentum) * accum + g
    return var - t(lr) * ((g + t(momentum) * a) if nesterov else a)


@quiet
def apply_adam(var, m, v, grad, step, lr, weight_decay, beta1, beta2, epsilon):
    _lr_ok(lr=lr, weight_decay=weight_decay, epsilon=epsilon)
    if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
        raise ValueError("beta")
    _same_shapes(var, m, v, grad)
    # The op's scalars are rounded to the variable's dtype (as the other updates'
    # oracles round lr): a step size below float32's range is 0 there.
    t = lambda x: np.float64(var.dtype.type(x))  # noqa: E731
    step_size, inv_sqrt_bc2 = t(lr / (1 - beta1 ** step)), t(1 / np.sqrt(1 - beta2 ** step))
    b1, b2, eps, wd = t(beta1), t(beta2), t(epsilon), t(weight_decay)
    w, m64, vv, g = [a.astype(np.float64) for a in (var, m, v, grad)]
    g = g + wd * w
    m64 = b1 * m64 + (1 - b1) * g
    vv = b2 * vv + (1 - b2) * g * g
    out = w - step_size * m64 / (np.sqrt(vv) * inv_sqrt_bc2 + eps)
    return out.astype(var.dtype)


ORACLES.update({
    "Gelu": unary(gelu, small=True), "GeluGrad": (same_shape_gen(2), gelu_grad),
    "GeluTanh": unary(gelu_tanh, small=True),
    "LayerNorm": (layer_norm_gen, layer_norm), "LayerNormGrad": (norm_grad_gen, layer_norm_grad),
    "Gather": (gather_gen, gather), "GatherGrad": (lambda d, t: gather_gen(d, t, grad=True), gather_grad),
    "SparseSoftmaxCrossEntropyWithLogits": (xent_gen, sparse_xent), "DropoutMask": (dropout_gen, dropout_mask),
    "ApplyGradientDescent": (update_gen(2), apply_gradient_descent),
    "ApplyMomentum": (update_gen(3), apply_momentum), "ApplyAdam": (update_gen(4), apply_adam),
})
# Gelu is not a sum: float32 runs the vector GELU (relative error <= 2e-5 down
# to x = -12.7, -0 below, where |gelu| < 1e-35); float64 erfc in double;
# half dtypes round that float32 value once (so one step where it lands on a
# subnormal). A tanh-form GELU (relative error 1e-3 and up) fails these
# (test_gelu_tolerance_catches_a_wrong_gelu).
TOLERANCES = {"Gelu": {"float32": (2e-5, 1e-35), "float64": (1e-13, 1e-300), "float16": (1e-3, 2.0 ** -24),
                       "bfloat16": (8e-3, 1e-38)},
              # x * sigmoid(u) in float32: u's rounding times |u| (up to ~87 where exp
              # is cut) bounds the relative error by ~2e-5 in the negative tail.
              "GeluTanh": {"float32": (2e-5, 1e-35), "float64": (1e-13, 1e-300)}}
SUMS |= {"GeluGrad", "LayerNorm", "LayerNormGrad", "GatherGrad",
         "SparseSoftmaxCrossEntropyWithLogits", "ApplyAdam", "ApplyMomentum", "ApplyGradientDescent"}
# Ops that update their first k inputs in place (read-only ones must raise).
MUTATES = {"ApplyGradientDescent": 1, "ApplyMomentum": 2, "ApplyAdam": 3}

# ---- vision ops (issue 23): conv / pool, in vision_oracles.py
from vision_oracles import VISION_ORACLES, VISION_PRODUCTS, VISION_SUMS  # noqa: E402

ORACLES.update(VISION_ORACLES)
SUMS |= VISION_SUMS
PRODUCTS |= VISION_PRODUCTS

# Random ops (an independent numpy Philox, tests/random_oracles.py) and PythonFunction.
from random_oracles import make as _random_oracles  # noqa: E402
ORACLES.update({op: (gen, quiet(fn)) for op, (gen, fn) in _random_oracles(array, shapes, _EmptyOf).items()})
SUMS |= {"RandomStandardNormal", "TruncatedNormal"}  # transcendental: compared to a tolerance

# Index ops (issue 24): gathers, scatters, TopK, NonZero, in index_oracles.py.
from index_oracles import INDEX_ORACLES  # noqa: E402

ORACLES.update(INDEX_ORACLES)
from attention_oracles import ATTENTION_ORACLES, ATTENTION_SUMS  # noqa: E402

ORACLES.update(ATTENTION_ORACLES)
SUMS |= ATTENTION_SUMS
PRODUCTS |= ATTENTION_SUMS
# Quantization ops (issue 25), in quant_oracles.py.
from quant_oracles import QUANT_ORACLES  # noqa: E402

ORACLES.update(QUANT_ORACLES)
# Packed-weight ops (issue 25: constant weights packed once), in packed_oracles.py.
from packed_oracles import PACKED_ORACLES  # noqa: E402

ORACLES.update(PACKED_ORACLES)
SUMS |= {"HalfMatMulPacked", "DynamicQuantizeMatMul"}
PRODUCTS |= {"HalfMatMulPacked"}
# float32 weights packed into the GEMM's panels (issue 22), in packed_matmul_oracles.py.
from packed_matmul_oracles import PACKED_MATMUL_ORACLES  # noqa: E402

ORACLES.update(PACKED_MATMUL_ORACLES)
SUMS |= {"FusedMatMulPacked"}
PRODUCTS |= {"FusedMatMulPacked"}
# Packed convolution filters (issue 23), in packed_conv_oracles.py.
from packed_conv_oracles import PACKED_CONV_ORACLES  # noqa: E402

ORACLES.update(PACKED_CONV_ORACLES)
SUMS |= {"Conv2DPacked", "Conv2DPackedAdd", "Conv2DPackedConcat"}
PRODUCTS |= {"Conv2DPacked", "Conv2DPackedAdd", "Conv2DPackedConcat"}
# Bitwise and trig ops (issue 24), in bitwise_trig_oracles.py.
from bitwise_trig_oracles import BITWISE_TRIG_ORACLES  # noqa: E402

ORACLES.update(BITWISE_TRIG_ORACLES)
from detection_oracles import DETECTION_ORACLES  # noqa: E402

ORACLES.update(DETECTION_ORACLES)
from unique_oracles import UNIQUE_ORACLES  # noqa: E402

ORACLES.update(UNIQUE_ORACLES)
from fused_elementwise_oracles import FUSED_ELEMENTWISE_ORACLES  # noqa: E402

ORACLES.update(FUSED_ELEMENTWISE_ORACLES)
# Shape-tensor ops (issue 24: one graph for every size), in shape_oracles.py.
from shape_oracles import SHAPE_ORACLES  # noqa: E402

ORACLES.update(SHAPE_ORACLES)
# The NCHWc layout's ops (issue 23), in nchwc_oracles.py.
from nchwc_oracles import NCHWC_ORACLES  # noqa: E402

ORACLES.update(NCHWC_ORACLES)
SUMS |= {"Conv2DNchwc", "GlobalAveragePoolNchwc", "Conv2DNchwcConcat"}
PRODUCTS |= {"Conv2DNchwc", "Conv2DNchwcConcat"}
