"""DistributedOptimizer and the rank-0 broadcasts of parameters and state.

Gradients are averaged with tensor fusion (horovod): all gradients of one
dtype go to one MpiGroupedAllreduce call, which packs them into one buffer
and reduces it in chunks of ``fusion_bytes``; the optimizer then updates
from numpy views of that buffer (no copies, no per-tensor calls).

Overlap with backward (``overlap=True``; the default, None, decides by
:func:`overlap_default`): the parameters are
bucketed and each bucket's fused allreduce starts, queued in async mode, as
soon as backward has made its last gradient final (a post-accumulate hook
per parameter, _overlap.py), while the sweep goes on with the earlier
layers; ``step()`` waits for the buckets and updates from their results.
With ``overlap=False`` (or gradients passed to ``step``) averaging starts
at ``step()``: one fused call per dtype.

``minimize(loss)`` averages too: on a graph tensor the fused allreduces are
nodes between the gradient and the update nodes (_graph.py); with an eager
callable, the leaves' gradients are averaged after backward.
"""
from __future__ import annotations

import numpy as np

from opforge import errors
from opforge.distributed import _collectives as C
from opforge.distributed._overlap import GradientBuckets


def overlap_default() -> bool:
    """Whether DistributedOptimizer overlaps averaging with backward when not
    told: ``OPFORGE_MPI_OVERLAP`` (1 or 0) if set, else only when this
    machine's processes leave a core each for communication beside their
    compute threads (local_size() x (intra-op threads + 1) <= usable CPUs).
    Measured (bench/distributed.py, docs/distributed.md): on 2 cores with
    2 processes the overlapped reduction competes with backward for the same
    cores and a step took 3-10 % longer; with a core to spare it hides most
    of the averaging, as in horovod and PyTorch's DDP."""
    import os

    from opforge import config
    forced = os.environ.get("OPFORGE_MPI_OVERLAP", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return C.local_size() * (config.num_threads() + 1) <= config.usable_cpus()


class DistributedOptimizer:
    """Wraps any ``opforge.optim`` optimizer: ``step()`` averages the
    gradients across processes, then steps the wrapped optimizer.

    Every process must have gradients for the same parameters (same shapes,
    same order); a mismatch raises on every process, naming the group.
    Other attributes (``params``, ``lr``, ``zero_grad``) are the wrapped
    optimizer's.
    """

    def __init__(self, optimizer, fusion_bytes: int = 4 << 20, op: str = "average", name: str = "gradients",
                 overlap: bool | None = None):
        if not hasattr(optimizer, "step") or not hasattr(optimizer, "params"):
            raise errors.InvalidArgumentError(
                f"DistributedOptimizer: expected an opforge.optim optimizer, got {type(optimizer).__name__}")
        if op not in ("sum", "average"):
            raise errors.InvalidArgumentError(f"DistributedOptimizer: op must be 'sum' or 'average', got {op!r}")
        if not int(fusion_bytes) >= 1:
            raise errors.InvalidArgumentError(f"DistributedOptimizer: fusion_bytes must be >= 1, got {fusion_bytes}")
        self.optimizer = optimizer
        self.fusion_bytes = int(fusion_bytes)
        self.op = op
        self.name = name
        if overlap is None:
            overlap = overlap_default()
        self.overlap = bool(overlap)
        self._buckets = GradientBuckets(optimizer.params, self.fusion_bytes, op, name) if overlap else None

    def __getattr__(self, attr):
        return getattr(self.__dict__["optimizer"], attr)

    def average_gradients(self, grads):
        """The cross-process averages of `grads` (None entries stay None), as
        numpy views of the fused buffers, one fused call per dtype."""
        by_dtype = {}  # dtype -> indices of its gradients
        for i, g in enumerate(grads):
            if g is not None:
                by_dtype.setdefault(g.dtype, []).append(i)
        out = [None] * len(grads)
        for dtype, idx in sorted(by_dtype.items(), key=lambda kv: str(kv[0])):  # same order on every rank
            group = [grads[i] for i in idx]
            fused = C.grouped_allreduce(group, op=self.op, fusion_bytes=self.fusion_bytes,
                                        name=f"{self.name}.{dtype}")
            for i, view in zip(idx, C.split_fused(fused, [tuple(g.shape) for g in group])):
                out[i] = view
        return out

    def synchronize(self):
        """The cross-process averages of the parameters' .grad (numpy views,
        None where a parameter has none); .grad itself is left as it is."""
        averaged = self._buckets.collect() if self._buckets is not None else None
        if averaged is None:
            averaged = self.average_gradients([getattr(p, "grad", None) for p in self.optimizer.params])
        return averaged

    def step(self, grads=None):
        """Averages the gradients (the .grad attributes, or `grads`), then steps."""
        if grads is not None:
            if self._buckets is not None:
                self._buckets.reset()  # launched buckets finish on every process; their results go unused
            averaged = self.average_gradients(list(grads))
        else:
            averaged = self.synchronize()
        self.optimizer.step(grads=averaged)

    def minimize(self, loss, var_list=None, name=None):
        """The wrapped optimizer's ``minimize`` with the gradients averaged
        across processes before the updates. In a graph: returns the one op
        to run per step (every process runs the same graph). Eager (`loss` a
        callable): computes it on the tape, averages, updates, returns it."""
        from opforge.graph._graph import SymbolicTensor
        from opforge.optim import minimize as _m
        if isinstance(loss, SymbolicTensor):
            from opforge.distributed import _graph
            return _m.minimize_graph(self.optimizer, loss, var_list, name, average=lambda pairs: (
                _graph.average_gradients(pairs, self.fusion_bytes, self.op, self.name)))
        return _m.minimize_eager(self.optimizer, loss, var_list, average=self._average_leaves)

    def _average_leaves(self, leaves):
        params = self.optimizer.params
        if self._buckets is not None and [id(p) for p in leaves] == [id(p) for p in params]:
            return self.synchronize()  # the buckets launched during backward
        if self._buckets is not None:
            self._buckets.reset()
        return self.average_gradients([p.grad for p in leaves])

    def zero_grad(self):
        if self._buckets is not None:
            self._buckets.reset()
        self.optimizer.zero_grad()


def _params(obj):
    if hasattr(obj, "parameters"):
        return list(obj.parameters())
    if isinstance(obj, dict):
        return [obj[k] for k in sorted(obj)]
    return list(obj)


def _assign(dst, src):
    np.copyto(np.asarray(dst.numpy() if hasattr(dst, "numpy") else dst), np.asarray(src.numpy()))


def broadcast_parameters(params, root: int = 0) -> None:
    """Overwrites, in place, every parameter (a model, a dict by sorted key,
    or a list) with the `root` process's values."""
    for i, p in enumerate(_params(params)):
        _assign(p, C.broadcast(p, root=root, name=f"parameter.{i}"))


def broadcast_optimizer_state(optimizer, root: int = 0) -> None:
    """Copies the `root` process's optimizer state (slot tensors, step
    counts, lr and other hyperparameters) to every process, in place."""
    opt = getattr(optimizer, "optimizer", optimizer)  # a DistributedOptimizer's inner one
    from opforge import Tensor
    for key in sorted(vars(opt)):
        value = getattr(opt, key)
        if key == "params":
            continue
        if isinstance(value, list) and value and all(isinstance(v, Tensor) for v in value):
            for i, t in enumerate(value):
                _assign(t, C.broadcast(t, root=root, name=f"state.{key}.{i}"))
        elif isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                      for v in value):
            arr = np.asarray(value, dtype=np.float64 if any(isinstance(v, float) for v in value) else np.int64)
            got = C.broadcast(arr, root=root, name=f"state.{key}").numpy()
            setattr(opt, key, [type(v)(g) for v, g in zip(value, got.tolist())])
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            got = C.broadcast(np.asarray(value, dtype=np.float64), root=root, name=f"state.{key}").numpy()
            setattr(opt, key, type(value)(got.item()))
        elif isinstance(value, tuple) and value and all(isinstance(v, float) for v in value):
            got = C.broadcast(np.asarray(value, dtype=np.float64), root=root, name=f"state.{key}").numpy()
            setattr(opt, key, tuple(got.tolist()))
