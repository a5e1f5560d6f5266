"""Run under mpiexec with 2 processes: 20 steps of the digits MLP with
DistributedOptimizer (with and without overlap), each process on half of
every batch; rank 0 then trains the same model in one process on the whole
batches and compares the weights.
Rank 0 prints 'MAXDIFF <value>' and 'ALL OK [ranks]'."""
import sys

import numpy as np

import opforge as of
import opforge.distributed as dist

STEPS, BATCH = 20, 64
opt_name = sys.argv[1] if len(sys.argv) > 1 else "adam"


def digits():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    return ((x - x.mean(0)) / (x.std(0) + 1e-6)).astype(np.float32), y.astype(np.int64)


def mlp(seed):
    return of.nn.Sequential(of.nn.Linear(64, 32, seed=seed), of.nn.ReLU(), of.nn.Linear(32, 10, seed=seed + 1))


def optimizer(model):
    if opt_name == "sgd":
        return of.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return of.optim.Adam(model.parameters(), lr=1e-2)


def batches(n):
    rng = np.random.default_rng(7)
    return [rng.choice(n, BATCH, replace=False) for _ in range(STEPS)]


def train(model, opt, x, y, parts, part):
    for idx in batches(len(x)):
        mine = np.array_split(idx, parts)[part]
        loss = of.nn.functional.cross_entropy(model(x[mine]), y[mine])
        loss.backward()
        opt.step()
        opt.zero_grad()
    return [p.numpy().copy() for p in model.parameters()]


dist.init(timeout=30)
r, n = dist.rank(), dist.size()
x, y = digits()
results = {}
for overlap in (True, False):  # buckets launched during backward; one fused call at step()
    model = mlp(seed=100 + r)  # different on each rank until the broadcast
    dist.broadcast_parameters(model)
    opt = dist.DistributedOptimizer(optimizer(model), overlap=overlap)
    dist.broadcast_optimizer_state(opt)
    results[overlap] = train(model, opt, x, y, n, r)
    final = [dist.allreduce(p, op="max", name=f"final.{i}").numpy() for i, p in enumerate(model.parameters())]
    assert all(np.array_equal(f, p.numpy()) for f, p in zip(final, model.parameters())), "ranks diverged"
if r == 0:
    ref_model = mlp(seed=100)
    single = train(ref_model, optimizer(ref_model), x, y, 1, 0)
    diff = max(float(np.abs(a - b).max()) for run in results.values() for a, b in zip(run, single))
    moved = max(float(np.abs(a - b.numpy()).max()) for a, b in zip(single, mlp(seed=100).parameters()))
    print("MAXDIFF", diff, "MOVED", moved, flush=True)
    assert moved > 1e-2, "training did not change the weights"
    assert diff <= 1e-5, diff
arrived = dist.allgather(np.array([r], np.int64), name="done").numpy().tolist()
if r == 0:  # one writer: mpiexec may interleave the processes' output
    print("ALL OK", arrived, flush=True)
