"""Optimizer.minimize: a training step as one op (graph) or one call (eager).

In a graph, ``minimize(loss)`` adds the gradient nodes (``of.gradients``)
and one update node per variable (ResourceApply*, cpp/ops/state_ops.cc),
and returns one op to run per step. The optimizer's slots (momentum, Adam's
moments) and its step counter are variables of the graph, so they live in
each Session, are set by ``global_variables_initializer()``, saved by
``of.train.Saver``, and Adam's bias correction uses the true step number.
The updates write only into variables: never into constants or feeds.

`average` (given by opforge.distributed.DistributedOptimizer) sits between
the gradients and the updates: in a graph it maps the (variable, gradient)
pairs to pairs whose gradients are averaged across processes (collective
nodes); in eager mode it maps the leaves' gradients to their averages.
"""

import numpy as np

from opforge import errors as _errors


def _slot(opt, graph, var, kind):
    from opforge.variables import Variable
    key = (id(graph), var.name, kind)
    slot = opt._graph_slots.get(key)
    if slot is None:
        with graph.as_default():
            slot = Variable(np.zeros(var.shape, dtype=var.dtype.as_numpy_dtype),
                            name=f"{var.name}/{type(opt).__name__}_{kind}", trainable=False)
        opt._graph_slots[key] = slot
    return slot


def _step_counter(opt, graph):
    from opforge.variables import Variable
    key = (id(graph), "", "step")
    step = opt._graph_slots.get(key)
    if step is None:
        with graph.as_default():
            step = Variable(np.int64(0), name=f"{type(opt).__name__}/step", trainable=False)
        opt._graph_slots[key] = step
    return step


def minimize_graph(opt, loss, var_list, name, average=None):
    from opforge import variables as _v
    from opforge.graph.gradients import gradients
    graph = loss.graph
    if var_list is None:
        var_list = _v.trainable_variables(graph)
    var_list = list(var_list)
    if not var_list:
        raise _errors.InvalidArgumentError(f"{type(opt).__name__}.minimize: there are no trainable variables")
    for v in var_list:
        if not isinstance(v, _v._GraphVariable) or v.graph is not graph:
            raise _errors.InvalidArgumentError(
                f"{type(opt).__name__}.minimize: var_list holds {v!r}, not a variable of the loss's graph")
    grads = gradients(loss, var_list)
    pairs = [(v, g) for v, g in zip(var_list, grads) if g is not None]
    if not pairs:
        raise _errors.InvalidArgumentError(
            f"{type(opt).__name__}.minimize: the loss does not depend on any of {[v.name for v in var_list]}")
    with graph.as_default():
        if average is not None:
            pairs = average(pairs)
        updates = opt._graph_updates(graph, pairs)
        return _v.group(*updates, name=name or f"{type(opt).__name__}/minimize")


def minimize_eager(opt, loss, var_list, average=None):
    from opforge import variables as _v
    if not callable(loss):
        raise _errors.InvalidArgumentError(
            f"{type(opt).__name__}.minimize: in eager mode loss must be a callable returning the loss "
            "(it is computed on the tape); in a graph, a graph tensor")
    if var_list is None:
        leaves = opt.params or [v._value for v in _v.trainable_variables()]
    else:
        leaves = [v._value if isinstance(v, _v._EagerVariable) else v for v in var_list]
    if not leaves:
        raise _errors.InvalidArgumentError(f"{type(opt).__name__}.minimize: there are no variables to train")
    for p in leaves:
        p.grad = None
    value = loss()
    value.backward()
    if average is not None:
        from opforge.tensor import tensor
        for p, g in zip(leaves, average(leaves)):
            p.grad = None if g is None else tensor(g)
    opt._step_leaves(leaves)
    return value
