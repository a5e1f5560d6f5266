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


def dump_registry(source_dir: Path, build_dir: Path) -> Any:
    """Configures (once), builds and runs the dump tool; returns the parsed JSON."""
    if shutil.which("cmake") is None:
        raise CodegenError("cmake not found on PATH: install it, or pass --registry FILE")
    if not (build_dir / "CMakeCache.txt").exists():
        _run(["cmake", "-S", str(source_dir), "-B", str(build_dir), "-G", "Ninja",
              "-DOPFORGE_PYTHON=OFF", "-DCMAKE_BUILD_TYPE=Release"], "configuring the dump tool")
    _run(["cmake", "--build", str(build_dir), "--target", DUMP_TARGET],
         f"building {DUMP_TARGET}")
    exe = build_dir / (DUMP_TARGET + (".exe" if os.name == "nt" else ""))
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
