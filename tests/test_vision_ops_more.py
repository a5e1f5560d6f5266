"""ConvTranspose2D, Pad, BatchNorm and ResizeBilinear against numpy references (vision_reference_more.py) over
random shapes, their backward ops as adjoints, bad input at eager and graph-build time, and the layers."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
import vision_reference_more as ref

TOL = {np.float32: dict(rtol=2e-4, atol=2e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


def _adjoint(x, y, dx, dy):
    """<op(x), dy> == <x, op^T(dy)>."""
    np.testing.assert_allclose(np.vdot(y.astype(np.float64), dy), np.vdot(x.astype(np.float64), dx), rtol=1e-4,
                               atol=1e-4)


@st.composite
def convt_case(draw):
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    s = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    d = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    full = [(h - 1) * s[0] + (k[0] - 1) * d[0] + 1, (w - 1) * s[1] + (k[1] - 1) * d[1] + 1]
    p = [draw(st.integers(0, (full[i % 2] - 1) // 2)) for i in range(4)]
    op = [draw(st.integers(0, s[0] - 1)), draw(st.integers(0, s[1] - 1))]
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((draw(st.integers(1, 3)), groups * cg, h, w)).astype(dtype)
    f = rng.standard_normal((groups * cg, og, *k)).astype(dtype)
    return x, f, dict(strides=s, pads=p, dilations=d, groups=groups, output_padding=op), rng


@settings(max_examples=60, deadline=None)
@given(convt_case())
def test_conv_transpose2d_matches_numpy_and_its_gradients_are_conv2d(case):
    x, f, attrs, rng = case
    y = of.conv_transpose2d(x, f, **attrs).numpy()
    np.testing.assert_allclose(y, ref.conv_transpose2d(x, f, **attrs), **TOL[x.dtype.type])
    conv = {k: v for k, v in attrs.items() if k != "output_padding"}
    dy = rng.standard_normal(y.shape).astype(x.dtype)
    _adjoint(x, y, of.conv2d(dy, f, **conv).numpy(), dy)  # dx of a transposed convolution is Conv2D(dy)
    xt = of.tensor(x, requires_grad=True)
    of.sum(of.mul(of.conv_transpose2d(xt, f, **attrs), dy)).backward()
    np.testing.assert_allclose(xt.grad.numpy(), of.conv2d(dy, f, **conv).numpy(), rtol=1e-5, atol=1e-5)


@st.composite
def pad_case(draw):
    rank = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    mode = draw(st.sampled_from(["constant", "reflect", "edge", "wrap"]))
    limit = {"constant": lambda d: 3, "reflect": lambda d: d - 1, "edge": lambda d: 3, "wrap": lambda d: d}[mode]
    pads = [draw(st.integers(0, limit(shape[i % rank]))) for i in range(2 * rank)]
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64]))
    x = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).standard_normal(shape) * 5
    return x.astype(dtype), dict(pads=pads, mode=mode, constant_value=float(draw(st.integers(-3, 3))))


@settings(max_examples=80, deadline=None)
@given(pad_case())
def test_pad_matches_numpy_and_pad_grad_is_its_adjoint(case):
    x, attrs = case
    y = of.pad(x, **attrs).numpy()
    np.testing.assert_array_equal(y, ref.pad(x, **attrs))
    if x.dtype.kind == "f":
        attrs.pop("constant_value")
        dy = np.random.default_rng(0).standard_normal(y.shape).astype(x.dtype)
        dx = of.raw_ops.pad_grad(x, dy, **attrs).numpy()
        np.testing.assert_allclose(dx, ref.pad_grad(x, dy, **attrs), **TOL[x.dtype.type])
        _adjoint(x, of.pad(x, **attrs).numpy(), dx, dy)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=4), st.booleans(), st.sampled_from([np.float32, np.float64]),
       st.floats(1e-5, 0.5), st.integers(0, 2**32 - 1))
def test_batch_norm_matches_numpy(shape, training, dtype, eps, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    c = shape[1]
    vecs = [rng.standard_normal(c).astype(dtype) for _ in range(3)] + [rng.uniform(0.5, 2, c).astype(dtype)]
    got = of.batch_norm(x, *vecs, epsilon=eps, training=training)
    want = ref.batch_norm(x, *vecs, epsilon=eps, training=training)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, **tol)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 9), st.integers(1, 9),
       st.sampled_from(["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]), st.booleans(),
       st.sampled_from([np.float32, np.float64]))
def test_resize_bilinear_matches_numpy_and_its_grad_is_the_adjoint(h, w, oh, ow, mode, explicit, dtype):
    x = np.random.default_rng(h * 31 + w).standard_normal((2, 3, h, w)).astype(dtype)
    attrs = dict(size=[oh, ow], coordinate_mode=mode, scales=[oh / h * 1.1, ow / w * 0.9] if explicit else [])
    y = of.resize_bilinear(x, **attrs).numpy()
    np.testing.assert_allclose(y, ref.resize_bilinear(x, **attrs), **TOL[dtype])
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    _adjoint(x, y, of.raw_ops.resize_bilinear_grad(x, dy, **attrs).numpy(), dy)


BAD = [
    (lambda x: of.conv_transpose2d(x, np.zeros((4, 2, 3, 3), np.float32), groups=3), "ConvTranspose2D", "groups"),
    (lambda x: of.conv_transpose2d(x, np.zeros((3, 2, 3, 3), np.float32)), "ConvTranspose2D", "filter"),
    (lambda x: of.conv_transpose2d(x, np.zeros((4, 2, 3, 3), np.float32), strides=[2, 2], output_padding=[2, 0]),
     "ConvTranspose2D", "output_padding"),
    (lambda x: of.conv_transpose2d(x, np.zeros((4, 2, 3, 3), np.float32), pads=[4, 0, 3, 0]), "ConvTranspose2D",
     "pads"),
    (lambda x: of.conv_transpose2d(x, np.zeros((4, 2, 3, 3), np.float32), strides=[0, 1]), "ConvTranspose2D",
     "strides"),
    (lambda x: of.pad(x, pads=[1, 1]), "Pad", "pads"),
    (lambda x: of.pad(x, pads=[0, 0, -1, 0, 0, 0, 0, 0]), "Pad", "pads"),
    (lambda x: of.pad(x, pads=[0, 0, 5, 0, 0, 0, 0, 0], mode="reflect"), "Pad", "pads"),
    (lambda x: of.pad(x, pads=[0] * 8, mode="symmetric"), "Pad", "mode"),
    (lambda x: of.batch_norm(x, *[np.ones(3, np.float32)] * 4), "BatchNorm", "scale"),
    (lambda x: of.resize_bilinear(x, size=[0, 3]), "ResizeBilinear", "size"),
    (lambda x: of.resize_bilinear(x, size=[3, 3], coordinate_mode="tf_crop_and_resize"), "ResizeBilinear",
     "coordinate_mode"),
]


@pytest.mark.parametrize("fn,op,word", BAD)
def test_bad_input_names_op_and_argument(fn, op, word):
    x = np.zeros((1, 4, 5, 5), np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match=op) as e:
        fn(x)
    assert word in str(e.value)
    with of.Graph().as_default():  # rejected while the graph is built, before any run
        with pytest.raises(of.errors.InvalidArgumentError, match=op) as e:
            fn(of.placeholder(of.float32, [1, 4, 5, 5]))
        assert word in str(e.value)


def test_pad_int_constant_must_fit():
    with pytest.raises(of.errors.InvalidArgumentError, match="constant_value"):
        of.pad(np.zeros(3, np.int32), pads=[1, 1], constant_value=0.5)


def test_layers_and_functional_forms():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    layer = of.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, seed=3)
    w, b = layer.weights()["weight"].numpy(), layer.weights()["bias"].numpy()
    want = ref.conv_transpose2d(x, w, strides=[2, 2], pads=[1] * 4, groups=2, output_padding=[1, 1])
    np.testing.assert_allclose(layer(x).numpy(), want + b.reshape(1, -1, 1, 1), rtol=1e-4, atol=1e-4)
    F = of.nn.functional
    np.testing.assert_array_equal(F.pad(x, (1, 2, 0, 1), mode="replicate").numpy(),
                                  np.pad(x, [(0, 0), (0, 0), (0, 1), (1, 2)], mode="edge"))
    up = of.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(x).numpy()
    np.testing.assert_allclose(up, ref.resize_bilinear(x, [10, 12], "align_corners"), rtol=1e-5, atol=1e-5)


def test_layers_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 4, 5, 6))
    tx = torch.tensor(x)
    ct = of.nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), dilation=(1, 2),
                               groups=2, dtype="float64", seed=1)
    w, b = (ct.weights()[k].numpy() for k in ("weight", "bias"))
    want = torch.nn.functional.conv_transpose2d(tx, torch.tensor(w), torch.tensor(b), stride=(2, 3), padding=(1, 0),
                                                output_padding=(1, 2), groups=2, dilation=(1, 2))
    np.testing.assert_allclose(ct(x).numpy(), want.numpy(), rtol=1e-10, atol=1e-10)
    for mode in ("constant", "reflect", "replicate", "circular"):
        np.testing.assert_array_equal(of.nn.functional.pad(x, (1, 2, 2, 1), mode=mode).numpy(),
                                      torch.nn.functional.pad(tx, (1, 2, 2, 1), mode=mode).numpy())
    for ac in (False, True):
        for kw in (dict(size=(7, 13)), dict(size=(3, 2)), dict(scale_factor=1.7)):
            np.testing.assert_allclose(
                of.nn.functional.interpolate(x, mode="bilinear", align_corners=ac, **kw).numpy(),
                torch.nn.functional.interpolate(tx, mode="bilinear", align_corners=ac, **kw).numpy(), rtol=1e-10,
                atol=1e-12)
    # BatchNorm2d training step: output, all gradients and the running statistics.
    bn, tbn = of.nn.BatchNorm2d(4, dtype="float64"), torch.nn.BatchNorm2d(4, dtype=torch.float64)
    xt, xo = tx.clone().requires_grad_(True), of.tensor(x, requires_grad=True)
    dy = rng.standard_normal(x.shape)
    tbn(xt).backward(torch.tensor(dy))
    y = bn(xo)
    y.backward(dy)
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(bn.weights()["weight"].grad.numpy(), tbn.weight.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(bn.weights()["running_var"].numpy(), tbn.running_var.numpy(), rtol=1e-12)


@pytest.mark.parametrize("activation", ["none", "relu", "sigmoid", "silu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_conv2d_is_conv_plus_bias_then_activation(activation, dtype):
    import vision_reference as ref1
    rng = np.random.default_rng(9)
    cases = [((2, 6, 9, 8), (8, 3, 3, 3), dict(pads=[1, 1, 1, 1], groups=2, strides=[2, 1])),
             ((1, 16, 12, 12), (16, 1, 3, 3), dict(pads=[1, 1, 1, 1], groups=16)),   # depthwise
             ((3, 16, 10, 10), (24, 16, 1, 1), {}),                                   # pointwise
             ((1, 64, 20, 20), (64, 64, 3, 3), dict(pads=[1, 1, 1, 1]))]              # one threaded GEMM
    for xs, fs, attrs in cases:
        x, f = rng.standard_normal(xs).astype(dtype), rng.standard_normal(fs).astype(dtype)
        b = rng.standard_normal(fs[0]).astype(dtype)
        z = ref1.conv2d(x, f, **attrs).astype(np.float64) + b.reshape(1, -1, 1, 1)
        want = {"none": z, "relu": np.maximum(z, 0), "sigmoid": 1 / (1 + np.exp(-z)), "silu": z / (1 + np.exp(-z))}
        got = of.fused_conv2d(x, f, b, activation=activation, **attrs).numpy()
        np.testing.assert_allclose(got, want[activation], rtol=1e-4, atol=1e-3 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("nchwc", ["0", None])
def test_onnx_conv_activation_patterns_are_fused_and_match_onnxruntime(nchwc, monkeypatch):
    if nchwc is None:
        monkeypatch.delenv("OPFORGE_NCHWC", raising=False)
    else:
        monkeypatch.setenv("OPFORGE_NCHWC", nchwc)
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    import opforge.onnx
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in
             (("w1", (8, 3, 3, 3)), ("b1", (8,)), ("w2", (8, 8, 1, 1)), ("w3", (8, 1, 3, 3)), ("b3", (8,)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c1"], ["s1"]), helper.make_node("Mul", ["c1", "s1"], ["a1"]),   # SiLU
             helper.make_node("Conv", ["a1", "w2"], ["c2"]), helper.make_node("Relu", ["c2"], ["a2"]),
             helper.make_node("Conv", ["a2", "w3", "b3"], ["c3"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c3"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    imported = opforge.onnx.import_model(model)
    ops = [op.type for op in imported.graph.get_operations()] if hasattr(imported.graph, "get_operations") else []
    # NCHW: the depthwise conv stays FusedConv2D; the two with one group run over filters packed at
    # import. By default a graph with a depthwise conv runs its convs in the blocked layout (NCHWc).
    fused = "Sigmoid" not in ops and "Relu" not in ops
    if nchwc == "0":
        assert not ops or (fused and ops.count("FusedConv2D") == 1 and ops.count("Conv2DPacked") == 2), ops
    else:
        assert not ops or (fused and ops.count("Conv2DNchwc") == 3 and ops.count("ReorderFromNchwc") == 1), ops
    with of.Session(imported.graph) as sess:
        got = sess.run(imported.outputs["y"], {imported.inputs["x"]: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
