"""Run under mpiexec with 2 processes: the digits MLP trained 20 steps in a
graph with DistributedOptimizer(Adam).minimize (its gradients averaged by
fused allreduce nodes, several buckets, a multi-threaded Session), each
process on half of every batch, its variables set from rank 0's by
broadcast_variables; then 20 steps of eager DistributedOptimizer.minimize.
Rank 0 trains the same model in one process on the whole batches, both
ways, and prints 'GRAPH MAXDIFF <v>', 'EAGER MAXDIFF <v>' and 'ALL OK [ranks]'."""
import numpy as np

import opforge as of
import opforge.distributed as dist

STEPS, BATCH = 20, 64


def digits():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    return ((x - x.mean(0)) / (x.std(0) + 1e-6)).astype(np.float32), y.astype(np.int64)


def weights(seed):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((64, 32)) * 0.125).astype(np.float32), np.zeros(32, np.float32),
            (rng.standard_normal((32, 10)) * 0.18).astype(np.float32), np.zeros(10, np.float32)]


def forward(params, x):
    w1, b1, w2, b2 = params
    return of.matmul(of.relu(of.matmul(x, w1) + b1), w2) + b2


def batches(n):
    rng = np.random.default_rng(7)
    return [rng.choice(n, BATCH, replace=False) for _ in range(STEPS)]


def train_graph(init, parts, part, distributed):
    g = of.Graph()
    with g.as_default():
        params = [of.Variable(w, name=f"p{i}") for i, w in enumerate(init)]
        xp = of.placeholder(of.float32, [None, 64], name="x")
        yp = of.placeholder(of.int64, [None], name="y")
        loss = of.nn.functional.cross_entropy(forward(params, xp), yp)
        opt = of.optim.Adam(lr=1e-2)
        if distributed:  # buckets of 4 KB: W2+b2+b1 apart from W1, two chained collectives
            opt = dist.DistributedOptimizer(opt, fusion_bytes=4096)
        train = opt.minimize(loss)
        init_op = of.global_variables_initializer()
        sync = dist.broadcast_variables() if distributed else None  # after minimize: the slots too
        n_collectives = sum(op.type == "MpiGroupedAllreduce" for op in g.get_operations())
    with of.Session(g) as sess:  # several inter-op threads: the chain keeps the collectives in order
        sess.run(init_op)
        if sync is not None:
            sess.run(sync)
        for idx in batches(len(x)):
            mine = np.array_split(idx, parts)[part]
            sess.run(train, {xp: x[mine], yp: y[mine]})
        return sess.run(params), n_collectives


def train_eager(init, parts, part, distributed):
    params = [of.Variable(w, name=f"e{i}") for i, w in enumerate(init)]
    opt = of.optim.Adam(params, lr=1e-2)
    if distributed:
        opt = dist.DistributedOptimizer(opt, overlap=True)  # minimize collects the buckets backward launched
    for idx in batches(len(x)):
        mine = np.array_split(idx, parts)[part]
        opt.minimize(lambda: of.nn.functional.cross_entropy(forward(params, x[mine]), y[mine]))
    return [p.numpy().copy() for p in params]


def maxdiff(a, b):
    return max(float(np.abs(u - v).max()) for u, v in zip(a, b))


dist.init(timeout=30)
r, n = dist.rank(), dist.size()
x, y = digits()
got, n_collectives = train_graph(weights(100 + r), n, r, True)  # rank 0's weights win the broadcast
assert n_collectives == 2, n_collectives
eager = train_eager(weights(100), n, r, True)
same = [dist.allreduce(p, op="max", name=f"final.{i}").numpy() for i, p in enumerate(got)]
assert all(np.array_equal(s, p) for s, p in zip(same, got)), "ranks diverged"
if r == 0:
    single, _ = train_graph(weights(100), 1, 0, False)
    assert maxdiff(single, weights(100)) > 1e-2, "training did not change the weights"
    single_eager = train_eager(weights(100), 1, 0, False)
    print("GRAPH MAXDIFF", maxdiff(got, single), "EAGER MAXDIFF", maxdiff(eager, single_eager), flush=True)
    assert maxdiff(got, single) <= 1e-5 and maxdiff(eager, single_eager) <= 1e-5
arrived = dist.allgather(np.array([r], np.int64), name="done").numpy().tolist()
if r == 0:
    print("ALL OK", arrived, flush=True)
