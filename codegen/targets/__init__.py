"""Per-target views of the schema: what each template sees, and nothing else.

The model (codegen/model.py) is the registry as declared. Each module here
translates it for one output language into frozen view dataclasses whose
fields are ready to paste into a template:

- python.py:     gen_<group>_ops.py wrappers (names, signatures, defaults as
                 Python source, call tuples) and the ops package __init__
- docstrings.py: the wrappers' docstrings (used by python.py)
- pyi.py:        .pyi stubs (type hints, imports)
- swig.py:       SWIG .i entry points (C++ parameter types and names, typemap
                 wrappers, the raw function's docstring) and the index .i
- grads.py:      gen_<group>_grads.py (gradient declarations as Python
                 gradient functions that call the generated wrappers)
"""
