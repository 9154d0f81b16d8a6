"""The standard's ``linalg`` extension (``xp.linalg``), on :mod:`namedtensor.ops.matrix`.

The standard's spellings: positional-only tensors, ``axis=``/``keepdims=`` (names or ints, rule 3), ``ord=``
last, ``rtol=`` alone where PyTorch also has ``atol=``.  Names follow ``nt.linalg``'s rules: the matrix dims
are the last two.  ``solve(x1, x2)`` treats ``x2`` as a vector only when it is 1-D (the standard's rule;
PyTorch's also takes a batch of vectors shaped like ``x1`` without its last dim).
"""

from __future__ import annotations

from typing import Literal, Sequence, Tuple, Union

from ..ops import matrix as _m
from ..ops.linalg import matmul, outer
from ..tensor import Tensor
from ._common import Axes, Axis
from .indexing import vecdot


def cholesky(x: Tensor, /, *, upper: bool = False) -> Tensor:
    """The Cholesky factor, lower (upper when ``upper``)."""
    return _m.cholesky(x, upper=upper)


def cross(x1: Tensor, x2: Tensor, /, *, axis: Axis = -1) -> Tensor:
    """The cross product of 3-vectors along ``axis``."""
    return _m.cross(x1, x2, dim=axis)


def det(x: Tensor, /) -> Tensor:
    """The determinant of each matrix."""
    return _m.det(x)


def diagonal(x: Tensor, /, *, offset: int = 0) -> Tensor:
    """The diagonal of the last two dims (a new unnamed last dim)."""
    return _m.diagonal(x, offset=offset)


def eigh(x: Tensor, /) -> _m.EighResult:
    """``(eigenvalues, eigenvectors)`` of each symmetric (Hermitian) matrix; the eigenvalues are real."""
    return _m.eigh(x)


def eigvalsh(x: Tensor, /) -> Tensor:
    """The eigenvalues of each symmetric (Hermitian) matrix, ascending and real."""
    return _m.eigvalsh(x)


def inv(x: Tensor, /) -> Tensor:
    """The inverse of each matrix."""
    return _m.inv(x)


def matrix_norm(x: Tensor, /, *, keepdims: bool = False,
                ord: Union[int, float, Literal["fro", "nuc"], None] = "fro") -> Tensor:
    """A matrix norm over the last two dims."""
    return _m.matrix_norm(x, ord, keepdim=keepdims)


def matrix_power(x: Tensor, n: int, /) -> Tensor:
    """``x`` to the integer power ``n``."""
    return _m.matrix_power(x, n)


def matrix_rank(x: Tensor, /, *, rtol: Union[float, Tensor, None] = None) -> Tensor:
    """The number of singular values above ``rtol`` times the largest (default: eps * max(M, N))."""
    return _m.matrix_rank(x, rtol=rtol)


def matrix_transpose(x: Tensor, /) -> Tensor:
    """``x`` with its last two dims (and their names) swapped."""
    return _m.matrix_transpose(x)


def pinv(x: Tensor, /, *, rtol: Union[float, Tensor, None] = None) -> Tensor:
    """The pseudo-inverse; names ``(..., col, row)``."""
    return _m.pinv(x, rtol=rtol)


def qr(x: Tensor, /, *, mode: Literal["reduced", "complete"] = "reduced") -> _m.QRResult:
    """``(Q, R)``."""
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}.")
    return _m.qr(x, mode)


def slogdet(x: Tensor, /) -> _m.SlogdetResult:
    """``(sign, logabsdet)`` of each matrix's determinant."""
    return _m.slogdet(x)


def solve(x1: Tensor, x2: Tensor, /) -> Tensor:
    """The solution of ``x1 @ x = x2``: ``x2`` is a vector when 1-D, else a stack of matrices."""
    if x2.ndim > 1 and x2.ndim == x1.ndim - 1 and tuple(x2.shape) == tuple(x1.shape[:-1]):
        # PyTorch would read this x2 as a batch of vectors: a leading unit batch dim keeps it a matrix
        return _m.solve(x1, x2[None])
    return _m.solve(x1, x2)


def svd(x: Tensor, /, *, full_matrices: bool = True) -> _m.SVDResult:
    """``(U, S, Vh)``."""
    return _m.svd(x, full_matrices)


def svdvals(x: Tensor, /) -> Tensor:
    """The singular values, descending."""
    return _m.svdvals(x)


def tensordot(x1: Tensor, x2: Tensor, /, *, axes: Union[int, Tuple[Sequence[Axis], Sequence[Axis]]] = 2) -> Tensor:
    """Contract ``x1``'s last ``axes`` dims with ``x2``'s first, or the pairs ``axes=(axes1, axes2)``."""
    return _m.tensordot(x1, x2, axes)


def trace(x: Tensor, /, *, offset: int = 0, dtype=None) -> Tensor:
    """The sum of the diagonal ``offset`` of the last two dims."""
    return _m.trace(x, offset, dtype=dtype)


def vector_norm(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False, ord: Union[int, float] = 2) -> Tensor:
    """The vector ``ord``-norm over ``axis`` (None: every dim)."""
    return _m.vector_norm(x, ord, axis, keepdims)


__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
           "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
           "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]
