"""Datasets and a DataLoader with PyTorch's names (torch.utils.data).

    >>> import numpy as np, opforge as of
    >>> ds = of.utils.data.TensorDataset(np.arange(10.0), np.arange(10))
    >>> [tuple(x.shape) for x, y in of.utils.data.DataLoader(ds, batch_size=4)]
    [(4,), (4,), (2,)]

Batches are opforge Tensors stacked from the samples. Shuffling is seeded:
``seed=`` gives each epoch e the permutation of (seed, e); without it the
order comes from opforge.random, so ``of.manual_seed(n)`` repeats a run.
A background thread prepares up to ``prefetch`` batches ahead (0: none).
"""

import queue
import threading

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import errors as _errors


class Dataset:
    """A map-style dataset: ``__getitem__(i)`` and ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __len__")


def _as_array(x):
    if hasattr(x, "detach") and hasattr(x, "cpu") and not hasattr(x, "_ag"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)


class TensorDataset(Dataset):
    """Rows i of each array (Tensors, ndarrays, lists) sharing the first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise _errors.InvalidArgumentError("TensorDataset: pass at least one array")
        self.tensors = tuple(_as_array(t) for t in tensors)
        n = len(self.tensors[0])
        for i, t in enumerate(self.tensors):
            if t.ndim == 0 or len(t) != n:
                raise _errors.InvalidArgumentError(
                    f"TensorDataset: array {i} has shape {t.shape}, but array 0 has {n} rows")

    def __getitem__(self, index):
        return tuple(_pw.to_tensor(np.ascontiguousarray(t[index]), None) for t in self.tensors)

    def __len__(self):
        return len(self.tensors[0])

    def _batch(self, indices):  # one fancy-index per array instead of a stack of rows
        return tuple(_pw.to_tensor(np.ascontiguousarray(t[indices]), None) for t in self.tensors)


def default_collate(samples):
    """Stacks a list of samples: arrays/Tensors/numbers into one Tensor; tuples, lists and dicts element-wise."""
    first = samples[0]
    if isinstance(first, dict):
        return {k: default_collate([s[k] for s in samples]) for k in first}
    if isinstance(first, (tuple, list)):
        if any(len(s) != len(first) for s in samples):
            raise _errors.InvalidArgumentError("default_collate: samples have different numbers of fields")
        return type(first)(default_collate(list(f)) for f in zip(*samples)) if isinstance(first, tuple) \
            else [default_collate(list(f)) for f in zip(*samples)]
    if isinstance(first, (str, bytes)):
        return list(samples)
    arrays = [_as_array(s) for s in samples]
    if any(a.shape != arrays[0].shape for a in arrays):
        raise _errors.InvalidArgumentError(
            f"default_collate: samples have different shapes {sorted({a.shape for a in arrays})}")
    return _pw.to_tensor(np.ascontiguousarray(np.stack(arrays)), None)


class DataLoader:
    """Iterates `dataset` in batches.

    batch_size (None: samples one by one, unbatched), shuffle, drop_last (drop
    a short last batch), seed (shuffle order per epoch), collate_fn,
    prefetch (batches prepared ahead by a background thread; 0 disables it),
    sampler (an iterable of indices with len(), e.g.
    opforge.distributed.DistributedSampler; excludes shuffle).
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None, collate_fn=None,
                 prefetch=2, num_workers=0, sampler=None):
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size <= 0):
            raise _errors.InvalidArgumentError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if not isinstance(prefetch, int) or prefetch < 0:
            raise _errors.InvalidArgumentError(f"DataLoader: prefetch must be an int >= 0, got {prefetch!r}")
        if num_workers:
            raise _errors.UnimplementedError(
                "DataLoader: worker processes are not supported; batches are prefetched by one thread (prefetch=)")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        if sampler is not None and shuffle:
            raise _errors.InvalidArgumentError("DataLoader: sampler and shuffle are exclusive (the sampler orders)")
        self.seed, self.collate_fn, self.prefetch, self.sampler = seed, collate_fn, prefetch, sampler
        self._epoch = 0

    def __len__(self):
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self):
        if self.sampler is not None:  # e.g. opforge.distributed.DistributedSampler: this process's indices
            return np.asarray(list(iter(self.sampler)), dtype=np.int64)
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        if self.seed is not None:
            rng = np.random.default_rng([self.seed, self._epoch])
        else:
            from opforge import random
            rng = np.random.default_rng(list(random.get_seed()))
        self._epoch += 1
        return rng.permutation(n)

    def _batches(self, order):
        if self.batch_size is None:
            for i in order:
                yield self.dataset[int(i)]
            return
        fast = self.collate_fn is None and hasattr(self.dataset, "_batch")
        collate = self.collate_fn or default_collate
        for lo in range(0, len(order), self.batch_size):
            idx = order[lo:lo + self.batch_size]
            if len(idx) < self.batch_size and self.drop_last:
                return
            yield self.dataset._batch(idx) if fast else collate([self.dataset[int(i)] for i in idx])

    def __iter__(self):
        batches = self._batches(self._order())
        return batches if self.prefetch == 0 else _Prefetcher(batches, self.prefetch)


class _Prefetcher:
    """Runs a batch generator on a daemon thread, `depth` batches ahead; errors surface in next().

    The thread holds only the queue and the stop event, not this object, so an
    iterator dropped early is collected and its __del__ stops the thread.
    """

    _END = object()

    def __init__(self, batches, depth):
        self._queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=_produce, args=(batches, self._queue, self._stop, self._END),
                                        daemon=True, name="opforge-prefetch")
        self._thread.start()

    def __iter__(self):
        return self

    def __next__(self):
        if self._stop.is_set():
            raise StopIteration
        ok, item = self._queue.get()
        if not ok:
            self.close()
            raise item
        if item is self._END:
            self.close()
            raise StopIteration
        return item

    def close(self):
        self._stop.set()

    def __del__(self):
        self._stop.set()


def _produce(batches, q, stop, end):
    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    try:
        for b in batches:
            if not put((True, b)):
                return
        put((True, end))
    except BaseException as e:  # handed to the consumer, raised there
        put((False, e))


__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate"]
