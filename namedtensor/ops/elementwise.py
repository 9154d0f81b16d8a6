"""Elementwise math: unary functions, binary operators, comparisons, ``where`` and ``clip``.

Name rules: unary ops (``polygamma``, ``threshold``, ``nan_to_num`` and ``clamp_min``/``clamp_max``
with number bounds too) keep the input's names (:func:`unary`); binary ops and ``where`` unify
their operands' names (rule 2, :func:`namedtensor._names.unify`, in :func:`binary`), and so do the
three operands of ``lerp``, ``addcmul`` and ``addcdiv`` (:func:`namedtensor._names.unify_all`).  The
ops of one shape are one line each, ``exp = unary("exp", forward, grad, ...)``: the forward on raw
arrays and the gradient written with tensor ops (so it can be differentiated again).  The ops
that do more (``gelu``, ``clip``, ``where``, ``polygamma``, ``nan_to_num``) are written out, each Op
class above its function; ``threshold``, ``lerp``, ``addcmul`` and ``addcdiv`` are compositions of
the ops here.  The special functions (``erfc erfinv lgamma digamma polygamma``) are the backend's.
Large ``+ - * /`` results may reuse a temporary operand's buffer (ops/_elision.py).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Optional, Protocol, cast

from .. import _dtypes
from .._names import unify, unify_all
from ..autograd.graph import Op, apply, is_grad_enabled
from ..tensor import Tensor
from . import _elision
from ._common import SCALARS, as_float_array, is_bool, operand, sum_to, tensor_arg

__all__ = [
    "abs", "add", "ceil", "clamp", "clip", "cos", "div", "divide", "eq", "erf", "exp", "expm1", "floor",
    "floor_divide", "ge", "gelu", "gt", "isfinite", "isinf", "isnan", "le", "log", "log1p", "logical_and",
    "logical_not", "logical_or", "logical_xor", "lt", "maximum", "minimum", "mod", "mul", "multiply", "ne", "neg",
    "positive", "pow", "reciprocal", "relu", "remainder", "round", "rsqrt", "sigmoid", "sign", "silu", "sin", "softplus",
    "sqrt", "square", "sub", "subtract", "tan", "tanh", "true_divide", "where",
    "acos", "asin", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "trunc", "frac",
    "erfc", "erfinv", "lgamma", "digamma", "polygamma", "threshold", "nan_to_num", "atan2", "hypot", "logaddexp",
    "copysign", "fmod", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv",
]


class Binary(Protocol):
    """A binary op's function; ``operator`` is the same op entered as ``x + y`` (see ops/_elision.py)."""

    operator: Callable[[Any, Any], Tensor]

    def __call__(self, a: Any, b: Any) -> Tensor: ...


def _op_class(name: str, forward, backward, saves: tuple, saves_output: bool, differentiable: bool,
              complex_grad: bool = False) -> type:
    return type("_" + name.title().replace("_", ""), (Op,), {
        "name": name, "saves": saves, "saves_output": saves_output, "differentiable": differentiable,
        "complex_grad": complex_grad, "forward": staticmethod(forward), "backward": staticmethod(backward),
    })


def _conj(v: Any) -> Any:
    """The complex conjugate of a saved operand (a tensor or a Python number; real ones come back as they are),
    for gradients in PyTorch's convention: ``grad_in = grad_out * conj(f'(z))``."""
    if isinstance(v, Tensor):
        return v.conj()
    return v.conjugate() if v.__class__ is complex else v


def unary(name: str, forward: Callable, grad: Optional[Callable] = None, *, saves_input: bool = False,
          saves_output: bool = False, complex_grad: bool = False) -> Callable[[Tensor], Tensor]:
    """The function of an elementwise op of one tensor; the output keeps the input's names.

    ``forward(B, x)`` computes it on a raw array; ``grad(x, y, g)`` is the input's gradient, with
    tensor ops, from the input ``x`` and the output ``y`` where the op saves them (else None).  No
    ``grad``: the op is not differentiable (boolean results).  ``complex_grad``: ``grad`` is right for
    complex tensors too (PyTorch's convention, see :class:`~namedtensor.autograd.graph.Op`).
    """

    def backward(node, g):
        saved = node.saved_tensors()
        return (grad(saved[0] if saves_input else None, saved[-1] if saves_output else None, g),)

    op = _op_class(name, forward, backward, (0,) if saves_input else (), saves_output, grad is not None, complex_grad)

    def fn(x: Tensor) -> Tensor:
        if x.__class__ is not Tensor:  # the guard's call, off the hot path
            tensor_arg(x, name)
        return apply(op, (x,), x._names)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``; the output keeps the input's names."
    return fn


def binary(name: str, forward: Callable, grads: Optional[Callable] = None, *, saves_inputs: bool = False,
           saves_output: bool = False, reuses: Optional[str] = None, complex_grad: bool = False) -> Binary:
    """The function of an elementwise op of two operands (tensors, Python scalars, arrays as unnamed
    constants), broadcast; the output's names unify the operands' (rule 2).

    ``forward(B, a, b)`` computes it on raw arrays; ``grads(a, b, y, g)`` is the pair of the operands'
    gradients (None for a constant), with tensor ops, from the operands and the output ``y`` where the
    op saves them (else None); each is summed back to its operand's shape.  No ``grads``: the op is not
    differentiable (comparisons).  ``reuses``: the backend function (taking ``out=``) with which a large
    result may be written into a temporary operand's buffer (see ops/_elision.py).  ``complex_grad`` as
    for :func:`unary`.
    """

    def backward(node, g):
        saved = node.saved_tensors()
        a, b = (saved[0], saved[1]) if saves_inputs else (None, None)
        ga, gb = grads(a, b, saved[-1] if saves_output else None, g)
        (sa, sb), (na, nb) = node.in_shapes, node.in_names
        return (None if ga is None or sa is None else sum_to(ga, sa, na),
                None if gb is None or sb is None else sum_to(gb, sb, nb))

    op = _op_class(name, forward, backward, (0, 1) if saves_inputs else (), saves_output, grads is not None,
                   complex_grad)

    def fn(a: Any, b: Any) -> Tensor:
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            an, bn = a._names, b._names
            return apply(op, (a, b), an if an is bn else unify(an, bn, name))
        a, b, names = _operands(name, a, b)
        return apply(op, (a, b), names)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with broadcasting; names unify (rule 2)."
    entry, operator = (fn, fn) if reuses is None else _elision.reusing_buffers(fn, op, reuses)
    entry.operator = operator  # type: ignore[attr-defined]  # a function attribute, which mypy cannot see
    entry.op = op  # type: ignore[attr-defined]  # the Op class, for graph rewrites (compiler/passes.py)
    return cast(Binary, entry)


def _operands(name: str, a, b):
    """``(a, b, names)``: the operands, one of them a tensor (the other a scalar or an unnamed tensor from
    an array), and the output names (rule 2)."""
    if isinstance(a, Tensor):
        b = operand(b, a, name)
        return a, b, (unify(a._names, b._names, name) if isinstance(b, Tensor) else a._names)
    if isinstance(b, Tensor):
        a = operand(a, b, name)
        return a, b, (unify(a._names, b._names, name) if isinstance(a, Tensor) else b._names)
    raise TypeError(f"{name}: at least one operand must be a Tensor, got {type(a).__name__} and {type(b).__name__}.")


def _reversed(fn: Callable[[Any, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    """The reflected operator (``2 - x`` calls ``x.__rsub__(2)``)."""

    def reflected(a: Tensor, b: Any) -> Tensor:
        return fn(b, a)

    return reflected


# ----------------------------------------------------------------------------- unary

_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_GELU_C = math.sqrt(2.0 / math.pi)


def _sigmoid(B, x):
    e = B.exp(-B.abs(x))
    return B.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(B, x):
    x = as_float_array(B, x)
    return B.log1p(B.exp(-B.abs(x))) + B.maximum(x, 0)


def _silu(B, x):
    x = as_float_array(B, x)
    return x * _sigmoid(B, x)


def _silu_grad(x: Tensor, g: Tensor) -> Tensor:
    s = x.sigmoid()
    return g * s * (1 + x * (1 - s))


def _zero_grad(x, y, g: Tensor) -> Tensor:
    """The gradient of a piecewise constant op (``sign``, ``floor``): zero wherever it is defined."""
    return g.zeros_like()


def _abs_grad(x: Tensor, g: Tensor) -> Tensor:
    if x.dtype.kind != "c":
        return g * x.sign()
    # d|z| = Re(conj(z) dz) / |z|: the gradient is g z / |z| (0 at z = 0, as in PyTorch), written without
    # sign(z), whose own gradient is not defined
    r = x.abs()
    return where(r == 0, 0, g * x / where(r == 0, 1, r))


neg = unary("neg", lambda B, x: B.negative(x), lambda x, y, g: -g, complex_grad=True)


def positive(t: Tensor) -> Tensor:
    """PyTorch's ``torch.positive`` and ``+t``: ``t`` itself (bool tensors refused, as in PyTorch)."""
    if tensor_arg(t, "positive").dtype is _dtypes.bool_:
        raise TypeError("positive: not defined for bool tensors (as in PyTorch); use t.clone() for a copy.")
    return t
abs = unary("abs", lambda B, x: B.abs(x), lambda x, y, g: _abs_grad(x, g), saves_input=True, complex_grad=True)
exp = unary("exp", lambda B, x: B.exp(x), lambda x, y, g: g * _conj(y), saves_output=True, complex_grad=True)
log = unary("log", lambda B, x: B.log(x), lambda x, y, g: g / _conj(x), saves_input=True, complex_grad=True)
log1p = unary("log1p", lambda B, x: B.log1p(x), lambda x, y, g: g / (x + 1), saves_input=True)
expm1 = unary("expm1", lambda B, x: B.expm1(x), lambda x, y, g: g * (y + 1), saves_output=True)
sqrt = unary("sqrt", lambda B, x: B.sqrt(x), lambda x, y, g: g * 0.5 / _conj(y), saves_output=True, complex_grad=True)
rsqrt = unary("rsqrt", lambda B, x: 1 / B.sqrt(x), lambda x, y, g: g * -0.5 * y * y * y, saves_output=True)
sin = unary("sin", lambda B, x: B.sin(x), lambda x, y, g: g * _conj(x.cos()), saves_input=True, complex_grad=True)
cos = unary("cos", lambda B, x: B.cos(x), lambda x, y, g: -g * _conj(x.sin()), saves_input=True, complex_grad=True)
tan = unary("tan", lambda B, x: B.tan(x), lambda x, y, g: g * (y * y + 1), saves_output=True)
tanh = unary("tanh", lambda B, x: B.tanh(x), lambda x, y, g: g * _conj(1 - y * y), saves_output=True,
             complex_grad=True)
sigmoid = unary("sigmoid", _sigmoid, lambda x, y, g: g * y * (1 - y), saves_output=True)
relu = unary("relu", lambda B, x: B.maximum(x, 0), lambda x, y, g: where(x > 0, g, 0), saves_input=True)
silu = unary("silu", _silu, lambda x, y, g: _silu_grad(x, g), saves_input=True)
softplus = unary("softplus", _softplus, lambda x, y, g: g * x.sigmoid(), saves_input=True)
erf = unary("erf", lambda B, x: B.erf(x), lambda x, y, g: g * (-(x * x)).exp() * _TWO_OVER_SQRT_PI,
            saves_input=True)
sign = unary("sign", lambda B, x: B.sign(x), _zero_grad)
floor = unary("floor", lambda B, x: B.floor(x), _zero_grad)
ceil = unary("ceil", lambda B, x: B.ceil(x), _zero_grad)
round = unary("round", lambda B, x: B.round(x), _zero_grad)
reciprocal = unary("reciprocal", lambda B, x: B.divide(1, x), lambda x, y, g: -g * _conj(y * y), saves_output=True,
                   complex_grad=True)
def _bool_operand(B, x) -> bool:
    return x.__class__ is bool if x.__class__ in SCALARS else B.dtype_of(x) is _dtypes.bool_


def _unless_both_bool(B, fn, a, b):
    """``fn(a, b)``, refused for two bool operands (arrays or Python bools): NumPy makes bool // bool,
    bool % bool, fmod and bool ** bool int8, where PyTorch and the Array API (numeric dtypes only) raise.
    Tested before the call, which the strict backend would refuse in its own words; the first test
    decides for every other operand (a generator and ``all`` here doubled ``t ** 2.0``'s 0.5 us)."""
    if _bool_operand(B, a) and _bool_operand(B, b):
        raise TypeError("not defined for two bool operands (NumPy's result is int8; PyTorch and the Array API "
                        "refuse it); convert them first, e.g. x.to(nt.int64).")
    return fn(a, b)


def _square(B, x):
    if B.dtype_of(x) is _dtypes.bool_:  # NumPy's square of a bool is an int8, which no tensor here holds
        raise TypeError("square: not defined for bool tensors; convert first (x.to(nt.int64)) or write x & x.")
    return x * x


square = unary("square", _square, lambda x, y, g: g * 2 * _conj(x), saves_input=True, complex_grad=True)
logical_not = unary("logical_not", lambda B, x: B.logical_not(x))
isnan = unary("isnan", lambda B, x: B.isnan(x))
isinf = unary("isinf", lambda B, x: B.isinf(x))
isfinite = unary("isfinite", lambda B, x: B.isfinite(x))

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2


def _special(fn: str) -> Callable:
    """The forward of a special function of the backend (``B.lgamma``...), integers computed in float64."""
    return lambda B, x: getattr(B, fn)(as_float_array(B, x))


acos = unary("acos", lambda B, x: B.acos(x), lambda x, y, g: -g / (1 - x * x).sqrt(), saves_input=True)
asin = unary("asin", lambda B, x: B.asin(x), lambda x, y, g: g / (1 - x * x).sqrt(), saves_input=True)
atan = unary("atan", lambda B, x: B.atan(x), lambda x, y, g: g / (1 + x * x), saves_input=True)
sinh = unary("sinh", lambda B, x: B.sinh(x), lambda x, y, g: g * x.cosh(), saves_input=True)
cosh = unary("cosh", lambda B, x: B.cosh(x), lambda x, y, g: g * x.sinh(), saves_input=True)
asinh = unary("asinh", lambda B, x: B.asinh(x), lambda x, y, g: g / (x * x + 1).sqrt(), saves_input=True)
acosh = unary("acosh", lambda B, x: B.acosh(x), lambda x, y, g: g / ((x - 1).sqrt() * (x + 1).sqrt()),
              saves_input=True)
atanh = unary("atanh", lambda B, x: B.atanh(x), lambda x, y, g: g / (1 - x * x), saves_input=True)
log2 = unary("log2", lambda B, x: B.log2(x), lambda x, y, g: g / (x * _LN2), saves_input=True)
log10 = unary("log10", lambda B, x: B.log10(x), lambda x, y, g: g / (x * _LN10), saves_input=True)
exp2 = unary("exp2", lambda B, x: B.exp2(x), lambda x, y, g: g * y * _LN2, saves_output=True)
trunc = unary("trunc", lambda B, x: B.trunc(x), _zero_grad)
frac = unary("frac", lambda B, x: x - B.trunc(x), lambda x, y, g: g)
erfc = unary("erfc", _special("erfc"), lambda x, y, g: g * (-(x * x)).exp() * -_TWO_OVER_SQRT_PI, saves_input=True)
erfinv = unary("erfinv", _special("erfinv"), lambda x, y, g: g * (y * y).exp() * _SQRT_PI_OVER_2, saves_output=True)
lgamma = unary("lgamma", _special("lgamma"), lambda x, y, g: g * x.digamma(), saves_input=True)
digamma = unary("digamma", _special("digamma"), lambda x, y, g: g * polygamma(1, x), saves_input=True)


class _Polygamma(Op):
    name = "polygamma"
    saves = (0,)

    @staticmethod
    def forward(B, x, n):
        return B.polygamma(n, as_float_array(B, x))

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        return (g * polygamma(node.params["n"] + 1, x),)


def polygamma(n: int, x: Tensor) -> Tensor:
    """The ``n``-th derivative of digamma (``polygamma(0, x)`` is ``digamma(x)``), as
    ``torch.polygamma(n, x)``; keeps the names.  The method is ``x.polygamma(n)``."""
    if is_bool(n) or not isinstance(n, int) or n < 0:
        raise ValueError(f"polygamma: n must be an int >= 0, got {n!r}.")
    return apply(_Polygamma, (tensor_arg(x, "polygamma"),), x._names, n=int(n))


def _polygamma_method(x: Tensor, n: int) -> Tensor:
    """``x.polygamma(n)``: :func:`polygamma` ``(n, x)``."""
    return polygamma(n, x)


def _number(v: Any, what: str, op: str) -> float:
    if is_bool(v) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {what} must be a number, got {type(v).__name__} {v!r}.")
    return v


def threshold(x: Tensor, threshold: float, value: float) -> Tensor:
    """``x`` where ``x > threshold``, else ``value`` (``torch.threshold``, ``F.threshold``); keeps names."""
    tensor_arg(x, "threshold")
    return where(x > _number(threshold, "threshold", "threshold"), x, _number(value, "value", "threshold"))


#: the largest finite value of each float dtype, nan_to_num's default for infinities
_FLOAT_MAX = {"float16": 65504.0, "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


class _NanToNum(Op):
    name = "nan_to_num"
    saves = (0,)

    @staticmethod
    def forward(B, x, nan, posinf, neginf):
        return B.where(B.isnan(x), nan, B.where(x == math.inf, posinf, B.where(x == -math.inf, neginf, x)))

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        return (where(x.isfinite(), g, 0),)


def nan_to_num(x: Tensor, nan: float = 0.0, posinf: Optional[float] = None,
               neginf: Optional[float] = None) -> Tensor:
    """NaN replaced by ``nan``, +-inf by ``posinf``/``neginf`` (by default the dtype's largest and
    smallest finite values), as ``torch.nan_to_num``; integer tensors come back unchanged.  Keeps names."""
    tensor_arg(x, "nan_to_num")
    nan = _number(nan, "nan", "nan_to_num")
    posinf = None if posinf is None else _number(posinf, "posinf", "nan_to_num")
    neginf = None if neginf is None else _number(neginf, "neginf", "nan_to_num")
    big = _FLOAT_MAX.get(x.dtype.name)
    if big is None:  # integers and bools hold no nan or inf
        return x.clone()
    return apply(_NanToNum, (x,), x._names, nan=nan, posinf=big if posinf is None else posinf,
                 neginf=-big if neginf is None else neginf)


class _Gelu(Op):
    """Exact GELU, ``x * Phi(x)``, one fused kernel; the backward reuses the forward's ``Phi(x)``
    unless it must build a graph (``create_graph``), where it recomputes it with tensor ops."""

    name = "gelu"
    saves = (0,)
    stashes = True

    @staticmethod
    def forward(B, x):
        return B.gelu(as_float_array(B, x))

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        if not is_grad_enabled():
            B = node.B
            return (Tensor._make(B.gelu_backward(as_float_array(B, x._data), node.stash, g._data), g._names, B),)
        return (g * (0.5 * (1 + (x / _SQRT_2).erf()) + x * (-0.5 * x * x).exp() * _INV_SQRT_2PI),)


class _GeluTanh(Op):
    name = "gelu"
    saves = (0,)

    @staticmethod
    def forward(B, x):
        x = as_float_array(B, x)
        return 0.5 * x * (1 + B.tanh(_GELU_C * (x + 0.044715 * x * x * x)))

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        inner = (x + 0.044715 * x * x * x) * _GELU_C
        t = inner.tanh()
        d_inner = (1 + 0.134145 * x * x) * _GELU_C
        return (g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner),)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (``approximate="none"``, with erf) or the tanh approximation; keeps names."""
    if approximate == "none":
        return apply(_Gelu, (tensor_arg(x, "gelu"),), x._names)
    if approximate == "tanh":
        return apply(_GeluTanh, (tensor_arg(x, "gelu"),), x._names)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}.")


# ----------------------------------------------------------------------------- binary


def _pow_grads(a, b, y, g):
    if a.__class__ in SCALARS:  # 2 ** t: only the exponent is a tensor
        return None, (g * y * math.log(a) if a > 0 else g.zeros_like())
    # x ** 0 is constant: its gradient is 0, also at x == 0 where b * a ** (b - 1) is nan
    ga = g.zeros_like() if b.__class__ in SCALARS and b == 0 else g * b * a ** (b - 1)
    if b.__class__ in SCALARS:
        return ga, None
    # d(a**b)/db = a**b log(a); where a <= 0 the log is undefined and the gradient is taken as 0
    return ga, where(a > 0, g * y * where(a > 0, a, 1).log(), 0)


def _extremum_grads(a, b, g, a_wins):
    """``maximum``/``minimum``: the gradient goes to the winner, split evenly on ties."""
    tie = a == b
    half = g * 0.5
    ga = where(a_wins, g, where(tie, half, 0))
    gb = where(a_wins.logical_or(tie).logical_not(), g, where(tie, half, 0))
    return ga, gb


def _remainder_grads(a, b, y, g):
    return g, None if b.__class__ in SCALARS else -g * (a / b).floor()


add = binary("add", lambda B, a, b: B.add(a, b), lambda a, b, y, g: (g, g), reuses="add", complex_grad=True)
sub = binary("sub", lambda B, a, b: B.subtract(a, b), lambda a, b, y, g: (g, -g), reuses="subtract",
             complex_grad=True)
mul = binary("mul", lambda B, a, b: B.multiply(a, b), lambda a, b, y, g: (g * _conj(b), g * _conj(a)),
             saves_inputs=True, reuses="multiply", complex_grad=True)
div = binary("div", lambda B, a, b: B.divide(a, b), lambda a, b, y, g: (g / _conj(b), -g * _conj(y / b)),
             saves_inputs=True, saves_output=True, reuses="divide", complex_grad=True)
pow = binary("pow", lambda B, a, b: _unless_both_bool(B, B.pow, a, b), _pow_grads,
             saves_inputs=True, saves_output=True)
maximum = binary("maximum", lambda B, a, b: B.maximum(a, b), lambda a, b, y, g: _extremum_grads(a, b, g, a > b),
                 saves_inputs=True, reuses="maximum")
minimum = binary("minimum", lambda B, a, b: B.minimum(a, b), lambda a, b, y, g: _extremum_grads(a, b, g, a < b),
                 saves_inputs=True, reuses="minimum")
remainder = binary("remainder", lambda B, a, b: _unless_both_bool(B, B.remainder, a, b), _remainder_grads, saves_inputs=True)
floor_divide = binary("floor_divide", lambda B, a, b: _unless_both_bool(B, B.floor_divide, a, b),
                      lambda a, b, y, g: (g.zeros_like(), None))
subtract = sub
multiply = mul
divide = true_divide = div
mod = remainder


def _atan2_grads(a, b, y, g):
    r2 = a * a + b * b
    return g * b / r2, -g * a / r2


def _copysign_grads(a, b, y, g):
    # d copysign(a, b)/da is sign(a) sign(result) (0 at a == 0, as PyTorch); b only chooses a sign
    return (None if a.__class__ in SCALARS else g * a.sign() * y.sign()), g.zeros_like()


def _fmod_grads(a, b, y, g):
    return g, None if b.__class__ in SCALARS else -g * (a / b).trunc()


atan2 = binary("atan2", lambda B, a, b: B.atan2(a, b), _atan2_grads, saves_inputs=True)
hypot = binary("hypot", lambda B, a, b: B.hypot(a, b), lambda a, b, y, g: (g * a / y, g * b / y),
               saves_inputs=True, saves_output=True)
logaddexp = binary("logaddexp", lambda B, a, b: B.logaddexp(a, b),
                   lambda a, b, y, g: (g * (a - y).exp(), g * (b - y).exp()), saves_inputs=True, saves_output=True)
copysign = binary("copysign", lambda B, a, b: B.copysign(a, b), _copysign_grads, saves_inputs=True,
                  saves_output=True)
fmod = binary("fmod", lambda B, a, b: _unless_both_bool(B, B.fmod, a, b), _fmod_grads, saves_inputs=True)

# comparisons and logical ops: boolean results, no gradient
eq = binary("eq", lambda B, a, b: B.equal(a, b))
ne = binary("ne", lambda B, a, b: B.not_equal(a, b))
def _ordered(compare: Callable) -> Callable:
    """The forward of an order comparison: complex operands are refused, as in PyTorch (NumPy would compare
    them lexicographically)."""
    def forward(B, a, b):
        for x in (a, b):
            if x.__class__ is complex or (x.__class__ not in SCALARS and B.dtype_of(x).kind == "c"):
                raise TypeError("complex numbers have no order (PyTorch refuses them too); compare a real key: "
                                "t.abs(), t.real or t.angle().")
        return compare(B, a, b)

    return forward


lt = binary("lt", _ordered(lambda B, a, b: B.less(a, b)))
le = binary("le", _ordered(lambda B, a, b: B.less_equal(a, b)))
gt = binary("gt", _ordered(lambda B, a, b: B.greater(a, b)))
ge = binary("ge", _ordered(lambda B, a, b: B.greater_equal(a, b)))
logical_and = binary("logical_and", lambda B, a, b: B.logical_and(a, b))
logical_or = binary("logical_or", lambda B, a, b: B.logical_or(a, b))
logical_xor = binary("logical_xor", lambda B, a, b: B.logical_xor(a, b))

# ----------------------------------------------------------------------------- where, clip


class _Where(Op):
    name = "where"
    complex_grad = True
    saves = (0,)

    @staticmethod
    def forward(B, cond, a, b):
        return B.where(cond, a, b)

    @staticmethod
    def backward(node, g):
        cond = node.saved_tensors()[0]
        _, sa, sb = node.in_shapes
        na, nb = node.in_names[1], node.in_names[2]
        ga = None if sa is None else sum_to(where(cond, g, 0), sa, na)
        gb = None if sb is None else sum_to(where(cond, 0, g), sb, nb)
        return (None, ga, gb)


def where(cond: Tensor, a: Any, b: Any) -> Tensor:
    """``a`` where ``cond`` is true, else ``b``; the three operands' names unify (rule 2)."""
    like = cond if isinstance(cond, Tensor) else a if isinstance(a, Tensor) else b
    if not isinstance(like, Tensor):
        raise TypeError("where: at least one operand must be a Tensor.")
    cond = operand(cond, like, "where")
    if not isinstance(cond, Tensor):
        raise TypeError("where: cond must be a boolean tensor.")
    a = operand(a, like, "where")
    b = operand(b, like, "where")
    names = cond._names
    for x in (a, b):
        if isinstance(x, Tensor):
            names = unify(names, x._names, "where")
    if cond._B.dtype_of(cond._data).kind != "b":
        raise TypeError(f"where: cond must be a bool tensor, got {cond.dtype!r}.")
    if a.__class__ in SCALARS and b.__class__ in SCALARS:
        raise TypeError("where: give at least one of a, b as a tensor (the result's dtype comes from it).")
    return apply(_Where, (cond, a, b), names)


class _Clip(Op):
    name = "clip"
    saves = (0,)

    @staticmethod
    def forward(B, x, min=None, max=None):
        if min is not None:
            x = B.maximum(x, min)
        if max is not None:
            x = B.minimum(x, max)
        return x

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        lo, hi = node.params["min"], node.params["max"]
        keep = None
        if lo is not None:
            keep = x >= lo
        if hi is not None:
            keep = (x <= hi) if keep is None else keep.logical_and(x <= hi)
        return (g if keep is None else where(keep, g, 0),)


def clip(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Limit values to ``[min, max]`` (numbers or tensors); keeps names (unifies with tensor bounds).  Complex
    tensors are refused, as in PyTorch: they have no order."""
    if isinstance(x, Tensor) and x.dtype.kind == "c":
        raise TypeError(f"clip: complex numbers have no order ({x.dtype!r}); PyTorch refuses them too. Clip a real "
                        "key instead: t.abs(), t.real or t.angle().")
    if any(b is not None and b.__class__ not in SCALARS for b in (min, max)):
        # tensors and arrays (NumPy scalars too) broadcast and unify names as the binary ops do
        out = x
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    if min is None and max is None:
        raise ValueError("clip: give min, max or both.")
    return apply(_Clip, (tensor_arg(x, "clip"),), x._names, min=min, max=max)


clamp = clip


def clamp_min(x: Tensor, min: Any) -> Tensor:
    """``clamp(x, min=min)`` (``torch.clamp_min``); keeps names."""
    tensor_arg(x, "clamp_min")
    if min is None:
        raise TypeError("clamp_min: min must be a number or a tensor, got None.")
    return clip(x, min=min)


def clamp_max(x: Tensor, max: Any) -> Tensor:
    """``clamp(x, max=max)`` (``torch.clamp_max``); keeps names."""
    tensor_arg(x, "clamp_max")
    if max is None:
        raise TypeError("clamp_max: max must be a number or a tensor, got None.")
    return clip(x, max=max)


def _names_of(op: str, *operands: Any) -> None:
    """Check that the tensor operands' names unify (rule 2), so that a mismatch is reported as ``op``'s."""
    unify_all([t._names for t in operands if isinstance(t, Tensor)], op)


def lerp(start: Tensor, end: Any, weight: Any) -> Tensor:
    """``start + weight * (end - start)``, computed as PyTorch does (``end - (end - start) * (1 - weight)``
    where ``|weight| >= 0.5``, so that ``weight = 1`` gives ``end`` exactly); the three operands' names
    unify (rule 2)."""
    tensor_arg(start, "lerp")
    end = operand(end, start, "lerp")
    weight = operand(weight, start, "lerp")
    _names_of("lerp", start, end, weight)
    diff = end - start
    if weight.__class__ in SCALARS:
        return start + weight * diff if -0.5 < weight < 0.5 else end - diff * (1 - weight)
    return where(weight.abs() < 0.5, start + weight * diff, end - diff * (1 - weight))


def _addc(op: str, combine: Callable, x: Tensor, tensor1: Any, tensor2: Any, value: Any) -> Tensor:
    tensor_arg(x, op)
    tensor1, tensor2 = operand(tensor1, x, op), operand(tensor2, x, op)
    _names_of(op, x, tensor1, tensor2)
    value = _number(value, "value", op)
    scaled = tensor1 if value == 1 else value * tensor1
    return x + combine(scaled, tensor2)


def addcmul(input: Tensor, tensor1: Any, tensor2: Any, *, value: float = 1) -> Tensor:
    """``input + value * tensor1 * tensor2`` (``torch.addcmul``); the operands' names unify (rule 2)."""
    return _addc("addcmul", mul, input, tensor1, tensor2, value)


def addcdiv(input: Tensor, tensor1: Any, tensor2: Any, *, value: float = 1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (``torch.addcdiv``); the operands' names unify (rule 2).
    Integer ``tensor1`` and ``tensor2`` are refused, as in PyTorch (their quotient would be a float)."""
    ints = [t for t in (tensor1, tensor2) if isinstance(t, Tensor) and t.dtype.kind != "f"]
    if len(ints) == 2:
        raise TypeError(f"addcdiv: tensor1 and tensor2 are both integer ({ints[0].dtype!r}, {ints[1].dtype!r}); "
                        "PyTorch refuses integer division here too: convert one with .float() or .double().")
    return _addc("addcdiv", div, input, tensor1, tensor2, value)

#: the ops of each table-made family, by name (tests check each against NumPy)
UNARY = {
    "neg": neg, "abs": abs, "exp": exp, "log": log, "log1p": log1p, "expm1": expm1, "sqrt": sqrt, "rsqrt": rsqrt,
    "sin": sin, "cos": cos, "tan": tan, "tanh": tanh, "sigmoid": sigmoid, "relu": relu, "silu": silu,
    "softplus": softplus, "erf": erf, "sign": sign, "floor": floor, "ceil": ceil, "round": round,
    "reciprocal": reciprocal, "square": square,
}
BINARY = {
    "add": add, "sub": sub, "mul": mul, "div": div, "pow": pow, "maximum": maximum, "minimum": minimum,
    "remainder": remainder, "floor_divide": floor_divide,
}
#: the math of PyTorch's tensor API beyond the set above, by name (tests/test_tensor_api.py checks each
#: against NumPy or SciPy); in-place variants and METHODS take them as they take the tables above
UNARY_EXTRA = {
    "acos": acos, "asin": asin, "atan": atan, "sinh": sinh, "cosh": cosh, "asinh": asinh, "acosh": acosh,
    "atanh": atanh, "log2": log2, "log10": log10, "exp2": exp2, "trunc": trunc, "frac": frac, "erfc": erfc,
    "erfinv": erfinv, "lgamma": lgamma, "digamma": digamma,
}
BINARY_EXTRA = {"atan2": atan2, "hypot": hypot, "logaddexp": logaddexp, "copysign": copysign, "fmod": fmod}
COMPARE = {
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge, "logical_and": logical_and,
    "logical_or": logical_or, "logical_xor": logical_xor,
}

METHODS = {
    **UNARY, **BINARY, **COMPARE, **UNARY_EXTRA, **BINARY_EXTRA,
    "polygamma": _polygamma_method, "nan_to_num": nan_to_num, "clamp_min": clamp_min, "clamp_max": clamp_max,
    "lerp": lerp, "addcmul": addcmul, "addcdiv": addcdiv,
    "gelu": gelu, "clip": clip, "clamp": clip, "logical_not": logical_not, "isnan": isnan, "isinf": isinf,
    "isfinite": isfinite, "subtract": sub, "multiply": mul, "divide": div, "true_divide": div,
    "__neg__": neg, "__abs__": abs, "__pos__": positive, "positive": positive,
    "__add__": add.operator, "__radd__": _reversed(add), "__sub__": sub.operator, "__rsub__": _reversed(sub),
    "__mul__": mul.operator, "__rmul__": _reversed(mul), "__truediv__": div.operator, "__rtruediv__": _reversed(div),
    "__floordiv__": floor_divide, "__rfloordiv__": _reversed(floor_divide),
    "__mod__": remainder, "__rmod__": _reversed(remainder), "__pow__": pow, "__rpow__": _reversed(pow),
    "__eq__": eq, "__ne__": ne, "__lt__": lt, "__le__": le, "__gt__": gt, "__ge__": ge,
}
