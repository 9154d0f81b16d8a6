"""The standard's searching, sorting and set functions, on the library's reductions and sorting.

``argmax``/``argmin``/``count_nonzero`` follow the reductions' name rule, ``sort``/``argsort`` and
``where`` keep (unify) names; ``nonzero searchsorted unique_*`` are :mod:`namedtensor.ops.sets`'s
(their name rules there).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple, Union

from ..ops import reductions as R, sets as S, sorting as So
from ..ops.elementwise import ne, where as _where
from ..ops.naming import astype as _astype
from ..tensor import Tensor
from ._common import Axes, Axis


def argmax(x: Tensor, /, *, axis: Optional[Axis] = None, keepdims: bool = False) -> Tensor:
    """The index of the first largest value along ``axis`` (in the flattened ``x`` where None)."""
    return R.argmax(x, dim=axis, keepdim=keepdims)


def argmin(x: Tensor, /, *, axis: Optional[Axis] = None, keepdims: bool = False) -> Tensor:
    """The index of the first smallest value along ``axis``."""
    return R.argmin(x, dim=axis, keepdim=keepdims)


def count_nonzero(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """The number of non-zero elements over ``axis`` (int64)."""
    nz = _astype(ne(x, 0), "int64")
    return _astype(nz, "int64") if axis == () else R.sum(nz, dim=axis, keepdim=keepdims)


def where(condition: Tensor, x1: Union[Tensor, int, float, bool], x2: Union[Tensor, int, float, bool], /) -> Tensor:
    """``x1`` where ``condition`` holds, else ``x2``; the three operands' names unify."""
    return _where(condition, x1, x2)


def sort(x: Tensor, /, *, axis: Axis = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """``x`` sorted along ``axis`` (values only, the library's ``sort`` gives indices too)."""
    return So.sort(x, axis, descending=descending, stable=stable).values


def argsort(x: Tensor, /, *, axis: Axis = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """The indices that sort ``x`` along ``axis``, with ``x``'s names."""
    return So.argsort(x, axis, descending=descending, stable=stable)


def nonzero(x: Tensor, /) -> Tuple[Tensor, ...]:
    """The coordinates of the nonzero entries, one 1-D int64 tensor per dim (PyTorch's ``as_tuple=True``)."""
    if x.ndim == 0:
        raise ValueError("nonzero: a 0-dim array has no coordinates; the standard asks for at least 1 dim.")
    return S.nonzero(x, as_tuple=True)


def searchsorted(x1: Tensor, x2: Tensor, /, *, side: str = "left", sorter: Optional[Tensor] = None) -> Tensor:
    """Where each element of ``x2`` goes in the 1-D sorted ``x1`` (``side``: before or after equal ones)."""
    if x1.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D (the standard's), got {x1.ndim} dims.")
    return S.searchsorted(x1, x2, side=side, sorter=sorter)


class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


def unique_all(x: Tensor, /) -> UniqueAllResult:
    """The sorted unique values of ``x`` (flat; each NaN distinct), the flat index of each one's first
    occurrence, each element's index into the values (``x``'s shape and names) and each value's count."""
    r = S._unique_all(x, None, True, "unique_all")
    return UniqueAllResult(r.values, r.indices, r.inverse_indices, r.counts)


def unique_counts(x: Tensor, /) -> UniqueCountsResult:
    """The sorted unique values of ``x`` and their counts."""
    r = S._unique_all(x, None, True, "unique_counts")
    return UniqueCountsResult(r.values, r.counts)


def unique_inverse(x: Tensor, /) -> UniqueInverseResult:
    """The sorted unique values of ``x`` and each element's index into them (``x``'s shape)."""
    r = S._unique_all(x, None, True, "unique_inverse")
    return UniqueInverseResult(r.values, r.inverse_indices)


def unique_values(x: Tensor, /) -> Tensor:
    """The sorted unique values of ``x`` (flat)."""
    return S._unique_all(x, None, True, "unique_values").values


__all__ = ["argmax", "argmin", "argsort", "count_nonzero", "nonzero", "searchsorted", "sort", "unique_all",
           "unique_counts", "unique_inverse", "unique_values", "where"]
