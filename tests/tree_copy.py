"""A private copy of the source tree with its own build, for tests and
bench/edit_to_import.py: add an op, rebuild incrementally, import it."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns("build", "build-*", ".venv", ".git", "__pycache__", ".pytest_cache",
                                ".hypothesis", "dist", "*.egg-info")


def run(cmd, cwd=None, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


class TreeCopy:
    """src/: the copy; src/build/dev: its CMake build; prefix/: an importable opforge."""

    def __init__(self, work: pathlib.Path, optimize: bool = True):
        self.work = pathlib.Path(work)
        # optimize=False compiles at -O0, about 4x faster: for tests that
        # check the workflow, not the speed of what it builds.
        self.build_type = ["-DCMAKE_BUILD_TYPE=Release"] if optimize else \
            ["-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_CXX_FLAGS_DEBUG=-O0"]
        self.src = self.work / "src"
        self.build = self.src / "build" / "dev"
        self.prefix = self.work / "prefix"

    def create(self) -> None:
        shutil.copytree(ROOT, self.src, ignore=IGNORE, symlinks=True)

    def configure(self) -> None:
        run(["cmake", "-S", self.src, "-B", self.build, "-G", "Ninja", *self.build_type,
             f"-DPython_EXECUTABLE={sys.executable}"])

    def rebuild(self) -> str:
        """The faster incremental command (what the README documents), then
        an install into prefix/ (the package's .py files plus CMake's files)."""
        out = run(["cmake", "--build", self.build]).stdout
        run(["cmake", "--install", self.build, "--prefix", self.prefix])
        shutil.copytree(self.src / "pkg" / "opforge", self.prefix / "opforge", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        return out

    def codegen(self, *args: str) -> subprocess.CompletedProcess:
        """`python -m codegen` in the copy, reusing its build for the dump tool."""
        return subprocess.run([sys.executable, "-m", "codegen", "--build-dir", str(self.build), *args],
                              cwd=self.src, capture_output=True, text=True)

    def python(self, code: str) -> subprocess.CompletedProcess:
        """Runs code against prefix/ (not the installed opforge)."""
        env = dict(os.environ, PYTHONPATH=str(self.prefix))
        return subprocess.run([sys.executable, "-c", code], cwd=self.work, env=env, capture_output=True,
                              text=True)
