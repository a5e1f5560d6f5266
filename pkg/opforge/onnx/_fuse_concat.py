"""Concat of packed convolutions over one input, with no Concat (issue 23).

A SqueezeNet fire module ends in Concat([relu(conv1x1(s)), relu(conv3x3(s))],
axis=1): both convolutions read the same input, and in NCHW a channel slice
of one image is contiguous, so each can write straight into its slice of the
Concat's output (Conv2DPackedConcat) instead of into a tensor of its own that
the Concat then copies (~0.46 ms of SqueezeNet's 17 ms at batch 1).

Runs after the filters are packed (_pack_conv.pack_filters). A Concat is
fused only when every input is a packed Conv step (or an activation already
fused into one, which passes its output through) that nothing else reads,
and all of them read the same input and end in the same activation; its
Conv steps and their pass-through steps go, and the Concat's step runs
them all. OPFORGE_ONNX_FUSE_CONCAT=0 turns it off.
"""
import functools
import os

import numpy as np


def _concat_axis(ctx):
    """The Concat's axis attr (None when absent)."""
    for a in ctx.node.attribute:
        if a.name == "axis":
            return a.i
    return None


def _packed_conv(step):
    """(blob, filter shape, activation) of a packed, residual-free Conv step, else None."""
    from opforge.onnx import _ops_conv
    fn = step[1]
    if not isinstance(fn, functools.partial) or fn.func is not _ops_conv._conv:
        return None
    kw = fn.keywords
    if kw.get("packed") is None or kw.get("residual"):
        return None
    return kw["packed"][0], kw["packed"][1], kw.get("activation", "none")


def _initializer(name, program, steps, made_by):
    """The initializer whose value `name` is (through Identity nodes: the exporter shares equal biases so), else None."""
    for _ in range(8):
        if name in program.initializers:
            return name
        i = made_by.get(name)
        if i is None or steps[i][0].node.op_type != "Identity" or len(steps[i][0].node.input) != 1:
            return None
        name = steps[i][0].node.input[0]
    return None


def fuse(program):
    """Rewrites program.steps: each fusable Concat of packed convs becomes one Conv2DPackedConcat step."""
    if os.environ.get("OPFORGE_ONNX_FUSE_CONCAT", "1") == "0":
        return
    from opforge.onnx import _node, _ops_conv
    steps, outs = program.steps, set(program.outputs)
    readers, made_by = _ops_conv._readers_and_makers(steps)
    drop, replace, old_biases = set(), {}, set()
    for k, (cctx, _, couts) in enumerate(steps):
        node = cctx.node
        if (node.op_type != "Concat" or _concat_axis(cctx) not in (1, -3) or len(node.input) < 2
                or len(node.output) != 1):
            continue
        convs, gone, ok = [], [], True
        for name in node.input:
            # The value, traced back through pass-through steps (fused activations) to its Conv.
            chain, v = [], name
            while ok:
                i = made_by.get(v)
                if not name or i is None or v in outs or readers.get(v) != [chain[-1] if chain else k]:
                    ok = False
                    break
                passes = getattr(steps[i][1], "passes", None)
                chain.append(i)
                if passes is None:
                    break
                v = passes
            if not ok:
                break
            conv = _packed_conv(steps[chain[-1]])
            if conv is None or len(steps[chain[-1]][0].node.output) != 1:
                ok = False
                break
            convs.append((steps[chain[-1]][0], conv))
            gone += chain
        if not ok or len(set(gone)) != len(gone):
            continue
        x = convs[0][0].node.input[0]
        acts = {act for _, (_, _, act) in convs}
        biases = [_initializer(c.node.input[2], program, steps, made_by) if len(c.node.input) > 2 and c.node.input[2]
                  else "" for c, _ in convs]
        if len(acts) != 1 or any(c.node.input[0] != x for c, _ in convs) or None in biases:
            continue
        # One bias for all: each conv's, or its zeros (none at all: empty).
        bias = np.zeros(0, np.float32)
        if any(biases):
            bias = np.concatenate([program.initializers[b].astype(np.float32).reshape(-1) if b
                                   else np.zeros(ws[0], np.float32) for b, (_, (_, ws, _)) in zip(biases, convs)])
        bname = f"{node.output[0]}::concat_bias"
        program.initializers[bname] = bias
        new = type(node)()
        new.CopyFrom(node)
        del new.input[:]
        new.input.extend([x, bname])
        fused = _node.NodeCtx(new, cctx.version, {})
        fused.where = cctx.where
        fn = functools.partial(_run, convs=[(c, blob, ws) for c, (blob, ws, _) in convs], activation=acts.pop())
        replace[k] = (fused, fn, couts)
        drop.update(gone)
        old_biases.update(b for b in biases if b)
    if not replace:
        return
    program.steps = [replace.get(k, s) for k, s in enumerate(steps) if k not in drop]
    _ops_conv._drop_unread(program, old_biases)  # the fused bias replaces them where nothing else reads them


def _run(n, convs, activation):
    """The fused step: Conv2DPackedConcat over the input and each conv's packed filter and window."""
    from opforge import ops as P
    from opforge.onnx import _ops_conv
    from opforge.onnx._node import dtype_of
    x = n.input(0)
    shape = _ops_conv._spatial(n, x)
    if len(shape) != 4 or dtype_of(x) != np.float32:
        raise n.fail(f"X ({dtype_of(x)}, rank {len(shape)}) must be float32 of rank 4 like its convolutions' weights")
    fs, strides, pads, dil = [], [], [], []
    for c, _, ws in convs:
        kernel = c.attr("kernel_shape", list(ws[2:]))
        if list(kernel) != list(ws[2:]):
            raise c.fail(f"kernel_shape {kernel} does not match W's spatial dims {list(ws[2:])}")
        s, p, d = _ops_conv._window(c, shape, kernel)
        fs += list(ws)
        strides += s
        pads += p
        dil += d
    return P.conv2d_packed_concat(x, [blob for _, blob, _ in convs], n.input(1), filter_shapes=fs, strides=strides,
                                  pads=pads, dilations=dil, activation=activation)
