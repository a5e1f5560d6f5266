"""PackConv2DFilter / Conv2DPacked: a constant conv filter packed once (GEMM panels, and the Winograd transform
of a 3x3 filter), checked against FusedConv2D and numpy; hostile blobs raise; the ONNX importer uses them."""
import numpy as np
import pytest

import opforge as of
from opforge import ops as P
from packed_conv_oracles import MR, pack_conv, panel_layout
from packed_oracles import HEADER, header

# (batch, channels, size, out channels, kernel, stride, pad, dilation): every route of the kernel.
CASES = [
    (1, 32, 20, 48, 3, 1, 1, 1),   # 25 tiles, under Winograd's 32: im2col with a stored transform unused
    (2, 32, 20, 48, 3, 1, 1, 1),   # Winograd over two images
    (2, 32, 16, 144, 3, 1, 1, 1),  # Winograd with its transform stored as GEMM panels (over 128 outputs)
    (3, 24, 9, 40, 3, 1, 1, 1),    # small outputs in a batch: one GEMM over all images
    (1, 40, 15, 70, 3, 2, 1, 1),   # phase planes over two depth blocks (K = 360), rows past a whole register tile
    (2, 20, 11, 300, 1, 1, 0, 1),  # pointwise, more than 256 rows of panels
    (1, 7, 12, 5, 5, 1, 3, 2),     # dilated, fewer outputs than a register tile
    (2, 300, 6, 33, 1, 1, 0, 1),   # depth over one 256-deep block
    (1, 64, 99, 20, 3, 2, 1, 1),   # phase planes over three depth blocks (K = 576: 256, 256, 64)
    (1, 130, 41, 20, 3, 2, 1, 1),  # K = 1170, past the phase planes' four blocks: im2col in chunks of output rows
    (2, 24, 17, 40, 1, 2, 0, 1),   # 1x1 stride 2: one phase plane of four built and read
    (1, 40, 23, 30, 3, 3, 2, 2),   # phase planes of stride 3 with dilation over two depth blocks
    (1, 3, 75, 40, 7, 2, 3, 1),    # a stem: phase planes, whole pixel panels inside an output row and across two
    (2, 5, 20, 13, 3, 3, 2, 2),    # phase planes of stride 3 with dilation, rows shorter than a panel
    (3, 96, 54, 16, 1, 1, 0, 1),   # pointwise, few outputs, input over 2 MiB: B packed row by row, a partial panel
    (2, 300, 33, 20, 1, 1, 0, 1),  # the same over two 256-deep blocks
    (1, 16, 7, 64, 3, 1, 1, 1),    # phase planes, 7-pixel output rows: 5-6 runs copied into each 32-wide panel
    (2, 16, 13, 70, 3, 1, 1, 1),   # 13-pixel rows, a ragged last panel (169 pixels), rows past a register tile
]


def _data(n, c, h, o, k, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    return x, w, rng.standard_normal(o).astype(np.float32)


@pytest.mark.parametrize("case", CASES)
def test_packed_conv_matches_fused_conv(case):
    n, c, h, o, k, s, p, d = case
    x, w, b = _data(n, c, h, o, k)
    attrs = dict(strides=[s, s], pads=[p] * 4, dilations=[d, d])
    for winograd, columns in ((True, False), (False, False), (False, True)):
        blob = P.pack_conv2d_filter(w, winograd=winograd, columns=columns)
        for act in ("relu", "hardswish", "silu"):
            want = P.fused_conv2d(x, w, b, activation=act, **attrs).numpy()
            got = P.conv2d_packed(x, blob, b, filter_shape=list(w.shape), activation=act, **attrs).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        got = P.conv2d_packed(x, blob, np.zeros(0, np.float32), filter_shape=list(w.shape), **attrs).numpy()
        want = of.conv2d(x, w, **attrs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_panels_are_the_numpy_layout_and_winograd_adds_its_transform():
    w = _data(1, 20, 4, 18, 3)[1]
    plain = P.pack_conv2d_filter(w, winograd=False).numpy()
    np.testing.assert_array_equal(plain, pack_conv(w, winograd=False))
    np.testing.assert_array_equal(P.pack_conv2d_filter(w, winograd=False, columns=True).numpy(),
                                  pack_conv(w, winograd=False, columns=True))
    wino = P.pack_conv2d_filter(w).numpy()
    assert wino.size == plain.size + (4 * 36 * (18 + 15) * 20 + 63) // 64 * 64  # room for the transform, first
    # U[xi][o][c] = (G k G^T)[xi] for F(4x4, 3x3).
    G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
                  [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])
    u = np.einsum("ia,ocab,jb->ijoc", G, w.astype(np.float64), G).reshape(36, 18, 20)
    got = wino[HEADER:HEADER + u.size * 4].view(np.float32).reshape(u.shape)
    np.testing.assert_allclose(got, u, rtol=1e-5, atol=1e-6)


def _bad(blob, x=None, fs=(6, 3, 3, 3), bias=None):
    x = np.ones((1, fs[1], 5, 5), np.float32) if x is None else x
    bias = np.zeros(0, np.float32) if bias is None else bias
    with pytest.raises(of.errors.InvalidArgumentError, match="Conv2DPacked.*'(packed|bias)'") as e:
        P.conv2d_packed(x, blob, bias, filter_shape=list(fs))
    return str(e.value)


def test_hostile_blobs_raise_naming_the_argument():
    w = _data(1, 3, 4, 6, 3)[1]
    blob = P.pack_conv2d_filter(w).numpy()
    _bad(blob[:-1])                                    # truncated
    _bad(blob[:HEADER - 1])                            # shorter than the header
    for i in (0, 8, 20, 40, 56, 72, 76):               # magic, format, layout, mr, k, payload, checksum
        bad = blob.copy()
        bad[i] ^= 1
        _bad(bad)
    _bad(blob.view(np.int8))                           # not uint8 (a dtype error of the argument)
    assert "filter_shape" in _bad(blob, fs=(7, 3, 3, 3), x=np.ones((1, 3, 5, 5), np.float32))
    _bad(blob, bias=np.ones(5, np.float32))
    half = P.pack_half_mat_mul_weight(np.ones((4, 4), np.float16)).numpy()
    assert "float16" in _bad(half)                     # another Pack*Weight op's blob
    mr, k = MR[panel_layout()], 27
    body = blob[HEADER:HEADER + 4 * ((6 + mr - 1) // mr * mr) * k].tobytes()
    other = "generic" if panel_layout() != "generic" else "avx2"
    foreign = header(3, other, MR[other], 0, 3, 3, k, 6, len(body), 0) + body
    foreign = np.frombuffer(foreign.ljust(blob.size, b"\0"), np.uint8)
    assert "packed for the '" + other + "'" in _bad(foreign)
    flags = header(3, panel_layout(), mr, 0, 3, 3, k, 6, len(body), 1) + body  # a transform a 3x6 filter never has
    _bad(np.frombuffer(flags.ljust(blob.size, b"\0"), np.uint8))


def test_unaligned_blob_and_edited_payload_do_not_crash():
    x, w, b = _data(1, 16, 12, 24, 3)
    blob = P.pack_conv2d_filter(w).numpy()
    want = P.conv2d_packed(x, blob, b, filter_shape=list(w.shape), pads=[1] * 4).numpy()
    buf = np.zeros(blob.size + 1, np.uint8)
    shifted = buf[1:]
    shifted[:] = blob
    got = P.conv2d_packed(x, shifted, b, filter_shape=list(w.shape), pads=[1] * 4).numpy()
    np.testing.assert_array_equal(got, want)
    edited = blob.copy()
    edited[HEADER:] ^= 0x5A  # weights edited: another answer, no crash, no read out of bounds
    assert P.conv2d_packed(x, edited, b, filter_shape=list(w.shape), pads=[1] * 4).numpy().shape == want.shape


def test_onnx_conv_imports_packed_and_matches_onnxruntime(monkeypatch):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    import opforge.onnx
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((24, 16, 3, 3)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((8, 24, 1, 1)) * 0.2).astype(np.float32)
    b1 = rng.standard_normal(24).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Conv", ["r", "w2"], ["y"], strides=[2, 2])]
    g = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 17, 17])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 9, 9])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 17)])
    x = rng.standard_normal((2, 16, 17, 17)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    imported = opforge.onnx.import_model(model)
    ops = [op.type for op in imported.graph.get_operations()]
    assert ops.count("Conv2DPacked") == 2 and "PackConv2DFilter" not in ops, ops  # packed once, at import
    got = np.asarray(of.Session(imported.graph).run([imported.outputs["y"]], {imported.inputs["x"]: x})[0])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    monkeypatch.setenv("OPFORGE_ONNX_PACK_CONV", "0")  # the packed copy is extra memory: it can be turned off
    ops = [op.type for op in opforge.onnx.import_model(model).graph.get_operations()]
    assert "Conv2DPacked" not in ops and ops.count("FusedConv2D") == 1 and ops.count("Conv2D") == 1, ops


def test_winograd_with_filter_panels_matches_numpy():
    # Over 128 outputs and several tile blocks: the 36 GEMMs read U as panels (packed at import for
    # Conv2DPacked, once per call for Conv2D and its input gradient), checked against numpy.
    import vision_reference as ref
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 24, 18, 18)).astype(np.float32)
    w = (rng.standard_normal((136, 24, 3, 3)) / np.sqrt(24 * 9)).astype(np.float32)
    want = ref.conv2d(x.astype(np.float64), w.astype(np.float64), pads=[1, 1, 1, 1])
    scale = np.abs(want).max()
    got = P.conv2d_packed(x, P.pack_conv2d_filter(w), np.zeros(0, np.float32), filter_shape=list(w.shape),
                          pads=[1, 1, 1, 1]).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * scale)
    np.testing.assert_allclose(of.conv2d(x, w, pads=[1, 1, 1, 1]).numpy(), want, rtol=0, atol=2e-5 * scale)
    # The input gradient of a 136 -> 144 convolution: Winograd over the transposed filter, 144 outputs.
    w2 = (rng.standard_normal((136, 144, 3, 3)) / np.sqrt(144 * 9)).astype(np.float32)
    x2 = rng.standard_normal((3, 144, 18, 18)).astype(np.float32)
    dy = rng.standard_normal((3, 136, 18, 18)).astype(np.float32)
    want = ref.conv2d_backprop_input(x2.astype(np.float64), w2.astype(np.float64), dy.astype(np.float64),
                                     pads=[1, 1, 1, 1])
    got = of.raw_ops.conv2d_backprop_input(x2, w2, dy, pads=[1, 1, 1, 1]).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_winograd_transform_alone():
    # panels=False: the transform alone; a call that cannot take the Winograd route is refused, not misread.
    rng = np.random.default_rng(8)
    w = (rng.standard_normal((24, 16, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    both, alone = P.pack_conv2d_filter(w).numpy(), P.pack_conv2d_filter(w, panels=False).numpy()
    assert alone.nbytes < both.nbytes
    x = rng.standard_normal((2, 16, 18, 18)).astype(np.float32)  # 2 x 25 tiles: Winograd applies
    want = P.fused_conv2d(x, w, b, pads=[1] * 4).numpy()
    got = P.conv2d_packed(x, alone, b, filter_shape=list(w.shape), pads=[1] * 4).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    with pytest.raises(of.errors.InvalidArgumentError, match="'packed'.*Winograd transform alone"):
        P.conv2d_packed(x[:1], alone, b, filter_shape=list(w.shape), pads=[1] * 4)  # 25 tiles: too few
    with pytest.raises(of.errors.InvalidArgumentError, match="'panels'"):
        P.pack_conv2d_filter(w, winograd=False, panels=False)
    truncated = both[: alone.nbytes]  # a full blob cut to the transform's size: flags and size disagree
    with pytest.raises(of.errors.InvalidArgumentError, match="'packed'"):
        P.conv2d_packed(x, truncated, b, filter_shape=list(w.shape), pads=[1] * 4)
    # "no panels" without a transform: a header that claims an empty payload is refused
    small = _data(1, 3, 4, 6, 3)[1]
    empty = np.frombuffer(header(3, panel_layout(), MR[panel_layout()], 0, 3, 3, 27, 6, 0, 4), np.uint8)
    assert "packed" in _bad(empty, fs=small.shape, x=np.ones((1, 3, 5, 5), np.float32))


def test_column_panels_at_batch_one_with_few_pixels_match_onnxruntime(monkeypatch):
    # A 7x7 output at batch 1 (49 pixels: 15 of 64 tile columns wasted in the usual layout) gets the column
    # layout at import; both convolutions match onnxruntime, and the rule keeps it off where it loses.
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    import opforge.onnx
    from opforge.onnx._pack_conv import columns_pay
    assert columns_pay((1, 256, 7, 7), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 64, 256)
    assert columns_pay((1, 256, 14, 14), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 256, 256)  # 196 pixels, deep
    assert not columns_pay((1, 112, 14, 14), [1, 1], [1, 1], [0] * 4, [1, 1], 672, 112)  # 196 pixels, shallow
    assert not columns_pay((2, 256, 7, 7), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 64, 256)  # batch 2
    assert not columns_pay((None, 256, 7, 7), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 64, 256)
    rng = np.random.default_rng(4)
    w1 = (rng.standard_normal((128, 144, 3, 3)) / 36).astype(np.float32)
    w2 = (rng.standard_normal((200, 128, 1, 1)) / 11).astype(np.float32)
    b2 = rng.standard_normal(200).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c", "w2", "b2"], ["d"]), helper.make_node("Sigmoid", ["d"], ["s"]),
             helper.make_node("Mul", ["d", "s"], ["y"])]
    g = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 144, 7, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 200, 7, 7])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
                           numpy_helper.from_array(b2, "b2")])
    model = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 17)])
    x = rng.standard_normal((1, 144, 7, 7)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    packed, pack = [], P.pack_conv2d_filter
    monkeypatch.setattr(P, "pack_conv2d_filter", lambda w, **kw: packed.append(kw["columns"]) or pack(w, **kw))
    monkeypatch.setenv("OPFORGE_NCHWC", "0")  # the packed route itself (an Intel CPU runs a 7x7 3x3 conv blocked)
    imported = opforge.onnx.import_model(model)
    assert packed == [True, True]  # 200 outputs: 7 of 224 tile columns wasted, fewer than the pixels' 15 of 64
    got = np.asarray(of.Session(imported.graph).run([imported.outputs["y"]], {imported.inputs["x"]: x})[0])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_column_panels_need_the_panels():
    w = np.ones((8, 4, 3, 3), np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="columns"):
        P.pack_conv2d_filter(w, panels=False, columns=True)
