"""Matrix functions: the Array API standard's ``linalg`` extension with PyTorch's ``torch.linalg`` signatures,
on named tensors; ``namedtensor.linalg`` (``nt.linalg``) re-exports them.

A matrix function works on the two matrix dims given by ``dims=(row, col)`` (names or ints; by default the
last two, as PyTorch), wherever they sit; every other dim is a batch dim, and the result has the batch dims
first, in the input's order, then its own matrix dims.  Name rules (all in :mod:`namedtensor._names`):

* ``inv cholesky matrix_power``: the matrix dims keep their names, ``(row, col)``; ``pinv`` swaps them,
  ``(col, row)`` (its rows are the input's columns) (:func:`~namedtensor._names.matrix_result`).
* ``det slogdet logdet trace matrix_rank svdvals eigvalsh matrix_norm``: the matrix dims go
  (``matrix_norm`` keeps them as size 1 with ``keepdim=True``, as ``vector_norm`` does its ``dim``).
* ``svd`` U ``(row, k)``, S ``(k,)``, Vh ``(k, col)``; ``eigh`` eigenvalues ``(k,)``, eigenvectors
  ``(row, k)``; ``qr`` Q ``(row, k)``, R ``(k, col)``: ``k`` is a new dim named ``name=`` (unnamed by
  default: no name is invented) (:func:`~namedtensor._names.matrix_factors`).
* ``solve(A, B)``: B by position as in PyTorch; its dim that meets A's row dim must have A's row name (where
  both are named) and takes A's column name in X; the batch dims unify (:func:`~namedtensor._names.solve`).
* ``vector_norm`` is ``nt.norm``'s rule, ``linalg_norm`` (``nt.linalg.norm``) ``matrix_norm``'s over a pair
  of dims and ``vector_norm``'s otherwise, ``multi_dot`` a chain of ``matmul``'s; ``vecdot`` and ``cross``
  broadcast by rule 2 and address ``dim`` in the result (:func:`~namedtensor._names.cross`); ``tensordot``
  contracts pairs of dims whose names must be equal where both are named, and keeps a's other dims then b's
  (:func:`~namedtensor._names.tensordot`).

The decompositions are backend methods (``B.inv``, ``B.svd``...: the namespace's own ``linalg``).  Each op
computes on unnamed tensors with the matrix dims last, and the result takes the rule's names at the end, so
no name rule of a forward trips inside a backward.  Gradients are written with tensor ops (double gradients
work): ``eigh``'s and ``svd``'s need distinct eigenvalues / singular values, and only gauge-invariant
functions of the vectors have one; ``det``'s and ``slogdet``'s need an invertible matrix; ``qr``'s exists
for ``mode="reduced"`` (and ``"complete"`` where it equals it); ``svd`` with ``full_matrices=True`` and a
non-square matrix differentiates through the first ``min(m, n)`` columns of U and rows of Vh, as PyTorch.
Complex inputs mean what they mean in ``torch.linalg``: ``eigh``/``eigvalsh``/``cholesky`` read a Hermitian
matrix, ``svd``'s Vh and ``pinv`` use conjugate transposes, ``vecdot`` conjugates ``x``, the norms, ``S``,
eigenvalues and ``logabsdet`` are real; ``matrix_transpose`` does not conjugate.  Their gradients follow
PyTorch's convention (docs/design.md, "Autograd": the real formulas with ``.mH`` for ``.mT``; the phases of
complex singular vectors and eigenvectors are a gauge, as their signs are for real ones).  Integer inputs
are refused, as in PyTorch: convert with ``.double()`` or ``.float()``.  PyTorch's top-level spellings (``torch.inverse``, ``torch.svd`` with V, ``torch.qr(some=)``...)
are at the end of the module; ``nt`` exports them under PyTorch's names.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple, Optional, Sequence, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply, no_grad
from ..tensor import Tensor
from ._common import flag, sum_to, tensor_arg, with_names
from .elementwise import maximum, where
from .indexing import diagonal as _diagonal
from .joining import cat, stack
from .linalg import _check_dtypes, _einsum, _matmul, matmul, outer
from .movement import tril
from .naming import _permute
from .reductions import norm
from .shape import _unsqueeze_axes

Dim = Union[str, int]
MatrixDims = Optional[Tuple[Dim, Dim]]

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm", "matrix_power",
    "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot",
    "trace", "vecdot", "vector_norm", "logdet", "EighResult", "SlogdetResult", "QRResult", "SVDResult",
    "LegacySVDResult", "inverse", "pinverse", "matrix_trace", "torch_cross", "torch_svd", "torch_qr",
    "torch_cholesky", "linalg_norm", "multi_dot",
]

# the machine epsilon of each dtype nt.linalg takes (a complex dtype's is its parts')
_EPS = {_dtypes.float32: 2.0 ** -23, _dtypes.float64: 2.0 ** -52, _dtypes.complex64: 2.0 ** -23,
        _dtypes.complex128: 2.0 ** -52}


class EighResult(NamedTuple):
    """``eigh``'s result: the eigenvalues, ascending, and the eigenvectors as columns."""

    eigenvalues: Tensor
    eigenvectors: Tensor


class SlogdetResult(NamedTuple):
    """``slogdet``'s result: the sign of the determinant and the log of its absolute value."""

    sign: Tensor
    logabsdet: Tensor


class QRResult(NamedTuple):
    """``qr``'s result: ``Q`` with orthonormal columns and upper-triangular ``R``."""

    Q: Tensor
    R: Tensor


class SVDResult(NamedTuple):
    """``svd``'s result: ``A = U @ diag(S) @ Vh``."""

    U: Tensor
    S: Tensor
    Vh: Tensor


# ----------------------------------------------------------------------------- shared steps


def _floating(t, op: str, what: str = "A") -> Tensor:
    """``t``, checked to be a floating-point or complex tensor (PyTorch refuses integers here too)."""
    tensor_arg(t, op, what)
    if t.dtype not in _EPS:
        raise TypeError(f"{op}: {what} must be a float32, float64, complex64 or complex128 tensor, got {t.dtype!r}; "
                        "linear algebra is defined on floating point, as in PyTorch: convert with .double() or "
                        ".float() first.")
    return t


def _complex(t: Tensor) -> bool:
    return t.dtype.kind == "c"



def _hashable(dims) -> object:
    return None if dims is None else _names.hashable_dims(dims)


def _moved(t: Tensor, perm) -> Tensor:
    """``t`` with its matrix dims last (``perm``) and unnamed: the ops compute on it."""
    unnamed = _names.unnamed(t.ndim)
    return with_names(t, unnamed) if perm is None else _permute(t, perm, unnamed)


def _square(m: Tensor, t: Tensor, op: str) -> None:
    rows, cols = m.shape[-2:]
    if rows != cols:
        raise ValueError(f"{op}: A must be a square matrix (or a batch of them), but its matrix dims have sizes "
                         f"{rows} and {cols} (A {_names.fmt(t._names)}, shape {tuple(t.shape)}); pass dims= to "
                         "choose other dims.")


def _plain(t: Tensor) -> Tensor:
    return with_names(t, _names.unnamed(t.ndim))


def _eye(like: Tensor, n: int) -> Tensor:
    """The ``n x n`` identity, unnamed, in ``like``'s dtype and backend (a constant)."""
    B = like._B
    return Tensor._make(B.eye(n, dtype=B.native(like.dtype)), _names.unnamed(2), B)


def _mats(t: Tensor) -> Tensor:
    """A batch of scalars as a batch of 1 x 1 matrices (to scale matrices)."""
    return _unsqueeze_axes(t, (t.ndim, t.ndim + 1))


# ----------------------------------------------------------------------------- inv, det, slogdet


class _Inv(Op):
    name = "linalg.inv"
    complex_grad = True
    saves_output = True

    @staticmethod
    def forward(B, x):
        return B.inv(x)

    @staticmethod
    def backward(node, g):
        # d(A^-1) = -A^-1 dA A^-1, so gA = -A^-H g A^-H (.mH is .mT for real A)
        (y,) = node.saved_tensors()
        yt = y.mH
        return (-(yt @ g @ yt),)


def _inv(m: Tensor) -> Tensor:
    return apply(_Inv, (m,), m._names)


def inv(A: Tensor, *, dims: MatrixDims = None) -> Tensor:
    """The inverse of a square matrix (of each, in a batch), ``torch.linalg.inv``.  The matrix dims keep their
    names ``(row, col)``; batch dims come first.  A singular matrix is a ValueError."""
    perm, names = _names.matrix_result(_floating(A, "linalg.inv")._names, _hashable(dims), "same", "linalg.inv")
    m = _moved(A, perm)
    _square(m, A, "linalg.inv")
    return with_names(_inv(m), names)


class _Det(Op):
    name = "linalg.det"
    complex_grad = True
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x):
        return B.det(x)

    @staticmethod
    def backward(node, g):
        # d det(A) = det(A) tr(A^-1 dA), holomorphic: gA = g conj(det A) A^-H
        a, d = node.saved_tensors()
        return (_mats(g * d.conj()) * _inv(a).mH,)


def det(A: Tensor, *, dims: MatrixDims = None) -> Tensor:
    """The determinant of a square matrix (of each, in a batch), ``torch.linalg.det``: the batch dims' names.
    Its gradient needs an invertible matrix."""
    perm, names = _names.matrix_result(_floating(A, "linalg.det")._names, _hashable(dims), "removed", "linalg.det")
    m = _moved(A, perm)
    _square(m, A, "linalg.det")
    return with_names(apply(_Det, (m,), _names.unnamed(m.ndim - 2)), names)


class _Slogdet(Op):
    name = "linalg.slogdet"
    complex_grad = True
    n_outputs = 2
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x):
        return B.slogdet(x)

    @staticmethod
    def backward(node, g_sign, g_log):
        # d log|det A| = Re tr(A^-1 dA); a real sign is piecewise constant, a complex one turns:
        # d sign = i sign Im tr(A^-1 dA), whose adjoint adds -i Im(conj(g_sign) sign) (PyTorch's slogdet_backward)
        a, sign, _ = node.saved_tensors()
        if _complex(sign):
            g_log = g_log - 1j * (g_sign.conj() * sign).imag
        return (_mats(g_log) * _inv(a).mH,)


def slogdet(A: Tensor, *, dims: MatrixDims = None) -> SlogdetResult:
    """``(sign, logabsdet)`` of the determinant, ``torch.linalg.slogdet``: both have the batch dims' names.
    The gradient goes through ``logabsdet`` and needs an invertible matrix."""
    perm, names = _names.matrix_result(_floating(A, "linalg.slogdet")._names, _hashable(dims), "removed",
                                       "linalg.slogdet")
    m = _moved(A, perm)
    _square(m, A, "linalg.slogdet")
    batch = _names.unnamed(m.ndim - 2)
    sign, logabsdet = apply(_Slogdet, (m,), (batch, batch))
    return SlogdetResult(with_names(sign, names), with_names(logabsdet, names))


def logdet(A: Tensor, *, dims: MatrixDims = None) -> Tensor:
    """``log(det(A))``, ``torch.logdet``: nan where the determinant is negative, ``-inf`` where it is 0; for a
    complex A the complex logarithm ``log|det| + i angle(det)``."""
    sign, logabsdet = slogdet(A, dims=dims)
    if _complex(sign):
        return sign.log() + logabsdet
    return where(sign < 0, math.nan, logabsdet)


# ----------------------------------------------------------------------------- solve


class _Solve(Op):
    name = "linalg.solve"
    complex_grad = True
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, a, b):
        batch = _batch_shape(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
        if tuple(a.shape[:-2]) != batch:
            a = B.broadcast_to(a, batch + tuple(a.shape[-2:]))
        if tuple(b.shape[:-2]) != batch:
            b = B.broadcast_to(b, batch + tuple(b.shape[-2:]))
        return B.solve(a, b)

    @staticmethod
    def backward(node, g):
        # A X = B: dX = A^-1 (dB - dA X), so gB = A^-H g and gA = -gB X^H
        a, x = node.saved_tensors()
        gb = _solve(a.mH, g)
        ga = None if node.edges[0] is None else sum_to(-(gb @ x.mH), node.in_shapes[0], node.in_names[0])
        return ga, sum_to(gb, node.in_shapes[1], node.in_names[1])


def _batch_shape(a: tuple, b: tuple) -> tuple:
    """The broadcast of two batch shapes (NumPy's rule; the name rule has checked the names)."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"linalg.solve: the batch shapes {a} and {b} do not broadcast.")
        out.append(y if x == 1 else x)
    return tuple(out)


def _solve(a: Tensor, b: Tensor) -> Tensor:
    shape = _batch_shape(tuple(a.shape[:-2]), tuple(b.shape[:-2])) + tuple(b.shape[-2:])
    return apply(_Solve, (a, b), _names.unnamed(len(shape)))


def solve(A: Tensor, B: Tensor, *, left: bool = True, dims: MatrixDims = None) -> Tensor:
    """The solution X of ``A @ X = B`` (``X @ A = B`` when not ``left``), ``torch.linalg.solve``.

    A is square (its matrix dims by ``dims=``); B is by position as in PyTorch: ``(..., n, k)``, or a batch
    of vectors ``(..., n)`` when B is 1-D or has A's shape without its last dim.  B's dim ``n`` meets A's
    row dim (its column dim when not ``left``): where both are named the names must be equal, and in X that
    dim takes A's other matrix dim's name.  The batch dims broadcast and unify (rule 2).
    """
    op = "linalg.solve"
    _floating(A, op)
    _floating(B, op, "B")
    if B.ndim == 0:
        raise ValueError(f"{op}: B must have at least 1 dim (a vector or a matrix), got a 0-dim tensor.")
    left = flag(left, "left", op)
    perm, _, _, _ = _names.matrix_dims(A._names, _hashable(dims), op)
    a = _moved(A, perm)
    _square(a, A, op)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(a.shape[:-1]))
    perm, names = _names.solve(A._names, B._names, _hashable(dims), vector, left, op)
    b = _plain(B)
    n = a.shape[-1]
    size = b.shape[-1] if vector or not left else b.shape[-2]
    if B.ndim < (1 if vector else 2) or size != n:
        raise ValueError(f"{op}: B of shape {tuple(B.shape)} (names {_names.fmt(B._names)}) does not fit A's "
                         f"{n} x {n} matrices: B must be (..., {n}, k), or (..., {n}) for vectors"
                         f"{'' if left else ' (left=False: (..., k, ' + str(n) + '))'}.")
    if vector:
        b = _unsqueeze_axes(b, (b.ndim,))
    _check_dtypes(op, (a, b))
    if left:
        x = _solve(a, b)
    else:
        x = _solve(a.mT, b.mT).mT
    if vector:
        x = x.reshape(tuple(x.shape[:-1]))
    return with_names(x, names)


# ----------------------------------------------------------------------------- cholesky


class _Cholesky(Op):
    name = "linalg.cholesky"
    complex_grad = True
    saves_output = True

    @staticmethod
    def forward(B, x):
        return B.cholesky(x)

    @staticmethod
    def backward(node, g):
        # PyTorch's cholesky_backward: gA = L^-H Phi L^-1, Phi the Hermitian part of tril(L^H gL), diagonal halved
        (lo,) = node.saved_tensors()
        p = tril(lo.mH @ g)
        p = (p + tril(p, -1).mH) * 0.5
        lo_inv = _inv(lo)
        return (lo_inv.mH @ p @ lo_inv,)


def cholesky(A: Tensor, *, upper: bool = False, dims: MatrixDims = None) -> Tensor:
    """The Cholesky factor of a symmetric (Hermitian) positive-definite matrix, ``torch.linalg.cholesky``:
    lower triangular ``L`` with ``A = L @ L.mH`` (upper ``U = L.mH`` when ``upper``), read from A's lower
    triangle.  The matrix dims keep their names; a matrix that is not positive definite is a ValueError."""
    op = "linalg.cholesky"
    perm, names = _names.matrix_result(_floating(A, op)._names, _hashable(dims), "same", op)
    m = _moved(A, perm)
    _square(m, A, op)
    lo = apply(_Cholesky, (m,), m._names)
    return with_names(lo.mH if flag(upper, "upper", op) else lo, names)


# ----------------------------------------------------------------------------- eigh, eigvalsh


class _Eigh(Op):
    name = "linalg.eigh"
    complex_grad = True
    n_outputs = 2
    saves_output = True

    @staticmethod
    def forward(B, x):
        return B.eigh(x)

    @staticmethod
    def backward(node, g_values, g_vectors):
        # A = V diag(w) V^H: gA = V (diag(gw) + F o (V^H gV)) V^H with F_ij = 1 / (w_j - w_i), 0 on the diagonal
        # (whose imaginary part, for complex V, is the eigenvectors' phase: gauge-invariant losses leave it 0)
        w, v = node.saved_tensors()
        eye = _eye(w, w.shape[-1])
        gaps = w.unsqueeze(-2) - w.unsqueeze(-1) + eye
        middle = (1 - eye) / gaps * (v.mH @ g_vectors) + g_values.unsqueeze(-1) * eye
        return (v @ middle @ v.mH,)


def _eigh(m: Tensor) -> Tuple[Tensor, Tensor]:
    return apply(_Eigh, (m,), (_names.unnamed(m.ndim - 1), m._names))


def _uplo(m: Tensor, UPLO: str, op: str) -> Tensor:
    """``m`` with the triangle that ``UPLO`` names in the lower one (where the backends read): the upper
    triangle of a Hermitian matrix is the conjugate of its lower one."""
    if UPLO not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}.")
    return m if UPLO == "L" else m.mH


def eigh(A: Tensor, UPLO: str = "L", *, dims: MatrixDims = None, name: Optional[str] = None) -> EighResult:
    """Eigenvalues (ascending, real) and eigenvectors of a symmetric (Hermitian) matrix, ``torch.linalg.eigh``,
    read from its lower (``UPLO="L"``) or upper triangle.  Eigenvalues ``(..., k)``, eigenvectors ``(..., row, k)``: ``k``
    is a new dim named ``name`` (unnamed by default).  Gradients need distinct eigenvalues, and only
    functions that do not depend on the eigenvectors' signs (phases) have one."""
    op = "linalg.eigh"
    perm, (values, vectors) = _names.matrix_factors(_floating(A, op)._names, _hashable(dims), name, "eigh", op)
    m = _moved(A, perm)
    _square(m, A, op)
    w, v = _eigh(_uplo(m, UPLO, op))
    return EighResult(with_names(w, values), with_names(v, vectors))


class _Eigvalsh(Op):
    name = "linalg.eigvalsh"
    complex_grad = True
    saves = (0,)

    @staticmethod
    def forward(B, x):
        return B.eigh(x)[0]

    @staticmethod
    def backward(node, g):
        (a,) = node.saved_tensors()
        _, v = _eigh(a)  # recomputed as an op, so that the second derivative sees the vectors move
        return ((v * g.unsqueeze(-2)) @ v.mH,)


def eigvalsh(A: Tensor, UPLO: str = "L", *, dims: MatrixDims = None) -> Tensor:
    """The eigenvalues (ascending, real) of a symmetric (Hermitian) matrix, ``torch.linalg.eigvalsh``:
    ``(..., k)``, ``k`` unnamed.  The gradient needs distinct eigenvalues."""
    op = "linalg.eigvalsh"
    perm, names = _names.matrix_result(_floating(A, op)._names, _hashable(dims), "values", op)
    m = _moved(A, perm)
    _square(m, A, op)
    return with_names(apply(_Eigvalsh, (_uplo(m, UPLO, op),), _names.unnamed(m.ndim - 1)), names)


# ----------------------------------------------------------------------------- qr


class _Qr(Op):
    name = "linalg.qr"
    complex_grad = True
    n_outputs = 2
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x, mode):
        return B.qr(x, mode)

    @staticmethod
    def backward(node, g_q, g_r):
        a, q, r = node.saved_tensors()
        m, n = node.in_shapes[0][-2:]
        if node.params["mode"] == "complete" and m > n:
            raise NotImplementedError(
                "linalg.qr: the gradient of mode='complete' with more rows than columns is not defined (Q's last "
                "columns are not unique); use mode='reduced'.")
        if m >= n:
            return (_qr_grad(q, r, g_q, g_r),)
        # wide A = [X | Y]: X = Q U is the square case, Y = Q V adds gQ += Y gV^H and gives gY = Q gV
        g_u, g_v = g_r[..., :m], g_r[..., m:]
        g_x = _qr_grad(q, r[..., :m], g_q + a[..., m:] @ g_v.mH, g_u)
        return (cat([g_x, q @ g_v], -1),)


def _qr_grad(q: Tensor, r: Tensor, g_q: Tensor, g_r: Tensor) -> Tensor:
    """The gradient of a reduced QR with at least as many rows as columns:
    ``gA = (gQ + Q copyltu(M)) R^-H``, ``M = R gR^H - gQ^H Q`` (copyltu: the Hermitian matrix of M's lower
    triangle).  R's diagonal is real (LAPACK's Householder QR, which every backend runs), so Q^H dQ has an
    imaginary diagonal that dR cannot absorb: only the real part of M's diagonal reaches gA."""
    mm = r @ g_r.mH - g_q.mH @ q
    low = tril(mm, -1)
    diag = (mm * _eye(mm, mm.shape[-1])).real
    return (g_q + q @ (low + low.mH + diag)) @ _inv(r).mH


_QR_MODES = ("reduced", "complete", "r")


def qr(A: Tensor, mode: str = "reduced", *, dims: MatrixDims = None, name: Optional[str] = None) -> QRResult:
    """The QR decomposition ``A = Q @ R``, ``torch.linalg.qr``: Q ``(..., row, k)`` with orthonormal columns,
    R ``(..., k, col)`` upper triangular, ``k`` a new dim named ``name`` (unnamed by default), ``min(m, n)``
    long (``m`` with ``mode="complete"``).  ``mode="r"`` returns an empty Q, as PyTorch, and no gradient."""
    op = "linalg.qr"
    if mode not in _QR_MODES:
        raise ValueError(f"{op}: mode must be one of {_QR_MODES}, got {mode!r}.")
    perm, (q_names, r_names) = _names.matrix_factors(_floating(A, op)._names, _hashable(dims), name, "qr", op)
    m = _moved(A, perm)
    if mode == "r":
        with no_grad():
            _, r = apply(_Qr, (m,), (m._names, m._names), mode="reduced")
        empty = Tensor._make(m._B.zeros((0,), dtype=m._data.dtype), _names.unnamed(1), m._B)
        return QRResult(empty, with_names(r, r_names))
    q, r = apply(_Qr, (m,), (m._names, m._names), mode=mode)
    return QRResult(with_names(q, q_names), with_names(r, r_names))


# ----------------------------------------------------------------------------- svd, svdvals


class _Svd(Op):
    name = "linalg.svd"
    complex_grad = True
    n_outputs = 3
    saves_output = True

    @staticmethod
    def forward(B, x, full_matrices):
        return B.svd(x, full_matrices)

    @staticmethod
    def backward(node, g_u, g_s, g_vh):
        u, s, vh = node.saved_tensors()
        m, n = node.in_shapes[0][-2:]
        k = min(m, n)
        if node.params["full_matrices"] and m != n:
            # U's last columns (Vh's last rows) are not unique: differentiate through the first k, as PyTorch
            u, g_u, vh, g_vh = u[..., :k], g_u[..., :k], vh[..., :k, :], g_vh[..., :k, :]
        return (_svd_grad(u, s, vh, g_u, g_s, g_vh, m, n),)


def _svd_grad(u, s, vh, g_u, g_s, g_vh, m: int, n: int) -> Tensor:
    """PyTorch's svd_backward: ``gA = U [(skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS)] V^H`` with
    ``E_ij = S_j^2 - S_i^2`` and ``skew(X) = X - X^H``, plus the parts of gU (gV) outside U's (V's) span for
    tall (wide) A.  For complex A the phases of U's columns add ``i Im(diag(U^H gU)) / S`` to the diagonal:
    a gauge-invariant loss fixes the difference of U's and V's phases, and this is its share."""
    v, g_v = vh.mH, g_vh.mH
    uu = u.mH @ g_u
    uu = uu - uu.mH
    vv = v.mH @ g_v
    vv = vv - vv.mH
    eye = _eye(s, s.shape[-1])
    s2 = s * s
    gaps = s2.unsqueeze(-2) - s2.unsqueeze(-1) + eye
    g = (uu * s.unsqueeze(-2) + s.unsqueeze(-1) * vv) / gaps + g_s.unsqueeze(-1) * eye
    if _complex(uu):
        g = g + uu * eye / (2 * s.unsqueeze(-2))  # skew's diagonal is 2i Im(diag(U^H gU))
    if m > n:
        g = u @ g
        g_us = g_u / s.unsqueeze(-2)
        return (g + g_us - u @ (u.mH @ g_us)) @ vh
    if m < n:
        g = g @ vh
        g_vs = g_v / s.unsqueeze(-2)
        return u @ (g + g_vs.mH - (g_vs.mH @ v) @ vh)
    return u @ g @ vh


def _svd(m: Tensor, full_matrices: bool) -> Tuple[Tensor, Tensor, Tensor]:
    names = m._names
    return apply(_Svd, (m,), (names, names[:-1], names), full_matrices=full_matrices)


def svd(A: Tensor, full_matrices: bool = True, *, dims: MatrixDims = None, name: Optional[str] = None,
        driver: Optional[str] = None) -> SVDResult:
    """The singular value decomposition ``A = U @ diag(S) @ Vh``, ``torch.linalg.svd`` (``full_matrices=True``
    by default, as there): U ``(..., row, k)``, S ``(..., k)`` descending, Vh ``(..., k, col)``, ``k`` a new
    dim named ``name`` (unnamed by default).  Gradients need distinct singular values and (for U and Vh)
    gauge-invariant functions of the vectors.  ``driver`` (a cuSOLVER choice in PyTorch) must be None."""
    op = "linalg.svd"
    if driver is not None:
        raise ValueError(f"{op}: driver={driver!r} chooses a cuSOLVER routine in PyTorch; namedtensor's backends "
                         "have one SVD each, so leave driver=None.")
    perm, (u_names, s_names, vh_names) = _names.matrix_factors(_floating(A, op)._names, _hashable(dims), name,
                                                               "svd", op)
    u, s, vh = _svd(_moved(A, perm), flag(full_matrices, "full_matrices", op))
    return SVDResult(with_names(u, u_names), with_names(s, s_names), with_names(vh, vh_names))


class _Svdvals(Op):
    name = "linalg.svdvals"
    complex_grad = True
    saves = (0,)

    @staticmethod
    def forward(B, x):
        return B.svd(x, False)[1]

    @staticmethod
    def backward(node, g):
        (a,) = node.saved_tensors()
        u, _, vh = _svd(a, False)  # recomputed as an op, so that the second derivative sees the vectors move
        # dS_k = Re(u_k^H dA v_k): gA = U diag(gS) Vh, for real and complex A alike
        return ((u * g.unsqueeze(-2)) @ vh,)


def _svdvals(m: Tensor) -> Tensor:
    return apply(_Svdvals, (m,), _names.unnamed(m.ndim - 1))


def svdvals(A: Tensor, *, dims: MatrixDims = None, driver: Optional[str] = None) -> Tensor:
    """The singular values, descending, ``torch.linalg.svdvals``: ``(..., k)``, ``k`` unnamed.  The gradient
    needs distinct singular values."""
    op = "linalg.svdvals"
    if driver is not None:
        raise ValueError(f"{op}: driver={driver!r} chooses a cuSOLVER routine in PyTorch; leave driver=None.")
    perm, names = _names.matrix_result(_floating(A, op)._names, _hashable(dims), "values", op)
    return with_names(_svdvals(_moved(A, perm)), names)


# ----------------------------------------------------------------------------- pinv, matrix_rank


class _Pinv(Op):
    name = "linalg.pinv"
    complex_grad = True
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x, atol, rtol):  # the tolerances: Python floats or arrays of the batch shape
        return B.pinv(x, atol, rtol)

    @staticmethod
    def backward(node, g):
        # for perturbations that keep the rank: dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P
        a, p = node.saved_tensors()
        pt, gt = p.mH, g.mH
        left = gt @ p @ pt
        left = left - a @ (p @ left)
        right = pt @ p @ gt
        right = right - (right @ p) @ a
        return left + right - pt @ g @ pt, None, None


Tolerance = Union[float, Tensor, None]


def _tolerance(v: Tolerance, what: str, batch: _names.Names, op: str) -> Union[float, Tensor, None]:
    """A tolerance: a number, or a real floating-point tensor of one value per matrix (PyTorch's and the
    standard's), whose names unify with the batch dims' (rule 2); the ops compute on it unnamed."""
    if v is None:
        return None
    if isinstance(v, Tensor):
        if v.dtype.kind != "f":
            raise TypeError(f"{op}: a tensor {what} must be real floating point, got {v.dtype!r}.")
        _names.unify(batch, v._names, op)
        return _plain(v)
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {what} must be a number, a tensor or None, got {type(v).__name__} {v!r}.")
    return float(v)


def _tolerances(atol: Tolerance, rtol: Tolerance, m: Tensor, batch: _names.Names, op: str):
    """PyTorch's defaults: ``rtol = eps * max(m, n)`` when neither is given, 0 where ``atol`` is positive."""
    atol, rtol = _tolerance(atol, "atol", batch, op), _tolerance(rtol, "rtol", batch, op)
    if rtol is None:
        default = _EPS[m.dtype] * max(m.shape[-2:])
        if isinstance(atol, Tensor):
            rtol = where(atol > 0, atol * 0, default)
        else:
            rtol = default if atol is None or atol <= 0 else 0.0
    return (0.0 if atol is None else atol), rtol


def _per_matrix(v: Union[float, Tensor]) -> Union[float, Tensor]:
    """A tolerance tensor with a last dim of size 1, to meet a batch of singular values."""
    return v.unsqueeze(-1) if isinstance(v, Tensor) else v


def pinv(A: Tensor, *, atol: Optional[float] = None, rtol: Optional[float] = None, hermitian: bool = False,
         dims: MatrixDims = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse, ``torch.linalg.pinv``: singular values at most
    ``max(atol, rtol * largest)`` count as zero (numbers, or tensors of one value per matrix).  Its rows are
    A's columns: names ``(..., col, row)``.  ``hermitian`` is accepted (the SVD gives the same result).  The
    gradient holds where the rank is constant."""
    op = "linalg.pinv"
    perm, names = _names.matrix_result(_floating(A, op)._names, _hashable(dims), "swapped", op)
    flag(hermitian, "hermitian", op)
    m = _moved(A, perm)
    atol, rtol = _tolerances(atol, rtol, m, names[:-2], op)
    return with_names(apply(_Pinv, (m, atol, rtol), m._names), names)


def matrix_rank(A: Tensor, *, atol: Optional[float] = None, rtol: Optional[float] = None, hermitian: bool = False,
                dims: MatrixDims = None) -> Tensor:
    """The number of singular values (of absolute eigenvalues, when ``hermitian``) above
    ``max(atol, rtol * largest)`` (numbers, or tensors of one value per matrix), ``torch.linalg.matrix_rank``:
    int64, the batch dims' names."""
    op = "linalg.matrix_rank"
    perm, names = _names.matrix_result(_floating(A, op)._names, _hashable(dims), "removed", op)
    m = _moved(A, perm)
    atol, rtol = _tolerances(atol, rtol, m, names, op)
    with no_grad():
        if flag(hermitian, "hermitian", op):
            _square(m, A, op)
            s = apply(_Eigvalsh, (m,), _names.unnamed(m.ndim - 1)).abs()
        else:
            s = _svdvals(m)
        if s.shape[-1] == 0:
            return with_names((s > 0).sum(-1), names)
        cutoff = s.amax(-1, keepdim=True) * _per_matrix(rtol)
        if isinstance(atol, Tensor) or atol > 0:
            cutoff = maximum(cutoff, _per_matrix(atol))
        return with_names((s > cutoff).sum(-1), names)


# ----------------------------------------------------------------------------- matrix_power, trace, norms


def matrix_power(A: Tensor, n: int, *, dims: MatrixDims = None) -> Tensor:
    """``A`` to the integer power ``n`` (the inverse's power when negative, the identity for 0),
    ``torch.linalg.matrix_power``; the matrix dims keep their names."""
    op = "linalg.matrix_power"
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"{op}: n must be an int, got {type(n).__name__} {n!r}.")
    n = int(n.__index__())
    perm, names = _names.matrix_result(_floating(A, op)._names, _hashable(dims), "same", op)
    m = _moved(A, perm)
    _square(m, A, op)
    if n == 0:
        return with_names(m * 0 + _eye(m, m.shape[-1]), names)
    if n < 0:
        m, n = _inv(m), -n
    result = None
    while n:  # binary powering: log2(n) products
        if n & 1:
            result = m if result is None else result @ m
        n >>= 1
        if n:
            m = m @ m
    return with_names(result, names)


def trace(x: Tensor, offset: int = 0, *, dims: MatrixDims = None, dtype=None) -> Tensor:
    """The sum of the diagonal ``offset`` above the main one (below when negative) of the matrix dims, the
    Array API's ``linalg.trace`` (``torch.trace`` for 2-D): the batch dims' names.  Integer tensors
    sum to int64; ``dtype`` casts the input first."""
    op = "linalg.trace"
    perm, names = _names.matrix_result(tensor_arg(x, op, "x")._names, _hashable(dims), "removed", op)
    if dtype is not None:
        x = x.to(dtype)
    m = _moved(x, perm)
    return with_names(_diagonal(m, offset, -2, -1).sum(-1), names)


_MATRIX_ORDS = ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)


def matrix_norm(A: Tensor, ord: Union[str, float] = "fro", dim: Tuple[Dim, Dim] = (-2, -1), keepdim: bool = False,
                *, dtype=None) -> Tensor:
    """A matrix norm over the two dims ``dim`` (names or ints), ``torch.linalg.matrix_norm``: ``"fro"``,
    ``"nuc"`` (sum of singular values), 2 / -2 (largest / smallest singular value), 1 / -1 (largest /
    smallest column sum of ``|A|``), ``inf`` / ``-inf`` (row sums).  The two dims go (kept as size 1 with
    ``keepdim``); ``dtype`` casts A first.  Real, for complex A too."""
    op = "linalg.matrix_norm"
    if dtype is not None:
        A = tensor_arg(A, op).to(dtype)
    _floating(A, op)
    if isinstance(ord, bool) or ord not in _MATRIX_ORDS:
        raise ValueError(f"{op}: ord must be one of 'fro', 'nuc', 2, -2, 1, -1, inf, -inf, got {ord!r}.")
    keepdim = flag(keepdim, "keepdim", op)
    dim = _names.hashable_dims(dim)
    perm, batch, _, _ = _names.matrix_dims(A._names, dim, op)
    axes = perm[-2:] if perm is not None else (A.ndim - 2, A.ndim - 1)
    if ord == "fro":
        return norm(A, 2, axes, keepdim)
    m = _moved(A, perm)
    if ord in ("nuc", 2, -2):
        s = _svdvals(m)
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
    else:
        sums = m.abs().sum(-2 if ord in (1, -1) else -1)
        out = sums.amax(-1) if ord > 0 else sums.amin(-1)
    if keepdim:
        return with_names(_unsqueeze_axes(out, tuple(sorted(axes))), A._names)
    return with_names(out, batch)


def vector_norm(x: Tensor, ord: float = 2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (a name, an int, a tuple of them; ``None``: every dim),
    ``torch.linalg.vector_norm``: ``nt.norm``'s names and values (``inf``, ``-inf``, 0 counts non-zeros; the
    gradient of the 2-norm at 0 is 0).  Floating point or complex (the norm of ``|x|``, real), as PyTorch;
    ``dtype`` casts ``x`` first."""
    op = "linalg.vector_norm"
    if dtype is not None:
        x = tensor_arg(x, op, "x").to(dtype)
    _floating(x, op, "x")
    if isinstance(ord, (str, bool)) or not isinstance(ord, numbers.Real):
        raise ValueError(f"{op}: ord must be a number (2, 1, inf, -inf, 0, ...), got {ord!r}; "
                         "for 'fro' and 'nuc' use linalg.matrix_norm.")
    return norm(x, ord, dim, keepdim)


def linalg_norm(A: Tensor, ord: Union[str, float, None] = None, dim=None, keepdim: bool = False, *,
                dtype=None) -> Tensor:
    """``torch.linalg.norm``: :func:`matrix_norm` over two dims (``dim`` a pair, or a 2-D ``A`` with ``ord``
    given), else :func:`vector_norm` (``ord=None`` is the 2-norm, ``dim=None`` with it every dim)."""
    op = "linalg.norm"
    tensor_arg(A, op)
    pair = isinstance(dim, (tuple, list)) and len(dim) == 2
    if dim is None and ord is not None:
        if A.ndim not in (1, 2):
            raise ValueError(f"{op}: with ord={ord!r} and dim=None, A must be 1-D or 2-D, got {A.ndim} dims; pass dim=.")
        pair = A.ndim == 2
        dim = (-2, -1) if pair else None
    if pair:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise ValueError(f"{op}: ord={ord!r} is a matrix norm: give two dims (dim=(row, col)).")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.linalg.multi_dot``: the product of matrices, left to right (a 1-D first tensor is a row
    vector, a 1-D last one a column vector, as PyTorch); names as :func:`matmul`, step by step."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}.")
    for i, t in enumerate(tensors):
        tensor_arg(t, "linalg.multi_dot", f"tensors[{i}]")
        if t.ndim not in (1, 2) or (t.ndim == 1 and 0 < i < len(tensors) - 1):
            raise ValueError(f"linalg.multi_dot: tensors[{i}] must be 2-D (the first and last may be 1-D), got "
                             f"{t.ndim} dims {_names.fmt(t._names)}.")
    out = tensors[0]
    for t in tensors[1:]:
        out = _matmul(out, t, "linalg.multi_dot")
    return out


# ----------------------------------------------------------------------------- vector products


def cross(input: Tensor, other: Tensor, *, dim: Dim = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (a name or an int of the broadcast result),
    ``torch.linalg.cross``: the operands broadcast and their names unify (rule 2); both have size 3 at ``dim``."""
    op = "linalg.cross"
    tensor_arg(input, op, "input")
    tensor_arg(other, op, "other")
    names, ax = _names.cross(input._names, other._names, dim, op)
    parts = []
    for t in (input, other):
        own = ax - (len(names) - t.ndim)
        if own < 0 or t.shape[own] != 3:
            raise ValueError(f"{op}: both operands need size 3 at dim {dim!r} (dim {ax} of the broadcast result "
                             f"{_names.fmt(names)}), got shapes {tuple(input.shape)} and {tuple(other.shape)}.")
        parts.append([t.select(own, i) for i in range(3)])
    (a0, a1, a2), (b0, b1, b2) = parts
    out = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], ax)
    return with_names(out, names)


def vecdot(x: Tensor, y: Tensor, *, dim: Dim = -1) -> Tensor:
    """The dot product along ``dim`` (a name or an int of the broadcast operands), ``torch.linalg.vecdot``:
    ``sum(conj(x) * y)`` (x conjugated when complex), the names unify (rule 2) and ``dim``'s goes."""
    tensor_arg(x, "linalg.vecdot", "x")
    return (x.conj() * y).sum(dim)


def tensordot(a: Tensor, b: Tensor, dims: Union[int, Tuple[Sequence[Dim], Sequence[Dim]]] = 2) -> Tensor:
    """``torch.tensordot``: contract a's last ``dims`` dims with b's first ``dims`` (an int), or the pairs
    ``dims=(dims_a, dims_b)`` (names or ints).  Contracted names must be equal where both are named; the
    output is a's other dims then b's, which must not share a name (``nt.dot`` contracts by name)."""
    op = "tensordot"
    tensor_arg(a, op, "a")
    tensor_arg(b, op, "b")
    if isinstance(dims, bool):
        raise TypeError(f"{op}: dims must be an int or a pair of dim lists, got {dims!r}.")
    if hasattr(dims, "__index__"):
        k = int(dims.__index__())
        if not 0 <= k <= min(a.ndim, b.ndim):
            raise ValueError(f"{op}: dims={k} must be between 0 and the operands' dims ({a.ndim} and {b.ndim}).")
        dims_a, dims_b = tuple(range(a.ndim - k, a.ndim)), tuple(range(k))
    elif isinstance(dims, (tuple, list)) and len(dims) == 2:
        dims_a, dims_b = (tuple(d) if isinstance(d, (tuple, list)) else (d,) for d in dims)
    else:
        raise TypeError(f"{op}: dims must be an int or a pair (dims of a, dims of b), got {dims!r}.")
    ids_a, ids_b, out_ids, names = _names.tensordot(a._names, b._names, _names.hashable_dims(dims_a),
                                                    _names.hashable_dims(dims_b), op)
    sizes = dict(zip(ids_a, a.shape))
    for i, s in zip(ids_b, b.shape):
        if sizes.setdefault(i, s) != s:
            raise ValueError(f"{op}: contracted dims of different sizes, {sizes[i]} and {s} (shapes {tuple(a.shape)} "
                             f"and {tuple(b.shape)}, names {_names.fmt(a._names)} and {_names.fmt(b._names)}).")
    return _einsum((a, b), (ids_a, ids_b), out_ids, names, op)


# ----------------------------------------------------------------------------- views and re-exports


def matrix_transpose(x: Tensor, *, dims: MatrixDims = None) -> Tensor:
    """``x`` with its two matrix dims (by default the last two) swapped, names and all; the other dims stay."""
    op = "linalg.matrix_transpose"
    perm, _, _, _ = _names.matrix_dims(tensor_arg(x, op, "x")._names, _hashable(dims), op)
    r, c = perm[-2:] if perm is not None else (x.ndim - 2, x.ndim - 1)
    return x.transpose(r, c)


def diagonal(A: Tensor, *, offset: int = 0, dim1: Dim = -2, dim2: Dim = -1, out_name: Optional[str] = None) -> Tensor:
    """The diagonal of ``dim1`` and ``dim2`` (by default the last two), ``torch.linalg.diagonal``: ``nt.diagonal``'s
    rule (both dims go, the diagonal is a new last dim named ``out_name``, unnamed by default)."""
    return _diagonal(A, offset, dim1, dim2, out_name=out_name)


# ----------------------------------------------------------------------------- PyTorch's top-level spellings


class LegacySVDResult(NamedTuple):
    """``torch.svd``'s result: ``A = U @ diag(S) @ V.mH`` (V, not Vh)."""

    U: Tensor
    S: Tensor
    V: Tensor


def torch_cholesky(input: Tensor, upper: bool = False, *, dims: MatrixDims = None) -> Tensor:
    """``torch.cholesky``: :func:`cholesky`, ``upper`` also by position."""
    return cholesky(input, upper=upper, dims=dims)


def inverse(input: Tensor, *, dims: MatrixDims = None) -> Tensor:
    """``torch.inverse``: :func:`inv`."""
    return inv(input, dims=dims)


def pinverse(input: Tensor, rcond: float = 1e-15, hermitian: bool = False, *, dims: MatrixDims = None) -> Tensor:
    """``torch.pinverse``: :func:`pinv` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond, hermitian=hermitian, dims=dims)


def matrix_trace(input: Tensor) -> Tensor:
    """``torch.trace``: the sum of the diagonal of a 2-D tensor (0-dim; integers sum to int64)."""
    if tensor_arg(input, "trace").ndim != 2:
        raise ValueError(f"trace: expected a matrix (2 dims), got {input.ndim} dims {_names.fmt(input._names)}; "
                         "nt.linalg.trace takes batches.")
    return trace(input)


def _broadcast_shape(a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def torch_cross(input: Tensor, other: Tensor, dim: Optional[Dim] = None) -> Tensor:
    """``torch.cross``: :func:`cross` along ``dim``; without it, along the first dim of size 3 of the broadcast
    operands, as PyTorch (which warns that this default will become -1)."""
    if dim is None:
        shape = _broadcast_shape(tuple(tensor_arg(input, "cross", "input").shape),
                                 tuple(tensor_arg(other, "cross", "other").shape))
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise ValueError(f"cross: no dim of size 3 in the broadcast shape {shape}; pass dim=.")
    return cross(input, other, dim=dim)


def torch_svd(input: Tensor, some: bool = True, compute_uv: bool = True, *, dims: MatrixDims = None,
              name: Optional[str] = None) -> LegacySVDResult:
    """``torch.svd``: ``(U, S, V)`` with ``V = Vh.mH`` (names ``(..., col, k)``), reduced unless ``some=False``;
    with ``compute_uv=False`` U and V are zero matrices ``(m, m)`` and ``(n, n)``, as PyTorch."""
    op = "svd"
    some, compute_uv = flag(some, "some", op), flag(compute_uv, "compute_uv", op)
    if compute_uv:
        u, s, vh = svd(input, not some, dims=dims, name=name)
        return LegacySVDResult(u, s, vh.mH)
    perm, (u_names, s_names, vh_names) = _names.matrix_factors(_floating(input, op)._names, _hashable(dims), name,
                                                               "svd", op)
    m = _moved(input, perm)
    rows, cols = m.shape[-2:]
    B, dtype = m._B, m._data.dtype
    u = Tensor._make(B.zeros(tuple(m.shape[:-2]) + (rows, rows), dtype=dtype), u_names, B)
    _, v_names = _names.transpose(vh_names, -2, -1, op)  # V is Vh's transpose: (..., col, k)
    v = Tensor._make(B.zeros(tuple(m.shape[:-2]) + (cols, cols), dtype=dtype), v_names, B)
    return LegacySVDResult(u, with_names(_svdvals(m), s_names), v)


def torch_qr(input: Tensor, some: bool = True, *, dims: MatrixDims = None, name: Optional[str] = None) -> QRResult:
    """``torch.qr``: :func:`qr`, reduced unless ``some=False``."""
    return qr(input, "reduced" if flag(some, "some", "qr") else "complete", dims=dims, name=name)
