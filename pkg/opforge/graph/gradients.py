"""Gradients in a graph: ``gradients(ys, xs)`` adds the gradient nodes.

The same gradient functions as the eager tape (generated from the C++
declarations, or registered in Python) are called on the graph's
Operations by the same backward sweep (autodiff/sweep.py); they call the op
wrappers, which add nodes inside ``graph.as_default()``.
"""

from opforge import errors as _errors
from opforge.autodiff import sweep as _sweep


def _as_list(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _is_float(t):
    return t.dtype.is_floating


class _GraphAdapter(_sweep.Adapter):
    """A graph as the sweep reads it: values are SymbolicTensors, nodes the
    Operations between xs and ys; an input needs a gradient when its
    producer lies on a path from xs and it is floating-point."""

    strict = False  # a graph gradient function may return None: no gradient

    def __init__(self, between):
        self.between = between

    def producer(self, t):
        return t.op, t.value_index

    def edges(self, op):
        return [(x, x.op in self.between and _is_float(x), x) for x in op.inputs]

    def num_outputs(self, op):
        return len(op.outputs)

    def zeros(self, op, index):
        from opforge import ops
        return ops.zeros_like(op.outputs[index])

    def view(self, op, needs_input_grad):
        return _sweep.with_needs(op, needs_input_grad)


def _between(graph, ys, xs):
    """Operations on a path from xs to ys: reachable backward from ys and
    forward from xs (read from the C++ graph's edges)."""
    reach, stack = set(), [y.op for y in ys]
    while stack:
        op = stack.pop()
        if op in reach:
            continue
        reach.add(op)
        stack.extend(t.op for t in op.inputs)
    consumers = graph._consumers()
    between, stack = set(), [x.op for x in xs]
    while stack:
        op = stack.pop()
        if op in between or op not in reach:
            continue
        between.add(op)
        stack.extend(consumers.get(op, ()))
    return between


def gradients(ys, xs, grad_ys=None):
    """Symbolic d(sum of ys)/d xs, TensorFlow's ``tf.gradients``.

    ``ys`` and ``xs`` are graph tensors (or lists of them); ``grad_ys`` the
    gradients flowing into ys (default: ones). Returns one tensor per x, or
    None where x does not affect ys.
    """
    from opforge import ops
    ys, xs = _as_list(ys), _as_list(xs)
    grads_in = _as_list(grad_ys) if grad_ys is not None else [None] * len(ys)
    if len(grads_in) != len(ys):
        raise _errors.InvalidArgumentError(f"gradients: {len(ys)} ys but {len(grads_in)} grad_ys")
    for t in ys + xs:
        if not hasattr(t, "op") or not hasattr(t, "graph"):
            raise _errors.InvalidArgumentError(
                "gradients: ys and xs must be graph tensors (use Tensor.backward or of.grad in eager mode)")
    graph = ys[0].graph
    with graph.as_default():
        between = _between(graph, ys, xs)
        seeds = [(y, g if g is not None else ops.ones_like(y)) for y, g in zip(ys, grads_in)]
        _, captured = _sweep.sweep(_GraphAdapter(between), seeds, xs)
        return [captured[id(x)] for x in xs]
