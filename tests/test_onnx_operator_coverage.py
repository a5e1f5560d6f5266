"""Every operator of the installed onnx's default domain is mapped, expanded
from its function body, or left out with a reason (pkg/opforge/onnx/_excluded.py)."""

import os

import pytest

# Under the sanitizer build (.ci/sanitize) these would test onnx's and onnxruntime's
# C++ under an ASan preload, not opforge's (the op tests cover the kernels there).
if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")

import opforge.onnx  # noqa: E402
from opforge.onnx import _excluded  # noqa: E402


def _operators():
    import onnx.defs
    names = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")}
    return {n for n in names if not onnx.defs.get_schema(n).deprecated}


def test_every_operator_is_mapped_expanded_or_left_out_with_a_reason():
    mapped = set(opforge.onnx.supported_operators())
    unaccounted = _operators() - mapped - _excluded.EXPANDED - set(_excluded.LEFT_OUT)
    assert not unaccounted, f"map these or list them in _excluded.py with a reason: {sorted(unaccounted)}"


def test_the_lists_do_not_overlap_the_map():
    mapped = set(opforge.onnx.supported_operators())
    assert not mapped & _excluded.EXPANDED
    assert not mapped & set(_excluded.LEFT_OUT), "mapped now: drop it from LEFT_OUT"
    assert all(reason.strip() for reason in _excluded.LEFT_OUT.values())


def test_expanded_operators_have_function_bodies():
    import onnx.defs
    for op in _excluded.EXPANDED:
        s = onnx.defs.get_schema(op)
        assert s.has_function or s.has_context_dependent_function, op
