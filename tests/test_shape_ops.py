"""The shape-tensor ops (cpp/ops/shape_ops.cc) against numpy, eagerly and in
one graph run at several sizes (shapes computed per run from the feeds),
and their bad input."""

import numpy as np
import pytest

import opforge as of
from opforge import errors

P = of.ops
i64 = lambda *v: np.array(v, np.int64)  # noqa: E731


def test_eager_ops_match_numpy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(P.shape(x).numpy(), [2, 3, 4])
    np.testing.assert_array_equal(P.reshape_to(x, i64(0, -1)).numpy(), x.reshape(2, 12))
    np.testing.assert_array_equal(P.reshape_to(np.zeros((0, 3), np.float32), i64(0, 3), allowzero=True).numpy(),
                                  np.zeros((0, 3)))
    col = np.arange(3, dtype=np.int32).reshape(3, 1)
    np.testing.assert_array_equal(P.expand(col, i64(2, 1, 4)).numpy(), col * np.ones((2, 1, 4), np.int32))
    np.testing.assert_array_equal(P.tile(x, i64(2, 1, 3)).numpy(), np.tile(x, (2, 1, 3)))
    np.testing.assert_array_equal(P.constant_of_shape(i64(2, 3), np.array(5, np.int32)).numpy(),
                                  np.full((2, 3), 5, np.int32))
    np.testing.assert_allclose(P.arange_of(np.array(1.0), np.array(2.0), np.array(0.25)).numpy(),
                               np.arange(1.0, 2.0, 0.25))
    np.testing.assert_array_equal(P.arange_of(i64(10), i64(1), i64(-3)).numpy(), np.arange(10, 1, -3))


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0], [3], [1], [2]),
    ([-1, 3], [-100, 0], [0, 2], [-1, -2]),
    ([5, 1], [-5, 100], [2, -2], [-1, 1]),
    ([1], [1], [0], [1]),
    ([0, 0, 0], [2, 3, 4], [0, 1, 2], [3, 3, 3]),
])
def test_strided_slice_matches_numpy(starts, ends, axes, steps):
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    index = [slice(None)] * 3
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a] = slice(s, e, st)
    got = P.strided_slice(x, i64(*starts), i64(*ends), i64(*axes), i64(*steps)).numpy()
    np.testing.assert_array_equal(got, x[tuple(index)])


@pytest.mark.parametrize("call,match", [
    (lambda x: P.reshape_to(x, i64(-1, -1)), "more than one -1"),
    (lambda x: P.reshape_to(x, i64(5, -2)), "negative dim -2"),
    (lambda x: P.reshape_to(x, i64(5, -1)), "cannot hold"),
    (lambda x: P.reshape_to(x, np.zeros((2, 2), np.int64)), "must be 1-D"),
    (lambda x: P.expand(x, i64(2, -3)), "negative dim"),
    (lambda x: P.expand(x, i64(5, 4)), "does not broadcast"),
    (lambda x: P.tile(x, i64(2)), "has 1 entries but argument 'x' has rank 2"),
    (lambda x: P.tile(x, i64(2, -1)), "negative entry"),
    (lambda x: P.strided_slice(x, i64(0), i64(1), i64(0), i64(0)), "'steps' has a 0"),
    (lambda x: P.strided_slice(x, i64(0, 0), i64(1, 1), i64(1, -1), i64(1, 1)), "twice"),
    (lambda x: P.strided_slice(x, i64(0), i64(1), i64(5), i64(1)), "out of range"),
    (lambda x: P.constant_of_shape(i64(2, -1), np.array(1.0)), "negative dim"),
    (lambda x: P.arange_of(np.array(0.0), np.array(1.0), np.array(0.0)), "'delta' must not be 0"),
])
def test_bad_shape_tensors_name_the_op_and_the_argument(call, match):
    x = np.ones((3, 4), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match=match) as e:
        call(x)
    assert any(op in str(e.value) for op in ("ReshapeTo", "Expand", "Tile", "StridedSlice", "ConstantOfShape",
                                             "ArangeOf")), str(e.value)


def _graph():
    """x [None, None, 4] -> reshape to [x.shape[0], -1] through Shape/Gather/Concat,
    expand a column to x's leading dims, slice every second row backwards."""
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(np.float32, shape=[None, None, 4])
        s = P.shape(x)
        lead = P.gather(s, i64(0))
        flat = P.reshape_to(x, P.concat([lead, i64(-1)], axis=0))
        ones = P.constant_of_shape(P.concat([P.gather(s, i64(0, 1)), i64(1)], axis=0), np.array(1.0, np.float32))
        wide = P.expand(ones, s)
        rev = P.strided_slice(x, i64(-1), i64(-(2 ** 62)), i64(0), i64(-2))
        steps = P.arange_of(np.array(0, np.int64), P.reshape(P.gather(s, i64(1)), shape=[]), np.array(1, np.int64))
        tiled = P.tile(x, P.concat([i64(1, 2), i64(1)], axis=0))
    assert list(flat.shape) == [None, None] and list(wide.shape) == [None, None, None]
    return g, x, [flat, wide, rev, steps, tiled, s]


def test_one_graph_runs_at_every_size_with_shapes_computed_per_run():
    g, x, fetches = _graph()
    sess = of.Session(g)
    for shape in [(2, 3, 4), (5, 1, 4), (2, 3, 4), (1, 7, 4), (3, 0, 4)]:
        v = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        flat, wide, rev, steps, tiled, s = sess.run(fetches, feed_dict={x: v})
        np.testing.assert_array_equal(tiled, np.tile(v, (1, 2, 1)))
        np.testing.assert_array_equal(flat, v.reshape(shape[0], -1))
        np.testing.assert_array_equal(wide, np.ones(shape, np.float32))
        np.testing.assert_array_equal(rev, v[::-2])
        np.testing.assert_array_equal(steps, np.arange(shape[1]))
        np.testing.assert_array_equal(s, shape)


def test_a_shape_from_fed_data_is_inferred_as_each_op_runs():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(np.float32, shape=[2, 6])
        t = of.placeholder(np.int64, shape=[2])
        y = P.reshape_to(x, t)
    assert list(y.shape) == [None, None]
    sess = of.Session(g)
    v = np.arange(12, dtype=np.float32).reshape(2, 6)
    for target in ([3, 4], [4, 3], [-1, 2]):
        np.testing.assert_array_equal(sess.run(y, feed_dict={x: v, t: i64(*target)}), v.reshape(target))
    with pytest.raises(errors.InvalidArgumentError, match="ReshapeTo.*'shape'.*negative dim -5"):
        sess.run(y, feed_dict={x: v, t: i64(-5, 2)})


def test_a_bad_shape_computed_at_run_time_fails_naming_the_op():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(np.float32, shape=[None, 4])
        # [N + 1, -1]: fits N = 3 ([4, 3]), not N = 2 (3 does not divide 8).
        y = P.reshape_to(x, P.concat([P.add(P.gather(P.shape(x), i64(0)), i64(1)), i64(-1)], axis=0))
    sess = of.Session(g)
    np.testing.assert_array_equal(sess.run(y, feed_dict={x: np.ones((3, 4), np.float32)}), np.ones((4, 3)))
    with pytest.raises(errors.InvalidArgumentError, match="ReshapeTo.*'shape' \\[3, -1\\] cannot hold the 8"):
        sess.run(y, feed_dict={x: np.ones((2, 4), np.float32)})


def test_eager_calls_with_the_same_shapes_but_other_values_are_not_memoised():
    x = np.arange(12, dtype=np.float32)
    for target in ([3, 4], [4, 3], [2, 6]):
        assert P.reshape_to(x, i64(*target)).shape == tuple(target)
    for n in (3, 5):
        assert P.arange_of(i64(0), i64(n), i64(1)).shape == (n,)


def test_a_partly_known_target_gives_static_dims_and_each_run_checks_them():
    # [B, S, -1, 16] with B, S from another tensor's shape (as exported
    # attention builds it): the -1 is guessed as 64 / 16 = 4 when the graph
    # is built; a run where it is not 4 fails instead of answering wrong.
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(np.float32, shape=[None, None, 64])
        other = of.placeholder(np.float32, shape=[None, None])
        target = P.concat([P.shape(other), i64(-1, 16)], axis=0)
        y = P.reshape_to(x, target, dims=[-2, -2, -1, 16])
    assert list(y.shape) == [None, None, 4, 16]
    sess = of.Session(g)
    v = np.arange(2 * 3 * 64, dtype=np.float32).reshape(2, 3, 64)
    np.testing.assert_array_equal(sess.run(y, {x: v, other: np.zeros((2, 3), np.float32)}), v.reshape(2, 3, 4, 16))
    with pytest.raises(errors.InvalidArgumentError, match="ReshapeTo.*built for"):
        sess.run(y, {x: v, other: np.zeros((3, 1), np.float32)})
    with pytest.raises(errors.InvalidArgumentError, match="differs from attr 'dims'"):
        P.reshape_to(v, i64(2, 3, 4, 8), dims=[-2, -2, -1, 16])
