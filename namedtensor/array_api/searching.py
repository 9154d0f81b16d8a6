"""The standard's searching, sorting and set functions, on the library's reductions and sorting.

``argmax``/``argmin``/``count_nonzero`` follow the reductions' name rule, ``sort``/``argsort`` and
``where`` keep (unify) names.  Missing: ``nonzero searchsorted unique_*`` (no library op for
them yet); they raise NotImplementedError.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from ..ops import reductions as R, sorting as So
from ..ops.elementwise import ne, where as _where
from ..ops.naming import astype as _astype
from ..tensor import Tensor
from ._common import Axes, Axis, missing


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


def nonzero(x: Tensor, /) -> Any:
    """Not implemented: namedtensor has no ``nonzero`` op yet."""
    raise missing("nonzero", "namedtensor has no nonzero op (a data-dependent shape)")


def searchsorted(x1: Tensor, x2: Tensor, /, *, side: str = "left", sorter: Optional[Tensor] = None) -> Tensor:
    """Not implemented: namedtensor has no ``searchsorted`` op yet."""
    raise missing("searchsorted", "namedtensor has no searchsorted op")


def unique_all(x: Tensor, /) -> Any:
    """Not implemented: namedtensor has no ``unique`` op yet."""
    raise missing("unique_all", "namedtensor has no unique op")


def unique_counts(x: Tensor, /) -> Any:
    """Not implemented: namedtensor has no ``unique`` op yet."""
    raise missing("unique_counts", "namedtensor has no unique op")


def unique_inverse(x: Tensor, /) -> Any:
    """Not implemented: namedtensor has no ``unique`` op yet."""
    raise missing("unique_inverse", "namedtensor has no unique op")


def unique_values(x: Tensor, /) -> Tensor:
    """Not implemented: namedtensor has no ``unique`` op yet."""
    raise missing("unique_values", "namedtensor has no unique op")


__all__ = ["argmax", "argmin", "argsort", "count_nonzero", "nonzero", "searchsorted", "sort", "unique_all",
           "unique_counts", "unique_inverse", "unique_values", "where"]
