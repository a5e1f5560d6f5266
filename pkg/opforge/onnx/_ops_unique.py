"""ONNX Unique onto the unique op: the axis moved first and the rest
flattened into rows; the op writes padded outputs and the count, and the
converter keeps the first `count` rows, so it needs the count's value (an
eager run; a compiled graph runs such a model eagerly)."""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import INT, converter, dtype_of, shape_of


@converter("Unique", (11, 28), {"axis": INT, "sorted": INT})
def _unique(n):
    x = n.input(0)
    shape = list(shape_of(x))
    if None in shape:
        raise n.fail(f"X needs static dims, got {shape}", UnimplementedError)
    if n.has_attr("axis"):
        axis = n.axis(n.attr("axis"), len(shape))
        perm = [axis] + [i for i in range(len(shape)) if i != axis]
        moved = P.transpose(x, perm=perm) if axis else x
        rest = [shape[i] for i in perm[1:]]
        rows = P.reshape(moved, shape=[shape[axis], int(np.prod(rest, dtype=np.int64))])
    else:
        perm, rest = None, []
        rows = P.reshape(x, shape=[int(np.prod(shape, dtype=np.int64)), 1])
    half = dtype_of(x) if dtype_of(x).itemsize == 2 and dtype_of(x).kind in "fV" else None
    if half is not None:  # float16/bfloat16 widen exactly, so the order and the equalities are kept
        rows = P.cast(rows, dtype=np.dtype(np.float32))
    y, first, inverse, counts, count = P.unique(rows, sorted=bool(n.attr("sorted", 1)))
    if half is not None:
        y = P.cast(y, dtype=half)
    try:
        k = int(np.asarray(count.numpy()))
    except Exception:  # noqa: BLE001 -- a graph tensor: the count is known only when the graph runs
        raise n.fail("the number of distinct values depends on the values: it needs an eager run",
                     UnimplementedError) from None
    m = shape_of(rows)[1]
    y = P.reshape(P.slice(y, begin=[0, 0], size=[k, m]), shape=[k] + rest)
    if perm is not None and perm[0] != 0:
        y = P.transpose(y, perm=[int(i) for i in np.argsort(perm)])
    return y, P.slice(first, begin=[0], size=[k]), inverse, P.slice(counts, begin=[0], size=[k])
