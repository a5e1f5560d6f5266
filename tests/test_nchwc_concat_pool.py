"""MaxPool2DNchwc and Conv2DNchwcConcat (issue 23: SqueezeNet's fire modules blocked end to end) against numpy:
the blocked pool against MaxPool2D's NCHW rule (numpy windows), the blocked Concat of convs against the
separate Conv2DNchwc outputs concatenated along the block axis; and their bad-input errors."""
import numpy as np
import pytest

import opforge as of
from opforge import errors
from opforge import ops as P
from opforge.onnx._layout_nchwc import from_nchwc, layout_bias, layout_filter, to_nchwc


def _np_max_pool(x, k, s, p, d, ceil_mode):
    """numpy MaxPool over NCHW x: -inf padding, NaN wins, PyTorch's ceil_mode rule."""
    n, c, h, w = x.shape
    out = []
    for axis, size in ((0, h), (1, w)):
        eff = (k[axis] - 1) * d[axis] + 1
        padded = size + p[axis] + p[axis + 2]
        o = (padded - eff + (s[axis] - 1 if ceil_mode else 0)) // s[axis] + 1
        if ceil_mode and (o - 1) * s[axis] >= size + p[axis]:
            o -= 1
        out.append(o)
    y = np.full((n, c, out[0], out[1]), -np.inf, np.float32)
    nan = np.zeros(y.shape, bool)
    for oy in range(out[0]):
        for ox in range(out[1]):
            for r in range(k[0]):
                iy = oy * s[0] - p[0] + r * d[0]
                if not 0 <= iy < h:
                    continue
                for t in range(k[1]):
                    ix = ox * s[1] - p[1] + t * d[1]
                    if 0 <= ix < w:
                        v = x[:, :, iy, ix]
                        y[:, :, oy, ox] = np.maximum(y[:, :, oy, ox], np.nan_to_num(v, nan=-np.inf))
                        nan[:, :, oy, ox] |= np.isnan(v)
    y[nan] = np.nan
    return y


@pytest.mark.parametrize("block", [8, 16])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", [
    ((1, 96, 109, 109), [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], True),    # SqueezeNet's first pool
    ((2, 20, 27, 27), [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], True),      # 27 -> 13, lanes past 20 padded
    ((1, 16, 12, 13), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False),     # ResNet's pool (pads)
    ((2, 5, 9, 11), [2, 3], [1, 2], [1, 0, 0, 2], [2, 1], True),        # uneven window, pads, dilation
    ((1, 3, 6, 7), [1, 1], [3, 2], [0, 0, 0, 0], [1, 1], False),
])
def test_max_pool_nchwc_matches_numpy(block, shape, k, s, p, d, ceil):
    rng = np.random.default_rng(sum(shape) + block)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 3)] = np.nan  # a NaN in a window wins
    want = _np_max_pool(x, k, s, p, d, ceil)
    y = P.max_pool2d_nchwc(to_nchwc(x, block), ksize=k, block=block, strides=s, pads=p, dilations=d, ceil_mode=ceil)
    got = from_nchwc(y.numpy(), shape[1])
    np.testing.assert_array_equal(got, want)
    # The NCHW op agrees, and the padding lanes (zeros in) stay zeros.
    np.testing.assert_array_equal(got, P.max_pool2d(x, ksize=k, strides=s, pads=p, dilations=d, ceil_mode=ceil).numpy())
    lanes = y.numpy().transpose(0, 1, 4, 2, 3).reshape(shape[0], -1, *y.shape[2:4])[:, shape[1]:]
    assert not lanes.any()


def test_max_pool_nchwc_bad_input():
    x = np.zeros((1, 2, 5, 5, 16), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="MaxPool2DNchwc.*'x'.*lanes"):
        P.max_pool2d_nchwc(x, ksize=[3, 3], block=8)
    with pytest.raises(errors.InvalidArgumentError, match="MaxPool2DNchwc.*'pads'"):
        P.max_pool2d_nchwc(x, ksize=[3, 3], block=16, pads=[3, 0, 0, 0])
    with pytest.raises(errors.InvalidArgumentError, match="MaxPool2DNchwc.*'ksize'"):
        P.max_pool2d_nchwc(x, ksize=[7, 3], block=16)
    with pytest.raises(errors.InvalidArgumentError, match="MaxPool2DNchwc.*'x'.*5-D"):
        P.max_pool2d_nchwc(np.zeros((1, 16, 5, 5), np.float32), ksize=[3, 3], block=16)


def _expand_case(block, c, o1, o3, hw, rng):
    x = np.maximum(rng.standard_normal((2, c, hw, hw)), 0).astype(np.float32)
    w1 = (rng.standard_normal((o1, c, 1, 1)) * 0.3).astype(np.float32)
    w3 = (rng.standard_normal((o3, c, 3, 3)) * 0.1).astype(np.float32)
    b1 = rng.standard_normal(o1).astype(np.float32)
    b3 = rng.standard_normal(o3).astype(np.float32)
    return x, w1, w3, b1, b3


@pytest.mark.parametrize("block", [8, 16])
@pytest.mark.parametrize("c,o1,o3,hw,act", [(16, 64, 64, 13, "relu"), (48, 32, 40, 9, "none"),
                                            (20, 16, 24, 7, "silu"), (32, 128, 128, 27, "relu")])
def test_conv_concat_nchwc_writes_each_conv_in_place(block, c, o1, o3, hw, act):
    rng = np.random.default_rng(c + o1 + hw)
    x, w1, w3, b1, b3 = _expand_case(block, c, o1, o3, hw, rng)
    xb = to_nchwc(x, block)
    f1, f3 = layout_filter(w1, 1, block), layout_filter(w3, 1, block)
    lb1, lb3 = layout_bias(b1, o1, block), layout_bias(b3, o3, block)
    empty = np.zeros(0, np.float32)
    y = P.conv2d_nchwc_concat(xb, [f1, f3], np.concatenate([lb1, lb3]), filter_shapes=[o1, c, 1, 1, o3, c, 3, 3],
                              strides=[1, 1, 1, 1], pads=[0, 0, 0, 0, 1, 1, 1, 1], dilations=[1, 1, 1, 1],
                              block=block, activation=act).numpy()
    a = P.conv2d_nchwc(xb, f1, lb1, empty, empty, filter_shape=[o1, c, 1, 1], block=block, activation=act).numpy()
    b = P.conv2d_nchwc(xb, f3, lb3, empty, empty, filter_shape=[o3, c, 3, 3], block=block, pads=[1, 1, 1, 1],
                       activation=act).numpy()
    np.testing.assert_array_equal(y, np.concatenate([a, b], axis=1))
    # And against numpy's convolution (float64), channels in ONNX's order where o1 fills whole blocks.
    if o1 % block == 0:
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        z3 = sum(np.einsum("nchw,oc->nohw", xp[:, :, r:r + hw, s:s + hw], w3[:, :, r, s].astype(np.float64))
                 for r in range(3) for s in range(3)) + b3.reshape(1, -1, 1, 1)
        z1 = np.einsum("nchw,oc->nohw", x.astype(np.float64), w1[:, :, 0, 0].astype(np.float64)) + b1.reshape(1, -1, 1, 1)
        z = np.concatenate([z1, z3], axis=1)
        want = {"relu": np.maximum(z, 0), "none": z, "silu": z / (1 + np.exp(-z))}[act]
        np.testing.assert_allclose(from_nchwc(y, o1 + o3), want, rtol=1e-4, atol=1e-4)


def test_conv_concat_nchwc_bad_input():
    rng = np.random.default_rng(0)
    x, w1, w3, b1, b3 = _expand_case(16, 16, 16, 16, 5, rng)
    xb = to_nchwc(x, 16)
    f1, f3 = layout_filter(w1, 1, 16), layout_filter(w3, 1, 16)
    bias = np.zeros(32, np.float32)
    kw = dict(filter_shapes=[16, 16, 1, 1, 16, 16, 3, 3], strides=[1, 1, 1, 1], pads=[0, 0, 0, 0, 1, 1, 1, 1],
              dilations=[1, 1, 1, 1], block=16)
    with pytest.raises(errors.InvalidArgumentError, match="Conv2DNchwcConcat.*one size"):
        P.conv2d_nchwc_concat(xb, [f1, f3], bias, **{**kw, "pads": [0] * 8})
    with pytest.raises(errors.InvalidArgumentError, match="Conv2DNchwcConcat.*'filters' item 1"):
        P.conv2d_nchwc_concat(xb, [f1, f1], bias, **kw)
    with pytest.raises(errors.InvalidArgumentError, match="Conv2DNchwcConcat.*'bias'"):
        P.conv2d_nchwc_concat(xb, [f1, f3], np.zeros(20, np.float32), **kw)
    with pytest.raises(errors.InvalidArgumentError, match="Conv2DNchwcConcat.*'filter_shapes'"):
        P.conv2d_nchwc_concat(xb, [f1, f3], bias, **{**kw, "filter_shapes": [16, 16, 1, 1]})
    with pytest.raises(errors.InvalidArgumentError, match="Conv2DNchwcConcat.*'x'"):
        P.conv2d_nchwc_concat(x, [f1, f3], bias, **kw)


def _fires(rng, side=27):
    """Two SqueezeNet fire modules (squeeze 1x1, expand 1x1 + 3x3, Concat) with a ceil-mode MaxPool between
    them, at side x side then half that, and a Relu-ed NCHW input of 64 channels."""
    from onnx import TensorProto, helper, numpy_helper

    def w(*s):
        return (rng.standard_normal(s) * (2.0 / np.prod(s[1:])) ** 0.5).astype(np.float32)

    inits = {"s1": w(16, 64, 1, 1), "sb1": w(16), "e1": w(64, 16, 1, 1), "eb1": w(64), "f1": w(64, 16, 3, 3),
             "fb1": w(64), "s2": w(32, 128, 1, 1), "sb2": w(32), "e2": w(128, 32, 1, 1), "eb2": w(128),
             "f2": w(128, 32, 3, 3), "fb2": w(128)}
    N = helper.make_node
    nodes = [N("Relu", ["x"], ["xr"])]
    for i, src in ((1, "xr"), (2, "m")):
        nodes += [N("Conv", [src, f"s{i}", f"sb{i}"], [f"sq{i}"]), N("Relu", [f"sq{i}"], [f"sr{i}"]),
                  N("Conv", [f"sr{i}", f"e{i}", f"eb{i}"], [f"a{i}"]), N("Relu", [f"a{i}"], [f"ar{i}"]),
                  N("Conv", [f"sr{i}", f"f{i}", f"fb{i}"], [f"b{i}"], pads=[1, 1, 1, 1]),
                  N("Relu", [f"b{i}"], [f"br{i}"]), N("Concat", [f"ar{i}", f"br{i}"], [f"cat{i}"], axis=1)]
        if i == 1:
            nodes.append(N("MaxPool", ["cat1"], ["m"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
    graph = helper.make_graph(nodes, "fires", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [1, 64, side, side])],
                              [helper.make_tensor_value_info("cat2", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])


def test_fire_modules_run_blocked_end_to_end(monkeypatch):
    """The mixed layout runs both fire modules blocked: each Concat of expands is one Conv2DNchwcConcat, the pool
    between them MaxPool2DNchwc, one reorder in (the first squeeze's 16 channels: that conv reads the NCHW input
    and stays NCHW) and one out (the output), no Concat copy; the same values as in NCHW."""
    pytest.importorskip("onnx")
    from opforge.onnx import _importer
    monkeypatch.setenv("OPFORGE_NCHWC_BLOCK", "16")
    rng = np.random.default_rng(5)
    model = _fires(rng)
    x = rng.standard_normal((1, 64, 27, 27)).astype(np.float32)
    monkeypatch.setenv("OPFORGE_NCHWC", "0")
    (want,) = _importer.Program(model).run({"x": x})
    monkeypatch.setenv("OPFORGE_NCHWC", "mixed")
    prog = _importer.Program(model)
    kinds = {}
    for ctx, _, _ in prog.steps:
        kinds[ctx.node.op_type] = kinds.get(ctx.node.op_type, 0) + 1
    assert kinds.get("Conv2DNchwcConcat") == 2 and kinds.get("MaxPool2DNchwc") == 1, kinds
    assert "Concat" not in kinds and "MaxPool" not in kinds, kinds
    assert kinds.get("Conv2DNchwc") == 1 and kinds.get("Conv") == 1, kinds
    assert kinds.get("ReorderToNchwc") == 1 and kinds.get("ReorderFromNchwc") == 1, kinds
    for _ in range(2):  # eager, then the compiled graph
        (got,) = prog.run({"x": x})
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # An expand that something else reads too keeps its own output: the blocked Concat copies it.
    from onnx import helper
    model.graph.node.append(helper.make_node("Identity", ["ar2"], ["extra"]))
    model.graph.output.append(helper.make_tensor_value_info("extra", 1, None))
    kinds = [ctx.node.op_type for ctx, _, _ in _importer.Program(model).steps]
    assert kinds.count("Conv2DNchwcConcat") == 1 and kinds.count("Concat") == 1, kinds
