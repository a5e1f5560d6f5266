"""Building op libraries in tests: the example library (CMake) and the
fixtures of tests/op_library_fixtures (the compiler, no CMake). conftest.py
builds each once per session for every test file that needs them."""
from __future__ import annotations

import concurrent.futures
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "op_library_fixtures"


def cxx() -> str:
    found = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    assert found, "a C++ compiler is needed to build op libraries"
    return found


def run(cmd, **kw):
    if str(cmd[0]) != sys.executable and "env" not in kw:
        # The compiler and CMake are not ours to check: under .ci/sanitize they would
        # otherwise run with the sanitizer runtimes preloaded, at several times the cost.
        kw["env"] = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout}\n{proc.stderr}"
    return proc


def build_example(build: pathlib.Path) -> pathlib.Path:
    import opforge as of
    run(["cmake", "-S", str(ROOT / "examples" / "custom_op"), "-B", str(build), "-G", "Ninja",
         "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={of.sysconfig.get_cmake_dir()}"])
    run(["cmake", "--build", str(build)])
    return build / "libcustom_ops.so"


def build_fixtures(out: pathlib.Path) -> dict[str, pathlib.Path]:
    import opforge as of
    flags = of.sysconfig.get_compile_flags()
    link = of.sysconfig.get_link_flags()

    def build(src: pathlib.Path) -> tuple[str, pathlib.Path]:
        lib = out / f"lib{src.stem}.so"
        run([cxx(), "-shared", *flags, str(src), "-o", str(lib), *link])
        return src.stem, lib

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(build, sorted(FIXTURES.glob("*.cc"))))
