"""ONNX convolution, pooling, batch normalization and hard activations (NCHW, 1-D and 2-D).

1-D operators run as their 2-D op over a height of 1. auto_pad SAME_* needs
static spatial dims (the pads are computed at import). BatchNormalization is
inference only (training_mode=0): y = x * scale' + shift' with the constant
parts folded in numpy at import.
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.nn.functional_vision import same_pads
from opforge.onnx._node import FLOAT, INT, INTS, STRING, converter, dtype_of, shape_of

_WINDOW = {"auto_pad": STRING, "kernel_shape": INTS, "pads": INTS, "strides": INTS, "dilations": INTS}


def _spatial(n, x, what="X"):
    shape = shape_of(x)
    if len(shape) not in (3, 4):
        raise n.fail(f"{what} of rank {len(shape)}: opforge implements 1-D and 2-D (rank 3 and 4) only",
                     UnimplementedError)
    return shape


def _to2d(x, shape):
    """[N, C, L] -> [N, C, 1, L]; 4-D unchanged."""
    return P.reshape(x, shape=[shape[0] if shape[0] is not None else -1, shape[1], 1, shape[2]]) \
        if len(shape) == 3 else x


def _from2d(y, rank):
    if rank == 4:
        return y
    s = shape_of(y)
    return P.reshape(y, shape=[s[0] if s[0] is not None else -1, s[1], s[3]])


def _window(n, shape, kernel):
    """(strides, pads [t, l, b, r], dilations) as 2-D lists from the node's attrs and auto_pad."""
    k = len(kernel)
    strides = n.attr("strides", [1] * k)
    dil = n.attr("dilations", [1] * k)
    pads = n.attr("pads", [0] * (2 * k))
    if len(strides) != k or len(dil) != k or len(pads) != 2 * k:
        raise n.fail(f"strides {strides}, dilations {dil} and pads {pads} must have {k}, {k} and {2 * k} entries")
    mode = n.attr("auto_pad", "NOTSET")
    if mode == "VALID":
        pads = [0] * (2 * k)
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        spatial = shape[2:]
        if any(d is None for d in spatial):
            raise n.fail(f"auto_pad {mode} needs static spatial dims, got {list(shape)}", UnimplementedError)
        pr = [same_pads(spatial[i], kernel[i], strides[i], dil[i], mode == "SAME_UPPER") for i in range(k)]
        pads = [p[0] for p in pr] + [p[1] for p in pr]
    elif mode != "NOTSET":
        raise n.fail(f"auto_pad {mode!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    if k == 1:
        return [1, strides[0]], [0, pads[0], 0, pads[1]], [1, dil[0]]
    return list(strides), list(pads), list(dil)


@converter("Conv", (1, 11, 22), {**_WINDOW, "group": INT})
def _conv(n, activation="none", packed=None, residual=False):
    if residual:  # input 3 (added by fuse_conv_residuals): act(conv + bias + input 3)
        return _conv_add(n, activation, packed)
    if packed is not None:  # the filter packed once at import (_pack_conv.py); its initializer may be gone
        return _run_packed(n, packed, activation)
    x, w = n.input(0), n.input(1)
    shape, ws = _spatial(n, x), shape_of(w)
    if len(ws) != len(shape):
        raise n.fail(f"W of shape {list(ws)} must have X's rank {len(shape)}")
    kernel = n.attr("kernel_shape", list(ws[2:]))
    if list(kernel) != list(ws[2:]):
        raise n.fail(f"kernel_shape {kernel} does not match W's spatial dims {list(ws[2:])}")
    strides, pads, dil = _window(n, shape, kernel)
    from opforge.onnx._ops_half import widen_bias as _widen_bias, widened_weight
    w32 = widened_weight(n, x)  # float16 with a constant weight: widened once, here (issue 25)
    if w32 is not None:
        x, w = P.cast(x, dtype="float32"), w32
    if len(shape) == 3:
        w = P.reshape(w, shape=[ws[0], ws[1], 1, ws[2]])
    attrs = dict(strides=strides, pads=pads, dilations=dil, groups=n.attr("group", 1))
    y = _packed_conv(n, x, shape, w32 is None, attrs, activation)
    if y is not None:
        return y
    if n.has(2) or activation != "none":
        # The bias and activation run in the convolution's GEMM epilogue.
        b = n.input(2) if n.has(2) else np.zeros(ws[0], dtype_of(x))
        b = _widen_bias(n, b) if w32 is not None and n.has(2) else b
        y = P.fused_conv2d(_to2d(x, shape), w, b, activation=activation, **attrs)
    else:
        y = P.conv2d(_to2d(x, shape), w, **attrs)
    y = _from2d(y, len(shape))
    return P.cast(y, dtype="float16") if w32 is not None else y


def _conv_add(n, activation, packed):
    """A Conv -> Add(residual) [-> Relu] chain fused at import: Conv2DPackedAdd where the filter is packed and the
    residual has the output's static shape, else the Conv, the Add (broadcasting as ONNX's) and the activation."""
    r = n.input(3)
    if packed is not None:
        y = _run_packed(n, packed, activation, r)
        if y is not None:
            return y
        y = _run_packed(n, packed, "none")
    else:
        y = _conv(n)
    y = P.add(y, r)
    return P.relu(y) if activation == "relu" else y


def _run_packed(n, packed, activation, residual=None):
    """Conv2DPacked over the filter (blob, [o, c, kh, kw]) that _pack_conv.pack_filters packed at import; with a
    residual, Conv2DPackedAdd where its shape is the output's (all dims static), else None."""
    blob, ws = packed
    x = n.input(0)
    shape = _spatial(n, x)
    if len(shape) != 4 or dtype_of(x) != np.float32:
        raise n.fail(f"X ({dtype_of(x)}, rank {len(shape)}) must be float32 of rank 4 like its weight W {list(ws)}")
    kernel = n.attr("kernel_shape", list(ws[2:]))
    if list(kernel) != list(ws[2:]):
        raise n.fail(f"kernel_shape {kernel} does not match W's spatial dims {list(ws[2:])}")
    strides, pads, dil = _window(n, shape, kernel)
    bias = n.input(2) if n.has(2) else np.zeros(0, np.float32)
    if residual is not None:
        out = [shape[0], ws[0]] + [(shape[2 + i] + pads[i] + pads[i + 2] - dil[i] * (ws[2 + i] - 1) - 1)
                                   // strides[i] + 1 if shape[2 + i] is not None else None for i in range(2)]
        if None in out or list(shape_of(residual)) != out or dtype_of(residual) != np.float32:
            return None
        return P.conv2d_packed_add(x, blob, bias, residual, filter_shape=list(ws), strides=strides, pads=pads,
                                   dilations=dil, activation=activation)
    return P.conv2d_packed(x, blob, bias, filter_shape=list(ws), strides=strides, pads=pads, dilations=dil,
                           activation=activation)


def _packed_conv(n, x, shape, float32, attrs, activation):
    """Conv2DPacked over the filter packed here, for a float32 2-D Conv with one group whose weight is a graph
    constant not packed at import (a folded value, a Constant node), else None. Eagerly (the weight is no graph
    constant) the convolution runs unpacked: packing per call would cost more than it saves."""
    import os
    from opforge.onnx._pack_conv import winograd_possible
    if os.environ.get("OPFORGE_ONNX_PACK_CONV", "1") == "0":
        return None
    from opforge.quantization._functional import pack_eagerly
    w = n.known(1)
    if (not float32 or not isinstance(w, np.ndarray) or w.dtype != np.float32 or w.ndim != 4 or len(shape) != 4
            or attrs["groups"] != 1 or dtype_of(x) != np.float32):
        return None
    wino = winograd_possible(shape, w.shape[2:], attrs["strides"], attrs["pads"], attrs["dilations"],
                             w.shape[0], w.shape[1])
    packed = pack_eagerly(P.pack_conv2d_filter, np.ascontiguousarray(w), winograd=bool(wino))
    bias = n.input(2) if n.has(2) else np.zeros(0, np.float32)
    return P.conv2d_packed(x, packed, bias, filter_shape=list(w.shape), strides=attrs["strides"], pads=attrs["pads"],
                           dilations=attrs["dilations"], activation=activation)


def _conv_transpose_pads(n, shape, ws, strides, dil):
    """Pads [t, l, b, r] and output_padding of a 2-D ConvTranspose from pads / auto_pad / output_shape."""
    k = len(ws) - 2
    kernel = list(ws[2:])
    out_pad = list(n.attr("output_padding", [0] * k))
    pads = list(n.attr("pads", [0] * (2 * k)))
    out_shape = n.attr("output_shape")
    mode = n.attr("auto_pad", "NOTSET")
    if len(out_pad) != k or len(pads) != 2 * k:
        raise n.fail(f"output_padding {out_pad} and pads {pads} must have {k} and {2 * k} entries")
    if mode not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise n.fail(f"auto_pad {mode!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    if mode == "VALID":
        pads = [0] * (2 * k)
    if out_shape is not None or mode in ("SAME_UPPER", "SAME_LOWER"):
        spatial = shape[2:]
        if any(d is None for d in spatial):
            raise n.fail("output_shape / auto_pad SAME_* need static spatial dims", UnimplementedError)
        want = list(out_shape)[-k:] if out_shape is not None else [spatial[i] * strides[i] for i in range(k)]
        total = [strides[i] * (spatial[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - want[i]
                 for i in range(k)]
        upper = mode == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        end = [t - t // 2 if upper else t // 2 for t in total]
        # A negative end pad is output padding (more rows past the full output).
        out_pad = [out_pad[i] + max(0, -end[i]) for i in range(k)]
        pads = begin + [max(0, e) for e in end]
    if min(pads) < 0:
        raise n.fail(f"negative pads {pads} are not supported", UnimplementedError)
    if any(out_pad[i] >= strides[i] for i in range(k)):
        raise n.fail(f"output_padding {out_pad} must be below strides {list(strides)}", UnimplementedError)
    if k == 1:
        return [0, pads[0], 0, pads[1]], [0, out_pad[0]]
    return pads, out_pad


@converter("ConvTranspose", (1, 11, 22), {**_WINDOW, "group": INT, "output_padding": INTS, "output_shape": INTS})
def _conv_transpose(n):
    x, w = n.input(0), n.input(1)
    shape, ws = _spatial(n, x), shape_of(w)
    if len(ws) != len(shape):
        raise n.fail(f"W of shape {list(ws)} must have X's rank {len(shape)}")
    kernel = n.attr("kernel_shape", list(ws[2:]))
    if list(kernel) != list(ws[2:]):
        raise n.fail(f"kernel_shape {kernel} does not match W's spatial dims {list(ws[2:])}")
    k = len(kernel)
    strides, dil = n.attr("strides", [1] * k), n.attr("dilations", [1] * k)
    if len(strides) != k or len(dil) != k:
        raise n.fail(f"strides {strides} and dilations {dil} must have {k} entries")
    pads, out_pad = _conv_transpose_pads(n, shape, ws, strides, dil)
    if k == 1:
        w = P.reshape(w, shape=[ws[0], ws[1], 1, ws[2]])
        strides, dil = [1, strides[0]], [1, dil[0]]
    group = n.attr("group", 1)
    y = P.conv_transpose2d(_to2d(x, shape), w, strides=list(strides), pads=pads, dilations=list(dil), groups=group,
                           output_padding=out_pad)
    if n.has(2):
        y = P.add(y, P.reshape(n.input(2), shape=[1, ws[1] * group, 1, 1]))
    return _from2d(y, len(shape))


def _pool_common(n):
    x = n.input(0)
    shape = _spatial(n, x)
    kernel = n.attr("kernel_shape")
    if kernel is None or len(kernel) != len(shape) - 2:
        raise n.fail(f"kernel_shape {kernel} must have {len(shape) - 2} entries")
    strides, pads, dil = _window(n, shape, kernel)
    k2 = [1, kernel[0]] if len(kernel) == 1 else list(kernel)
    return x, shape, k2, strides, pads, dil


@converter("MaxPool", (1, 8, 10, 11, 12, 22), {**_WINDOW, "ceil_mode": INT, "storage_order": INT})
def _max_pool(n):
    if len(n.node.output) > 1 and n.node.output[1]:
        raise n.fail("the Indices output is not supported", UnimplementedError)
    x, shape, k, s, p, d = _pool_common(n)
    y = P.max_pool2d(_to2d(x, shape), ksize=k, strides=s, pads=p, dilations=d, ceil_mode=bool(n.attr("ceil_mode", 0)))
    return _from2d(y, len(shape))


@converter("AveragePool", (1, 7, 10, 11, 19, 22), {**_WINDOW, "ceil_mode": INT, "count_include_pad": INT})
def _avg_pool(n):
    x, shape, k, s, p, d = _pool_common(n)
    if any(v != 1 for v in d):
        raise n.fail(f"dilations {n.attr('dilations')} are not supported for AveragePool", UnimplementedError)
    y = P.avg_pool2d(_to2d(x, shape), ksize=k, strides=s, pads=p, ceil_mode=bool(n.attr("ceil_mode", 0)),
                     count_include_pad=bool(n.attr("count_include_pad", 0)))
    return _from2d(y, len(shape))


def _global(fn):
    def convert(n):
        x = n.input(0)
        rank = len(shape_of(x))
        if rank < 3:
            raise n.fail(f"X must have rank >= 3 (N, C, spatial...), got {rank}")
        return fn(x, axis=list(range(2, rank)), keepdims=True)
    return convert


converter("GlobalAveragePool", (1, 22))(_global(P.mean))
converter("GlobalMaxPool", (1, 22))(_global(P.max))


@converter("BatchNormalization", (6, 7, 9, 14, 15), {"epsilon": FLOAT, "momentum": FLOAT, "spatial": INT,
                                                      "training_mode": INT, "is_test": INT})
def _batch_norm(n):
    if n.version == 6 and not n.attr("is_test", 0):
        raise n.fail("is_test=0 (training) is not supported in opset 6", UnimplementedError)
    if n.attr("spatial", 1) != 1:
        raise n.fail("spatial=0 is not supported", UnimplementedError)
    x = n.input(0)
    shape = shape_of(x)
    if len(shape) < 2:
        raise n.fail(f"X must have rank >= 2, got {len(shape)}")
    eps = n.attr("epsilon", 1e-5)
    training = bool(n.attr("training_mode", 0))
    outputs = sum(1 for o in n.node.output if o)
    if not training and outputs > 1:
        raise n.fail("outputs beyond Y need training_mode=1", UnimplementedError)
    consts = [n.known(i) for i in range(1, 5)]
    if not training and all(c is not None for c in consts):
        # Constant statistics (the usual case): one multiply and one add.
        scale, bias, mean, var = (c.astype(np.float64) for c in consts)
        k = scale / np.sqrt(var + eps)
        view = [1, shape[1]] + [1] * (len(shape) - 2)
        dt = dtype_of(x)
        return P.add(P.mul(x, k.reshape(view).astype(dt)), (bias - mean * k).reshape(view).astype(dt))
    y, bm, bv = P.batch_norm(x, *(n.input(i) for i in range(1, 5)), epsilon=eps, training=training)
    if not training:
        return y
    # ONNX's running statistics: input * momentum + batch (biased variance) * (1 - momentum).
    m = np.array(n.attr("momentum", 0.9), dtype_of(x))
    rm = P.add(P.mul(n.input(3), m), P.mul(bm, 1 - m))
    rv = P.add(P.mul(n.input(4), m), P.mul(bv, 1 - m))
    return (y, rm, rv)[:max(outputs, 1)]


def _hard_sigmoid(x, alpha, beta):
    dt = dtype_of(x)
    y = P.add(P.mul(x, np.array(alpha, dt)), np.array(beta, dt))
    return P.minimum(P.maximum(y, np.array(0, dt)), np.array(1, dt))


@converter("HardSigmoid", (1, 6, 22), {"alpha": FLOAT, "beta": FLOAT})
def _hardsigmoid(n):
    return _hard_sigmoid(n.input(0), n.attr("alpha", 0.2), n.attr("beta", 0.5))


@converter("HardSwish", (14, 22))
def _hardswish(n):
    x = n.input(0)
    return P.mul(x, _hard_sigmoid(x, 1.0 / 6, 0.5))


def fold_batch_norm(program):
    """Folds inference BatchNormalization into the Conv before it, at import.

    When a Conv's only consumer is a BatchNormalization whose statistics, and
    the Conv's weights, are initializers, the pair becomes one Conv with
    W' = W * k and b' = (b - mean) * k + beta, k = scale / sqrt(var + eps)
    (per output channel): one op and one pass over the activations less.
    """
    from opforge.onnx import _node
    inits = program.initializers
    uses = {}
    for ctx, _, _ in program.steps:
        for name in ctx.node.input:
            uses[name] = uses.get(name, 0) + 1
    steps, skip, replaced = program.steps, set(), set()
    by_input = {}
    for i, (ctx, _, _) in enumerate(steps):
        if ctx.node.op_type == "BatchNormalization" and ctx.node.input:
            by_input[ctx.node.input[0]] = i
    for i, (ctx, _, outputs) in enumerate(steps):
        node = ctx.node
        if node.op_type != "Conv" or len(node.output) != 1 or node.output[0] in program.outputs:
            continue
        j = by_input.get(node.output[0])
        if j is None or uses.get(node.output[0]) != 1:
            continue
        bn = steps[j][0]
        b_in = list(bn.node.input)
        attrs = {a.name: a for a in bn.node.attribute}
        if (len(b_in) != 5 or sum(1 for o in bn.node.output if o) != 1 or not bn.node.output[0]
                or any(n not in inits for n in b_in[1:]) or node.input[1] not in inits
                or (len(node.input) > 2 and node.input[2] and node.input[2] not in inits)
                or (bn.version == 6 and not (attrs.get("is_test") and attrs["is_test"].i))
                or ("training_mode" in attrs and attrs["training_mode"].i)
                or ("spatial" in attrs and attrs["spatial"].i != 1)):
            continue
        w = inits[node.input[1]].astype(np.float64)
        if w.ndim not in (3, 4):
            continue
        scale, beta, mean, var = (inits[n].astype(np.float64) for n in b_in[1:])
        eps = attrs["epsilon"].f if "epsilon" in attrs else 1e-5
        k = scale / np.sqrt(var + eps)
        b = inits[node.input[2]].astype(np.float64) if len(node.input) > 2 and node.input[2] else 0.0
        dt = inits[node.input[1]].dtype
        wn, bname = f"{node.output[0]}::folded_w", f"{node.output[0]}::folded_b"
        inits[wn] = (w * k.reshape((-1,) + (1,) * (w.ndim - 1))).astype(dt)
        inits[bname] = ((b - mean) * k + beta).astype(dt)
        new = type(node)()
        new.CopyFrom(node)
        del new.input[:]
        new.input.extend([node.input[0], wn, bname])
        new.output[0] = bn.node.output[0]
        folded = _node.NodeCtx(new, ctx.version, {})
        folded.where = ctx.where
        steps[i] = (folded, steps[i][1], [(0, bn.node.output[0])])
        skip.add(j)
        replaced.update(list(node.input[1:]) + b_in[1:])
    if skip:
        program.steps = [s for k, s in enumerate(steps) if k not in skip]
        _drop_unread(program, replaced)
    _fuse_conv_activations(program)


def _drop_unread(program, names):
    """Removes the initializers among `names` (the weights and statistics a fold replaced) that no step, no
    subgraph and no graph output reads any more: the model keeps only the folded copies."""
    from opforge.onnx import _validate
    read = set(program.outputs)
    for ctx, _, _ in program.steps:
        read.update(ctx.node.input)
        read.update(_validate.outer_names(ctx.node))
    for name in names:
        if name and name not in read:
            program.initializers.pop(name, None)


def _input_named(name):
    def convert(n):
        return n.input(list(n.node.input).index(name))
    convert.passes = name  # a node fused into its producer passes that value through (_fuse_concat reads it)
    return convert


def _readers_and_makers(steps):
    """{value: [indices of the steps reading it]}, {value: index of the step making it}."""
    readers, made_by = {}, {}
    for i, (ctx, _, _) in enumerate(steps):
        for name in ctx.node.input:
            readers.setdefault(name, []).append(i)
        for name in ctx.node.output:
            made_by[name] = i
    return readers, made_by


def fuse_conv_residuals(program):
    """Conv -> Add(conv, r) [-> Relu] (a ResNet block after its BatchNorm is folded) as one Conv step that reads r as
    a 4th input: the residual is added in the GEMM's epilogue before the activation (Conv2DPackedAdd). Only where
    the Add alone reads the Conv's output, the Relu alone the Add's, and r is computed before the Conv's step (of
    two Convs, the later one takes the other as r). OPFORGE_ONNX_CONV_RESIDUAL=0 turns it off."""
    import functools
    import os
    from opforge.onnx import _node
    if os.environ.get("OPFORGE_ONNX_CONV_RESIDUAL", "1") == "0":
        return
    steps, outs = program.steps, set(program.outputs)
    readers, made_by = _readers_and_makers(steps)
    for j, (actx, _, aouts) in enumerate(steps):
        node = actx.node
        if node.op_type != "Add" or len(node.input) != 2 or node.input[0] == node.input[1] or len(node.output) != 1:
            continue
        best = None
        for k in (0, 1):
            y, r = node.input[k], node.input[1 - k]
            i = made_by.get(y)
            if (i is None or steps[i][1] is not _conv or len(steps[i][0].node.output) != 1 or y in outs
                    or readers.get(y) != [j] or made_by.get(r, -1) > i):
                continue
            if best is None or i > best[0]:
                best = (i, y, r)
        if best is None:
            continue
        i, y, r = best
        s = node.output[0]
        rs = readers.get(s, [])
        relu = len(rs) == 1 and steps[rs[0]][0].node.op_type == "Relu" and s not in outs
        ctx = steps[i][0]
        new = type(ctx.node)()
        new.CopyFrom(ctx.node)
        while len(new.input) < 3:
            new.input.append("")
        new.input.append(r)
        fused = _node.NodeCtx(new, ctx.version, {})
        fused.where = ctx.where
        steps[i] = (fused, functools.partial(_conv, activation="relu" if relu else "none", residual=True), steps[i][2])
        steps[j] = (actx, _input_named(y), aouts)
        if relu:
            steps[rs[0]] = (steps[rs[0]][0], _input_named(s), steps[rs[0]][2])


def _fuse_conv_activations(program):
    """Conv -> Relu / Sigmoid / HardSwish, and Conv -> Sigmoid -> Mul(conv, sigmoid) (SiLU), where nothing else reads the
    Conv's output: the activation runs in the Conv's GEMM epilogue (FusedConv2D) and the activation nodes pass
    the Conv's output through."""
    import functools
    steps, outs = program.steps, set(program.outputs)
    readers, made_by = _readers_and_makers(steps)
    for i, (ctx, fn, outputs) in enumerate(steps):
        if fn is not _conv or len(ctx.node.output) != 1 or ctx.node.output[0] in outs:
            continue
        y = ctx.node.output[0]
        rs = readers.get(y, [])
        kinds = sorted(steps[j][0].node.op_type for j in rs)
        if kinds in (["Relu"], ["Sigmoid"], ["HardSwish"]):
            j = rs[0]
            steps[i] = (ctx, functools.partial(_conv, activation=kinds[0].lower()), outputs)
            steps[j] = (steps[j][0], _input_named(y), steps[j][2])
        elif kinds == ["Mul", "Sigmoid"]:
            sig = next(j for j in rs if steps[j][0].node.op_type == "Sigmoid")
            mul = next(j for j in rs if steps[j][0].node.op_type == "Mul")
            s_out = steps[sig][0].node.output[0]
            if (sorted(steps[mul][0].node.input) != sorted([y, s_out]) or readers.get(s_out) != [mul]
                    or s_out in outs):
                continue
            steps[i] = (ctx, functools.partial(_conv, activation="silu"), outputs)
            steps[sig] = (steps[sig][0], _input_named(y), steps[sig][2])
            steps[mul] = (steps[mul][0], _input_named(y), steps[mul][2])


from opforge.onnx import _ops_resample  # noqa: E402,F401  (Pad, Resize)
