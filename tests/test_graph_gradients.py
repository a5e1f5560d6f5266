"""of.gradients: gradient nodes in a graph from the same declarations as the
eager tape; results equal the eager gradients."""
import numpy as np
import pytest

import opforge as of


def test_gradients_of_an_mlp_equal_the_eager_ones():
    rng = np.random.default_rng(3)
    xv, w1v, w2v = rng.normal(size=(4, 5)), rng.normal(size=(5, 6)), rng.normal(size=(6, 3))
    onehot = np.eye(3)[[0, 2, 1, 2]]

    def loss(x, w1, w2):
        logits = of.matmul(of.tanh(of.matmul(x, w1)), w2)
        return -of.sum(onehot * of.log_softmax(logits)) / 4.0

    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, shape=[4, 5], name="x")
        w1, w2 = of.constant(w1v), of.constant(w2v)
        y = loss(x, w1, w2)
        gw1, gw2 = of.gradients(y, [w1, w2])
    assert gw1.shape == (5, 6) and gw2.shape == (6, 3)
    with of.Session(g) as sess:
        got = sess.run([gw1, gw2], feed_dict={x: xv})
    want = of.grad(lambda a, b: loss(xv, a, b), argnums=(0, 1))(w1v, w2v)
    for gv, wv in zip(got, want):
        np.testing.assert_allclose(gv, wv.numpy(), rtol=1e-12)


def test_broadcast_inputs_get_gradients_of_their_own_shape():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[2, 3])
        b = of.placeholder(of.float32, shape=[3])
        (gb,) = of.gradients(of.sum(x * b), b)
    with of.Session(g) as sess:
        out = sess.run(gb, {x: np.ones((2, 3), np.float32), b: np.ones(3, np.float32)})
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])
    assert out.dtype == np.float32


def test_unconnected_inputs_get_none_and_eager_tensors_are_refused():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, shape=[2])
        z = of.placeholder(of.float64, shape=[2])
        assert of.gradients(of.sum(of.exp(x)), [x, z])[1] is None
    with pytest.raises(of.errors.InvalidArgumentError, match="graph tensors"):
        of.gradients(of.tensor([1.0]), of.tensor([1.0]))
