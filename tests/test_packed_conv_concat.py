"""Conv2DPackedConcat: packed-filter convolutions of one input, each writing its channel slice of one output,
checked against numpy (each conv, then np.concatenate) over shapes, strides, pads and every route (GEMM, im2col,
batched small images, column panels, Winograd in both layouts); bad attrs raise naming the argument; the ONNX
importer fuses a Concat of convs (SqueezeNet's fire module) and matches onnxruntime, and leaves a Concat alone
whose inputs something else also reads."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import opforge as of
from opforge import ops as P
from vision_reference import conv2d as np_conv2d

ACTS = {"none": lambda v: v, "relu": lambda v: np.maximum(v, 0)}


def _reference(x, convs, bias, act):
    outs, off = [], 0
    for w, s, p, d in convs:
        y = np_conv2d(x.astype(np.float64), w.astype(np.float64), strides=s, pads=p, dilations=d)
        if bias is not None:
            y = y + bias[off:off + w.shape[0]].reshape(1, -1, 1, 1)
        off += w.shape[0]
        outs.append(ACTS[act](y))
    return np.concatenate(outs, axis=1)


def _run(x, convs, bias, act, winograd=True, columns=False):
    blobs = [P.pack_conv2d_filter(w, winograd=winograd, columns=columns) for w, _, _, _ in convs]
    return P.conv2d_packed_concat(
        x, blobs, bias if bias is not None else np.zeros(0, np.float32),
        filter_shapes=[d for w, _, _, _ in convs for d in w.shape], strides=[v for _, s, _, _ in convs for v in s],
        pads=[v for _, _, p, _ in convs for v in p], dilations=[v for _, _, _, d in convs for v in d],
        activation=act).numpy()


def _check(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))


def _fire(n, c, h, o1, o3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w1 = (rng.standard_normal((o1, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    w3 = (rng.standard_normal((o3, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(o1 + o3).astype(np.float32)
    return x, [(w1, [1, 1], [0, 0, 0, 0], [1, 1]), (w3, [1, 1], [1, 1, 1, 1], [1, 1])], b


# (batch, channels, size, 1x1 outputs, 3x3 outputs): SqueezeNet's fire modules' routes.
@pytest.mark.parametrize("case", [
    (1, 16, 54, 64, 64),   # Winograd (196 tiles) beside a pointwise GEMM
    (2, 32, 13, 40, 48),   # Winograd over two images; batched small images for the 1x1
    (1, 64, 13, 24, 40),   # 16 tiles: im2col, or Winograd as column panels
    (3, 5, 9, 7, 3),       # fewer channels than Winograd takes, fewer outputs than a register tile
])
def test_fire_module_routes(case):
    x, convs, b = _fire(*case)
    want = _reference(x, convs, b, "relu")
    for winograd, columns in ((True, False), (False, False), (False, True), (True, True)):
        _check(_run(x, convs, b, "relu", winograd, columns), want)
    _check(_run(x, convs, None, "none"), _reference(x, convs, None, "none"))


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_matches_numpy_over_windows(data):
    n = data.draw(st.integers(1, 3))
    c = data.draw(st.integers(1, 6))
    h, w = data.draw(st.integers(4, 12)), data.draw(st.integers(4, 12))
    s = [data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))]
    d = [data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))]
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    # The first conv sets the output size; each further one gets a kernel and the pads that reach the same size.
    convs = []
    for i in range(data.draw(st.integers(1, 3))):
        kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
        if i == 0:
            p = [data.draw(st.integers(0, 3)) for _ in range(4)]
            eff = [(kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1]
            if eff[0] > h + p[0] + p[2] or eff[1] > w + p[1] + p[3]:
                p = [2, 2, 2, 2]
            oh = (h + p[0] + p[2] - eff[0]) // s[0] + 1
            ow = (w + p[1] + p[3] - eff[1]) // s[1] + 1
        else:
            eff = [(kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1]
            need = [(oh - 1) * s[0] + eff[0] - h, (ow - 1) * s[1] + eff[1] - w]  # pads summed per axis
            if min(need) < 0:
                continue
            p = [need[0] // 2, need[1] // 2, need[0] - need[0] // 2, need[1] - need[1] // 2]
        o = data.draw(st.integers(1, 20))
        wt = rng.standard_normal((o, c, kh, kw)).astype(np.float32)
        convs.append((wt, s, p, d))
    total = sum(wt.shape[0] for wt, _, _, _ in convs)
    b = rng.standard_normal(total).astype(np.float32)
    act = data.draw(st.sampled_from(["none", "relu"]))
    _check(_run(x, convs, b, act), _reference(x, convs, b, act))


def test_bad_input_names_the_argument():
    x, convs, b = _fire(1, 8, 10, 4, 4)
    blobs = [P.pack_conv2d_filter(w) for w, _, _, _ in convs]
    kw = dict(filter_shapes=[4, 8, 1, 1, 4, 8, 3, 3], strides=[1, 1, 1, 1], dilations=[1, 1, 1, 1])
    with pytest.raises(of.errors.InvalidArgumentError, match="one size"):  # 3x3 without pads: 8x8 beside 10x10
        P.conv2d_packed_concat(x, blobs, b, pads=[0] * 8, **kw)
    with pytest.raises(of.errors.InvalidArgumentError, match="pads"):
        P.conv2d_packed_concat(x, blobs, b, pads=[0] * 4, **kw)
    with pytest.raises(of.errors.InvalidArgumentError, match="bias"):
        P.conv2d_packed_concat(x, blobs, b[:5], pads=[0, 0, 0, 0, 1, 1, 1, 1], **kw)
    with pytest.raises(of.errors.InvalidArgumentError, match="packed"):  # the blobs swapped: 3x3 read as 1x1
        P.conv2d_packed_concat(x, blobs[::-1], b, pads=[0, 0, 0, 0, 1, 1, 1, 1], **kw)
    with pytest.raises(of.errors.InvalidArgumentError, match="channels"):
        P.conv2d_packed_concat(x[:, :4], blobs, b, pads=[0, 0, 0, 0, 1, 1, 1, 1], **kw)


def _fire_model(c, h, o1, o3, extra_reader, seed=0):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((o1, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    w3 = (rng.standard_normal((o3, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w3, "w3"),
             numpy_helper.from_array(rng.standard_normal(o1).astype(np.float32), "b1"),
             numpy_helper.from_array(np.zeros(o3, np.float32), "b3")]
    nodes = [helper.make_node("Identity", ["b3"], ["b3i"]),  # as torch.onnx shares equal biases
             helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["x", "w3", "b3i"], ["c3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("Concat", ["r1", "r3"], ["y"], axis=1)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_reader:  # the 3x3 branch is read beside the Concat: both must stay
        nodes.append(helper.make_node("Sigmoid", ["r3"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "fire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, c, h, h])],
                          outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return onnx, m


@pytest.mark.parametrize("extra_reader", [False, True])
@pytest.mark.parametrize("batch,c,h,o1,o3", [(1, 16, 20, 24, 32), (2, 8, 7, 5, 6)])
def test_onnx_fire_module_matches_onnxruntime(batch, c, h, o1, o3, extra_reader):
    ort = pytest.importorskip("onnxruntime")
    import opforge.onnx
    _, m = _fire_model(c, h, o1, o3, extra_reader)
    x = np.random.default_rng(1).standard_normal((batch, c, h, h)).astype(np.float32)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})
    imported = opforge.onnx.import_model(m)
    ops = [op.type for op in imported.graph.get_operations()]
    assert ("Conv2DPackedConcat" in ops) != extra_reader and ("Concat" in ops) == extra_reader
    got = opforge.onnx.run(m, {"x": x})
    for g, w in zip(got, want):
        _check(np.asarray(g), w)
