"""ONNX operators on the index ops (cpp/ops/index_ops.cc): TopK, NonZero,
ScatterND, ScatterElements (and the deprecated Scatter, its opset-9 name).

TopK's k must be known when the node is converted (an initializer, a
Constant, or any value when running eagerly); NonZero's output size depends
on the values, so it runs only where its input has a value (eagerly, or a
constant in a graph).
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import INT, STRING, converter, dtype_of, shape_of
from opforge._index import nonzero as _nonzero


@converter("TopK", (1, 10, 11, 24), {"axis": INT, "largest": INT, "sorted": INT, "k": INT})
def _top_k(n):
    x = n.input(0)
    if n.version == 1:
        if not n.has_attr("k"):
            raise n.fail("attribute 'k' is required")
        k = n.attr("k")
    else:
        k = int(n.static(1, "K").reshape(-1)[0])
    rank = len(shape_of(x))
    axis = n.axis(n.attr("axis", -1), rank)
    if k < 0:
        raise n.fail(f"K must be >= 0, got {k}")
    return P.top_k(x, k=k, axis=axis, largest=bool(n.attr("largest", 1)), sorted=True)


@converter("NonZero", (9, 13))
def _non_zero(n):
    v = n.known(0)
    x = v if v is not None else n.input(0)
    if not isinstance(x, np.ndarray) and not hasattr(x, "numpy"):
        raise n.fail("the input must have a value when the node is converted (its output size depends "
                     "on the values)", UnimplementedError)
    try:
        return _nonzero(x)
    except (TypeError, RuntimeError, ValueError):
        raise n.fail("the input must have a value when the node is converted (its output size depends "
                     "on the values)", UnimplementedError) from None


def _reduction(n):
    r = n.attr("reduction", "none")
    allowed = {11: ("none",), 13: ("none",), 16: ("none", "add", "mul")}.get(n.version,
                                                                          ("none", "add", "mul", "max", "min"))
    if r not in allowed:
        raise n.fail(f"reduction {r!r} is not valid at schema version {n.version} (allowed: {list(allowed)})")
    return r


def _index_dtype_ok(n, idx):
    if dtype_of(idx) not in (np.int32, np.int64):
        raise n.fail(f"indices must be int32 or int64, got {dtype_of(idx)}")


@converter("ScatterND", (11, 13, 16, 18), {"reduction": STRING}, check=_reduction)
def _scatter_nd(n):
    data, idx, upd = n.input(0), n.input(1), n.input(2)
    _index_dtype_ok(n, idx)
    return P.scatter_nd(data, idx, upd, reduction=_reduction(n))


@converter("ScatterElements", (11, 13, 16, 18), {"axis": INT, "reduction": STRING}, check=_reduction)
def _scatter_elements(n):
    data, idx, upd = n.input(0), n.input(1), n.input(2)
    _index_dtype_ok(n, idx)
    axis = n.axis(n.attr("axis", 0), len(shape_of(data)))
    return P.scatter_elements(data, idx, upd, axis=axis, reduction=_reduction(n))


@converter("Scatter", (9, 11), {"axis": INT})
def _scatter(n):
    data, idx, upd = n.input(0), n.input(1), n.input(2)
    _index_dtype_ok(n, idx)
    axis = n.axis(n.attr("axis", 0), len(shape_of(data)))
    return P.scatter_elements(data, idx, upd, axis=axis)
