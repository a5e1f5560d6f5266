"""opforge's ops on dask.array arrays: ``import opforge.dask as odask``.

Generated from the registry (``opforge.ops.dask_ops``): each op, chosen by the
category its C++ declaration gives, becomes a dask graph whose blocks run the
eager op. Needs the ``dask`` extra (``pip install ".[dask]"`` in the checkout);
``import opforge`` alone never imports dask.
"""
import importlib.util as _util

if _util.find_spec("dask") is None or _util.find_spec("dask.array") is None:
    raise ImportError('opforge.dask needs dask.array: pip install "dask[array]" (or the checkout\'s extra: pip install ".[dask]")')

from opforge.ops.dask_ops import *  # noqa: F401,F403,E402
from opforge.ops.dask_ops import __all__  # noqa: F401,E402
