"""The docs (docs/, Sphinx + MyST) build with warnings as errors, and the op
reference rendered from the registry has an entry per op."""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow  # Sphinx: about 10-20 s
def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    out = tmp_path / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    ref = (out / "_generated" / "ops.html").read_text()
    from opforge import _pywrap_internal
    for op in json.loads(_pywrap_internal.registry_json())["ops"]:
        assert f'id="{op["name"].lower()}"' in ref, op["name"]
    assert (out / "quickstart.html").exists()


def test_op_reference_entries():
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    import opref
    reg = {op["name"]: op for op in opref.registry()["ops"]}
    text = "\n".join(opref.render_op(reg["MatMul"], {"mat_mul": ["Gemm", "MatMul"]}))
    assert "`opforge.mat_mul`" in text and "MatMul(a, b, transpose_a=False, transpose_b=False)" in text
    assert "Shape: `MatMulShape` in `cpp/ops/linalg_ops.cc`" in text
    assert "ONNX: Gemm, MatMul" in text and "Kernels: cpu: " in text
    assert "MatMulGrad(" in text                      # the gradient rule
    grad = "\n".join(opref.render_op(reg["SoftmaxGrad"], {}))
    assert "`opforge.raw_ops.softmax_grad`" in grad
    add = "\n".join(opref.render_op(reg["Add"], {}))
    assert "Shape: `BroadcastInputs`: the inputs' shapes broadcast together" in add
