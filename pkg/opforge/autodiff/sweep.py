"""The one backward sweep: reverse topological order, gradient accumulation
and needs_input_grad, for the eager tape (tape.backward) and for graphs
(opforge.gradients).

Both see the same picture: nodes (a tape Node, a graph Operation) whose
inputs are values (a tape Meta, a graph SymbolicTensor) produced by output
`index` of another node, or by none (a leaf). An ``Adapter`` says how to
read that picture; the sweep does the rest:

1. from the seeds, walk back along the input edges that need a gradient,
   counting per node how many such edges lead into it;
2. run each node once all its consumers ran (Kahn's order, so a node's
   output gradients are complete): missing output gradients are zeros, the
   gradient function gets the node with ``needs_input_grad`` (per input,
   whether its edge needs a gradient) and returns one gradient per input;
3. each input gradient is summed back to the input's (broadcast) shape and
   added to its producer's output buffer; values in ``targets`` also
   collect the gradients that reach them.

A node whose outputs got no gradient at all, or none of whose inputs needs
one, is skipped (its edges still count down), so branches that do not
lead to a seed build nothing.

Leaves are counted too: a leaf's gradient is final once every node with an
edge into it has run, and ``on_leaf`` hears of it then, while the sweep goes
on (the tape's post-accumulate hooks; DistributedOptimizer starts averaging
the gradients of the last layers while the first ones are still computed).
"""

from opforge import errors as _errors
from opforge.autodiff import registry


class Adapter:
    """How a sweep reads one kind of node (tape or graph)."""

    strict = True  # a gradient function returning None for an input that needs one is an error

    def producer(self, value):
        """(node, output index) that produced `value`; node None for a leaf."""
        raise NotImplementedError

    def edges(self, node):
        """Per input of `node`: (value, needs_gradient, input) where value is
        what the gradient flows to (None: nothing) and input is what its
        shape and dtype are read from."""
        raise NotImplementedError

    def num_outputs(self, node):
        raise NotImplementedError

    def zeros(self, node, index):
        raise NotImplementedError

    def op_type(self, node):
        return node.type

    def view(self, node, needs_input_grad):
        """What the gradient function receives as `op`."""
        raise NotImplementedError

    def prepare(self, grad, x):
        """A gradient as the tape stores it (e.g. a plain Tensor)."""
        return grad


class _View:
    """A node as a gradient function sees it: its attributes, plus the
    sweep's ``needs_input_grad``."""

    __slots__ = ("_node", "needs_input_grad")

    def __init__(self, node, needs_input_grad):
        self._node = node
        self.needs_input_grad = needs_input_grad

    def __getattr__(self, name):
        return getattr(self._node, name)


def with_needs(node, needs_input_grad):
    return _View(node, needs_input_grad)


def sum_to_shape(grad, shape, op_type, index):
    """Sums a broadcast gradient back to an input's shape."""
    from opforge import ops
    gshape = tuple(grad.shape)
    shape = tuple(shape)
    if gshape == shape:
        return grad
    lead = len(gshape) - len(shape)
    if lead < 0:
        raise _errors.InternalError(f"{op_type}: gradient of input {index} has shape {gshape}, "
                                    f"smaller than the input's {shape}")
    axes = list(range(lead)) + [lead + i for i, d in enumerate(shape) if d == 1 and gshape[lead + i] != 1]
    if axes:
        grad = ops.sum(grad, axes, True)
    return ops.reshape(grad, list(shape))


def sweep(adapter, seeds, targets=(), on_leaf=None):
    """Backpropagates `seeds` ((value, gradient) pairs).

    Returns (leaf_grads, captured): leaf_grads maps id(leaf value) to
    (value, total gradient) for leaves reached; captured maps id(value) to
    the total gradient that reached each value in `targets` (None: none).
    on_leaf(value, gradient), if given, is called once per leaf in
    leaf_grads as soon as its gradient is final, in the sweep's order.
    """
    deps, stack, seen = {}, [], set()
    leaf_edges = {}  # id(leaf value) -> edges into it still to run (on_leaf only)
    for value, _ in seeds:
        node = adapter.producer(value)[0]
        if node is not None and id(node) not in seen:
            seen.add(id(node))
            stack.append(node)
            deps[node] = 0
    edges_of = {}
    while stack:
        node = stack.pop()
        edges = edges_of[node] = adapter.edges(node)
        for value, needs, _ in edges:
            if not needs:
                continue
            fn = adapter.producer(value)[0]
            if fn is None:
                if on_leaf is not None:
                    leaf_edges[id(value)] = leaf_edges.get(id(value), 0) + 1
                continue
            deps[fn] = deps.get(fn, 0) + 1
            if id(fn) not in seen:
                seen.add(id(fn))
                stack.append(fn)

    buffers = {}     # node -> [gradient per output]
    leaf_grads = {}  # id(value) -> (value, gradient)
    captured = {id(t): None for t in targets}

    def add(value, grad):
        key = id(value)
        if key in captured:
            prev = captured[key]
            captured[key] = grad if prev is None else prev + grad
        fn, index = adapter.producer(value)
        if fn is None:
            prev = leaf_grads.get(key)
            leaf_grads[key] = (value, grad if prev is None else prev[1] + grad)
            return
        slots = buffers.get(fn)
        if slots is None:
            slots = buffers[fn] = [None] * adapter.num_outputs(fn)
        prev = slots[index]
        slots[index] = grad if prev is None else prev + grad

    def leaf_done(key):
        entry = leaf_grads.get(key)
        if entry is not None:
            on_leaf(*entry)

    for value, grad in seeds:
        add(value, grad)
    if on_leaf is not None:  # seeds that are leaves no node leads to are final already
        for key in dict.fromkeys(id(v) for v, _ in seeds if adapter.producer(v)[0] is None):
            if key not in leaf_edges:
                leaf_done(key)
    ready = [n for n, d in deps.items() if d == 0]
    while ready:
        node = ready.pop()
        edges = edges_of[node]
        out_grads = buffers.pop(node, None)
        op_type = adapter.op_type(node)
        needs = tuple(bool(n) for _, n, _ in edges)
        if out_grads is not None and any(needs) and not registry.has_no_gradient(op_type):
            out_grads = [g if g is not None else adapter.zeros(node, i) for i, g in enumerate(out_grads)]
            in_grads = registry.lookup(op_type)(adapter.view(node, needs), *out_grads)
            if not isinstance(in_grads, (list, tuple)):
                in_grads = (in_grads,)
            if len(in_grads) != len(edges):
                raise _errors.InternalError(
                    f"{op_type}: its gradient function returned {len(in_grads)} gradients for "
                    f"{len(edges)} inputs")
            for i, ((value, need, x), g) in enumerate(zip(edges, in_grads)):
                if not need:
                    continue
                if g is None:
                    if adapter.strict:
                        raise _errors.InternalError(
                            f"{op_type}: its gradient function returned None for input {i}, which requires "
                            "a gradient")
                    continue
                g = sum_to_shape(adapter.prepare(g, x), x.shape, op_type, i)
                if g.dtype != x.dtype:
                    raise _errors.InternalError(
                        f"{op_type}: gradient of input {i} has dtype {g.dtype.name}, expected {x.dtype.name}")
                add(value, g)
        for value, need, _ in edges:
            if not need:
                continue
            fn = adapter.producer(value)[0]
            if fn is not None:
                deps[fn] -= 1
                if deps[fn] == 0:
                    ready.append(fn)
            elif on_leaf is not None:
                key = id(value)
                leaf_edges[key] -= 1
                if leaf_edges[key] == 0:
                    leaf_done(key)
    return leaf_grads, captured
