"""Tests of the code generator (codegen/): fast, no C++ build; uses the fixture."""
from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codegen import cli, emit, naming, registry_source, validate  # noqa: E402
from codegen.errors import CodegenError  # noqa: E402
from codegen.model import OpDef, Registry  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "registry_sample.json"
GOLDEN = ROOT / "generated" / "registry.json"


@pytest.fixture
def data() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def _op(data: dict, name: str) -> dict:
    return next(o for o in data["ops"] if o["name"] == name)


def _errors(data: dict) -> list[str]:
    return validate.validate(Registry.parse(data))


def _keyword_op() -> dict:
    """Op "Lambda" with input "in" and attrs "from" (Python kw) and "default" (C++ kw)."""
    return {
        "name": "Lambda", "group": "math",
        "source": {"file": "cpp/ops/math_ops.cc", "line": 99},
        "summary": "Applies a lambda.", "description": "",
        "inputs": [{"name": "in", "type_attr": "T", "fixed_type": None,
                    "number_attr": None, "doc": "The input."}],
        "outputs": [{"name": "out", "type_attr": "T", "fixed_type": None,
                     "number_attr": None, "doc": ""}],
        "attrs": [
            {"name": "T", "type": "type", "has_default": False, "default": None,
             "allowed": [], "minimum": None, "inferred": True, "doc": ""},
            {"name": "from", "type": "int", "has_default": False, "default": None,
             "allowed": [], "minimum": 0, "inferred": False, "doc": ""},
            {"name": "default", "type": "list(float)", "has_default": True,
             "default": [1.5], "allowed": [], "minimum": None, "inferred": False, "doc": ""},
        ],
        "arg_order": ["in", "T", "from", "default"],
        "kernels": {"cpu": ["float32"]},
        "gradient": {"none": False, "rules": [{
            "targets": ["in"], "per_element": False, "spec": "in = Lambda(dout, from=from)",
            "expr": {"op": "Lambda", "args": [{"index": 0, "kind": "grad", "name": "dout"}],
                     "attrs": [{"name": "from", "kind": "attr", "value": "from", "argument": None}]}}]},
    }


# --- model ---------------------------------------------------------------------

def test_fixture_round_trips(data):
    registry = Registry.parse(data)
    assert registry.to_dict() == data
    for op in data["ops"]:
        assert OpDef.parse(op).to_dict() == op
    # The fixture is itself in golden form (sorted keys, indent=2).
    assert emit.registry_json(registry) == FIXTURE.read_text(encoding="utf-8")


@pytest.mark.skipif(not GOLDEN.exists(), reason="generated/registry.json not generated yet")
def test_golden_registry_round_trips():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert Registry.parse(golden).to_dict() == golden
    for op in golden["ops"]:
        assert OpDef.parse(op).to_dict() == op
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


def test_params_follow_arg_order_without_inferred_attrs(data):
    registry = Registry.parse(data)
    for op in registry.ops:
        inferred = {a.name for a in op.attrs if a.inferred}
        assert [p.name for p in op.params] == [n for n in op.arg_order if n not in inferred]
    cast = next(o for o in registry.ops if o.name == "Cast")
    assert cast.py_signature == "x, dtype"
    fill = next(o for o in registry.ops if o.name == "Fill")
    assert fill.py_signature == 'shape, value=0.0, dtype="float32"'
    assert fill.pyi_signature == ('shape: Sequence[int] | int, value: float = 0.0, '
                                  'dtype: DTypeLike = "float32"')


# --- validation ------------------------------------------------------------------

def test_fixture_is_valid(data):
    assert _errors(data) == []


@pytest.mark.parametrize("mutate, message", [
    (lambda d: _op(d, "Sum")["attrs"][0].update(type="list(int64)"),
     r"reduction_ops\.cc:10: op Sum: attr 'axis': unknown attr type 'list\(int64\)'"),
    (lambda d: _op(d, "Sum")["attrs"][1].update(name="keep-dims"),
     r"reduction_ops\.cc:10: op Sum: attr name 'keep-dims' is not an identifier"),
    (lambda d: _op(d, "Add")["inputs"][0].update(name="_x"),
     r"math_ops\.cc:12: op Add: input name '_x' is not an identifier"),
    (lambda d: _op(d, "Pad").update(arg_order=["x", "mode", "paddings", "constant_value", "T"]),
     r"array_ops\.cc:73: op Pad: parameter 'paddings' without a default follows 'mode'"),
    (lambda d: _op(d, "Concat")["attrs"][0].update(default=1.5),
     r"array_ops\.cc:24: op Concat: attr 'axis': default 1.5 is not an int"),
    (lambda d: _op(d, "Concat")["attrs"][2].update(inferred=False),
     r"array_ops\.cc:24: op Concat: attr 'T': bound by an input, so it must be inferred"),
    (lambda d: _op(d, "Add")["inputs"][1].update(type_attr="U"),
     r"math_ops\.cc:12: op Add: input 'y': type attr 'U' is not a `type` attr"),
    (lambda d: _op(d, "Add").update(arg_order=["x", "T"]),
     r"math_ops\.cc:12: op Add: arg_order .* is not a permutation"),
    (lambda d: _op(d, "Add").update(group="maths"),
     r"math_ops\.cc:12: op Add: group 'maths' is not listed"),
    (lambda d: _op(d, "Add").update(summary=""),
     r"math_ops\.cc:12: op Add: no summary"),
])
def test_validation_errors_carry_file_line(data, mutate, message):
    mutate(data)
    errors = _errors(data)
    assert any(re.search(message, e) for e in errors), errors


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


def test_cli_reports_validation_errors(data, tmp_path, capsys):
    _op(data, "Sum")["attrs"][0]["type"] = "tensor"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert cli.main(["--registry", str(bad), "--out", str(tmp_path / "gen")]) == 1
    assert "cpp/ops/reduction_ops.cc:10: op Sum: attr 'axis'" in capsys.readouterr().err
    assert not (tmp_path / "gen").exists()


# --- keywords ----------------------------------------------------------------------

def test_keyword_names_get_trailing_underscore(data):
    data["ops"].append(_keyword_op())
    registry = validate.check(Registry.parse(data))
    op = next(o for o in registry.ops if o.name == "Lambda")
    assert op.python_name == "lambda_"
    assert op.py_signature == "in_, from_, default=(1.5,)"
    files = emit.render(registry)
    py = files["python/gen_math_ops.py"]
    assert "def lambda_(in_, from_, default=(1.5,)):" in py
    assert "return _Lambda(in_, from_, default)" in py
    assert '"lambda_",' in py
    compile(py, "gen_math_ops.py", "exec")
    swig = files["swig/gen_math_ops.i"]
    assert ("PyObject* Lambda(PyObject* in, opforge::py::IntAttr from, "
            "opforge::py::FloatListAttr default_) {") in swig
    assert 'static const opforge::py::OpBinding op("Lambda", {"from", "default"});' in swig
    assert "{std::move(from.value), std::move(default_.value)}" in swig
    pyi = files["python/gen_math_ops.pyi"]
    assert ("def lambda_(in_: TensorLike, from_: int, default: Sequence[float] = (1.5,))"
            " -> Tensor:") in pyi
    grads = files["python/gen_math_grads.py"]
    assert "def _lambda_grad(op, dout):" in grads
    assert "in_ = op.inputs[0]" in grads
    assert "return [_ops.lambda_(dout, from_=op.get_attr('from'))]" in grads
    compile(grads, "gen_math_grads.py", "exec")


# --- rendering ----------------------------------------------------------------------

def test_render_is_deterministic(data):
    first = emit.render(Registry.parse(data))
    assert first == emit.render(Registry.parse(data))
    shuffled = copy.deepcopy(data)
    shuffled["ops"].reverse()
    shuffled["groups"].reverse()
    again = emit.render(Registry.parse(shuffled))
    assert {k: v for k, v in again.items() if k != "registry.json"} == \
        {k: v for k, v in first.items() if k != "registry.json"}
    assert sorted(first) == [
        "python/__init__.py",
        "python/gen_array_grads.py", "python/gen_array_ops.py", "python/gen_array_ops.pyi",
        "python/gen_linalg_grads.py", "python/gen_linalg_ops.py", "python/gen_linalg_ops.pyi",
        "python/gen_math_grads.py", "python/gen_math_ops.py", "python/gen_math_ops.pyi",
        "python/gen_reduction_grads.py", "python/gen_reduction_ops.py", "python/gen_reduction_ops.pyi",
        "python/numpy_map.py",
        "registry.json",
        "swig/gen_array_ops.i", "swig/gen_linalg_ops.i", "swig/gen_math_ops.i",
        "swig/gen_ops.i", "swig/gen_reduction_ops.i",
    ]


def test_headers_name_template_and_fingerprint(data):
    files = emit.render(Registry.parse(data))
    for path, text in files.items():
        if path == "registry.json":
            continue
        first, second = text.split("\n")[:2]
        comment = "//" if path.endswith(".i") else "#"
        assert re.fullmatch(comment + r" @generated by python -m codegen from "
                            r"codegen/templates/\w+\.(py|pyi|i)\.j2 -- do not edit\.", first)
        assert second.startswith(comment + " registry fingerprint")
        assert text.endswith("\n") and not text.endswith("\n\n")
        assert not re.search(r"[ \t]+\n", text), f"trailing whitespace in {path}"
    assert "# registry fingerprint: 0123456789abcdef" in files["python/gen_math_ops.py"]
    assert "// registry fingerprint: fedcba9876543210" in files["swig/gen_reduction_ops.i"]


def _fake_opforge(monkeypatch, hooks: list) -> types.SimpleNamespace:
    """Installs stand-ins for opforge, its extension and its hooks module."""
    calls = types.SimpleNamespace(fingerprints=[], dispatched=[])
    pw = types.ModuleType("opforge._pywrap_internal")
    pw.check_fingerprint = lambda group, fp: calls.fingerprints.append((group, fp))
    pw.__getattr__ = lambda name: (lambda *args: (name, args))
    hooks_mod = types.ModuleType("opforge._hooks")
    hooks_mod.hooks = hooks

    def dispatch(name, fn, args):
        calls.dispatched.append(name)
        return fn(*args)
    hooks_mod.dispatch = dispatch
    pkg = types.ModuleType("opforge")
    pkg.__path__ = []
    pkg._pywrap_internal = pw
    for name, mod in (("opforge", pkg), ("opforge._pywrap_internal", pw),
                      ("opforge._hooks", hooks_mod)):
        monkeypatch.setitem(sys.modules, name, mod)
    return calls


def _exec(text: str, name: str) -> dict:
    namespace: dict = {"__name__": name}
    exec(compile(text, name + ".py", "exec"), namespace)
    return namespace


def test_python_wrappers_compile_and_match_arg_order(data, monkeypatch):
    registry = Registry.parse(data)
    files = emit.render(registry)
    hooks: list = []
    calls = _fake_opforge(monkeypatch, hooks)
    for module in registry.modules:
        ns = _exec(files[f"python/{module.module_name}.py"], module.module_name)
        assert ns["__all__"] == sorted(ns["__all__"]) == [o.python_name for o in module.ops]
        assert (module.name, module.fingerprint) in calls.fingerprints
        for op in module.ops:
            fn = ns[op.python_name]
            inferred = {a.name for a in op.attrs if a.inferred}
            expected = [naming.python_ident(n) for n in op.arg_order if n not in inferred]
            sig = inspect.signature(fn)
            assert list(sig.parameters) == expected, op.name
            for p in sig.parameters.values():
                attr = op.find_attr(p.name)
                if attr is None or not attr.has_default:
                    assert p.default is inspect.Parameter.empty
                elif attr.type in ("shape", "list(int)", "list(float)", "list(type)") \
                        and attr.default is not None:
                    assert p.default == tuple(attr.default)
                else:
                    assert p.default == attr.default and type(p.default) is type(attr.default)
            assert inspect.cleandoc(fn.__doc__) == op.docstring  # escaping round-trips
            assert f"Declared at {op.source} (op {op.name})." in fn.__doc__
    # Fast path: one call with every parameter, positionally; hooks: dispatch.
    ns = _exec(files["python/gen_reduction_ops.py"], "gen_reduction_ops")
    assert ns["sum"]([1, 2], keepdims=True) == ("Sum", ([1, 2], None, True))
    assert calls.dispatched == []
    hooks.append(object())
    assert ns["sum"]([1, 2]) == ("Sum", ([1, 2], None, False))
    assert calls.dispatched == ["Sum"]


def test_docstring_escapes_quotes_and_backslashes(data, monkeypatch):
    files = emit.render(Registry.parse(data))
    _fake_opforge(monkeypatch, [])
    ns = _exec(files["python/gen_array_ops.py"], "gen_array_ops")
    doc = inspect.getdoc(ns["pad"])
    assert 'A backslash \\ and """quotes""" survive.' in doc
    assert '  pad([1, 2, 3], [2, 0], "reflect") -> [3, 2, 1, 2, 3]' in doc
    assert "Args:\n  x: A tensor-like of dtype T. The tensor to pad.\n" in doc
    assert "Returns:\n  A Tensor `y` of dtype T. The padded tensor." in doc
    assert "T in {float32, float64, int32, int64}, inferred from the inputs." in doc
    moments = inspect.getdoc(_exec(files["python/gen_reduction_ops.py"], "r")["moments"])
    assert "A tuple `(mean, variance)`:\n    mean: A Tensor of dtype T. The mean." in moments


def test_init_reexports_every_group(data, monkeypatch, tmp_path):
    registry = Registry.parse(data)
    files = emit.render(registry)
    emit.write(tmp_path / "gen", files)
    pkg_dir = tmp_path / "pkgroot" / "ops_under_test"
    (tmp_path / "gen" / "python").rename(pkg_dir.parent.mkdir() or pkg_dir)
    _fake_opforge(monkeypatch, [])
    monkeypatch.syspath_prepend(str(pkg_dir.parent))
    ops = importlib.import_module("ops_under_test")
    try:
        assert ops.__all__ == sorted(ops.__all__) == list(registry.python_names)
        assert {"add", "sum", "mat_mul", "fill"} <= set(ops.__all__)
        for name in ops.__all__:
            assert callable(getattr(ops, name))
    finally:
        for mod in [m for m in sys.modules if m.startswith("ops_under_test")]:
            del sys.modules[mod]


def test_pyi_stubs_compile_and_have_hints(data):
    registry = Registry.parse(data)
    files = emit.render(registry)
    for module in registry.modules:
        text = files[f"python/{module.module_name}.pyi"]
        tree = ast.parse(compile(text, module.module_name + ".pyi", "exec",
                                 flags=ast.PyCF_ONLY_AST))
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for op in module.ops:
            fn = defs[op.python_name]
            assert [a.arg for a in fn.args.args] == [p.py_name for p in op.params]
            assert ast.get_docstring(fn) == op.summary
    pyi = files["python/gen_reduction_ops.pyi"]
    assert ("def moments(x: TensorLike, axis: Sequence[int] | int | None = None, "
            "keepdims: bool = False) -> tuple[Tensor, Tensor]:") in pyi
    assert "def concat(values: Sequence[TensorLike], axis: int = 0) -> Tensor:" in \
        files["python/gen_array_ops.pyi"]
    assert "from collections.abc import Sequence" not in files["python/gen_math_ops.pyi"]


def test_swig_entry_points(data):
    registry = Registry.parse(data)
    files = emit.render(registry)
    for module in registry.modules:
        text = files[f"swig/{module.module_name}.i"]
        for op in module.ops:
            m = re.search(rf"^PyObject\* {op.name}\((.*)\) \{{$", text, re.M)
            assert m, op.name
            names = [p.split()[-1] for p in m.group(1).split(", ")] if m.group(1) else []
            assert names == [p.cpp_name for p in op.params]
    swig = files["swig/gen_array_ops.i"]
    assert ('%feature("docstring") opforge::gen::Fill "Fill(shape, value=0.0, '
            'dtype=\\"float32\\") -> Tensor\\n\\nReturns a tensor of the given shape '
            'filled with value.";') in swig
    assert "  return op.Call(nullptr, attrs);\n" in swig            # Fill: no inputs
    assert 'static const opforge::py::OpBinding op("Where", {});' in swig
    assert "  return op.Call(inputs, nullptr);\n" in swig          # Where: no attrs
    assert "PyObject* inputs[] = {condition, x, y};" in swig


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
    path.write_text(path.read_text().replace("return _Add(x, y)", "return _Add(y, x)"))
    capsys.readouterr()
    assert _gen(tmp_path, "--check") == 1
    out = capsys.readouterr()
    assert "generated/ is stale: run `python -m codegen`" in out.err
    assert "--- " in out.out and "+++ " in out.out and "@@" in out.out
    assert "-        return _Add(y, x)\n+        return _Add(x, y)\n" in out.out
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


@pytest.mark.skipif(os.name == "nt", reason="fake cmake is a shell script")
def test_dump_tool_errors_are_surfaced(tmp_path, monkeypatch, capsys):
    """Without --registry: configure once, build the target, run it; errors exit 1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "cmake.log"
    build = tmp_path / "build"
    (bin_dir / "cmake").write_text(f"""#!/bin/sh
echo "$@" >> {log}
if [ "$1" = "-S" ]; then mkdir -p "$4" && touch "$4/CMakeCache.txt"; exit 0; fi
cat > "$2/opforge_dump_registry" <<'X'
#!/bin/sh
echo "cpp/ops/math_ops.cc:12: op Add: attr 'T': unknown dtype 'float16'" >&2
exit 1
X
chmod +x "$2/opforge_dump_registry"
""")
    (bin_dir / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    args = ["--build-dir", str(build), "--out", str(tmp_path / "gen")]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "opforge_dump_registry reported registration errors" in err
    assert "cpp/ops/math_ops.cc:12: op Add: attr 'T': unknown dtype 'float16'" in err
    assert cli.main(args) == 1  # configured already: only builds again
    lines = log.read_text().splitlines()
    assert lines[0] == (f"-S {Path.cwd()} -B {build} -G Ninja -DOPFORGE_PYTHON=OFF "
                        "-DCMAKE_BUILD_TYPE=Release")
    assert lines[1:] == [f"--build {build} --target {registry_source.DUMP_TARGET}"] * 2
