"""test_bad_input oracles for the NCHWc ops (cpp/ops/nchwc_ops.cc): numpy layouts and the reference conv."""
import numpy as np
from hypothesis import strategies as st

import vision_reference as ref
from opforge.testing.check.inputs import array, quiet
from packed_conv_oracles import panel_layout


def _blocks(c, b):
    return -(-c // b)


def _to(x, b):
    n, c, h, w = x.shape
    pad = np.zeros((n, _blocks(c, b) * b, h, w), x.dtype)
    pad[:, :c] = x
    return np.ascontiguousarray(pad.reshape(n, _blocks(c, b), b, h, w).transpose(0, 1, 3, 4, 2))


def _from(x, c):
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)[:, :c])


def _check_block(b):
    if b not in (8, 16):
        raise ValueError("attr 'block' must be 8 or 16")


def reorder_to_gen(draw, dtype):
    shape = (draw(st.integers(0, 2)), draw(st.integers(1, 20)), draw(st.integers(0, 4)), draw(st.integers(0, 4)))
    if draw(st.integers(0, 9)) == 0:
        shape = shape[:3]
    channels = draw(st.sampled_from([0, 0, shape[1], shape[1] + 1, -1]))  # 0: unchecked
    return (array(draw, dtype, shape),), {"block": draw(st.sampled_from([8, 16, 16, 4])), "channels": channels}


def reorder_to(x, block, channels=0):
    _check_block(block)
    if channels < 0:
        raise ValueError("attr 'channels' must be >= 0")
    if x.ndim != 4:
        raise ValueError("argument 'x' must be 4-D")
    if channels > 0 and x.shape[1] != channels:
        raise ValueError("argument 'x' has a different channel count")
    return _to(x, block)


def reorder_from_gen(draw, dtype):
    b = draw(st.sampled_from([8, 16]))
    c = draw(st.integers(1, 20))
    shape = (draw(st.integers(0, 2)), _blocks(c, b) + draw(st.sampled_from([0, 0, 0, 1])), draw(st.integers(0, 3)),
             draw(st.integers(0, 3)), b if draw(st.integers(0, 9)) else 8 + 16 - b)
    return (array(draw, dtype, shape),), {"channels": c if draw(st.integers(0, 9)) else 0, "block": b}


def reorder_from(x, channels, block):
    _check_block(block)
    if channels < 1 or x.ndim != 5 or x.shape[4] != block or x.shape[1] != _blocks(channels, block):
        raise ValueError("bad argument")
    return _from(x, channels)


def pool_gen(draw, dtype):
    b = draw(st.sampled_from([8, 16]))
    shape = (draw(st.integers(0, 2)), draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.integers(0, 3)),
             b if draw(st.integers(0, 9)) else 4)
    return (array(draw, dtype, shape, finite=True),), {"block": b}


def pool(x, block):
    if x.ndim != 5 or x.shape[4] != block:
        raise ValueError("bad argument")
    if x.size == 0 and x.shape[0] * x.shape[1] and x.shape[2] * x.shape[3] == 0:
        raise ValueError("no pixels")
    if x.shape[0] * x.shape[1] == 0:
        return np.zeros(x.shape[:2] + (1, 1, block), x.dtype)
    return x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(x.dtype)


def conv_gen(draw, dtype):
    b = draw(st.sampled_from([8, 16]))
    dw = draw(st.booleans())
    nchw = not dw and draw(st.booleans())
    c = draw(st.integers(1, 20))
    o = c if dw else draw(st.integers(1, 20))
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    k = draw(st.integers(1, min(h, w, 3)))
    n = draw(st.integers(0, 2))
    wt = array(draw, dtype, (o, 1 if dw else c, k, k), small=True, finite=True)
    groups = c if dw else 1
    from opforge.onnx._layout_nchwc import layout_bias, layout_filter
    filt = layout_filter(wt, groups, b, nchw)
    if draw(st.integers(0, 9)) == 0:  # a filter of the wrong length
        filt = np.concatenate([filt, np.ones(1, np.float32)])
    x = array(draw, dtype, (n, c, h, w), small=True, finite=True)
    bias = layout_bias(array(draw, dtype, (o,), small=True, finite=True), o, b) if draw(st.booleans()) else \
        np.zeros(0, np.float32)
    kw = {"filter_shape": [o, 1 if dw else c, k, k], "block": b, "groups": groups,
          "strides": [draw(st.integers(1, 2))] * 2, "pads": [draw(st.integers(0, 1))] * 4,
          "activation": draw(st.sampled_from(["none", "relu", "hardswish", "silu"])),
          "input_layout": "nchw" if nchw else "nchwc"}
    return (x if nchw else _to(x, b), filt, bias, np.zeros(0, np.float32), np.zeros(0, np.float32)), kw


def conv(x, filt, bias, residual, scale, filter_shape, block, groups, strides, pads, activation, input_layout,
         dilations=(1, 1)):
    """Every output lane, the padding ones too: the filter read back from its layout whole (the harness may
    have filled its padding), the input's lanes past C skipped by a dense conv, as the kernel does."""
    b, (o, cg, kh, kw) = block, filter_shape
    ob, nchw = _blocks(o, b), input_layout == "nchw"
    filt = np.asarray(filt, np.float64).reshape(-1)
    if groups != 1:
        want = ob * kh * kw * b
        unpack = lambda f: f.reshape(ob, kh, kw, b).transpose(0, 3, 1, 2).reshape(ob * b, 1, kh, kw)  # noqa: E731
    elif nchw:
        want = ob * kh * kw * cg * b
        unpack = lambda f: f.reshape(ob, kh, kw, cg, b).transpose(0, 4, 3, 1, 2).reshape(ob * b, cg, kh, kw)  # noqa
    else:
        ib = _blocks(cg, b)
        want = ob * ib * kh * kw * b * b
        unpack = lambda f: f.reshape(ob, ib, kh, kw, b, b).transpose(0, 5, 1, 4, 2, 3).reshape(  # noqa: E731
            ob * b, ib * b, kh, kw)[:, :cg]
    if filt.size != want:
        raise ValueError("argument 'filter' has the wrong length")
    wt = unpack(filt)
    if groups != 1:
        xp = np.asarray(x, np.float64).transpose(0, 1, 4, 2, 3).reshape(x.shape[0], ob * b, x.shape[2], x.shape[3])
        g = ob * b
    else:
        xp = np.asarray(x, np.float64) if nchw else _from(np.asarray(x, np.float64), cg)
        g = 1
    y = ref.conv2d(xp, wt, strides=strides, pads=pads, dilations=dilations, groups=g).astype(np.float64)
    z = y + (np.asarray(bias, np.float64).reshape(1, -1, 1, 1) if bias.size else 0.0)
    out = {"none": z, "relu": np.maximum(z, 0), "silu": z / (1 + np.exp(-z)),
           "hardswish": z * np.clip(z / 6 + 0.5, 0, 1)}[activation]
    return _to(out, b).astype(np.float32)


def max_pool_gen(draw, dtype):
    b = draw(st.sampled_from([8, 16]))
    shape = (draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6)),
             b if draw(st.integers(0, 9)) else 4)
    k = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    pads = [draw(st.integers(0, 1)) for _ in range(4)]
    return (array(draw, dtype, shape, finite=True),), {
        "ksize": k, "block": b, "strides": [draw(st.integers(1, 2)), draw(st.integers(1, 2))], "pads": pads,
        "ceil_mode": draw(st.booleans())}


def max_pool(x, ksize, block, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), ceil_mode=False):
    """MaxPool2D's rule on each lane (the padding lanes too), as ref.max_pool2d over the planes."""
    if x.ndim != 5 or x.shape[4] != block:
        raise ValueError("bad argument")
    n, cb, h, w, b = x.shape
    plain = np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3)).reshape(n, cb * b, h, w)
    y = ref.max_pool2d(plain, list(ksize), list(strides), list(pads), list(dilations), ceil_mode)
    return np.ascontiguousarray(y.reshape(n, cb, b, *y.shape[2:]).transpose(0, 1, 3, 4, 2))


def conv_concat_gen(draw, dtype):
    b = draw(st.sampled_from([8, 16]))
    c, h, w, n = draw(st.integers(1, 20)), draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(0, 2))
    from opforge.onnx._layout_nchwc import layout_bias, layout_filter
    ks = [1, draw(st.integers(1, min(h, w, 3)))]
    os_ = [draw(st.integers(1, 20)) for _ in ks]
    filts = [layout_filter(array(draw, dtype, (o, c, k, k), small=True, finite=True), 1, b) for o, k in zip(os_, ks)]
    bias = np.concatenate([layout_bias(array(draw, dtype, (o,), small=True, finite=True), o, b) for o in os_]) \
        if draw(st.booleans()) else np.zeros(0, np.float32)
    x = _to(array(draw, dtype, (n, c, h, w), small=True, finite=True), b)
    # Each k x k filter padded to keep the size ("same"), unless drawn otherwise.
    same = draw(st.integers(0, 9)) != 0
    pads = [p for k in ks for p in ([(k - 1) // 2, (k - 1) // 2, k // 2, k // 2] if same else [0, 0, 0, 0])]
    return (x, filts, bias), {"filter_shapes": [d for o, k in zip(os_, ks) for d in (o, c, k, k)],
                              "strides": [1, 1] * 2, "pads": pads, "dilations": [1, 1] * 2, "block": b,
                              "activation": draw(st.sampled_from(["none", "relu"]))}


def conv_concat(x, filters, bias, filter_shapes, strides, pads, dilations, block, activation="none"):
    """Each conv through the Conv2DNchwc oracle, concatenated along the blocks."""
    outs, off = [], 0
    for i, f in enumerate(filters):
        fs = list(filter_shapes[4 * i:4 * i + 4])
        ob = _blocks(fs[0], block)
        bi = bias[off * block:(off + ob) * block] if bias.size else bias
        if bias.size and bias.size != sum(_blocks(filter_shapes[4 * j], block) for j in range(len(filters))) * block:
            raise ValueError("bad bias")
        outs.append(conv(x, f, bi, np.zeros(0, np.float32), np.zeros(0, np.float32), fs, block, 1,
                         strides[2 * i:2 * i + 2], pads[4 * i:4 * i + 4], activation, "nchwc",
                         dilations[2 * i:2 * i + 2]))
        off += ob
    if len({o.shape[2:4] for o in outs}) != 1:
        raise ValueError("sizes differ")
    return np.concatenate(outs, axis=1)


def block_size_gen(draw, dtype):
    return (), {}


def block_size():
    return np.int64(16 if panel_layout() == "avx512" else 8)


NCHWC_ORACLES = {
    "ReorderToNchwc": (reorder_to_gen, quiet(reorder_to)),
    "ReorderFromNchwc": (reorder_from_gen, quiet(reorder_from)),
    "GlobalAveragePoolNchwc": (pool_gen, quiet(pool)),
    "Conv2DNchwc": (conv_gen, quiet(conv)),
    "NchwcBlockSize": (block_size_gen, block_size),
    "MaxPool2DNchwc": (max_pool_gen, quiet(max_pool)),
    "Conv2DNchwcConcat": (conv_concat_gen, quiet(conv_concat)),
}
