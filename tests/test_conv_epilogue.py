"""The packed convolution's epilogue in the GEMM microkernel's registers (issue 23): every activation (HardSwish
included), the bias and, for Conv2DPackedAdd, a residual added before the activation, checked against numpy
over random shapes on every route (pointwise, im2col in chunks, the batched small-image GEMM, the column layout,
Winograd, depth over one 256-deep block); the importer's Conv -> Add -> Relu fusion against onnxruntime; bad
residuals raise. The module reruns itself with OPFORGE_SIMD capped (AVX2, and the portable kernels without an
in-register epilogue)."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
import vision_reference as ref
from opforge import ops as P

ACTS = ("none", "relu", "sigmoid", "silu", "hardswish")
EXAMPLES = int(os.environ.get("OPFORGE_EPILOGUE_EXAMPLES", "25"))


def _act(z, act):
    return {"none": z, "relu": np.maximum(z, 0), "sigmoid": 1 / (1 + np.exp(-z)), "silu": z / (1 + np.exp(-z)),
            "hardswish": z * np.clip(z / 6 + 0.5, 0, 1)}[act]


def _check(x, w, b, r, act, strides, pads, dil, winograd, columns):
    blob = P.pack_conv2d_filter(w, winograd=winograd, columns=columns)
    z = ref.conv2d(x.astype(np.float64), w.astype(np.float64), strides=strides, pads=pads, dilations=dil)
    z = z + (b.astype(np.float64).reshape(1, -1, 1, 1) if b.size else 0.0)
    attrs = dict(filter_shape=list(w.shape), strides=strides, pads=pads, dilations=dil, activation=act)
    got = P.conv2d_packed(x, blob, b, **attrs).numpy()
    tol = 2e-5 * max(1.0, np.abs(z).max()) * (20 if winograd else 1)  # Winograd's transforms round more
    np.testing.assert_allclose(got, _act(z, act), rtol=0, atol=tol)
    got = P.conv2d_packed_add(x, blob, b, r, **attrs).numpy()
    np.testing.assert_allclose(got, _act(z + r, act), rtol=0, atol=tol + 2e-5 * np.abs(r).max())


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.data())
def test_packed_epilogues_match_numpy(data):
    d = data.draw
    n, c, o = d(st.integers(1, 3)), d(st.sampled_from([1, 3, 8, 16, 20, 40])), d(st.integers(1, 40))
    k = d(st.sampled_from([1, 1, 3, 5]))
    s, dil = d(st.sampled_from([1, 1, 2])), d(st.sampled_from([1, 1, 2]))
    pads = [d(st.integers(0, k // 2 + 1)) for _ in range(4)]
    h, w_ = d(st.integers(dil * (k - 1) + 1, 14)), d(st.integers(dil * (k - 1) + 1, 14))
    rng = np.random.default_rng(d(st.integers(0, 2**31)))
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    b = rng.standard_normal(o if d(st.booleans()) else 0).astype(np.float32)
    oh = (h + pads[0] + pads[2] - dil * (k - 1) - 1) // s + 1
    ow = (w_ + pads[1] + pads[3] - dil * (k - 1) - 1) // s + 1
    r = rng.standard_normal((n, o, oh, ow)).astype(np.float32)
    _check(x, w, b, r, d(st.sampled_from(ACTS)), [s, s], pads, [dil, dil], d(st.booleans()), d(st.booleans()))


# (batch, channels, size, out channels, kernel, stride, pad): routes a small random draw rarely takes.
ROUTES = [
    (2, 32, 20, 48, 3, 1, 1),   # Winograd (its epilogue: a pass that adds the residual and activates)
    (1, 300, 6, 33, 1, 1, 0),   # depth over one 256-deep block: the residual only on the last
    (1, 30, 99, 20, 3, 2, 1),   # im2col in chunks of output rows: the residual at each chunk's offset
    (3, 24, 9, 40, 3, 1, 1),    # small outputs in a batch: one GEMM over all images, the residual in the copy back
    (1, 96, 7, 70, 1, 1, 0),    # few pixels, the column layout
    (3, 48, 1, 70, 1, 1, 0),    # one pixel per image (an SE block): the column layout over x and y as they are
    (2, 300, 1, 40, 1, 1, 0),   # the same over two depth blocks
]


@pytest.mark.parametrize("case", ROUTES)
def test_every_route_adds_the_residual(case):
    n, c, h, o, k, s, p = case
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    oh = (h + 2 * p - k) // s + 1
    r = rng.standard_normal((n, o, oh, oh)).astype(np.float32)
    for act in ("relu", "hardswish"):
        _check(x, w, b, r, act, [s, s], [p] * 4, [1, 1], k == 3, columns=oh * oh < 64)


def test_bad_residual_raises_naming_it():
    w = np.ones((4, 3, 1, 1), np.float32)
    blob = P.pack_conv2d_filter(w)
    x = np.ones((2, 3, 5, 5), np.float32)
    for shape in [(2, 4, 5, 4), (1, 4, 5, 5), (2, 4, 25), (4, 1, 1)]:
        with pytest.raises(of.errors.InvalidArgumentError, match="Conv2DPackedAdd.*'residual'"):
            P.conv2d_packed_add(x, blob, np.zeros(0, np.float32), np.ones(shape, np.float32), filter_shape=[4, 3, 1, 1])
    with pytest.raises(of.errors.InvalidArgumentError, match="Conv2DPackedAdd"):
        P.conv2d_packed_add(x, blob, np.zeros(0, np.float32), np.ones((2, 4, 5, 5), np.float64),
                            filter_shape=[4, 3, 1, 1])
    # In a graph, a residual whose batch is only known at run time is checked then.
    g = of.Graph()
    with g.as_default():
        xp = of.placeholder(np.float32, [None, 3, 5, 5])
        rp = of.placeholder(np.float32, [None, 4, 5, 5])
        y = P.conv2d_packed_add(xp, blob, np.zeros(0, np.float32), rp, filter_shape=[4, 3, 1, 1])
    sess = of.Session(g)
    np.testing.assert_allclose(sess.run([y], {xp: x, rp: np.ones((2, 4, 5, 5), np.float32)})[0], 4.0)
    with pytest.raises(of.errors.InvalidArgumentError, match="residual"):
        sess.run([y], {xp: x, rp: np.ones((1, 4, 5, 5), np.float32)})


def _resnet_block(res_shape=None, add_read_twice=False):
    """x -> Conv3x3 -> BN -> Relu -> Conv3x3 -> BN -> Add(., shortcut) -> Relu, the shortcut a 1x1 stride-1 Conv
    + BN computed after the main branch (so the later Conv takes the residual), or a given constant."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    c = 16

    def init(name, *shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    def bn(i, src, dst):
        return ([helper.make_node("BatchNormalization", [src, f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [dst])],
                [init(f"s{i}", c, scale=1.0), init(f"b{i}", c), init(f"m{i}", c),
                 numpy_helper.from_array(rng.uniform(0.5, 2, c).astype(np.float32), f"v{i}")])

    nodes, inits = [], [init("w1", c, c, 3, 3), init("w2", c, c, 3, 3), init("w3", c, c, 1, 1)]
    nodes.append(helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]))
    for i, src, dst in [(1, "c1", "n1")]:
        ns, ts = bn(i, src, dst)
        nodes += ns
        inits += ts
    nodes.append(helper.make_node("Relu", ["n1"], ["r1"]))
    nodes.append(helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]))
    ns, ts = bn(2, "c2", "n2")
    nodes += ns
    inits += ts
    if res_shape is None:
        nodes.append(helper.make_node("Conv", ["x", "w3"], ["c3"]))
        ns, ts = bn(3, "c3", "short")
        nodes += ns
        inits += ts
    else:
        inits.append(init("short", *res_shape))
    nodes.append(helper.make_node("Add", ["n2", "short"], ["sum"]))
    nodes.append(helper.make_node("Relu", ["sum"], ["y"]))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if add_read_twice:
        outputs.append(helper.make_tensor_value_info("sum", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 10, 10])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("variant", ["fused", "broadcast", "sum_is_an_output", "off"])
def test_importer_fuses_conv_add_relu(variant, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    import opforge.onnx
    if variant == "off":
        monkeypatch.setenv("OPFORGE_ONNX_CONV_RESIDUAL", "0")
    model = _resnet_block(res_shape=(1, 16, 1, 1) if variant == "broadcast" else None,
                          add_read_twice=variant == "sum_is_an_output")
    x = np.random.default_rng(2).standard_normal((2, 16, 10, 10)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    imported = opforge.onnx.import_model(model)
    names = list(imported.outputs)
    got = of.Session(imported.graph).run([imported.outputs[k] for k in names], {imported.inputs["x"]: x})
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w_, rtol=1e-4, atol=1e-4 * np.abs(w_).max())
    ops = [op.type for op in imported.graph.get_operations()]
    # An Add whose sum is read elsewhere still fuses, without the Relu; a broadcast residual runs the Add.
    fused = variant in ("fused", "sum_is_an_output")
    assert (ops.count("Conv2DPackedAdd") == 1) == fused, ops
    assert ("Add" in ops) != fused, ops
    assert ("Relu" in ops) == (variant != "fused"), ops


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="already a rerun, or the dispatch is capped")
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_every_instruction_set(isa):
    env = dict(os.environ, OPFORGE_SIMD=isa, OPFORGE_EPILOGUE_EXAMPLES="8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__, "-k",
                           "not importer"], env=env, capture_output=True, text=True, timeout=600,
                          cwd=os.path.dirname(__file__))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_one_pixel_convs_take_the_column_layout():
    from opforge.onnx._pack_conv import columns_pay
    se = ([1, 1], [1, 1], [0] * 4, [1, 1], 1152, 48)  # EfficientNet's SE expand: 48 -> 1152 at one pixel
    assert columns_pay((1, 48, 1, 1), *se) and columns_pay((8, 48, 1, 1), *se)
    assert not columns_pay((None, 48, 1, 1), *se)  # the batch unknown: the GEMM's columns are too
    assert not columns_pay((32, 48, 1, 1), *se)  # 32 columns fill the usual tile
    assert not columns_pay((8, 48, 1, 1), [1, 1], [1, 1], [0] * 4, [1, 1], 4, 48)  # 4 outputs: 8 pixels fill more
