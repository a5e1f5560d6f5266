"""opforge.distributed under the mpich wheel's mpiexec: 2 and 3 processes on
this machine only, every run bounded by a timeout and its process group
killed afterwards. mpi4py is not the oracle here: numpy on data every rank
can recompute is, and one-process training for the training check."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import opforge as of

RANKS = pathlib.Path(__file__).resolve().parent / "test_distributed_ranks"
MPIEXEC = pathlib.Path(sys.prefix) / "bin" / "mpiexec"
pytestmark = pytest.mark.skipif(not MPIEXEC.is_file(), reason="needs the mpich wheel: pip install 'opforge[mpi]'")


@pytest.fixture(scope="module")
def library():
    """The collectives library, built once (cached across sessions by opforge's stamp)."""
    from opforge.distributed import _library
    return _library.build()


def mpirun(np_, script, *args, timeout=90, env=None):
    """Runs `script` in `np_` local processes; kills them all if it overruns."""
    # -hosts localhost: this machine only, even where HYDRA_HOST_FILE names others
    cmd = [str(MPIEXEC), "-hosts", "localhost", "-n", str(np_), sys.executable, str(RANKS / script),
           *map(str, args)]
    # one intra-op thread per process, as the launcher gives them on 2 cores
    full_env = {**os.environ, "OPFORGE_EXECUTION": "", "OPFORGE_NUM_THREADS": "1", **(env or {})}
    full_env.pop("OPFORGE_EXECUTION")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=full_env)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{script} with {np_} processes hung (killed after {timeout} s):\n{out}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers of a failed run
        except ProcessLookupError:
            pass
    return proc.returncode, out


@pytest.mark.parametrize("np_", [2, 3])
def test_collectives(library, np_):
    rc, out = mpirun(np_, "collectives.py")
    assert rc == 0, out
    assert f"ALL OK {list(range(np_))}" in out, out


def test_two_process_training_equals_one_process(library):
    """20 Adam steps of the digits MLP (training.py also takes "sgd")."""
    pytest.importorskip("sklearn")
    rc, out = mpirun(2, "training.py", "adam")
    assert rc == 0, out
    diff = float(out.split("MAXDIFF")[1].split()[0])
    assert diff <= 1e-5, out
    assert "ALL OK [0, 1]" in out, out


def test_graph_minimize_averages_like_one_process(library):
    """DistributedOptimizer(Adam).minimize in a graph (fused allreduce nodes,
    two chained buckets) and eager, 20 steps on two processes, against one
    process on the whole batches."""
    pytest.importorskip("sklearn")
    rc, out = mpirun(2, "graph_training.py")
    assert rc == 0, out
    graph, eager = (float(v) for v in re.search(r"GRAPH MAXDIFF (\S+) EAGER MAXDIFF (\S+)", out).groups())
    assert graph <= 1e-5 and eager <= 1e-5, out
    assert "ALL OK [0, 1]" in out, out


def test_a_stuck_rank_times_out_with_a_clear_error(library):
    start = time.monotonic()
    rc, out = mpirun(2, "faults.py", "stuck", 2.0, timeout=60)
    assert rc != 0, out
    assert "ERROR InternalError" in out and "timed out after 2 s" in out and "MpiAllreduce: tensor 'grad'" in out, out
    assert "AGAIN" in out and "earlier collective failed" in out, out
    assert time.monotonic() - start < 25, out  # not the 20 s rank 1 sleeps, plus start-up


@pytest.mark.parametrize("how", ["dies", "raises"])
def test_a_dead_rank_ends_the_others(library, how):
    start = time.monotonic()
    rc, out = mpirun(2, "faults.py", how, 3.0, timeout=60)
    assert rc != 0, out
    assert "NO ERROR" not in out, out
    assert time.monotonic() - start < 30, out


def test_launcher_runs_the_digits_example(library):
    """python -m opforge.distributed.run -np 2 python examples/distributed_digits.py"""
    pytest.importorskip("sklearn")
    example = RANKS.parents[1] / "examples" / "distributed_digits.py"
    proc = subprocess.run([sys.executable, "-m", "opforge.distributed.run", "-np", "2", "--timeout", "30",
                           sys.executable, str(example), "--epochs", "3", "--lr", "3e-3"],
                          capture_output=True, text=True, timeout=120, start_new_session=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    accuracy = float(re.search(r"2 processes: test accuracy (\S+)", proc.stdout).group(1))
    assert accuracy > 0.85, proc.stdout


def test_library_built_for_another_opforge_is_refused(library, tmp_path):
    """A library whose stamp names another opforge version is refused before
    it is loaded, with the command that rebuilds it."""
    data = library.read_bytes()
    stamp = of.sysconfig.get_stamp().encode()
    assert data.count(stamp) >= 1
    other = stamp.replace(b"version=", b"version=9")[:len(stamp)]  # same length: the ELF layout is unchanged
    old = tmp_path / "libopforge_mpi_old.so"
    old.write_bytes(data.replace(stamp, other))
    code = ("import opforge.distributed as d\n"
            "try:\n    d.init()\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OPFORGE_MPI_LIBRARY": str(old)})
    assert "InvalidArgumentError" in proc.stdout, proc.stdout + proc.stderr
    assert "python -m opforge.distributed.build" in proc.stdout and "Nothing was loaded" in proc.stdout, proc.stdout


def test_import_opforge_never_imports_mpi():
    code = ("import sys, opforge as of\n"
            "of.distributed.DistributedSampler(4, num_replicas=2, rank=0)\n"  # the lazy submodule, loaded
            "print(sorted(m for m in sys.modules if m.startswith(('mpi4py', 'mpi', 'opforge.op_libraries'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_collectives_before_init_raise():
    code = ("import numpy as np, opforge.distributed as d\n"
            "try:\n    d.allreduce(np.ones(2))\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "InvalidArgumentError" in proc.stdout and "init()" in proc.stdout, proc.stdout + proc.stderr


def test_distributed_sampler_splits_evenly():
    from opforge.distributed import DistributedSampler
    parts = [DistributedSampler(10, num_replicas=3, rank=r, seed=1) for r in range(3)]
    got = [p.indices() for p in parts]
    assert all(len(g) == 4 == len(p) for g, p in zip(got, parts))
    assert sorted(set(np.concatenate(got).tolist())) == list(range(10))  # padded by repeating, nothing lost
    parts[0].set_epoch(1)
    assert not np.array_equal(parts[0].indices(), got[0])  # a new shuffle per epoch
    dropped = [DistributedSampler(10, 3, r, shuffle=False, drop_last=True).indices().tolist() for r in range(3)]
    assert dropped == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    with pytest.raises(of.errors.InvalidArgumentError, match="rank"):
        DistributedSampler(10, num_replicas=2, rank=2)


def test_launcher_gives_each_local_process_a_share_of_the_cpus(monkeypatch):
    from opforge.distributed.run import environment
    monkeypatch.delenv("OPFORGE_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cpus = of.config.usable_cpus()
    assert environment(2)["OPFORGE_NUM_THREADS"] == str(max(1, cpus // 2))
    assert environment(4 * cpus)["OPFORGE_NUM_THREADS"] == "1"
    assert "OPFORGE_NUM_THREADS" not in environment(2, hostfile="hosts")  # other machines: unknown
    assert environment(2, timeout=5)["OPFORGE_MPI_TIMEOUT"] == "5"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert "OPFORGE_NUM_THREADS" not in environment(2)  # the user's choice stands


def test_overlap_default_follows_spare_cores(monkeypatch):
    from opforge.distributed import _collectives, _optimizer
    monkeypatch.setattr(_collectives, "local_size", lambda: 2)
    monkeypatch.setattr(of.config, "num_threads", lambda: 1)
    monkeypatch.delenv("OPFORGE_MPI_OVERLAP", raising=False)
    monkeypatch.setattr(of.config, "usable_cpus", lambda: 2)
    assert _optimizer.overlap_default() is False  # 2 processes x (1 thread + 1) > 2 cores
    monkeypatch.setattr(of.config, "usable_cpus", lambda: 4)
    assert _optimizer.overlap_default() is True
    monkeypatch.setenv("OPFORGE_MPI_OVERLAP", "0")
    assert _optimizer.overlap_default() is False
