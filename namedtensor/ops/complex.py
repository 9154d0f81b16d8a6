"""Complex numbers: ``real imag conj resolve_conj angle complex polar view_as_real view_as_complex``
and ``is_complex``, with PyTorch's attributes ``t.real``, ``t.imag`` (properties), ``t.H`` and ``t.mH``.

Name rules: ``real imag conj resolve_conj angle`` keep the input's names; ``complex(real, imag)`` and
``polar(abs, angle)`` unify their operands' names (rule 2, :func:`namedtensor._names.unify`);
``view_as_real`` adds a last dim of size 2, unnamed unless ``name=`` names it
(:func:`namedtensor._names.view_as_real`), and ``view_as_complex`` removes that dim
(:func:`namedtensor._names.view_as_complex`); ``t.H`` and ``t.mH`` swap the names of the two dims they
transpose, as ``transpose`` does.

Gradients follow PyTorch's convention (docs/design.md, "Autograd"): for a real loss ``L`` the gradient
of a complex ``z`` is ``dL/dRe(z) + i dL/dIm(z)``, so a holomorphic ``f`` has the backward
``grad_out * conj(f'(z))``.  PyTorch's ``conj``, ``real``, ``imag`` and ``view_as_real`` are views;
here they compute copies (so ``resolve_conj`` has nothing left to do, and an in-place edit of ``t.real``
leaves ``t`` alone).
"""

from __future__ import annotations

import cmath
import math
from typing import Any, Optional

from .. import _dtypes, _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import as_float_array, operand, sum_to, tensor_arg
from .elementwise import where
from .naming import transpose

__all__ = ["real", "imag", "conj", "resolve_conj", "angle", "complex", "polar", "view_as_real", "view_as_complex",
           "is_complex"]


def is_complex(t: Tensor) -> bool:
    """Whether ``t``'s dtype is complex (``nt.complex64`` or ``nt.complex128``)."""
    return tensor_arg(t, "is_complex").dtype.kind == "c"


def _read_only_copy(B, part):
    """``part`` copied and handed out read-only (a broadcast view of the copy).  PyTorch's ``real``,
    ``imag`` and ``view_as_real`` are views, so a write into them changes the input; a write into this
    copy would not, so it raises instead (NumPy's parts are views, which an in-place edit of the input
    would change behind the graph's back: hence the copy)."""
    out = B.asarray(part, copy=True)
    return B.broadcast_to(out, out.shape)


class _Real(Op):
    name = "real"
    read_only = True
    complex_grad = True

    @staticmethod
    def forward(B, x):
        return _read_only_copy(B, B.real(x))

    @staticmethod
    def backward(node, g):
        return (g * (1 + 0j),)  # the real gradient as a complex one: dL/dRe(z) + i 0


def real(t: Tensor) -> Tensor:
    """The real part of a complex tensor, in the float dtype of its parts (``t`` itself when real, as in
    PyTorch); keeps names.  Also ``t.real``."""
    if tensor_arg(t, "real").dtype.kind != "c":
        return t
    return apply(_Real, (t,), t._names)


class _Imag(Op):
    name = "imag"
    read_only = True
    complex_grad = True

    @staticmethod
    def forward(B, x):
        return _read_only_copy(B, B.imag(x))

    @staticmethod
    def backward(node, g):
        return (g * 1j,)  # dL/dRe(z) = 0, dL/dIm(z) = g


def imag(t: Tensor) -> Tensor:
    """The imaginary part of a complex tensor, in the float dtype of its parts; keeps names.  Also ``t.imag``.
    A real tensor has none: refused, as in PyTorch."""
    if tensor_arg(t, "imag").dtype.kind != "c":
        raise TypeError(f"imag: not defined for a real tensor ({t.dtype!r}); only complex tensors have an "
                        "imaginary part (convert with t.to(nt.complex64) first, or use zeros_like(t)).")
    return apply(_Imag, (t,), t._names)


class _Conj(Op):
    name = "conj"
    complex_grad = True

    @staticmethod
    def forward(B, x):
        return B.conj(x)

    @staticmethod
    def backward(node, g):
        return (conj(g),)


def conj(t: Tensor) -> Tensor:
    """The complex conjugate (``t`` itself when real, as in PyTorch); keeps names.  Also ``t.conj()``."""
    if tensor_arg(t, "conj").dtype.kind != "c":
        return t
    return apply(_Conj, (t,), t._names)


def resolve_conj(t: Tensor) -> Tensor:
    """``t`` itself: :func:`conj` computes the conjugate at once, so no conjugate is ever pending (PyTorch's
    ``resolve_conj`` materialises a lazy one)."""
    return tensor_arg(t, "resolve_conj")


class _Angle(Op):
    name = "angle"
    complex_grad = True
    saves = (0,)

    @staticmethod
    def forward(B, x):
        if B.dtype_of(x).kind == "c":
            return B.angle(x)
        x = as_float_array(B, x)
        # a real number's angle is pi for negatives and 0 otherwise, NaN staying NaN (PyTorch's)
        return B.where(B.isnan(x), x, B.where(B.less(x, 0), math.pi, B.zeros((), dtype=x.dtype)))

    @staticmethod
    def backward(node, g):
        (z,) = node.saved_tensors()
        if z.dtype.kind != "c":
            return (g.zeros_like(),)
        # d angle = (x dy - y dx) / |z|^2, so the gradient is g * i z / |z|^2 (0 at z = 0, PyTorch's)
        r2 = z.abs().square()
        return (where(r2 == 0, 0, g * 1j * z / where(r2 == 0, 1, r2)),)


def angle(t: Tensor) -> Tensor:
    """The argument of each element in radians, in (-pi, pi] (``torch.angle``): of a real tensor, pi for
    negatives and 0 otherwise (integers give float64); keeps names."""
    return apply(_Angle, (tensor_arg(t, "angle"),), t._names)


def _parts(op: str, a: Any, b: Any, what: str):
    """The two float operands of ``complex``/``polar`` (one may be a number), their names unified (rule 2)."""
    like = a if isinstance(a, Tensor) else b
    if not isinstance(like, Tensor):
        raise TypeError(f"{op}: at least one operand must be a Tensor, got {type(a).__name__} and "
                        f"{type(b).__name__}.")
    a, b = operand(a, like, op), operand(b, like, op)
    dts = {x.dtype for x in (a, b) if isinstance(x, Tensor)}
    if len(dts) != 1 or next(iter(dts)) not in (_dtypes.float32, _dtypes.float64):
        raise TypeError(f"{op}: {what} must be float32 or float64 tensors of one dtype (complex64 or complex128 "
                        f"results), got {', '.join(sorted(repr(d) for d in dts))}; convert them with .float() "
                        "or .double().")
    names = _names.unify(a._names, b._names, op) if isinstance(a, Tensor) and isinstance(b, Tensor) else like._names
    return a, b, names


class _Complex(Op):
    name = "complex"
    complex_grad = True

    @staticmethod
    def forward(B, re, im):
        if not B.is_array(re):  # a number with a tensor: NumPy's broadcast of a 0-dim array
            re = B.full((), re, dtype=im.dtype)
        if not B.is_array(im):
            im = B.full((), im, dtype=re.dtype)
        return B.complex(re, im)

    @staticmethod
    def backward(node, g):
        (sr, si), (nr, ni) = node.in_shapes, node.in_names
        return (None if sr is None else sum_to(real(g), sr, nr), None if si is None else sum_to(imag(g), si, ni))


def complex(real: Any, imag: Any) -> Tensor:
    """The complex tensor ``real + i imag`` (``torch.complex``): float32 parts give complex64, float64 parts
    complex128; the names unify (rule 2)."""
    re, im, names = _parts("complex", real, imag, "real and imag")
    return apply(_Complex, (re, im), names)


class _Polar(Op):
    name = "polar"
    complex_grad = True
    saves = (1,)
    saves_output = True

    @staticmethod
    def forward(B, r, theta):
        if not B.is_array(r):
            r = B.full((), r, dtype=theta.dtype)
        if not B.is_array(theta):
            theta = B.full((), theta, dtype=r.dtype)
        return B.complex(r * B.cos(theta), r * B.sin(theta))

    @staticmethod
    def backward(node, g):
        theta, z = node.saved_tensors()
        (sr, st), (nr, nt) = node.in_shapes, node.in_names
        gc = conj(g)
        gr = gt = None
        if sr is not None:
            # dz/dr = e^{i theta}, from theta itself: z / |z| is undefined at r = 0
            unit = complex(theta.cos(), theta.sin()) if isinstance(theta, Tensor) else cmath.rect(1.0, theta)
            gr = sum_to(real(gc * unit), sr, nr)
        if st is not None:
            gt = sum_to(real(gc * z * 1j), st, nt)
        return gr, gt


def polar(abs: Any, angle: Any) -> Tensor:
    """The complex tensor ``abs * (cos(angle) + i sin(angle))`` (``torch.polar``): float32 parts give
    complex64, float64 parts complex128; the names unify (rule 2)."""
    r, theta, names = _parts("polar", abs, angle, "abs and angle")
    return apply(_Polar, (r, theta), names)


class _ViewAsReal(Op):
    name = "view_as_real"
    read_only = True
    complex_grad = True

    @staticmethod
    def forward(B, x):
        return _read_only_copy(B, B.view_as_real(x))

    @staticmethod
    def backward(node, g):
        return (apply(_ViewAsComplex, (g,), node.in_names[0]),)


def view_as_real(t: Tensor, *, name: Optional[str] = None) -> Tensor:
    """A complex tensor's real and imaginary parts along a new last dim of size 2 (``torch.view_as_real``),
    unnamed unless ``name=`` names it; the other dims keep their names.  A copy (PyTorch's is a view)."""
    if tensor_arg(t, "view_as_real").dtype.kind != "c":
        raise TypeError(f"view_as_real: needs a complex tensor, got {t.dtype!r}.")
    return apply(_ViewAsReal, (t,), _names.view_as_real(t._names, name))


class _ViewAsComplex(Op):
    name = "view_as_complex"
    complex_grad = True

    @staticmethod
    def forward(B, x):
        return B.view_as_complex(x)

    @staticmethod
    def backward(node, g):
        return (apply(_ViewAsReal, (g,), node.in_names[0]),)


def view_as_complex(t: Tensor) -> Tensor:
    """The complex tensor whose real and imaginary parts are ``t``'s last dim, of size 2
    (``torch.view_as_complex``, the inverse of :func:`view_as_real`): float32 gives complex64, float64
    complex128; the other dims keep their names.  A copy (PyTorch's is a view)."""
    tensor_arg(t, "view_as_complex")
    names = _names.view_as_complex(t._names, tuple(t.shape))
    if t.dtype not in (_dtypes.float32, _dtypes.float64):
        raise TypeError(f"view_as_complex: needs a float32 or float64 tensor, got {t.dtype!r}.")
    return apply(_ViewAsComplex, (t,), names)


def _H(t: Tensor) -> Tensor:
    if t.ndim != 2:
        raise ValueError(f"H: the conjugate transpose of a matrix needs 2 dims, got {t.ndim} (names "
                         f"{_names.fmt(t._names)}); use .mH for the last two dims of a batch.")
    return conj(transpose(t, 0, 1))


def _mH(t: Tensor) -> Tensor:
    if t.ndim < 2:
        raise ValueError(f"mH: needs at least 2 dims, got {t.ndim}.")
    return conj(transpose(t, -2, -1))


METHODS = {
    "real": property(real), "imag": property(imag), "conj": conj, "resolve_conj": resolve_conj, "angle": angle,
    "is_complex": is_complex, "H": property(_H), "mH": property(_mH),
}
