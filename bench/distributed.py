"""opforge.distributed against mpi4py, two processes on this machine (issue 27).

- allreduce of 64 MB float32: opforge's MpiAllreduce op against mpi4py's
  ``comm.Allreduce`` on numpy buffers (receive buffer allocated once);
  target: opforge's bandwidth >= 0.9x mpi4py's.
- 1,000 gradients of 4 KB: DistributedOptimizer's averaging (tensor fusion:
  one MpiGroupedAllreduce) against 1,000 separate ``allreduce`` calls
  (target >= 3x faster) and against mpi4py reducing one 4 MB buffer, the
  fused size (target: within 1.5x).
- overlap of averaging with backward: one step (forward, backward, averaged
  gradients) of an MLP whose gradients fill several fusion buckets, with
  DistributedOptimizer's overlap (each bucket's allreduce starts as soon as
  backward has its gradients) and without (all averaging after backward),
  beside backward alone and averaging alone. Horovod's expectation: with
  overlap a step costs about max(backward, averaging) plus the last
  bucket's allreduce, without it backward + averaging; "hidden" is the part
  of the averaging time the overlap took off the step.

Each round times every contender once, in rotating order, after a barrier;
medians of rank 0's wall times. ``python -m bench.distributed [--quick]
[--overlap-only]`` starts the two processes with the mpich wheel's mpiexec
and prints JSON.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

TARGETS = {"allreduce_64mb_bw_ratio": 0.9, "fused_vs_separate_speedup": 3.0, "fused_vs_mpi4py_4mb": 1.5}
OVERLAP_MLP = {"full": (1024, 6, 128), "quick": (256, 4, 32)}  # width, layers, batch


def overlap_case(of, dist, comm, rounds, quick):
    """Step times (forward + backward + averaged gradients) with and without overlap."""
    width, layers, batch = OVERLAP_MLP["quick" if quick else "full"]

    def mlp():
        return of.nn.Sequential(*[of.nn.Linear(width, width, seed=k) for k in range(layers)])

    rng = np.random.default_rng(dist.rank())
    x = rng.standard_normal((batch, width)).astype(np.float32)
    target = rng.standard_normal((batch, width)).astype(np.float32)
    # Two copies of one model: the overlapping optimizer's hooks sit on its own parameters.
    m_over, m_plain = mlp(), mlp()
    fusion = 2 * width * width * 4  # two layers' weights per bucket: several buckets
    o_over = dist.DistributedOptimizer(of.optim.SGD(m_over.parameters(), lr=0.0), fusion_bytes=fusion,
                                       overlap=True)
    o_plain = dist.DistributedOptimizer(of.optim.SGD(m_plain.parameters(), lr=0.0), fusion_bytes=fusion,
                                        overlap=False)
    buckets = len(o_over._buckets.buckets)

    def step(model, opt, average):
        opt.zero_grad()
        of.nn.functional.mse_loss(model(x), target).backward()
        return opt.synchronize() if average else None

    grads = [p.grad for p in m_plain.parameters()]  # filled by the warm-up below
    contenders = {
        "overlap": lambda: step(m_over, o_over, True),
        "no_overlap": lambda: step(m_plain, o_plain, True),
        "backward_only": lambda: step(m_plain, o_plain, False),
        "averaging_only": lambda: o_plain.average_gradients(grads),
    }
    for _ in range(2):
        for k in ("overlap", "no_overlap", "backward_only"):
            contenders[k]()
    grads[:] = [p.grad for p in m_plain.parameters()]
    a = step(m_over, o_over, True)
    b = step(m_plain, o_plain, True)
    assert all(np.array_equal(u, v) for u, v in zip(a, b)), "overlap changed the averaged gradients"
    t = _rounds(comm, contenders, rounds)
    return {"mlp": f"{layers} x Linear({width}, {width}), batch {batch}, float32", "buckets": buckets,
            "step_s": t,
            "hidden_fraction": (t["no_overlap"] - t["overlap"]) / t["averaging_only"],
            "overlap_speedup": t["no_overlap"] / t["overlap"],
            "horovod_expectation_s": max(t["backward_only"], t["averaging_only"]) + t["averaging_only"] / buckets,
            "processes_here": dist.local_size(), "threads_per_process": of.config.num_threads(),
            "usable_cpus": of.config.usable_cpus(), "default_overlap_here": dist.overlap_default()}


def _rounds(comm, contenders, rounds):
    times = {k: [] for k in contenders}
    names = list(contenders)
    for i in range(rounds):
        for k in names[i % len(names):] + names[:i % len(names)]:
            comm.Barrier()
            t0 = time.perf_counter()
            contenders[k]()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def worker(quick, overlap_only=False):
    from mpi4py import MPI  # MPI starts here; opforge.distributed joins it

    import opforge.distributed as dist
    dist.init()
    comm = MPI.COMM_WORLD
    rounds = 5 if quick else 25
    if overlap_only:
        import opforge as of
        res = overlap_case(of, dist, comm, rounds, quick)
        if dist.rank() == 0:
            print(json.dumps({"overlap_with_backward": res, "load_average": os.getloadavg()}, indent=1), flush=True)
        return

    big = np.random.default_rng(dist.rank()).standard_normal(16 << 20).astype(np.float32)  # 64 MB
    recv = np.empty_like(big)
    for _ in range(2):  # warm-up: buffers, shared-memory segments
        comm.Allreduce(big, recv, op=MPI.SUM)
        dist.allreduce(big, op="sum", name="big")
    t_big = _rounds(comm, {"mpi4py": lambda: comm.Allreduce(big, recv, op=MPI.SUM),
                           "opforge": lambda: dist.allreduce(big, op="sum", name="big")}, rounds)
    ours = dist.allreduce(big, op="sum", name="check").numpy()
    comm.Allreduce(big, recv, op=MPI.SUM)
    assert np.array_equal(ours, recv)

    import opforge as of
    grads = [of.tensor(np.random.default_rng(i + dist.rank()).standard_normal(1024).astype(np.float32))
             for i in range(1000)]  # 4 KB each
    params = [of.tensor(np.zeros(1024, np.float32)) for _ in grads]
    opt = dist.DistributedOptimizer(of.optim.SGD(params, lr=0.1))
    flat = np.concatenate([g.numpy() for g in grads])
    flat_recv = np.empty_like(flat)
    separate = lambda: [dist.allreduce(g, op="average", name=f"g{i}") for i, g in enumerate(grads)]  # noqa: E731
    for _ in range(2):
        opt.average_gradients(grads)
        separate()
        comm.Allreduce(flat, flat_recv, op=MPI.SUM)
    t_small = _rounds(comm, {"fused": lambda: opt.average_gradients(grads), "separate": separate,
                             "mpi4py_4mb": lambda: comm.Allreduce(flat, flat_recv, op=MPI.SUM)},
                      rounds)
    avg = opt.average_gradients(grads)
    assert np.allclose(np.concatenate([a.ravel() for a in avg]), flat_recv / 2)
    overlap = overlap_case(of, dist, comm, rounds, quick)

    if dist.rank() == 0:
        gb = big.nbytes / 1e9
        res = {
            "processes": dist.size(),
            "allreduce_64mb_s": {"opforge": t_big["opforge"], "mpi4py": t_big["mpi4py"]},
            "allreduce_64mb_GBps": {"opforge": gb / t_big["opforge"], "mpi4py": gb / t_big["mpi4py"]},
            "allreduce_64mb_bw_ratio": t_big["mpi4py"] / t_big["opforge"],
            "1000x4kb_s": t_small,
            "fused_vs_separate_speedup": t_small["separate"] / t_small["fused"],
            "fused_vs_mpi4py_4mb": t_small["fused"] / t_small["mpi4py_4mb"],
            "overlap_with_backward": overlap,
            "targets": TARGETS,
            "load_average": os.getloadavg(),
        }
        print(json.dumps(res, indent=1), flush=True)


def main(argv):
    quick = "--quick" in argv
    if "--worker" in argv:
        worker(quick, "--overlap-only" in argv)
        return 0
    from opforge.distributed.run import environment, find_mpiexec
    from opforge.distributed._library import library_path
    library_path()
    cmd = [find_mpiexec(), "-n", "2", sys.executable, "-m", "bench.distributed", "--worker"] + (["--quick"] if quick else [])
    cmd += ["--overlap-only"] if "--overlap-only" in argv else []
    return subprocess.call(cmd, timeout=900, env=environment(2))  # the launcher's threads per process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
