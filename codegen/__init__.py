"""opforge's code generator: op registry -> SWIG entry points + Python wrappers.

The schema reader and the Python wrapper target are the package's own
(pkg/opforge/_schema/): the installed opforge renders a custom op library's
wrappers with them and never imports codegen. codegen loads that package
from the source tree (no extension needed) and uses it as its own:

1. registry_source.py gets the registry JSON: --registry FILE, or it builds and
   runs the C++ tool `opforge_dump_registry` (CMake: in the build `pip install`
   left under build/ when there is one, else in build/codegen), and
   reads it with opforge._schema.reader (the one reader).
2. model.py (opforge._schema.model) parses it into frozen dataclasses (Registry,
   Group, OpDef, ArgDef, AttrDef, Source; AttrType and DType) that round-trip
   (to_dict(parse(d)) == d): the schema only, in no target's terms.
3. validate.py checks what only generated code needs (the C++ registry has
   checked the declarations; opforge._schema.validate, plus C++ spellings);
   every error starts with the op's file:line.
4. targets/ translates the schema per output language into the views the
   templates see: python.py (+ docstrings.py), grads.py, dask.py (all in
   opforge._schema.wrappers), pyi.py, swig.py (codegen's own).
5. emit.py renders templates/*.j2 per group into generated/swig/gen_<g>_ops.i,
   generated/python/gen_<g>_ops.py(i), plus python/__init__.py and registry.json,
   all through one writer.Writer, which refuses a path added twice.
6. cli.py has the Writer write only changed files and remove stale gen_* files,
   or with --check print a unified diff and exit 1 when generated/ is stale.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "pkg" / "opforge" / "_schema"

# codegen's names for the package's modules: one module object under both.
ALIASES = {
    "model": "model", "naming": "naming",
    "targets.python": "wrappers.python", "targets.docstrings": "wrappers.docstrings",
    "targets.grads": "wrappers.grads", "targets.dask": "wrappers.dask",
}


class _SchemaFinder:
    """Finds opforge._schema's submodules on their package's __path__, ahead of
    other finders: an editable install's finder would map every opforge.*
    name to its own tree, not to this one."""

    @staticmethod
    def find_spec(name, path, target=None):
        if name.startswith("opforge._schema.") and path is not None:
            return importlib.machinery.PathFinder.find_spec(name, path)
        return None


def _load_schema():
    """opforge._schema from this source tree, without importing opforge (whose
    __init__ needs the built extension). A process that has already imported
    opforge keeps its own (the same files in an editable install)."""
    name = "opforge._schema"
    if name not in sys.modules:
        sys.meta_path.insert(0, _SchemaFinder)
        spec = importlib.util.spec_from_file_location(
            name, SCHEMA_DIR / "__init__.py", submodule_search_locations=[str(SCHEMA_DIR)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    for ours, theirs in ALIASES.items():
        module = importlib.import_module(f"{name}.{theirs}")
        sys.modules[f"{__name__}.{ours}"] = module
        parent, _, leaf = f"{__name__}.{ours}".rpartition(".")
        setattr(importlib.import_module(parent), leaf, module)


_load_schema()
