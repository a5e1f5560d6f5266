"""``python -m opforge.distributed.run -np 2 python train.py [args...]``

Starts the command in N processes with the mpiexec of the mpich wheel (this
Python's prefix), else the first mpiexec on PATH. Builds the collectives
library first, so the processes do not all compile it. Options before the
command: ``-np N``, ``--hostfile FILE`` (passed to mpiexec as ``-f``),
``--timeout SECONDS`` (OPFORGE_MPI_TIMEOUT for the collectives),
``--mpiexec PATH``. On a cluster, use its own ``mpirun`` directly (see
docs/distributed.md). Exits with mpiexec's status.

Without a hostfile (all processes on this machine) and unless
OPFORGE_NUM_THREADS or OMP_NUM_THREADS is set, each process gets an equal
share of the usable CPUs as its intra-op threads (at least one), as
torchrun does: N processes each running a pool as wide as the machine
oversubscribe the cores (on 2 cores, 2 processes of 2 threads took 5-7x
longer per training step than 2 of 1; bench/distributed.py).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys


def find_mpiexec() -> str:
    for prefix in (sys.prefix, sys.base_prefix):
        candidate = pathlib.Path(prefix) / "bin" / "mpiexec"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise SystemExit("opforge.distributed.run: no mpiexec: pip install 'opforge[mpi]' (the mpich wheel has one)")
    return found


def command(np_: int, argv: list[str], hostfile: str | None = None, mpiexec: str | None = None) -> list[str]:
    """The mpiexec command line that runs `argv` in `np_` processes."""
    cmd = [mpiexec or find_mpiexec(), "-n", str(np_)]
    if hostfile:
        cmd += ["-f", hostfile]
    return cmd + argv


def main(args=None) -> int:
    p = argparse.ArgumentParser(prog="python -m opforge.distributed.run", description=__doc__.split("\n\n")[0])
    p.add_argument("-np", "-n", dest="np", type=int, required=True, help="number of processes")
    p.add_argument("--hostfile", help="mpiexec hostfile (one host[:slots] a line)")
    p.add_argument("--timeout", type=float, help="seconds a collective waits for the others (OPFORGE_MPI_TIMEOUT)")
    p.add_argument("--mpiexec", help="the mpiexec to use")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments")
    ns = p.parse_args(args)
    if ns.np < 1:
        p.error("-np must be >= 1")
    if not ns.command:
        p.error("give the command to run, e.g. python train.py")
    from opforge.distributed._library import library_path
    library_path()  # build once, here
    return subprocess.call(command(ns.np, ns.command, ns.hostfile, ns.mpiexec),
                           env=environment(ns.np, ns.hostfile, ns.timeout))


def environment(np_: int, hostfile: str | None = None, timeout: float | None = None) -> dict:
    """os.environ plus the collectives' timeout and each local process's share of the CPUs."""
    env = dict(os.environ)
    if timeout is not None:
        env["OPFORGE_MPI_TIMEOUT"] = str(timeout)
    if not hostfile and not env.get("OPFORGE_NUM_THREADS") and not env.get("OMP_NUM_THREADS"):
        from opforge import config
        env["OPFORGE_NUM_THREADS"] = str(max(1, config.usable_cpus() // np_))
    return env


if __name__ == "__main__":
    sys.exit(main())
