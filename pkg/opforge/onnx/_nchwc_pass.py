"""The NCHWc layout pass (issue 23; _layout_nchwc.py says when a conv runs blocked and how values and filters are
laid out): one walk over an imported program's steps takes each maximal region of float32 convs, and the
elementwise operators, pools and concatenations between them, into the blocked layout, and leaves it
(ReorderFromNchwc) only where something outside the region reads a value. NchwcPass holds the walk's state;
each of its rules takes one step into the layout or declines it."""
import functools

import numpy as np

from opforge.onnx._layout_nchwc import block_size, intel_cpu, layout_bias, layout_filter, mixed_wins, mode

# ONNX operators that run unchanged on a blocked value (elementwise, one input).
_UNARY = frozenset({"Relu", "HardSwish", "HardSigmoid", "Sigmoid", "Clip", "Identity", "LeakyRelu"})
_BINARY = frozenset({"Add", "Mul"})


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
    """Runs the maximal NCHWc regions of `program`'s steps in the blocked layout (see _layout_nchwc's doc)."""
    how = mode()
    if how == "off":
        return
    if how == "auto" and not any(_is_depthwise(ctx, fn, program.initializers) for ctx, fn, _ in program.steps):
        if not intel_cpu():
            return
        how = "mixed"
    from opforge.onnx import _ops_conv, _pack_conv
    shapes = _pack_conv._static_shapes(model, program.initializers)
    # For pack_filters: without the weights this pass drops, ONNX shape inference would lose every size after
    # them, and the convs there would store a Winograd transform beside their panels (ResNet-18 b8: +150 MiB).
    program.static_shapes = shapes
    p = NchwcPass(program, how, block_size(), shapes)
    p.run()
    program.steps = [st for st in p.new if st is not None]
    _ops_conv._drop_unread(program, p.replaced)


class NchwcPass:
    """One walk over program.steps, building `new`: a step some rule takes runs blocked, any other step reads
    plain values (each blocked value it reads is reordered back once, where first needed)."""

    def __init__(self, program, how, block, shapes):
        self.how, self.block, self.shapes = how, block, shapes
        self.steps = program.steps
        self.outputs = program.outputs
        self.inits = dict(program.initializers)  # and the Identity copies exporters make of shared weights
        for ctx, _, _ in self.steps:
            if ctx.node.op_type == "Identity" and ctx.node.input and ctx.node.input[0] in self.inits:
                self.inits[ctx.node.output[0]] = self.inits[ctx.node.input[0]]
        self.readers = {}
        self.reader_steps = {}
        for ctx, fn, _ in self.steps:
            for k in ctx.node.input:
                self.readers[k] = self.readers.get(k, 0) + 1
                self.reader_steps.setdefault(k, []).append((ctx, fn))
        self.outs = set(program.outputs)
        self.blocked = {}   # plain name -> (its blocked value's name, channels)
        self.made_at = {}   # blocked name -> index in `new` of the step making it
        self.convs = {}     # blocked name of a conv's output (no activation) -> index of its step, for a residual Add
        self.residual_convs = {}  # blocked name of a conv + residual's output (no activation) -> its step, for a Relu
        self.new, self.replaced, self.plain_gone = [], set(), set()
        self.pooled = set()  # blocked names of [N, Cb, 1, 1, B] values (an SE block's pooled branch)
        self.scaled = {}     # plain name of an SE Mul's output -> (blocked x, blocked scale), for the conv reading it

    def run(self):
        rules = (self._conv, self._fused_activation, self._residual_add, self._residual_relu, self._se_mul,
                 self._elementwise, self._max_pool, self._concat_convs, self._concat, self._global_avg)
        for ctx, fn, outputs in self.steps:
            ins = [k for k in ctx.node.input if k]
            if not any(rule(ctx, fn, outputs, ins) for rule in rules):
                self._outside(ctx, fn, outputs, ins)
        for name in list(self.scaled):
            self._unscale(name)
        for name in self.outputs:
            if name in self.plain_gone:
                self._materialize(name)

    # -- bookkeeping

    def _add(self, ctx, fn, outputs):
        self.new.append((ctx, fn, outputs))
        for _, name in outputs:
            self.made_at[name] = len(self.new) - 1

    def _set_blocked(self, name, bname, channels):
        """Plain value `name` is now held blocked as `bname` only."""
        self.blocked[name] = (bname, channels)
        self.plain_gone.add(name)

    def _materialize(self, name):
        bname, c = self.blocked[name]
        like = self.new[self.made_at[bname]][0] if bname in self.made_at else self.steps[0][0]
        self._add(_node("ReorderFromNchwc", [bname], [name], like),
                  functools.partial(_reorder_from, channels=c, block=self.block), [(0, name)])
        self.plain_gone.discard(name)

    def _unscale(self, name):
        """An SE Mul whose conv did not take it: the blocked Mul after all."""
        _, _, mctx, mfn, names, c = self.scaled.pop(name)
        nctx = _copy(mctx, names)
        self._add(nctx, mfn, [(0, nctx.node.output[0])])
        self._set_blocked(name, nctx.node.output[0], c)

    def _all_blocked_same(self, ins, outputs):
        """Two blocked inputs of one channel count, one output."""
        b = self.blocked
        return len(ins) == 2 and all(k in b for k in ins) and b[ins[0]][1] == b[ins[1]][1] and len(outputs) == 1

    # -- where a conv runs blocked

    def _feeds_blocked(self, name):
        """Through one reader at a time (Relu, MaxPool), `name` reaches a conv the mixed layout runs blocked on a
        blocked input (SqueezeNet's stem -> pool -> squeeze; not ResNet's, whose pool feeds a conv and an Add)."""
        for _ in range(4):
            rs = self.reader_steps.get(name, [])
            if len(rs) != 1 or name in self.outs or len(rs[0][0].node.output) < 1:
                return False
            rctx, rfn = rs[0]
            if rctx.node.op_type in ("Relu", "MaxPool"):
                name = rctx.node.output[0]
                continue
            plan = _conv_plan(rctx, rfn, self.inits, self.shapes)
            out = self.shapes.get(rctx.node.output[0])
            px = _out_pixels(out)
            return plan is not None and plan[2] == 1 and rctx.node.input[0] == name \
                and plan[0].shape[1] >= self.block \
                and mixed_wins(plan[0], plan[3], px, True, self.block, plane=px // out[0] if px else None)
        return False

    def _runs_scaled(self, name):
        """The one reader of `name` is a conv the layout runs densely over an NCHWc input."""
        rs = self.reader_steps.get(name, [])
        if len(rs) != 1 or name in self.outs:
            return False
        plan = _conv_plan(rs[0][0], rs[0][1], self.inits, self.shapes)
        if plan is None or plan[2] != 1 or rs[0][0].node.input[0] != name:
            return False
        return self.how == "all" or plan[0].shape[2:] == (1, 1)

    def _plan(self, ctx, fn):
        """_conv_plan of a conv this pass's mode runs blocked, else None."""
        node = ctx.node
        plan = _conv_plan(ctx, fn, self.inits, self.shapes)
        if plan is not None and self.how == "auto":
            w, groups = plan[0], plan[2]
            if groups == 1 and w.shape[2:] != (1, 1) and not (w.shape[1] < self.block
                                                               and node.input[0] not in self.blocked):
                return None
        elif plan is not None and self.how == "mixed":
            out = self.shapes.get(node.output[0])
            px = _out_pixels(out)
            if plan[2] != 1 or not mixed_wins(
                    plan[0], plan[3], px, node.input[0] in self.blocked or node.input[0] in self.scaled, self.block,
                    plane=px // out[0] if px else None,
                    stem_feeds_blocked=plan[0].shape[1] < self.block and self._feeds_blocked(node.output[0])):
                return None
        return plan

    # -- the rules: each takes the step (and returns True) or leaves it

    def _conv(self, ctx, fn, outputs, ins):
        plan = self._plan(ctx, fn)
        if plan is None:
            return False
        block, node = self.block, ctx.node
        w, b, groups, strides, pads, dil, act = plan
        x, y = node.input[0], node.output[0]
        c, o = w.shape[1] * groups, w.shape[0]
        se = self.scaled.pop(x, None)
        nchw = se is None and x not in self.blocked and groups == 1 and c < block
        if se is None and x not in self.blocked and not nchw:
            bx = x + "::nchwc"
            self._add(_node("ReorderToNchwc", [x], [bx], ctx),
                      functools.partial(_reorder_to, block=block, channels=c), [(0, bx)])
            self.blocked[x] = (bx, c)
        attrs = dict(filter_shape=[int(d) for d in w.shape], block=block, groups=groups, strides=list(strides),
                     pads=list(pads), dilations=list(dil), activation=act,
                     input_layout="nchw" if nchw else "nchwc")
        step = functools.partial(_conv_step, filt=layout_filter(w, groups, block, nchw),
                                 bias=layout_bias(b, o, block), attrs=attrs)
        by = y + "::nchwc"
        cins = [x] if nchw else [se[0], "", se[1]] if se is not None else [self.blocked[x][0]]
        self._add(_node("Conv2DNchwc", cins, [by], ctx), step, [(0, by)])
        if w.shape[2:] == (1, 1) and list(pads) == [0, 0, 0, 0] and not nchw and cins[0] in self.pooled:
            self.pooled.add(by)
        self._set_blocked(y, by, o)
        self.replaced.update(node.input[1:])
        if act == "none" and self.readers.get(y) == 1 and y not in self.outs:
            self.convs[by] = len(self.new) - 1
        return True

    def _fused_activation(self, ctx, fn, outputs, ins):
        """An activation fused into the conv before it: its output is the conv's."""
        if not (getattr(fn, "__qualname__", "").startswith("_input_named") and ins and ins[0] in self.blocked):
            return False
        for _, name in outputs:
            self.blocked[name] = self.blocked[ins[0]]
            self.plain_gone.add(name)
        return True

    def _residual_add(self, ctx, fn, outputs, ins):
        """Conv -> Add of a residual made before the conv runs: the conv adds it in its epilogue."""
        if ctx.node.op_type != "Add" or not self._all_blocked_same(ins, outputs):
            return False
        a, r = (self.blocked[k][0] for k in ins)
        j = self.convs.get(a)
        if j is None:
            j, a, r = self.convs.get(r), r, a
        if j is None or self.made_at.get(r, len(self.new)) >= j:
            return False
        cctx, cfn, _ = self.new[j]
        y = outputs[0][1]
        y2 = y + "::nchwc"
        fused = _node("Conv2DNchwc", [cctx.node.input[0], r] + list(cctx.node.input[2:]), [y2], cctx)
        self.new[j] = (fused, cfn, [(0, y2)])
        self.made_at[y2] = j
        del self.convs[a]
        self._set_blocked(y, y2, self.blocked[ins[0]][1])
        if self.readers.get(y) == 1 and y not in self.outs:
            self.residual_convs[y2] = j
        return True

    def _residual_relu(self, ctx, fn, outputs, ins):
        """Conv -> Add -> Relu (a ResNet block's end): the Relu runs on the conv's registers after the residual."""
        if not (ctx.node.op_type == "Relu" and len(ins) == 1 and ins[0] in self.blocked
                and self.blocked[ins[0]][0] in self.residual_convs and len(outputs) == 1):
            return False
        j = self.residual_convs.pop(self.blocked[ins[0]][0])
        cctx, cfn, couts = self.new[j]
        attrs = {**cfn.keywords["attrs"], "activation": "relu"}
        self.new[j] = (cctx, functools.partial(cfn.func, **{**cfn.keywords, "attrs": attrs}), couts)
        self.blocked[outputs[0][1]] = self.blocked[ins[0]]
        self.plain_gone.add(outputs[0][1])
        return True

    def _se_mul(self, ctx, fn, outputs, ins):
        """A squeeze-and-excitation Mul (one input pooled to [N, Cb, 1, 1, B]) read by one conv: the conv
        multiplies its input channels (a Mul step only if something else must read it, _unscale)."""
        if not (ctx.node.op_type == "Mul" and self._all_blocked_same(ins, outputs)):
            return False
        a, sc = (self.blocked[k][0] for k in ins)
        if (a in self.pooled) == (sc in self.pooled) or not self._runs_scaled(outputs[0][1]):
            return False
        if a in self.pooled:
            a, sc = sc, a
        self.scaled[outputs[0][1]] = (a, sc, ctx, fn, {k: self.blocked[k][0] for k in ins}, self.blocked[ins[0]][1])
        return True

    def _elementwise(self, ctx, fn, outputs, ins):
        op = ctx.node.op_type
        unary = op in _UNARY and ins and ins[0] in self.blocked and len(outputs) == 1
        if not (unary or op in _BINARY and self._all_blocked_same(ins, outputs)):
            return False
        nctx = _copy(ctx, {k: self.blocked[k][0] for k in ins if k in self.blocked})
        self._add(nctx, fn, [(0, nctx.node.output[0])])
        if unary and self.blocked[ins[0]][0] in self.pooled:
            self.pooled.add(nctx.node.output[0])
        self._set_blocked(outputs[0][1], nctx.node.output[0], self.blocked[ins[0]][1])
        return True

    def _max_pool(self, ctx, fn, outputs, ins):
        """A pixel's channels are one vector: no reorder around the pool (and two threads over its rows)."""
        if not (ctx.node.op_type == "MaxPool" and ins and ins[0] in self.blocked and len(outputs) == 1):
            return False
        plan = _pool_plan(ctx, self.shapes, self.block)
        if plan is None:
            return False
        by = outputs[0][1] + "::nchwc"
        self._add(_node("MaxPool2DNchwc", [self.blocked[ins[0]][0]], [by], ctx),
                  functools.partial(_max_pool, attrs=plan), [(0, by)])
        self._set_blocked(outputs[0][1], by, self.blocked[ins[0]][1])
        return True

    def _blocked_concat(self, ctx, outputs, ins, axes):
        """A Concat along the channels of blocked values, each but the last whole blocks."""
        return ctx.node.op_type == "Concat" and len(ins) >= 2 and all(k in self.blocked for k in ins) \
            and len(outputs) == 1 and ctx.attr("axis", 1) in axes \
            and all(self.blocked[k][1] % self.block == 0 for k in ins[:-1])

    def _concat_convs(self, ctx, fn, outputs, ins):
        """Dense convs of one blocked input, each read only here: one step writing each into its blocks."""
        if not self._blocked_concat(ctx, outputs, ins, (1, -3)):
            return False
        parts = _concat_convs(ins, self.blocked, self.new, self.made_at, self.readers, self.outs)
        if parts is None:
            return False
        y2 = outputs[0][1] + "::nchwc"
        first = self.new[parts[0]][0]
        kws = [self.new[j][1].keywords for j in parts]
        attrs = dict(filter_shapes=[d for kw in kws for d in kw["attrs"]["filter_shape"]],
                     strides=[d for kw in kws for d in kw["attrs"]["strides"]],
                     pads=[d for kw in kws for d in kw["attrs"]["pads"]],
                     dilations=[d for kw in kws for d in kw["attrs"]["dilations"]],
                     block=self.block, activation=kws[0]["attrs"]["activation"])
        step = functools.partial(_conv_concat, filters=tuple(kw["filt"] for kw in kws),
                                 bias=np.concatenate([kw["bias"] for kw in kws]), attrs=attrs)
        for j in parts:
            self.convs.pop(self.new[j][2][0][1], None)
            self.new[j] = None
        self._add(_node("Conv2DNchwcConcat", [first.node.input[0]], [y2], ctx), step, [(0, y2)])
        self._set_blocked(outputs[0][1], y2, sum(self.blocked[k][1] for k in ins))
        return True

    def _concat(self, ctx, fn, outputs, ins):
        """Along the channels, whole blocks: the same Concat on axis 1 of the 5-D values (the last input's
        padding lanes end up last, where the result's are)."""
        if not self._blocked_concat(ctx, outputs, ins, (1,)):
            return False
        nctx = _copy(ctx, {k: self.blocked[k][0] for k in ins})
        self._add(nctx, fn, [(0, nctx.node.output[0])])
        self._set_blocked(outputs[0][1], nctx.node.output[0], sum(self.blocked[k][1] for k in ins))
        return True

    def _global_avg(self, ctx, fn, outputs, ins):
        if not (ctx.node.op_type == "GlobalAveragePool" and ins and ins[0] in self.blocked and len(outputs) == 1):
            return False
        by = outputs[0][1] + "::nchwc"
        self._add(_node("GlobalAveragePoolNchwc", [self.blocked[ins[0]][0]], [by], ctx),
                  functools.partial(_global_avg, block=self.block), [(0, by)])
        self._set_blocked(outputs[0][1], by, self.blocked[ins[0]][1])
        self.pooled.add(by)
        return True

    def _outside(self, ctx, fn, outputs, ins):
        """A reader outside the layout: the plain value, once."""
        for k in ins:
            if k in self.scaled:
                self._unscale(k)
            if k in self.plain_gone:
                self._materialize(k)
        self._add(ctx, fn, outputs)
