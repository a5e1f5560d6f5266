"""ONNX quantization operators: (De)QuantizeLinear, DynamicQuantizeLinear,
MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv, onto opforge's
ops of the same names (cpp/ops/quant_ops.cc).

Optional zero points become zeros of the operand's type (uint8 when
QuantizeLinear has neither a zero point nor output_dtype, as ONNX says). A
float16 x or scale (opset 19+) is computed in float32, the result cast back.
Blocked quantization (block_size > 0), float8 and int4 types are refused
with UnimplementedError.
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _dtypes
from opforge.onnx._node import INT, INTS, STRING, converter, dtype_of, shape_of
from opforge.onnx._ops_conv import _from2d, _spatial, _to2d, _window
from opforge.quantization._functional import pack_eagerly

_Q8 = {np.dtype(np.uint8), np.dtype(np.int8)}
_Q16 = _Q8 | {np.dtype(np.uint16), np.dtype(np.int16)}
_F32 = np.dtype(np.float32)


def _q8(n, v, what, types=_Q8):
    if dtype_of(v) not in types:
        names = "uint8 and int8" if types is _Q8 else "uint8, int8, uint16 and int16"
        raise n.fail(f"{what} of type {dtype_of(v)}: opforge implements {names} only here", UnimplementedError)
    return v


def _f32(v):
    return v if dtype_of(v) == _F32 else (v.astype(np.float32) if isinstance(v, np.ndarray)
                                          else P.cast(v, dtype="float32"))


def _zero_point(n, i, like_scale, dtype):
    """Input i, or zeros of `dtype` with the scale's shape when the node leaves it out."""
    if n.has(i):
        return n.input(i)
    return np.zeros(shape_of(like_scale), dtype)


def _check_block(n):
    if n.attr("block_size", 0):
        raise n.fail("block_size > 0 (blocked quantization) is not supported", UnimplementedError)


_LINEAR = {"axis": INT, "block_size": INT, "output_dtype": INT, "saturate": INT, "precision": INT}
_VERSIONS = (10, 13, 19, 21, 23, 24, 25, 28)


@converter("QuantizeLinear", _VERSIONS, _LINEAR)
def _quantize_linear(n):
    _check_block(n)
    x, scale = n.input(0), n.input(1)
    out = n.attr("output_dtype", 0)
    if n.has(2):
        zp = _q8(n, n.input(2), "y_zero_point", _Q16)
    else:
        types = {0: np.uint8, _dtypes.UINT8: np.uint8, _dtypes.INT8: np.int8, _dtypes.UINT16: np.uint16,
                 _dtypes.INT16: np.int16}
        if out not in types:
            raise n.fail(f"output_dtype {_dtypes.onnx_type_name(out)}: opforge quantizes to uint8, int8, uint16 "
                         "and int16 only", UnimplementedError)
        zp = _zero_point(n, 2, scale, types[out])
    return P.quantize_linear(_f32(x), _f32(scale), zp, axis=n.attr("axis", 1))


@converter("DequantizeLinear", _VERSIONS, {k: v for k, v in _LINEAR.items() if k not in ("saturate", "precision")})
def _dequantize_linear(n):
    _check_block(n)
    x, scale = n.input(0), n.input(1)
    if dtype_of(x) not in _Q16 | {np.dtype(np.int32)}:
        raise n.fail(f"x of type {dtype_of(x)}: opforge dequantizes uint8, int8, uint16, int16 and int32 only",
                     UnimplementedError)
    y = P.dequantize_linear(x, _f32(scale), _zero_point(n, 2, scale, dtype_of(x)), axis=n.attr("axis", 1))
    want = n.attr("output_dtype", 0)
    out = dtype_of(scale) if not want else _dtypes.to_numpy(want, f"onnx: node {n.where}: output_dtype")
    return y if out == _F32 else P.cast(y, dtype=out.name)


@converter("DynamicQuantizeLinear", (11,))
def _dynamic_quantize_linear(n):
    return tuple(P.dynamic_quantize_linear(_f32(n.input(0))))


@converter("MatMulInteger", (10,))
def _matmul_integer(n):
    a, b = _q8(n, n.input(0), "A"), _q8(n, n.input(1), "B")
    za = n.input(2) if n.has(2) else np.zeros((), dtype_of(a))
    zb = n.input(3) if n.has(3) else np.zeros((), dtype_of(b))
    return P.mat_mul_integer(a, b, _flat(za), _flat(zb))


def _flat(v):
    """A per-row [M, 1] or per-column [1, N] parameter as 1-D (ONNX allows both spellings)."""
    s = shape_of(v)
    if len(s) == 2 and 1 in s:
        return v.reshape(-1) if isinstance(v, np.ndarray) else P.reshape(v, shape=[-1])
    return v


@converter("QLinearMatMul", (10, 21))
def _qlinear_matmul(n):
    a, b = _q8(n, n.input(0), "a"), _q8(n, n.input(3), "b")
    return P.q_linear_mat_mul(a, _f32(_flat(n.input(1))), _flat(n.input(2)), b, _f32(_flat(n.input(4))),
                              _flat(n.input(5)), _f32(n.input(6)), _q8(n, n.input(7), "y_zero_point"))


_CONV = {"auto_pad": STRING, "kernel_shape": INTS, "pads": INTS, "strides": INTS, "dilations": INTS, "group": INT}


def _conv_args(n, x, w):
    shape, ws = _spatial(n, x), shape_of(w)
    if len(ws) != len(shape):
        raise n.fail(f"w of shape {list(ws)} must have x's rank {len(shape)}")
    kernel = n.attr("kernel_shape", list(ws[2:]))
    if list(kernel) != list(ws[2:]):
        raise n.fail(f"kernel_shape {kernel} does not match w's spatial dims {list(ws[2:])}")
    strides, pads, dil = _window(n, shape, kernel)
    if len(shape) == 3:
        w = w.reshape(ws[0], ws[1], 1, ws[2]) if isinstance(w, np.ndarray) else \
            P.reshape(w, shape=[ws[0], ws[1], 1, ws[2]])
    return _to2d(x, shape), w, shape, dict(strides=strides, pads=pads, dilations=dil, groups=n.attr("group", 1))


@converter("ConvInteger", (10,), _CONV)
def _conv_integer(n):
    x, w = _q8(n, n.input(0), "x"), _q8(n, n.input(1), "w")
    x2, w2, shape, kw = _conv_args(n, x, w)
    zx = n.input(2) if n.has(2) else np.zeros((), dtype_of(x))
    zw = n.input(3) if n.has(3) else np.zeros((), dtype_of(w))
    return _from2d(P.conv_integer(x2, w2, zx, zw, **kw), len(shape))


@converter("QLinearConv", (10,), _CONV)
def _qlinear_conv(n):
    x, w = _q8(n, n.input(0), "x"), _q8(n, n.input(3), "w")
    x2, w2, shape, kw = _conv_args(n, x, w)
    bias = n.input(8) if n.has(8) else np.zeros(shape_of(w)[0], np.int32)
    y = P.q_linear_conv(x2, _f32(n.input(1)), n.input(2), w2, _f32(n.input(4)), n.input(5), _f32(n.input(6)),
                        _q8(n, n.input(7), "y_zero_point"), bias, **kw)
    return _from2d(y, len(shape))


# -- dynamic quantization chains: one DynamicQuantizeMatMul ---------------
#
# onnxruntime.quantization.quantize_dynamic writes each Linear as
#   xq, xs, xz = DynamicQuantizeLinear(x);  s = Mul(xs, w_scale)
#   y = Mul(Cast(MatMulInteger(xq, W, xz, w_zero), to=float), s) [-> Add(bias)] [-> Relu]
# with W, w_scale, w_zero constant. Such a chain imports as one
# DynamicQuantizeMatMul over W packed once (PackMatMulIntegerWeight), as
# onnxruntime's own DynamicQuantizeMatMul fusion does. The packed weight is
# made when the step first runs (once when a graph is built) and kept.


def _const(ctx, i):
    """Input i's numpy value when it is constant (an initializer), else None."""
    v = ctx.known(i)
    if v is None and ctx.has(i):
        v = ctx._env.get(ctx._inputs[i])
    return v if isinstance(v, np.ndarray) else None


def _chain_step(chain, deferred_steps, bias_side, act):
    """The step that runs a matched chain fused, or node by node when a check fails at run time."""
    d_ctx, s_ctx, m_ctx, a_ctx = chain
    cache = {}

    def unfused(ctx):
        env, consts = ctx._env, ctx._consts
        result = None
        for proto, fn, outputs in deferred_steps:
            res = fn(proto.bind(env, consts))
            res = res if isinstance(res, tuple) else (res,)
            for k, name in outputs:
                env[name] = res[k]
            result = res
        return result if len(result) > 1 else result[0]

    def run(ctx):
        env, consts = ctx._env, ctx._consts
        d, m, s = d_ctx.bind(env, consts), m_ctx.bind(env, consts), s_ctx.bind(env, consts)
        w, wz = _const(m, 1), _const(m, 3) if m.has(3) else np.zeros((), np.int8)
        scale_side = 1 if s.node.input[0] == d.node.output[1] else 0
        ws = _const(s, scale_side)
        x = d.input(0)
        bias = None
        if a_ctx is not None:
            bias = _const(a_ctx.bind(env, consts), bias_side)
        ok = (w is not None and wz is not None and ws is not None and w.ndim == 2 and w.dtype in _Q8
              and wz.dtype == w.dtype and wz.size in (1, w.shape[1]) and ws.dtype == _F32
              and ws.size in (1, w.shape[1]) and dtype_of(x) == _F32
              and (a_ctx is None or (bias is not None and bias.dtype == _F32 and bias.shape == (w.shape[1],))))
        if not ok:
            return unfused(ctx)
        if "packed" not in cache:
            cache["packed"] = pack_eagerly(P.pack_mat_mul_integer_weight, np.ascontiguousarray(w),
                                           wz.reshape(-1) if wz.size > 1 else wz.reshape(()))
        b = bias if bias is not None else np.zeros(0, np.float32)
        return P.dynamic_quantize_mat_mul(x, cache["packed"], ws.reshape(-1) if ws.size > 1 else ws.reshape(()), b,
                                          n=int(w.shape[1]), activation=act)
    return run


def _deferred(ctx):
    return None


def fuse_dynamic_quant(steps, graph_outputs):
    """The import steps with each quantize_dynamic Linear chain (above) as one step at its last node."""
    from opforge.onnx._ops_conv import _readers_and_makers
    readers, made_by = _readers_and_makers(steps)
    only = lambda name, j: readers.get(name) == [j] and name not in graph_outputs  # noqa: E731

    def single_reader(name, op_types):
        r = readers.get(name, [])
        return r[0] if len(r) == 1 and name not in graph_outputs and steps[r[0]][0].node.op_type in op_types \
            else None

    steps = list(steps)
    fused_d = {}  # DynamicQuantizeLinear step -> its readers that were fused
    for mi, (m_ctx, _, _) in enumerate(steps):
        mn = m_ctx.node
        if mn.op_type != "MatMulInteger" or len(mn.input) < 3 or not mn.input[2]:
            continue
        di = made_by.get(mn.input[0])
        if di is None or steps[di][0].node.op_type != "DynamicQuantizeLinear":
            continue
        d_node = steps[di][0].node
        if list(mn.input[0:3:2]) != [d_node.output[0], d_node.output[2]]:
            continue
        ci = single_reader(mn.output[0], {"Cast"})
        if ci is None or steps[ci][0].attr("to") != 1:  # FLOAT
            continue
        yi = single_reader(steps[ci][0].node.output[0], {"Mul"})
        if yi is None:
            continue
        y_node = steps[yi][0].node
        other = y_node.input[1] if y_node.input[0] == steps[ci][0].node.output[0] else y_node.input[0]
        si = made_by.get(other)
        if si is None or steps[si][0].node.op_type != "Mul" or d_node.output[1] not in steps[si][0].node.input:
            continue
        chain_ends = [yi]
        ai = single_reader(y_node.output[0], {"Add"})
        bias_side = None
        if ai is not None:
            a_node = steps[ai][0].node
            bias_side = 1 if a_node.input[0] == y_node.output[0] else 0
            chain_ends.append(ai)
        ri = single_reader(steps[chain_ends[-1]][0].node.output[0], {"Relu"})
        if ri is not None:
            chain_ends.append(ri)
        last = chain_ends[-1]
        s_private = only(steps[si][0].node.output[0], yi)
        members = ([si] if s_private else []) + [mi, ci] + chain_ends
        deferred_steps = [steps[j] for j in sorted(members)]
        chain = (steps[di][0], steps[si][0], m_ctx, steps[ai][0] if ai is not None else None)
        run = _chain_step(chain, [steps[di]] + deferred_steps, bias_side, "relu" if ri is not None else "none")
        for j in members:
            if j != last:
                steps[j] = (steps[j][0], _deferred, [])
        steps[last] = (steps[last][0], run, steps[last][2])
        fused_d.setdefault(di, set()).update(members)
    # A DynamicQuantizeLinear whose every reader was fused runs inside the fused steps.
    for di, fused in fused_d.items():
        d_node = steps[di][0].node
        if all(set(readers.get(name, [])) <= fused and name not in graph_outputs for name in d_node.output):
            steps[di] = (steps[di][0], _deferred, [])
    return steps
