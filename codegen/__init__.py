"""opforge's code generator: op registry -> SWIG entry points + Python wrappers.

1. registry_source.py gets the registry JSON: --registry FILE, or it builds and
   runs the C++ tool `opforge_dump_registry` (CMake, in build/codegen).
2. model.py parses it into frozen dataclasses (Registry, Group, OpDef, ArgDef,
   AttrDef, Source) that round-trip (to_dict(parse(d)) == d) and derive what
   the templates need: Python names (naming.py), parameters, hints, docstrings.
3. validate.py checks it; every error starts with the op's file:line.
4. emit.py renders templates/*.j2 per group into generated/swig/gen_<g>_ops.i,
   generated/python/gen_<g>_ops.py(i), plus python/__init__.py and registry.json.
5. cli.py writes only changed files and removes stale gen_* files, or with
   --check prints a unified diff and exits 1 when generated/ is stale.
"""
