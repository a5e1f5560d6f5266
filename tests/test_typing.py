"""Typing: the stubs match the runtime (mypy.stubtest) and a user script
type-checks under mypy --strict against the installed package."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import opforge

pytest.importorskip("mypy")
# Two mypy runs (~20 s on the 2-core CI machine): not worth repeating under ASan.
pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


def _run(args, tmp_path):
    # mypy must see the installed package (the one imported here), not pkg/.
    env = dict(os.environ, MYPYPATH="", PYTHONPATH=str(Path(opforge.__file__).parent.parent))
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_py_typed_and_stubs_are_installed():
    pkg = Path(opforge.__file__).parent
    for name in ("py.typed", "tensor.pyi", "dtypes.pyi", "_pywrap_internal.pyi", "ops/gen_math_ops.pyi"):
        assert (pkg / name).is_file(), name


def test_stubtest(tmp_path):
    r = _run(["mypy.stubtest", "opforge", "--allowlist", str(HERE / "typing" / "stubtest_allowlist.txt"),
              "--mypy-config-file", str(HERE / "typing" / "stubtest_mypy.ini")], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_on_a_user_script_and_a_wrong_one(tmp_path):
    # One mypy run for both files (the numpy stubs are analysed once).
    bad = tmp_path / "bad.py"
    bad.write_text("import opforge as of\n"
                   "t: of.Tensor = of.add([1.0], 2.0)\n"
                   "n: int = of.add(t, t)\n"            # a Tensor is not an int
                   "s: str = t.shape\n")
    script = HERE / "typing" / "user_script.py"
    r = _run(["mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(script), str(bad)], tmp_path)
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if "user_script.py" in e], r.stdout + r.stderr
    assert any(e.startswith(f"{bad.name}:3: error: Incompatible types in assignment (expression has type \"Tensor\"")
               for e in errors), r.stdout + r.stderr
    assert any(e.startswith(f"{bad.name}:4: error") for e in errors), r.stdout
    assert len(errors) == 2, r.stdout
