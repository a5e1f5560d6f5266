"""Run under mpiexec with 2 or 3 processes: every collective, eager, on the
tape, in a graph and async, checked against numpy on data every rank can
recompute; then metadata mismatches. Rank 0 prints 'ALL OK [ranks]' at the end."""
import numpy as np

import opforge as of
import opforge.distributed as dist

dist.init(timeout=20)
r, n = dist.rank(), dist.size()
assert n >= 2 and 0 <= r < n and dist.local_rank() == r and dist.local_size() == n


def data(rank, shape=(3, 4), dtype=np.float32):
    return (np.arange(np.prod(shape)).reshape(shape) * (rank + 1) + rank).astype(dtype)


everyone = [data(k) for k in range(n)]
x = data(r)

# allreduce: sum, average, min, max; pre/postscale; int dtypes
np.testing.assert_allclose(dist.allreduce(x, op="sum").numpy(), sum(everyone), rtol=1e-6)
np.testing.assert_allclose(dist.allreduce(x).numpy(), sum(everyone) / n, rtol=1e-6)
np.testing.assert_array_equal(dist.allreduce(x, op="min").numpy(), np.minimum.reduce(everyone))
np.testing.assert_array_equal(dist.allreduce(x, op="max").numpy(), np.maximum.reduce(everyone))
np.testing.assert_allclose(dist.allreduce(x, op="sum", prescale=0.5, postscale=3.0).numpy(),
                           3.0 * sum(0.5 * e for e in everyone), rtol=1e-6)
xi = data(r, (5,), np.int64)
np.testing.assert_array_equal(dist.allreduce(xi, op="sum").numpy(), sum(data(k, (5,), np.int64) for k in range(n)))
np.testing.assert_allclose(dist.allreduce(data(r, (2, 2), np.float64), op="sum").numpy(),
                           sum(data(k, (2, 2), np.float64) for k in range(n)))

# allgather with first dims differing per rank (rank k has k+1 rows)
rows = lambda k: data(k, (k + 1, 2))  # noqa: E731
np.testing.assert_array_equal(dist.allgather(rows(r)).numpy(), np.concatenate([rows(k) for k in range(n)]))
np.testing.assert_array_equal(dist.allgather(np.array([r % 2 == 0])).numpy(), [k % 2 == 0 for k in range(n)])

# broadcast from every root
for root in range(n):
    np.testing.assert_array_equal(dist.broadcast(x, root=root).numpy(), everyone[root])

# alltoall: block j of rank k's x goes to rank j
blocks = lambda k: data(k, (2 * n, 3))  # noqa: E731
want = np.concatenate([blocks(k)[2 * r:2 * r + 2] for k in range(n)])
np.testing.assert_array_equal(dist.alltoall(blocks(r)).numpy(), want)

dist.barrier()

# the tape: the gradient of sum(w * allreduce_average(v)) w.r.t. v is allreduce_average(w)
ws = [data(k) + 1 for k in range(n)]
v = of.tensor(x, requires_grad=True)
loss = of.sum(of.tensor(ws[r]) * dist.allreduce(v, op="average", name="v"))
loss.backward()
np.testing.assert_allclose(v.grad.numpy(), sum(ws) / n, rtol=1e-6)
# ... of an allgather: this rank's rows of the gathered gradient, summed over ranks
v = of.tensor(rows(r), requires_grad=True)
g = dist.allgather(v, name="rows")
total = sum(np.concatenate([rows(k) for k in range(n)]) * (k + 1) for k in range(n))
of.sum(g * of.tensor(np.concatenate([rows(k) for k in range(n)]) * (r + 1))).backward()
offset = sum(k + 1 for k in range(r))
np.testing.assert_allclose(v.grad.numpy(), total[offset:offset + r + 1], rtol=1e-6)
# ... of a max: the summed upstream gradient where this rank held the max
v = of.tensor(x, requires_grad=True)
of.sum(dist.allreduce(v, op="max", name="mx")).backward()
is_max = x == np.maximum.reduce(everyone)
np.testing.assert_allclose(v.grad.numpy(), np.where(is_max, float(n), 0.0))
# ... of a broadcast: the summed gradient on the root, zeros elsewhere
v = of.tensor(x, requires_grad=True)
of.sum(dist.broadcast(v, root=1, name="b") * 2.0).backward()
np.testing.assert_allclose(v.grad.numpy(), np.full(x.shape, 2.0 * n if r == 1 else 0.0))
# finite differences on the allreduce's gradient: every rank's loss L is the
# same, the objective is the sum of the ranks' losses (horovod's convention),
# and a is held by every rank, so the ranks' gradients of a add up to n * dL/da
a = of.tensor(np.float64(0.3), requires_grad=True)
f = lambda a_: of.sum(dist.allreduce(of.tensor(data(r, (2,), np.float64)) * a_, op="average", name="fd") ** 2)  # noqa: E731
f(a).backward()
eps = 1e-6
fd = (f(of.tensor(np.float64(0.3 + eps))).numpy() - f(of.tensor(np.float64(0.3 - eps))).numpy()) / (2 * eps)
np.testing.assert_allclose(dist.allreduce(a.grad, op="sum", name="fdsum").numpy(), n * fd, rtol=1e-5)

# a graph: collectives and their gradients (of.gradients) are nodes; a
# Session with one inter-op thread runs them in the same order on every rank
graph = of.Graph()
with graph.as_default():
    p = of.placeholder(of.float32, (3, 4), name="p")
    out = dist.allreduce(p, op="sum", name="in_graph") * 2.0
    (grad_p,) = of.gradients(of.sum(dist.allreduce(p, op="average", name="g_avg") * float(r + 1)), [p])
    (grad_rows,) = of.gradients(of.sum(dist.allgather(p, name="g_gather") * 2.0), [p])
    q = of.placeholder(of.float32, (None, 3), name="q")  # an unknown first dim: n * 2 rows fed
    exchanged = dist.alltoall(q, name="g_a2a")
    (grad_q,) = of.gradients(of.sum(exchanged * float(r + 1)), [q])
    from_root = dist.broadcast(p, root=n - 1, name="g_bcast")
    (grad_b,) = of.gradients(of.sum(from_root * 3.0), [p])
    gathered_q = dist.allgather(q, name="g_gather_q")
    with of.control_dependencies([dist.barrier(name="g_barrier")]):
        after = of.identity(p)
got, got_grad, got_rows = of.Session(graph, inter_op_threads=1).run([out, grad_p, grad_rows], {p: x})
np.testing.assert_allclose(np.asarray(got), 2 * sum(everyone), rtol=1e-6)
np.testing.assert_allclose(got_grad, np.full(x.shape, sum(k + 1 for k in range(n)) / n), rtol=1e-6)
np.testing.assert_allclose(got_rows, np.full(x.shape, 2.0 * n), rtol=1e-6)
got = of.Session(graph, inter_op_threads=1).run([exchanged, grad_q, from_root, grad_b, gathered_q, after],
                                                {p: x, q: blocks(r)})
np.testing.assert_array_equal(got[0], want)
back = np.repeat(np.arange(1, n + 1, dtype=np.float32), 2)[:, None] * np.ones((1, 3))  # block j: rank j's factor
np.testing.assert_allclose(got[1], back)
np.testing.assert_array_equal(got[2], everyone[n - 1])
np.testing.assert_allclose(got[3], np.full(x.shape, 3.0 * n if r == n - 1 else 0.0))
np.testing.assert_array_equal(got[4], np.concatenate([blocks(k) for k in range(n)]))
np.testing.assert_array_equal(got[5], x)
# a graph plans shapes from its feeds: gathering different row counts raises on every rank
try:
    of.Session(graph, inter_op_threads=1).run(gathered_q, {q: blocks(r)[:r + 1]})
except of.errors.InvalidArgumentError as e:
    assert "'g_gather_q'" in str(e) and "same number of rows" in str(e), str(e)
else:
    raise AssertionError("a graph allgather of different row counts did not raise")

# the tape: alltoall's gradient is the alltoall of dy (block j back to rank j)
v = of.tensor(blocks(r), requires_grad=True)
of.sum(dist.alltoall(v, name="t_a2a") * float(r + 1)).backward()
np.testing.assert_allclose(v.grad.numpy(), back)

# async: a pending tensor comes back; reading it waits. Independent
# collectives may start in any order on the engine's threads: they still
# run in call order on every rank (else the name check would fail).
with of.execution_mode("async"):
    y = dist.allreduce(x, op="sum", name="async")
    z = y * 2.0
    many = [dist.allreduce(data(r, (1000 * (k + 1),)), op="sum") for k in range(6)]
    gathered = dist.allgather(rows(r))
    gathered2 = dist.allgather(rows(r)) * 2.0  # the real row count reaches the op after it
    a2a = dist.alltoall(blocks(r))
    rooted = dist.broadcast(x, root=n - 1)
    dist.barrier()
    avg = dist.allreduce(x, op="average")
np.testing.assert_allclose(z.numpy(), 2 * sum(everyone), rtol=1e-6)
np.testing.assert_array_equal(gathered2.numpy(), 2 * np.concatenate([rows(k) for k in range(n)]))
np.testing.assert_array_equal(a2a.numpy(), want)
np.testing.assert_array_equal(rooted.numpy(), everyone[n - 1])
np.testing.assert_allclose(avg.numpy(), sum(everyone) / n, rtol=1e-6)
for k, m in enumerate(many):
    np.testing.assert_allclose(m.numpy(), sum(data(j, (1000 * (k + 1),)) for j in range(n)), rtol=1e-6)
np.testing.assert_array_equal(gathered.numpy(), np.concatenate([rows(k) for k in range(n)]))

# fused group
grads = [data(r, (k + 1, 3)) for k in range(5)]
fused = dist.grouped_allreduce(grads, fusion_bytes=64)  # small chunks: several MPI calls
for k, view in enumerate(dist.split_fused(fused, [g.shape for g in grads])):
    np.testing.assert_allclose(view, sum(data(j, (k + 1, 3)) for j in range(n)) / n, rtol=1e-6)

# mismatches raise on every rank, naming the tensor, before data moves; MPI
# stays usable. Eager, async (reading the pending result raises) and graphs.
def async_read(make):
    with of.execution_mode("async"):
        pending = make()
    return pending.numpy()


def graph_run(make, value):
    g = of.Graph()
    with g.as_default():
        p_ = of.placeholder(of.float32, value.shape)
        node = make(p_)
    return of.Session(g).run(node, {p_: value})


for bad in (lambda: dist.allreduce(data(r, (3, 4 + (r == 1))), name="weights"),
            lambda: dist.allreduce(data(r, (3, 4), np.float64 if r == 1 else np.float32), name="weights"),
            lambda: dist.allgather(data(r, (2, 3 + (r == 1))), name="weights"),
            lambda: dist.broadcast(x, name="weights" if r == 0 else "bias"),
            lambda: async_read(lambda: dist.allreduce(data(r, (3, 4 + (r == 1))), name="weights")),
            lambda: graph_run(lambda p_: dist.allreduce(p_, name="weights"), data(r, (3, 4 + (r == 1))))):
    try:
        bad()
    except of.errors.InvalidArgumentError as e:
        assert "disagree" in str(e) and "'weights'" in str(e), str(e)
    else:
        raise AssertionError("a mismatch did not raise")
try:
    dist.broadcast(x, root=n)
except of.errors.InvalidArgumentError as e:
    assert "root" in str(e)
else:
    raise AssertionError("a bad root did not raise")
np.testing.assert_allclose(dist.allreduce(x, op="sum").numpy(), sum(everyone), rtol=1e-6)
arrived = dist.allgather(np.array([r], np.int64), name="done").numpy().tolist()
if r == 0:  # one writer: mpiexec may interleave the processes' output
    print("ALL OK", arrived, flush=True)
