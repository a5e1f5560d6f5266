"""The blocked channel layout NCHWc inside imported CNNs (issue 23), as onnxruntime's NchwcTransformer.

On by default for graphs with a depthwise conv (MobileNet, EfficientNet;
docs/nchwc.md has the numbers); OPFORGE_NCHWC=0 turns it off, =1 applies
it to every conv it can run. Other graphs (ResNet, SqueezeNet) get the
'mixed' layout on an Intel CPU (OPFORGE_NCHWC=mixed: on any): only the dense
convs whose shape mixed_wins picks run blocked. At import, each maximal region of float32 Convs (one group, or depthwise)
with the elementwise operators between them (Relu, HardSwish, HardSigmoid,
Sigmoid, Clip, Add and Mul of two blocked values, GlobalAveragePool) runs in
[N, ceil(C / B), H, W, B] (cpp/ops/nchwc_ops.cc): the filters are laid out
once here, a network's first conv reads the NCHW input directly, a Conv ->
Add (residual) pair becomes one conv, a squeeze-and-excitation Mul becomes
the scale input of the 1x1 conv reading it, and a value leaves the layout
(ReorderFromNchwc) only where something outside the region reads it. The
lanes past a layer's channel count hold values the next conv reads against
zero weights, and are dropped at the boundary.
"""
import functools
import os

import numpy as np

_BLOCK: list[int] = []
# ONNX operators that run unchanged on a blocked value (elementwise, one input).
_UNARY = frozenset({"Relu", "HardSwish", "HardSigmoid", "Sigmoid", "Clip", "Identity", "LeakyRelu"})
_BINARY = frozenset({"Add", "Mul"})


def mode():
    """'all' (OPFORGE_NCHWC=1: every conv the layout runs), 'off' (0), 'mixed' (=mixed: the dense layers the
    blocked kernel wins, see mixed_wins), else 'auto' (the default): graphs with a depthwise conv, their
    pointwise and depthwise convs and a first conv of few channels only; other graphs 'mixed' on an Intel
    CPU (measured there), unchanged elsewhere (Zen 5 was tuned without it)."""
    v = os.environ.get("OPFORGE_NCHWC", "")
    return "all" if v == "1" else "off" if v == "0" else "mixed" if v == "mixed" else "auto"


def intel_cpu():
    """The CPU's vendor is Intel (/proc/cpuinfo), unless OPFORGE_CONV_TUNING=amd or =intel says otherwise, as
    the conv kernels' own per-CPU settings (cpp/kernels/conv/conv_tuning.cc)."""
    forced = os.environ.get("OPFORGE_CONV_TUNING", "")
    if forced in ("amd", "intel"):
        return forced == "intel"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return False


# Output pixels (all images of a call) up to which the 'mixed' layout runs a dense conv blocked; measured on
# ResNet-18 and SqueezeNet (Xeon, AVX-512). Where a call has more, the packed GEMM (several images' columns side
# by side) and Winograd (enough 4x4 tiles) beat the direct blocked kernel.
MIXED_STRIDED_PIXELS = 784  # 28x28 at batch 1
MIXED_STEM_PIXELS = 12544  # 112x112 at batch 1 (the one measured)
# A stride-1 conv runs blocked up to MIXED_SMALL_PIXELS in all and MIXED_SMALL_PLANE per image: 14x14 at
# batch 1, 7x7 and 13x13 at batch 8. Since the blocked kernel's rows over (block, tap) lists
# (nchwc_taps_isa.inc), ResNet-18 b8 runs its 7x7 stage blocked and SqueezeNet b8 its 13x13 fire module (two
# threads, chrt, interleaved with onnxruntime in one process, load 5-7: ResNet-18 b8 ort/opforge 1.00 -> 1.10x,
# SqueezeNet b8 1.02-1.06 -> 1.06-1.09x; b1 unchanged). Planes of 784 (ResNet's 28x28 and SqueezeNet's 27x27
# layers at batch 1) lost: ResNet b1 0.94x against 0.975x, SqueezeNet b1 0.81x against 0.90x.
MIXED_SMALL_PIXELS = 1352
# A stride-1 conv that expands few channels (C <= MIXED_EXPAND_IN, O >= 2C: SqueezeNet's fire expands) runs
# blocked up to MIXED_EXPAND_PIXELS output pixels per call: Winograd's and the GEMM's depth is C (x 9) there.
MIXED_EXPAND_IN = int(os.environ.get("OPFORGE_NCHWC_EXPAND_IN", 64))
MIXED_EXPAND_PIXELS = int(os.environ.get("OPFORGE_NCHWC_EXPAND_PIXELS", 2916))
MIXED_SMALL_PLANE = 196


def mixed_wins(w, strides, out_pixels, blocked_input, block, plane=None, stem_feeds_blocked=False):
    """Whether the 'mixed' layout runs this dense conv (filter w [O, C, kh, kw]; out_pixels: N * OH * OW, None
    where unknown; plane: OH * OW, out_pixels if not given) blocked. Measured per layer at batch 1 (Xeon, one thread, blocked against packed NCHW):
    ResNet-18's strided 3x3 convs 0.82-1.16 against 1.22-1.42 ms and 1x1 s2 0.105 against 0.16 ms; its 3x3 at
    7x7 2.5-2.6 against 2.7-2.9 ms, at 14x14 even (1.6-1.8 ms both), at 28x28 and 56x56 Winograd wins (1.4-1.6
    against 1.6); SqueezeNet's 13x13 layers 1.87 against 2.20 ms in all. At batch 8 the packed GEMM wins all
    but the convs to 7x7 (MIXED_SMALL_PIXELS). A 1x1 conv whose input is blocked already runs blocked (no
    reorder). An expand (MIXED_EXPAND_IN) runs blocked at batch 1. A stem (fewer than `block` input channels)
    runs blocked at batch 1 where stem_feeds_blocked: its output reaches, through Relu and MaxPool (blocked
    now), a conv that runs blocked, so no reorder follows it (SqueezeNet, one thread: 2.06 -> 1.85 ms)."""
    o, c, kh, kw = w.shape
    if out_pixels is None:
        return False
    if c < block:  # a stem (reads the NCHW input): blocked where its pool's output goes on blocked
        return stem_feeds_blocked and out_pixels <= MIXED_STEM_PIXELS
    if (kh, kw) == (1, 1) and blocked_input:
        return True
    if max(strides) > 1:
        return out_pixels <= MIXED_STRIDED_PIXELS
    if c <= MIXED_EXPAND_IN and o >= 2 * c and out_pixels <= MIXED_EXPAND_PIXELS:
        return True
    return out_pixels <= MIXED_SMALL_PIXELS and (out_pixels if plane is None else plane) <= MIXED_SMALL_PLANE


def block_size():
    """16 on AVX-512, else 8 (NchwcBlockSize; OPFORGE_NCHWC_BLOCK overrides, for tests)."""
    forced = os.environ.get("OPFORGE_NCHWC_BLOCK")
    if forced:
        return int(forced)
    if not _BLOCK:
        from opforge import ops as P
        from opforge.onnx import _compile
        with _compile.eager():
            _BLOCK.append(int(np.asarray(P.nchwc_block_size().numpy())))
    return _BLOCK[0]


def blocks(c, b):
    return -(-c // b)


def layout_filter(w, groups, block, nchw_input=False):
    """W [O, C / groups, kh, kw] laid out flat as Conv2DNchwc reads it (zeros past O and C)."""
    w = np.asarray(w, np.float32)
    o, cg, kh, kw = w.shape
    ob = blocks(o, block)
    if groups != 1:  # depthwise: [OB, kh, kw, B]
        pad = np.zeros((ob * block, kh, kw), np.float32)
        pad[:o] = w[:, 0]
        return np.ascontiguousarray(pad.reshape(ob, block, kh, kw).transpose(0, 2, 3, 1)).reshape(-1)
    if nchw_input:  # [OB, kh, kw, C, B]
        pad = np.zeros((ob * block, cg, kh, kw), np.float32)
        pad[:o] = w
        return np.ascontiguousarray(pad.reshape(ob, block, cg, kh, kw).transpose(0, 3, 4, 2, 1)).reshape(-1)
    ib = blocks(cg, block)  # [OB, IB, kh, kw, B in, B out]
    pad = np.zeros((ob * block, ib * block, kh, kw), np.float32)
    pad[:o, :cg] = w
    return np.ascontiguousarray(pad.reshape(ob, block, ib, block, kh, kw).transpose(0, 2, 4, 5, 3, 1)).reshape(-1)


def layout_bias(b, o, block):
    out = np.zeros(blocks(o, block) * block, np.float32)
    if b is not None:
        out[:o] = b
    return out


def to_nchwc(x, block):
    """numpy reference of ReorderToNchwc."""
    n, c, h, w = x.shape
    pad = np.zeros((n, blocks(c, block) * block, h, w), x.dtype)
    pad[:, :c] = x
    return np.ascontiguousarray(pad.reshape(n, -1, block, h, w).transpose(0, 1, 3, 4, 2))


def from_nchwc(x, c):
    """numpy reference of ReorderFromNchwc."""
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)[:, :c])


def _node(op_type, inputs, outputs, like, version=1):
    """A step of the rewritten program: (ctx of a node in opforge's own domain, converter, outputs)."""
    from onnx import helper
    from opforge.onnx import _node as node_mod
    node = helper.make_node(op_type, list(inputs), list(outputs), name=like.node.name, domain="opforge.nchwc")
    ctx = node_mod.NodeCtx(node, version, {})
    ctx.where = like.where
    return ctx


def _copy(ctx, names):
    """ctx's node with its input and output names mapped through `names` (the converter stays)."""
    from opforge.onnx import _node as node_mod
    new = type(ctx.node)()
    new.CopyFrom(ctx.node)
    for i, k in enumerate(new.input):
        new.input[i] = names.get(k, k)
    for i, k in enumerate(new.output):
        new.output[i] = k + "::nchwc" if k else k
    out = node_mod.NodeCtx(new, ctx.version, {})
    out.where = ctx.where
    return out


def _conv_step(n, filt, bias, attrs):
    """Inputs: x, then the residual and the SE scale where fused (empty names where not)."""
    from opforge import ops as P
    empty = np.zeros(0, np.float32)
    res = n.input(1) if n.has(1) else empty
    scale = n.input(2) if n.has(2) else empty
    return P.conv2d_nchwc(n.input(0), filt, bias, res, scale, **attrs)


def _reorder_to(n, block, channels=0):
    from opforge import ops as P
    return P.reorder_to_nchwc(n.input(0), block=block, channels=channels)


def _reorder_from(n, channels, block):
    from opforge import ops as P
    return P.reorder_from_nchwc(n.input(0), channels=channels, block=block)


def _max_pool(n, attrs):
    from opforge import ops as P
    return P.max_pool2d_nchwc(n.input(0), **attrs)


def _conv_concat(n, filters, bias, attrs):
    from opforge import ops as P
    return P.conv2d_nchwc_concat(n.input(0), list(filters), bias, **attrs)


def _pool_plan(ctx, shapes, block):
    """MaxPool2DNchwc's attrs for a 2-D MaxPool with one output, else None."""
    from opforge import errors
    from opforge.onnx import _ops_conv
    node = ctx.node
    kernel = ctx.attr("kernel_shape", None)
    shape = shapes.get(node.input[0]) or (None,) * 4
    if len(node.output) > 1 and node.output[1] or kernel is None or len(kernel) != 2 or len(shape) != 4:
        return None
    try:
        strides, pads, dil = _ops_conv._window(ctx, shape, list(kernel))
    except errors.OpError:
        return None
    return dict(ksize=[int(k) for k in kernel], block=block, strides=list(strides), pads=list(pads),
                dilations=list(dil), ceil_mode=bool(ctx.attr("ceil_mode", 0)))


def _global_avg(n, block):
    from opforge import ops as P
    return P.global_average_pool_nchwc(n.input(0), block=block)


def _conv_plan(ctx, fn, inits, shapes):
    """(W, b, groups, strides, pads, dilations, activation) of a Conv step the layout can run, else None."""
    from opforge import errors
    from opforge.onnx import _ops_conv
    base = fn.func if isinstance(fn, functools.partial) else fn
    kw = fn.keywords if isinstance(fn, functools.partial) else {}
    node = ctx.node
    if base is not _ops_conv._conv or "packed" in kw or not 2 <= len(node.input) <= 3 or len(node.output) != 1:
        return None
    w = inits.get(node.input[1])
    b = inits.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if w is None or w.dtype != np.float32 or w.ndim != 4 or 0 in w.shape:
        return None
    if len(node.input) > 2 and node.input[2] and (b is None or b.dtype != np.float32 or b.shape != (w.shape[0],)):
        return None
    groups = ctx.attr("group", 1)
    if groups != 1 and not (groups == w.shape[0] and w.shape[1] == 1):
        return None
    shape = shapes.get(node.input[0]) or (None,) * 4
    if len(shape) != 4 or (shape[1] is not None and shape[1] != w.shape[1] * groups):
        return None
    if w.shape[2] > 64 or w.shape[3] > 64:
        return None
    try:
        strides, pads, dil = _ops_conv._window(ctx, shape, list(w.shape[2:]))
    except errors.OpError:
        return None
    return w, b, groups, strides, pads, dil, kw.get("activation", "none")


def _out_pixels(shape):
    return shape[0] * shape[2] * shape[3] if shape and len(shape) == 4 and all(shape[i] for i in (0, 2, 3)) else None


def _is_depthwise(ctx, fn, inits):
    from opforge.onnx import _ops_conv
    base = fn.func if isinstance(fn, functools.partial) else fn
    if base is not _ops_conv._conv or ctx.attr("group", 1) == 1 or len(ctx.node.input) < 2:
        return False
    w = inits.get(ctx.node.input[1])
    return w is None or (w.ndim == 4 and w.shape[1] == 1)  # a weight behind an Identity counts too


def _concat_convs(ins, blocked, new, made_at, readers, outs):
    """Indices in `new` of the Conv2DNchwc steps making the blocked values of the Concat's inputs `ins`, where
    they are dense convs of one NCHWc input with no residual or scale and one activation, each read by the
    Concat only (and its plain output by the activation fused into it, if any); else None."""
    names = [blocked[k][0] for k in ins]
    js = [made_at.get(k) for k in names]
    if None in js or len(set(js)) != len(js):
        return None
    steps = [new[j] for j in js]
    if any(st is None or st[0].node.op_type != "Conv2DNchwc" or len(st[0].node.input) != 1 for st in steps):
        return None
    kws = [st[1].keywords for st in steps]
    a0 = kws[0]["attrs"]
    if any(kw["attrs"]["groups"] != 1 or kw["attrs"]["input_layout"] != "nchwc" for kw in kws) or \
            len({st[0].node.input[0] for st in steps}) != 1 or len({kw["attrs"]["activation"] for kw in kws}) != 1:
        return None
    for k, bname in zip(ins, names):
        y = bname[:-len("::nchwc")] if bname.endswith("::nchwc") else None
        if readers.get(k) != 1 or k in outs or y is None or (y != k and (readers.get(y) != 1 or y in outs)):
            return None
    return js


def rewrite(program, model):
    """Runs the maximal NCHWc regions of `program`'s steps in the blocked layout (see the module doc)."""
    how = mode()
    if how == "off":
        return
    from opforge.onnx import _ops_conv, _pack_conv
    if how == "auto" and not any(
            _is_depthwise(ctx, fn, program.initializers) for ctx, fn, _ in program.steps):
        if not intel_cpu():
            return
        how = "mixed"
    block = block_size()
    shapes = _pack_conv._static_shapes(model, program.initializers)
    # For pack_filters: without the weights this pass drops, ONNX shape inference would lose every size after
    # them, and the convs there would store a Winograd transform beside their panels (ResNet-18 b8: +150 MiB).
    program.static_shapes = shapes
    steps = program.steps
    inits = dict(program.initializers)  # and the Identity copies exporters make of shared weights
    for ctx, _, _ in steps:
        if ctx.node.op_type == "Identity" and ctx.node.input and ctx.node.input[0] in inits:
            inits[ctx.node.output[0]] = inits[ctx.node.input[0]]
    readers = {}
    for ctx, _, _ in steps:
        for k in ctx.node.input:
            readers[k] = readers.get(k, 0) + 1
    outs = set(program.outputs)
    blocked = {}   # plain name -> (its blocked value's name, channels)
    made_at = {}   # blocked name -> index in `new` of the step making it
    convs = {}     # blocked name of a conv's output (no activation) -> index of its step, for a residual Add
    residual_convs = {}  # blocked name of a conv + residual's output (no activation) -> its step, for a Relu
    new, replaced, plain_gone = [], set(), set()
    pooled = set()  # blocked names of [N, Cb, 1, 1, B] values (an SE block's pooled branch)
    scaled = {}     # plain name of an SE Mul's output -> (blocked x, blocked scale), for the conv reading it
    reader_steps = {}
    for ctx, fn, _ in steps:
        for k in ctx.node.input:
            reader_steps.setdefault(k, []).append((ctx, fn))

    def feeds_blocked(name):
        """Through one reader at a time (Relu, MaxPool), `name` reaches a conv the mixed layout runs blocked on a
        blocked input (SqueezeNet's stem -> pool -> squeeze; not ResNet's, whose pool feeds a conv and an Add)."""
        for _ in range(4):
            rs = reader_steps.get(name, [])
            if len(rs) != 1 or name in outs or len(rs[0][0].node.output) < 1:
                return False
            rctx, rfn = rs[0]
            if rctx.node.op_type in ("Relu", "MaxPool"):
                name = rctx.node.output[0]
                continue
            plan = _conv_plan(rctx, rfn, inits, shapes)
            out = shapes.get(rctx.node.output[0])
            px = _out_pixels(out)
            return plan is not None and plan[2] == 1 and rctx.node.input[0] == name and plan[0].shape[1] >= block \
                and mixed_wins(plan[0], plan[3], px, True, block, plane=px // out[0] if px else None)
        return False

    def runs_scaled(name):
        """The one reader of `name` is a conv the layout runs densely over an NCHWc input."""
        rs = reader_steps.get(name, [])
        if len(rs) != 1 or name in outs:
            return False
        plan = _conv_plan(rs[0][0], rs[0][1], inits, shapes)
        if plan is None or plan[2] != 1 or rs[0][0].node.input[0] != name:
            return False
        return how == "all" or plan[0].shape[2:] == (1, 1)

    def add(ctx, fn, outputs):
        new.append((ctx, fn, outputs))
        for _, name in outputs:
            made_at[name] = len(new) - 1

    def materialize(name):
        bname, c = blocked[name]
        ctx = _node("ReorderFromNchwc", [bname], [name], new[made_at[bname]][0] if bname in made_at else steps[0][0])
        add(ctx, functools.partial(_reorder_from, channels=c, block=block), [(0, name)])
        plain_gone.discard(name)

    def unscale(name):
        """An SE Mul whose conv did not take it: the blocked Mul after all."""
        _, _, mctx, mfn, names, c = scaled.pop(name)
        nctx = _copy(mctx, names)
        add(nctx, mfn, [(0, nctx.node.output[0])])
        blocked[name] = (nctx.node.output[0], c)
        plain_gone.add(name)

    for ctx, fn, outputs in steps:
        node, op = ctx.node, ctx.node.op_type
        plan = _conv_plan(ctx, fn, inits, shapes)
        if plan is not None and how == "auto":
            w, groups = plan[0], plan[2]
            if groups == 1 and w.shape[2:] != (1, 1) and not (w.shape[1] < block and node.input[0] not in blocked):
                plan = None
        elif plan is not None and how == "mixed":
            out = shapes.get(node.output[0])
            if plan[2] != 1 or not mixed_wins(plan[0], plan[3], _out_pixels(out),
                                              node.input[0] in blocked or node.input[0] in scaled, block,
                                              plane=_out_pixels(out) // out[0] if _out_pixels(out) else None,
                                              stem_feeds_blocked=plan[0].shape[1] < block and feeds_blocked(
                                                  node.output[0])):
                plan = None
        if plan is not None:
            w, b, groups, strides, pads, dil, act = plan
            x, y = node.input[0], node.output[0]
            c, o = w.shape[1] * groups, w.shape[0]
            se = scaled.pop(x, None)
            nchw = se is None and x not in blocked and groups == 1 and c < block
            if se is None and x not in blocked and not nchw:
                bx = x + "::nchwc"
                add(_node("ReorderToNchwc", [x], [bx], ctx), functools.partial(_reorder_to, block=block, channels=c), [(0, bx)])
                blocked[x] = (bx, c)
            attrs = dict(filter_shape=[int(d) for d in w.shape], block=block, groups=groups, strides=list(strides),
                         pads=list(pads), dilations=list(dil), activation=act,
                         input_layout="nchw" if nchw else "nchwc")
            step = functools.partial(_conv_step, filt=layout_filter(w, groups, block, nchw),
                                     bias=layout_bias(b, o, block), attrs=attrs)
            by = y + "::nchwc"
            ins = [x] if nchw else [se[0], "", se[1]] if se is not None else [blocked[x][0]]
            add(_node("Conv2DNchwc", ins, [by], ctx), step, [(0, by)])
            if w.shape[2:] == (1, 1) and list(pads) == [0, 0, 0, 0] and not nchw and ins[0] in pooled:
                pooled.add(by)
            blocked[y] = (by, o)
            plain_gone.add(y)
            replaced.update(node.input[1:])
            if act == "none" and readers.get(y) == 1 and y not in outs:
                convs[by] = len(new) - 1
            continue
        ins = [k for k in node.input if k]
        if getattr(fn, "__qualname__", "").startswith("_input_named") and ins and ins[0] in blocked:
            # An activation fused into the conv before it: its output is the conv's.
            for _, name in outputs:
                blocked[name] = blocked[ins[0]]
                plain_gone.add(name)
            continue
        if op in _BINARY and len(ins) == 2 and all(k in blocked for k in ins) \
                and blocked[ins[0]][1] == blocked[ins[1]][1] and len(outputs) == 1:
            a, r = (blocked[k][0] for k in ins)
            j = convs.get(a) if op == "Add" else None
            if j is None and op == "Add":
                j, a, r = convs.get(r), r, a
            if j is not None and made_at.get(r, len(new)) < j:  # the residual exists before the conv runs
                cctx, cfn, _ = new[j]
                y2 = outputs[0][1] + "::nchwc"
                fused = _node("Conv2DNchwc", [cctx.node.input[0], r] + list(cctx.node.input[2:]), [y2], cctx)
                new[j] = (fused, cfn, [(0, y2)])
                made_at[y2] = j
                del convs[a]
                blocked[outputs[0][1]] = (y2, blocked[ins[0]][1])
                plain_gone.add(outputs[0][1])
                if readers.get(outputs[0][1]) == 1 and outputs[0][1] not in outs:
                    residual_convs[y2] = j
                continue
        if op == "Relu" and len(ins) == 1 and ins[0] in blocked and blocked[ins[0]][0] in residual_convs \
                and len(outputs) == 1:
            # Conv -> Add -> Relu (a ResNet block's end): the Relu runs on the conv's registers after the residual.
            j = residual_convs.pop(blocked[ins[0]][0])
            cctx, cfn, couts = new[j]
            new[j] = (cctx, functools.partial(cfn.func, **{**cfn.keywords,
                                                           "attrs": {**cfn.keywords["attrs"], "activation": "relu"}}),
                      couts)
            blocked[outputs[0][1]] = blocked[ins[0]]
            plain_gone.add(outputs[0][1])
            continue
        if op == "Mul" and len(ins) == 2 and all(k in blocked for k in ins) and len(outputs) == 1 \
                and blocked[ins[0]][1] == blocked[ins[1]][1] and (blocked[ins[0]][0] in pooled) != (
                    blocked[ins[1]][0] in pooled) and runs_scaled(outputs[0][1]):
            a, sc = (blocked[k][0] for k in ins)
            if a in pooled:
                a, sc = sc, a
            # The conv reading it multiplies its input channels (a Mul step only if something else must read it).
            scaled[outputs[0][1]] = (a, sc, ctx, fn, {k: blocked[k][0] for k in ins}, blocked[ins[0]][1])
            continue
        if (op in _UNARY and ins and ins[0] in blocked and len(outputs) == 1) or (
                op in _BINARY and len(ins) == 2 and all(k in blocked for k in ins)
                and blocked[ins[0]][1] == blocked[ins[1]][1] and len(outputs) == 1):
            c = blocked[ins[0]][1]
            nctx = _copy(ctx, {k: blocked[k][0] for k in ins if k in blocked})
            add(nctx, fn, [(0, nctx.node.output[0])])
            if op in _UNARY and blocked[ins[0]][0] in pooled:
                pooled.add(nctx.node.output[0])
            blocked[outputs[0][1]] = (nctx.node.output[0], c)
            plain_gone.add(outputs[0][1])
            continue
        if op == "MaxPool" and ins and ins[0] in blocked and len(outputs) == 1 \
                and (plan := _pool_plan(ctx, shapes, block)) is not None:
            # A pixel's channels are one vector: no reorder around the pool (and two threads over its rows).
            by = outputs[0][1] + "::nchwc"
            add(_node("MaxPool2DNchwc", [blocked[ins[0]][0]], [by], ctx), functools.partial(_max_pool, attrs=plan),
                [(0, by)])
            blocked[outputs[0][1]] = (by, blocked[ins[0]][1])
            plain_gone.add(outputs[0][1])
            continue
        if op == "Concat" and len(ins) >= 2 and all(k in blocked for k in ins) and len(outputs) == 1 \
                and ctx.attr("axis", 1) in (1, -3) and all(blocked[k][1] % block == 0 for k in ins[:-1]) \
                and (parts := _concat_convs(ins, blocked, new, made_at, readers, outs)) is not None:
            # Dense convs of one blocked input, each read only here: one step writing each into its blocks.
            y2 = outputs[0][1] + "::nchwc"
            first = new[parts[0]][0]
            kws = [new[j][1].keywords for j in parts]
            attrs = dict(filter_shapes=[d for kw in kws for d in kw["attrs"]["filter_shape"]],
                         strides=[d for kw in kws for d in kw["attrs"]["strides"]],
                         pads=[d for kw in kws for d in kw["attrs"]["pads"]],
                         dilations=[d for kw in kws for d in kw["attrs"]["dilations"]],
                         block=block, activation=kws[0]["attrs"]["activation"])
            step = functools.partial(_conv_concat, filters=tuple(kw["filt"] for kw in kws),
                                     bias=np.concatenate([kw["bias"] for kw in kws]), attrs=attrs)
            for j in parts:
                convs.pop(new[j][2][0][1], None)
                new[j] = None
            add(_node("Conv2DNchwcConcat", [first.node.input[0]], [y2], ctx), step, [(0, y2)])
            blocked[outputs[0][1]] = (y2, sum(blocked[k][1] for k in ins))
            plain_gone.add(outputs[0][1])
            continue
        if op == "Concat" and len(ins) >= 2 and all(k in blocked for k in ins) and len(outputs) == 1 \
                and ctx.attr("axis", 1) == 1 and all(blocked[k][1] % block == 0 for k in ins[:-1]):
            # Along the channels, whole blocks: the same Concat on axis 1 of the 5-D values (the last input's
            # padding lanes end up last, where the result's are).
            nctx = _copy(ctx, {k: blocked[k][0] for k in ins})
            add(nctx, fn, [(0, nctx.node.output[0])])
            blocked[outputs[0][1]] = (nctx.node.output[0], sum(blocked[k][1] for k in ins))
            plain_gone.add(outputs[0][1])
            continue
        if op == "GlobalAveragePool" and ins and ins[0] in blocked and len(outputs) == 1:
            by = outputs[0][1] + "::nchwc"
            add(_node("GlobalAveragePoolNchwc", [blocked[ins[0]][0]], [by], ctx),
                functools.partial(_global_avg, block=block), [(0, by)])
            blocked[outputs[0][1]] = (by, blocked[ins[0]][1])
            pooled.add(by)
            plain_gone.add(outputs[0][1])
            continue
        for k in ins:  # a reader outside the layout: the plain value, once
            if k in scaled:
                unscale(k)
            if k in plain_gone:
                materialize(k)
        add(ctx, fn, outputs)
    for name in list(scaled):
        unscale(name)
    for name in program.outputs:
        if name in plain_gone:
            materialize(name)
    program.steps = [st for st in new if st is not None]
    _ops_conv._drop_unread(program, replaced)
