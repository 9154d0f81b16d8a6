"""The standard's indexing and linear algebra functions, on :mod:`namedtensor.ops.indexing` and
:mod:`namedtensor.ops.linalg`.

``take`` is ``index_select`` (a named index's name replaces the dim's), ``take_along_axis`` is
``gather``; ``matmul`` contracts by position, names checked; ``matrix_transpose`` swaps the last
two dims with their names; ``vecdot`` reduces the names of ``axis``.  ``tensordot`` is missing.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from ..ops.elementwise import mul
from ..ops.indexing import gather, index_select
from ..ops.linalg import matmul
from ..ops.reductions import sum as _sum
from ..tensor import Tensor
from ._common import Axis, missing


def take(x: Tensor, indices: Tensor, /, *, axis: Optional[Axis] = None) -> Tensor:
    """The elements of ``x`` at the 1-D ``indices`` along ``axis`` (of the flattened ``x`` where None)."""
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for a tensor of {x.ndim} dims.")
        axis = 0
    return index_select(x, axis, indices)


def take_along_axis(x: Tensor, indices: Tensor, /, *, axis: Axis = -1) -> Tensor:
    """The elements of ``x`` at ``indices`` along ``axis`` (``gather``'s name rule)."""
    return gather(x, axis, indices)


def matrix_transpose(x: Tensor, /) -> Tensor:
    """``x`` with its last two dims (and their names) swapped."""
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: x needs at least 2 dims, it has {x.ndim}.")
    return x.mT


def vecdot(x1: Tensor, x2: Tensor, /, *, axis: Axis = -1) -> Tensor:
    """The dot product along ``axis`` of the broadcast operands (names unify, ``axis``'s goes)."""
    return _sum(mul(x1, x2), axis)


def tensordot(x1: Tensor, x2: Tensor, /, *, axes: Union[int, Tuple[Sequence[int], Sequence[int]]] = 2) -> Any:
    """Not implemented: use ``nt.dot(x1, x2, over=...)``, which contracts by name."""
    raise missing("tensordot", "the positional contraction (nt.dot contracts by name)")


__all__ = ["matmul", "matrix_transpose", "take", "take_along_axis", "tensordot", "vecdot"]
