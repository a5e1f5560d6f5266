"""Shape-changing ONNX operators, mapped onto Reshape, Transpose, Slice, Concat.

Where every dim and shape-like input (Reshape's shape, Slice's starts/ends)
is known when the node is converted (initializers, Constant nodes, values
folded from static shapes, any value when running eagerly), the node becomes
the static op. Where they are known only at run time (a graph with symbolic
dims: one graph for every size), it becomes the shape-tensor op of
cpp/ops/shape_ops.cc (Shape, ReshapeTo, StridedSlice), whose shapes the
engine infers per feed-shape signature. Squeeze's and Unsqueeze's axes must
be known.
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _dtypes, _validate
from opforge.onnx._node import INT, INTS, TENSOR, FLOAT, FLOATS, STRING, converter, dtype_of, shape_of
from opforge.onnx._shape_values import constant_target, ints_or_tensor, int64_tensor, reshape_spec

_ALL_SINCE_1 = (1, 13, 14, 16, 19, 21, 23, 24, 25)


@converter("Identity", _ALL_SINCE_1)
def _identity(n):
    return P.identity(n.input(0))


@converter("Reshape", (1, 5, 13, 14, 19, 21, 23, 24, 25), {"allowzero": INT, "shape": INTS})
def _reshape(n):
    x = n.input(0)
    if n.version == 1:
        if not n.has_attr("shape"):
            raise n.fail("attribute 'shape' is required")
        target = n.attr("shape")
    elif n.has_attr("shape"):
        raise n.fail("shape is an input since opset 5, not an attribute")
    else:
        target, dyn = ints_or_tensor(n, 1, "shape")
        if dyn is not None:  # computed at run time: the engine resolves 0 and -1 per run
            allowzero = bool(n.attr("allowzero", 0))
            tracked = n.partials.get(n.node.input[1])
            fixed = constant_target(n, tracked[0], allowzero) if tracked else None
            if fixed is not None:
                return P.reshape_to(x, fixed, allowzero=allowzero)
            # Some entries known now: the graph knows those dims before it runs.
            dims = [e if isinstance(e, int) else -2 for e in tracked[0]] if tracked else []
            return P.reshape_to(x, dyn, allowzero=allowzero, dims=dims)
    in_shape = shape_of(x)
    if None in in_shape:
        return P.reshape_to(x, np.array(target, np.int64), allowzero=bool(n.attr("allowzero", 0)))
    if not n.attr("allowzero", 0):
        # 0 copies the input's dim at that position.
        for i, d in enumerate(target):
            if d == 0:
                if i >= len(in_shape):
                    raise n.fail(f"shape {target} copies dim {i} (0) but the input has rank {len(in_shape)}")
                target[i] = in_shape[i]
    elif 0 in target and -1 in target:
        raise n.fail(f"shape {target} has both 0 and -1 with allowzero=1")
    return P.reshape(x, shape=target)


@converter("Transpose", (1, 13, 21, 23, 24, 25), {"perm": INTS})
def _transpose(n):
    x = n.input(0)
    rank = len(shape_of(x))
    perm = n.attr("perm")
    if perm is None:
        perm = list(range(rank))[::-1]
    return P.transpose(x, perm=perm)


@converter("Flatten", (1, 9, 11, 13, 21, 23, 24, 25), {"axis": INT})
def _flatten(n):
    x = n.input(0)
    shape = shape_of(x)
    axis = n.attr("axis", 1)
    if not -len(shape) <= axis <= len(shape):
        raise n.fail(f"axis {axis} is out of range for rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    if None in shape:
        return _flatten_dynamic(x, shape, axis)
    return P.reshape(x, shape=[int(np.prod(shape[:axis], dtype=np.int64)),
                               int(np.prod(shape[axis:], dtype=np.int64))])


def _flatten_dynamic(x, shape, axis):
    head, tail = shape[:axis], shape[axis:]
    if None not in head:
        return P.reshape_to(x, np.array([int(np.prod(head, dtype=np.int64)), -1], np.int64))
    if None not in tail:
        return P.reshape_to(x, np.array([-1, int(np.prod(tail, dtype=np.int64))], np.int64))
    lead = P.prod(P.slice(P.shape(x), begin=[0], size=[axis]), axis=[0], keepdims=True)
    return P.reshape_to(x, P.concat([lead, np.array([-1], np.int64)], axis=0))


@converter("Concat", (1, 4, 11, 13), {"axis": INT})
def _concat(n):
    if not n.has_attr("axis") and n.version > 1:
        raise n.fail("attribute 'axis' is required")
    vals = n.inputs()
    rank = len(shape_of(vals[0]))
    axis = n.axis(n.attr("axis", 1), rank)
    if len(vals) == 1:  # exporters' key/value cache with no past (GPT-2): the input itself, no copy
        return vals[0]
    return P.concat(vals, axis=axis)


def _squeeze_axes(n):
    if n.version < 13:
        return n.attr("axes")
    return n.static_ints(1, "axes") if n.has(1) else None


@converter("Squeeze", (1, 11, 13, 21, 23, 24, 25), {"axes": INTS})
def _squeeze(n):
    x = n.input(0)
    shape = shape_of(x)
    axes = _squeeze_axes(n)
    if axes is None:
        keep = [d for d in shape if d != 1]
    else:
        axes = {n.axis(a, len(shape), "axes entry") for a in axes}
        for a in axes:
            if shape[a] not in (1, None):
                raise n.fail(f"cannot squeeze axis {a} of size {shape[a]} (shape {list(shape)})")
        keep = [d for i, d in enumerate(shape) if i not in axes]
    if None in keep or (axes is not None and None in shape):
        # An unknown dim squeezed must be 1 at run time: ReshapeTo's element count checks it.
        return reshape_spec(x, [("d", i) for i in range(len(shape)) if i not in axes])
    return P.reshape(x, shape=keep)


@converter("Unsqueeze", (1, 11, 13, 21, 23, 24, 25), {"axes": INTS})
def _unsqueeze(n):
    x = n.input(0)
    shape = list(shape_of(x))
    axes = _squeeze_axes(n)
    if axes is None:
        raise n.fail("axes are required")
    rank = len(shape) + len(axes)
    norm = sorted(n.axis(a, rank, "axes entry") for a in axes)
    if len(set(norm)) != len(norm):
        raise n.fail(f"axes {axes} repeat an axis")
    spec = [("d", i) for i in range(len(shape))]
    for a in norm:
        spec.insert(a, 1)
        shape.insert(a, 1)
    if None in shape:
        return reshape_spec(x, spec)
    return P.reshape(x, shape=shape)


@converter("Slice", (1, 10, 11, 13), {"starts": INTS, "ends": INTS, "axes": INTS})
def _slice(n):
    x = n.input(0)
    shape = shape_of(x)
    dyn = {}
    if n.version == 1:  # attributes, no steps
        if not (n.has_attr("starts") and n.has_attr("ends")):
            raise n.fail("attributes 'starts' and 'ends' are required")
        starts, ends = n.attr("starts"), n.attr("ends")
        axes = n.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        if n.node.attribute:
            raise n.fail("starts, ends and axes are inputs since opset 10, not attributes")
        starts, dyn["starts"] = ints_or_tensor(n, 1, "starts")
        ends, dyn["ends"] = ints_or_tensor(n, 2, "ends")
        axes, dyn["axes"] = ints_or_tensor(n, 3, "axes") if n.has(3) else (None, None)
        steps, dyn["steps"] = ints_or_tensor(n, 4, "steps") if n.has(4) else (None, None)
    count = len(starts) if starts is not None else shape_of(dyn["starts"])[0]
    axes = list(range(count)) if axes is None and dyn.get("axes") is None else axes
    steps = [1] * count if steps is None and dyn.get("steps") is None else steps
    if any(v is not None for v in dyn.values()) or None in shape or any(st != 1 for st in steps):
        # Bounds known at run time, unknown dims, or strides: StridedSlice,
        # which clamps and counts from the end as ONNX does.
        parts = [dyn.get(w) if dyn.get(w) is not None else int64_tensor(v)
                 for w, v in (("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps))]
        return P.strided_slice(x, *parts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise n.fail("starts, ends, axes and steps must have one entry each per sliced axis")
    begin, size = [0] * len(shape), list(shape)
    seen = set()
    for s, e, a in zip(starts, ends, axes):
        a = n.axis(a, len(shape), "axes entry")
        if a in seen:
            raise n.fail(f"axis {a} is sliced twice")
        seen.add(a)
        d = shape[a]
        s = min(max(s + d if s < 0 else s, 0), d)
        e = min(max(e + d if e < 0 else e, 0), d)
        begin[a], size[a] = s, max(e - s, 0)
    return P.slice(x, begin=begin, size=size)


def _cast_to(n):
    if not n.has_attr("to"):
        raise n.fail("attribute 'to' is required")
    # saturate and round_mode only affect float8/float4 targets, which opforge lacks.
    return _dtypes.to_numpy(n.attr("to"), f"onnx: node {n.where}: attribute 'to'")


@converter("Cast", (6, 9, 13, 19, 21, 23, 24, 25, 28), {"to": INT, "saturate": INT, "round_mode": STRING},
           check=_cast_to)
def _cast(n):
    return P.cast(n.input(0), dtype=_cast_to(n))


@converter("Shape", (1, 13, 15, 19, 21, 23, 24, 25), {"start": INT, "end": INT})
def _shape(n):
    x = n.input(0)
    shape = shape_of(x)
    r = len(shape)
    start, end = n.attr("start", 0), n.attr("end", r)
    start = min(max(start + r if start < 0 else start, 0), r)
    end = min(max(end + r if end < 0 else end, 0), r)
    if None in shape[start:end]:  # a symbolic dim: computed when the graph runs
        s = P.shape(x)
        return s if (start, end) == (0, r) else P.slice(s, begin=[start], size=[max(end - start, 0)])
    return np.array(shape[start:end], dtype=np.int64)


@converter("Constant", (1, 9, 11, 12, 13, 19, 21, 23, 24, 25),
           {"value": TENSOR, "value_float": FLOAT, "value_floats": FLOATS,
            "value_int": INT, "value_ints": INTS}, check=lambda n: _constant(n))
def _constant(n):
    if len(n.node.attribute) != 1:
        raise n.fail("exactly one value attribute is required")
    a = n.node.attribute[0]
    if a.name == "value":
        return _validate.tensor_to_numpy(a.t, f"node {n.where} value")
    if a.name == "value_float":
        return np.array(a.f, dtype=np.float32)
    if a.name == "value_floats":
        return np.array(list(a.floats), dtype=np.float32)
    if a.name == "value_int":
        return np.array(a.i, dtype=np.int64)
    return np.array(list(a.ints), dtype=np.int64)
