"""Sorting along a dim: ``sort``, ``argsort``, ``topk``.

Name rule: the output keeps the input's names; the sorted dim keeps its name
(``topk`` shortens it to ``k`` entries but it is still the same dim).  ``sort``
and ``topk`` return ``(values, indices)`` like PyTorch.

Values are a :func:`~namedtensor.ops.indexing.gather` of the input at the sorted
indices, so their gradient scatters back to the source positions (at any order).
"""

from __future__ import annotations

import operator
from typing import NamedTuple, Optional, Union

from .. import _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import flag
from .indexing import gather

Dim = Union[str, int]

__all__ = ["ValuesIndices", "argsort", "sort", "topk"]


class ValuesIndices(NamedTuple):
    """What ``sort``, ``topk`` and ``max``/``min`` along a dim return."""

    values: Tensor
    indices: Tensor


class _Argsort(Op):
    """The int64 order along ``axis``, cut to its first ``k`` entries unless ``k`` is None."""

    name = "argsort"
    differentiable = False

    @staticmethod
    def forward(B, x, axis, descending, stable, k):
        order = B.sort_indices(x, axis, descending, stable)
        if k is None:
            return order
        return order[(slice(None),) * axis + (slice(0, k), ...)]


def _order(t: Tensor, ax: int, descending: bool, stable: bool, k: Optional[int] = None) -> Tensor:
    return apply(_Argsort, (t,), t._names, axis=ax, descending=bool(descending), stable=bool(stable), k=k)


def sort(t: Tensor, dim: Dim = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """Sort along ``dim`` (a name or an int); returns ``(values, indices)``, both with ``t``'s names.

    With ``stable=True`` equal values keep their order; NaN sorts as the largest value.
    """
    ax = _names.axis(t._names, dim, "sort")
    idx = _order(t, ax, flag(descending, "descending", "sort"), flag(stable, "stable", "sort"))
    return ValuesIndices(gather(t, ax, idx), idx)


def argsort(t: Tensor, dim: Dim = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The int64 indices that sort ``t`` along ``dim``; keeps ``t``'s names (no gradient)."""
    return _order(t, _names.axis(t._names, dim, "argsort"), flag(descending, "descending", "argsort"),
                  flag(stable, "stable", "argsort"))


def topk(t: Tensor, k: int, dim: Dim = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:
    """The ``k`` largest (or smallest) entries along ``dim``: ``(values, indices)``, keeping ``t``'s names.

    Results always come sorted (``sorted=False`` is accepted for PyTorch compatibility); among
    equal values the first ones win.
    """
    ax = _names.axis(t._names, dim, "topk")
    largest, _ = flag(largest, "largest", "topk"), flag(sorted, "sorted", "topk")
    if isinstance(k, bool) or not hasattr(k, "__index__"):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__} {k!r}.")
    k = operator.index(k)
    n = t._data.shape[ax]
    if not 0 <= k <= n:
        raise ValueError(
            f"topk: k={k} is out of range for dim {ax} of size {n} (names {_names.fmt(t._names)}); "
            f"k must be in [0, {n}]."
        )
    idx = _order(t, ax, largest, True, k)
    return ValuesIndices(gather(t, ax, idx), idx)


METHODS = {"sort": sort, "argsort": argsort, "topk": topk}
