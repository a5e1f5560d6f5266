"""Averaging that overlaps the backward pass (horovod's and PyTorch DDP's buckets).

The parameters are cut into buckets: by dtype, in reverse parameter order
(the last layers' gradients are final first), each up to ``fusion_bytes``.
Each parameter carries a post-accumulate hook (autodiff/tape.py): once every
gradient of a bucket is final, the bucket's fused allreduce is queued in
async mode (a pending tensor comes back) and runs on the engine's pool while
the sweep computes the earlier layers' gradients. ``collect`` waits for the
launched buckets and averages any bucket that never completed (a parameter
that got no gradient) there and then.

Every process builds the same buckets from the same parameters, and the
sweep's order depends only on the graph, so every process queues the same
collectives in the same order (their names are checked across processes).
A hook firing again for a bucket already launched (two backward passes
before one step, gradients accumulating) marks the step stale: ``collect``
waits for what was launched and returns None, and the optimizer averages
the accumulated ``.grad`` afterwards, as without overlap.
"""
from __future__ import annotations

from opforge.distributed import _collectives as C


def make_buckets(dtypes: list[str], nbytes: list[int], fusion_bytes: int) -> list[list[int]]:
    """Index lists: by dtype (sorted by name, the same on every process), in
    reverse order (the last layers' gradients are final first), each up to
    `fusion_bytes` (a tensor larger than that is a bucket of its own)."""
    by_dtype: dict[str, list[int]] = {}
    for i in reversed(range(len(dtypes))):
        by_dtype.setdefault(dtypes[i], []).append(i)
    buckets: list[list[int]] = []
    for dtype in sorted(by_dtype):
        current: list[int] = []
        size = 0
        for i in by_dtype[dtype]:
            if current and size + nbytes[i] > fusion_bytes:
                buckets.append(current)
                current, size = [], 0
            current.append(i)
            size += nbytes[i]
        if current:
            buckets.append(current)
    return buckets


class GradientBuckets:
    def __init__(self, params, fusion_bytes: int, op: str, name: str):
        from opforge.autodiff import tape
        self.params = list(params)
        self.fusion_bytes, self.op, self.name = fusion_bytes, op, name
        self.buckets = make_buckets([p.dtype.name for p in self.params], [p.nbytes for p in self.params],
                                    fusion_bytes)
        self.bucket_of = {i: b for b, idx in enumerate(self.buckets) for i in idx}
        self.index = {id(p): i for i, p in enumerate(self.params)}
        self.handles = []
        for p in self.params:
            ag = getattr(p, "_ag", None)
            if ag is not None and ag.requires_grad and ag.grad_fn is None:
                self.handles.append(tape.register_post_accumulate_grad_hook(p, self._ready))
        self._clear()

    def _clear(self):
        self.ready = [set() for _ in self.buckets]
        self.fused = [None] * len(self.buckets)
        self.stale = False

    def _ready(self, t):
        i = self.index.get(id(t))
        if i is None:
            return
        b = self.bucket_of[i]
        if self.fused[b] is not None:
            self.stale = True
            return
        self.ready[b].add(i)
        if len(self.ready[b]) == len(self.buckets[b]):
            self.fused[b] = self._launch(b, [self.params[i].grad for i in self.buckets[b]], "async")

    def _launch(self, b, grads, mode):
        import opforge as of
        with of.execution_mode(mode):
            return C.grouped_allreduce(grads, op=self.op, fusion_bytes=self.fusion_bytes,
                                       name=f"{self.name}.bucket{b}")

    @property
    def launched(self) -> bool:
        return any(f is not None for f in self.fused)

    def reset(self):
        """Waits for the buckets launched so far and forgets them."""
        for f in self.fused:
            if f is not None:
                f.numpy()  # a pending tensor: reading waits (and raises the collective's error)
        self._clear()

    def collect(self):
        """The averaged gradients (numpy views, None where a parameter has no
        gradient), or None when nothing was launched or the step is stale
        (the caller then averages .grad itself). Forgets this step."""
        if not self.launched or self.stale:
            self.reset()
            return None
        out = [None] * len(self.params)
        try:
            for b, idx in enumerate(self.buckets):
                fused = self.fused[b]
                if fused is None:  # some parameter got no gradient: average the others now
                    idx = [i for i in idx if self.params[i].grad is not None]
                    if not idx:
                        continue
                    fused = self._launch(b, [self.params[i].grad for i in idx], "sync")
                views = C.split_fused(fused, [tuple(self.params[i].shape) for i in idx])
                for i, view in zip(idx, views):
                    out[i] = view
        finally:
            self._clear()
        return out
