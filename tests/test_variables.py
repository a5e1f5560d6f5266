"""of.Variable in graphs and in eager mode (issue 26 item 2)."""
import numpy as np
import pytest

import opforge as of


def test_graph_variable_updates_and_initializer():
    g = of.Graph()
    with g.as_default():
        v = of.Variable([1.0, 2.0], name="v")
        assert isinstance(v, of.Variable) and v.name == "v" and v.shape == (2,) or v.shape == [2]
        doubled = v * 2.0
        set_ = v.assign([5.0, 6.0])
        add = v.assign_add([1.0, 1.0])
        sub = v.assign_sub([0.5, 0.5])
        init = of.global_variables_initializer()
    assert v.dtype == of.float32
    with of.Session(g) as sess:
        sess.run(init)
        np.testing.assert_array_equal(sess.run(doubled), [2.0, 4.0])
        np.testing.assert_array_equal(sess.run(set_), [5.0, 6.0])
        np.testing.assert_array_equal(sess.run(add), [6.0, 7.0])
        np.testing.assert_array_equal(sess.run(sub), [5.5, 6.5])
        np.testing.assert_array_equal(sess.run(v.read_value()), [5.5, 6.5])
        sess.run(init)  # re-initializing restores the initial value
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])


def test_graph_variable_names_are_unique_and_collections_track_them():
    g = of.Graph()
    with g.as_default():
        a = of.Variable(np.zeros(2, np.float32), name="w")
        b = of.Variable(np.zeros(2, np.float32), name="w")
        c = of.Variable(np.int64(0), name="count", trainable=False)
        assert of.trainable_variables() == [a, b]
        assert of.global_variables() == [a, b, c]
    assert (a.name, b.name) == ("w", "w_1")


def test_graph_variable_from_a_graph_initial_value_and_dtype():
    g = of.Graph()
    with g.as_default():
        of.random.seed(3)
        v = of.Variable(of.random.normal([3, 2]), name="r")
        d = of.Variable([1, 2, 3], dtype=of.float64, name="d")
        init = of.global_variables_initializer()
    assert d.dtype == of.float64
    with of.Session(g) as sess:
        sess.run(init)
        first = sess.run(v)
        assert first.shape == (3, 2)
        np.testing.assert_array_equal(sess.run(v), first)  # a variable keeps its value between runs
        np.testing.assert_array_equal(sess.run(d), [1.0, 2.0, 3.0])


def test_graph_assign_of_the_wrong_shape_names_the_variable():
    g = of.Graph()
    with g.as_default():
        v = of.Variable(np.zeros(2, np.float32), name="weights")
        bad = v.assign(np.zeros(3, np.float32))
    with of.Session(g) as sess:
        sess.run(v.initializer)
        with pytest.raises(of.errors.InvalidArgumentError, match="variable 'weights'"):
            sess.run(bad)


def test_graph_gradients_with_respect_to_variables():
    g = of.Graph()
    with g.as_default():
        w = of.Variable(np.array([1.0, -2.0, 3.0], np.float32), name="w")
        x = of.placeholder(of.float32, [3])
        loss = of.sum(of.square(w * x))
        (dw,) = of.gradients(loss, [w])
        init = of.global_variables_initializer()
    xv = np.array([0.5, 1.5, -1.0], np.float32)
    with of.Session(g) as sess:
        sess.run(init)
        np.testing.assert_allclose(sess.run(dw, {x: xv}), 2 * np.array([1.0, -2.0, 3.0]) * xv ** 2, rtol=1e-6)


def test_eager_variable_is_updated_in_place_and_taped():
    v = of.Variable(np.array([1.0, 2.0], np.float32), name="ev")
    assert v.trainable and v.requires_grad
    y = of.sum(v * v)
    y.backward()
    np.testing.assert_array_equal(v.grad.numpy(), [2.0, 4.0])
    v.assign([3.0, 4.0])
    np.testing.assert_array_equal(v.numpy(), [3.0, 4.0])
    v.assign_add(np.ones(2, np.float32))
    v.assign_sub(np.full(2, 0.5, np.float32))
    np.testing.assert_array_equal(v.numpy(), [3.5, 4.5])
    snap = v.read_value()
    v.assign_add(np.ones(2, np.float32))
    np.testing.assert_array_equal(snap.numpy(), [3.5, 4.5])  # a read is a copy
    np.testing.assert_array_equal((of.matmul(np.eye(2, dtype=np.float32), of.reshape(v, [2, 1]))).numpy()[:, 0],
                                  [4.5, 5.5])


def test_eager_variables_collection_and_value_grad():
    a = of.Variable(np.float32(2.0), name="ea")
    n = of.Variable(np.int64(1), name="en")
    trainable = of.trainable_variables()
    assert any(v is a for v in trainable) and not any(v is n for v in trainable)
    loss, grads = of.value_and_grad(lambda w: w * w * 3.0)(a.value())
    assert float(grads.numpy()) == 12.0
    assert of.global_variables_initializer() is None  # eager variables start initialized


def test_eager_assign_of_the_wrong_dtype_or_shape_is_refused():
    v = of.Variable(np.zeros(2, np.float32), name="shape_checked")
    with pytest.raises(of.errors.InvalidArgumentError, match="shape_checked"):
        v.assign(np.zeros(3, np.float32))


def test_eager_variable_in_a_list_input_is_taped():
    v = of.Variable(np.array([1.0, 2.0], np.float32), name="listed")
    of.sum(of.concat([v, v], axis=0) * 3.0).backward()
    np.testing.assert_array_equal(v.grad.numpy(), [6.0, 6.0])


def test_async_mode_runs_stateful_ops_in_program_order():
    v = of.Variable(np.zeros(1000, np.float32), name="async_counter")
    with of.execution_mode("async"):
        for _ in range(30):
            v.assign_add(np.ones(1000, np.float32))
        r = v.read_value()
        v.assign(np.zeros(1000, np.float32))
    np.testing.assert_array_equal(r.numpy(), 30.0)
    np.testing.assert_array_equal(v.numpy(), 0.0)
