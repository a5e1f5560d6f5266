"""The quantization ops (cpp/ops/quant_ops.cc) against numpy references written
from the ONNX spec and against onnxruntime, one single-node model each; their
shape functions in graph mode; bad input (scales of zero, NaN or infinity,
zero points outside their type, mismatched shapes)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of

P = of.ops
Q8 = [np.uint8, np.int8]


def q_ref(x, s, z, dtype, axis=1):
    info = np.iinfo(dtype)
    s, z = np.asarray(s, np.float32), np.asarray(z)
    if s.size > 1:
        view = [1] * x.ndim
        view[axis] = -1
        s, z = s.reshape(view), z.reshape(view)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = np.rint(x / s).astype(np.float64) + z.astype(np.float64)
    v = np.where(np.isnan(v), info.min, v)
    return np.clip(v, info.min, info.max).astype(dtype)


def dq_ref(x, s, z, axis=1):
    s, z = np.asarray(s, np.float32), np.asarray(z)
    if s.size > 1:
        view = [1] * x.ndim
        view[axis] = -1
        s, z = s.reshape(view), z.reshape(view)
    return ((x.astype(np.int64) - z.astype(np.int64)).astype(np.float32) * s).astype(np.float32)


def ort_run(op, inputs, outputs, attrs=None, opset=21):
    """Runs one ONNX node in onnxruntime; inputs: list of (name, array) (None: left out)."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper
    names = [n if a is not None else "" for n, a in inputs]
    node = helper.make_node(op, names, outputs, **(attrs or {}))
    feeds = [(n, a) for n, a in inputs if a is not None]
    graph = helper.make_graph([node], "g", [], [helper.make_empty_tensor_value_info(o) for o in outputs],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in feeds])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    assert onnx is not None
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {})


SPECIAL = np.array([0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e10, -1e10, np.inf, -np.inf, np.nan, 3.49999, 127.5,
                    -128.5, 255.5], np.float32)


@pytest.mark.parametrize("dtype", Q8 + [np.uint16, np.int16])
def test_quantize_linear_rounding_and_saturation(dtype):
    rng = np.random.default_rng(0)
    x = np.concatenate([SPECIAL, rng.uniform(-300, 300, 500).astype(np.float32),
                        rng.uniform(-1e5, 1e5, 100).astype(np.float32)])
    for s, z in [(1.0, 0), (0.5, 3), (0.07, np.iinfo(dtype).max), (3.0, np.iinfo(dtype).min)]:
        zp = np.asarray(z, dtype)
        got = P.quantize_linear(x, np.float32(s), zp).numpy()
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, q_ref(x, s, zp, dtype))
        (want,) = ort_run("QuantizeLinear", [("x", x), ("s", np.float32(s)), ("z", zp)], ["y"])
        np.testing.assert_array_equal(got, want)


def test_quantize_uint8_divides_exactly_at_ties():
    # The AVX-512 loop multiplies by 1/s and corrects with two FMAs instead of
    # dividing: x / s must still round as the division does, ties (x = (k +
    # 1/2) s and its neighbours) included, and scales far from 1 (the division
    # kept) and infinities must saturate as before.
    rng = np.random.default_rng(5)
    scales = np.concatenate([rng.uniform(1e-3, 10, 40) / 255, [1e-35, 3e-30, 1e30, 7e35, -0.013]]).astype(np.float32)
    for s in scales:
        k = rng.integers(-300, 300, 4000).astype(np.float32)
        x = ((k + np.float32(0.5)) * s).astype(np.float32)
        x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf)),
                            np.array([np.inf, -np.inf, np.nan, 3e38, -3e38], np.float32)])
        for z in (0, 131):
            got = P.quantize_linear(x, s, np.uint8(z)).numpy()
            with np.errstate(over="ignore"):
                want = q_ref(x, s, np.uint8(z), np.uint8)
            np.testing.assert_array_equal(got, want, err_msg=f"scale {s!r}")


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data(), dtype=st.sampled_from(Q8))
def test_quantize_dequantize_per_axis(shape, data, dtype):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    x = rng.normal(0, 20, shape).astype(np.float32)
    c = shape[axis]
    s = rng.uniform(0.05, 2, c).astype(np.float32)
    info = np.iinfo(dtype)
    z = rng.integers(info.min, info.max + 1, c).astype(dtype)
    q = P.quantize_linear(x, s, z, axis=axis).numpy()
    np.testing.assert_array_equal(q, q_ref(x, s, z, dtype, axis))
    d = P.dequantize_linear(q, s, z, axis=axis).numpy()
    np.testing.assert_array_equal(d, dq_ref(q, s, z, axis))
    # One step at most, where x did not saturate.
    inside = (q > info.min) & (q < info.max)
    step = np.broadcast_to(s.reshape([-1 if i == axis % len(shape) else 1 for i in range(len(shape))]), x.shape)
    assert np.all(np.abs(d - x)[inside] <= 0.5 * step[inside] * (1 + 1e-5))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32])
def test_dequantize_linear_against_onnxruntime(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if dtype != np.int32 else (-100000, 100000)
    x = rng.integers(lo, hi, (3, 4, 5)).astype(dtype)
    s = rng.uniform(0.01, 1, 4).astype(np.float32)
    z = rng.integers(lo, hi, 4).astype(dtype) if dtype != np.int32 else np.zeros(4, np.int32)
    got = P.dequantize_linear(x, s, z, axis=1).numpy()
    (want,) = ort_run("DequantizeLinear", [("x", x), ("s", s), ("z", z)], ["y"], {"axis": 1})
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, dq_ref(x, s, z))


@pytest.mark.parametrize("case", ["random", "positive", "negative", "zeros", "one", "wide", "mlp", "tiny"])
def test_dynamic_quantize_linear_against_onnxruntime(case):
    rng = np.random.default_rng(2)
    x = {"random": rng.normal(0, 3, (7, 33)), "positive": rng.uniform(1, 5, 100), "negative": -rng.uniform(1, 5, 100),
         "zeros": np.zeros((4, 4)), "one": np.array([2.5]), "wide": rng.normal(0, 1e6, 1000),
         "mlp": rng.normal(0, 1, (64, 784)), "tiny": rng.normal(0, 1e-37, 300)}[case].astype(np.float32)
    y, s, z = (t.numpy() for t in P.dynamic_quantize_linear(x))
    wy, ws, wz = ort_run("DynamicQuantizeLinear", [("x", x)], ["y", "s", "z"])
    assert y.dtype == np.uint8 and s.shape == () and z.dtype == np.uint8
    np.testing.assert_array_equal(s, ws)
    np.testing.assert_array_equal(z, wz)
    np.testing.assert_array_equal(y, wy)


@pytest.mark.parametrize("ta,tb,ty", [(np.uint8, np.int8, np.uint8), (np.uint8, np.uint8, np.uint8),
                                      (np.int8, np.int8, np.int8), (np.uint8, np.int8, np.int8)])
@pytest.mark.parametrize("per_col", [False, True])
def test_qlinear_matmul_against_onnxruntime(ta, tb, ty, per_col):
    rng = np.random.default_rng(3)
    m, k, n = 9, 70, 13
    ia, ib, iy = np.iinfo(ta), np.iinfo(tb), np.iinfo(ty)
    a = rng.integers(ia.min, ia.max + 1, (m, k)).astype(ta)
    b = rng.integers(ib.min, ib.max + 1, (k, n)).astype(tb)
    sa, za = np.float32(0.02), ta(rng.integers(ia.min, ia.max + 1))
    sb = rng.uniform(0.005, 0.02, n).astype(np.float32) if per_col else np.float32(0.01)
    zb = rng.integers(ib.min, ib.max + 1, n).astype(tb) if per_col else tb(3)
    sy, zy = np.float32(2.5), ty(iy.min + 100)
    got = P.q_linear_mat_mul(a, sa, za, b, sb, zb, sy, zy).numpy()
    assert got.dtype == ty
    acc = (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - zb.astype(np.int64))
    ref = np.clip(np.rint(acc * (np.float64(sa) * sb / sy)) + int(zy), iy.min, iy.max)
    assert np.abs(got.astype(np.int64) - ref).max() <= 1
    if (ta, tb, ty) != (np.uint8, np.int8, np.int8):  # a combination onnxruntime has no kernel for
        (want,) = ort_run("QLinearMatMul", [("a", a), ("sa", sa), ("za", za), ("b", b), ("sb", sb), ("zb", zb),
                                             ("sy", sy), ("zy", zy)], ["y"], opset=13)
        assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1


def conv_ref(x, w, xz, wz, strides, pads, dil, groups):
    """int64 direct convolution of (x - xz) and (w - wz), pads holding xz."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.full((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), int(xz), np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    xp -= int(xz)
    wz = np.asarray(wz, np.int64).reshape(-1, 1, 1, 1) if np.ndim(wz) else np.int64(wz)
    wf = w.astype(np.int64) - wz
    oh = (xp.shape[2] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow), np.int64)
    og = o // groups
    for g in range(groups):
        for a in range(kh):
            for b in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, a * dil[0]:a * dil[0] + strides[0] * (oh - 1) + 1:strides[0],
                           b * dil[1]:b * dil[1] + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("ncij,oc->noij", patch, wf[g * og:(g + 1) * og, :, a, b])
    return y


CONVS = [dict(strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], groups=1, k=1),
         dict(strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], groups=1, k=3),
         dict(strides=[2, 1], pads=[0, 2, 1, 0], dilations=[1, 2], groups=2, k=3),
         dict(strides=[2, 2], pads=[1, 1, 1, 1], dilations=[1, 1], groups=4, k=3)]


@pytest.mark.parametrize("cfg", CONVS)
@pytest.mark.parametrize("tx,tw", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
def test_conv_integer(cfg, tx, tw):
    rng = np.random.default_rng(4)
    k, groups = cfg["k"], cfg["groups"]
    ix, iw = np.iinfo(tx), np.iinfo(tw)
    x = rng.integers(ix.min, ix.max + 1, (2, 8, 9, 7)).astype(tx)
    w = rng.integers(iw.min, iw.max + 1, (12, 8 // groups, k, k)).astype(tw)
    xz = tx(rng.integers(ix.min, ix.max + 1))
    wz = rng.integers(iw.min, iw.max + 1, 12).astype(tw)
    kw = {key: cfg[key] for key in ("strides", "pads", "dilations", "groups")}
    got = P.conv_integer(x, w, xz, wz, **kw).numpy()
    want = conv_ref(x, w, xz, wz, cfg["strides"], cfg["pads"], cfg["dilations"], groups)
    np.testing.assert_array_equal(got, want.astype(np.int32))
    if tw == np.uint8 or tx == np.uint8:  # onnxruntime's ConvInteger: uint8 x only, scalar zero points
        if tx == np.uint8:
            (ort_y,) = ort_run("ConvInteger", [("x", x), ("w", w), ("xz", xz), ("wz", tw(wz[0]))], ["y"],
                               {"strides": cfg["strides"], "pads": cfg["pads"], "dilations": cfg["dilations"],
                                "group": groups}, opset=13)
            np.testing.assert_array_equal(P.conv_integer(x, w, xz, tw(wz[0]), **kw).numpy(), ort_y)


@pytest.mark.parametrize("cfg", CONVS[1:3])
@pytest.mark.parametrize("tx,tw,ty", [(np.uint8, np.int8, np.uint8), (np.int8, np.int8, np.int8)])
def test_qlinear_conv_against_onnxruntime(cfg, tx, tw, ty):
    rng = np.random.default_rng(5)
    k, groups = cfg["k"], cfg["groups"]
    ix, iy = np.iinfo(tx), np.iinfo(ty)
    x = rng.integers(ix.min, ix.max + 1, (1, 4, 8, 8)).astype(tx)
    w = rng.integers(-127, 128, (6, 4 // groups, k, k)).astype(tw)
    xs, xz = np.float32(0.03), tx(ix.min + 120)
    ws, wz = rng.uniform(0.001, 0.01, 6).astype(np.float32), np.zeros(6, tw)
    ys, yz = np.float32(0.05), ty(iy.min + 128)
    bias = rng.integers(-2000, 2000, 6).astype(np.int32)
    kw = {key: cfg[key] for key in ("strides", "pads", "dilations", "groups")}
    got = P.q_linear_conv(x, xs, xz, w, ws, wz, ys, yz, bias, **kw).numpy()
    (want,) = ort_run("QLinearConv", [("x", x), ("xs", xs), ("xz", xz), ("w", w), ("ws", ws), ("wz", wz),
                                      ("ys", ys), ("yz", yz), ("b", bias)], ["y"],
                      {"strides": cfg["strides"], "pads": cfg["pads"], "dilations": cfg["dilations"], "group": groups},
                      opset=13)
    assert got.dtype == ty
    assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1


# ---- bad input -------------------------------------------------------------

@pytest.mark.parametrize("bad", [0.0, np.nan, np.inf, -np.inf])
def test_scales_of_zero_nan_or_inf_are_errors(bad):
    x = np.ones((2, 3), np.float32)
    q = np.ones((2, 3), np.uint8)
    z = np.zeros((), np.uint8)
    with pytest.raises(of.errors.InvalidArgumentError, match="QuantizeLinear: argument 'y_scale' must be finite"):
        P.quantize_linear(x, np.float32(bad), z)
    with pytest.raises(of.errors.InvalidArgumentError, match="DequantizeLinear: argument 'x_scale'.*at index 1"):
        P.dequantize_linear(q, np.array([1, bad, 1], np.float32), np.zeros(3, np.uint8))
    with pytest.raises(of.errors.InvalidArgumentError, match="QLinearMatMul: argument 'y_scale'"):
        P.q_linear_mat_mul(q, np.float32(1), z, q.T.copy(), np.float32(1), z, np.float32(bad), z)
    with pytest.raises(of.errors.InvalidArgumentError, match="QuantizeLinear: argument 'y_scale'"):
        of.quantization.quantize_linear(x, bad)


def test_dynamic_quantize_rejects_nan_and_inf():
    # Either sign, in the vector loop (index 40 of 100) or its tail (index 97).
    for v in (np.nan, -np.nan, np.inf, -np.inf):
        with pytest.raises(of.errors.InvalidArgumentError, match="DynamicQuantizeLinear: argument 'x'.*NaN or inf"):
            P.dynamic_quantize_linear(np.array([1, v, 2], np.float32))
        for i in (40, 97):
            x = np.linspace(-3, 2, 100).astype(np.float32)
            x[i] = v
            with pytest.raises(of.errors.InvalidArgumentError, match="NaN or inf"):
                P.dynamic_quantize_linear(x)


def test_zero_points_out_of_range_and_mismatched():
    x = np.ones(4, np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="'y_zero_point' = 300 is outside the range of uint8"):
        of.quantization.quantize_linear(x, 0.5, 300)
    with pytest.raises(of.errors.InvalidArgumentError, match="'y_zero_point' = -129 is outside the range of int8"):
        of.quantization.quantize_linear(x, 0.5, -129, dtype="int8")
    with pytest.raises(of.errors.InvalidArgumentError, match="'x_zero_point' = 256"):
        of.quantization.dequantize_linear(np.ones(4, np.uint8), 0.5, 256)
    with pytest.raises(of.errors.InvalidArgumentError, match="QuantizeLinear: argument 'y_zero_point' must have"):
        P.quantize_linear(x, np.float32(1), np.zeros(2, np.uint8))
    with pytest.raises(of.errors.InvalidArgumentError, match="QuantizeLinear: argument 'y_scale' has 3 values"):
        P.quantize_linear(np.ones((2, 4), np.float32), np.ones(3, np.float32), np.zeros(3, np.uint8), axis=1)
    with pytest.raises(of.errors.InvalidArgumentError, match="QuantizeLinear: attr 'axis'"):
        P.quantize_linear(x, np.ones(4, np.float32), np.zeros(4, np.uint8), axis=3)
    # Through the helpers the zero point takes the type asked for, so int8 128 is out of range too.
    np.testing.assert_array_equal(of.quantization.quantize_linear(x, 0.5, 127, dtype="int8").numpy(), [127] * 4)


def test_conv_errors_name_the_argument():
    x, w = np.zeros((1, 4, 5, 5), np.uint8), np.zeros((6, 3, 3, 3), np.int8)
    z8, zs = np.zeros((), np.uint8), np.zeros((), np.int8)
    with pytest.raises(of.errors.InvalidArgumentError, match="ConvInteger: argument 'w'"):
        P.conv_integer(x, w, z8, zs)
    with pytest.raises(of.errors.InvalidArgumentError, match="ConvInteger: argument 'x_zero_point' must be a scalar"):
        P.conv_integer(x, np.zeros((6, 4, 3, 3), np.int8), np.zeros(4, np.uint8), zs)
    with pytest.raises(of.errors.InvalidArgumentError, match="QLinearConv: argument 'bias'"):
        P.q_linear_conv(x, np.float32(1), z8, np.zeros((6, 4, 3, 3), np.int8), np.float32(1), zs, np.float32(1), z8,
                        np.zeros(5, np.int32))


def test_no_gradients_and_graph_shapes():
    x = of.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    y = P.dequantize_linear(P.quantize_linear(x, np.float32(0.1), np.zeros((), np.int8)), np.float32(0.1),
                            np.zeros((), np.int8))
    assert not y.requires_grad
    g = of.Graph()
    with g.as_default():
        p = of.placeholder("float32", shape=[None, 5])
        q = P.quantize_linear(p, np.ones(5, np.float32), np.zeros(5, np.uint8), axis=-1)
        yq, s, z = P.dynamic_quantize_linear(p)
        mm = P.mat_mul_integer(yq, np.zeros((5, 7), np.int8), z, np.zeros((), np.int8))
    assert list(q.shape) == [None, 5] and list(s.shape) == [] and list(mm.shape) == [None, 7]
    out = of.Session(g).run([q, mm], {p: np.full((3, 5), 2.0, np.float32)})
    np.testing.assert_array_equal(np.asarray(out[0]), np.full((3, 5), 2, np.uint8))
    assert np.asarray(out[1]).shape == (3, 7)
