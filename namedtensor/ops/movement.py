"""Moving and copying entries without changing their dims: ``flip``, ``roll``, ``repeat``, ``tile``,
``tril`` and ``triu``.

Name rule: all keep the input's names.  ``repeat``/``tile`` may add leading dims (when given more
repetitions than the tensor has dims); those are unnamed (``_names.broadcast_to`` onto unnamed dims).
Dims are given by name or position.  Each gradient is the op's adjoint: flip again, roll back, sum
the tiles, mask again.
"""

from __future__ import annotations

import operator
from typing import Sequence, Union

from .. import _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import with_names
from ._common import int_sizes
from .shape import _reshape

__all__ = ["flip", "roll", "tile", "tril", "triu"]

Dim = Union[str, int]


def _dims(dims) -> tuple:
    """``f(0, 1)``, ``f((0, 1))`` and ``f("seq")`` alike, as a tuple."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return _names.hashable_dims(tuple(dims))


# ----------------------------------------------------------------------------- flip / roll


class _Flip(Op):
    name = "flip"
    complex_grad = True

    @staticmethod
    def forward(B, x, axes):
        # a copy, as PyTorch's flip is (NumPy's is a view): a write into the result must not reach the input
        return B.asarray(B.flip(x, axis=axes), copy=True)

    @staticmethod
    def backward(node, g):
        return (apply(_Flip, (g,), node.in_names[0], axes=node.params["axes"]),)


def flip(t: Tensor, *dims: Dim) -> Tensor:
    """Reverse the order of entries along ``dims`` (names or ints; ``t.flip("seq")``, ``t.flip(0, 1)``
    or ``t.flip((0, 1))``).  Keeps the names; a copy, as in PyTorch (NumPy's ``flip`` is a view)."""
    if not dims:
        raise TypeError("flip: missing the dims to reverse (names or ints), as in PyTorch; NumPy's flip of every "
                        "dim is t.flip(tuple(range(t.ndim))).")
    axes = _names.axes(t._names, _dims(dims), "flip")
    return apply(_Flip, (t,), t._names, axes=axes)


class _Roll(Op):
    name = "roll"
    complex_grad = True

    @staticmethod
    def forward(B, x, shifts, axes):
        return B.roll(x, shift=shifts, axis=axes)

    @staticmethod
    def backward(node, g):
        p = node.params
        back = tuple(-s for s in p["shifts"]) if isinstance(p["shifts"], tuple) else -p["shifts"]
        return (apply(_Roll, (g,), node.in_names[0], shifts=back, axes=p["axes"]),)


def roll(t: Tensor, shifts: Union[int, Sequence[int]], dims: Union[Dim, Sequence[Dim], None] = None) -> Tensor:
    """Shift entries circularly by ``shifts`` along ``dims`` (a name, an int or a tuple of them, with one
    shift each).  Without ``dims`` the tensor is rolled as if flattened.  Keeps the names."""
    if dims is None:
        if isinstance(shifts, (tuple, list)):
            if len(shifts) != 1:
                raise ValueError(f"roll: without dims, shifts must be one int, got {tuple(shifts)!r}.")
            shifts = shifts[0]
        return apply(_Roll, (t,), t._names, shifts=int_sizes((shifts,), "roll")[0], axes=None)
    axes = _names.axes(t._names, _names.hashable_dims(dims), "roll")
    shift_tuple = int_sizes((shifts,) if isinstance(shifts, (tuple, list)) else (shifts,), "roll")
    if len(shift_tuple) != len(axes):
        raise ValueError(
            f"roll: got {len(shift_tuple)} shifts {shift_tuple} for {len(axes)} dims {dims!r}; give one shift per dim."
        )
    return apply(_Roll, (t,), t._names, shifts=shift_tuple, axes=axes)


# ----------------------------------------------------------------------------- repeat / tile


class _Tile(Op):
    """Tile ``x`` ``reps`` times (``len(reps) >= x.ndim``; extra reps add leading dims)."""

    name = "tile"
    complex_grad = True

    @staticmethod
    def forward(B, x, reps):
        return B.tile(x, reps)

    @staticmethod
    def backward(node, g):
        # Each output dim of size r*s is r blocks of s: view it as (r, s) and sum over the r axes.
        reps = node.params["reps"]
        shape, names = node.in_shapes[0], node.in_names[0]
        lead = len(reps) - len(shape)
        split = list(reps[:lead])
        for r, s in zip(reps[lead:], shape):
            split += [r, s]
        summed = tuple(range(lead)) + tuple(lead + 2 * i for i in range(len(shape)))
        blocks = _reshape(g, tuple(split), _names.unnamed(len(split)))
        return (with_names(blocks.sum(summed), names),)


def _tile(t: Tensor, reps: tuple, op: str) -> Tensor:
    if any(r < 0 for r in reps):
        raise ValueError(f"{op}: repetitions must be non-negative, got {reps}.")
    names = _names.broadcast_to(t._names, _names.unnamed(len(reps)), op)
    return apply(_Tile, (t,), names, reps=reps)


def repeat(t: Tensor, *sizes: int) -> Tensor:
    """PyTorch's ``repeat``: tile the tensor ``sizes[i]`` times along dim ``i``.  ``sizes`` needs at least
    one entry per dim; extra entries add leading unnamed dims.  Keeps the names."""
    reps = int_sizes(sizes, "repeat")
    if len(reps) < t.ndim:
        raise ValueError(
            f"repeat: got {len(reps)} repetitions {reps} for a tensor with {t.ndim} dims {_names.fmt(t._names)}; "
            "give at least one per dim (or use tile, which fills in 1s)."
        )
    return _tile(t, reps, "repeat")


def tile(t: Tensor, reps: Sequence[int]) -> Tensor:
    """NumPy's (and PyTorch's) ``tile``: like :func:`repeat`, but fewer ``reps`` than dims are padded
    with 1s in front.  Keeps the names; extra reps add leading unnamed dims."""
    reps = int_sizes((reps,) if isinstance(reps, (tuple, list)) else (reps,), "tile")
    return _tile(t, (1,) * (t.ndim - len(reps)) + reps, "tile")


# ----------------------------------------------------------------------------- tril / triu


class _Tril(Op):
    """Zero the entries above diagonal ``k`` of the last two dims; its adjoint is itself."""

    name = "tril"
    complex_grad = True

    @staticmethod
    def forward(B, x, k):
        return B.tril(x, k)

    @staticmethod
    def backward(node, g):
        return (apply(node.op, (g,), node.in_names[0], k=node.params["k"]),)


class _Triu(_Tril):
    """Zero the entries below diagonal ``k``."""

    name = "triu"

    @staticmethod
    def forward(B, x, k):
        return B.triu(x, k)


def _tri(t: Tensor, diagonal: int, op: type) -> Tensor:
    if t.ndim < 2:
        raise ValueError(f"{op.name}: needs at least 2 dims (it acts on the last two), got {t.ndim} dims {t.shape}.")
    if isinstance(diagonal, bool) or not hasattr(diagonal, "__index__"):
        raise TypeError(f"{op.name}: diagonal must be an int, got {diagonal!r}.")
    return apply(op, (t,), t._names, k=operator.index(diagonal))


def tril(t: Tensor, diagonal: int = 0) -> Tensor:
    """Zero the entries above the ``diagonal``-th diagonal of the last two dims.  Keeps the names."""
    return _tri(t, diagonal, _Tril)


def triu(t: Tensor, diagonal: int = 0) -> Tensor:
    """Zero the entries below the ``diagonal``-th diagonal of the last two dims.  Keeps the names."""
    return _tri(t, diagonal, _Triu)


METHODS = {"flip": flip, "roll": roll, "repeat": repeat, "tile": tile, "tril": tril, "triu": triu}
