"""Where the registry JSON comes from: a file, or the C++ dump tool. It is
read by the package's reader (opforge._schema.reader), the runtime's too.

The dump tool is the CMake target ``opforge_dump_registry``; it links every op
declaration and prints the registry JSON on stdout. It exits non-zero, with
the registration errors (each naming file:line) on stderr, when a declaration
is invalid.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from opforge._schema.reader import loads

from .errors import CodegenError

DUMP_TARGET = "opforge_dump_registry"


def load_file(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CodegenError(f"{path}: cannot read the registry: {e.strerror}") from e
    return loads(data, str(path))


def _stream_target():
    """Where build output goes: our stderr, so stdout stays the diff / report."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None  # captured (e.g. under pytest): let it inherit


def _run(cmd: list[str], what: str) -> None:
    print(f"codegen: {' '.join(cmd)}", file=sys.stderr)
    try:
        rc = subprocess.run(cmd, stdout=_stream_target(), check=False).returncode
    except FileNotFoundError as e:
        raise CodegenError(f"{what}: {cmd[0]} not found on PATH") from e
    if rc != 0:
        raise CodegenError(f"{what} failed (exit code {rc}); see the output above")


DEFAULT_BUILD_DIR = Path("build/codegen")


def _cache_entry(cache: Path, name: str) -> str | None:
    try:
        text = cache.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.split(":")[0] == name:
            return value
    return None


def existing_build(source_dir: Path) -> Path | None:
    """A CMake build of this tree that `pip install` or a developer already
    made (build/<wheel tag>, build/dev): its dump tool is up to date or an
    incremental build away, where build/codegen would compile the whole core
    a second time (8 CPU-minutes of CI's 20). Sanitizer builds are left out
    (their tool needs libasan)."""
    home = source_dir.resolve()
    found = []
    for cache in (source_dir / "build").glob("*/CMakeCache.txt"):
        if cache.parent.name == DEFAULT_BUILD_DIR.name:
            continue
        where = _cache_entry(cache, "CMAKE_HOME_DIRECTORY")
        if where is None or Path(where).resolve() != home:
            continue
        if (_cache_entry(cache, "OPFORGE_SANITIZE") or "OFF").upper() in ("ON", "1", "TRUE", "YES"):
            continue
        found.append((cache.stat().st_mtime, cache.parent))
    return max(found)[1] if found else None


def _newest_source(source_dir: Path) -> float:
    """The newest mtime among what the dump tool is built from (folders too:
    a deleted file changes its folder's)."""
    paths = [source_dir / "CMakeLists.txt"]
    for top in ("cpp", "cmake"):
        paths += [source_dir / top, *(source_dir / top).rglob("*")]
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def dump_registry_default(source_dir: Path) -> Any:
    """The dump from an existing build of the tree if there is one, else from build/codegen."""
    reuse = existing_build(source_dir)
    if reuse is None:
        return dump_registry(source_dir, source_dir / DEFAULT_BUILD_DIR)
    # Built after every source changed (CI, right after `pip install .`): run it.
    # Not with ninja: its manifest check runs the cmake of pip's isolated build
    # environment, which is gone.
    tool = _tool(reuse)
    if tool.exists() and tool.stat().st_mtime > _newest_source(source_dir):
        return run_dump_tool(tool)
    ninja = shutil.which("ninja")
    if ninja is not None:
        try:
            _run([ninja, "-C", str(reuse), DUMP_TARGET], f"building {DUMP_TARGET}")
        except CodegenError as e:
            print(f"codegen: the build in {reuse} failed ({e}); building the dump tool in "
                  f"{DEFAULT_BUILD_DIR}", file=sys.stderr)
        else:
            return run_dump_tool(tool)
    return dump_registry(source_dir, source_dir / DEFAULT_BUILD_DIR)


def _tool(build_dir: Path) -> Path:
    return build_dir / (DUMP_TARGET + (".exe" if os.name == "nt" else ""))


def dump_registry(source_dir: Path, build_dir: Path) -> Any:
    """Configures (once), builds and runs the dump tool; returns the parsed JSON."""
    if shutil.which("cmake") is None:
        raise CodegenError("cmake not found on PATH: install it, or pass --registry FILE")
    cache = build_dir / "CMakeCache.txt"
    gone = [t for t in (_cache_entry(cache, "CMAKE_MAKE_PROGRAM"), _cache_entry(cache, "CMAKE_COMMAND"))
            if t and not Path(t).exists()]
    if gone:  # configured from a virtual environment since deleted: every build would fail
        print(f"codegen: {build_dir} was configured with {gone[0]}, which is gone; configuring it again",
              file=sys.stderr)
        shutil.rmtree(build_dir)
    if not cache.exists():
        _run(["cmake", "-S", str(source_dir), "-B", str(build_dir), "-G", "Ninja",
              "-DOPFORGE_PYTHON=OFF", "-DCMAKE_BUILD_TYPE=Release"], "configuring the dump tool")
    _run(["cmake", "--build", str(build_dir), "--target", DUMP_TARGET],
         f"building {DUMP_TARGET}")
    exe = _tool(build_dir)
    if not exe.exists():
        raise CodegenError(f"{exe}: not found after building {DUMP_TARGET}")
    return run_dump_tool(exe)


def run_dump_tool(exe: Path) -> Any:
    """Runs an already built dump tool (the CMake build passes its own)."""
    try:
        proc = subprocess.run([str(exe)], capture_output=True, text=True, encoding="utf-8",
                              check=False)
    except OSError as e:
        raise CodegenError(f"{exe}: cannot run the dump tool: {e.strerror}") from e
    if proc.returncode != 0:
        details = proc.stderr.strip().splitlines() or [f"(no message; exit code {proc.returncode})"]
        raise CodegenError([f"{DUMP_TARGET} reported registration errors:"] + details)
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    return loads(proc.stdout, DUMP_TARGET)
