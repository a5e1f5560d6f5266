"""grad / value_and_grad over pytrees: dicts, lists, tuples (and namedtuples) of tensors, nested.

    >>> import numpy as np, opforge as of
    >>> params = {"w": np.ones(3, np.float32), "b": np.float32(0.5)}
    >>> g = of.grad(lambda p: of.sum(p["w"] * 2.0 + p["b"]))(params)
    >>> sorted(g), g["w"].numpy().tolist(), float(g["b"])
    (['b', 'w'], [2.0, 2.0, 2.0], 3.0)

Leaves are anything that is not a dict, list or tuple (Tensors, arrays,
numbers). The gradient has the structure of the argument; dict keys keep
their order (and dict subclasses such as OrderedDict their type).
"""

import functools

from opforge import errors as _errors
from opforge.autodiff import functional as _functional


def tree_flatten(tree):
    """(leaves, treedef): treedef rebuilds the structure with tree_unflatten."""
    leaves = []

    def walk(node):
        if isinstance(node, dict):
            return (type(node), tuple(node.keys()), tuple(walk(v) for v in node.values()))
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            return (type(node), None, tuple(walk(v) for v in node))
        if isinstance(node, (list, tuple)):
            return (type(node), None, tuple(walk(v) for v in node))
        leaves.append(node)
        return None

    return leaves, walk(tree)


def tree_unflatten(treedef, leaves):
    it = iter(leaves)

    def build(d):
        if d is None:
            return next(it)
        kind, keys, children = d
        values = [build(c) for c in children]
        if keys is not None:
            return kind(zip(keys, values))
        if issubclass(kind, tuple) and hasattr(kind, "_fields"):
            return kind(*values)
        return kind(values)

    return build(treedef)


def value_and_grad(fn, argnums=0):
    """Like opforge.value_and_grad, where each differentiated argument may be a pytree."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        single = isinstance(argnums, int)
        nums = (argnums,) if single else tuple(argnums)
        n = len(args)
        for i in nums:
            if not isinstance(i, int) or not -n <= i < n:
                raise _errors.InvalidArgumentError(f"grad: argnums {argnums!r} out of range for {n} arguments")
        nums = tuple(i % n for i in nums)
        flat, defs, spans = [], [], []
        for i in nums:
            leaves, treedef = tree_flatten(args[i])
            if not leaves:
                raise _errors.InvalidArgumentError(f"grad: argument {i} holds no tensors to differentiate")
            spans.append((len(flat), len(flat) + len(leaves)))
            flat.extend(leaves)
            defs.append(treedef)

        def flat_fn(*leaves):
            full = list(args)
            for i, treedef, (lo, hi) in zip(nums, defs, spans):
                full[i] = tree_unflatten(treedef, leaves[lo:hi])
            return fn(*full, **kwargs)

        value, grads = _functional.value_and_grad(flat_fn, tuple(range(len(flat))))(*flat)
        trees = tuple(tree_unflatten(treedef, grads[lo:hi]) for treedef, (lo, hi) in zip(defs, spans))
        return value, (trees[0] if single else trees)

    return wrapper


def grad(fn, argnums=0):
    """The gradient of ``fn`` w.r.t. ``args[argnums]``, each a tensor or a pytree of tensors."""
    vg = value_and_grad(fn, argnums)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return vg(*args, **kwargs)[1]

    return wrapper
