"""A minimal batching helper for data that fits in memory as arrays.

    loader = imp.data.ArrayLoader(images, labels, batch_size=64, shuffle=True, seed=0)
    for epoch in range(3):
        for x, y in loader:            # Tensors, the same first dimension
            ...

Each pass over the loader is one epoch; with `shuffle`, every epoch has a new order drawn
from one generator seeded with `seed`, so a run is reproducible and epochs differ.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from .tensor import Tensor

__all__ = ["ArrayLoader"]


class ArrayLoader:
    """Batches of rows of `arrays` (numpy arrays, Tensors or lists with the same length),
    as Tensors. `drop_last` leaves out a last, smaller batch."""

    def __init__(self, *arrays: Any, batch_size: int, shuffle: bool = False,
                 drop_last: bool = False, seed: int | None = None) -> None:
        if not arrays:
            raise ValueError("ArrayLoader needs at least one array")
        self.arrays = [a.numpy() if isinstance(a, Tensor) else np.asarray(a) for a in arrays]
        lengths = [len(a) if a.ndim else None for a in self.arrays]
        if None in lengths or len(set(lengths)) != 1:
            raise ValueError(f"ArrayLoader: the arrays must have the same first dimension, got "
                             f"shapes {[a.shape for a in self.arrays]}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"ArrayLoader: batch_size must be an int >= 1, got {batch_size!r}")
        self.batch_size, self.shuffle, self.drop_last = batch_size, bool(shuffle), bool(drop_last)
        self._rng = np.random.default_rng(seed)

    @property
    def num_samples(self) -> int:
        """Rows in each array."""
        return len(self.arrays[0])

    def __len__(self) -> int:
        """Batches per epoch."""
        full, rest = divmod(self.num_samples, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[Any]:
        """One epoch: a Tensor per batch for one array, a tuple of Tensors for several."""
        n = self.num_samples
        order = self._rng.permutation(n) if self.shuffle else None
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            rows = slice(start, min(start + self.batch_size, n))
            index = rows if order is None else order[rows]
            batch = tuple(Tensor(a[index]) for a in self.arrays)
            yield batch if len(batch) > 1 else batch[0]
