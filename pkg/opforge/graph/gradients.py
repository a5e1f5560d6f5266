"""Gradients in a graph: ``gradients(ys, xs)`` adds the gradient nodes.

The same gradient functions as the eager tape (generated from the C++
declarations, or registered in Python) are called on the graph's
Operations; they call the op wrappers, which add nodes inside
``graph.as_default()``.
"""

from opforge import errors as _errors
from opforge.autodiff import registry, tape


class _GradOp:
    """The Operation as a gradient function sees it: the same attributes,
    plus ``needs_input_grad`` (per input, whether it lies on a path from
    xs), so work for the other inputs is skipped as on the eager tape."""

    __slots__ = ("_op", "needs_input_grad")

    def __init__(self, op, needs_input_grad):
        self._op = op
        self.needs_input_grad = needs_input_grad

    def __getattr__(self, name):
        return getattr(self._op, name)


def _as_list(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


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
        # Operations between xs and ys: reachable backward from ys...
        reach, stack = set(), [y.op for y in ys]
        while stack:
            op = stack.pop()
            if id(op) in reach:
                continue
            reach.add(id(op))
            stack.extend(t.op for t in op.inputs)
        # ...and forward from xs, so no gradient is built for unrelated branches.
        consumers = {}
        for op in graph.get_operations():
            for t in op.inputs:
                consumers.setdefault(id(t.op), []).append(op)
        between, stack = set(), [x.op for x in xs]
        while stack:
            op = stack.pop()
            if id(op) in between or id(op) not in reach:
                continue
            between.add(id(op))
            stack.extend(consumers.get(id(op), []))

        pending = {}  # (id(op), index) -> list of gradient contributions
        for y, g in zip(ys, grads_in):
            pending.setdefault((id(y.op), y.value_index), []).append(g if g is not None else ops.ones_like(y))
        # Reverse topological order: graph.get_operations() is in creation order.
        order = [op for op in graph.get_operations() if id(op) in between]
        x_keys = {(id(x.op), x.value_index) for x in xs}
        results = {}
        for op in reversed(order):
            out_grads = []
            any_grad = False
            for i, out in enumerate(op.outputs):
                parts = pending.pop((id(op), i), None)
                key = (id(op), i)
                if parts:
                    total = parts[0]
                    for p in parts[1:]:
                        total = total + p
                    any_grad = True
                else:
                    total = None
                if key in x_keys:
                    results[key] = total
                out_grads.append(total if total is not None else ops.zeros_like(out))
            if not any_grad or not op.inputs:
                continue
            if registry.has_no_gradient(op.type):
                continue
            needs = tuple(id(x.op) in between and x.dtype.as_numpy_dtype.kind == "f" for x in op.inputs)
            in_grads = registry.lookup(op.type)(_GradOp(op, needs), *out_grads)
            if not isinstance(in_grads, (list, tuple)):
                in_grads = (in_grads,)
            for i, (x, g) in enumerate(zip(op.inputs, in_grads)):
                if g is None or id(x.op) not in between or x.dtype.as_numpy_dtype.kind != "f":
                    continue
                g = tape._sum_to_shape(g, x.shape, op.type, i)
                pending.setdefault((id(x.op), x.value_index), []).append(g)
        # xs that are themselves ys' producers without passing through an op above.
        for key, parts in pending.items():
            if key in x_keys and key not in results:
                total = parts[0]
                for p in parts[1:]:
                    total = total + p
                results[key] = total
        return [results.get((id(x.op), x.value_index)) for x in xs]
