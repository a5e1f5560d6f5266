"""The collectives op library (cpp/libraries/mpi/): found, built on first
use with the public SDK (opforge.sysconfig) against the MPI headers, cached
per opforge build and MPI, and loaded with load_op_library.

Built on first use rather than shipped in the wheel: ``pip install opforge``
needs no MPI, and the library always matches the MPI that is installed now
(the mpich wheel, or a cluster's own MPI via ``MPI_HOME`` or ``mpicxx``).
The cache key holds opforge's stamp, so upgrading opforge rebuilds it; a
library named by ``OPFORGE_MPI_LIBRARY`` that was built for another opforge
is refused by load_op_library's stamp check, with the rebuild command.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import threading

from opforge import errors

_PKG = pathlib.Path(__file__).resolve().parents[1]
_SOURCES = ("mpi_comm.cc", "mpi_kernels.cc", "mpi_ops.cc")
_REBUILD = "python -m opforge.distributed.build"
_lock = threading.Lock()
_loaded: dict[str, object] = {}


def source_dir() -> pathlib.Path:
    """cpp/libraries/mpi: installed in the wheel as opforge/libraries/mpi, or a source checkout's."""
    for d in (_PKG / "libraries" / "mpi", _PKG.parents[1] / "cpp" / "libraries" / "mpi"):
        if (d / "mpi_ops.cc").is_file():
            return d
    raise errors.NotFoundError("opforge.distributed: the collectives' C++ sources (libraries/mpi) are missing "
                               "from this installation")


def mpi_flags() -> tuple[list[str], list[str]]:
    """(compile flags, link flags) for MPI: MPI_HOME, this Python's prefix (the mpich wheel), or mpicxx -show."""
    homes = [os.environ.get("MPI_HOME"), sys.prefix, sys.base_prefix]
    for home in filter(None, homes):
        inc, lib = pathlib.Path(home) / "include", pathlib.Path(home) / "lib"
        if (inc / "mpi.h").is_file() and any(lib.glob("libmpi.so*")):
            return [f"-I{inc}"], [f"-L{lib}", "-lmpi", f"-Wl,-rpath,{lib}"]
    wrapper = shutil.which("mpicxx") or shutil.which("mpic++")
    if wrapper:
        shown = subprocess.run([wrapper, "-show"], capture_output=True, text=True, timeout=30).stdout.split()[1:]
        return ([f for f in shown if f.startswith(("-I", "-D"))],
                [f for f in shown if f.startswith(("-L", "-l", "-Wl"))])
    raise errors.NotFoundError(
        "opforge.distributed needs MPI: pip install 'opforge[mpi]' (mpi4py and the mpich wheel), or set MPI_HOME "
        "to an MPI installation with include/mpi.h and lib/libmpi.so")


def _cache_root() -> pathlib.Path:
    base = os.environ.get("OPFORGE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "opforge")
    return pathlib.Path(base) / "mpi"


def sdk_flags() -> tuple[list[str], list[str]]:
    """opforge.sysconfig's flags, with the headers and the library taken from
    beside the extension module (in an editable install the package folder
    has neither; the build's install tree has both)."""
    from opforge import _pywrap_internal, sysconfig
    ext = pathlib.Path(_pywrap_internal.__file__).resolve()
    cflags = sysconfig.get_compile_flags()
    if not pathlib.Path(sysconfig.get_include()).is_dir() and (ext.parent / "include").is_dir():
        cflags = [f"-I{ext.parent / 'include'}" if f.startswith("-I") else f for f in cflags]
    return cflags, [f"-L{ext.parent}", f"-l:{ext.name}", f"-Wl,-rpath,{ext.parent}"]


def _command(out: pathlib.Path) -> list[str]:
    sdk_c, sdk_l = sdk_flags()
    cflags, lflags = mpi_flags()
    src = source_dir()
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise errors.NotFoundError("opforge.distributed: a C++ compiler (c++ or $CXX) is needed to build the "
                                   "collectives library once")
    return [cxx, "-shared", "-O2", *sdk_c, *cflags, f"-I{src}",
            *(str(src / s) for s in _SOURCES), "-o", str(out), *sdk_l, *lflags]


def _key() -> str:
    from opforge import sysconfig
    h = hashlib.sha256(sysconfig.get_stamp().encode())
    src = source_dir()
    for name in sorted(p.name for p in src.iterdir() if p.suffix in (".cc", ".h")):
        h.update(name.encode() + (src / name).read_bytes())
    h.update(" ".join(_command(pathlib.Path("x"))).encode())
    return h.hexdigest()[:16]


def build(force: bool = False) -> pathlib.Path:
    """Builds the library into the cache (once; processes starting together
    wait on a file lock) and returns its path."""
    folder = _cache_root() / _key()
    lib = folder / "libopforge_mpi.so"
    if lib.is_file() and not force:
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.is_file() and not force:
            return lib
        tmp = folder / f"libopforge_mpi.{os.getpid()}.so"
        proc = subprocess.run(_command(tmp), capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise errors.InternalError(f"opforge.distributed: building the collectives library failed:\n"
                                       f"{' '.join(_command(tmp))}\n{proc.stderr[-4000:]}")
        os.replace(tmp, lib)
    return lib


def library_path() -> pathlib.Path:
    """OPFORGE_MPI_LIBRARY if set (a prebuilt library), else the cached build."""
    given = os.environ.get("OPFORGE_MPI_LIBRARY")
    return pathlib.Path(given) if given else build()


def load():
    """(ops module, ctypes handle) of the library, loaded once per process."""
    with _lock:
        if "ops" not in _loaded:
            path = library_path()
            import opforge as of
            try:
                ops = of.load_op_library(path)
            except errors.InvalidArgumentError as e:
                if "built against opforge" not in str(e):
                    raise
                raise errors.InvalidArgumentError(
                    f"opforge.distributed: {e} For the collectives library run `{_REBUILD}` (or unset "
                    "OPFORGE_MPI_LIBRARY to use the cached build).") from None
            handle = ctypes.CDLL(str(path))  # the library dlopen'ed above: same handle
            handle.opforge_mpi_init.argtypes = [ctypes.c_double]
            handle.opforge_mpi_last_error.restype = ctypes.c_char_p
            handle.opforge_mpi_set_timeout.argtypes = [ctypes.c_double]
            handle.opforge_mpi_enqueue.argtypes = [ctypes.c_char_p]
            handle.opforge_mpi_unqueue.argtypes = [ctypes.c_char_p]
            _loaded.update(ops=ops, handle=handle)
        return _loaded["ops"], _loaded["handle"]
