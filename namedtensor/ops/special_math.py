"""PyTorch's elementwise math beyond the core set: ``xlogy``, ``xlog1py`` (``nt.special``'s), ``sinc``, ``i0``,
``heaviside``, ``igamma`` and ``igammac``.

Name rules: as every elementwise op (:mod:`namedtensor.ops.elementwise`, whose ``unary`` and ``binary``
make these): ``sinc`` and ``i0`` keep the input's names; ``xlogy``, ``xlog1py``, ``heaviside``, ``igamma`` and
``igammac`` unify their operands' names (rule 2).  The in-place forms (``x.xlogy_(y)``...) come from this family's exports
as they do from the elementwise family's (:mod:`namedtensor.ops.inplace`).

``i0`` (and ``i1``, its derivative, which the gradient uses) is the backend's (``B.i0``, ``B.i1``: SciPy's
in the NumPy backend where SciPy is installed, a series otherwise).  Integer inputs are computed in float64,
as by every op that needs floats.  ``heaviside`` has a gradient where PyTorch has none: 0 for the input,
and for ``values`` where the input is 0 (the only place its value is read).  ``igamma``/``igammac`` (the
regularized lower and upper incomplete gamma functions) are the backend's (``B.igamma``, ``B.igammac``: SciPy's
``gammainc``/``gammaincc`` where SciPy is installed, a series and a continued fraction otherwise); as in
PyTorch they are differentiable only with respect to ``other`` (``x``), and a backward that needs the
gradient for ``input`` (``a``) raises.
"""

from __future__ import annotations

import math
from typing import Any

from ..tensor import Tensor
from ._common import SCALARS, as_float_array, tensor_arg
from .creation import full_like
from .elementwise import binary, unary, where

__all__ = ["xlogy", "xlog1py", "sinc", "i0", "heaviside", "igamma", "igammac"]


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


def _x_times_log(name: str, log: str, pole: float):
    """The op ``x * log(y)`` for the logarithm named ``log`` (``"log"``, or ``"log1p"``, whose pole is at
    -1): 0 where x is 0 (also at log's pole and at inf, as in PyTorch), a NaN y staying NaN.  Its
    gradients: ``log(y)`` (0 where x is 0) and ``x / (y - pole)``."""

    def forward(B, a, b):
        a, b = _arrays(B, a, b, True)
        out = a * getattr(B, log)(b)
        return B.where(B.logical_and(a == 0, B.logical_not(B.isnan(b))), B.zeros_like(out), out)

    def grads(a, b, y, g):
        ga = None
        if a.__class__ not in SCALARS:
            if isinstance(b, Tensor):
                log_b = getattr(b, log)()
            else:
                log_b = getattr(math, log)(b) if b > pole else -math.inf if b == pole else math.nan
            ga = where(a != 0, g * log_b, 0)
        gb = None if b.__class__ in SCALARS else g * a / (b - pole if pole else b)
        return ga, gb

    return binary(name, forward, grads, saves_inputs=True)


_xlogy_op = _x_times_log("xlogy", "log", 0.0)
_xlog1py_op = _x_times_log("xlog1py", "log1p", -1.0)


def xlogy(input: Any, other: Any) -> Tensor:
    """``input * log(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN), as ``torch.xlogy``;
    either operand may be a number; the names unify (rule 2)."""
    return _xlogy_op(input, other)


def xlog1py(input: Any, other: Any) -> Tensor:
    """``input * log1p(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN), as
    ``torch.special.xlog1py``; either operand may be a number; the names unify (rule 2)."""
    return _xlog1py_op(input, other)


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


# ----------------------------------------------------------------------------- igamma, igammac


def _igamma_grads(name: str, upper: bool):
    """The gradients of ``igamma`` (or ``igammac``, if ``upper``): none for ``input`` (a backward that needs
    one raises, as PyTorch's does), and ``g exp((a - 1) log(x) - x - lgamma(a))`` (negated for ``igammac``) for
    ``other``, PyTorch's formula."""

    def grads(a, x, y, g):
        if isinstance(a, Tensor) and a.requires_grad:
            raise NotImplementedError(
                f"{name}: the gradient with respect to input (a) is not implemented (as in PyTorch); {name} is "
                f"differentiable only with respect to other (x). Pass input.detach() to differentiate {name} "
                "with respect to other.")
        a = a if isinstance(a, Tensor) else full_like(x, a)
        grad = g * ((a - 1) * x.log() - x - a.lgamma()).exp()
        return None, -grad if upper else grad

    return grads


def _incomplete_gamma(fn: str):
    """The forward of ``igamma``/``igammac``: the backend's function ``fn`` of both operands as float arrays."""
    return lambda B, a, x: getattr(B, fn)(*_arrays(B, a, x, True))


_igamma_op = binary("igamma", _incomplete_gamma("igamma"), _igamma_grads("igamma", False), saves_inputs=True)
_igammac_op = binary("igammac", _incomplete_gamma("igammac"), _igamma_grads("igammac", True), saves_inputs=True)


def igamma(input: Any, other: Any) -> Tensor:
    """The regularized lower incomplete gamma function ``P(a, x)`` of ``a = input`` and ``x = other``, as
    ``torch.igamma`` (``torch.special.gammainc``), PyTorch's values at the edges included (nan where either is
    negative); either operand may be a number; the names unify (rule 2).  Differentiable with respect to
    ``other`` only, as in PyTorch."""
    return _igamma_op(input, other)


def igammac(input: Any, other: Any) -> Tensor:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)`` of ``a = input`` and
    ``x = other``, as ``torch.igammac`` (``torch.special.gammaincc``); otherwise as :func:`igamma`."""
    return _igammac_op(input, other)


METHODS = {"xlogy": xlogy, "sinc": sinc, "i0": i0, "heaviside": heaviside, "igamma": igamma, "igammac": igammac}
