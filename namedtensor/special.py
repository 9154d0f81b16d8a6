"""``nt.special``: PyTorch's ``torch.special`` on named tensors.

Most are the library's elementwise ops under the module's names (``gammaln`` is ``lgamma``, ``psi``
``digamma``, ``expit`` ``sigmoid``, ``gammainc`` ``igamma``, ``gammaincc`` ``igammac``); the rest are compositions of them, so each keeps the input's names
(the binary ones unify their operands', rule 2) and has gradients.  The functions of ``torch.special``
that are not here are listed in docs/converting.md ("Not in namedtensor (yet)").
"""

from __future__ import annotations

import math
from typing import Optional

from .tensor import Tensor
from .ops.elementwise import digamma, erf, erfc, erfinv, exp2, expm1, lgamma, log1p, polygamma, sigmoid, where
from .ops.elementwise import round as _round
from .ops.reductions import log_softmax as _log_softmax
from .ops.reductions import logsumexp, softmax as _softmax
from .ops.special_math import i0, igamma, igammac, sinc, xlog1py, xlogy

__all__ = ["digamma", "psi", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "i0", "log1p", "polygamma", "round", "sinc", "xlogy", "xlog1py", "logsumexp", "softmax", "log_softmax",
           "logit", "ndtr", "ndtri", "entr", "multigammaln"]

psi = digamma
expit = sigmoid
gammaln = lgamma
gammainc = igamma
gammaincc = igammac

_SQRT2 = math.sqrt(2.0)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round half to even, to ``decimals`` decimal places (negative: to tens, hundreds...)."""
    if decimals == 0:
        return _round(input)
    scale = 10.0 ** decimals
    return _round(input * scale) / scale


def softmax(input: Tensor, dim, *, dtype=None) -> Tensor:
    """``softmax`` along ``dim`` (a name or an int), computed in ``dtype`` when given."""
    return _softmax(input if dtype is None else input.to(dtype), dim)


def log_softmax(input: Tensor, dim, *, dtype=None) -> Tensor:
    """``log_softmax`` along ``dim``, computed in ``dtype`` when given."""
    return _log_softmax(input if dtype is None else input.to(dtype), dim)


def logit(input: Tensor, eps: Optional[float] = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    p = input if eps is None else input.clamp(eps, 1 - eps)
    return (p / (1 - p)).log()


def ndtr(input: Tensor) -> Tensor:
    """The standard normal distribution's CDF, ``(1 + erf(x / sqrt(2))) / 2`` (through ``erfc``, exact in the
    lower tail)."""
    return erfc(input * (-1 / _SQRT2)) * 0.5


def ndtri(input: Tensor) -> Tensor:
    """The inverse of :func:`ndtr`: ``sqrt(2) * erfinv(2 p - 1)``."""
    return erfinv(input * 2 - 1) * _SQRT2


def entr(input: Tensor) -> Tensor:
    """``-x log(x)``: 0 at 0 and ``-inf`` for negative ``x``, as in PyTorch."""
    positive = input > 0
    inner = -input * where(positive, input, 1).log()
    return where(positive, inner, where(input == 0, input * 0, -math.inf))


def multigammaln(input: Tensor, p: int) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p``: ``p (p - 1) / 4 log(pi)`` plus
    ``lgamma(a - j / 2)`` for ``j`` in ``0 .. p - 1``; every element must exceed ``(p - 1) / 2``."""
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise ValueError(f"multigammaln: p must be a positive int, got {p!r}.")
    if bool((input <= (p - 1) / 2).any()):
        raise ValueError(f"multigammaln: every element of the input must be greater than (p - 1) / 2 = "
                         f"{(p - 1) / 2}.")
    total = lgamma(input)
    for j in range(1, p):
        total = total + lgamma(input - j / 2)
    return total + p * (p - 1) / 4 * math.log(math.pi)
