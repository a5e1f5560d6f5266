"""opforge's code generator: op registry -> SWIG entry points + Python wrappers.

1. registry_source.py gets the registry JSON: --registry FILE, or it builds and
   runs the C++ tool `opforge_dump_registry` (CMake, in build/codegen).
2. model.py parses it into frozen dataclasses (Registry, Group, OpDef, ArgDef,
   AttrDef, Source; AttrType and DType) that round-trip (to_dict(parse(d)) == d):
   the schema only, in no target's terms.
3. validate.py checks what only the generator needs (the C++ registry has
   checked the declarations); every error starts with the op's file:line.
4. targets/ translates the schema per output language into the views the
   templates see: python.py (+ docstrings.py), pyi.py, swig.py, grads.py.
5. emit.py renders templates/*.j2 per group into generated/swig/gen_<g>_ops.i,
   generated/python/gen_<g>_ops.py(i), plus python/__init__.py and registry.json,
   all through one writer.Writer, which refuses a path added twice.
6. cli.py has the Writer write only changed files and remove stale gen_* files,
   or with --check print a unified diff and exit 1 when generated/ is stale.
"""
