"""The scalar formulas of fused elementwise chains, forward and backward, for every code generator.

:data:`SCALAR` gives, for each elementwise op the code generators know (by its Op class), the value of
one element from its operands' texts; :data:`GRAD` gives the gradient of each operand from the
operands, the result ``t`` and the result's gradient ``g``, as the op's own backward computes it.  The
texts are Python expressions (Numba compiles them as they are; cuda_codegen.py turns them into C).

:func:`forward` writes a chain as statements ``(variable, dtype, expression)``: each member's result
``t{j}`` from the chain's inputs ``x{k}`` and earlier results, converted to the dtype the trace
recorded, Python numbers typed as NumPy 2 types them next to a tensor (weak scalars), so a kernel
computes in the dtypes an eager run does.  :func:`backward` writes the chain's backward: it recomputes
the results, then takes the gradients ``go{k}`` of the chain's outputs back through the members in
reverse order, summing what each value receives, to the gradient of each input (None for an input
that no differentiable member reads, whose gradient eagerly is None too).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..ops.fusion import Chain
from .ir import Value

__all__ = ["SCALAR", "GRAD", "COMPOSITE", "CALLS_MATH", "POW_EXPONENTS", "INTEGER_POWERS",
           "REDUCTIONS", "SOFTMAXES",
           "reduced_axes", "mean_scale", "reduces", "softmaxes", "softmax_seed", "softmax_row_term", "split_reduction", "broadcast_shape", "calls_math", "work", "scalar_op", "fusible_dtypes", "chain_dtypes", "forward", "backward"]

FLOATS = ("float32", "float64")
Statement = Tuple[str, str, str]  # (variable, dtype, expression)
_SQRT1_2 = repr(1 / math.sqrt(2.0))
_GELU_C = repr(math.sqrt(2.0 / math.pi))
_TWO_OVER_SQRT_PI = repr(2.0 / math.sqrt(math.pi))
_INV_SQRT_2PI = repr(1.0 / math.sqrt(2.0 * math.pi))


def _nan_max(a: str, b: str) -> str:
    # NumPy's maximum: a NaN on either side wins
    return f"({a} if ({a} >= {b} or {a} != {a}) else {b})"


def _nan_min(a: str, b: str) -> str:
    return f"({a} if ({a} <= {b} or {a} != {a}) else {b})"


def _sigmoid(x: str) -> str:
    return f"(1.0 / (1.0 + exp(-{x})) if {x} >= 0 else exp({x}) / (1.0 + exp({x})))"


def _clip(a: List[str], p: Dict[str, Any]) -> str:
    x = a[0]
    if p.get("min") is not None:
        x = _nan_max(x, "LO")
    if p.get("max") is not None:
        x = _nan_min(x, "HI")
    return x


def _clip_grad(a: List[str], t: str, g: str, p: Dict[str, Any]) -> List[Optional[str]]:
    inside = [f"{a[0]} >= LO" if p.get("min") is not None else "", f"{a[0]} <= HI" if p.get("max") is not None else ""]
    return [f"({g} if ({' and '.join(c for c in inside if c)}) else 0.0)"]


def _logaddexp(a: List[str], p: Dict[str, Any]) -> str:
    # NumPy's: x + log(2) where the operands are equal (infinities of one sign too), else the larger plus
    # log1p(exp(-|x - y|)), and the difference itself where it is NaN (one exponential and one logarithm:
    # a select of two would compute both)
    x, y = a
    d = f"({x} - {y})"
    return (f"(({x} + 0.6931471805599453) if {x} == {y} else "
            f"((({x} if {d} > 0 else {y}) + log1p(exp(-fabs{d}))) if {d} == {d} else {d}))")


def _sign(x: str) -> str:
    # NumPy's sign: NaN stays NaN
    return f"({x} if {x} != {x} else (1.0 if {x} > 0 else (-1.0 if {x} < 0 else 0.0)))"


#: the numbers ``x ** e`` takes without the C library's ``pow``: by products, a square root or a division
#: (each exact, or within an ulp of the correctly rounded power), with NumPy's edge cases (its power by
#: 0.5 is a square root: NaN at -inf, -0 at -0)
POW_EXPONENTS = {
    0.0: (lambda x: "1.0", lambda x, g: "0.0"),
    0.5: (lambda x: f"sqrt({x})", lambda x, g: f"({g} * 0.5 / sqrt({x} + 0.0))"),  # NumPy's x ** 0.5 is sqrt
    1.0: (lambda x: x, lambda x, g: g),
    2.0: (lambda x: f"({x} * {x})", lambda x, g: f"({g} * 2.0 * {x})"),
    3.0: (lambda x: f"({x} * {x} * {x})", lambda x, g: f"({g} * 3.0 * ({x} * {x}))"),
    -1.0: (lambda x: f"(1.0 / {x})", lambda x, g: f"({g} * -1.0 / ({x} * {x}))"),
}
#: the largest |n| of the integer powers that CPU kernels compute by products (numba_math.powi64 in float64:
#: a product per bit of n and a square, vectorized; a million elements: x ** 4 0.31 ms, x ** 16 0.64, against
#: 1.5 for NumPy's vectorized pow on this machine, and a chain's kernel saves a pass over memory or more
#: besides; numba_math.powi32 in float32, in float64 products: 0.1 ms).  Larger ones would be as fast, but
#: exact only for |x| within 2^(+-POWI_SAFE / n), narrower as n grows (2^-14 to 2^14 for x ** 64): they take
#: numba_math.pow64 and pow32, as other exponents do
INTEGER_POWERS = 16
_TYPED_NUMBER = re.compile(r"^float(?:32|64)\((.+)\)$")
#: the texts of the numbers that Python's repr does not spell as literals (the kernels' modules import
#: NumPy as np; cuda_codegen.c_expression spells these in C)
_NONFINITE = {math.inf: "np.inf", -math.inf: "-np.inf"}


def _exponent(text: str) -> Optional[float]:
    """The number of an operand's text that is a typed literal (``float32(2.0)``, ``float32(-np.inf)``: float
    reads the non-finite ones without ``np.``), else None."""
    m = _TYPED_NUMBER.match(text)
    return None if not m else float(m.group(1).replace("np.", ""))


def _pow(a: List[str]) -> str:
    special = POW_EXPONENTS.get(_exponent(a[1]))
    return special[0](a[0]) if special else f"pow({a[0]}, {a[1]})"


def _pow_grad(a: List[str], t: str, g: str) -> List[Optional[str]]:
    e = _exponent(a[1])
    special = POW_EXPONENTS.get(e)
    if special:
        base = special[1](a[0], g)
    elif e is not None:  # the power of e - 1 as the forward writes one (a product, or an integer power)
        base = f"({g} * {a[1]} * {_pow([a[0], _literal(e - 1.0, a[1][:a[1].index('(')])])})"
    else:
        base = f"({g} * {a[1]} * pow({a[0]}, {a[1]} - 1.0))"
    return [base, f"({g} * {t} * log({a[0]}) if {a[0]} > 0 else 0.0)"]


def _gelu_tanh_grad(x: str, g: str) -> str:
    inner = f"tanh(({x} + 0.044715 * {x} * {x} * {x}) * {_GELU_C})"
    slope = f"((1.0 + 0.134145 * {x} * {x}) * {_GELU_C})"
    return f"({g} * (0.5 * (1.0 + {inner}) + 0.5 * {x} * (1.0 - {inner} * {inner}) * {slope}))"


#: Op class name -> the formula of one element from its operands' texts and the op's params.  Every
#: formula compiles to vector instructions on the CPU, in float32 and float64: arithmetic, comparisons,
#: selections, square roots, rounding (floor, ceil, trunc, round half to even as NumPy's), sign, the tests
#: for NaN, infinities and finite numbers, nan_to_num, and exp, expm1, exp2, tanh, erf, log, log1p, log2,
#: logaddexp, sin, cos and pow through
#: backends/numba_math.py (sin and cos reduce their argument exactly below numba_math.TRIG_LIMIT, a float64
#: power is exact where numba_math.pow64_safe holds, and the kernel does a chunk with another argument
#: again with the C library's functions: numba_codegen._exact_pass).  A formula that called the C library
#: one element at a time would be several times slower than NumPy's vectorized loops: numba_math needs a
#: function of its own before such a formula joins this table.
SCALAR: Dict[str, Callable[[List[str], Dict[str, Any]], str]] = {
    "_Add": lambda a, p: f"({a[0]} + {a[1]})",
    "_Sub": lambda a, p: f"({a[0]} - {a[1]})",
    "_Mul": lambda a, p: f"({a[0]} * {a[1]})",
    "_Div": lambda a, p: f"({a[0]} / {a[1]})",
    "_Neg": lambda a, p: f"(-{a[0]})",
    "_Abs": lambda a, p: f"fabs({a[0]})",
    "_Square": lambda a, p: f"({a[0]} * {a[0]})",
    "_Reciprocal": lambda a, p: f"(1.0 / {a[0]})",
    "_Exp": lambda a, p: f"exp({a[0]})",
    "_Expm1": lambda a, p: f"expm1({a[0]})",
    "_Log": lambda a, p: f"log({a[0]})",
    "_Log1P": lambda a, p: f"log1p({a[0]})",
    "_Log2": lambda a, p: f"log2({a[0]})",
    "_Exp2": lambda a, p: f"exp2({a[0]})",
    "_Sqrt": lambda a, p: f"sqrt({a[0]})",
    "_Rsqrt": lambda a, p: f"(1.0 / sqrt({a[0]}))",
    "_Sin": lambda a, p: f"sin({a[0]})",
    "_Cos": lambda a, p: f"cos({a[0]})",
    "_Tanh": lambda a, p: f"tanh({a[0]})",
    "_Erf": lambda a, p: f"erf({a[0]})",
    "_Sigmoid": lambda a, p: _sigmoid(a[0]),
    "_Relu": lambda a, p: f"({a[0]} if not ({a[0]} < 0) else 0.0)",
    "_Silu": lambda a, p: f"({a[0]} * {_sigmoid(a[0])})",
    "_Softplus": lambda a, p: f"(log1p(exp(-fabs({a[0]}))) + {_nan_max(a[0], '0.0')})",
    "_Gelu": lambda a, p: f"(0.5 * {a[0]} * (1.0 + erf({a[0]} * {_SQRT1_2})))",
    "_GeluTanh": lambda a, p: (f"(0.5 * {a[0]} * (1.0 + tanh({_GELU_C} * ({a[0]} + 0.044715 * {a[0]} * {a[0]} "
                               f"* {a[0]}))))"),
    "_Maximum": lambda a, p: _nan_max(a[0], a[1]),
    "_Minimum": lambda a, p: _nan_min(a[0], a[1]),
    "_Pow": lambda a, p: _pow(a),
    "_Where": lambda a, p: f"({a[1]} if {a[0]} else {a[2]})",
    "_Clip": _clip,
    "_Floor": lambda a, p: f"floor({a[0]})",
    "_Ceil": lambda a, p: f"ceil({a[0]})",
    "_Trunc": lambda a, p: f"trunc({a[0]})",
    "_Round": lambda a, p: f"rint({a[0]})",  # half to even, as NumPy's round
    "_Frac": lambda a, p: f"({a[0]} - trunc({a[0]}))",
    "_Sign": lambda a, p: _sign(a[0]),
    "_Isnan": lambda a, p: f"({a[0]} != {a[0]})",
    "_Isinf": lambda a, p: f"(fabs({a[0]}) == np.inf)",
    "_Isfinite": lambda a, p: f"(({a[0]} - {a[0]}) == 0.0)",  # inf - inf and NaN - NaN are NaN
    "_NanToNum": lambda a, p: (f"(NAN_TO if {a[0]} != {a[0]} else (POS_TO if {a[0]} == np.inf else "
                               f"(NEG_TO if {a[0]} == -np.inf else {a[0]})))"),
    "_Logaddexp": _logaddexp,
    "_Eq": lambda a, p: f"({a[0]} == {a[1]})",
    "_Ne": lambda a, p: f"({a[0]} != {a[1]})",
    "_Lt": lambda a, p: f"({a[0]} < {a[1]})",
    "_Le": lambda a, p: f"({a[0]} <= {a[1]})",
    "_Gt": lambda a, p: f"({a[0]} > {a[1]})",
    "_Ge": lambda a, p: f"({a[0]} >= {a[1]})",
    # NumPy's truth of a number: not 0 (a NaN is true)
    "_LogicalAnd": lambda a, p: f"(({a[0]} != 0) and ({a[1]} != 0))",
    "_LogicalOr": lambda a, p: f"(({a[0]} != 0) or ({a[1]} != 0))",
    "_LogicalXor": lambda a, p: f"(({a[0]} != 0) != ({a[1]} != 0))",
    "_LogicalNot": lambda a, p: f"({a[0]} == 0)",
    "_Copysign": lambda a, p: f"copysign({a[0]}, {a[1]})",
    # of bools, a mask's &, | and ~ (fusible values are floats or bools: no integer reaches these)
    "_BitwiseAnd": lambda a, p: f"({a[0]} and {a[1]})",
    "_BitwiseOr": lambda a, p: f"({a[0]} or {a[1]})",
    "_BitwiseXor": lambda a, p: f"({a[0]} != {a[1]})",
    "_BitwiseNot": lambda a, p: f"(not {a[0]})",
}

#: Op class name -> the gradient of each operand (None: none) from the operands' texts ``a``, the
#: result ``t``, the result's gradient ``g`` and the params; the comparisons have none.  (``x ** 0`` is
#: constant: its gradient is 0, also at 0, as eagerly.)
GRAD: Dict[str, Callable[[List[str], str, str, Dict[str, Any]], List[Optional[str]]]] = {
    "_Add": lambda a, t, g, p: [g, g],
    "_Sub": lambda a, t, g, p: [g, f"(-{g})"],
    "_Mul": lambda a, t, g, p: [f"({g} * {a[1]})", f"({g} * {a[0]})"],
    "_Div": lambda a, t, g, p: [f"({g} / {a[1]})", f"(-{g} * ({t} / {a[1]}))"],
    "_Neg": lambda a, t, g, p: [f"(-{g})"],
    "_Abs": lambda a, t, g, p: [f"({g} * {_sign(a[0])})"],
    "_Square": lambda a, t, g, p: [f"({g} * 2.0 * {a[0]})"],
    "_Reciprocal": lambda a, t, g, p: [f"(-{g} * ({t} * {t}))"],
    "_Exp": lambda a, t, g, p: [f"({g} * {t})"],
    "_Expm1": lambda a, t, g, p: [f"({g} * ({t} + 1.0))"],
    "_Log": lambda a, t, g, p: [f"({g} / {a[0]})"],
    "_Log1P": lambda a, t, g, p: [f"({g} / ({a[0]} + 1.0))"],
    "_Log2": lambda a, t, g, p: [f"({g} / ({a[0]} * 0.6931471805599453))"],
    "_Exp2": lambda a, t, g, p: [f"({g} * {t} * 0.6931471805599453)"],
    "_Sqrt": lambda a, t, g, p: [f"({g} * 0.5 / {t})"],
    "_Rsqrt": lambda a, t, g, p: [f"({g} * -0.5 * {t} * {t} * {t})"],
    "_Sin": lambda a, t, g, p: [f"({g} * cos({a[0]}))"],
    "_Cos": lambda a, t, g, p: [f"(-{g} * sin({a[0]}))"],
    "_Tanh": lambda a, t, g, p: [f"({g} * (1.0 - {t} * {t}))"],
    "_Erf": lambda a, t, g, p: [f"({g} * exp(-({a[0]} * {a[0]})) * {_TWO_OVER_SQRT_PI})"],
    "_Sigmoid": lambda a, t, g, p: [f"({g} * {t} * (1.0 - {t}))"],
    "_Relu": lambda a, t, g, p: [f"({g} if {a[0]} > 0 else 0.0)"],
    **{name: (lambda a, t, g, p: ["0.0"]) for name in ("_Floor", "_Ceil", "_Trunc", "_Round", "_Sign")},
    "_Frac": lambda a, t, g, p: [g],
    "_NanToNum": lambda a, t, g, p: [f"({g} if ({a[0]} - {a[0]}) == 0.0 else 0.0)"],
    "_Logaddexp": lambda a, t, g, p: [f"({g} * exp({a[0]} - {t}))", f"({g} * exp({a[1]} - {t}))"],
    "_Silu": lambda a, t, g, p: [f"({g} * {_sigmoid(a[0])} * (1.0 + {a[0]} * (1.0 - {_sigmoid(a[0])})))"],
    "_Softplus": lambda a, t, g, p: [f"({g} * {_sigmoid(a[0])})"],
    "_Gelu": lambda a, t, g, p: [f"({g} * (0.5 * (1.0 + erf({a[0]} * {_SQRT1_2})) + {a[0]} * exp(-0.5 * {a[0]} "
                                 f"* {a[0]}) * {_INV_SQRT_2PI}))"],
    "_GeluTanh": lambda a, t, g, p: [_gelu_tanh_grad(a[0], g)],
    "_Maximum": lambda a, t, g, p: [f"({g} if {a[0]} > {a[1]} else (0.5 * {g} if {a[0]} == {a[1]} else 0.0))",
                                    f"({g} if not ({a[0]} > {a[1]} or {a[0]} == {a[1]}) else "
                                    f"(0.5 * {g} if {a[0]} == {a[1]} else 0.0))"],
    "_Minimum": lambda a, t, g, p: [f"({g} if {a[0]} < {a[1]} else (0.5 * {g} if {a[0]} == {a[1]} else 0.0))",
                                    f"({g} if not ({a[0]} < {a[1]} or {a[0]} == {a[1]}) else "
                                    f"(0.5 * {g} if {a[0]} == {a[1]} else 0.0))"],
    "_Pow": lambda a, t, g, p: _pow_grad(a, t, g),
    # sign(a) sign(result): 0 where a is 0, as eagerly; the sign's operand gets a zero gradient
    "_Copysign": lambda a, t, g, p: [f"({g} * {_sign(a[0])} * {_sign(t)})", "0.0"],
    "_Where": lambda a, t, g, p: [None, f"({g} if {a[0]} else 0.0)", f"(0.0 if {a[0]} else {g})"],
    "_Clip": _clip_grad,
}

#: the formulas whose eager form takes several passes over memory or a slow loop (erf's, and NumPy's
#: logaddexp: the C library's exp and log1p one element at a time, 11.5 ms a million float32 elements against
#: a kernel's 0.9), so that even alone, one generated CPU kernel is faster than the eager op
COMPOSITE = frozenset({"_Gelu", "_GeluTanh", "_Erf", "_Sigmoid", "_Silu", "_Softplus", "_Sin", "_Cos", "_Logaddexp"})


#: the formulas that call backends/numba_math.py's functions (a power but by the numbers of POW_EXPONENTS):
#: Numba inlines each call into the kernel, which makes up most of its compile time
CALLS_MATH = frozenset({"_Exp", "_Expm1", "_Exp2", "_Tanh", "_Sigmoid", "_Silu", "_Log", "_Log1P", "_Log2", "_Softplus",
                        "_Logaddexp", "_Sin", "_Cos", "_Erf", "_Gelu", "_GeluTanh"})


def calls_math(name: str, args: Sequence[Any]) -> bool:
    """Whether the formula of Op class ``name`` on ``args`` (values, or numbers) calls numba_math."""
    return name in CALLS_MATH or (name == "_Pow" and _numeric(args[1]) not in POW_EXPONENTS)


def faster_alone(name: str, args: Sequence[Any]) -> bool:
    """Whether one CPU kernel of the formula of Op class ``name`` on ``args`` alone beats the eager op: a
    COMPOSITE formula, or a power by an integer up to INTEGER_POWERS but 0, 1, 2 and -1 (which NumPy
    computes as a copy, a square or a reciprocal): numba_math.powi32 and powi64 take 0.1 and 0.3 ms a
    million elements, NumPy's pow 0.4 and 1.5 for positive bases and 44 when some are negative (its
    vectorized loop does those one at a time)."""
    if name in COMPOSITE:
        return True
    e = _numeric(args[1]) if name == "_Pow" else None
    return integer_power(e) and e not in (1.0, 2.0, -1.0)


def float32_pow(name: str, args: Sequence[Any], dtype: str) -> bool:
    """Whether the formula of Op class ``name`` on ``args`` with a result of ``dtype`` is a float32 power
    that CPU kernels compute with numba_math.pow32: by a tensor, or by a number neither of POW_EXPONENTS
    nor an integer up to INTEGER_POWERS (numba_math.powi32)."""
    if name != "_Pow" or dtype != "float32":
        return False
    e = _numeric(args[1])
    return e is None or (e not in POW_EXPONENTS and not integer_power(e))


def integer_power(e: Optional[float]) -> bool:
    """Whether ``x ** e`` is a power by an integer that CPU kernels compute by products: ``0 < |e| <=
    INTEGER_POWERS``."""
    return e is not None and e.is_integer() and 0 < abs(e) <= INTEGER_POWERS


def work(chain: Chain) -> int:
    """A chain's cost per element, in vectorized additions: a formula that calls numba_math (calls_math: an
    exponential, a logarithm, erf, a power but by the numbers of POW_EXPONENTS) counts 20, any other 1.
    Rough, and low for the costliest (float64 expm1 takes about 0.8 ns an element, erf 3), but enough
    to split an ELU over two million elements among the threads, as an addition of that many is not."""
    return sum(20 if calls_math(m.op.__name__, m.args) else 1 for m in chain.members)


def _numeric(a: Any) -> Optional[float]:
    return float(a) if isinstance(a, (int, float)) and not isinstance(a, bool) else None



#: the modules whose Op classes the tables name (a class of the same name elsewhere is another op)
_MODULES = ("namedtensor.ops.elementwise", "namedtensor.ops.bitwise")

#: numbers in params that become typed constants of the kernel
_PARAM_CONSTANTS = {"_Clip": (("min", "LO"), ("max", "HI")),
                    "_NanToNum": (("nan", "NAN_TO"), ("posinf", "POS_TO"), ("neginf", "NEG_TO"))}


#: the reductions a kernel computes at the end of a chain (over any dims), by Op class name
REDUCTIONS = {"_Sum": "sum", "_Mean": "mean"}
#: the normalisations a kernel computes at the end of a chain (scale + mask + softmax), along any dim, by
#: Op class name
SOFTMAXES = {"_Softmax": "softmax", "_LogSoftmax": "log_softmax"}
_REDUCTION_MODULE = "namedtensor.ops.reductions"


def mean_scale(count: int) -> float:
    """What a mean's gradient is multiplied by: 1 / ``count``, the elements each output averages; NaN for
    none, as NumPy's mean of nothing is (the gradient of an empty input has no elements anyway)."""
    return 1.0 / count if count else math.nan


def reduced_axes(axes: Optional[Sequence[int]], ndim: int) -> Tuple[int, ...]:
    """A reduction's ``axes`` param (None: all) as sorted axes of an ``ndim``-dim input."""
    return tuple(range(ndim)) if axes is None else tuple(sorted(a % ndim for a in axes)) if ndim else ()


def reduces(op: type, params: Dict[str, Any], ndim: int) -> bool:
    """Whether ``op`` with ``params`` is a sum or mean over some dims of an ``ndim``-dim input."""
    if op.__name__ not in REDUCTIONS or op.__module__ != _REDUCTION_MODULE:
        return False
    return bool(reduced_axes(params.get("axes"), ndim))


def softmaxes(op: type, ndim: int) -> bool:
    """Whether ``op`` is a softmax or log-softmax of an ``ndim``-dim input (along any dim)."""
    return op.__name__ in SOFTMAXES and op.__module__ == _REDUCTION_MODULE and ndim > 0


def softmax_seed(kind: str, dtype: str) -> Statement:
    """The statement giving the gradient ``go0`` of a softmax chain's elementwise part per element, from
    the softmax's output ``y``, its gradient ``g`` and the row's :func:`softmax_row_term` ``d``:
    ``y (g - d)``, or ``g - exp(y) d`` for log-softmax (``kind``)."""
    return ("go0", dtype, "y * (g - d)" if kind == "softmax" else "g - exp(y) * d")


def softmax_row_term(B, kind: str, g, y, axis: int = -1):
    """The number per row along ``axis`` that :func:`softmax_seed` reads, kept as a size-1 dim there:
    ``sum(g y)`` for a softmax, ``sum(g)`` for a log-softmax, on backend ``B``'s arrays."""
    if kind != "softmax":
        return B.sum(g, axis=axis, keepdims=True)
    return B.rowdot(g, y) if axis in (-1, len(y.shape) - 1) else B.sum(B.multiply(g, y), axis=axis, keepdims=True)


def split_reduction(chain: Chain) -> Tuple[Chain, Optional[str], Optional[Tuple[int, ...]]]:
    """``(elementwise part, the end's kind or None, its axes param)`` of a chain that may end in a
    reduction ("sum", "mean": the axes, None for all, are normalised by :func:`reduced_axes` against the
    chain's shape) or a normalisation along one dim ("softmax", "log_softmax": its axis);
    passes.fuse_elementwise puts one only last, reading the member before it."""
    last = chain.members[-1]
    name = last.op.__name__
    kind = (REDUCTIONS.get(name) or SOFTMAXES.get(name)) if last.op.__module__ == _REDUCTION_MODULE else None
    if kind is None:
        return chain, None, None
    axes = (last.params["axis"],) if name in SOFTMAXES else last.params.get("axes")
    return Chain(chain.members[:-1], (len(chain.members) - 2,)), kind, None if axes is None else tuple(axes)


def broadcast_shape(shapes: Sequence[Sequence[int]]) -> Tuple[int, ...]:
    """The shape that ``shapes`` broadcast to (they must broadcast): a chain's elementwise shape, from its
    inputs' shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for d, n in enumerate(s, ndim - len(s)):
            if n != 1:
                out[d] = n
    return tuple(out)


def scalar_op(op: type) -> bool:
    """Whether the code generators have a formula for ``op``."""
    return op.__name__ in SCALAR and op.__module__ in _MODULES


def fusible_dtypes(values: Sequence[Value]) -> bool:
    return all(v.dtype in FLOATS or v.dtype == "bool" for v in values)


def chain_dtypes(chain: Chain) -> Tuple[str, ...]:
    """Each member's result dtype."""
    return tuple(m.dtype for m in chain.members)


def _literal(v: Any, dtype: str) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    v = float(v)
    return f"{dtype}({'np.nan' if v != v else _NONFINITE.get(v, repr(v))})"


def _is_ref(a: Any) -> bool:
    return isinstance(a, tuple) and len(a) == 2 and a[0] in ("in", "tmp")


def _member_texts(chain: Chain, j: int, in_dtypes: Sequence[str]) -> Tuple[List[str], str]:
    """Member ``j``'s operands as texts, and the dtype its Python numbers take (its first non-bool tensor
    operand's, else its result's)."""
    m = chain.members[j]
    dtypes = chain_dtypes(chain)

    def dtype_of(a) -> str:
        return in_dtypes[a[1]] if a[0] == "in" else dtypes[a[1]]

    number_dtype = next((dtype_of(a) for a in m.args if _is_ref(a) and dtype_of(a) != "bool"), dtypes[j])
    texts = [(f"x{a[1]}" if a[0] == "in" else f"t{a[1]}") if _is_ref(a) else _literal(a, number_dtype)
             for a in m.args]
    return texts, number_dtype


def _with_params(expr: str, chain: Chain, j: int, number_dtype: str) -> str:
    m = chain.members[j]
    for param, name in _PARAM_CONSTANTS.get(m.op.__name__, ()):
        value = m.params.get(param)
        if value is not None:
            expr = expr.replace(name, _literal(value, number_dtype))
    return expr


def forward(chain: Chain, in_dtypes: Sequence[str]) -> Tuple[List[Statement], List[str]]:
    """The chain's statements, and the variables of its outputs."""
    dtypes = chain_dtypes(chain)
    lines = []
    for j, m in enumerate(chain.members):
        texts, number_dtype = _member_texts(chain, j, in_dtypes)
        lines.append((f"t{j}", dtypes[j], _with_params(SCALAR[m.op.__name__](texts, m.params), chain, j, number_dtype)))
    return lines, [f"t{j}" for j in chain.outputs]


def backward(chain: Chain, in_dtypes: Sequence[str]) -> Tuple[List[Statement], List[Optional[str]]]:
    """The statements of the chain's backward (reading ``x{k}`` and the outputs' gradients ``go{k}``),
    and the variable of each input's gradient (None where it has none)."""
    lines, _ = forward(chain, in_dtypes)
    dtypes = chain_dtypes(chain)
    received: Dict[Tuple[str, int], List[str]] = {}
    for k, j in enumerate(chain.outputs):
        if dtypes[j] in FLOATS:
            received.setdefault(("tmp", j), []).append(f"go{k}")
    for j in range(len(chain.members) - 1, -1, -1):
        terms = received.pop(("tmp", j), None)
        m = chain.members[j]
        if not terms or m.op.__name__ not in GRAD:
            continue
        lines.append((f"g{j}", dtypes[j], " + ".join(terms)))
        texts, number_dtype = _member_texts(chain, j, in_dtypes)
        grads = GRAD[m.op.__name__](texts, f"t{j}", f"g{j}", m.params)
        for a, ga in zip(m.args, grads):
            if ga is not None and _is_ref(a) and (in_dtypes[a[1]] if a[0] == "in" else dtypes[a[1]]) in FLOATS:
                received.setdefault(a, []).append(_with_params(ga, chain, j, number_dtype))
    grads_of_inputs: List[Optional[str]] = []
    for k, dtype in enumerate(in_dtypes):
        terms = received.get(("in", k))
        if terms:
            lines.append((f"gx{k}", dtype, " + ".join(terms)))
        grads_of_inputs.append(f"gx{k}" if terms else None)
    return lines, grads_of_inputs
