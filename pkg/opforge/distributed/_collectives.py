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

_state = {"ops": None, "handle": None}
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


def allreduce(x, op: str = "average", prescale: float = 1.0, postscale: float = 1.0, name: str | None = None):
    """Reduces `x` across processes ('sum', 'average', 'min', 'max');
    ``postscale * reduce(prescale * x)``. Every process gets the result."""
    return _lib().mpi_allreduce(x, op=op, prescale=prescale, postscale=postscale,
                                name=_name("allreduce", name))


def allgather(x, name: str | None = None):
    """Every process's `x` concatenated along axis 0 in rank order (the first
    dims may differ across processes)."""
    return _lib().mpi_allgather(x, name=_name("allgather", name))


def broadcast(x, root: int = 0, name: str | None = None):
    """The `root` process's `x` on every process."""
    return _lib().mpi_broadcast(x, root=root, name=_name("broadcast", name))


def alltoall(x, name: str | None = None):
    """Block i of `x` (split along axis 0 into size() blocks) goes to process
    i; the result holds the blocks received, in rank order."""
    return _lib().mpi_alltoall(x, name=_name("alltoall", name))


def barrier() -> None:
    """Returns once every process called it (bounded by the timeout)."""
    import numpy as np
    _lib().mpi_barrier(np.zeros((), np.int32)).numpy()


def grouped_allreduce(tensors, op: str = "average", fusion_bytes: int = 4 << 20, name: str | None = None):
    """Allreduces a list of same-dtype tensors with tensor fusion: one flat
    Tensor holding the results one after another (see split_fused)."""
    return _lib().mpi_grouped_allreduce(list(tensors), op=op, fusion_bytes=int(fusion_bytes),
                                        name=_name("grouped", name))


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
