"""The standard's elementwise functions, on :mod:`namedtensor.ops.elementwise`.

Unary functions keep the input's names; binary ones unify their operands' names by rule 2 (a
Python scalar operand is an unnamed constant).  Most are the library's ops under the standard's
spelling.  Missing: the bitwise functions and ``nextafter`` (no backend op), and ``conj real imag``
(no complex dtype); they raise NotImplementedError.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from ..ops import elementwise as E
from ..ops.dtype import clone
from ..tensor import Tensor
from ._common import missing

Operand = Union[Tensor, int, float, bool]

# the library's ops whose names are the standard's
abs = E.abs
acos, acosh, asin, asinh, atan, atan2, atanh = E.acos, E.acosh, E.asin, E.asinh, E.atan, E.atan2, E.atanh
add, ceil, copysign, cos, cosh = E.add, E.ceil, E.copysign, E.cos, E.cosh
exp, expm1, floor, floor_divide, hypot = E.exp, E.expm1, E.floor, E.floor_divide, E.hypot
isfinite, isinf, isnan = E.isfinite, E.isinf, E.isnan
log, log1p, log2, log10, logaddexp = E.log, E.log1p, E.log2, E.log10, E.logaddexp
logical_and, logical_not, logical_or, logical_xor = E.logical_and, E.logical_not, E.logical_or, E.logical_xor
maximum, minimum, multiply, pow, reciprocal, remainder = E.maximum, E.minimum, E.mul, E.pow, E.reciprocal, E.remainder
round, sign, sin, sinh, sqrt, square, subtract = E.round, E.sign, E.sin, E.sinh, E.sqrt, E.square, E.sub
tan, tanh, trunc = E.tan, E.tanh, E.trunc
# the standard's spellings of the library's ops
divide, negative = E.div, E.neg
equal, not_equal = E.eq, E.ne
less, less_equal, greater, greater_equal = E.lt, E.le, E.gt, E.ge


def positive(x: Tensor, /) -> Tensor:
    """``+x``: a copy of ``x`` with its names."""
    return clone(x)


def signbit(x: Tensor, /) -> Tensor:
    """Whether the sign bit is set (true for -0.0 too): ``copysign(1, x) < 0``, keeping ``x``'s names."""
    return E.lt(E.copysign(E.abs(x) * 0 + 1, x), 0) if x.dtype.kind == "f" else E.lt(x, 0)


def clip(x: Tensor, /, min: Optional[Operand] = None, max: Optional[Operand] = None) -> Tensor:
    """``x`` limited to ``[min, max]`` (either may be None); the bounds' names unify with ``x``'s."""
    return E.clip(x, min, max)


def _missing(name: str, piece: str):
    def fn(*args: Any, **kwargs: Any) -> Tensor:
        raise missing(name, piece)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Not implemented: {piece}; raises NotImplementedError."
    return fn


_NO_BITWISE = "namedtensor's backends have no bitwise ops and it has no unsigned dtypes"
bitwise_and = _missing("bitwise_and", _NO_BITWISE)
bitwise_or = _missing("bitwise_or", _NO_BITWISE)
bitwise_xor = _missing("bitwise_xor", _NO_BITWISE)
bitwise_invert = _missing("bitwise_invert", _NO_BITWISE)
bitwise_left_shift = _missing("bitwise_left_shift", _NO_BITWISE)
bitwise_right_shift = _missing("bitwise_right_shift", _NO_BITWISE)
nextafter = _missing("nextafter", "the backends have no nextafter op")
conj = _missing("conj", "namedtensor has no complex dtypes")
real = _missing("real", "namedtensor has no complex dtypes")
imag = _missing("imag", "namedtensor has no complex dtypes")

__all__ = ["abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
           "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "clip",
           "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater",
           "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal", "log", "log1p",
           "log2", "log10", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "maximum",
           "minimum", "multiply", "negative", "nextafter", "not_equal", "positive", "pow", "real", "reciprocal",
           "remainder", "round", "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan", "tanh",
           "trunc"]
