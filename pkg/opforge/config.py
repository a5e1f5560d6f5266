"""What opforge's runtime chose for this process: intra-op threads and matmul's BLAS.

    >>> import opforge as of
    >>> of.config.num_threads()     # OPFORGE_NUM_THREADS, else OMP_NUM_THREADS, else usable CPUs
    >>> of.config.blas()["matmul"]  # "numpy" (numpy's OpenBLAS), "bundled" or "built-in"

Read-only: the values are fixed when the pool starts (see README, "Performance
and its knobs").
"""
import functools
import os

# The C++ functions are opforge:: API symbols exported by _pywrap_internal
# (cmake/pywrap_exports.map); ctypes reaches them by their Itanium names.
_NUM_THREADS = "_ZN7opforge17NumIntraOpThreadsEv"
_USABLE_CPUS = "_ZN7opforge10UsableCpusEv"
_SHARED_PATH = "_ZN7opforge4blas10SharedPathEv"
_PRIVATE_PATH = "_ZN7opforge4blas11PrivatePathEv"
_SHARED_THREADS = "_ZN7opforge4blas13SharedThreadsEv"


@functools.lru_cache(maxsize=None)
def _fn(symbol, restype):
    import ctypes  # only when asked: `import opforge` stays lean

    from opforge import _pywrap_internal
    f = getattr(ctypes.CDLL(_pywrap_internal.__file__), symbol)
    f.restype = ctypes.c_char_p if restype is str else ctypes.c_int
    f.argtypes = []
    return f


def num_threads() -> int:
    """Threads an op may use (the intra-op pool plus the calling thread)."""
    return _fn(_NUM_THREADS, int)()


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by its cgroup CPU quota."""
    return _fn(_USABLE_CPUS, int)()


def blas() -> dict:
    """Which BLAS a large float matmul runs on now, and the candidates.

    ``shared``: the OpenBLAS numpy loaded (path or None) and its thread count;
    ``bundled``: opforge's single-threaded copy (scipy-openblas32), loaded by
    this call if it was not yet. ``matmul`` is ``"numpy"`` when the shared one
    is used (it exists and does not run more threads than :func:`num_threads`),
    else ``"bundled"``, else ``"built-in"``.
    """
    def path(symbol):
        p = _fn(symbol, str)()
        return os.path.normpath(p.decode()) if p is not None else None
    shared, threads = path(_SHARED_PATH), _fn(_SHARED_THREADS, int)()
    bundled = path(_PRIVATE_PATH)
    if shared is not None and threads <= num_threads():
        used = "numpy"
    else:
        used = "bundled" if bundled is not None else "built-in"
    return {"matmul": used, "shared": shared, "shared_threads": threads, "bundled": bundled}
