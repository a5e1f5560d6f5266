"""ONNX operators composed of opforge ops: Einsum (onto Transpose, Reshape,
MatMul and Sum), DepthToSpace, SpaceToDepth, InstanceNormalization,
GroupNormalization, MeanVarianceNormalization, LpNormalization, Swish,
CastLike, Hardmax and inference-mode Dropout. Each differentiates through the ops it is made of.
"""

import string

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import FLOAT, INT, INTS, STRING, converter, dtype_of, shape_of
from opforge.onnx._ops_index import _broadcast_to, _static_shape


# -- Einsum -----------------------------------------------------------------

def _parse_einsum(n, eq, ranks):
    eq = eq.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise n.fail(f"equation {eq!r} has {len(terms)} operands but the node has {len(ranks)} inputs")
    spare = [c for c in string.ascii_letters if c not in eq]
    ell = None  # letters standing for "..."
    parsed = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - (len(t) - 3)
            if ell is None or len(ell) < k:
                ell = (ell or "") + "".join(spare[len(ell or ""):k])
            t = t.replace("...", ell[len(ell) - k:] if k else "")
        if len(t) != r or not (t.isalpha() or t == ""):
            raise n.fail(f"equation term {t!r} does not fit an input of rank {r}")
        parsed.append(t)
    if arrow:
        out = out.replace("...", ell or "")
    else:  # implicit output: the ellipsis dims, then letters used once, sorted
        counts = {}
        for t in parsed:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = (ell or "") + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in (ell or "")))
    return parsed, out


def _reduce_to(x, term, keep):
    """Sums out letters of term not in keep; repeated letters (diagonals) are refused."""
    drop = [i for i, c in enumerate(term) if c not in keep]
    if drop:
        x = P.sum(x, axis=drop, keepdims=False)
        term = "".join(c for c in term if c in keep)
    return x, term


def _contract(x, tx, y, ty, keep, dims):
    """One pairwise product: batch letters (in both, kept), contracted (in both, not kept), and the rest."""
    batch = [c for c in tx if c in ty and c in keep]
    summed = [c for c in tx if c in ty and c not in keep]
    left = [c for c in tx if c not in ty]
    right = [c for c in ty if c not in tx]
    size = lambda cs: int(np.prod([dims[c] for c in cs], dtype=np.int64))  # noqa: E731

    def arrange(v, t, order, shape):
        perm = [t.index(c) for c in order]
        if perm != list(range(len(perm))):
            v = P.transpose(v, perm=perm)
        want = [dims[c] for c in order]
        if list(shape_of(v)) != want:  # a broadcast batch dim of size 1
            v = _broadcast_to(v, want)
        return P.reshape(v, shape=shape)

    a = arrange(x, tx, batch + left + summed, [size(batch), size(left), size(summed)])
    b = arrange(y, ty, batch + summed + right, [size(batch), size(summed), size(right)])
    z = P.mat_mul(a, b)
    order = batch + left + right
    return P.reshape(z, shape=[dims[c] for c in order]), "".join(order)


def _diagonals(n, x, t, shape):
    """A letter repeated in one term takes the diagonal: mask with an identity, sum one copy out."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        i, j = t.index(c), t.index(c, t.index(c) + 1)
        if shape[i] != shape[j]:
            raise n.fail(f"letter {c!r} repeats in {t!r} over dims of sizes {shape[i]} and {shape[j]}")
        lanes = [1] * len(shape)
        lanes[i] = lanes[j] = shape[i]
        x = P.sum(P.mul(x, np.eye(shape[i], dtype=dtype_of(x)).reshape(lanes)), axis=[j], keepdims=False)
        t, shape = t[:j] + t[j + 1:], shape[:j] + shape[j + 1:]
    return x, t, tuple(shape)


@converter("Einsum", (12, 28), {"equation": STRING})
def _einsum(n):
    if not n.has_attr("equation"):
        raise n.fail("attribute 'equation' is required")
    xs = n.inputs()
    shapes = [_static_shape(n, x) for x in xs]
    terms, out = _parse_einsum(n, n.attr("equation"), [len(s) for s in shapes])
    xs = list(xs)
    for k, t in enumerate(terms):
        xs[k], terms[k], shapes[k] = _diagonals(n, xs[k], t, list(shapes[k]))
    dims = {}
    for t, s in zip(terms, shapes):
        for c, d in zip(t, s):
            if c in dims and dims[c] != d and 1 not in (d, dims[c]):
                raise n.fail(f"letter {c!r} has sizes {dims[c]} and {d}")
            dims[c] = max(dims.get(c, 1), d)
    if len(set(out)) != len(out) or any(c not in dims for c in out):
        raise n.fail(f"output {out!r} repeats a letter or uses one no input has")
    acc, tacc = None, None
    for k, (x, t) in enumerate(zip(xs, terms)):
        later = set(out).union(*[set(u) for u in terms[k + 1:]])
        keep = later | (set(tacc) if tacc else set())
        x, t = _reduce_to(x, t, keep)
        if acc is None:
            acc, tacc = x, t
            continue
        acc, tacc = _contract(acc, tacc, x, t, later, dims)
    acc, tacc = _reduce_to(acc, tacc, set(out))
    perm = [tacc.index(c) for c in out]
    if perm != list(range(len(perm))):
        acc = P.transpose(acc, perm=perm)
    want = [dims[c] for c in out]
    return acc if list(shape_of(acc)) == want else _broadcast_to(acc, want)


# -- layout -----------------------------------------------------------------

@converter("DepthToSpace", (1, 11, 13, 28), {"blocksize": INT, "mode": STRING})
def _depth_to_space(n):
    x = n.input(0)
    b_, c, h, w = _static_shape(n, x)
    b = n.attr("blocksize")
    if not b or b <= 0 or c % (b * b):
        raise n.fail(f"blocksize {b} must be positive and divide channels {c} by its square")
    if n.attr("mode", "DCR") == "DCR":
        y = P.reshape(x, shape=[b_, b, b, c // (b * b), h, w])
        y = P.transpose(y, perm=[0, 3, 4, 1, 5, 2])
    elif n.attr("mode") == "CRD":
        y = P.reshape(x, shape=[b_, c // (b * b), b, b, h, w])
        y = P.transpose(y, perm=[0, 1, 4, 2, 5, 3])
    else:
        raise n.fail(f"mode {n.attr('mode')!r} must be DCR or CRD")
    return P.reshape(y, shape=[b_, c // (b * b), h * b, w * b])


@converter("SpaceToDepth", (1, 13, 28), {"blocksize": INT, "mode": STRING})
def _space_to_depth(n):
    x = n.input(0)
    b_, c, h, w = _static_shape(n, x)
    b = n.attr("blocksize")
    if not b or b <= 0 or h % b or w % b:
        raise n.fail(f"blocksize {b} must be positive and divide height {h} and width {w}")
    y = P.reshape(x, shape=[b_, c, h // b, b, w // b, b])
    mode = n.attr("mode", "DCR")  # before opset 28 always DCR: depth is (block row, block col, channel)
    if mode not in ("DCR", "CRD"):
        raise n.fail(f"mode {mode!r} must be DCR or CRD")
    y = P.transpose(y, perm=[0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    return P.reshape(y, shape=[b_, c * b * b, h // b, w // b])


# -- normalizations -----------------------------------------------------------

def _normalize(x, axes, eps):
    dt = dtype_of(x)
    mean = P.mean(x, axis=axes, keepdims=True)
    c = P.sub(x, mean)
    var = P.mean(P.square(c), axis=axes, keepdims=True)
    return P.div(c, P.sqrt(P.add(var, np.array(eps, dt))))


@converter("InstanceNormalization", (1, 6, 22), {"epsilon": FLOAT})
def _instance_norm(n):
    x, scale, bias = n.input(0), n.input(1), n.input(2)
    rank = len(shape_of(x))
    if rank < 3:
        raise n.fail(f"input must have rank >= 3 (N, C, spatial...), got {rank}")
    y = _normalize(x, list(range(2, rank)), n.attr("epsilon", 1e-5))
    lanes = [-1] + [1] * (rank - 2)
    return P.add(P.mul(y, P.reshape(scale, shape=lanes)), P.reshape(bias, shape=lanes))


@converter("GroupNormalization", (18, 21), {"epsilon": FLOAT, "num_groups": INT, "stash_type": INT})
def _group_norm(n):
    x, scale, bias = n.input(0), n.input(1), n.input(2)
    shape = _static_shape(n, x)
    g = n.attr("num_groups")
    if g is None or g <= 0 or shape[1] % g:
        raise n.fail(f"num_groups {g} must be positive and divide channels {shape[1]}")
    y = _normalize(P.reshape(x, shape=[shape[0], g, -1]), [2], n.attr("epsilon", 1e-5))
    y = P.reshape(y, shape=list(shape))
    c = shape[1]
    lanes = [c] + [1] * (len(shape) - 2)
    if n.version == 18:  # scale and bias per group, repeated over its channels
        scale = P.reshape(_broadcast_to(P.reshape(scale, shape=[g, 1]), [g, c // g]), shape=[c])
        bias = P.reshape(_broadcast_to(P.reshape(bias, shape=[g, 1]), [g, c // g]), shape=[c])
    return P.add(P.mul(y, P.reshape(scale, shape=lanes)), P.reshape(bias, shape=lanes))


@converter("MeanVarianceNormalization", (9, 13), {"axes": INTS})
def _mvn(n):
    x = n.input(0)
    rank = len(shape_of(x))
    axes = [n.axis(a, rank, "axes entry") for a in n.attr("axes", [0, 2, 3])]
    return _normalize(x, axes, 1e-9)


@converter("LpNormalization", (1, 22), {"axis": INT, "p": INT})
def _lp_norm(n):
    x = n.input(0)
    axis = n.axis(n.attr("axis", -1), len(shape_of(x)))
    p = n.attr("p", 2)
    if p == 1:
        norm = P.sum(P.abs(x), axis=[axis], keepdims=True)
    elif p == 2:
        norm = P.sqrt(P.sum(P.square(x), axis=[axis], keepdims=True))
    else:
        raise n.fail(f"p must be 1 or 2, got {p}")
    # A zero norm leaves the zeros as they are (as onnxruntime does), not NaN.
    zero = P.equal(norm, np.zeros((), dtype_of(x)))
    return P.div(x, P.select(zero, np.ones((), dtype_of(x)), norm))


@converter("Swish", (24,), {"alpha": FLOAT})
def _swish(n):
    x = n.input(0)
    alpha = n.attr("alpha", 1.0)
    z = x if alpha == 1.0 else P.mul(x, np.array(alpha, dtype_of(x)))
    return P.mul(x, P.sigmoid(z))


@converter("CastLike", (15, 19, 21, 23, 24, 25), {"saturate": INT, "round_mode": STRING})
def _cast_like(n):
    x, like = n.input(0), n.input(1)
    return P.cast(x, dtype=dtype_of(like)) if dtype_of(x) != dtype_of(like) else P.identity(x)


@converter("Hardmax", (1, 11, 13), {"axis": INT})
def _hardmax(n):
    x = n.input(0)
    shape = _static_shape(n, x)
    rank = len(shape)
    axis = n.axis(n.attr("axis", -1 if n.version >= 13 else 1), rank)
    if n.version < 13:  # coerced to 2-D [prod(:axis), prod(axis:)], hardmax per row
        flat = P.reshape(x, shape=[int(np.prod(shape[:axis], dtype=np.int64)), -1])
        return P.reshape(_hardmax_axis(flat, 1, list(shape_of(flat))), shape=list(shape))
    return _hardmax_axis(x, axis, list(shape))


def _hardmax_axis(x, axis, shape):
    first = P.arg_max(x, axis=axis, keepdims=True)  # the first maximum, as ONNX asks
    lanes = [1] * len(shape)
    lanes[axis] = shape[axis]
    hit = P.equal(first, np.arange(shape[axis], dtype=np.int64).reshape(lanes))
    dt = dtype_of(x)
    return P.select(hit, np.ones((), dt), np.zeros((), dt))


@converter("Dropout", (7, 10, 12, 13, 22), {"seed": INT, "ratio": FLOAT})
def _dropout(n):
    x = n.input(0)
    if n.version >= 12 and n.has(2):
        training = n.static(2, "training_mode")
        if bool(np.asarray(training).reshape(-1)[0]):
            raise n.fail("training_mode=true (random masks) is not supported; export in eval mode",
                         UnimplementedError)
    # Inference: the identity, and an all-true mask when the node asks for one.
    mask = np.ones(_static_shape(n, x), dtype=np.bool_) if len(n.node.output) > 1 and n.node.output[1] else None
    return (P.identity(x), mask) if mask is not None else P.identity(x)
