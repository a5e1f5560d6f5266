"""DistributedSampler: each process's share of a dataset's indices (as
PyTorch's): the same permutation on every process (seed + epoch), padded to
a multiple of the process count, then every size()-th index from rank()."""
from __future__ import annotations

import numpy as np

from opforge import errors


class DistributedSampler:
    def __init__(self, length: int, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        from opforge.distributed import _collectives as C
        self.num_replicas = C.size() if num_replicas is None else int(num_replicas)
        self.rank = C.rank() if rank is None else int(rank)
        if self.num_replicas < 1 or not 0 <= self.rank < self.num_replicas:
            raise errors.InvalidArgumentError(
                f"DistributedSampler: rank must be in [0, num_replicas), got rank={self.rank}, "
                f"num_replicas={self.num_replicas}")
        if int(length) < 0:
            raise errors.InvalidArgumentError(f"DistributedSampler: length must be >= 0, got {length}")
        self.length, self.shuffle, self.seed, self.drop_last = int(length), bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """A new shuffle for each epoch (the same on every process)."""
        self.epoch = int(epoch)

    @property
    def num_samples(self) -> int:
        if self.drop_last:
            return self.length // self.num_replicas
        return -(-self.length // self.num_replicas)

    def indices(self) -> np.ndarray:
        order = (np.random.default_rng(self.seed + self.epoch).permutation(self.length) if self.shuffle
                 else np.arange(self.length))
        total = self.num_samples * self.num_replicas
        if total > len(order) and len(order) > 0:
            order = np.concatenate([order, np.resize(order, total - len(order))])
        order = order[:total]
        return order[self.rank:total:self.num_replicas]

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples
