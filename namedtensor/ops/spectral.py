"""The discrete Fourier transforms: ``namedtensor.fft`` (PyTorch's ``torch.fft``) and the standard's ``fft``.

Name rule (:func:`namedtensor._names.spectral`): each transformed dim keeps its place and its name,
its frequencies standing where its samples stood; ``out_name=`` (one dim) or ``out_names=`` (one
per transformed dim, in the order of ``dim``) renames them.  Dims are given by name or position.

Three ops do all the work, each a 1-D transform along one axis with its input cut or zero-padded to
the transform's length ``n`` first and its output cut or padded to a length ``m`` after:

* ``_C2C``: the complex DFT, or its inverse (``fft``/``ifft``);
* ``_R2C``: the DFT of a real signal, the ``n // 2 + 1`` bins from 0 (``rfft``);
* ``_C2R``: the real signal of a Hermitian spectrum given by those bins (``irfft``).

``_R2C``/``_C2R`` also scale the "mirrored" bins, ``1 .. (n - 1) // 2``, the ones whose conjugates
the half spectrum leaves out, by ``mirrored``: 1 in the transforms themselves.  The three are closed
under adjoints, so each backward is one of them and gradients of every order follow (PyTorch's
convention for complex numbers, docs/design.md "Autograd"): with the norms swapped by ``_DUAL``,
``C2C(n, m)*`` is the inverse ``C2C`` back to the input's length, ``R2C(n, m, s)*`` is
``C2R(n, len, s / 2)`` and ``C2R(n, m, s)*`` is ``R2C(n, len, 2 s)``.  The n-dim transforms apply
the 1-D ones dim after dim; ``hfft``/``ihfft`` are ``irfft``/``rfft`` of the conjugate.
"""

from __future__ import annotations

from typing import Hashable, Optional, Sequence, Tuple

from .. import _dtypes, _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import tensor_arg
from .creation import arange
from .movement import roll

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")
#: the norm of a transform's adjoint: the unscaled DFT's adjoint is the unscaled inverse, and so on
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _resize(B, x, axis: int, m: int):
    """``x`` cut to, or zero-padded at the end to, length ``m`` along ``axis``."""
    length = x.shape[axis]
    if m == length:
        return x
    if m < length:
        return B.getitem(x, (slice(None),) * axis + (slice(0, m),))
    return B.pad(x, tuple((0, m - length) if a == axis else (0, 0) for a in range(x.ndim)), 0)


def _scale_mirrored(B, x, axis: int, n: int, mirrored: float):
    """``x`` (half-spectrum bins from 0 along ``axis``) with bins ``1 .. (n - 1) // 2`` times ``mirrored``."""
    count = min((n - 1) // 2, x.shape[axis] - 1)
    if mirrored == 1 or count <= 0:
        return x
    real = B.native(_dtypes.real_of(B.dtype_of(x)))
    rest = x.shape[axis] - 1 - count
    w = B.concat([B.ones((1,), dtype=real), B.full((count,), mirrored, dtype=real), B.ones((rest,), dtype=real)])
    return x * B.reshape(w, (-1,) + (1,) * (x.ndim - 1 - axis))


class _C2C(Op):
    name = "fft"
    complex_grad = True

    @staticmethod
    def forward(B, x, axis, n, m, norm, inverse):
        return _resize(B, B.fft(x, n, axis, norm, inverse), axis, m)

    @staticmethod
    def backward(node, g):
        p = node.params
        return (apply(_C2C, (g,), node.in_names[0], axis=p["axis"], n=p["n"], m=node.in_shapes[0][p["axis"]],
                      norm=_DUAL[p["norm"]], inverse=not p["inverse"]),)


class _R2C(Op):
    name = "rfft"
    complex_grad = True

    @staticmethod
    def forward(B, x, axis, n, m, norm, mirrored):
        return _resize(B, _scale_mirrored(B, B.rfft(x, n, axis, norm), axis, n, mirrored), axis, m)

    @staticmethod
    def backward(node, g):
        p = node.params
        return (apply(_C2R, (g,), node.in_names[0], axis=p["axis"], n=p["n"], m=node.in_shapes[0][p["axis"]],
                      norm=_DUAL[p["norm"]], mirrored=p["mirrored"] / 2),)


class _C2R(Op):
    name = "irfft"
    complex_grad = True

    @staticmethod
    def forward(B, x, axis, n, m, norm, mirrored):
        half = _scale_mirrored(B, _resize(B, x, axis, n // 2 + 1), axis, n, mirrored)
        return _resize(B, B.irfft(half, n, axis, norm), axis, m)

    @staticmethod
    def backward(node, g):
        p = node.params
        return (apply(_R2C, (g,), node.in_names[0], axis=p["axis"], n=p["n"], m=node.in_shapes[0][p["axis"]],
                      norm=_DUAL[p["norm"]], mirrored=p["mirrored"] * 2),)


# ----------------------------------------------------------------------------- the arguments


def _norm(norm: Optional[str], op: str) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be one of 'backward', 'ortho', 'forward' (or None, 'backward'), "
                         f"got {norm!r}.")
    return norm


def _length(n, op: str, what: str = "n") -> int:
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"{op}: {what} must be an int, got {type(n).__name__} {n!r}.")
    n = int(n.__index__())
    if n < 1:
        raise ValueError(f"{op}: {what} must be at least 1, got {n}.")
    return n


def _complex(t: Tensor, op: str) -> Tensor:
    """``t`` as the complex dtype a transform computes in (PyTorch's: real floats widen, others go to
    the default float first, so int and float16 data give complex64)."""
    tensor_arg(t, op, "the input")
    dtype = t.dtype
    return t if dtype.kind == "c" else t.to(_dtypes.complex_of(dtype if dtype is not _dtypes.float16 else
                                                                 _dtypes.float32))


def _real(t: Tensor, op: str) -> Tensor:
    """``t`` as the real float dtype ``rfft`` takes; complex input is refused, as in PyTorch."""
    tensor_arg(t, op, "the input")
    kind = t.dtype.kind
    if kind == "c":
        raise TypeError(f"{op}: expects a real input tensor, got {t.dtype!r}; use fft for complex input, or "
                        "pass t.real.")
    if kind == "f" and t.dtype is not _dtypes.float16:
        return t
    return t.to(_dtypes.default_float if kind != "f" else _dtypes.float32)


def _plan(t: Tensor, s, dim, out_names, op: str, last=None, what: str = "each length in s"
          ) -> Tuple[Tuple[int, ...], Tuple[int, ...], tuple]:
    """``(axes, lengths, names)`` of an n-dim transform: PyTorch's ``s``/``dim`` rules (``dim`` None: the
    last ``len(s)`` dims, or every dim); ``last`` gives the length the last dim defaults to (``irfftn``),
    ``what`` names a length in errors (``n`` for the 1-dim transforms)."""
    if s is not None:
        if isinstance(s, (str, bytes)) or not isinstance(s, (tuple, list)):
            raise TypeError(f"{op}: s must be a tuple of ints (the lengths), got {s!r}.")
        if dim is None:
            if len(s) > t.ndim:
                raise ValueError(f"{op}: s has {len(s)} lengths but the input has only {t.ndim} dims.")
            dim = tuple(range(t.ndim - len(s), t.ndim))
    elif dim is None:
        dim = tuple(range(t.ndim))
    dims = _names.hashable_dims(tuple(dim) if isinstance(dim, (tuple, list)) else (dim,))
    axes, names = _names.spectral(t._names, dims, _out(out_names, op), op)
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{op}: s has {len(s)} lengths for {len(axes)} dims {tuple(dim)!r}; give one per dim.")
    if not axes:
        raise ValueError(f"{op}: no dims to transform (dim=()); give at least one.")
    if s is not None:
        lengths = tuple(_length(n, op, what) for n in s)
    else:
        lengths = tuple(t.shape[a] for a in axes)
        if last is not None:
            lengths = lengths[:-1] + (last(t.shape[axes[-1]]),)
    return axes, lengths, names


def _out(out_names, op: str) -> Optional[tuple]:
    if out_names is None:
        return None
    if isinstance(out_names, str):
        raise TypeError(f"{op}: out_names= takes a tuple of names (one per transformed dim), got the str "
                        f"{out_names!r}; for one dim pass (name,).")
    return tuple(out_names)


def _default_irfft_length(m: int) -> int:
    return 2 * (m - 1)


def _irfft_length(n, m: int, op: str) -> int:
    n = _default_irfft_length(m) if n is None else _length(n, op)
    if n < 1:
        raise ValueError(f"{op}: the output length 2 * (bins - 1) is {n} for an input of {m} bin(s); pass n=.")
    return n


def _c2c(t: Tensor, axes, lengths, names, norm: str, inverse: bool) -> Tensor:
    for a, n in zip(axes, lengths):
        t = apply(_C2C, (t,), names, axis=a, n=n, m=n, norm=norm, inverse=inverse)
    return t


# ----------------------------------------------------------------------------- complex to complex


def fft(input: Tensor, n: Optional[int] = None, dim: Hashable = -1, norm: Optional[str] = None, *,
        out_name: Optional[str] = None) -> Tensor:
    """The DFT along ``dim`` (a name or an int), ``input`` cut or zero-padded to ``n`` samples there.

    Real input is made complex first, as in PyTorch.  ``norm``: ``"backward"`` (None; no scaling),
    ``"ortho"`` (``1/sqrt(n)``) or ``"forward"`` (``1/n``).  The frequency dim keeps ``dim``'s name, or
    takes ``out_name``."""
    return _one(input, n, dim, norm, out_name, "fft", inverse=False)


def ifft(input: Tensor, n: Optional[int] = None, dim: Hashable = -1, norm: Optional[str] = None, *,
         out_name: Optional[str] = None) -> Tensor:
    """The inverse DFT along ``dim``; ``norm`` as in :func:`fft` (``"backward"`` scales by ``1/n`` here)."""
    return _one(input, n, dim, norm, out_name, "ifft", inverse=True)


def _one(input: Tensor, n, dim, norm, out_name, op: str, inverse: bool) -> Tensor:
    t = _complex(input, op)
    axes, lengths, names = _plan(t, None if n is None else (n,), (dim,), None if out_name is None else (out_name,),
                                 op, what="n")
    return _c2c(t, axes, lengths, names, _norm(norm, op), inverse)


def fftn(input: Tensor, s: Optional[Sequence[int]] = None, dim=None, norm: Optional[str] = None, *,
         out_names: Optional[Sequence[str]] = None) -> Tensor:
    """The DFT over several dims (``dim``: names or ints; None: the last ``len(s)`` dims, or all), each cut
    or padded to its length in ``s``."""
    t = _complex(input, "fftn")
    axes, lengths, names = _plan(t, s, dim, out_names, "fftn")
    return _c2c(t, axes, lengths, names, _norm(norm, "fftn"), False)


def ifftn(input: Tensor, s: Optional[Sequence[int]] = None, dim=None, norm: Optional[str] = None, *,
          out_names: Optional[Sequence[str]] = None) -> Tensor:
    """The inverse DFT over several dims; arguments as :func:`fftn`'s."""
    t = _complex(input, "ifftn")
    axes, lengths, names = _plan(t, s, dim, out_names, "ifftn")
    return _c2c(t, axes, lengths, names, _norm(norm, "ifftn"), True)


def fft2(input: Tensor, s: Optional[Sequence[int]] = None, dim=(-2, -1), norm: Optional[str] = None, *,
         out_names: Optional[Sequence[str]] = None) -> Tensor:
    """:func:`fftn` over two dims, the last two by default."""
    return fftn(input, s, dim, norm, out_names=out_names)


def ifft2(input: Tensor, s: Optional[Sequence[int]] = None, dim=(-2, -1), norm: Optional[str] = None, *,
          out_names: Optional[Sequence[str]] = None) -> Tensor:
    """:func:`ifftn` over two dims, the last two by default."""
    return ifftn(input, s, dim, norm, out_names=out_names)


# ----------------------------------------------------------------------------- real to complex and back


def rfft(input: Tensor, n: Optional[int] = None, dim: Hashable = -1, norm: Optional[str] = None, *,
         out_name: Optional[str] = None) -> Tensor:
    """The DFT of real ``input`` along ``dim``: its ``n // 2 + 1`` non-negative frequencies (the rest are
    their conjugates).  ``n``, ``norm`` and the name as in :func:`fft`."""
    t = _real(input, "rfft")
    axes, (length,), names = _plan(t, None if n is None else (n,), (dim,),
                                   None if out_name is None else (out_name,), "rfft", what="n")
    return apply(_R2C, (t,), names, axis=axes[0], n=length, m=length // 2 + 1, norm=_norm(norm, "rfft"), mirrored=1)


def irfft(input: Tensor, n: Optional[int] = None, dim: Hashable = -1, norm: Optional[str] = None, *,
          out_name: Optional[str] = None) -> Tensor:
    """The real signal of ``n`` samples (default ``2 * (bins - 1)``) whose non-negative frequencies along
    ``dim`` are ``input``: the inverse of :func:`rfft`.  The imaginary parts of the zero (and, for even
    ``n``, the Nyquist) frequency are ignored, as in PyTorch and NumPy."""
    t = _complex(input, "irfft")
    axes, _, names = _plan(t, None, (dim,), None if out_name is None else (out_name,), "irfft")
    length = _irfft_length(n, t.shape[axes[0]], "irfft")
    return apply(_C2R, (t,), names, axis=axes[0], n=length, m=length, norm=_norm(norm, "irfft"), mirrored=1)


def rfftn(input: Tensor, s: Optional[Sequence[int]] = None, dim=None, norm: Optional[str] = None, *,
          out_names: Optional[Sequence[str]] = None) -> Tensor:
    """:func:`rfft` over the last of ``dim``, then :func:`fftn` over the others (PyTorch's order)."""
    t = _real(input, "rfftn")
    axes, lengths, names = _plan(t, s, dim, out_names, "rfftn")
    norm = _norm(norm, "rfftn")
    t = apply(_R2C, (t,), names, axis=axes[-1], n=lengths[-1], m=lengths[-1] // 2 + 1, norm=norm, mirrored=1)
    return _c2c(t, axes[:-1], lengths[:-1], names, norm, False)


def irfftn(input: Tensor, s: Optional[Sequence[int]] = None, dim=None, norm: Optional[str] = None, *,
           out_names: Optional[Sequence[str]] = None) -> Tensor:
    """The inverse of :func:`rfftn`: :func:`ifftn` over all of ``dim`` but the last, then :func:`irfft`
    over the last, ``s[-1]`` samples long (default ``2 * (bins - 1)``)."""
    t = _complex(input, "irfftn")
    axes, lengths, names = _plan(t, s, dim, out_names, "irfftn", last=_default_irfft_length)
    norm = _norm(norm, "irfftn")
    t = _c2c(t, axes[:-1], lengths[:-1], names, norm, True)
    n = _irfft_length(lengths[-1], t.shape[axes[-1]], "irfftn")
    return apply(_C2R, (t,), names, axis=axes[-1], n=n, m=n, norm=norm, mirrored=1)


def rfft2(input: Tensor, s: Optional[Sequence[int]] = None, dim=(-2, -1), norm: Optional[str] = None, *,
          out_names: Optional[Sequence[str]] = None) -> Tensor:
    """:func:`rfftn` over two dims, the last two by default."""
    return rfftn(input, s, dim, norm, out_names=out_names)


def irfft2(input: Tensor, s: Optional[Sequence[int]] = None, dim=(-2, -1), norm: Optional[str] = None, *,
           out_names: Optional[Sequence[str]] = None) -> Tensor:
    """:func:`irfftn` over two dims, the last two by default."""
    return irfftn(input, s, dim, norm, out_names=out_names)


def hfft(input: Tensor, n: Optional[int] = None, dim: Hashable = -1, norm: Optional[str] = None, *,
         out_name: Optional[str] = None) -> Tensor:
    """The real DFT of a signal with Hermitian symmetry given by its first half ``input``: ``n`` real
    frequencies (default ``2 * (len - 1)``); the inverse of :func:`ihfft`."""
    t = _complex(input, "hfft")
    return irfft(t.conj(), n, dim, _DUAL[_norm(norm, "hfft")], out_name=out_name)


def ihfft(input: Tensor, n: Optional[int] = None, dim: Hashable = -1, norm: Optional[str] = None, *,
          out_name: Optional[str] = None) -> Tensor:
    """The inverse DFT of real ``input``, its ``n // 2 + 1`` non-negative frequencies (Hermitian)."""
    return rfft(input, n, dim, _DUAL[_norm(norm, "ihfft")], out_name=out_name).conj()


# ----------------------------------------------------------------------------- frequencies and shifts


def fftfreq(n: int, d: float = 1.0, *, dtype=None, device: str = "cpu", names=None,
            requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point DFT with spacing ``d``: ``[0, 1, ..., -1] / (d * n)``
    in the DFT's order (1-D, unnamed unless ``names=``)."""
    return _frequencies(n, d, dtype, device, names, requires_grad, "fftfreq", half=False)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device: str = "cpu", names=None,
             requires_grad: bool = False) -> Tensor:
    """The ``n // 2 + 1`` non-negative frequencies of :func:`rfft`: ``[0, 1, ..., n // 2] / (d * n)``."""
    return _frequencies(n, d, dtype, device, names, requires_grad, "rfftfreq", half=True)


def _frequencies(n, d, dtype, device, names, requires_grad, op: str, half: bool) -> Tensor:
    n = _length(n, op)
    if isinstance(d, bool) or not isinstance(d, (int, float)):
        raise TypeError(f"{op}: d (the sample spacing) must be a number, got {type(d).__name__} {d!r}.")
    dtype = _dtypes.default_float if dtype is None else _dtypes.as_dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"{op}: dtype must be a floating-point dtype, got {dtype!r}.")
    k = arange(n // 2 + 1 if half else n, dtype=dtype, device=device, names=names)
    if not half:  # the DFT's order: 0, 1, ..., then the negative frequencies -(n // 2), ..., -1
        k = k - n * (k > (n - 1) // 2).to(dtype)
    return (k / (d * n)).requires_grad_(requires_grad)


def fftshift(input: Tensor, dim=None) -> Tensor:
    """``input`` rolled so that the zero frequency is in the middle of each of ``dim`` (None: every dim)."""
    return _shift(input, dim, "fftshift", 1)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """The inverse of :func:`fftshift`."""
    return _shift(input, dim, "ifftshift", -1)


def _shift(input: Tensor, dim, op: str, sign: int) -> Tensor:
    tensor_arg(input, op, "the input")
    axes = _names.axes(input._names, dim, op)
    if not axes:
        return input
    return roll(input, tuple(sign * (input.shape[a] // 2) for a in axes), axes)

