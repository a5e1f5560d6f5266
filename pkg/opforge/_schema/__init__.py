"""The op registry's schema: the one reader of the serialized registry.

The C++ registry crosses to Python once, as the registry JSON (format
``model.FORMAT``, one fingerprint per op group) that
``cpp/framework/registry_json.cc`` writes: ``_pywrap_internal.registry_json()``
at run time, the dump tool at build time. ``reader`` turns it into the frozen
dataclasses of ``model``; codegen (``python -m codegen``, from the source
tree), ``load_op_library``, ``opforge._opinfo`` and ``python -m opforge``
all read it through here.

This package imports nothing from opforge and only the standard library
(``wrappers.render`` alone needs jinja2), so codegen loads it from
``pkg/opforge/_schema`` before any extension is built (codegen/__init__.py).
``wrappers/`` renders Python wrappers (module, gradients, Dask) from the
model: codegen for the built-in groups, ``load_op_library`` for a custom
op library, one implementation for both.
"""

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
