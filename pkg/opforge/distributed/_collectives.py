"""Process setup and the collectives: thin calls of the library's ops.

Every collective is an op of the library (cpp/libraries/mpi/mpi_ops.cc), so
it works wherever ops do: eagerly, recorded on the tape (gradients declared
beside the op), added to a graph, or queued in async mode (a pending Tensor
comes back; reading it waits). Names default to ``<kind>.<n>``, counted per
process: every process calls the same collectives in the same order, so a
process that goes out of step fails the name check instead of mixing data.
"""
from __future__ import annotations

import atexit
import itertools
import os
import threading

from opforge import errors

_state: dict = {"ops": None, "handle": None}  # the op library and the ctypes handle, once init() ran
_counter = itertools.count()
_count_lock = threading.Lock()


def _lib():
    ops = _state["ops"]
    if ops is None:
        raise errors.InvalidArgumentError("opforge.distributed: call opforge.distributed.init() first")
    return ops


def init(timeout: float | None = None) -> None:
    """Starts MPI in this process (once; also fine after mpi4py started it).

    `timeout` (seconds; default ``OPFORGE_MPI_TIMEOUT`` or 60) bounds how long
    a collective waits for the other processes before it raises, so a process
    that died or raised never leaves the others hanging.
    """
    from opforge.distributed import _library
    ops, handle = _library.load()
    if timeout is None:
        timeout = float(os.environ.get("OPFORGE_MPI_TIMEOUT", "60"))
    if not timeout > 0:
        raise errors.InvalidArgumentError(f"opforge.distributed.init: timeout must be > 0, got {timeout}")
    if handle.opforge_mpi_init(float(timeout)) != 0:
        raise errors.InternalError("opforge.distributed.init: " + handle.opforge_mpi_last_error().decode())
    first = _state["ops"] is None
    _state.update(ops=ops, handle=handle)
    if first:
        atexit.register(_finalize)


def set_timeout(seconds: float) -> None:
    """Changes the collectives' timeout (see init)."""
    _lib()
    _state["handle"].opforge_mpi_set_timeout(float(seconds))


def _finalize() -> None:
    import opforge as of
    try:
        of.flush()  # queued collectives finish before MPI goes away
    except Exception:  # noqa: BLE001: errors nobody read; exiting anyway
        pass
    _state["handle"].opforge_mpi_finalize()


def is_initialized() -> bool:
    return _state["ops"] is not None


def _topology() -> list[int]:
    import ctypes
    _lib()
    out = (ctypes.c_int * 4)()
    _state["handle"].opforge_mpi_topology(out)
    return list(out)


def rank() -> int:
    """This process's rank in [0, size())."""
    return _topology()[0]


def size() -> int:
    """The number of processes."""
    return _topology()[1]


def local_rank() -> int:
    """This process's rank among the processes on its machine."""
    return _topology()[2]


def local_size() -> int:
    """The number of processes on this machine."""
    return _topology()[3]


def _name(kind: str, name: str | None) -> str:
    if name is not None:
        return str(name)
    with _count_lock:
        return f"{kind}.{next(_counter)}"


def _call(op_name, kind, name, *args, **attrs):
    """Calls the library's op with its name queued first, so that queued
    (async) collectives run in call order on every process (see Turn in
    mpi_comm.h). A call that did not run the kernel takes its entry back:
    it raised, or it added a graph node (run later by a Session)."""
    from opforge import Tensor
    fn = getattr(_lib(), op_name)
    name = _name(kind, name)
    handle = _state["handle"]
    key = name.encode()
    handle.opforge_mpi_enqueue(key)
    try:
        out = fn(*args, name=name, **attrs)
    except BaseException:
        handle.opforge_mpi_unqueue(key)
        raise
    if not isinstance(out, Tensor):  # a graph node
        handle.opforge_mpi_unqueue(key)
    return out


def allreduce(x, op: str = "average", prescale: float = 1.0, postscale: float = 1.0, name: str | None = None):
    """Reduces `x` across processes ('sum', 'average', 'min', 'max');
    ``postscale * reduce(prescale * x)``. Every process gets the result."""
    return _call("mpi_allreduce", "allreduce", name, x, op=op, prescale=prescale, postscale=postscale)


def allgather(x, name: str | None = None):
    """Every process's `x` concatenated along axis 0 in rank order (the first
    dims may differ across processes)."""
    return _call("mpi_allgather", "allgather", name, x)


def broadcast(x, root: int = 0, name: str | None = None):
    """The `root` process's `x` on every process."""
    return _call("mpi_broadcast", "broadcast", name, x, root=root)


def alltoall(x, name: str | None = None):
    """Block i of `x` (split along axis 0 into size() blocks) goes to process
    i; the result holds the blocks received, in rank order."""
    return _call("mpi_alltoall", "alltoall", name, x)


def barrier(name: str | None = None):
    """Returns once every process called it (bounded by the timeout). In a
    graph it adds the node and returns it: run it, or order ops after it."""
    import numpy as np

    from opforge import Tensor
    out = _call("mpi_barrier", "barrier", name, np.zeros((), np.int32))
    if not isinstance(out, Tensor):
        return out
    out.numpy()  # async mode: waits for the queued barrier
    return None


def grouped_allreduce(tensors, op: str = "average", fusion_bytes: int = 4 << 20, name: str | None = None):
    """Allreduces a list of same-dtype tensors with tensor fusion: one flat
    Tensor holding the results one after another (see split_fused)."""
    return _call("mpi_grouped_allreduce", "grouped", name, list(tensors), op=op, fusion_bytes=int(fusion_bytes))


def split_fused(fused, shapes):
    """numpy views of `fused` (from grouped_allreduce) in `shapes` (no copies)."""
    import math
    flat = fused.numpy()
    views, at = [], 0
    for shape in shapes:
        n = math.prod(shape)
        views.append(flat[at:at + n].reshape(shape))
        at += n
    return views
