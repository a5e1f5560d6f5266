"""Graphs: nodes added by the wrappers' hook, static shapes from C++.

Inside ``with g.as_default():`` every op call (built-in, from
load_op_library, or a Tensor operator) adds a node instead of running; its
dtypes and shapes come from the op's C++ shape function, so a bad call
raises its usual error at once, naming the node and the line that built it.

Unknown dimensions (``placeholder(dtype, [None, 784])``) are unknown (-1)
in the C++ graph, and the shape functions take them as unknown
(TensorFlow's InferenceContext::UnknownDim): an output dim that depends on
one is unknown (None) too. Session.run checks a feed against the known
dims, then re-infers every shape from the fed ones before any kernel runs.

Graph, Operation and SymbolicTensor are views: a graph handle, a node id, an
output index. Every fact is read from the C++ graph (cpp/framework/graph.h),
the only store.
"""

import contextlib
import threading

import numpy as np

from opforge import _hooks
from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge.tensor import Tensor as _EagerTensor, _TensorMethods  # type: ignore[attr-defined]  # private: not in tensor.pyi


class Operation:
    """A node: ``type``, ``name``, ``inputs``, ``outputs``, ``get_attr``,
    ``location``: a view of the C++ node (graph handle + node id)."""

    __slots__ = ("graph", "_id", "__weakref__")

    def __init__(self, graph, node_id):
        self.graph, self._id = graph, node_id

    @property
    def type(self):
        return _pw.graph_node(self.graph._handle, self._id)[0]

    @property
    def name(self):
        return _pw.graph_node(self.graph._handle, self._id)[1]

    @property
    def location(self):
        """file:line of the call that built the node."""
        return _pw.graph_node(self.graph._handle, self._id)[2]

    @property
    def inputs(self):
        g = self.graph
        return tuple(g._tensor(n, i) for n, i in _pw.graph_node_inputs(g._handle, self._id))

    @property
    def outputs(self):
        g = self.graph
        return g._outputs(self._id, _pw.graph_node(g._handle, self._id)[3])

    @property
    def control_inputs(self):
        """The Operations this one runs after without reading them (control_dependencies)."""
        return tuple(self.graph._op(n) for n in _pw.graph_node_control_inputs(self.graph._handle, self._id))

    def _ref(self):
        return (self._id, 0)

    def get_attr(self, name):
        """The attr's value, inferred ones (T, N) and defaults included."""
        try:
            return _pw.graph_node_attrs(self.graph._handle, self._id)[name]
        except KeyError:
            raise _errors.NotFoundError(f"node '{self.name}' ({self.type}) has no attr '{name}'") from None

    def __repr__(self):
        return f"<opforge.Operation '{self.name}' type={self.type}>"


class SymbolicTensor(_TensorMethods):
    """An output of a graph node: static ``shape`` (None for an unknown
    dim) and ``dtype``, no value; a view of (graph, node, output index).

    Values come from ``opforge.Session(graph).run(tensor, feed_dict)``.
    """

    __slots__ = ("graph", "_node", "value_index")
    __hash__ = object.__hash__  # usable as a feed_dict key; == stays element-wise
    _ag = None  # no eager autograd state (gradients in graphs add nodes instead)

    def __init__(self, graph, node, index):
        self.graph, self._node, self.value_index = graph, node, index

    @property
    def op(self):
        return self.graph._op(self._node)

    @property
    def dtype(self):
        return _pw.graph_output(self.graph._handle, self._node, self.value_index)[0]

    @property
    def shape(self):
        return _pw.graph_output(self.graph._handle, self._node, self.value_index)[1]

    @property
    def name(self):
        return f"{_pw.graph_node(self.graph._handle, self._node)[1]}:{self.value_index}"

    @property
    def ndim(self):
        """The rank, None when unknown (a placeholder declared without a shape)."""
        shape = self.shape
        return None if shape is None else len(shape)

    @property
    def size(self):
        shape = self.shape
        return None if shape is None or any(d is None for d in shape) else int(np.prod(shape, dtype=np.int64))

    def _ref(self):
        return (self._node, self.value_index)

    def numpy(self):
        raise _errors.InvalidArgumentError(
            f"tensor '{self.name}' is symbolic (a graph node): it has no value to read. Compute it with "
            f"opforge.Session(graph).run({self.name!r} tensor, feed_dict={{...}}).")

    def __repr__(self):
        return f"<opforge.SymbolicTensor '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    __str__ = __repr__


class Graph:
    """A dataflow graph of opforge ops (see ``as_default`` and ``Session``).

    The C++ graph holds every fact (nodes, names, inputs, attrs, dtypes,
    shapes, locations); this object holds its handle, and the view objects
    handed out so far, so one node always has one Operation and one output
    one SymbolicTensor (``t.op.inputs[0] is x``).
    """

    def __init__(self):
        self._handle = _pw.graph_new()
        self._op_views = {}   # node id -> Operation (views only)
        self._out_views = {}  # node id -> tuple of SymbolicTensor (views only)

    def __repr__(self):
        return f"<opforge.Graph at {id(self):#x}, {_pw.graph_num_nodes(self._handle)} nodes>"

    def unique_name(self, base):
        return _pw.graph_unique_name(self._handle, base)

    def get_operations(self):
        return [self._op(i) for i in range(_pw.graph_num_nodes(self._handle))]

    @contextlib.contextmanager
    def as_default(self):
        """Makes this the default graph of this thread: ops add nodes to it."""
        stack = _default_stack()
        stack.append(self)
        _pw.mode_push("graph", self)  # the C++ mode stack's graph entry (py_graph.cc)
        try:
            yield self
        finally:
            _pw.mode_pop("graph", self)
            stack.pop()

    # -- views --------------------------------------------------------------

    def _op(self, node):
        op = self._op_views.get(node)
        if op is None:
            op = self._op_views.setdefault(node, Operation(self, node))
        return op

    def _outputs(self, node, n):
        outs = self._out_views.get(node)
        if outs is None:
            outs = self._out_views.setdefault(node, tuple(SymbolicTensor(self, node, i) for i in range(n)))
        return outs

    def _tensor(self, node, index):
        outs = self._out_views.get(node)
        if outs is None:
            outs = self._outputs(node, _pw.graph_node(self._handle, node)[3])
        return outs[index]

    def _consumers(self):
        """Operation -> the Operations reading its outputs (once per edge)."""
        return {self._op(n): [self._op(c) for c in cs]
                for n, cs in enumerate(_pw.graph_consumers(self._handle)) if cs}

    # -- building -----------------------------------------------------------

    def _constant(self, value, name=None, location=None):
        location = location or _pw.caller_location()
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value = np.array(value, copy=True)  # later writes must not change the graph
        if not isinstance(value, _EagerTensor):
            value = _pw.to_tensor(value, None)
        node = _pw.graph_constant(self._handle, name or "Const", value, location)
        return self._outputs(node, 1)[0]

    def create_op(self, op_type, inputs, attrs=None, name=None, location=None):
        """Adds a node of a registered op; what the wrappers do in ``as_default``.

        `inputs`: by input-arg name (a list for list args): graph tensors,
        numpy arrays, Tensors or Python scalars (these become constants).
        `attrs`: user attrs by name. Returns the output tensor (a tuple for
        several outputs). Errors name the node and `location` (default: the
        caller's file:line).
        """
        sig = _hooks.signature(op_type)
        missing = [n for n in sig.inputs if n not in inputs]
        if missing:
            raise _errors.InvalidArgumentError(f"{op_type}: missing input '{missing[0]}'")
        return _pw.graph_add_call(self, self._handle, op_type, name or op_type, location,
                                  tuple([inputs[n] for n in sig.inputs]), dict(attrs or {}))


_pw.graph_init(SymbolicTensor)  # the view the C++ graph entry recognizes
_local = threading.local()
_global_default = None


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


def placeholder(dtype, shape=None, name=None):
    """A graph input of `dtype` and `shape`, fed at Session.run: a list of ints,
    None for a dimension known only when fed (``[None, 784]``); no shape
    (None) means unknown rank, as in TensorFlow 1: any shape may be fed, and
    the shapes of what reads it are known only when the graph runs."""
    g = get_default_graph()
    location = _pw.caller_location()
    dtype = _dtypes.as_dtype(dtype)
    if shape is None:
        node = _pw.graph_placeholder(g._handle, name or "Placeholder", dtype, None, location)
        return g._outputs(node, 1)[0]
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise _errors.InvalidArgumentError(
            "placeholder: argument 'shape' must be a list of ints and None (unknown dims), or None (unknown rank)")
    shape = list(shape)
    for d in shape:
        if d is not None and (isinstance(d, bool) or not isinstance(d, (int, np.integer))):
            raise _errors.InvalidArgumentError(
                f"placeholder: argument 'shape' must be a list of ints and None (unknown dims), got {shape}")
    shape = [None if d is None else int(d) for d in shape]
    node = _pw.graph_placeholder(g._handle, name or "Placeholder", dtype, shape, location)
    return g._outputs(node, 1)[0]


def constant(value, dtype=None, name=None):
    """A constant node holding `value` (copied if it is a writable array)."""
    g = get_default_graph()
    location = _pw.caller_location()
    if dtype is not None and not isinstance(value, _EagerTensor):
        value = _pw.to_tensor(np.asarray(value, dtype=_dtypes.as_dtype(dtype).as_numpy_dtype), None)
    return g._constant(value, name, location)
