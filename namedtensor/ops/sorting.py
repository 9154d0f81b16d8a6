"""Sorting along a dim: ``sort``, ``argsort``, ``topk``.

Name rule: the output keeps the input's names; the sorted dim keeps its name
(``topk`` shortens it to ``k`` entries but it is still the same dim).  ``sort``
and ``topk`` return ``(values, indices)`` like PyTorch.

Values are a :func:`~namedtensor.ops.indexing.gather` of the input at the sorted
indices, so their gradient scatters back to the source positions (at any order).
"""

from __future__ import annotations

from typing import NamedTuple

from .. import _names
from ..tensor import Tensor
from .indexing import gather

__all__ = ["ValuesIndices", "argsort", "sort", "topk"]


class ValuesIndices(NamedTuple):
    """What ``sort``, ``topk`` and ``max``/``min`` along a dim return."""

    values: Tensor
    indices: Tensor


def _sort_order(t: Tensor, ax: int, descending: bool, stable: bool) -> Tensor:
    B = t._B
    return Tensor._make(B.sort_indices(t._data, ax, bool(descending), bool(stable)), t._names, B)


def sort(t: Tensor, dim=-1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """Sort along ``dim`` (a name or an int); returns ``(values, indices)``, both with ``t``'s names.

    With ``stable=True`` equal values keep their order; NaN sorts as the largest value.
    """
    ax = _names.axis(t._names, dim, "sort")
    idx = _sort_order(t, ax, descending, stable)
    return ValuesIndices(gather(t, ax, idx), idx)


def argsort(t: Tensor, dim=-1, descending: bool = False, stable: bool = False) -> Tensor:
    """The int64 indices that sort ``t`` along ``dim``; keeps ``t``'s names (no gradient)."""
    ax = _names.axis(t._names, dim, "argsort")
    return _sort_order(t, ax, descending, stable)


def topk(t: Tensor, k: int, dim=-1, largest: bool = True, sorted: bool = True) -> ValuesIndices:  # noqa: A002
    """The ``k`` largest (or smallest) entries along ``dim``: ``(values, indices)``, keeping ``t``'s names.

    Results always come sorted (``sorted=False`` is accepted for PyTorch compatibility); among
    equal values the first ones win.
    """
    ax = _names.axis(t._names, dim, "topk")
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__} {k!r}.")
    n = t._data.shape[ax]
    if not 0 <= k <= n:
        raise ValueError(
            f"topk: k={k} is out of range for dim {ax} of size {n} (names {_names.fmt(t._names)}); "
            f"k must be in [0, {n}]."
        )
    order = _sort_order(t, ax, largest, True)
    B = t._B
    idx = Tensor._make(order._data[(slice(None),) * ax + (slice(0, k), ...)], t._names, B)
    return ValuesIndices(gather(t, ax, idx), idx)


METHODS = {"sort": sort, "argsort": argsort, "topk": topk}
