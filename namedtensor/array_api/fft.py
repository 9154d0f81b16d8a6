"""The standard's ``fft`` extension (``xp.fft``) on :mod:`namedtensor.ops.spectral`.

The standard's spellings (``axis=``, ``axes=``, ``norm="backward"``, positional-only input) of the
transforms ``nt.fft`` has; axes take names as well as ints (rule 3) and each transformed dim keeps
its name.  The standard asks for complex input to ``fft``/``ifft``/``fftn``/``ifftn``/``irfft``/``irfftn``/
``hfft`` and real input to ``rfft``/``rfftn``/``ihfft``; real input to the complex transforms is made
complex, as in PyTorch.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .._dtypes import DType
from ..ops import spectral as S
from ..tensor import Tensor
from ._common import Axes, Axis

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]


def fft(x: Tensor, /, *, n: Optional[int] = None, axis: Axis = -1, norm: str = "backward") -> Tensor:
    """The DFT along ``axis``."""
    return S.fft(x, n, axis, norm)


def ifft(x: Tensor, /, *, n: Optional[int] = None, axis: Axis = -1, norm: str = "backward") -> Tensor:
    """The inverse DFT along ``axis``."""
    return S.ifft(x, n, axis, norm)


def fftn(x: Tensor, /, *, s: Optional[Sequence[int]] = None, axes: Axes = None, norm: str = "backward") -> Tensor:
    """The DFT over ``axes`` (None: every axis)."""
    return S.fftn(x, s, axes, norm)


def ifftn(x: Tensor, /, *, s: Optional[Sequence[int]] = None, axes: Axes = None, norm: str = "backward") -> Tensor:
    """The inverse DFT over ``axes``."""
    return S.ifftn(x, s, axes, norm)


def rfft(x: Tensor, /, *, n: Optional[int] = None, axis: Axis = -1, norm: str = "backward") -> Tensor:
    """The DFT of real ``x`` along ``axis``, its ``n // 2 + 1`` non-negative frequencies."""
    return S.rfft(x, n, axis, norm)


def irfft(x: Tensor, /, *, n: Optional[int] = None, axis: Axis = -1, norm: str = "backward") -> Tensor:
    """The inverse of :func:`rfft`: ``n`` real samples (default ``2 * (len - 1)``)."""
    return S.irfft(x, n, axis, norm)


def rfftn(x: Tensor, /, *, s: Optional[Sequence[int]] = None, axes: Axes = None, norm: str = "backward") -> Tensor:
    """:func:`rfft` over the last of ``axes``, the DFT over the others."""
    return S.rfftn(x, s, axes, norm)


def irfftn(x: Tensor, /, *, s: Optional[Sequence[int]] = None, axes: Axes = None, norm: str = "backward") -> Tensor:
    """The inverse of :func:`rfftn`."""
    return S.irfftn(x, s, axes, norm)


def hfft(x: Tensor, /, *, n: Optional[int] = None, axis: Axis = -1, norm: str = "backward") -> Tensor:
    """The real DFT of a Hermitian signal given by its first half."""
    return S.hfft(x, n, axis, norm)


def ihfft(x: Tensor, /, *, n: Optional[int] = None, axis: Axis = -1, norm: str = "backward") -> Tensor:
    """The inverse of :func:`hfft`."""
    return S.ihfft(x, n, axis, norm)


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """The sample frequencies of an ``n``-point DFT."""
    return S.fftfreq(n, d, dtype=dtype, device=device or "cpu")


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """The ``n // 2 + 1`` non-negative sample frequencies of :func:`rfft`."""
    return S.rfftfreq(n, d, dtype=dtype, device=device or "cpu")


def fftshift(x: Tensor, /, *, axes: Axes = None) -> Tensor:
    """``x`` rolled so that the zero frequency is in the middle of ``axes`` (None: every axis)."""
    return S.fftshift(x, axes)


def ifftshift(x: Tensor, /, *, axes: Axes = None) -> Tensor:
    """The inverse of :func:`fftshift`."""
    return S.ifftshift(x, axes)
