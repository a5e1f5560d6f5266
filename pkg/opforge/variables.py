"""Variables: state that lives across op calls (TensorFlow 1's ``tf.Variable``).

    v = of.Variable(np.zeros(3, np.float32), name="w")

Inside ``with graph.as_default():`` a variable is a graph tensor (its read)
whose value lives in each ``Session`` that runs the graph (one value per
Session, as TensorFlow 1): run ``of.global_variables_initializer()`` (or
``v.initializer``) first; reading it before is a FailedPreconditionError
naming it. ``v.assign(x)``, ``assign_add``, ``assign_sub`` add update nodes;
``read_value()`` adds a read ordered after the updates built before it.

Outside graphs (eager mode) the value lives in the process: ``v`` is used in
ops as its leaf tensor (``v.trainable`` sets ``requires_grad``, so the tape
and ``backward`` reach it), and the update methods change it at once.

The state ops (AssignVariable, ReadVariable, ...) are in
``cpp/ops/state_ops.cc``; the engine runs the ops naming one variable in the
order they were built (cpp/framework/graph.h).
"""

import contextlib
import importlib
import itertools
import threading
import weakref
from typing import Any

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge.graph._graph import Operation, SymbolicTensor, _default_stack, get_default_graph
from opforge.tensor import Tensor

# The operators; private, so not in tensor.pyi (and opforge.tensor, the
# attribute, is the of.tensor factory: the module is read from sys.modules).
_TensorMethods: Any = getattr(importlib.import_module("opforge.tensor"), "_TensorMethods")


def _ops():
    from opforge.ops import raw_ops
    return raw_ops


def _in_graph():
    return bool(_default_stack())


# -- graph bookkeeping --------------------------------------------------------

def _graph_state(graph):
    state = graph.__dict__.get("_state")
    if state is None:
        state = graph.__dict__.setdefault("_state", {"variables": [], "trainable": []})
    return state


@contextlib.contextmanager
def _no_control_deps(graph):
    saved = _pw.graph_control_deps(graph._handle)
    _pw.graph_set_control_deps(graph._handle, [])
    try:
        yield
    finally:
        _pw.graph_set_control_deps(graph._handle, saved)


def _as_ops(items, what):
    out = []
    for item in items:
        if isinstance(item, Operation):
            out.append(item)
        elif isinstance(item, SymbolicTensor):
            out.append(item.op)
        elif isinstance(item, Variable):
            raise _errors.InvalidArgumentError(
                f"{what}: got variable '{item.name}'; pass an operation or tensor (its .initializer, an update)")
        else:
            raise _errors.InvalidArgumentError(
                f"{what}: expected graph operations or tensors, got {type(item).__name__}")
    return out


@contextlib.contextmanager
def control_dependencies(control_inputs):
    """Ops built inside run after `control_inputs` (operations or tensors of
    the default graph): ``tf.control_dependencies``. Nests (adding to the
    outer ones); ``None`` clears them. In eager mode it does nothing (ops run
    in program order)."""
    if not _in_graph():
        yield
        return
    g = get_default_graph()
    saved = _pw.graph_control_deps(g._handle)
    if control_inputs is None:
        new = []
    else:
        ops = _as_ops(control_inputs, "control_dependencies")
        for op in ops:
            if op.graph is not g:
                raise _errors.InvalidArgumentError(
                    f"control_dependencies: '{op.name}' is not in the default graph")
        new = saved + [op._id for op in ops]
    _pw.graph_set_control_deps(g._handle, new)
    try:
        yield
    finally:
        _pw.graph_set_control_deps(g._handle, saved)


def group(*inputs, name="group"):
    """One operation that runs after all `inputs` (operations or tensors):
    ``tf.group``. Session.run of it returns None."""
    flat = []
    for x in inputs:
        flat.extend(x if isinstance(x, (list, tuple)) else [x])
    if not _in_graph():
        return None
    g = get_default_graph()
    with control_dependencies(flat):
        return g.create_op("Group", {}, name=name).op


# -- the variable classes -------------------------------------------------------

class Variable:
    """``of.Variable(initial_value, name=None, trainable=True, dtype=None)``.

    A graph variable inside ``Graph.as_default()``, else an eager one (see
    the module doc). `initial_value`: an array-like, Tensor, graph tensor or
    a callable returning one (called once).
    """

    __slots__ = ()

    def __new__(cls, initial_value=None, name=None, trainable=True, dtype=None):
        if cls is Variable:
            cls = _GraphVariable if _in_graph() else _EagerVariable
        return object.__new__(cls)

    def assign_sub(self, delta, read_value=True):
        return self._update("AssignSubVariable", delta)

    def assign_add(self, delta, read_value=True):
        return self._update("AssignAddVariable", delta)

    def assign(self, value, read_value=True):
        return self._update("AssignVariable", value)


def _initial_array(initial_value, dtype, what):
    if callable(initial_value):
        initial_value = initial_value()
    if isinstance(initial_value, (SymbolicTensor, Variable)):
        return initial_value
    if isinstance(initial_value, Tensor):
        initial_value = initial_value.numpy()
    arr = np.asarray(initial_value)
    if dtype is not None:
        arr = arr.astype(_dtypes.as_dtype(dtype).as_numpy_dtype, copy=False)
    elif arr.dtype == np.float64 and not isinstance(initial_value, np.ndarray):
        arr = arr.astype(np.float32)  # Python floats: float32, as TensorFlow
    elif arr.dtype.kind == "i" and not isinstance(initial_value, np.ndarray):
        arr = arr.astype(np.int32 if arr.dtype.itemsize <= 4 else np.int64)
    if arr.dtype.name not in ("float32", "float64", "int32", "int64", "bool"):
        raise _errors.InvalidArgumentError(f"{what}: dtype {arr.dtype} is not supported by variables")
    return np.array(arr, copy=True, order="C")


class _GraphVariable(SymbolicTensor, Variable):
    """A graph variable: this tensor is its first read (built with it, so it
    runs before the updates built later); its value lives per Session."""

    __slots__ = ("_var_name", "trainable", "initializer", "_initial")

    def __init__(self, initial_value=None, name=None, trainable=True, dtype=None):
        g = get_default_graph()
        if initial_value is None:
            raise _errors.InvalidArgumentError("Variable: initial_value is required")
        base = name or "Variable"
        with _no_control_deps(g):
            init = _initial_array(initial_value, dtype, f"Variable '{base}'")
            if isinstance(init, SymbolicTensor):
                if init.graph is not g:
                    raise _errors.InvalidArgumentError(f"Variable '{base}': initial_value is of another graph")
                if any(d is None for d in init.shape):
                    raise _errors.InvalidArgumentError(
                        f"Variable '{base}': initial_value has unknown dims {init.shape}; variables need a known shape")
                if dtype is not None and _dtypes.as_dtype(dtype) != init.dtype:
                    init = _ops().cast(init, _dtypes.as_dtype(dtype))
            var_name = g.unique_name(base)
            self._var_name = var_name
            self.trainable = bool(trainable)
            self._initial = init
            assign = g.create_op("AssignVariable", {"value": init}, {"var": var_name}, name=var_name + "/Assign")
            self.initializer = assign.op
            d = assign.dtype
            read = g.create_op("ReadVariable", {}, {"var": var_name, "dtype": d, "shape": list(assign.shape)},
                               name=var_name + "/read")
        SymbolicTensor.__init__(self, g, read._node, 0)
        g._out_views[read._node] = (self,)  # the read's view is this variable
        state = _graph_state(g)
        state["variables"].append(self)
        if self.trainable and d.as_numpy_dtype.kind == "f":
            state["trainable"].append(self)

    @property
    def name(self):
        return self._var_name

    @property
    def initial_value(self):
        return self._initial

    def value(self):
        return self

    def read_value(self):
        """A new read, ordered after the updates of this variable built so far."""
        return self.graph.create_op("ReadVariable", {},
                                    {"var": self._var_name, "dtype": self.dtype, "shape": list(self.shape)},
                                    name=self._var_name + "/read")

    def _update(self, op_type, value):
        g = self.graph
        with g.as_default():
            if not isinstance(value, SymbolicTensor):
                value = np.asarray(value, dtype=self.dtype.as_numpy_dtype)
            return g.create_op(op_type, {"value" if op_type == "AssignVariable" else "delta": value},
                               {"var": self._var_name}, name=f"{self._var_name}/{op_type}")

    def load(self, value, session):
        """Sets the value in `session` (TensorFlow 1's Variable.load)."""
        session.run(self.assign(value))

    def eval(self, session):
        return session.run(self)

    def __repr__(self):
        return f"<opforge.Variable '{self._var_name}' shape={self.shape} dtype={self.dtype.name} (graph)>"

    __str__ = __repr__


_eager_names = itertools.count()
_eager_lock = threading.Lock()
_eager_live: "weakref.WeakValueDictionary[int, Variable]" = weakref.WeakValueDictionary()  # creation number -> variable


def _eager_unique(base):
    taken = {name for name, _ in _pw.resources_list(None)}
    with _eager_lock:
        if base not in taken and not any(v._var_name == base for v in list(_eager_live.values())):
            return base
        while True:
            name = f"{base}_{next(_eager_names) + 1}"
            if name not in taken:
                return name


class _EagerVariable(_TensorMethods, Variable):
    """An eager variable: a leaf Tensor (``_value``) that ops take in its
    place, sharing memory with the variable of the process's resource manager."""

    __slots__ = ("_value", "_var_name", "trainable", "_order")
    __array_priority__ = 100

    def __init__(self, initial_value=None, name=None, trainable=True, dtype=None):
        if initial_value is None:
            raise _errors.InvalidArgumentError("Variable: initial_value is required")
        arr = _initial_array(initial_value, dtype, f"Variable '{name or 'Variable'}'")
        if isinstance(arr, (SymbolicTensor, Variable)):
            raise _errors.InvalidArgumentError(
                "Variable: a graph tensor or variable as the initial value of an eager variable; "
                "build the variable inside the graph's as_default()")
        self._var_name = _eager_unique(name or "Variable")
        self.trainable = bool(trainable)
        leaf = _pw.to_tensor(arr, None)
        _ops().assign_variable(var=self._var_name, value=leaf, alias=True)  # adopts the leaf's memory
        if self.trainable and arr.dtype.kind == "f":
            leaf.requires_grad = True
        self._value = leaf
        with _eager_lock:
            self._order = next(_eager_names)
            _eager_live[self._order] = self
        weakref.finalize(self, _pw.resources_delete, None, self._var_name)

    @property
    def name(self):
        return self._var_name

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def shape(self):
        return self._value.shape

    @property
    def ndim(self):
        return self._value.ndim

    grad = property(lambda self: self._value.grad, lambda self, g: setattr(self._value, "grad", g))
    initializer = None  # initialized when made

    def numpy(self):
        return self._value.numpy()

    def value(self):
        return self._value

    def read_value(self):
        """A copy of the current value (later updates do not change it)."""
        return _ops().read_variable(var=self._var_name, dtype=self.dtype, shape=list(self.shape))

    def _update(self, op_type, value):
        from opforge.autodiff import no_grad
        key = "value" if op_type == "AssignVariable" else "delta"
        if not isinstance(value, Tensor):
            value = np.asarray(value, dtype=self.dtype.as_numpy_dtype)
        fn = {"AssignVariable": _ops().assign_variable, "AssignAddVariable": _ops().assign_add_variable,
              "AssignSubVariable": _ops().assign_sub_variable}[op_type]
        with no_grad():
            return fn(**{key: value}, var=self._var_name)

    def __getattr__(self, attr):  # Tensor methods (reshape, sum, ...) on the leaf
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self._value, attr)

    def __repr__(self):
        return f"<opforge.Variable '{self._var_name}' shape={self.shape} dtype={self.dtype.name} numpy={self.numpy()!r}>"


_pw.variable_init(_EagerVariable)


# -- collections and initializers ---------------------------------------------

def global_variables(graph=None):
    """Variables of `graph` (default: the default graph); in eager mode, the live eager ones."""
    if graph is None and not _in_graph():
        return [_eager_live[k] for k in sorted(_eager_live.keys())]
    return list(_graph_state(graph or get_default_graph())["variables"])


def trainable_variables(graph=None):
    """The trainable float variables, in creation order (``tf.trainable_variables``)."""
    if graph is None and not _in_graph():
        return [v for v in global_variables() if v.trainable and v.dtype.as_numpy_dtype.kind == "f"]
    return list(_graph_state(graph or get_default_graph())["trainable"])


def variables_initializer(var_list, name="init"):
    """One op running the initializers of `var_list` (None in eager mode, where variables start initialized)."""
    if not _in_graph():
        return None
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer():
    """One op that initializes every variable of the default graph (``tf.global_variables_initializer``)."""
    if not _in_graph():
        return None
    return variables_initializer(global_variables(), name="init")


__all__ = ["Variable", "control_dependencies", "group", "global_variables", "trainable_variables",
           "variables_initializer", "global_variables_initializer"]
