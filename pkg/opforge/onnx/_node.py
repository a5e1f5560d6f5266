"""The operator map's registry and the view of one node a converter gets.

A converter turns one ONNX node into calls of opforge's op wrappers, so the
same code computes eagerly (of.onnx.run) or adds graph nodes (import_model
inside a Graph). Each declares the schema versions and attributes it
implements; anything else raises UnimplementedError naming the node before
any node runs, never a guess.
"""

import numpy as np

from opforge.errors import InvalidArgumentError, OpError, UnimplementedError
from opforge.onnx import _validate

# AttributeProto.AttributeType values.
FLOAT, INT, STRING, TENSOR, FLOATS, INTS = 1, 2, 3, 4, 6, 7
_KIND_NAMES = {FLOAT: "float", INT: "int", STRING: "string", TENSOR: "tensor", FLOATS: "floats", INTS: "ints"}

CONVERTERS: dict = {}  # op_type -> Converter


class Converter:
    __slots__ = ("op_type", "versions", "attrs", "fn", "check")

    def __init__(self, op_type, versions, attrs, fn, check):
        self.op_type, self.versions, self.attrs, self.fn = op_type, frozenset(versions), attrs, fn
        self.check = check


def converter(op_type, versions, attrs=None, check=None):
    """Registers fn(node_ctx) -> output value or tuple of them for op_type.

    versions: the schema since_versions whose semantics fn implements exactly.
    attrs: attribute name -> kind (INT, FLOAT, ...) that fn reads.
    check: check(node_ctx) raising for attribute values fn does not
    implement; runs at import, before any node runs (the ctx has no inputs).
    """
    def register(fn):
        CONVERTERS[op_type] = Converter(op_type, versions, dict(attrs or {}), fn, check)
        return fn
    return register


def schema_version(op_type, opset):
    """since_version of the op's schema in effect at this opset, or None if unknown."""
    import onnx.defs
    try:
        return onnx.defs.get_schema(op_type, opset, "").since_version
    except (onnx.defs.SchemaError, TypeError):  # TypeError: a name that is not UTF-8 (protobuf gives bytes)
        return None


def check_supported(node, opset, index=None):
    """Raises UnimplementedError unless the map implements this node as written."""
    where = _validate.describe(node, index)
    if node.domain not in ("", "ai.onnx"):
        raise UnimplementedError(f"onnx: node {where}: operator domain {node.domain!r} is not supported")
    conv = CONVERTERS.get(node.op_type)
    if conv is None:
        raise UnimplementedError(f"onnx: node {where}: operator {node.op_type} is not supported by opforge")
    version = schema_version(node.op_type, opset)
    if version not in conv.versions:
        raise UnimplementedError(
            f"onnx: node {where}: {node.op_type} as of opset {opset} (schema version {version}) is not "
            f"supported; opforge implements versions {sorted(conv.versions)}")
    for a in node.attribute:
        if a.name == "consumed_inputs":  # opset-1 memory hint, no effect on results
            continue
        kind = conv.attrs.get(a.name)
        if kind is None:
            raise UnimplementedError(f"onnx: node {where}: attribute {a.name!r} of {node.op_type} "
                                     "is not supported")
        if a.ref_attr_name:
            raise UnimplementedError(f"onnx: node {where}: attribute {a.name!r} refers to a function attribute")
        if a.type != kind:
            raise InvalidArgumentError(f"onnx: node {where}: attribute {a.name!r} must be "
                                       f"{_KIND_NAMES[kind]}, got attribute type {a.type}")
    return conv, version


class NodeCtx:
    """One node as its converter sees it: inputs by position, attrs by name.

    Built once per node at import; `bind` makes the per-run view (cheap, and
    each run gets its own, so one model can run in several threads).
    """

    __slots__ = ("node", "version", "where", "_attrs", "_inputs", "_env", "_consts", "partials")

    def __init__(self, node, version, env, index=None, consts=None):
        self.node, self.version, self._env = node, version, env
        self._consts = consts or {}  # name -> numpy value known at import (graph mode's initializers)
        self.partials = {}  # name -> what is known of a run-time shape tensor (_shape_values.propagate)
        self.where = _validate.describe(node, index)
        self._attrs = {a.name: a for a in node.attribute}
        self._inputs = list(node.input)

    def bind(self, env, consts=None, partials=None):
        ctx = NodeCtx.__new__(NodeCtx)
        ctx.node, ctx.version, ctx.where, ctx._attrs, ctx._inputs = (
            self.node, self.version, self.where, self._attrs, self._inputs)
        ctx._env, ctx._consts, ctx.partials = env, consts or {}, partials if partials is not None else {}
        return ctx

    # -- inputs ------------------------------------------------------------
    @property
    def num_inputs(self):
        return len(self._inputs)

    def has(self, i):
        return i < len(self._inputs) and bool(self._inputs[i])

    def input(self, i):
        if not self.has(i):
            raise InvalidArgumentError(f"onnx: node {self.where}: required input {i} is missing")
        return self._env[self._inputs[i]]

    def inputs(self):
        return [self.input(i) for i in range(len(self._inputs))]

    def known(self, i):
        """An input's numpy value when the graph holds it as a constant, else None."""
        return self._consts.get(self._inputs[i]) if self.has(i) else None

    def static(self, i, what):
        """An input's value as a numpy array; it must be known without running the graph."""
        v = self.known(i)
        if v is not None:
            return v
        v = self.input(i)
        if isinstance(v, np.ndarray):
            return v
        try:
            return np.asarray(v.numpy())
        except (OpError, TypeError, RuntimeError, ValueError, AttributeError):
            raise UnimplementedError(
                f"onnx: node {self.where}: input {what!r} must be a constant (an initializer or a "
                "Constant node) to import into a graph") from None

    def static_ints(self, i, what):
        a = self.static(i, what)
        if a.dtype.kind not in "iu" or a.ndim > 1:
            raise InvalidArgumentError(f"onnx: node {self.where}: input {what!r} must be a 1-D int tensor, "
                                       f"got {a.dtype} of shape {list(a.shape)}")
        return [int(x) for x in a.reshape(-1)]

    # -- attributes -------------------------------------------------------
    def attr(self, name, default=None):
        a = self._attrs.get(name)
        if a is None:
            return default
        if a.type == INT:
            return a.i
        if a.type == FLOAT:
            return a.f
        if a.type == INTS:
            return list(a.ints)
        if a.type == FLOATS:
            return list(a.floats)
        if a.type == STRING:
            try:
                return a.s.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidArgumentError(f"onnx: node {self.where}: attribute {name!r} is not UTF-8") from None
        return a.t

    def has_attr(self, name):
        return name in self._attrs

    def fail(self, message, cls=InvalidArgumentError):
        return cls(f"onnx: node {self.where}: {message}")

    def axis(self, axis, rank, what="axis"):
        """Normalizes a possibly negative axis against rank, or raises naming the attribute."""
        if not -rank <= axis < max(rank, 1):
            raise self.fail(f"{what} {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis


def dtype_of(v):
    return v.dtype if isinstance(v, np.ndarray) else v.dtype.as_numpy_dtype


def shape_of(v):
    """Static dims; None for a dim known only at run time (a symbolic input dim)."""
    return tuple(None if d is None else int(d) for d in v.shape)
