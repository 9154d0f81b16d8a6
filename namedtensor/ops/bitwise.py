"""Bitwise ops on integer and bool tensors, and ``nextafter``: PyTorch's ``bitwise_and bitwise_or
bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift`` and the operators ``& | ^ ~ << >>``.

Name rule: as every elementwise op (:mod:`namedtensor.ops.elementwise`): ``bitwise_not`` keeps the
input's names, the binary ops unify their operands' (rule 2).  On bool tensors ``& | ^ ~`` are the
logical ops, as in PyTorch and NumPy; float operands are refused (PyTorch's rule), and shifts take
integers only.  None is differentiable (integer results); ``nextafter`` (the next float after ``a``
towards ``b``) has no gradient either, as in PyTorch.
"""

from __future__ import annotations

from .elementwise import _reversed, binary, unary

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
           "nextafter"]


def _integral(B, *arrays, shift: bool = False):
    """Refuse float (and, for shifts, bool) operands, which the bitwise ops are not defined for."""
    allowed = "iu" if shift else "iub"
    for a in arrays:
        kind = B.dtype_of(a).kind if B.is_array(a) else None
        if kind is not None and kind not in allowed:
            what = "integer" if shift else "integer or bool"
            raise TypeError(f"needs {what} tensors, got {B.dtype_of(a)!r}; convert with .to(nt.int64) first.")
    return arrays


def _bitwise(B, fn, a, b, shift: bool = False):
    _integral(B, a, b, shift=shift)
    return fn(a, b)


bitwise_and = binary("bitwise_and", lambda B, a, b: _bitwise(B, B.bitwise_and, a, b))
bitwise_or = binary("bitwise_or", lambda B, a, b: _bitwise(B, B.bitwise_or, a, b))
bitwise_xor = binary("bitwise_xor", lambda B, a, b: _bitwise(B, B.bitwise_xor, a, b))
bitwise_left_shift = binary("bitwise_left_shift", lambda B, a, b: _bitwise(B, B.bitwise_left_shift, a, b, True))
bitwise_right_shift = binary("bitwise_right_shift", lambda B, a, b: _bitwise(B, B.bitwise_right_shift, a, b, True))
bitwise_not = unary("bitwise_not", lambda B, x: B.bitwise_invert(*_integral(B, x)))


def _nextafter(B, a, b):
    for x in (a, b):
        if B.is_array(x) and B.dtype_of(x).kind != "f":
            raise TypeError(f"needs floating-point tensors, got {B.dtype_of(x)!r}.")
    return B.nextafter(a, b)


nextafter = binary("nextafter", _nextafter)

METHODS = {
    "bitwise_and": bitwise_and, "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not,
    "bitwise_left_shift": bitwise_left_shift, "bitwise_right_shift": bitwise_right_shift, "nextafter": nextafter,
    "__and__": bitwise_and, "__or__": bitwise_or, "__xor__": bitwise_xor, "__invert__": bitwise_not,
    "__lshift__": bitwise_left_shift, "__rshift__": bitwise_right_shift,
    "__rand__": _reversed(bitwise_and), "__ror__": _reversed(bitwise_or), "__rxor__": _reversed(bitwise_xor),
    "__rlshift__": _reversed(bitwise_left_shift), "__rrshift__": _reversed(bitwise_right_shift),
}
