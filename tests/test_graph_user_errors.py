"""The mistakes a TensorFlow 1 port makes in graph mode, and what they say
(issue 26 item 9): symbolic tensors in eager ops, feeds of another dtype,
placeholders without a shape."""

import numpy as np
import pytest

import opforge as of
from opforge import errors


def _graph():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2], name="x")
        y = x * 2.0
    return g, x, y


@pytest.mark.parametrize("call", [
    lambda y: of.add(y, 1.0),
    lambda y: of.add(np.ones(2, np.float32), y),
    lambda y: y + np.ones(2, np.float32),
    lambda y: of.exp(y),
])
def test_symbolic_tensor_in_an_eager_op_names_its_graph_and_session_run(call):
    g, _, y = _graph()
    with pytest.raises(errors.InvalidArgumentError) as e:
        call(y)
    msg = str(e.value)
    assert "'mul:0'" in msg.lower() and "symbolic tensor of graph" in msg and repr(g) in msg
    assert "Session(graph).run" in msg and "__dlpack__" not in msg


def test_safe_feeds_are_converted_to_the_placeholder_dtype():
    g, x, y = _graph()
    with of.Session(g) as sess:
        for value in (np.array([1.5, 2.0]), np.array([1, 2], np.int64), np.array([1, 2], np.int32),
                      np.array([True, False]), np.float64(3.0), np.array([0.25, 1e30])):
            out = sess.run(y, {x: np.broadcast_to(value, (2,))})
            assert out.dtype == np.float32
            np.testing.assert_array_equal(out, np.broadcast_to(value, (2,)).astype(np.float32) * 2)


def test_feeds_into_int_placeholders():
    g = of.Graph()
    with g.as_default():
        i = of.placeholder(of.int32, [3], name="ids")
        j = i + 1
    with of.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(j, {i: np.array([1, 2, 3], np.int64)}), [2, 3, 4])
        with pytest.raises(errors.InvalidArgumentError, match=r"'ids'.*float data would be truncated"):
            sess.run(j, {i: np.array([1.5, 2, 3])})
        with pytest.raises(errors.InvalidArgumentError, match=r"'ids'.*outside the range of int32"):
            sess.run(j, {i: np.array([1, 2, 2**40])})


@pytest.mark.parametrize("value, why", [
    (np.array([1e300, 1.0]), "beyond the range of float32"),
    (np.array(["a", "b"]), "not a numeric dtype"),
])
def test_unsafe_feeds_are_refused_naming_the_placeholder(value, why):
    g, x, y = _graph()
    with of.Session(g) as sess, pytest.raises(errors.InvalidArgumentError, match=f"placeholder 'x'.*{why}"):
        sess.run(y, {x: value})


def test_placeholder_without_a_shape_has_unknown_rank():
    g = of.Graph()
    with g.as_default():
        u = of.placeholder(of.float32, name="u")
        assert u.shape is None and u.ndim is None and u.size is None
        total = of.sum(u * 3.0)
        shifted = u + np.arange(3, dtype=np.float32)
        assert total.shape is None and total.dtype == of.float32
        with pytest.raises(errors.InvalidArgumentError, match="Add"):  # dtypes are still checked at once
            of.placeholder(of.int64, name="i") + np.ones(3, np.uint64)
    with of.Session(g) as sess:
        for shape in [(), (3,), (2, 3), (1, 2, 3)]:
            value = np.random.default_rng(0).random(shape).astype(np.float32)
            t, s = sess.run([total, shifted], {u: value})
            np.testing.assert_allclose(t, (value * 3).sum(), rtol=1e-6)
            np.testing.assert_array_equal(s, value + np.arange(3, dtype=np.float32))
        np.testing.assert_allclose(sess.run(total, {u: np.ones(7, np.float32)}), 21.0)
        with pytest.raises(errors.InvalidArgumentError, match="cannot be broadcast"):
            sess.run(shifted, {u: np.ones(4, np.float32)})
