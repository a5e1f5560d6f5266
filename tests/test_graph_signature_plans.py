"""One graph with unknown dims run at alternating sizes, on one and on two
inter-op threads: each feed-shape signature keeps its inferred shapes and
memory plan (graph_plan.h), so these check that the kept plans never leak
one size's shapes into another's run, beyond the number kept, with aliasing
kernels (Reshape) in the plan, and that a wrong ReshapeTo guess still fails
on every run at the size that breaks it (numpy is the oracle)."""

import numpy as np
import pytest

import opforge as of
from opforge import errors

P = of.ops
i64 = lambda *v: np.array(v, np.int64)  # noqa: E731


def _branchy_graph():
    """x [None, None, 4]: two branches that may run at once (not a chain),
    shapes from Shape/Gather/Concat, a Reshape (an aliasing kernel) and a
    value-reading ReshapeTo."""
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(np.float32, shape=[None, None, 4])
        s = P.shape(x)
        flat = P.reshape_to(x, P.concat([P.gather(s, i64(0)), i64(-1)], axis=0))  # [B, S*4]
        a = P.tanh(P.mul(flat, 2.0))
        b = P.sum(P.exp(P.neg(P.abs(x))), axis=[2])                        # [B, S]
        wide = P.expand(P.reshape(b, shape=[-1, 1]), P.concat([P.reshape(P.mul(P.gather(s, i64(0)),
                                                                               P.gather(s, i64(1))), shape=[1]),
                                                               i64(3)], axis=0))  # [B*S, 3]
        y = P.add(P.reshape(a, shape=[-1]), 1.0)
    return g, x, [y, wide, b]


def _expect(v):
    flat = v.reshape(v.shape[0], -1)
    b = np.exp(-np.abs(v)).sum(axis=2)
    return [np.tanh(flat * 2.0).reshape(-1) + 1.0, np.broadcast_to(b.reshape(-1, 1), (b.size, 3)), b]


@pytest.mark.parametrize("threads", [1, 2])
def test_alternating_sizes_give_each_size_its_own_results(threads):
    g, x, fetches = _branchy_graph()
    # More distinct sizes than the plans kept (8), revisited in another order.
    sizes = [(1, 8), (3, 24), (1, 8), (3, 24), (2, 5)] + [(k, 2 * k + 1) for k in range(1, 10)] + [(3, 24), (1, 8)]
    with of.Session(g, inter_op_threads=threads) as sess:
        for i, (b, s) in enumerate(sizes):
            v = np.random.default_rng(i).standard_normal((b, s, 4)).astype(np.float32)
            got = sess.run(fetches, {x: v})
            for name, gv, want in zip(("y", "wide", "b"), got, _expect(v)):
                assert gv.shape == want.shape, (threads, (b, s), name)
                np.testing.assert_allclose(gv, want, rtol=1e-5, atol=1e-6, err_msg=f"{threads} {(b, s)} {name}")


def test_two_threads_and_one_agree_at_every_size():
    g, x, fetches = _branchy_graph()
    with of.Session(g, inter_op_threads=1) as one, of.Session(g, inter_op_threads=2) as two:
        for i, shape in enumerate([(2, 3, 4), (4, 1, 4), (2, 3, 4), (1, 5, 4), (4, 1, 4)]):
            v = np.random.default_rng(10 + i).standard_normal(shape).astype(np.float32)
            for a, b in zip(one.run(fetches, {x: v}), two.run(fetches, {x: v})):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_wrong_reshape_guess_fails_on_every_run_at_that_size(threads):
    # [B, S, -1, 16]: the -1 is guessed as 4 when the graph is built; a size
    # where it is not 4 must fail each time it is run, whatever ran before.
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(np.float32, shape=[None, None, 64])
        other = of.placeholder(np.float32, shape=[None, None])
        y = P.reshape_to(x, P.concat([P.shape(other), i64(-1, 16)], axis=0), dims=[-2, -2, -1, 16])
        z = P.mul(y, 3.0)
        w = P.sum(x, axis=[2])
    v = np.arange(2 * 3 * 64, dtype=np.float32).reshape(2, 3, 64)
    good = {x: v, other: np.zeros((2, 3), np.float32)}
    bad = {x: v, other: np.zeros((3, 1), np.float32)}
    with of.Session(g, inter_op_threads=threads) as sess:
        for _ in range(3):
            zz, ww = sess.run([z, w], good)
            np.testing.assert_array_equal(zz, v.reshape(2, 3, 4, 16) * 3.0)
            np.testing.assert_allclose(ww, v.sum(axis=2))
            with pytest.raises(errors.InvalidArgumentError, match="ReshapeTo.*built for"):
                sess.run([z, w], bad)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_shape_from_fed_data_at_alternating_sizes(threads):
    # The target is fed: shapes depend on data, so every run infers as it goes.
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(np.float32, shape=[None, 6])
        t = of.placeholder(np.int64, shape=[2])
        y = P.reshape_to(x, t)
        u = P.mul(x, 2.0)
    with of.Session(g, inter_op_threads=threads) as sess:
        for rows, target in [(2, (3, 4)), (4, (8, 3)), (2, (4, 3)), (4, (-1, 2)), (2, (3, 4))]:
            v = np.arange(rows * 6, dtype=np.float32).reshape(rows, 6)
            yy, uu = sess.run([y, u], {x: v, t: i64(*target)})
            np.testing.assert_array_equal(yy, v.reshape(target))
            np.testing.assert_array_equal(uu, v * 2.0)
