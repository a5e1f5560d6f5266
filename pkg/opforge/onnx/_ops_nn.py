"""ONNX linear algebra, reductions, softmax and normalization operators.

Gemm is MatMul (transposes as attrs) plus scaled Add; LayerNormalization and RMSNormalization over several axes are compositions
of opforge ops that follow the ONNX definitions' formulas.
"""

import functools

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _take
from opforge.onnx._node import FLOAT, INT, INTS, converter, dtype_of, shape_of
from opforge.onnx._pack_matmul import packed_linear


def _scalar(value, like):
    return np.array(value, dtype=dtype_of(like))


@converter("MatMul", (1, 9, 13))
def _matmul(n):
    y = packed_linear(n.input(0), n.known(1), False, None)  # a constant weight: packed once
    return y if y is not None else P.mat_mul(n.input(0), n.input(1))


@converter("Gemm", (1, 6, 7, 9, 11, 13),
           {"alpha": FLOAT, "beta": FLOAT, "transA": INT, "transB": INT, "broadcast": INT})
def _gemm(n, activation=None):
    a, b = n.input(0), n.input(1)
    if len(shape_of(a)) != 2 or len(shape_of(b)) != 2:
        raise n.fail(f"A and B must be 2-D, got shapes {list(shape_of(a))} and {list(shape_of(b))}")
    if dtype_of(a) == np.float16:  # a float16 Linear: packed weight, float32 accumulation (issue 25)
        from opforge.onnx._ops_half import half_gemm
        y = half_gemm(n, activation)
        if y is not None:
            return y
    trans_b = bool(n.attr("transB", 0))
    w = n.known(1)
    if (not n.attr("transA", 0) and n.attr("alpha", 1.0) == 1.0 and n.attr("beta", 1.0) == 1.0
            and (n.has(2) or n.version >= 11)):
        # A constant weight packed once into the GEMM's panels (bias and activation in its epilogue).
        y = packed_linear(a, w, trans_b, n.input(2) if n.has(2) else None, activation or "none")
        if y is not None:
            return y
    if trans_b and w is not None and w.ndim == 2:
        # A constant weight read transposed (the usual Linear layout) is
        # transposed once here: BLAS multiplies a row-major B about 20% faster.
        b, trans_b = np.ascontiguousarray(w.T), False
    alpha, beta = n.attr("alpha", 1.0), n.attr("beta", 1.0)
    n_out = shape_of(b)[0 if trans_b else 1]
    if (n.has(2) and alpha == 1.0 and beta == 1.0 and n_out is not None
            and all(dtype_of(v) == np.float32 for v in (a, b, n.input(2)))
            and list(shape_of(n.input(2))) == [n_out]):
        # The common Linear layer: bias (and a following activation, see
        # fuse_activations) in the GEMM's epilogue.
        return P.fused_mat_mul(a, b, n.input(2), transpose_a=bool(n.attr("transA", 0)), transpose_b=trans_b,
                               activation=activation or "none")
    y = P.mat_mul(a, b, transpose_a=bool(n.attr("transA", 0)), transpose_b=trans_b)
    if alpha != 1.0:
        y = P.mul(y, _scalar(alpha, y))
    if n.has(2):
        c = n.input(2)
        if beta != 1.0:
            c = P.mul(c, _scalar(beta, c))
        mn = shape_of(y)
        if n.version < 7 and not n.attr("broadcast", 0) and shape_of(c) != mn:
            raise n.fail(f"C of shape {list(shape_of(c))} must be {list(mn)} when broadcast is 0")
        y = P.add(y, c)
        if shape_of(y) != mn:  # C broadcasts to (M, N) one way only
            raise n.fail(f"C of shape {list(shape_of(c))} does not broadcast to {list(mn)}")
    elif n.version < 11:
        raise n.fail("input C is required before opset 11")
    return _ACTIVATIONS[activation](y) if activation else y


_ACTIVATIONS = {"relu": P.relu, "sigmoid": P.sigmoid}
_FUSABLE = {"Relu": "relu", "Sigmoid": "sigmoid"}


def _pass_through(n):
    return n.input(0)


def fuse_activations(steps, graph_outputs):
    """Import steps with each Gemm -> Relu / Sigmoid pair, where only that node
    reads the Gemm's output, fused: the activation runs in the Gemm's epilogue
    (FusedMatMul) and the activation node passes its input through."""
    readers, made_by = {}, {}
    for i, (ctx, _, _) in enumerate(steps):
        for name in ctx.node.input:
            readers[name] = readers.get(name, 0) + 1
        if ctx.node.op_type == "Gemm" and ctx.node.output:
            made_by[ctx.node.output[0]] = i
    steps = list(steps)
    for i, (ctx, fn, outputs) in enumerate(steps):
        act = _FUSABLE.get(ctx.node.op_type)
        src = ctx.node.input[0] if act and ctx.node.input else None
        j = made_by.get(src)
        if j is None or readers.get(src) != 1 or src in graph_outputs or steps[j][1] is not _gemm:
            continue
        steps[j] = (steps[j][0], functools.partial(_gemm, activation=act), steps[j][2])
        steps[i] = (ctx, _pass_through, outputs)
    return steps


def _coerced(n, x, fn):
    """Softmax before opset 13: flatten to 2-D at axis, apply on the last axis, restore."""
    shape = shape_of(x)
    axis = n.attr("axis", 1)
    if not -len(shape) <= axis <= len(shape):
        raise n.fail(f"axis {axis} is out of range for rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    cols = int(np.prod(shape[axis:], dtype=np.int64))
    return P.reshape(fn(P.reshape(x, shape=[rows, cols]), -1), shape=list(shape))


def _log_softmax(x, axis):
    return P.log_softmax(x, axis=axis)


def _softmax(x, axis):
    return P.softmax(x, axis=axis)


def _softmax_like(fn):
    def convert(n):
        x = n.input(0)
        if n.version < 13:
            return _coerced(n, x, fn)
        return fn(x, n.axis(n.attr("axis", -1), len(shape_of(x))))
    return convert


converter("Softmax", (1, 11, 13), {"axis": INT})(_softmax_like(_softmax))
converter("LogSoftmax", (1, 11, 13), {"axis": INT})(_softmax_like(_log_softmax))

# Reductions: since_version at which axes moved from an attribute to an input.
_REDUCE = {"ReduceSum": (P.sum, (1, 11, 13), 13), "ReduceMean": (P.mean, (1, 11, 13, 18), 18),
           "ReduceMax": (P.max, (1, 11, 12, 13, 18, 20), 18), "ReduceMin": (P.min, (1, 11, 12, 13, 18, 20), 18),
           "ReduceProd": (P.prod, (1, 11, 13, 18), 18)}


def _reduce(fn, axes_input_since):
    def convert(n):
        x = n.input(0)
        rank = len(shape_of(x))
        if n.version >= axes_input_since:
            if n.has_attr("axes"):
                raise n.fail(f"axes is an input since schema version {axes_input_since}, not an attribute")
            axes = n.static_ints(1, "axes") if n.has(1) else []
            if not axes and n.attr("noop_with_empty_axes", 0):
                return P.identity(x)
        else:
            if n.has_attr("noop_with_empty_axes"):
                raise n.fail("noop_with_empty_axes needs axes as an input")
            axes = n.attr("axes", [])
        axes = sorted({n.axis(a, rank, "axes entry") for a in axes}) if axes else list(range(rank))
        keepdims = bool(n.attr("keepdims", 1))
        shape = shape_of(x)
        dt = dtype_of(x)
        if fn in (P.max, P.min) and any(shape[a] == 0 for a in axes):
            # ONNX (opset 18+) defines max/min over nothing as the identity: -inf/+inf, or the type's bounds.
            out = [1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes]
            if dt == np.bool_:
                value = fn is P.min
            elif dt.kind == "f":
                value = -np.inf if fn is P.max else np.inf
            else:
                value = np.iinfo(dt).min if fn is P.max else np.iinfo(dt).max
            return np.full(out, value, dtype=dt)
        if dt == np.bool_ and fn in (P.max, P.min):  # max = any, min = all
            wide = np.dtype(np.int32)
            return P.cast(fn(P.cast(x, dtype=wide), axis=axes, keepdims=keepdims), dtype=dt)
        return fn(x, axis=axes, keepdims=keepdims)
    return convert


for _name, (_fn, _versions, _since) in _REDUCE.items():
    converter(_name, _versions, {"axes": INTS, "keepdims": INT, "noop_with_empty_axes": INT})(_reduce(_fn, _since))


def _arg(fn):
    def convert(n):
        x = n.input(0)
        axis = n.axis(n.attr("axis", 0), len(shape_of(x)))
        keepdims = bool(n.attr("keepdims", 1))
        if not n.attr("select_last_index", 0):
            return fn(x, axis=axis, keepdims=keepdims)
        # The last extreme: the first one of the input reversed along axis, counted from the end.
        size = shape_of(x)[axis]
        if size is None:
            raise n.fail("select_last_index=1 needs the static size of the reduced axis", UnimplementedError)
        i = fn(_take.flip(x, axis), axis=axis, keepdims=keepdims)
        return P.sub(np.array(size - 1, dtype=dtype_of(i)), i)
    return convert


_ARG_ATTRS = {"axis": INT, "keepdims": INT, "select_last_index": INT}
converter("ArgMax", (1, 11, 12, 13), _ARG_ATTRS)(_arg(P.arg_max))
converter("ArgMin", (1, 11, 12, 13), _ARG_ATTRS)(_arg(P.arg_min))


def _check_stash(n):
    if n.attr("stash_type", 1) != 1:
        raise n.fail("only stash_type=1 (float32 statistics) is supported", UnimplementedError)


def _norm_axes(n, x):
    rank = len(shape_of(x))
    axis = n.axis(n.attr("axis", -1), rank)
    return list(range(axis, rank))


@converter("LayerNormalization", (17,), {"axis": INT, "epsilon": FLOAT, "stash_type": INT}, check=_check_stash)
def _layer_norm(n):
    x, scale = n.input(0), n.input(1)
    axes = _norm_axes(n, x)
    shape = shape_of(x)
    last = shape[-1:]
    if (hasattr(P, "layer_norm") and axes == [len(shape) - 1] and shape_of(scale) == last
            and n.has(2) and shape_of(n.input(2)) == last and len([o for o in n.node.output if o]) == 1):
        return P.layer_norm(x, scale, n.input(2), epsilon=n.attr("epsilon", 1e-5))
    mean = P.mean(x, axis=axes, keepdims=True)
    d = P.sub(x, mean)
    var = P.mean(P.mul(d, d), axis=axes, keepdims=True)
    inv_std = P.div(_scalar(1, x), P.sqrt(P.add(var, _scalar(n.attr("epsilon", 1e-5), x))))
    y = P.mul(P.mul(d, inv_std), scale)
    if n.has(2):
        y = P.add(y, n.input(2))
    return y, mean, inv_std


@converter("RMSNormalization", (23,), {"axis": INT, "epsilon": FLOAT, "stash_type": INT}, check=_check_stash)
def _rms_norm(n):
    x, scale = n.input(0), n.input(1)
    axes = _norm_axes(n, x)
    eps = n.attr("epsilon", 1e-5)
    shape = shape_of(x)
    if axes == [len(shape) - 1] and shape_of(scale) == shape[-1:]:
        return P.rms_norm(x, scale, epsilon=eps)
    ms = P.mean(P.mul(x, x), axis=axes, keepdims=True)
    return P.mul(P.div(x, P.sqrt(P.add(ms, _scalar(eps, x)))), scale)
