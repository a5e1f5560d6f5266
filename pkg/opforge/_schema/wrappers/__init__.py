"""Python wrappers from the schema: views per target (python.py, docstrings.py,
grads.py, dask.py) and the templates they fill (templates/*.j2, rendered by
render.py). codegen renders the built-in ``gen_<group>_ops`` modules with
them; ``load_op_library`` renders a custom op library's module."""

from typing import TYPE_CHECKING

if not TYPE_CHECKING:
    def __getattr__(name):
        # `from . import x` looks x up here first: import it by its full name,
        # so codegen, which loads this package without its parent opforge,
        # never has Python import `opforge` (its __init__ needs the extension).
        import importlib
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
