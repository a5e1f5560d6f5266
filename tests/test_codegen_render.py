"""Tests of what the code generator renders (codegen/targets): the Python
wrappers and their keyword spellings, stubs, SWIG entry points, gradients,
Dask, the writer; fast, no C++ build; uses the fixture (test_codegen.py has
the model, validation and the command line)."""
from __future__ import annotations


import ast
import copy
import importlib
import inspect
import json
import os
import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codegen import emit, naming, validate  # noqa: E402
from codegen.errors import CodegenError  # noqa: E402
from codegen.model import Registry  # noqa: E402
from codegen.targets import namespace, pyi, python  # noqa: E402
from codegen.writer import Writer  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "registry_sample.json"


@pytest.fixture
def data() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))




def _files(data: dict) -> dict[str, str]:
    return emit.render(Registry.parse(data)).files


def _py_op(registry: Registry, name: str) -> python.PyOp:
    return python.PyOp.of(next(o for o in registry.ops if o.name == name))


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
        "params": ["in", "from", "default"],
        "kernels": {"cpu": ["float32"]},
        "gradient": {"none": False, "rules": [{
            "targets": ["in"], "per_element": False, "local": False, "spec": "in = Lambda(dout, from=from)",
            "expr": {"op": "Lambda", "args": [{"index": 0, "kind": "grad", "name": "dout"}],
                     "attrs": [{"name": "from", "kind": "attr", "value": "from", "argument": None}]}}]},
        "category": "elementwise",
    }



# --- keywords ----------------------------------------------------------------------

def test_python_and_cpp_spellings_must_differ(data):
    op = _keyword_op()
    op["attrs"].append({"name": "from_", "type": "int", "has_default": True, "default": 1,
                        "allowed": None, "minimum": None, "inferred": False, "doc": ""})
    op["params"].insert(2, "from_")
    op["params"].append("default_")
    op["attrs"].append({"name": "default_", "type": "int", "has_default": True, "default": 1,
                        "allowed": None, "minimum": None, "inferred": False, "doc": ""})
    data["ops"] = [op]
    errors = validate.validate(Registry.parse(data))
    assert errors == [
        "cpp/ops/math_ops.cc:99: op Lambda: two parameters are both spelled 'from_' in Python",
        "cpp/ops/math_ops.cc:99: op Lambda: two parameters are both spelled 'default_' in C++"]


def test_default_that_is_not_a_literal_keeps_a_def_wrapper(data):
    # inspect reads only literal defaults off a builtin's text signature: a
    # NaN default (float("nan")) keeps the def wrapper over the entry point.
    op = _keyword_op()
    op["attrs"][2] = {"name": "default", "type": "float", "has_default": True, "default": float("nan"),
                      "allowed": [], "minimum": None, "inferred": False, "doc": ""}
    data["ops"].append(op)
    registry = validate.check(Registry.parse(data))
    py = emit.render(registry).files["python/gen_math_ops.py"]
    assert 'def lambda_(in_, from_, default=float("nan")):' in py
    assert "return _Lambda(in_, from_, default)" in py
    assert "_pw.public_entry(_pw.Lambda" not in py
    assert "add = _pw.public_entry(_pw.Add" in py  # the other ops of the group are unaffected
    compile(py, "gen_math_ops.py", "exec")


def test_keyword_names_get_trailing_underscore(data):
    data["ops"].append(_keyword_op())
    registry = validate.check(Registry.parse(data))
    op = _py_op(registry, "Lambda")
    assert op.python_name == "lambda_"
    assert op.signature == "in_, from_, default=(1.5,)"
    files = emit.render(registry).files
    py = files["python/gen_math_ops.py"]
    # The exported function is the entry point itself, its text signature in the docstring.
    assert 'lambda_ = _pw.public_entry(_pw.Lambda, "lambda_", __name__, """lambda_(in_, from_, default=(1.5,))\n--\n\n' in py
    assert '"lambda_",' in py
    compile(py, "gen_math_ops.py", "exec")
    swig_text = files["swig/gen_math_ops.i"]
    # The C++ entry point takes the parameters as an array (METH_FASTCALL):
    # no C++ names for them; the binding gets the Python names, for keyword calls.
    assert "PyObject* Lambda(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {" in swig_text
    assert 'static const opforge::py::OpBinding op("Lambda", "lambda_", {"in_", "from_", "default"});' in swig_text
    assert "METH_FASTCALL | METH_KEYWORDS" in swig_text
    assert "// Lambda(in, from, default), declared at" in swig_text
    stub = files["python/gen_math_ops.pyi"]
    assert ("def lambda_(in_: TensorLike, from_: int, default: Sequence[float] = (1.5,))"
            " -> Tensor:") in stub
    grads_text = files["python/gen_math_grads.py"]
    assert "def _lambda_grad(op, dout):" in grads_text
    assert "in_ = op.inputs[0]" in grads_text
    assert "return [_ops.lambda_(dout, from_=op.get_attr('from')) if _need[0] else None]" in grads_text
    compile(grads_text, "gen_math_grads.py", "exec")

    # Rendered functions evaluate a rule only where its input needs a gradient.
    namespace = {}
    exec(compile(grads_text, "gen_math_grads.py", "exec"), namespace)
    calls = []
    namespace["_ops"] = type("FakeOps", (), {"lambda_": staticmethod(lambda d, from_: calls.append(from_) or d)})

    class FakeOp:
        inputs, outputs = ("x",), ("y",)

        def __init__(self, needs):
            self.needs_input_grad = needs

        def get_attr(self, name):
            return {"from": 7}[name]

    assert namespace["_lambda_grad"](FakeOp((False,)), "dy") == [None] and calls == []
    assert namespace["_lambda_grad"](FakeOp((True,)), "dy") == ["dy"] and calls == [7]


# --- rendering ----------------------------------------------------------------------

def test_render_is_deterministic(data):
    first = _files(data)
    assert first == _files(data)
    shuffled = copy.deepcopy(data)
    shuffled["ops"].reverse()
    shuffled["groups"].reverse()
    again = _files(shuffled)
    assert {k: v for k, v in again.items() if k != "registry.json"} == \
        {k: v for k, v in first.items() if k != "registry.json"}
    assert sorted(first) == [
        "files.cmake",
        "python/__init__.py",
        "python/dask_ops.py",
        "python/gen_array_grads.py", "python/gen_array_ops.py", "python/gen_array_ops.pyi",
        "python/gen_linalg_grads.py", "python/gen_linalg_ops.py", "python/gen_linalg_ops.pyi",
        "python/gen_math_grads.py", "python/gen_math_ops.py", "python/gen_math_ops.pyi",
        "python/gen_reduction_grads.py", "python/gen_reduction_ops.py",
        "python/gen_reduction_ops.pyi",
        "python/numpy_map.py", "python/raw_ops.py",
        "registry.json",
        "swig/gen_array_ops.i", "swig/gen_linalg_ops.i", "swig/gen_math_ops.i",
        "swig/gen_ops.i", "swig/gen_reduction_ops.i",
    ]


def test_headers_name_template_and_fingerprint(data):
    files = _files(data)
    for path, text in files.items():
        if path == "registry.json":
            continue
        first, second = text.split("\n")[:2]
        comment = "//" if path.endswith(".i") else "#"
        assert re.fullmatch(comment + r" @generated by python -m codegen from "
                            r"(codegen/templates|pkg/opforge/_schema/wrappers/templates)/"
                            r"\w+\.(py|pyi|i|cmake)\.j2 -- do not edit\.", first)
        folder = re.search(r"from (\S+)/\w+\.\w+\.j2", first).group(1)
        assert (ROOT / folder / first.split("/")[-1].split(" ")[0]).is_file(), first
        assert second.startswith(comment + " registry fingerprint")
        assert text.endswith("\n") and not text.endswith("\n\n")
        assert not re.search(r"[ \t]+\n", text), f"trailing whitespace in {path}"
    assert "# registry fingerprint: 0123456789abcdef" in files["python/gen_math_ops.py"]
    assert "// registry fingerprint: fedcba9876543210" in files["swig/gen_reduction_ops.i"]
    listed = re.findall(r"^  (\S+)$", files["files.cmake"], re.M)
    assert listed == sorted(files)  # what CMake reads is exactly what codegen writes


def _fake_public_entry(entry, name, module, doc):
    """What _pywrap_internal.public_entry makes, in Python: `entry` under
    `name`, its signature read off the doc's text signature (as inspect reads
    a builtin's), every parameter passed on positionally, defaults filled."""
    sig, marker, body = doc.partition("\n--\n\n")
    assert marker and sig.startswith(name + "(") and sig.endswith(")"), doc[:80]
    params = sig[len(name) + 1:-1]
    names = [a.arg for a in ast.parse(f"def f({params}): pass").body[0].args.args]
    ns = {"entry": entry}
    exec(f"def {name}({params}):\n    return entry({', '.join(names)})", ns)
    fn = ns[name]
    fn.__doc__, fn.__module__ = body, module
    return fn


def _fake_opforge(monkeypatch, hooks: list) -> types.SimpleNamespace:
    """Installs stand-ins for opforge, its extension and its hooks module."""
    calls = types.SimpleNamespace(fingerprints=[], dispatched=[])
    pw = types.ModuleType("opforge._pywrap_internal")
    pw.check_fingerprint = lambda group, fp: calls.fingerprints.append((group, fp))
    pw.__getattr__ = lambda name: (lambda *args: (name, args))
    pw.public_entry = _fake_public_entry
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


def test_python_wrappers_compile_and_match_params(data, monkeypatch):
    registry = Registry.parse(data)
    files = emit.render(registry).files
    hooks: list = []
    calls = _fake_opforge(monkeypatch, hooks)
    for module in python.PyPackage.of(registry).modules:
        ns = _exec(files[f"python/{module.module_name}.py"], module.module_name)
        assert ns["__all__"] == sorted(ns["__all__"]) == [o.python_name for o in module.ops]
        assert (module.name, module.fingerprint) in calls.fingerprints
        for view in module.ops:
            op = view.op
            fn = ns[view.python_name]
            expected = [naming.python_ident(n) for n in op.param_names]
            sig = inspect.signature(fn)
            assert list(sig.parameters) == expected, op.name
            for p in sig.parameters.values():
                attr = op.find_attr(p.name)
                default = None if attr is None else attr.to_dict()["default"]  # JSON value
                if attr is None or not attr.has_default:
                    assert p.default is inspect.Parameter.empty
                elif attr.type.is_list and default is not None:
                    assert p.default == tuple(default)
                else:
                    assert p.default == default and type(p.default) is type(default)
            assert inspect.cleandoc(fn.__doc__) == view.docstring  # escaping round-trips
            assert f"Declared at {op.source} (op {op.name})." in fn.__doc__
    # One call into C++ with every parameter, positionally, whatever the
    # mode (modes are a C++ stack: the wrappers never dispatch in Python).
    ns = _exec(files["python/gen_reduction_ops.py"], "gen_reduction_ops")
    assert ns["sum"]([1, 2], keepdims=True) == ("Sum", ([1, 2], None, True))
    hooks.append(object())
    assert ns["sum"]([1, 2]) == ("Sum", ([1, 2], None, False))
    assert calls.dispatched == []


def test_docstring_escapes_quotes_and_backslashes(data, monkeypatch):
    files = _files(data)
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
    emit.render(registry).write(tmp_path / "gen")
    pkg_dir = tmp_path / "pkgroot" / "ops_under_test"
    (tmp_path / "gen" / "python").rename(pkg_dir.parent.mkdir() or pkg_dir)
    _fake_opforge(monkeypatch, [])
    monkeypatch.syspath_prepend(str(pkg_dir.parent))
    ops = importlib.import_module("ops_under_test")
    try:
        assert ops.__all__ == sorted(ops.__all__) == list(namespace.Namespace.of(registry).user_names)
        assert {"add", "sum", "mat_mul", "fill"} <= set(ops.__all__)
        for name in ops.__all__:
            assert callable(getattr(ops, name))
        # Backward ops and optimizer kernels: in raw_ops, not in __all__ (so not in opforge.*).
        raw = {op.name for op in registry.ops if namespace.is_raw(op)}
        assert ops.raw_ops.__all__ == list(namespace.Namespace.of(registry).raw_names)
        for op in registry.ops:
            name = naming.op_python_name(op.name)
            assert (name in ops.raw_ops.__all__) == (op.name in raw) == (name not in ops.__all__)
    finally:
        for mod in [m for m in sys.modules if m.startswith("ops_under_test")]:
            del sys.modules[mod]


def test_pyi_stubs_compile_and_have_hints(data):
    registry = Registry.parse(data)
    files = emit.render(registry).files
    for group, ops in registry.group_ops():
        module = pyi.StubModule.of(group, ops)
        text = files[f"python/{module.module_name}.pyi"]
        tree = ast.parse(compile(text, module.module_name + ".pyi", "exec",
                                 flags=ast.PyCF_ONLY_AST))
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for op in ops:
            fn = defs[naming.op_python_name(op.name)]
            assert [a.arg for a in fn.args.args] == [naming.python_ident(p.name) for p in op.params]
            assert ast.get_docstring(fn) == op.summary
    stub = files["python/gen_reduction_ops.pyi"]
    assert ("def moments(x: TensorLike, axis: Sequence[int] | int | None = None, "
            "keepdims: bool = False) -> tuple[Tensor, Tensor]:") in stub
    assert "def concat(values: Sequence[TensorLike], axis: int = 0) -> Tensor:" in \
        files["python/gen_array_ops.pyi"]
    assert "from collections.abc import Sequence" not in files["python/gen_math_ops.pyi"]


def test_swig_entry_points(data):
    registry = Registry.parse(data)
    files = emit.render(registry).files
    for group, ops in registry.group_ops():
        text = files[f"swig/{python.module_name(group.name)}.i"]
        for op in ops:
            # One METH_FASTCALL function per op, its parameters (in order) named above it,
            # and its row in the group's method table, added to the module at init.
            m = re.search(rf"^// {op.name}\((.*)\), declared at ", text, re.M)
            assert m, op.name
            assert (m.group(1).split(", ") if m.group(1) else []) == [p.name for p in op.params]
            assert (f"PyObject* {op.name}(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {{"
                    in text)
            assert f"(opforge::gen::{op.name})), METH_FASTCALL | METH_KEYWORDS," in text
        assert f"PyModule_AddFunctions(m, opforge_gen_{group.name}_methods) < 0" in text
    swig_text = files["swig/gen_array_ops.i"]
    assert ('   "Fill(shape, value=0.0, dtype=\\"float32\\") -> Tensor\\n\\nReturns a tensor of the given shape '
            'filled with value."},') in swig_text
    assert "// Fill(shape, value, dtype), declared at" in swig_text  # an attr first
    assert 'static const opforge::py::OpBinding op("Where", "where", {"condition", "x", "y"});' in swig_text
    assert "  return op.CallFast(args, nargs, kwnames);\n" in swig_text


def test_writer_refuses_a_path_twice_and_odd_paths():
    w = Writer()
    w.add("python/a.py", "x = 1\n")
    with pytest.raises(CodegenError, match=r"python/a\.py: generated twice"):
        w.add("python/a.py", "x = 2\n")
    for bad in ("../a.py", "/tmp/a.py", "python//a.py", "python/./a.py"):
        with pytest.raises(CodegenError, match="not a normalised relative path"):
            w.add(bad, "")
    assert w.files == {"python/a.py": "x = 1\n"}


def test_render_adds_each_file_once(data, monkeypatch):
    """Every file goes through one Writer: a second rendering of a path is an error."""
    added = []
    real_add = Writer.add

    def add(self, path, text):
        added.append(path)
        real_add(self, path, text)
    monkeypatch.setattr(Writer, "add", add)
    files = _files(data)
    assert sorted(added) == sorted(files) and len(added) == len(set(added))


def test_writer_writes_only_changed_files(tmp_path):
    out = tmp_path / "gen"
    w = Writer(("python/gen_*_ops.py",))
    w.add("python/gen_a_ops.py", "a = 1\n")
    w.add("python/gen_b_ops.py", "b = 1\n")
    assert w.write(out) == (["python/gen_a_ops.py", "python/gen_b_ops.py"], [])
    a, b = out / "python" / "gen_a_ops.py", out / "python" / "gen_b_ops.py"
    os.utime(a, ns=(1, 1))
    os.utime(b, ns=(1, 1))
    w2 = Writer(("python/gen_*_ops.py",))
    w2.add("python/gen_a_ops.py", "a = 2\n")
    assert w2.write(out) == (["python/gen_a_ops.py"], ["python/gen_b_ops.py"])
    assert a.read_text() == "a = 2\n" and a.stat().st_mtime_ns != 1 and not b.exists()
    assert a.stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert [p.name for p in (out / "python").iterdir()] == ["gen_a_ops.py"]  # no temp files left
    os.utime(a, ns=(1, 1))
    assert w2.write(out) == ([], []) and a.stat().st_mtime_ns == 1


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_render_library_uses_the_generic_entry_point(data, monkeypatch):
    registry = Registry.parse(data)
    text, grads_text, dask_text = emit.render_library(registry, "/libs/libmy_ops.so")
    assert dask_text.startswith("# @generated by opforge.load_op_library from "
                                "pkg/opforge/_schema/wrappers/templates/python_dask.py.j2 -- do not edit.\n")
    compile(dask_text, "my_ops_dask", "exec")
    assert "from opforge import ops" not in dask_text  # the library module is _ops
    assert "return _s.reduction('Sum', _ops.sum, (x,), {'axis': axis, 'keepdims': keepdims})" \
        in dask_text
    assert grads_text.startswith("# @generated by opforge.load_op_library from "
                                 "pkg/opforge/_schema/wrappers/templates/python_grads.py.j2 -- do not edit.\n")
    compile(grads_text, "my_ops_grads", "exec")
    assert text.startswith("# @generated by opforge.load_op_library from "
                           "pkg/opforge/_schema/wrappers/templates/python_ops.py.j2 -- do not edit.\n"
                           "# library: /libs/libmy_ops.so\n")
    assert "check_fingerprint" not in text
    calls = _fake_opforge(monkeypatch, [])
    executed = []
    sys.modules["opforge._pywrap_internal"].execute = lambda *a: executed.append(a) or "ok"
    ns = _exec(text, "my_ops")
    assert ns["__all__"] == sorted(naming.op_python_name(o.name) for o in registry.ops)
    assert ns["fill"]([2, 3], dtype="int32") == "ok"
    assert executed == [("Fill", ([2, 3], 0.0, "int32"))]  # the parameters in order
    assert ns["concat"]([[1], [2]], axis=0) == "ok"
    assert executed[-1] == ("Concat", ([[1], [2]], 0))
    assert calls.fingerprints == []


def test_dask_module_calls_the_strategy_of_each_category(data):
    text = _files(data)["python/dask_ops.py"]
    assert "from opforge import ops as _ops" in text
    assert "return _s.elementwise('Add', _ops.add, (x, y), {})" in text
    assert "return _s.contraction('MatMul', _ops.mat_mul, (a, b), " \
        "{'transpose_a': transpose_a, 'transpose_b': transpose_b})" in text
    assert "return _s.unimplemented('Pad')" in text
    compile(text, "dask_ops.py", "exec")


@pytest.mark.parametrize("category, message", [
    ("sideways", "category 'sideways' is not one of"),
    ("reduction", "category 'reduction' needs 1 input(s) and the attrs ['axis', 'keepdims']"),
    ("contraction", "missing ['transpose_a', 'transpose_b']"),
])
def test_dask_category_must_fit_the_declaration(data, category, message):
    bad = copy.deepcopy(data)
    add = next(o for o in bad["ops"] if o["name"] == "Add")
    add["category"] = category
    with pytest.raises(CodegenError, match=re.escape(message)):
        _files(bad)

