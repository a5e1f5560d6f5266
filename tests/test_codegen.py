"""Tests of the code generator (codegen/): the registry model, parse and
validation errors, the command line; fast, no C++ build; uses the fixture
(test_codegen_render.py has what each target renders)."""
from __future__ import annotations

import ast
import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codegen import cli, emit, model, naming, validate  # noqa: E402
from codegen.errors import CodegenError  # noqa: E402
from codegen.model import AttrType, OpDef, Registry  # noqa: E402
from codegen.targets import pyi, python  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "registry_sample.json"
GOLDEN = ROOT / "generated" / "registry.json"


@pytest.fixture
def data() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def _op(data: dict, name: str) -> dict:
    return next(o for o in data["ops"] if o["name"] == name)


def _errors(data: dict) -> list[str]:
    """Parse errors, or else validation errors."""
    try:
        registry = Registry.parse(data)
    except CodegenError as e:
        return e.messages
    return validate.validate(registry)



def _py_op(registry: Registry, name: str) -> python.PyOp:
    return python.PyOp.of(next(o for o in registry.ops if o.name == name))



# --- model ---------------------------------------------------------------------

def test_fixture_round_trips(data):
    registry = Registry.parse(data)
    assert registry.to_dict() == data
    for op in data["ops"]:
        assert OpDef.parse(op, registry.dtype_table).to_dict() == op
    # The fixture is itself in golden form (sorted keys, indent=2).
    assert isinstance(registry.ops[0].attrs[0].type, AttrType)
    assert emit.registry_json(registry) == FIXTURE.read_text(encoding="utf-8")


@pytest.mark.skipif(not GOLDEN.exists(), reason="generated/registry.json not generated yet")
def test_golden_registry_round_trips():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    registry = Registry.parse(golden)
    assert registry.to_dict() == golden
    for op in golden["ops"]:
        assert OpDef.parse(op, registry.dtype_table).to_dict() == op
    assert validate.validate(Registry.parse(golden)) == []


def test_parse_errors_name_the_declaration(data):
    del _op(data, "Sum")["kernels"]
    with pytest.raises(CodegenError, match=r"cpp/ops/reduction_ops\.cc:10: op Sum.*kernels"):
        Registry.parse(data)


def test_parse_rejects_wrong_json_types(data):
    _op(data, "Add")["attrs"][0]["inferred"] = "yes"
    with pytest.raises(CodegenError, match=r"math_ops\.cc:12: op Add: attrs\[0\].*inferred"):
        Registry.parse(data)


def test_snake_case_names():
    assert naming.snake_case("MatMul") == "mat_mul"
    assert naming.snake_case("Conv2DBackprop") == "conv2d_backprop"
    assert naming.snake_case("BatchMatMulV2") == "batch_mat_mul_v2"
    assert naming.op_python_name("Sum") == "sum"  # builtins are fine
    assert naming.op_python_name("Lambda") == "lambda_"


def test_params_follow_the_registry_params(data):
    registry = Registry.parse(data)
    for op in registry.ops:
        assert [p.name for p in op.params] == list(op.param_names)
    assert _py_op(registry, "Cast").signature == "x, dtype"
    assert _py_op(registry, "Fill").signature == 'shape, value=0.0, dtype="float32"'
    fill = next(o for o in registry.ops if o.name == "Fill")
    assert pyi.StubOp.of(fill).signature == ('shape: Sequence[int] | int, value: float = 0.0, '
                                             'dtype: DTypeLike = "float32"')


def test_model_speaks_no_target_language():
    """model.py is the schema only: it imports no target module, names no target type."""
    source = (ROOT / "pkg" / "opforge" / "_schema" / "model.py").read_text(encoding="utf-8")
    imported = {n.module for n in ast.walk(ast.parse(source))
                if isinstance(n, ast.ImportFrom) and n.level > 0}
    assert imported == {"errors"}
    for word in ("PyObject", "TensorLike", "Sequence[", "jinja", "snake_case"):
        assert word not in source, word


def test_attr_types_and_dtypes_are_typed(data):
    registry = Registry.parse(data)
    fill = next(o for o in registry.ops if o.name == "Fill")
    dtype = fill.find_attr("dtype")
    assert dtype.type is AttrType.TYPE and isinstance(dtype.default, model.DType)
    assert dtype.default.name == "float32"
    assert fill.find_attr("shape").type is AttrType.SHAPE and AttrType.SHAPE.is_list
    assert {t.value for t in AttrType} == {"int", "float", "bool", "string", "type", "shape",
                                           "list(int)", "list(float)", "list(type)"}
    add = next(o for o in registry.ops if o.name == "Add")
    assert all(isinstance(t, model.DType) for k in add.kernels for t in k.dtypes)


def test_dtypes_come_from_the_registry_table(data):
    data["dtypes"].append({"enum": 6, "is_floating": True, "is_integer": False,
                           "name": "float16", "numpy": "float16", "size": 2})
    _op(data, "Add")["attrs"][0]["allowed"].append("float16")
    _op(data, "Add")["kernels"]["cpu"].append("float16")
    registry = Registry.parse(data)
    assert registry.to_dict() == data
    half = registry.dtypes[-1]
    assert (half.name, half.size, half.is_floating) == ("float16", 2, True)
    assert half in next(o for o in registry.ops if o.name == "Add").find_attr("T").allowed
    doc = _py_op(registry, "Add").docstring
    assert "T in {float32, float64, int32, int64, float16}" in doc
    assert "Kernels: cpu (float32, float64, int32, int64, float16)." in doc


# --- parse and validation errors -------------------------------------------------

def test_fixture_is_valid(data):
    assert _errors(data) == []


@pytest.mark.parametrize("mutate, message", [
    # The JSON's shape and references: parse errors.
    (lambda d: _op(d, "Sum")["attrs"][0].update(type="list(int64)"),
     r"reduction_ops\.cc:10: op Sum: attrs\[0\] \(axis\): unknown attr type 'list\(int64\)'"),
    (lambda d: _op(d, "Concat")["attrs"][0].update(default=1.5),
     r"array_ops\.cc:24: op Concat: attrs\[0\] \(axis\): default 1\.5 is not an int"),
    (lambda d: _op(d, "Fill")["attrs"][2].update(default="float16"),
     r"array_ops\.cc:\d+: op Fill: attrs\[\d\] \(dtype\): 'default': 'float16' is not a dtype"),
    (lambda d: _op(d, "Concat")["attrs"][0].update(has_default=False),
     r"array_ops\.cc:24: op Concat: attrs\[0\] \(axis\): has a default value but "),
    (lambda d: _op(d, "Add")["inputs"][1].update(fixed_type="float32"),
     r"math_ops\.cc:12: op Add: inputs\[1\]: needs exactly one of type_attr and fixed_type"),
    (lambda d: _op(d, "Add")["kernels"].update(cpu=["float32", "complex64"]),
     r"math_ops\.cc:12: op Add: 'kernels.cpu': 'complex64' is not a dtype"),
    (lambda d: _op(d, "Add").update(params=["x", "z"]),
     r"math_ops\.cc:12: op Add: params names \['z'\], which are neither inputs nor attrs"),
    (lambda d: _op(d, "Add").update(params=["x", "y", "T"]),
     r"math_ops\.cc:12: op Add: params names \['T'\], which are neither inputs nor attrs "
     r"that are not inferred"),
    (lambda d: d["dtypes"].pop(),
     r"array_ops\.cc:\d+: op \w+: .*'bool' is not a dtype"),
    (lambda d: d["attr_types"].append("list(shape)"),
     r"registry: attr_types: unknown attr type 'list\(shape\)'"),
    (lambda d: d.update(format=1),
     r"registry: format 1 is not supported \(expected 2\)"),
    # What the generated code needs.
    (lambda d: (_op(d, "Add")["inputs"][0].update(name="_x"),
                _op(d, "Add").update(params=["_x", "y"])),
     r"math_ops\.cc:12: op Add: input name '_x' starts with '_'"),
    (lambda d: _op(d, "Add").update(group="maths"),
     r"math_ops\.cc:12: op Add: group 'maths' is not listed"),
    (lambda d: _op(d, "Add").update(summary=""),
     r"math_ops\.cc:12: op Add: no summary"),
    (lambda d: d["groups"][0].update(name="Array-Ops"),
     r"registry: group name 'Array-Ops' must match"),
])
def test_errors_carry_file_line(data, mutate, message):
    mutate(data)
    errors = _errors(data)
    assert any(re.search(message, e) for e in errors), errors


@pytest.mark.parametrize("mutate", [
    # Checked by the C++ registry at registration (op_def_builder.cc), not again here.
    lambda d: (_op(d, "Sum")["attrs"][1].update(name="keep-dims"),
               _op(d, "Sum").update(params=["x", "axis", "keep-dims"])),
    lambda d: _op(d, "Pad").update(params=["x", "mode", "paddings", "constant_value"]),
    lambda d: _op(d, "Concat")["attrs"][2].update(inferred=False),
])
def test_registration_checks_are_left_to_cpp(data, mutate):
    mutate(data)
    assert _errors(data) == []



def test_duplicate_python_names_are_rejected(data):
    for name, line in (("Conv2D", 5), ("Conv2d", 9)):
        op = copy.deepcopy(_op(data, "Add"))
        op.update(name=name, source={"file": "cpp/ops/nn_ops.cc", "line": line})
        data["ops"].append(op)
    errors = _errors(data)
    assert any(e.startswith("cpp/ops/nn_ops.cc:9: op Conv2d: Python name 'conv2d'")
               and "op Conv2D (cpp/ops/nn_ops.cc:5)" in e for e in errors), errors


def test_duplicate_op_names_are_rejected(data):
    op = copy.deepcopy(_op(data, "Add"))
    op["source"]["line"] = 40
    data["ops"].append(op)
    errors = _errors(data)
    assert any(e.startswith("cpp/ops/math_ops.cc:40: op Add: duplicate op name") and
               "math_ops.cc:12" in e for e in errors), errors


def test_cli_reports_errors(data, tmp_path, capsys):
    _op(data, "Sum")["attrs"][0]["type"] = "tensor"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert cli.main(["--registry", str(bad), "--out", str(tmp_path / "gen")]) == 1
    assert ("cpp/ops/reduction_ops.cc:10: op Sum: attrs[0] (axis): unknown attr type 'tensor'"
            in capsys.readouterr().err)
    assert not (tmp_path / "gen").exists()


# --- the command line ----------------------------------------------------------------

def _gen(tmp_path: Path, *extra: str) -> int:
    return cli.main(["--registry", str(FIXTURE), "--out", str(tmp_path / "gen"), *extra])


def test_check_passes_on_fresh_render_and_rerun_changes_nothing(tmp_path, capsys):
    assert _gen(tmp_path) == 0
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns)
              for p in (tmp_path / "gen").rglob("*") if p.is_file()}
    assert _gen(tmp_path) == 0
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns)
             for p in (tmp_path / "gen").rglob("*") if p.is_file()}
    assert before == after
    capsys.readouterr()
    assert _gen(tmp_path, "--check") == 0
    out = capsys.readouterr()
    assert "up to date" in out.out and out.err == ""


def test_check_fails_with_diff_after_edit(tmp_path, capsys):
    assert _gen(tmp_path) == 0
    path = tmp_path / "gen" / "python" / "gen_math_ops.py"
    path.write_text(path.read_text().replace('"add", __name__, """add(x, y)', '"add", __name__, """add(y, x)'))
    capsys.readouterr()
    assert _gen(tmp_path, "--check") == 1
    out = capsys.readouterr()
    assert "generated/ is stale: run `python -m codegen`" in out.err
    assert "--- " in out.out and "+++ " in out.out and "@@" in out.out
    assert ('-add = _pw.public_entry(_pw.Add, "add", __name__, """add(y, x)\n'
            '+add = _pw.public_entry(_pw.Add, "add", __name__, """add(x, y)\n') in out.out
    assert _gen(tmp_path) == 0 and _gen(tmp_path, "--check") == 0


def test_check_flags_stale_and_missing_files(tmp_path, capsys):
    assert _gen(tmp_path) == 0
    stale = tmp_path / "gen" / "python" / "gen_foo_ops.py"
    stale.write_text("# old\n")
    (tmp_path / "gen" / "swig" / "gen_linalg_ops.i").unlink()
    (tmp_path / "gen" / "python" / "notes.txt").write_text("not ours\n")
    capsys.readouterr()
    assert _gen(tmp_path, "--check") == 1
    out = capsys.readouterr().out
    assert "gen_foo_ops.py" in out and "-# old" in out
    assert "/dev/null" in out and "gen_linalg_ops.i" in out
    assert "notes.txt" not in out
    assert _gen(tmp_path) == 0
    assert not stale.exists()
    assert (tmp_path / "gen" / "python" / "notes.txt").exists()
    assert _gen(tmp_path, "--check") == 0


def test_python_dash_m_codegen(tmp_path):
    out = tmp_path / "gen"
    run = [sys.executable, "-m", "codegen", "--registry", str(FIXTURE), "--out", str(out)]
    assert subprocess.run(run, cwd=ROOT, capture_output=True).returncode == 0
    proc = subprocess.run(run + ["--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
