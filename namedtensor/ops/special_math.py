"""PyTorch's elementwise math beyond the core set: ``xlogy``, ``sinc``, ``i0`` and ``heaviside``.

Name rules: as every elementwise op (:mod:`namedtensor.ops.elementwise`, whose ``unary`` and ``binary``
make these): ``sinc`` and ``i0`` keep the input's names; ``xlogy`` and ``heaviside`` unify their operands'
names (rule 2).  The in-place forms (``x.xlogy_(y)``...) come from this family's exports as they do from
the elementwise family's (:mod:`namedtensor.ops.inplace`).

``i0`` (and ``i1``, its derivative, which the gradient uses) is the backend's (``B.i0``, ``B.i1``: SciPy's
in the NumPy backend where SciPy is installed, a series otherwise).  Integer inputs are computed in float64,
as by every op that needs floats.  ``heaviside`` has a gradient where PyTorch has none: 0 for the input,
and for ``values`` where the input is 0 (the only place its value is read).
"""

from __future__ import annotations

import math
from typing import Any

from ..tensor import Tensor
from ._common import SCALARS, as_float_array, tensor_arg
from .elementwise import binary, unary, where

__all__ = ["xlogy", "sinc", "i0", "heaviside"]


def _arrays(B, a, b, floats: bool):
    """Both operands as arrays (a Python scalar takes the other operand's dtype, as NumPy's weak scalars
    do), in float (float64 for integers) when ``floats``."""
    if floats:
        a = a if a.__class__ in SCALARS else as_float_array(B, a)
        b = b if b.__class__ in SCALARS else as_float_array(B, b)
    if a.__class__ in SCALARS:
        a = B.asarray(a, dtype=B.dtype_of(b))
    elif b.__class__ in SCALARS:
        b = B.asarray(b, dtype=B.dtype_of(a))
    return a, b


# ----------------------------------------------------------------------------- xlogy


def _xlogy(B, a, b):
    a, b = _arrays(B, a, b, True)
    out = a * B.log(b)
    # 0 * log(0) and 0 * log(inf) are 0 here, as in PyTorch; a NaN y stays NaN
    return B.where(B.logical_and(a == 0, B.logical_not(B.isnan(b))), B.zeros_like(out), out)


def _xlogy_grads(a, b, y, g):
    ga = None
    if a.__class__ not in SCALARS:
        log_b = b.log() if isinstance(b, Tensor) else math.log(b) if b > 0 else -math.inf if b == 0 else math.nan
        ga = where(a != 0, g * log_b, 0)
    gb = None if b.__class__ in SCALARS else g * a / b
    return ga, gb


_xlogy_op = binary("xlogy", _xlogy, _xlogy_grads, saves_inputs=True)


def xlogy(input: Any, other: Any) -> Tensor:
    """``input * log(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN), as ``torch.xlogy``;
    either operand may be a number; the names unify (rule 2)."""
    return _xlogy_op(input, other)


# ----------------------------------------------------------------------------- sinc


def _sinc(B, x):
    x = as_float_array(B, x)
    zero = x == 0
    px = math.pi * B.where(zero, B.ones_like(x), x)
    return B.where(zero, B.ones_like(x), B.sin(px) / px)


def _sinc_grad(x: Tensor, y, g: Tensor) -> Tensor:
    # d/dx sin(pi x) / (pi x) = (cos(pi x) - sinc(x)) / x, which tends to 0 at x = 0 (PyTorch's value there)
    nonzero = x != 0
    safe = where(nonzero, x, 1)
    px = safe * math.pi
    return where(nonzero, g * (px.cos() - px.sin() / px) / safe, 0)


sinc = unary("sinc", _sinc, _sinc_grad, saves_input=True)
sinc.__doc__ = """The normalised sinc, ``sin(pi x) / (pi x)`` and 1 at 0, as ``torch.sinc``; keeps the names."""


# ----------------------------------------------------------------------------- i0


def _i1_grad(x: Tensor, y: Tensor, g: Tensor) -> Tensor:
    # I1'(x) = I0(x) - I1(x) / x, which tends to 1/2 at x = 0
    nonzero = x != 0
    return g * where(nonzero, i0(x) - y / where(nonzero, x, 1), 0.5)


_i1 = unary("i1", lambda B, x: B.i1(as_float_array(B, x)), _i1_grad, saves_input=True, saves_output=True)
i0 = unary("i0", lambda B, x: B.i0(as_float_array(B, x)), lambda x, y, g: g * _i1(x), saves_input=True)
i0.__doc__ = """The modified Bessel function of the first kind of order 0, as ``torch.i0``; keeps the names."""


# ----------------------------------------------------------------------------- heaviside


def _heaviside(B, a, b):
    a, b = _arrays(B, a, b, False)
    out = B.where(a > 0, B.ones_like(a), B.zeros_like(a))
    return B.where(a == 0, b, out)


def _heaviside_grads(a, b, y, g):
    return g.zeros_like(), where(a == 0, g, 0)


_heaviside_op = binary("heaviside", _heaviside, _heaviside_grads, saves_inputs=True)


def heaviside(input: Tensor, values: Any) -> Tensor:
    """The Heaviside step: 0 where ``input < 0``, ``values`` where it is 0, 1 where ``input > 0``, as
    ``torch.heaviside`` (``values`` broadcasts; both have one dtype); the names unify (rule 2)."""
    tensor_arg(input, "heaviside", "input")
    tensor_arg(values, "heaviside", "values")
    if input.dtype is not values.dtype:
        raise TypeError(f"heaviside: input and values must have one dtype, got {input.dtype!r} and "
                        f"{values.dtype!r}, as in PyTorch; convert one with .to(dtype).")
    return _heaviside_op(input, values)


METHODS = {"xlogy": xlogy, "sinc": sinc, "i0": i0, "heaviside": heaviside}
