"""Placeholders with unknown dimensions (None): shapes propagate as None
through the C++ shape functions, and feeds are checked and re-inferred at
Session.run (issue 10)."""
import numpy as np
import pytest

import opforge as of
from opforge import errors


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_batch_dim_unknown_runs_at_any_batch():
    rng = np.random.default_rng(0)
    w = (rng.random((784, 10), dtype=np.float32) - 0.5) / 28
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[None, 784], name="x")
        y = of.softmax(x @ of.constant(w))
    assert x.shape == (None, 784) and y.shape == (None, 10) and y.size is None
    with of.Session(g) as sess:
        for batch in (1, 7, 64, 101):  # 101: the build's stand-in size, so no re-inference
            xv = rng.random((batch, 784), dtype=np.float32)
            out = sess.run(y, {x: xv})
            assert out.shape == (batch, 10)
            np.testing.assert_allclose(out, _softmax(xv @ w), rtol=1e-5, atol=1e-6)


def test_unknown_dims_propagate_through_shape_functions():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 784])
        assert of.reshape(x, [-1, 28, 28]).shape == (None, 28, 28)
        assert of.sum(x, [1]).shape == (None,)
        assert of.sum(x, [0]).shape == (784,)
        assert of.transpose(x, [1, 0]).shape == (784, None)
        a = of.placeholder(of.float64, [None, 3, None])
        assert (a * 2.0).shape == (None, 3, None)
        assert of.sum(a, [0, 2]).shape == (3,)
        assert (of.placeholder(of.float32, [None] * 8) + 1.0).shape == (None,) * 8


def test_an_op_that_fits_only_some_sizes_fails_at_run_naming_the_node():
    # An unknown dim broadcast against a known one takes its size (it may be
    # computed at run time: one graph for every size); a run whose fed dim
    # differs fails before any kernel, naming the node.
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 4])
        y = of.add(x, np.ones((3, 4), np.float32))
        assert tuple(y.shape) == (3, 4)
        with pytest.raises(errors.InvalidArgumentError, match="unknown dimension"):
            of.reshape(x, [8, 4])
    sess = of.Session(g)
    np.testing.assert_array_equal(sess.run(y, {x: np.zeros((3, 4), np.float32)}), np.ones((3, 4)))
    with pytest.raises(errors.InvalidArgumentError, match=r"node 'Add.*cannot be broadcast"):
        sess.run(y, {x: np.zeros((2, 4), np.float32)})


@pytest.mark.parametrize("bad", [np.ones((2, 5), np.float32), np.ones((2, 4, 1), np.float32),
                                 np.ones((4,), np.float32)])
def test_a_feed_must_fit_the_known_dims(bad):
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 4], name="x")
        y = x * 2.0
    with pytest.raises(errors.InvalidArgumentError, match=r"placeholder 'x.*does not fit \[None, 4\]"):
        of.Session(g).run(y, {x: bad})


def test_two_unknown_dims_that_disagree_fail_at_run_before_any_kernel():
    g = of.Graph()
    with g.as_default():
        a = of.placeholder(of.float32, [None])
        b = of.placeholder(of.float32, [None])
        y = a + b
    assert y.shape == (None,)
    sess = of.Session(g)
    np.testing.assert_array_equal(sess.run(y, {a: np.arange(3, dtype=np.float32), b: np.ones(3, np.float32)}),
                                  np.arange(3) + 1)
    with pytest.raises(errors.InvalidArgumentError, match="fed shapes"):
        sess.run(y, {a: np.ones(3, np.float32), b: np.ones(5, np.float32)})


@pytest.mark.parametrize("shape", ["ab", [2, "x"], [1.5], [True, 2], 7])  # None: unknown rank
def test_bad_placeholder_shapes_are_refused(shape):
    g = of.Graph()
    with g.as_default(), pytest.raises(errors.InvalidArgumentError, match="placeholder"):
        of.placeholder(of.float32, shape)


def test_gradients_through_an_unknown_batch_dim():
    rng = np.random.default_rng(1)
    wv = rng.random(3)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, [None, 3])
        w = of.placeholder(of.float64, [3])
        loss = of.sum(x * w * w, [0, 1])
        (gw,) = of.gradients(loss, [w])
    xv = rng.random((5, 3))
    np.testing.assert_allclose(of.Session(g).run(gw, {x: xv, w: wv}), 2 * wv * xv.sum(axis=0), rtol=1e-12)
