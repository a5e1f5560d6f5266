"""Conv2D, its backward ops and the pooling ops against numpy references (vision_reference.py) over random
shapes; bad input at eager and graph-build time; the layers and functional forms."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
import vision_reference as ref

TOL = {np.float32: dict(rtol=2e-4, atol=2e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


@st.composite
def conv_case(draw):
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    s = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    d = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    p = [draw(st.integers(0, 4)) for _ in range(4)]  # pads past the kernel too (a tap wholly in the pad)
    eh, ew = (kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1
    h = draw(st.integers(max(1, eh - p[0] - p[2]), eh + 5))
    w = draw(st.integers(max(1, ew - p[1] - p[3]), ew + 5))
    n = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, groups * cg, h, w)).astype(dtype)
    f = rng.standard_normal((groups * og, cg, kh, kw)).astype(dtype)
    return x, f, dict(strides=s, pads=p, dilations=d, groups=groups), rng


@settings(max_examples=60, deadline=None)
@given(conv_case())
def test_conv2d_and_backprops_match_numpy(case):
    x, f, attrs, rng = case
    tol = TOL[x.dtype.type]
    y = of.conv2d(x, f, **attrs).numpy()
    np.testing.assert_allclose(y, ref.conv2d(x, f, **attrs), **tol)
    dy = rng.standard_normal(y.shape).astype(x.dtype)
    np.testing.assert_allclose(of.raw_ops.conv2d_backprop_input(x, f, dy, **attrs).numpy(),
                               ref.conv2d_backprop_input(x, f, dy, **attrs), **tol)
    np.testing.assert_allclose(of.raw_ops.conv2d_backprop_filter(x, f, dy, **attrs).numpy(),
                               ref.conv2d_backprop_filter(x, f, dy, **attrs), **tol)


def test_stride_two_with_taps_wholly_in_the_right_pad():
    # im2col's vectorized stride-2 gather once took a negative length for a tap that starts past
    # the input row's end, and wrote before the column row (a wrong output, and out of bounds).
    rng = np.random.default_rng(2)
    for w in range(1, 5):
        for kw in range(1, 8):
            for pl in range(0, 4):
                for pr in range(0, 5):
                    if w + pl + pr < kw:
                        continue
                    x = rng.standard_normal((1, 2, 2, w)).astype(np.float32)
                    f = rng.standard_normal((2, 2, 1, kw)).astype(np.float32)
                    attrs = dict(strides=[1, 2], pads=[0, pl, 0, pr])
                    np.testing.assert_allclose(of.conv2d(x, f, **attrs).numpy(), ref.conv2d(x, f, **attrs),
                                               rtol=1e-5, atol=1e-5, err_msg=str((w, kw, pl, pr)))


def test_depthwise_pointwise_and_threaded_paths():
    rng = np.random.default_rng(1)
    cases = [((8, 16, 12, 12), (16, 1, 3, 3), dict(pads=[1, 1, 1, 1], groups=16)),        # depthwise, direct
             ((2, 32, 9, 9), (64, 1, 3, 3), dict(strides=[2, 2], groups=32)),              # channel multiplier 2
             ((8, 16, 10, 10), (24, 16, 1, 1), {}),                                        # pointwise = GEMM
             ((1, 64, 20, 20), (64, 64, 3, 3), dict(pads=[1, 1, 1, 1])),                   # one threaded GEMM
             ((16, 8, 11, 7), (8, 4, 3, 2), dict(strides=[1, 2], dilations=[2, 1], groups=2))]  # items in parallel
    for xs, fs, attrs in cases:
        x, f = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(fs).astype(np.float32)
        y = of.conv2d(x, f, **attrs).numpy()
        np.testing.assert_allclose(y, ref.conv2d(x, f, **attrs), rtol=1e-4, atol=1e-3)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        np.testing.assert_allclose(of.raw_ops.conv2d_backprop_input(x, f, dy, **attrs).numpy(),
                                   ref.conv2d_backprop_input(x, f, dy, **attrs), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(of.raw_ops.conv2d_backprop_filter(x, f, dy, **attrs).numpy(),
                                   ref.conv2d_backprop_filter(x, f, dy, **attrs), rtol=1e-4, atol=2e-3)


@st.composite
def pool_case(draw, dilated=True):
    k = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    s = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    d = [draw(st.integers(1, 2)), draw(st.integers(1, 2))] if dilated else [1, 1]
    eff = [(k[i] - 1) * d[i] + 1 for i in range(2)]
    p = [draw(st.integers(0, eff[i % 2] - 1)) for i in range(4)]
    h = draw(st.integers(max(1, eff[0] - p[0] - p[2]), eff[0] + 5))
    w = draw(st.integers(max(1, eff[1] - p[1] - p[3]), eff[1] + 5))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    x = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).standard_normal((2, 3, h, w)).astype(dtype)
    attrs = dict(ksize=k, strides=s, pads=p, ceil_mode=draw(st.booleans()))
    if dilated:
        attrs["dilations"] = d
    return x, attrs


@settings(max_examples=60, deadline=None)
@given(pool_case())
def test_max_pool_matches_numpy(case):
    x, attrs = case
    y = of.max_pool2d(x, **attrs).numpy()
    np.testing.assert_array_equal(y, ref.max_pool2d(x, **attrs))
    # Each window's gradient goes to one input pixel (a dilated window may hold only padding: -inf, none).
    dy = np.ones_like(y)
    dx = of.raw_ops.max_pool2d_grad(x, dy, **attrs).numpy()
    assert dx.shape == x.shape and np.isclose(dx.sum(), np.isfinite(y).sum())


@settings(max_examples=60, deadline=None)
@given(pool_case(dilated=False), st.booleans())
def test_avg_pool_matches_numpy(case, include_pad):
    x, attrs = case
    attrs["count_include_pad"] = include_pad
    tol = TOL[x.dtype.type]
    y = of.avg_pool2d(x, **attrs).numpy()
    np.testing.assert_allclose(y, ref.avg_pool2d(x, **attrs), **tol)
    # AvgPool2DGrad is AvgPool2D's adjoint: <AvgPool(x), dy> = <x, AvgPoolGrad(dy)>.
    dy = np.random.default_rng(0).standard_normal(y.shape).astype(x.dtype)
    dx = of.raw_ops.avg_pool2d_grad(x, dy, **attrs).numpy()
    np.testing.assert_allclose(np.vdot(y.astype(np.float64), dy), np.vdot(x.astype(np.float64), dx), rtol=1e-4)


def test_avg_pool_window_of_padding_only_is_nan():
    # Only an empty input leaves a window without a real pixel (pads < kernel): its mean is 0 / 0, as numpy's
    # mean of nothing (the kernel used to write 0; hypothesis found it in test_bad_input).
    x = np.zeros((1, 1, 0, 0), np.float32)
    attrs = dict(ksize=[3, 3], strides=[1, 1], pads=[1, 1, 2, 2])
    assert np.isnan(of.avg_pool2d(x, **attrs, count_include_pad=False).numpy()).all()
    assert (of.avg_pool2d(x, **attrs, count_include_pad=True).numpy() == 0).all()
    y = of.avg_pool2d(np.zeros((1, 1, 0, 4), np.float32), ksize=[2, 2], strides=[1, 1], pads=[1, 0, 1, 0],
                      count_include_pad=False).numpy()
    assert y.shape == (1, 1, 1, 3) and np.isnan(y).all()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 4), st.integers(1, 4))
def test_adaptive_avg_pool_matches_numpy(h, w, oh, ow):
    x = np.random.default_rng(h * 10 + w).standard_normal((2, 3, h, w))
    y = of.adaptive_avg_pool2d(x, output_size=[oh, ow]).numpy()
    np.testing.assert_allclose(y, ref.adaptive_avg_pool2d(x, [oh, ow]), rtol=1e-12)
    dy = np.random.default_rng(1).standard_normal(y.shape)
    dx = of.raw_ops.adaptive_avg_pool2d_grad(x, dy, output_size=[oh, ow]).numpy()
    np.testing.assert_allclose(np.vdot(y, dy), np.vdot(x, dx), rtol=1e-10)


def test_max_pool_gradient_goes_to_the_window_maximum():
    x = np.array([[[[1., 5., 2.], [3., 4., 9.], [0., 7., 8.]]]])
    dx = of.raw_ops.max_pool2d_grad(x, np.array([[[[10., 20.], [30., 40.]]]]), ksize=[2, 2]).numpy()
    np.testing.assert_array_equal(dx[0, 0], [[0, 10, 0], [0, 0, 60], [0, 30, 0]])


BAD_CONV = [
    ((1, 3, 5, 5), (4, 1, 3, 3), dict(groups=2), "groups"),
    ((1, 4, 5, 5), (3, 2, 3, 3), dict(groups=2), "groups"),
    ((1, 4, 5, 5), (4, 3, 3, 3), {}, "filter"),
    ((1, 3, 2, 2), (4, 3, 3, 3), {}, "larger than the padded input"),
    ((1, 3, 5, 5), (4, 3, 3, 3), dict(pads=[-1, 0, 0, 0]), "pads"),
    ((1, 3, 5, 5), (4, 3, 3, 3), dict(pads=[1, 1]), "pads"),
    ((1, 3, 5, 5), (4, 3, 3, 3), dict(strides=[0, 1]), "strides"),
    ((1, 3, 5, 5), (4, 3, 3, 3), dict(dilations=[1, 0]), "dilations"),
    ((3, 5, 5), (4, 3, 3, 3), {}, "'x'"),
]


@pytest.mark.parametrize("xs,fs,attrs,word", BAD_CONV)
def test_conv_bad_input_names_op_and_argument(xs, fs, attrs, word):
    x, f = np.zeros(xs, np.float32), np.zeros(fs, np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="Conv2D") as e:
        of.conv2d(x, f, **attrs)
    assert word in str(e.value)
    with of.Graph().as_default():  # rejected while the graph is built, before any run
        with pytest.raises(of.errors.InvalidArgumentError, match="Conv2D") as e:
            of.conv2d(of.placeholder(of.float32, list(xs)), of.placeholder(of.float32, list(fs)), **attrs)
        assert word in str(e.value)


@pytest.mark.parametrize("attrs,word", [
    (dict(ksize=[3, 3], pads=[3, 0, 0, 0]), "pads"), (dict(ksize=[9, 1]), "ksize"),
    (dict(ksize=[2, 2], strides=[0, 1]), "strides"), (dict(ksize=[2]), "ksize")])
def test_pool_bad_input_names_op_and_argument(attrs, word):
    x = np.zeros((1, 2, 5, 5), np.float32)
    for fn, name in ((of.max_pool2d, "MaxPool2D"), (of.avg_pool2d, "AvgPool2D")):
        with pytest.raises(of.errors.InvalidArgumentError, match=name) as e:
            fn(x, **attrs)
        assert word in str(e.value)


def test_graph_mode_conv_pool_run():
    rng = np.random.default_rng(3)
    xv, fv = rng.standard_normal((2, 3, 8, 8)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2, 3, 8, 8], name="x")
        y = of.max_pool2d(of.conv2d(x, fv, pads=[1, 1, 1, 1]), ksize=[2, 2], strides=[2, 2])
        assert list(y.shape) == [2, 4, 4, 4]
    with of.Session(g) as sess:
        out = sess.run(y, {x: xv})
    np.testing.assert_allclose(out, ref.max_pool2d(ref.conv2d(xv, fv, pads=[1, 1, 1, 1]), [2, 2], [2, 2]),
                               rtol=1e-4, atol=1e-4)
