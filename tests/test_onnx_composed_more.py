"""Composed ONNX converters against onnxruntime on random inputs, over the
attribute combinations the backend cases leave out: GridSample (modes x
padding modes x align_corners, grids past the borders), LpPool (p, ceil_mode,
auto_pad, dilations), Col2Im, ReverseSequence, CumProd (against numpy),
Resize (cubic/antialias/axes), BitShift and narrow-int arithmetic."""

import os

import numpy as np
import pytest

# Under the sanitizer build (.ci/sanitize) these would test onnx's and onnxruntime's
# C++ under an ASan preload, not opforge's (the op tests cover the kernels there).
if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge.onnx  # noqa: E402

RNG = np.random.default_rng(24)


def _check(node, feeds, inits=(), opset=20, rtol=1e-5, atol=1e-5, oracle="onnxruntime"):
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for k, v in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output]
    g = helper.make_graph([node], "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if oracle == "onnxruntime":
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    else:  # onnx's reference implementation (slow, pure Python: small inputs only)
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(model).run(None, feeds)
    got = opforge.onnx.run(model, feeds)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample(mode, padding, align):
    x = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    grid = RNG.uniform(-1.4, 1.4, (2, 6, 7, 2)).astype(np.float32)  # past the borders too
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=align)
    # Cubic with border padding: onnxruntime (as PyTorch) does not clamp the source
    # coordinate before taking the 4 taps; ONNX's reference, which opforge follows, does.
    oracle = "reference" if (mode, padding) == ("cubic", "border") else "onnxruntime"
    _check(node, {"x": x, "grid": grid}, rtol=1e-4, atol=1e-4, oracle=oracle)


@pytest.mark.parametrize("attrs", [dict(kernel_shape=[3, 2], p=3, ceil_mode=1, strides=[2, 2]),
                                   dict(kernel_shape=[2, 2], auto_pad="SAME_LOWER", strides=[2, 1]),
                                   dict(kernel_shape=[2, 3], dilations=[2, 1], pads=[1, 0, 0, 1]),
                                   dict(kernel_shape=[3], p=1)])
def test_lp_pool(attrs):
    shape = (2, 3, 7) if len(attrs["kernel_shape"]) == 1 else (2, 3, 7, 6)
    x = RNG.standard_normal(shape).astype(np.float32)
    _check(helper.make_node("LpPool", ["x"], ["y"], **attrs), {"x": x}, opset=18, rtol=1e-4)


def test_col2im_with_pads_strides_dilations():
    x = RNG.standard_normal((2, 3 * 4, 8)).astype(np.float32)  # 2x2 blocks at 2x4 positions of the padded 4x6
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=[2, 1], dilations=[1, 2],
                            pads=[1, 0, 0, 1])
    _check(node, {"x": x}, [("image", np.array([3, 5], np.int64)), ("block", np.array([2, 2], np.int64))],
           opset=18)


@pytest.mark.parametrize("batch_axis, time_axis", [(0, 1), (1, 0)])
def test_reverse_sequence(batch_axis, time_axis):
    x = RNG.standard_normal((4, 4, 3) if batch_axis else (4, 5, 3)).astype(np.float32)
    lens = np.array([1, 4, 2, 3], np.int64)
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis)
    _check(node, {"x": x, "lens": lens}, opset=10)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_cumprod_matches_numpy(exclusive, reverse, dtype):
    x = RNG.integers(-3, 4, (3, 7)).astype(dtype)
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(
        x.dtype), x.shape)], [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
        [numpy_helper.from_array(np.array(1, np.int64), "axis")])
    (got,) = opforge.onnx.run(helper.make_model(g, opset_imports=[helper.make_opsetid("", 26)]), [x])
    v = x[:, ::-1] if reverse else x
    if exclusive:
        v = np.concatenate([np.ones_like(v[:, :1]), v[:, :-1]], axis=1)
    want = np.cumprod(v, axis=1)
    np.testing.assert_array_equal(got, want[:, ::-1] if reverse else want)


@pytest.mark.parametrize("attrs, scales, sizes", [
    (dict(mode="cubic", antialias=1, coordinate_transformation_mode="half_pixel"), [1, 1, 0.6, 0.45], None),
    (dict(mode="linear", antialias=1, axes=[3, 2]), None, [3, 5]),
    (dict(mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5, coordinate_transformation_mode="asymmetric"),
     [1, 1, 1.7, 2.3], None),
    (dict(mode="nearest", nearest_mode="ceil", coordinate_transformation_mode="half_pixel_symmetric"),
     [1, 1, 0.7, 1.6], None),
])
def test_resize_modes(attrs, scales, sizes):
    x = RNG.standard_normal((1, 2, 7, 9)).astype(np.float32)
    inits = [("roi", np.zeros(0, np.float32))]
    names = ["x", "roi"]
    if scales is not None:
        inits.append(("scales", np.array(scales, np.float32)))
        names.append("scales")
    else:
        inits += [("scales", np.zeros(0, np.float32)), ("sizes", np.array(sizes, np.int64))]
        names += ["scales", "sizes"]
    _check(helper.make_node("Resize", names, ["y"], **attrs), {"x": x}, inits, opset=19, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(dtype, direction):
    bits = np.dtype(dtype).itemsize * 8
    x = RNG.integers(0, np.iinfo(dtype).max, 20, dtype=dtype, endpoint=True)
    y = RNG.integers(0, bits, 20).astype(dtype)
    _check(helper.make_node("BitShift", ["x", "y"], ["z"], direction=direction), {"x": x, "y": y}, opset=18)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64])
def test_narrow_int_arithmetic_wraps(op, dtype):
    if op == "Div" and dtype == np.uint64:
        pytest.skip("uint64 Div is refused (see onnx_backend_skips.txt)")
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, 30, dtype=dtype, endpoint=True)
    y = RNG.integers(info.min, info.max, 30, dtype=dtype, endpoint=True)
    if op == "Div":
        y[y == 0] = 1
        if info.min < 0:  # INT_MIN / -1 overflows: numpy and onnxruntime differ there
            x[x == info.min] += 1
    # onnxruntime has no 16-bit Max/Min: numpy is the oracle there (exact, as the ops are).
    oracle = "reference" if op in ("Max", "Min") and dtype in (np.int16, np.uint16) else "onnxruntime"
    _check(helper.make_node(op, ["x", "y"], ["z"]), {"x": x, "y": y}, opset=14, oracle=oracle)


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_tensor_scatter(mode, dtype):
    past = RNG.standard_normal((3, 2, 6, 4)).astype(dtype)
    update = RNG.standard_normal((3, 2, 3, 4)).astype(dtype)
    idx = np.array([0, 2, 5 if mode == "circular" else 3], np.int64)
    node = helper.make_node("TensorScatter", ["past", "update", "idx"], ["present"], mode=mode, axis=2)
    _check(node, {"past": past, "update": update, "idx": idx}, opset=24, rtol=0, atol=0)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("score_threshold", [None, 0.3])
def test_non_max_suppression(center, score_threshold):
    rng = np.random.default_rng(7 + center)
    xy = rng.uniform(0, 10, (2, 30, 2))
    wh = rng.uniform(1, 4, (2, 30, 2))
    boxes = (np.concatenate([xy, wh], -1) if center else np.concatenate([xy, xy + wh], -1)).astype(np.float32)
    scores = rng.uniform(0, 1, (2, 3, 30)).astype(np.float32)
    inits = [("k", np.array([6], np.int64)), ("iou", np.array([0.4], np.float32))]
    names = ["boxes", "scores", "k", "iou"]
    if score_threshold is not None:
        inits.append(("thr", np.array([score_threshold], np.float32)))
        names.append("thr")
    node = helper.make_node("NonMaxSuppression", names, ["sel"], center_point_box=center)
    _check(node, {"boxes": boxes, "scores": scores}, inits, opset=11, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("is_sorted", [0, 1])
def test_unique(axis, is_sorted):
    x = RNG.integers(0, 3, (6, 4, 2)).astype(np.float32)
    x[3] = x[1]  # repeated rows along axis 0
    attrs = {"sorted": is_sorted} if axis is None else {"sorted": is_sorted, "axis": axis}
    node = helper.make_node("Unique", ["x"], ["y", "indices", "inverse", "counts"], **attrs)
    _check(node, {"x": x}, opset=11, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("lengths", [(1, 3, 2), (2, 2, 1)])
def test_tfidf_vectorizer(mode, lengths):
    lo, hi, skip = lengths
    x = RNG.integers(0, 5, (3, 9)).astype(np.int32)
    pool = [1, 3, 4, 2, 3, 3, 1, 0, 4, 1, 3, 2, 0, 4, 4]  # 3 unigrams, 3 bigrams, 2 trigrams
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=lo, max_gram_length=hi,
                            max_skip_count=skip, ngram_counts=[0, 3, 9], ngram_indexes=[7, 0, 2, 1, 5, 3, 6, 4],
                            pool_int64s=pool, weights=[0.5, 1.5, 2.0, 1.0, 0.25, 3.0, 1.25, 0.75])
    _check(node, {"x": x}, opset=9, rtol=1e-6, atol=0)
