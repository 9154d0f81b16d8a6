"""``DistributedSampler``: each rank's share of a dataset's indices, for ``DataLoader(sampler=...)``.

Every rank draws the same permutation (from ``seed`` and the epoch), then takes every
``num_replicas``-th index starting at its rank, so the ranks' shares are disjoint and together
cover the dataset.  Without ``drop_last`` the permutation is padded with its first indices to a
multiple of ``num_replicas`` (every rank gets as many samples; a few are seen twice); with it the
tail is dropped.  Call ``set_epoch(e)`` before each epoch for a new order.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Optional

from ..data import Generator
from .group import require_group


class DistributedSampler:
    """The indices of ``dataset`` that rank ``rank`` of ``num_replicas`` trains on.

    ``num_replicas`` and ``rank`` default to the process group's (``init_process_group`` first).
    ``shuffle``: a new permutation every epoch, drawn from ``seed + epoch`` (the same on every rank).
    """

    def __init__(self, dataset: Any, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            group = require_group("DistributedSampler")
            num_replicas = group.size if num_replicas is None else num_replicas
            rank = group.rank if rank is None else rank
        for what, value in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"DistributedSampler: {what} must be an int, got {type(value).__name__}.")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got {num_replicas}.")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank must be from 0 to {num_replicas - 1}, got {rank}.")
        n = len(dataset)
        if drop_last and n < num_replicas:
            raise ValueError(f"DistributedSampler: {n} samples cannot give each of {num_replicas} ranks one "
                             "with drop_last=True.")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.num_samples = n // num_replicas if drop_last else -(-n // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use the permutation of epoch ``epoch`` (the same on every rank) from the next ``iter``."""
        self.epoch = epoch

    def _indices(self) -> List[int]:
        n = len(self.dataset)
        order = Generator(self.seed + self.epoch).randperm(n) if self.shuffle else list(range(n))
        if self.total_size <= n:
            return order[:self.total_size]
        padding = self.total_size - n
        return order + (order * -(-padding // n))[:padding]

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices()[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def __repr__(self) -> str:
        return (f"DistributedSampler(rank {self.rank} of {self.num_replicas}, {self.num_samples} samples, "
                f"shuffle={self.shuffle}, seed={self.seed}, epoch={self.epoch}, drop_last={self.drop_last})")
