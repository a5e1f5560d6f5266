"""opforge: array ops written in C++, called from Python on numpy data.

    >>> import numpy as np, opforge as of
    >>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> of.add(x, 1.5).numpy()          # x is borrowed, not copied
    array([[1.5, 2.5, 3.5],
           [4.5, 5.5, 6.5]], dtype=float32)

Every op is also in its generated module, e.g. ``opforge.ops.gen_math_ops``.
"""

from opforge import _pywrap_internal

_registration_errors = _pywrap_internal.registration_errors()
if _registration_errors:
    raise ImportError("opforge: invalid op or kernel registrations in the compiled library:\n  "
                      + "\n  ".join(_registration_errors))

from opforge import dtypes, errors  # noqa: E402
from opforge.dtypes import DType, as_dtype, bool_, float32, float64, int32, int64  # noqa: E402
from opforge.tensor import Tensor, tensor  # noqa: E402
from opforge import ops  # noqa: E402
from opforge import config, sysconfig  # noqa: E402
from opforge._op_library import load_op_library  # noqa: E402
from opforge.autodiff import (RegisterGradient, enable_grad, grad, no_grad,  # noqa: E402,F401
                              value_and_grad)
from opforge.ops import *  # noqa: E402,F401,F403

# numpy's names for ops whose TensorFlow-style names differ.
matmul = ops.mat_mul
where = ops.select
argmax = ops.arg_max
argmin = ops.arg_min



def __getattr__(name):
    # opforge.testing, opforge.nn and opforge.optim on first use: most programs never need them.
    if name in ("testing", "nn", "optim"):
        import importlib
        return importlib.import_module(f"opforge.{name}")
    raise AttributeError(f"module 'opforge' has no attribute {name!r}")


__version__ = "0.1.0"

globals()["bool"] = bool_  # of.bool, like np.bool (set last: it shadows the builtin)
