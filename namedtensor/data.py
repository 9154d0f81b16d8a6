"""Datasets and a loader that yields named batches: ``Dataset``, ``TensorDataset``, ``DataLoader``.

Name rule: every tensor in a batch gets a new leading batch dim named ``names`` (``"batch"`` by
default; ``None`` leaves it unnamed); the samples' own names follow.  For a :class:`TensorDataset`
the sample dim of each tensor *becomes* that batch dim (moved to the front when it sits elsewhere)::

    ds = TensorDataset(tokens, labels, dim="example")     # ("example", "seq"), ("example",)
    for x, y in DataLoader(ds, batch_size=32, shuffle=True, seed=0):
        x.names, y.names                                  # ("batch", "seq"), ("batch",)

A batch of a TensorDataset is one ``index_select`` per tensor (no per-sample stacking).  Any other
dataset (an object with ``__len__`` and ``__getitem__``, a list included) is collated by structure:
tensors are stacked, numbers become a 1-D tensor, tuples/lists/dicts are collated item by item and
keep their type, strings become a list; ``collate_fn=`` replaces all of this.

Shuffling draws from the loader's own :class:`Generator` (``seed=`` or ``generator=``), not from the
stream that ``nt.manual_seed`` seeds: the same seed gives the same order, every epoch (every
``iter(loader)``) a new permutation, whatever else the program draws.

``pin_memory=True`` puts the CPU tensors of each batch in page-locked host memory, from which
``.to("cuda", non_blocking=True)`` copies without blocking (as PyTorch's; without a CUDA device it
warns and does nothing).  ``device="cuda"`` delivers the batches on that device; with ``pin_memory``
too the copies run on a side stream one batch ahead, overlapping the work on the previous batch.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterator, List, Optional, Sequence, Union

from . import _dtypes, _names, cuda
from .ops.creation import tensor
from .ops.indexing import index_select, select
from .ops.joining import stack
from .ops.naming import permute, rename
from .tensor import Tensor

__all__ = ["Dataset", "TensorDataset", "DataLoader", "Generator"]


class Dataset:
    """A map-style dataset: ``len(ds)`` samples, ``ds[i]`` the ``i``-th.  Subclasses define both."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__(index).")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__().")


class TensorDataset(Dataset):
    """Samples taken along one dim of each tensor: ``ds[i]`` is the tuple of the tensors' ``i``-th
    slices along ``dim`` (a name, or an int position; default 0), which all must have the same size."""

    def __init__(self, *tensors: Tensor, dim: Union[str, int, None] = None) -> None:
        if not tensors:
            raise ValueError("TensorDataset: give at least one tensor.")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, not a Tensor; "
                                "wrap it with nt.tensor(...).")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: tensor {i} is 0-dim; it has no dim to take samples along.")
        self.tensors = tensors
        self.dim = 0 if dim is None else dim
        self.axes = tuple(_names.axis(t.names, self.dim, "TensorDataset") for t in tensors)
        sizes = [t.shape[ax] for t, ax in zip(tensors, self.axes)]
        if len(set(sizes)) > 1:
            shown = ", ".join(f"{t.shape} {_names.fmt(t.names)}" for t in tensors)
            raise ValueError(
                f"TensorDataset: the tensors have different sizes along dim {self.dim!r}: {sizes} "
                f"(shapes and names: {shown}); every tensor needs one entry per sample."
            )
        self._len = sizes[0]

    def __getitem__(self, index: int) -> tuple:
        return tuple(select(t, ax, index) for t, ax in zip(self.tensors, self.axes))

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"TensorDataset({self._len} samples along dim {self.dim!r}, {len(self.tensors)} tensors)"


class Generator:
    """A seedable source of permutations for shuffling, independent of ``nt.manual_seed``.

    ``Generator(seed)`` always produces the same sequence of permutations; ``Generator()`` is
    seeded from the operating system.
    """

    def __init__(self, seed: Optional[int] = None) -> None:
        self._rng = random.Random()
        self.manual_seed(seed)

    def manual_seed(self, seed: Optional[int]) -> "Generator":
        """Restart the sequence from ``seed`` (``None``: a fresh seed from the operating system)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"Generator: the seed must be an int or None, got {type(seed).__name__}.")
        self._seed = seed
        self._rng.seed(seed)
        return self

    def initial_seed(self) -> Optional[int]:
        """The seed given to the constructor or the last ``manual_seed`` (``None`` if unseeded)."""
        return self._seed

    def randperm(self, n: int) -> List[int]:
        """A random permutation of ``range(n)``."""
        order = list(range(n))
        self._rng.shuffle(order)
        return order


class DataLoader:
    """Batches of ``batch_size`` samples of ``dataset``, each tensor with a new leading dim named
    ``names`` (``None``: unnamed).

    ``shuffle`` draws a new order every epoch from ``generator`` (an object with ``randperm(n)``,
    such as :class:`Generator`) or from a ``Generator(seed)``; ``drop_last`` skips a last short batch;
    ``collate_fn(samples)`` builds a batch from a list of samples instead of the default collation.
    ``pin_memory`` and ``device``: see the module docstring.  ``sampler``: an iterable of indices
    with a length (such as :class:`namedtensor.distributed.DistributedSampler`, a rank's share of the
    data) that picks the samples and their order, instead of ``shuffle``.
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 names: Optional[str] = "batch", seed: Optional[int] = None, generator: Any = None,
                 collate_fn: Optional[Callable[[list], Any]] = None, pin_memory: bool = False,
                 device: Any = None, sampler: Any = None) -> None:
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(f"DataLoader: the dataset must define __len__ and __getitem__, "
                            f"got a {type(dataset).__name__}.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int):
            raise TypeError(f"DataLoader: batch_size must be an int, got {type(batch_size).__name__}.")
        if batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be at least 1, got {batch_size}.")
        for flag, value in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(value, bool):
                raise TypeError(f"DataLoader: {flag} must be True or False, got {value!r}.")
        if names is not None:
            _names.validate((names,), 1, "DataLoader")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got a {type(collate_fn).__name__}.")
        if seed is not None and generator is not None:
            raise ValueError("DataLoader: give seed= or generator=, not both.")
        if generator is not None and not callable(getattr(generator, "randperm", None)):
            raise TypeError(f"DataLoader: generator must have a randperm(n) method (like nt.data.Generator), "
                            f"got a {type(generator).__name__}.")
        if sampler is not None:
            if not (hasattr(sampler, "__iter__") and hasattr(sampler, "__len__")):
                raise TypeError(f"DataLoader: sampler must be an iterable of indices with a length, "
                                f"got a {type(sampler).__name__}.")
            if shuffle:
                raise ValueError("DataLoader: give shuffle=True or a sampler, not both (the sampler "
                                 "decides the order; DistributedSampler shuffles by itself).")
        self.sampler = sampler
        if not isinstance(pin_memory, bool):
            raise TypeError(f"DataLoader: pin_memory must be True or False, got {pin_memory!r}.")
        self.pin_memory = pin_memory
        self.device = device
        self._deliver = cuda.loader_delivery(pin_memory, device)  # None: batches as collated
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.names = names
        self.collate_fn = collate_fn
        self.generator = generator if generator is not None else Generator(seed)
        self._fast = (collate_fn is None and isinstance(dataset, TensorDataset)
                      and type(dataset).__getitem__ is TensorDataset.__getitem__)
        if self._fast and names is not None:
            for i, (t, ax) in enumerate(zip(dataset.tensors, dataset.axes)):
                _check_free(names, _names.remove(t.names, ax), f"tensor {i} of the dataset")

    def __len__(self) -> int:
        n = len(self.dataset if self.sampler is None else self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        batches = self._batches()
        return batches if self._deliver is None else self._deliver(batches)

    def _batches(self) -> Iterator[Any]:
        order = self._order(len(self.dataset))
        n = len(order)
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            indices = order[start:start + self.batch_size]
            if self._fast:
                yield self._take(indices)
            else:
                samples = [self.dataset[i] for i in indices]
                yield self.collate_fn(samples) if self.collate_fn is not None else collate(samples, self.names)

    def _order(self, n: int) -> Sequence[int]:
        if self.sampler is not None:
            return list(self.sampler)
        if not self.shuffle:
            return range(n)
        order = list(self.generator.randperm(n))
        if len(order) != n:
            raise ValueError(f"DataLoader: the generator's randperm({n}) returned {len(order)} indices.")
        return order

    def _take(self, indices: Sequence[int]) -> tuple:
        """One ``index_select`` per tensor, its sample dim moved first and named ``names``."""
        out = []
        for t, ax in zip(self.dataset.tensors, self.dataset.axes):
            b = index_select(t, ax, tensor(list(indices), dtype=_dtypes.int64, device=t.device))
            if ax != 0:
                b = permute(b, ax, *(i for i in range(t.ndim) if i != ax))
            out.append(rename(b, self.names, *b.names[1:]))
        return tuple(out)

    def __repr__(self) -> str:
        return (f"DataLoader({type(self.dataset).__name__} of {len(self.dataset)}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, drop_last={self.drop_last}, names={self.names!r})")


def _check_free(name: str, sample_names: tuple, what: str) -> None:
    if name in sample_names:
        raise _names.NamesError(
            f"DataLoader: the batch dim name {name!r} is already a dim of {what} (names "
            f"{_names.fmt(sample_names)}); pass another names= to the DataLoader, or rename that dim."
        )


def collate(samples: list, names: Optional[str] = "batch", _path: str = "sample") -> Any:
    """The default collation: stack tensors (new leading dim ``names``), make numbers a 1-D tensor,
    collate tuples, lists and dicts item by item, and gather strings into a list."""
    first = samples[0]
    if isinstance(first, Tensor):
        if not all(isinstance(s, Tensor) for s in samples):
            raise TypeError(f"DataLoader: {_path} is a Tensor in some samples and not in others.")
        if names is None:
            return stack(samples, 0)
        _check_free(names, first.names, _path)
        return stack(samples, names)
    if isinstance(first, (bool, int, float)):
        if not all(isinstance(s, (bool, int, float)) for s in samples):
            raise TypeError(f"DataLoader: {_path} is a number in some samples and not in others.")
        return tensor(samples, names=(names,))
    if isinstance(first, str):
        return list(samples)
    if isinstance(first, dict):
        keys = list(first)
        for s in samples:
            if not isinstance(s, dict) or set(s) != set(keys):
                other = sorted(map(repr, s)) if isinstance(s, dict) else repr(s)
                raise ValueError(f"DataLoader: the samples' dicts at {_path} have different keys: "
                                 f"{sorted(map(repr, keys))} vs {other}.")
        return {k: collate([s[k] for s in samples], names, f"{_path}[{k!r}]") for k in keys}
    if isinstance(first, (tuple, list)):
        if any(not isinstance(s, (tuple, list)) or len(s) != len(first) for s in samples):
            raise ValueError(f"DataLoader: the samples' sequences at {_path} have different lengths.")
        items = [collate([s[i] for s in samples], names, f"{_path}[{i}]") for i in range(len(first))]
        if hasattr(first, "_fields"):  # a namedtuple
            return type(first)(*items)
        return tuple(items) if isinstance(first, tuple) else items
    raise TypeError(
        f"DataLoader: cannot collate {_path} of type {type(first).__name__}; samples may be tensors, numbers, "
        "strings, and tuples, lists or dicts of those. Pass collate_fn= to batch other objects."
    )
