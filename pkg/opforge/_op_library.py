"""opforge.load_op_library: load a custom op library and wrap its ops.

1. The library file's ``.opforge_stamp`` section (see opforge/stamp.h) is
   read and compared with this opforge's stamp before anything is loaded:
   none of the library's code runs if it was built for another opforge.
2. It is dlopened with the registry staged (_pywrap_internal._load_library):
   its static initialisers register into a side table that is checked
   (duplicate ops, missing kernels, ...) and committed all at once, or
   dropped, leaving the registry exactly as it was.
3. Before the commit, the staged ops (the registry JSON of the library
   alone) are read by the one schema reader (opforge._schema) and their
   wrappers rendered from the same views and templates as the built-in
   ``gen_<group>_ops`` modules (opforge._schema.wrappers; docstrings
   included); they call ``_pywrap_internal.execute``. Nothing of codegen/
   is imported: the renderer is the package's own, and codegen uses it too.
"""
from __future__ import annotations

import linecache
import os
import re
import sys
import threading
import types

from opforge import _pywrap_internal as _pw, errors

_lock = threading.Lock()
_by_path: dict[str, tuple[tuple[int, int, int], types.ModuleType]] = {}
_by_file: dict[tuple[int, int], types.ModuleType] = {}


def _parse_stamp(stamp: str) -> tuple[str, str]:
    m = re.fullmatch(r"opforge-stamp version=(\S+) abi=(\S+)", stamp)
    return (m.group(1), m.group(2)) if m else ("<unreadable stamp>", stamp)


def check_stamp(path: str) -> None:
    """Raises an opforge.errors exception unless `path` is a shared library
    built against this opforge (same version and ABI)."""
    from opforge import _elf  # here, not at import: `import opforge` stays lean (dataclasses)

    try:
        elf, section = _elf.read_section(path, ".opforge_stamp")
    except _elf.NotElfError as e:
        raise errors.InvalidArgumentError(
            f"load_op_library: '{path}' is not a shared library ({e})") from None
    except OSError as e:
        raise errors.NotFoundError(f"load_op_library: cannot read '{path}': {e.strerror}") from None
    if elf.type != _elf.ET_DYN:
        raise errors.InvalidArgumentError(
            f"load_op_library: '{path}' is an ELF file but not a shared library (type {elf.type}); "
            "build it with opforge_add_op_library() or `-shared`")
    ours = _pw.stamp()
    if elf.machine != _elf.info(_pw.__file__).machine:
        raise errors.InvalidArgumentError(
            f"load_op_library: '{path}' was built for another machine (ELF machine {elf.machine})")
    stamps = sorted({s.decode("utf-8", "replace") for s in (section or b"").split(b"\0") if s})
    if not stamps:
        raise errors.InvalidArgumentError(
            f"load_op_library: '{path}' has no opforge stamp: it was not compiled against opforge's "
            "headers (#include \"opforge/opforge.h\"); build it with opforge_add_op_library() or "
            "opforge.sysconfig.get_compile_flags()")
    mismatched = [s for s in stamps if s != ours]
    if mismatched:
        theirs_v, theirs_abi = _parse_stamp(mismatched[0])
        ours_v, ours_abi = _parse_stamp(ours)
        mixed = " (its object files disagree: rebuild all of them)" if len(stamps) > 1 else ""
        raise errors.InvalidArgumentError(
            f"load_op_library: '{path}' was built against opforge {theirs_v} (ABI {theirs_abi}), "
            f"but this is opforge {ours_v} (ABI {ours_abi}){mixed}. Rebuild it against this "
            "opforge: CMake with CMAKE_PREFIX_PATH=$(python -c 'import opforge.sysconfig as s; "
            "print(s.get_cmake_dir())'), or the flags from opforge.sysconfig. Nothing was loaded.")


def _module_name(path: str) -> str:
    stem = os.path.basename(path).split(".")[0]
    stem = re.sub(r"^lib", "", stem)
    stem = re.sub(r"\W", "_", stem) or "library"
    name, n = f"opforge.op_libraries.{stem}", 1
    while name in sys.modules:
        n += 1
        name = f"opforge.op_libraries.{stem}_{n}"
    return name


def _render(path: str, staged_json: str) -> tuple[str, str, str, list[str]]:
    """The library module's source, its gradient functions' source and its
    Dask wrappers' source, from the staged ops; raises on invalid ones."""
    from opforge._schema import reader, validate
    from opforge._schema.errors import SchemaError
    from opforge._schema.wrappers.render import render_library
    try:
        registry = validate.check(reader.read(staged_json, f"op library '{path}'"))
    except SchemaError as e:
        raise errors.InvalidArgumentError(
            f"refused op library '{path}': " + "; ".join(e.messages)) from None
    text, grads, dask = render_library(registry, path)
    return text, grads, dask, sorted(o.name for o in registry.ops)


def load_op_library(path) -> types.ModuleType:
    """Loads a custom op library and returns a module with a wrapper per op.

    The library must have been built against this opforge (version and ABI
    are checked from its file before it is loaded). Its ops are registered
    all together or not at all: a library that redeclares a registered op,
    lacks a symbol or a kernel, or is not a shared library raises an
    ``opforge.errors`` exception and leaves the registry as it was. Loading
    the same file again returns the same module.
    """
    given = os.fspath(path)
    real = os.path.realpath(given)
    try:
        st = os.stat(real)
    except OSError as e:
        raise errors.NotFoundError(f"load_op_library: cannot open '{given}': {e.strerror}") from None
    ident = (st.st_dev, st.st_ino, st.st_mtime_ns)
    with _lock:
        seen = _by_path.get(real)
        if seen is not None:
            if seen[0] != ident:
                raise errors.InvalidArgumentError(
                    f"load_op_library: '{given}' changed since it was loaded into this process; a "
                    "library cannot be reloaded: restart Python to use the new build")
            return seen[1]
        same = _by_file.get(ident[:2])
        if same is not None:  # another path to the same file
            return same
        check_stamp(real)
        rendered: list[tuple[str, str, str, list[str]]] = []

        def accept(staged_json: str) -> None:
            rendered.append(_render(real, staged_json))

        _pw._load_library(real, accept)
        from opforge import _opinfo  # (imports the schema model: 10 ms `import opforge` need not pay)
        _opinfo.refresh()  # the registry now has the library's ops
        text, grads, dask, op_names = rendered[-1]
        module = _make_module(real, text, op_names)
        _add_gradients(module, real, grads)
        _add_dask(module, real, dask)
        _by_path[real] = (ident, module)
        _by_file[ident[:2]] = module
        return module


def _make_module(path: str, text: str, op_names: list[str]) -> types.ModuleType:
    name = _module_name(path)
    module = types.ModuleType(name)
    filename = f"<opforge op library {path}>"
    module.__file__ = path
    module.__loader__ = None
    module.__dict__.update(OP_NAMES=tuple(op_names), LIBRARY_PATH=path)
    # Register the source so tracebacks, inspect.getsource and help() work.
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), module.__dict__)
    sys.modules[name] = module
    return module


def _add_gradients(module: types.ModuleType, path: str, text: str) -> None:
    # The gradient functions call the library's wrappers through `_lib`.
    from opforge.autodiff import registry
    namespace = {"_lib": module, "__name__": module.__name__ + "._grads"}
    filename = f"<opforge op library {path} gradients>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)
    registry.add_declared(namespace["GRADIENTS"], namespace["NO_GRADIENT"])


def _add_dask(module: types.ModuleType, path: str, text: str) -> None:
    """``module.dask``: the ops on dask arrays, built on first access (only
    then is dask imported), like ``opforge.dask`` for the built-in ops."""
    lock = threading.Lock()

    def __getattr__(name: str):
        if name != "dask":
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        with lock:
            sub = module.__dict__.get("dask")
            if sub is None:
                sub = types.ModuleType(module.__name__ + ".dask")
                sub.__dict__["_ops"] = module
                filename = f"<opforge op library {path} dask>"
                linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
                exec(compile(text, filename, "exec"), sub.__dict__)
                sys.modules[sub.__name__] = sub
                module.__dict__["dask"] = sub
            return sub

    module.__dict__["__getattr__"] = __getattr__


def loaded_libraries() -> dict[str, types.ModuleType]:
    """{library path: module} for every library loaded into this process."""
    with _lock:
        return {p: m for p, (_, m) in _by_path.items()}
