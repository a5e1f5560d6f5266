"""Constant float32 Conv filters packed once per imported Program (issue 23).

At import, each Conv whose weight is a float32 4-D initializer (one group)
gets its filter packed once (PackConv2DFilter) and its step bound to that
pack: the eager path and every compiled graph read the same copy, nothing
is repacked per run. An initializer that only such convs read is then
dropped from Program.initializers, so the model's weights are not kept
beside their packed copies.

The Winograd transform (4x the 3x3 filter) is stored only where the call
may take that route: from the static input shapes (ONNX shape inference on
a copy of the graph without the weights' data), the same test as
WinogradApplies; an unknown size counts as possible. Where every call is
certain to take it (all dims static), the transform is stored alone, without
the GEMM panels.
"""
import ctypes
import functools
import os

import numpy as np

# A Winograd F(4x4, 3x3) convolution needs at least this many 4x4 output
# tiles in a call (cpp/kernels/conv/winograd.cc, kMinTiles).
WINOGRAD_MIN_TILES = 32


def winograd_possible(shape, kernel, strides, pads, dil, o, c):
    """Whether Conv2DPacked may take the Winograd route for input dims `shape` (None: unknown)."""
    if not (list(kernel) == [3, 3] and list(strides) == [1, 1] and list(dil) == [1, 1] and o >= 16 and c >= 16):
        return False
    b, h, w = shape[0], shape[2], shape[3]
    if h is None or w is None:
        return True
    oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    tiles = ((oh + 3) // 4) * ((ow + 3) // 4) * (b if b is not None else WINOGRAD_MIN_TILES)
    return min(oh, ow) >= 8 and tiles >= WINOGRAD_MIN_TILES


# Down to this many tiles, Winograd with its transform in the column layout
# (winograd.cc, kMinColumnTiles): batch 1 at 14x14.
WINOGRAD_MIN_COLUMN_TILES = 16


def winograd_columns_pay(shape, kernel, strides, pads, dil, o, c):
    """Static input dims whose calls have 16 to 31 output tiles (ResNet-18's 14x14 3x3 layers at batch 1): the
    filter's Winograd transform is stored as column panels (PackConv2DFilter winograd=True, columns=True), and
    those calls take Winograd, which the usual layout does not pay for below 32 tiles (one thread: 1.83 ms
    against onnxruntime's 2.3 and im2col's ~2.4)."""
    if not (list(kernel) == [3, 3] and list(strides) == [1, 1] and list(dil) == [1, 1] and o >= 16 and c >= 16):
        return False
    b, h, w = shape[0], shape[2], shape[3]
    if b is None or h is None or w is None or os.environ.get("OPFORGE_CONV_COLUMNS", "1") == "0":
        return False
    oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    tiles = ((oh + 3) // 4) * ((ow + 3) // 4) * b
    return min(oh, ow) >= 8 and WINOGRAD_MIN_COLUMN_TILES <= tiles < WINOGRAD_MIN_TILES


def columns_pay(shape, kernel, strides, pads, dil, o, c):
    """Whether the filter's panels go in the column layout (PackConv2DFilter columns=True): at batch 1 with few
    output pixels, whose 32-wide register tiles the usual layout fills badly (7x7: 49 of 64 columns). Measured
    per layer (one thread, AVX-512): ResNet-18's 7x7 and 14x14 3x3 layers 1.06-1.21x, EfficientNet's 7x7 1x1
    layers 1.12x; shallow (K < 128) or 14x14 1x1 layers lose (0.89-0.96x: the per-call transposes).
    At any batch, a product of at most 16 columns (an SE block's 1x1 convs: one pixel per image, the batch's
    images side by side) takes it at any depth: EfficientNet's 48 -> 1152 at batch 1 35 -> 6 us.
    OPFORGE_CONV_COLUMNS=0 keeps the usual layout everywhere."""
    b, h, w = shape[0], shape[2], shape[3]
    if h is None or w is None or os.environ.get("OPFORGE_CONV_COLUMNS", "1") == "0":
        return False
    oh = (h + pads[0] + pads[2] - dil[0] * (kernel[0] - 1) - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - dil[1] * (kernel[1] - 1) - 1) // strides[1] + 1
    p, k = oh * ow, c * kernel[0] * kernel[1]
    if p <= 0:
        return False
    waste_o = 1 - o / (-(-o // 32) * 32)
    # The GEMM's columns per call: all images' at once below 256 pixels each (packed_conv_kernels.cc).
    n = p if b == 1 else b * p if b is not None and p < 256 else None
    if n is not None and n <= 16:
        return waste_o < 1 - n / 32
    if b != 1:
        return False
    waste_p = 1 - p / (-(-p // 32) * 32)
    return waste_o < waste_p and ((waste_p >= 0.2 and k >= 128) or (waste_p >= 0.1 and k >= 1024))


def _static_shapes(model, initializers):
    """Value name -> dims (None where unknown) from ONNX shape inference over the graph without weight data."""
    try:
        import onnx
        from onnx import helper
        graph = model.graph
        given = {vi.name for vi in graph.input}
        extra = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
                 for name, v in initializers.items() if name not in given]
        light = helper.make_graph(list(graph.node), "shapes", list(graph.input) + extra, list(graph.output))
        model = helper.make_model(light, opset_imports=list(model.opset_import))
        model.ir_version = 8
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # shape inference is an optimization only: unknown sizes keep every route
        return {}
    out = {}
    for vi in list(inferred.value_info) + list(inferred.input):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    return out


_WINOGRAD_ACTIVE: list[bool] = []  # the probe's answer, once


def _winograd_active():
    """Whether Conv2DPacked takes the Winograd route where it may (not in a build without it, nor under
    OPFORGE_CONV_WINOGRAD=0): probed once on a blob of the transform alone, which it refuses otherwise."""
    if not _WINOGRAD_ACTIVE:
        _WINOGRAD_ACTIVE.append(_probe_winograd())
    return _WINOGRAD_ACTIVE[0]


def _probe_winograd():
    from opforge import errors, ops as P
    from opforge.onnx import _compile
    with _compile.eager():
        blob = P.pack_conv2d_filter(np.zeros((16, 16, 3, 3), np.float32), panels=False)
        try:  # 2 images of 16x16 outputs: 32 tiles
            P.conv2d_packed(np.zeros((2, 16, 16, 16), np.float32), blob, np.zeros(0, np.float32),
                            filter_shape=[16, 16, 3, 3], pads=[1, 1, 1, 1])
        except errors.InvalidArgumentError:
            return False
    return True


def _release_freed():
    """Returns the heap's free pages to the system (glibc): numpy's weights live in the malloc heap, the blobs in
    mmap'd pages (cpp/framework/allocator.cc), so a freed weight's memory would otherwise stay resident."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def pack_filters(program, model):
    """Binds each packable Conv step of `program` to its filter packed once; drops weights only they read."""
    if os.environ.get("OPFORGE_ONNX_PACK_CONV", "1") == "0":
        return
    from opforge import errors, ops as P
    from opforge.onnx import _compile, _ops_conv
    inits = program.initializers
    readers = {}
    for i, (ctx, _, _) in enumerate(program.steps):
        for k, name in enumerate(ctx.node.input):
            readers.setdefault(name, []).append((i, k))
    todo = []
    for i, (ctx, fn, _) in enumerate(program.steps):
        base = fn.func if isinstance(fn, functools.partial) else fn
        node = ctx.node
        if (base is not _ops_conv._conv or len(node.input) < 2 or node.input[1] not in inits
                or ctx.attr("group", 1) != 1):
            continue
        w = inits[node.input[1]]
        if w.dtype != np.float32 or w.ndim != 4 or 0 in w.shape:
            continue
        todo.append(i)
    if not todo:
        return
    shapes = getattr(program, "static_shapes", None) or _static_shapes(model, inits)  # from before the NCHWc pass
    # A weight goes as soon as its last reader is packed (the peak holds one of the two copies, not both); only
    # one that nothing else reads (no other input position, no graph output).
    graph_outputs = set(program.outputs)
    packed_reads = {(i, 1) for i in todo}
    left = {}
    for i in todo:
        name = program.steps[i][0].node.input[1]
        if name not in graph_outputs and all(r in packed_reads for r in readers[name]):
            left[name] = len(readers[name])
    for i in todo:
        ctx, fn, outputs = program.steps[i]
        name = ctx.node.input[1]
        w = inits[name]
        shape = shapes.get(ctx.node.input[0])
        if shape is None or len(shape) != 4:
            shape = (None,) * 4
        try:
            strides, pads, dil = _ops_conv._window(ctx, shape, list(w.shape[2:]))
        except errors.OpError:  # auto_pad SAME of unknown size, bad attrs: the converter decides (and raises) per run
            strides, pads, dil = ctx.attr("strides", [1, 1]), [1, 1, 1, 1], ctx.attr("dilations", [1, 1])
        wino = winograd_possible(shape, w.shape[2:], strides, pads, dil, w.shape[0], w.shape[1])
        # Every call of a static shape takes the Winograd route: its transform alone, no GEMM panels.
        alone = wino and None not in shape and _winograd_active()
        columns = not wino and columns_pay(shape, w.shape[2:], strides, pads, dil, w.shape[0], w.shape[1])
        if not wino and _winograd_active() and winograd_columns_pay(shape, w.shape[2:], strides, pads, dil,
                                                                    w.shape[0], w.shape[1]):
            wino = columns = True  # the transform as column panels, beside the (column) GEMM panels
        try:
            with _compile.eager():  # this thread: its freed weights' memory is what the blob reuses
                blob = P.pack_conv2d_filter(np.ascontiguousarray(w), winograd=bool(wino), panels=not alone,
                                            columns=bool(columns))
        except errors.OpError:  # e.g. a filter too large to pack: this node runs unpacked (and keeps its weight)
            left.pop(name, None)
            continue
        kwargs = dict(fn.keywords) if isinstance(fn, functools.partial) else {}
        kwargs["packed"] = (blob, tuple(int(d) for d in w.shape))
        program.steps[i] = (ctx, functools.partial(_ops_conv._conv, **kwargs), outputs)
        if name in left:
            left[name] -= 1
            if left[name] == 0:
                del inits[name], left[name]
                _release_freed()
