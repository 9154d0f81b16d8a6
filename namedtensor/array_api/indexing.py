"""The standard's indexing and linear algebra functions, on :mod:`namedtensor.ops.indexing` and
:mod:`namedtensor.ops.linalg`.

``take`` is ``index_select`` (a named index's name replaces the dim's), ``take_along_axis`` is
``gather``; ``matmul`` contracts by position, names checked; ``matrix_transpose`` swaps the last
two dims with their names; ``vecdot`` (also ``linalg.vecdot``) broadcasts its operands, names unified,
and reduces ``axis``, which it does not broadcast; ``tensordot`` is ``nt.tensordot`` (contracted names
checked).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

from ..ops.complex import conj
from ..ops.elementwise import mul
from ..ops.indexing import gather, index_select
from ..ops.linalg import matmul
from ..ops.matrix import tensordot as _tensordot
from ..ops.reductions import sum as _sum
from ..tensor import Tensor
from ._common import Axis, axis as _axis


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
    """The dot product ``sum(conj(x1) * x2)`` along ``axis`` of the broadcast operands (names unify, ``axis``'s
    goes).  As the standard says, the operands have one size along ``axis`` (it does not broadcast) and the
    result has their promoted dtype, integers included (``sum`` would widen them)."""
    product = mul(conj(x1), x2)
    ax = _axis(product, axis, "vecdot")
    sizes = [t.shape[ax - product.ndim + t.ndim] if ax - product.ndim + t.ndim >= 0 else 1 for t in (x1, x2)]
    if sizes[0] != sizes[1]:
        raise ValueError(f"vecdot: the operands must have the same size along axis {axis!r}, got {sizes[0]} and "
                         f"{sizes[1]} (shapes {tuple(x1.shape)} and {tuple(x2.shape)}).")
    out = _sum(product, ax)
    # an integer sum modulo the dtype's range: the same wrap-around as summing in the narrow dtype
    return out if out.dtype is product.dtype else out.astype(product.dtype)


def tensordot(x1: Tensor, x2: Tensor, /, *, axes: Union[int, Tuple[Sequence[Axis], Sequence[Axis]]] = 2) -> Tensor:
    """Contract ``x1``'s last ``axes`` dims with ``x2``'s first, or the pairs ``axes=(axes1, axes2)`` (names or
    ints); contracted names must be equal where both are named."""
    return _tensordot(x1, x2, axes)


__all__ = ["matmul", "matrix_transpose", "take", "take_along_axis", "tensordot", "vecdot"]
