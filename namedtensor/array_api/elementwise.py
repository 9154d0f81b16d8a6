"""The standard's elementwise functions, on :mod:`namedtensor.ops.elementwise`.

Unary functions keep the input's names; binary ones unify their operands' names by rule 2 (a
Python scalar operand is an unnamed constant).  Most are the library's ops under the standard's
spelling; the bitwise functions and ``nextafter`` are :mod:`namedtensor.ops.bitwise`'s.
"""

from __future__ import annotations

import math
from typing import Optional, Union

from ..ops import bitwise as B
from ..ops import complex as C
from ..ops import elementwise as E
from ..ops.dtype import clone
from ..tensor import Tensor

Operand = Union[Tensor, int, float, complex, bool]

# the library's ops whose names are the standard's
abs = E.abs
acos, acosh, asin, asinh, atan, atan2, atanh = E.acos, E.acosh, E.asin, E.asinh, E.atan, E.atan2, E.atanh
add, ceil, copysign, cos, cosh = E.add, E.ceil, E.copysign, E.cos, E.cosh
exp, floor, hypot = E.exp, E.floor, E.hypot
isfinite, isinf, isnan = E.isfinite, E.isinf, E.isnan
log, log1p, log2, log10, logaddexp = E.log, E.log1p, E.log2, E.log10, E.logaddexp
logical_and, logical_not, logical_or, logical_xor = E.logical_and, E.logical_not, E.logical_or, E.logical_xor
maximum, minimum, multiply, pow, reciprocal, remainder = E.maximum, E.minimum, E.mul, E.pow, E.reciprocal, E.remainder
round, sign, sin, sinh, sqrt, square, subtract = E.round, E.sign, E.sin, E.sinh, E.sqrt, E.square, E.sub
tan, trunc = E.tan, E.trunc
# the standard's spellings of the library's ops
divide, negative = E.div, E.neg
equal, not_equal = E.eq, E.ne
less, less_equal, greater, greater_equal = E.lt, E.le, E.gt, E.ge
conj, imag = C.conj, C.imag


def floor_divide(x1: Operand, x2: Operand, /) -> Tensor:
    """``floor(x1 / x2)``, with the standard's results where exactly one operand is infinite: ``inf // 2``
    is ``inf`` and ``5 // -inf`` is ``-0.0`` here, where Python, NumPy and PyTorch (so ``x1 // x2`` and
    ``nt.floor_divide``) give ``nan`` and ``-1.0``."""
    out = E.floor_divide(x1, x2)
    if out.dtype.kind != "f":
        return out
    one_infinite = E.logical_xor(_isinf(x1), _isinf(x2))
    return E.where(one_infinite, E.div(x1, x2), out)


def _isinf(x: Operand) -> Union[Tensor, bool]:
    return E.isinf(x) if isinstance(x, Tensor) else isinstance(x, float) and math.isinf(x)


def expm1(x: Tensor, /) -> Tensor:
    """``exp(x) - 1``, accurate near 0; for complex ``x`` with an infinite or NaN part, the standard's
    special values (those of ``exp(x) - 1``), which NumPy's complex ``expm1`` does not give."""
    out = E.expm1(x)
    if x.dtype.kind != "c":
        return out
    re, im = C.real(x), C.imag(x)
    out = E.where(E.logical_and(E.isfinite(re), E.isfinite(im)), out, E.sub(E.exp(x), 1))
    # expm1(+-0 + 0j) is +0 + 0j (NumPy's keeps the real part's sign); abs(re) is that +0 where re is +-0
    return E.where(E.eq(x, 0), C.complex(E.abs(re), im), out)


def tanh(x: Tensor, /) -> Tensor:
    """The hyperbolic tangent; for complex ``x`` with an infinite real part and a finite imaginary one,
    the standard's ``+-1 + 0j`` (the zero with the sign of ``sin(2 imag)``), which NumPy's is not."""
    out = E.tanh(x)
    if x.dtype.kind != "c":
        return out
    re, im = C.real(x), C.imag(x)
    limit = C.complex(E.copysign(1.0, re), E.copysign(0.0, E.sin(im * 2)))
    return E.where(E.logical_and(E.isinf(re), E.isfinite(im)), limit, out)


def real(x: Tensor, /) -> Tensor:
    """The real part of a complex ``x`` in the float dtype of its parts; a copy of a real ``x``."""
    return C.real(x) if x.dtype.kind == "c" else clone(x)


def positive(x: Tensor, /) -> Tensor:
    """``+x``: a copy of ``x`` with its names."""
    return clone(x)


def signbit(x: Tensor, /) -> Tensor:
    """Whether the sign bit is set (true for -0.0 and -inf too): ``copysign(1, x) < 0``, keeping ``x``'s names."""
    return E.lt(E.copysign(1.0, x), 0) if x.dtype.kind == "f" else E.lt(x, 0)


def clip(x: Tensor, /, min: Optional[Operand] = None, max: Optional[Operand] = None) -> Tensor:
    """``x`` limited to ``[min, max]`` (either or both may be None); the bounds' names unify with ``x``'s."""
    if min is None and max is None:
        return clone(x)
    return E.clip(x, min, max)


bitwise_and = B.bitwise_and
bitwise_or = B.bitwise_or
bitwise_xor = B.bitwise_xor
bitwise_invert = B.bitwise_not
bitwise_left_shift = B.bitwise_left_shift
bitwise_right_shift = B.bitwise_right_shift
nextafter = B.nextafter

__all__ = ["abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
           "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "clip",
           "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater",
           "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal", "log", "log1p",
           "log2", "log10", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "maximum",
           "minimum", "multiply", "negative", "nextafter", "not_equal", "positive", "pow", "real", "reciprocal",
           "remainder", "round", "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan", "tanh",
           "trunc"]
