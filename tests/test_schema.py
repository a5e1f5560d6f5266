"""The registry crosses to Python once: one serialized form (the registry JSON,
versioned, with group fingerprints), one reader (opforge._schema) that codegen
and the runtime share, and an installed package that never imports codegen."""
from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import opforge
from opforge import _opinfo
from opforge import _pywrap_internal as pw
from opforge._schema import reader
from opforge._schema.errors import SchemaError

ROOT = Path(__file__).resolve().parents[1]
PKG = Path(opforge.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_installed_package_never_imports_codegen():
    offenders = [f"{p.relative_to(PKG)}: {n}" for p in sorted(PKG.rglob("*.py"))
                 for n in _imports(p) if n.split(".")[0] == "codegen" or n.startswith("opforge._codegen")]
    assert offenders == []
    assert not (PKG / "_codegen").exists()
    # A fresh process that reads the registry and renders a library's wrappers.
    code = ("import sys, opforge\n"
            "from opforge import _opinfo\n"
            "from opforge._schema.wrappers.render import render_library\n"
            "reg = _opinfo.registry()\n"
            "text, grads, dask = render_library(reg, 'lib.so')\n"
            "compile(text, 'lib', 'exec')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('codegen', 'opforge._codegen')))\n")
    assert _python(code).strip() == "[]"


def _python(code):
    """What a fresh interpreter prints running `code` from the source tree's parent."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent.parent)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_import_opforge_reads_no_schema_until_asked():
    """The schema model's dataclasses cost `import opforge` about 10 ms (bench/targets.py's import budget is
    50 ms): graphs and load_op_library import it on first use."""
    lazy = ("opforge._schema", "opforge._opinfo", "opforge._elf")
    code = (f"import sys, opforge\nprint(sorted(m for m in sys.modules if m.startswith({lazy!r})))\n"
            "g = opforge.Graph()\n"
            "with g.as_default():\n"
            "    y = opforge.add(opforge.constant(1.0), 2.0)\n"
            "print(float(opforge.Session(g).run(y)))\n")
    assert _python(code).split() == ["[]", "3.0"]


def test_the_reader_needs_the_standard_library_only():
    """codegen loads opforge._schema from the source tree before any build: it may
    import no third-party module (jinja2 only where wrappers are rendered) and no opforge."""
    schema = PKG / "_schema"
    for path in sorted(schema.rglob("*.py")):
        allowed = set(sys.stdlib_module_names) | ({"jinja2"} if path.name == "render.py" else set())
        outside = {n for n in _imports(path) if n.split(".")[0] not in allowed}
        assert outside == set(), f"{path.relative_to(schema)} imports {outside}"


def test_codegen_and_the_runtime_share_one_reader():
    sys.path.insert(0, str(ROOT))
    try:
        import codegen.model
        import codegen.registry_source
        import codegen.targets.python
    finally:
        sys.path.remove(str(ROOT))
    assert codegen.registry_source.loads is reader.loads
    assert codegen.model is sys.modules["opforge._schema.model"]
    assert codegen.targets.python is sys.modules["opforge._schema.wrappers.python"]


def test_codegen_loads_the_schema_without_opforge():
    # What the build does: `python -m codegen` before the extension exists.
    code = "import sys, codegen.cli\nprint('opforge' in sys.modules, sys.modules['codegen.model'].__file__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    imported, model_file = r.stdout.split()
    assert imported == "False"
    assert Path(model_file) == ROOT / "pkg" / "opforge" / "_schema" / "model.py"


def test_codegen_in_another_tree_uses_that_trees_schema(tmp_path):
    # A copy of the source tree (tests/tree_copy.py, another worktree) renders
    # with its own schema and templates, even where an editable install maps
    # every opforge.* module to this tree.
    shutil.copytree(ROOT / "codegen", tmp_path / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "pkg" / "opforge" / "_schema", tmp_path / "pkg" / "opforge" / "_schema",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import sys, codegen.emit\n"
            "from opforge._schema.wrappers import render\n"
            "print(render.__file__, sys.modules['codegen.targets.python'].__file__, render.TEMPLATE_DIR)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for path in r.stdout.split():
        assert Path(path).is_relative_to(tmp_path), r.stdout


def test_the_runtime_reads_the_compiled_registry_through_the_reader():
    text = pw.registry_json()
    reg = _opinfo.registry()
    assert reg.to_dict() == json.loads(text)  # round trip, key for key
    assert reg.format == reader.FORMAT
    assert {g.name for g in reg.groups} >= {"math", "array"}
    add = _opinfo.get("Add")
    assert [a.name for a in add.inputs] == ["x", "y"] and add.outputs == ("z",)


def test_another_format_is_refused_with_a_message():
    doc = json.loads(pw.registry_json())
    doc["format"] = reader.FORMAT + 1
    with pytest.raises(SchemaError, match=rf"format {reader.FORMAT + 1} is not supported \(expected {reader.FORMAT}\)"):
        reader.read(json.dumps(doc), "test")
    with pytest.raises(SchemaError, match=r"^where:1: not valid JSON"):
        reader.read("{", "where")


def test_a_transpose_attr_must_name_a_bool_attr_of_the_op():
    doc = json.loads(pw.registry_json())
    matmul = next(op for op in doc["ops"] if op["name"] == "MatMul")
    assert matmul["inputs"][1]["transpose_attr"] == "transpose_b"
    ops = {op.name: op for op in reader.read(json.dumps(doc), "test").ops}
    assert ops["MatMul"].inputs[1].transpose_attr == "transpose_b"
    for bad in ("T", "nope", 1):
        matmul["inputs"][1]["transpose_attr"] = bad
        with pytest.raises(SchemaError, match="MatMul"):
            reader.read(json.dumps(doc), "test")


def test_python_m_opforge_describe_reads_through_the_reader():
    r = subprocess.run([sys.executable, "-m", "opforge", "describe", "Add"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Add(x, y) -> z" in r.stdout
