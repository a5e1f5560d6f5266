"""Graphs: nodes added by the wrappers' hook, static shapes from C++.

Inside ``with g.as_default():`` every op call (built-in, from
load_op_library, or a Tensor operator) adds a node instead of running; its
dtypes and shapes come from the op's C++ shape function, so a bad call
raises its usual error at once, naming the node and the line that built it.

Unknown dimensions (``placeholder(dtype, [None, 784])``): the C++ graph
holds them as a stand-in size (_PROBES[0]) and shape functions run on that;
a node reading one is inferred once more with every unknown dim at a second
size (_PROBES[1]), and output dims that differ between the two are unknown
(None) too. Session.run checks a feed against the known dims, then
re-infers every shape from the fed ones before any kernel runs.
"""

import contextlib
import threading

import numpy as np

from opforge import _bind, _hooks
from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge.tensor import Tensor as _EagerTensor, _TensorMethods


# Two stand-in sizes for unknown dims: odd primes (never 1, so nothing
# broadcasts against them), small enough that rank 8 of them cannot
# overflow an element count. An op must accept both, so a dim that happens
# to equal one of them cannot make a build succeed by accident.
_PROBES = (101, 103)


def _has_unknown(shape):
    return any(d is None for d in shape)


def _probe(shape, size):
    return [size if d is None else d for d in shape]


class Operation:
    """A node: ``type``, ``name``, ``inputs``, ``outputs``, ``get_attr``."""

    __slots__ = ("graph", "type", "name", "inputs", "outputs", "_attrs", "_id", "location")

    def __init__(self, graph, type_, name, node_id, inputs, attrs, location):
        self.graph, self.type, self.name, self._id = graph, type_, name, node_id
        self.inputs, self._attrs, self.location = inputs, attrs, location
        self.outputs = ()

    def get_attr(self, name):
        """The attr's value, inferred ones (T, N) and defaults included."""
        try:
            return self._attrs[name]
        except KeyError:
            raise _errors.NotFoundError(f"node '{self.name}' ({self.type}) has no attr '{name}'") from None

    def __repr__(self):
        return f"<opforge.Operation '{self.name}' type={self.type}>"


class SymbolicTensor(_TensorMethods):
    """An output of a graph node: static ``shape`` and ``dtype``, no value.

    Values come from ``opforge.Session(graph).run(tensor, feed_dict)``.
    """

    __slots__ = ("op", "value_index", "shape", "dtype")
    __hash__ = object.__hash__  # usable as a feed_dict key; == stays element-wise
    _ag = None  # no eager autograd state (gradients in graphs add nodes instead)

    def __init__(self, op, index, dtype, shape):
        self.op, self.value_index, self.dtype, self.shape = op, index, dtype, tuple(shape)

    @property
    def name(self):
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self):
        return self.op.graph

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return None if _has_unknown(self.shape) else int(np.prod(self.shape, dtype=np.int64))

    def _ref(self):
        return (self.op._id, self.value_index)

    def numpy(self):
        raise _errors.InvalidArgumentError(
            f"tensor '{self.name}' is symbolic (a graph node): it has no value to read. Compute it with "
            f"opforge.Session(graph).run({self.name!r} tensor, feed_dict={{...}}).")

    def __repr__(self):
        return f"<opforge.SymbolicTensor '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    __str__ = __repr__


class Graph:
    """A dataflow graph of opforge ops (see ``as_default`` and ``Session``)."""

    def __init__(self):
        self._handle = _pw.graph_new()
        self._names = {}
        self._ops = []
        self._lock = threading.Lock()

    def unique_name(self, base):
        with self._lock:
            n = self._names.get(base, 0)
            self._names[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def get_operations(self):
        return list(self._ops)

    @contextlib.contextmanager
    def as_default(self):
        """Makes this the default graph of this thread: ops add nodes to it."""
        stack = _default_stack()
        stack.append(self)
        try:
            with _hooks.installed(self._hook):
                yield self
        finally:
            stack.pop()

    # -- building -----------------------------------------------------------

    def _new_op(self, type_, name, node_id, inputs, dtypes, shapes, attrs, location):
        op = Operation(self, type_, name, node_id, inputs, attrs, location)
        op.outputs = tuple(SymbolicTensor(op, i, d, s) for i, (d, s) in enumerate(zip(dtypes, shapes)))
        self._ops.append(op)
        return op

    def _constant(self, value, name=None, location=None):
        location = location or _bind.caller_location()
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value = np.array(value, copy=True)  # later writes must not change the graph
        if not isinstance(value, _EagerTensor):
            value = _pw.to_tensor(value, None)
        name = self.unique_name(name or "Const")
        node = _pw.graph_constant(self._handle, name, value, location)
        return self._new_op("Const", name, node, [], [value.dtype], [value.shape], {"dtype": value.dtype,
                                                                                   "value": value},
                            location).outputs[0]

    def _hook(self, call):
        return self.create_op(call.op_type, call.inputs, call.attrs, location=_bind.caller_location())

    def create_op(self, op_type, inputs, attrs=None, name=None, location=None):
        """Adds a node of a registered op; what the wrappers do in ``as_default``.

        `inputs`: by input-arg name (a list for list args): graph tensors,
        numpy arrays, Tensors or Python scalars (these become constants).
        `attrs`: user attrs by name. Returns the output tensor (a tuple for
        several outputs). Errors name the node and `location` (default: the
        caller's file:line).
        """
        location = location or _bind.caller_location()
        attrs = dict(attrs or {})

        def typed(v):
            return v.dtype if isinstance(v, SymbolicTensor) else _bind.dtype_of(v)

        def convert(v, label):
            if isinstance(v, SymbolicTensor):
                if v.graph is not self:
                    raise _errors.InvalidArgumentError(
                        f"{op_type}: argument '{label}' is tensor '{v.name}' of another graph")
                return v
            return self._constant(v, location=location)

        bound = _bind.bind(op_type, inputs, attrs, typed, convert)
        refs = tuple([t._ref() for t in b] if isinstance(b, list) else b._ref() for b in bound)
        name = self.unique_name(name or op_type)
        flat = [t for b in bound for t in (b if isinstance(b, list) else [b])]
        unknown = any(_has_unknown(t.shape) for t in flat)
        try:
            node, dtypes, shapes, completed = _pw.graph_add_op(self._handle, op_type, name, location, refs, attrs)
            if unknown:
                shapes = _unknown_dims(op_type, bound, attrs, shapes)
        except _errors.OpError as e:
            if not unknown:
                raise
            raise type(e)(f"{e} (an unknown dimension (None) must work at any size: shapes are inferred with "
                          f"{_PROBES[0]} and {_PROBES[1]} standing in for it)") from None
        op = self._new_op(op_type, name, node, flat, dtypes, shapes, completed, location)
        return op.outputs[0] if len(op.outputs) == 1 else op.outputs


_local = threading.local()
_global_default = None


def _unknown_dims(op_type, bound, attrs, shapes):
    # The node inferred again with the unknown dims at the second probe:
    # output dims that moved depend on them.
    specs = tuple([(t.dtype, _probe(t.shape, _PROBES[1])) for t in b] if isinstance(b, list)
                  else (b.dtype, _probe(b.shape, _PROBES[1])) for b in bound)
    _, other, _ = _pw.infer(op_type, specs, attrs)
    return [tuple(None if a != b else a for a, b in zip(s1, s2)) if len(s1) == len(s2) else s1
            for s1, s2 in zip(shapes, other)]


def _default_stack():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def get_default_graph():
    """This thread's default graph (the innermost ``as_default``), else a
    process-wide graph created on first use."""
    global _global_default
    stack = _default_stack()
    if stack:
        return stack[-1]
    if _global_default is None:
        _global_default = Graph()
    return _global_default


def placeholder(dtype, shape, name=None):
    """A graph input of `dtype` and `shape`, fed at Session.run: a list of ints,
    None for a dimension known only when fed (``[None, 784]``)."""
    g = get_default_graph()
    location = _bind.caller_location()
    dtype = _dtypes.as_dtype(dtype)
    if shape is None or isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise _errors.InvalidArgumentError(
            "placeholder: argument 'shape' must be a list of ints and None (unknown dims); the rank must be known")
    shape = list(shape)
    for d in shape:
        if d is not None and (isinstance(d, bool) or not isinstance(d, (int, np.integer))):
            raise _errors.InvalidArgumentError(
                f"placeholder: argument 'shape' must be a list of ints and None (unknown dims), got {shape}")
    shape = [None if d is None else int(d) for d in shape]
    name = g.unique_name(name or "Placeholder")
    node = _pw.graph_placeholder(g._handle, name, dtype, _probe(shape, _PROBES[0]), location)
    return g._new_op("Placeholder", name, node, [], [dtype], [tuple(shape)], {"dtype": dtype, "shape": list(shape)},
                     location).outputs[0]


def constant(value, dtype=None, name=None):
    """A constant node holding `value` (copied if it is a writable array)."""
    g = get_default_graph()
    location = _bind.caller_location()
    if dtype is not None and not isinstance(value, _EagerTensor):
        value = _pw.to_tensor(np.asarray(value, dtype=_dtypes.as_dtype(dtype).as_numpy_dtype), None)
    return g._constant(value, name, location)
