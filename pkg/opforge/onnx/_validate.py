"""Checks on a model from outside, before any of it runs.

A model file is hostile until checked: bytes that do not parse, a graph with
a cycle or a dangling name, element types opforge lacks, dims that are
negative or whose product overflows, and initializers whose data does not
match their shape all raise here, naming what is wrong, so no kernel ever
sees them and nothing is allocated from a size the file merely claims.
"""

import os

import numpy as np

from opforge.errors import InvalidArgumentError, UnimplementedError
from opforge.onnx import _dtypes

# Element counts are computed with Python ints; anything above this cannot be
# a real tensor (2**40 float32 elements is 4 TiB) and is refused before use.
MAX_ELEMENTS = 1 << 40


def load(model_or_path):
    """A ModelProto from a ModelProto, bytes or a path; parse errors are InvalidArgumentError."""
    import onnx
    from google.protobuf.message import DecodeError
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    if isinstance(model_or_path, (bytes, bytearray, memoryview)):
        data, what = bytes(model_or_path), "model bytes"
    elif isinstance(model_or_path, (str, os.PathLike)):
        what = os.fspath(model_or_path)
        try:
            with open(what, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InvalidArgumentError(f"onnx: cannot read model file {what!r}: {e}") from None
    else:
        raise InvalidArgumentError(
            f"onnx: model_or_path must be an onnx.ModelProto, bytes or a path, "
            f"not {type(model_or_path).__name__}")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise InvalidArgumentError(f"onnx: {what} is not a valid ONNX model (truncated or corrupt): {e}") from None
    if not model.HasField("graph"):
        raise InvalidArgumentError(f"onnx: {what} has no graph (not an ONNX model, or truncated)")
    return model


def default_opset(model):
    """The model's version of the default ('' / 'ai.onnx') operator set."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise InvalidArgumentError("onnx: the model imports no version of the default operator set")
    if len(versions) > 1 or not 1 <= versions[0] <= 1000:
        raise InvalidArgumentError(f"onnx: invalid default opset import {versions}")
    return versions[0]


def element_count(dims, what):
    """Product of dims, checked: non-negative, no overflow past MAX_ELEMENTS."""
    n = 1
    for d in dims:
        if d < 0:
            raise InvalidArgumentError(f"onnx: {what} has a negative dim {d} in {list(dims)}")
        n *= d
        if n > MAX_ELEMENTS:
            raise InvalidArgumentError(
                f"onnx: {what} has dims {list(dims)} whose product overflows the {MAX_ELEMENTS}-element limit")
    return n


def tensor_to_numpy(t, what):
    """A TensorProto's value as a read-only numpy array, after checking its size against its shape."""
    a = _tensor_to_numpy(t, what)
    a.flags.writeable = False  # the model's weights: shared, never modified
    return a


def _tensor_to_numpy(t, what):
    if t.data_location == 1 or len(t.external_data):
        raise UnimplementedError(f"onnx: {what} keeps its data in an external file; "
                                 "opforge only reads weights stored inside the model")
    if t.HasField("segment"):
        raise UnimplementedError(f"onnx: {what} is a segmented tensor")
    dtype = _dtypes.to_numpy(t.data_type, f"onnx: {what}")
    dims = tuple(t.dims)
    n = element_count(dims, what)
    if t.HasField("raw_data"):
        if len(t.raw_data) != n * dtype.itemsize:
            raise InvalidArgumentError(
                f"onnx: {what} has shape {list(dims)} ({n} elements of {dtype}) but "
                f"{len(t.raw_data)} bytes of data; expected {n * dtype.itemsize}")
        if t.data_type == _dtypes.BOOL:  # any nonzero byte is True; never a bool byte other than 0/1
            return (np.frombuffer(t.raw_data, dtype=np.uint8) != 0).reshape(dims)
        return np.frombuffer(t.raw_data, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(dims)
    field = getattr(t, _dtypes.TYPED_FIELD[t.data_type])
    if len(field) != n:
        raise InvalidArgumentError(
            f"onnx: {what} has shape {list(dims)} ({n} elements) but {len(field)} values")
    return _dtypes.from_typed_field(t.data_type, field, dtype).reshape(dims)


def value_info_type(vi, what, allow_untyped=False):
    """(numpy dtype, dims) of a graph input/output; a dim is an int or None (symbolic).

    allow_untyped: an output may leave its type out (dtype None: not checked).
    """
    if allow_untyped and not vi.type.HasField("tensor_type") and not vi.type.HasField("sequence_type"):
        return None, None
    if not vi.type.HasField("tensor_type"):
        raise UnimplementedError(f"onnx: {what} {vi.name!r} is not a tensor (sequences, maps and "
                                 "optionals are not supported)")
    tt = vi.type.tensor_type
    if allow_untyped and tt.elem_type == 0:
        return None, None
    dtype = _dtypes.to_numpy(tt.elem_type, f"onnx: {what} {vi.name!r}")
    if not tt.HasField("shape"):
        return dtype, None
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        else:
            dims.append(None)
    element_count([d for d in dims if d is not None], f"{what} {vi.name!r}")
    return dtype, tuple(dims)


def check_graph(graph, known_names=()):
    """Checks names (SSA, no dangling input) and returns the nodes in a topological order.

    known_names: names defined before the graph runs (inputs, initializers).
    Kahn's algorithm, so a cycle is reported instead of recursing or hanging.
    """
    produced = {}
    defined = set(known_names)
    for i, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            if out in defined or out in produced:
                raise InvalidArgumentError(
                    f"onnx: node {describe(node, i)} defines {out!r}, which is already defined "
                    "(each value must be assigned once)")
            produced[out] = i
    waiting = []
    consumers = {}
    for i, node in enumerate(graph.node):
        deps = set()
        for name in list(node.input) + outer_names(node):  # If/Loop/Scan bodies read outer values too
            if not name or name in defined:
                continue
            if name not in produced:
                raise InvalidArgumentError(
                    f"onnx: node {describe(node, i)} reads {name!r}, which no node, input or "
                    "initializer defines")
            deps.add(produced[name])
        waiting.append(len(deps))
        for d in deps:
            consumers.setdefault(d, []).append(i)
    order = [i for i, w in enumerate(waiting) if w == 0]
    for i in order:  # grows while iterating
        for c in consumers.get(i, ()):
            waiting[c] -= 1
            if waiting[c] == 0:
                order.append(c)
    if len(order) != len(graph.node):
        stuck = [describe(graph.node[i], i) for i, w in enumerate(waiting) if w > 0][:5]
        raise InvalidArgumentError(f"onnx: the graph has a cycle through node(s) {', '.join(stuck)}")
    for out in graph.output:
        if out.name not in defined and out.name not in produced:
            raise InvalidArgumentError(f"onnx: graph output {out.name!r} is never defined")
    return [graph.node[i] for i in order]


def outer_names(node):
    """Names a node's subgraphs (If/Loop/Scan bodies) read from the enclosing scopes."""
    names = []
    for a in node.attribute:
        for g in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):  # GRAPH, GRAPHS
            local = {v.name for v in g.input} | {t.name for t in g.initializer}
            for sub in g.node:
                local.update(o for o in sub.output if o)
            for sub in g.node:
                names += [x for x in list(sub.input) + outer_names(sub) if x and x not in local]
    return names


def describe(node, index=None):
    name = node.name or (f"#{index}" if index is not None else "<unnamed>")
    return f"{name!r} ({node.op_type})"
