"""opforge: array ops written in C++, called from Python on numpy data.

    >>> import numpy as np, opforge as of
    >>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> of.add(x, 1.5).numpy()          # x is borrowed, not copied
    array([[1.5, 2.5, 3.5],
           [4.5, 5.5, 6.5]], dtype=float32)

Every op is also in its generated module, e.g. ``opforge.ops.gen_math_ops``; the
backward ops and optimizer kernels are in ``opforge.raw_ops`` only.
"""

import numpy  # noqa: F401  (first: cpp/kernels/gemm/blas_handoff.cc notes the BLAS threads it starts)

from opforge import _pywrap_internal

_registration_errors = _pywrap_internal.registration_errors()
if _registration_errors:
    raise ImportError("opforge: invalid op or kernel registrations in the compiled library:\n  "
                      + "\n  ".join(_registration_errors))

# "X as X": explicit re-exports, so type checkers in strict mode see them.
from opforge import dtypes as dtypes, errors as errors  # noqa: E402
from opforge.dtypes import (DType as DType, as_dtype as as_dtype, bool_ as bool_,  # noqa: E402
                            float32 as float32, float64 as float64, int32 as int32, int64 as int64)
from opforge.dtypes import (bfloat16 as bfloat16, float16 as float16, int8 as int8, int16 as int16,  # noqa: E402
                            promote_types as promote_types, result_type as result_type, uint8 as uint8,
                            uint16 as uint16, uint32 as uint32, uint64 as uint64)
from opforge.tensor import Tensor as Tensor, from_dlpack as from_dlpack, tensor as tensor  # noqa: E402
from opforge import ops as ops  # noqa: E402
from opforge import config as config, sysconfig as sysconfig  # noqa: E402
from opforge._op_library import load_op_library as load_op_library  # noqa: E402
from opforge.autodiff import (RegisterGradient as RegisterGradient, enable_grad as enable_grad,  # noqa: E402
                              grad as grad, no_grad as no_grad, value_and_grad as value_and_grad)
from opforge.ops import *  # noqa: E402,F401,F403
# PyTorch's factories, seeding, any/all and a converting of.tensor (after the ops: zeros_like takes dtype=).
from opforge import random as random  # noqa: E402
from opforge._factories import *  # noqa: E402,F401,F403
from opforge._index import nonzero as nonzero  # noqa: E402  (index ops: NonZero sizing, scatter gradients)
from opforge import autograd as autograd  # noqa: E402
from opforge.amp import autocast as autocast  # noqa: E402  (mixed precision)
from opforge.autograd import grad as grad, value_and_grad as value_and_grad  # noqa: E402  (over pytrees)
from opforge.ops import raw_ops as raw_ops  # noqa: E402  backward ops, optimizer kernels
from opforge.graph import (Graph as Graph, Session as Session, constant as constant,  # noqa: E402
                           get_default_graph as get_default_graph, gradients as gradients,
                           placeholder as placeholder)
from opforge.variables import (Variable as Variable, control_dependencies as control_dependencies,  # noqa: E402
                               global_variables as global_variables, group as group,
                               global_variables_initializer as global_variables_initializer,
                               trainable_variables as trainable_variables,
                               variables_initializer as variables_initializer)
from opforge._async import (execution_mode as execution_mode, flush as flush,  # noqa: E402
                            pending as pending, queue_size as queue_size, set_execution_mode as set_execution_mode)

# numpy's names for ops whose TensorFlow-style names differ.
matmul = ops.mat_mul
where = ops.select
argmax = ops.arg_max
argmin = ops.arg_min



def _lazy_submodule(name):
    # Bound now, executed on first attribute access (importlib's LazyLoader):
    # most programs never need these, and importing opforge must not import
    # onnx or safetensors (extras). Not a module __getattr__: CPython does not
    # specialize attribute loads on a module that has one, so every
    # `opforge.add` would cost a full lookup (about 280 instructions a call).
    import importlib.util
    import sys
    full = f"{__name__}.{name}"
    module = sys.modules.get(full)
    if module is None:
        spec = importlib.util.find_spec(full)
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
    return module


testing, onnx, nn, optim = (_lazy_submodule(n) for n in ("testing", "onnx", "nn", "optim"))
utils, initializers = (_lazy_submodule(n) for n in ("utils", "initializers"))
distributed = _lazy_submodule("distributed")  # of.distributed.init(): MPI only then
saved_graph, graph_util = (_lazy_submodule(n) for n in ("saved_graph", "graph_util"))  # onnx only when used
train = _lazy_submodule("train")  # Saver, Checkpoint
quantization = _lazy_submodule("quantization")  # int8 layers and helpers (issue 25)
del _lazy_submodule


__version__ = "0.1.0"

globals()["bool"] = bool_  # of.bool, like np.bool (set last: it shadows the builtin)
