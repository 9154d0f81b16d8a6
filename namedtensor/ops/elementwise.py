"""Elementwise math: unary functions, binary operators, comparisons, ``where`` and ``clip``.

Name rules: unary ops keep the input's names; binary ops and ``where`` unify
their operands' names (rule 2, :func:`namedtensor._names.unify`).  Each op is
one row of a table: its forward on raw arrays and its gradient written with
tensor ops (so it can be differentiated again).
"""

from __future__ import annotations

import math

from .. import _dtypes, _names
from .._names import unify
from ..autograd import graph
from ..autograd.graph import Op, apply, is_grad_enabled
from ..tensor import Tensor
from . import _elision
from ._elision import refcount as getrefcount
from ._common import SCALARS, operand, sum_to

# ----------------------------------------------------------------------------- unary

_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _floating(B, x):
    """``x`` itself when floating-point, else as float64 (NumPy's result for integer input, on every backend)."""
    return x if B.dtype_of(x).kind == "f" else B.astype(x, B.native(_dtypes.float64))


def _sigmoid(B, x):
    e = B.exp(-B.abs(x))
    return B.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(B, x):
    x = _floating(B, x)
    return B.log1p(B.exp(-B.abs(x))) + B.maximum(x, 0)


def _silu(B, x):
    x = _floating(B, x)
    return x * _sigmoid(B, x)


def _zero_grad(x, y, g):
    return g.zeros_like()


#: name -> (forward(B, x), grad(x, y, g) with tensors, what the grad uses: "x", "y" or "").
UNARY = {
    "neg": (lambda B, x: B.negative(x), lambda x, y, g: -g, ""),
    "abs": (lambda B, x: B.abs(x), lambda x, y, g: g * x.sign(), "x"),
    "exp": (lambda B, x: B.exp(x), lambda x, y, g: g * y, "y"),
    "log": (lambda B, x: B.log(x), lambda x, y, g: g / x, "x"),
    "log1p": (lambda B, x: B.log1p(x), lambda x, y, g: g / (x + 1), "x"),
    "expm1": (lambda B, x: B.expm1(x), lambda x, y, g: g * (y + 1), "y"),
    "sqrt": (lambda B, x: B.sqrt(x), lambda x, y, g: g * 0.5 / y, "y"),
    "rsqrt": (lambda B, x: 1 / B.sqrt(x), lambda x, y, g: g * -0.5 * y * y * y, "y"),
    "sin": (lambda B, x: B.sin(x), lambda x, y, g: g * x.cos(), "x"),
    "cos": (lambda B, x: B.cos(x), lambda x, y, g: -g * x.sin(), "x"),
    "tan": (lambda B, x: B.tan(x), lambda x, y, g: g * (y * y + 1), "y"),
    "tanh": (lambda B, x: B.tanh(x), lambda x, y, g: g * (1 - y * y), "y"),
    "sigmoid": (_sigmoid, lambda x, y, g: g * y * (1 - y), "y"),
    "relu": (lambda B, x: B.maximum(x, 0), lambda x, y, g: where(x > 0, g, 0), "x"),
    "silu": (_silu, lambda x, y, g: g * _silu_grad(x), "x"),
    "softplus": (_softplus, lambda x, y, g: g * x.sigmoid(), "x"),
    "erf": (lambda B, x: B.erf(x), lambda x, y, g: g * (-(x * x)).exp() * _TWO_OVER_SQRT_PI, "x"),
    "sign": (lambda B, x: B.sign(x), _zero_grad, ""),
    "floor": (lambda B, x: B.floor(x), _zero_grad, ""),
    "ceil": (lambda B, x: B.ceil(x), _zero_grad, ""),
    "round": (lambda B, x: B.round(x), _zero_grad, ""),
    "reciprocal": (lambda B, x: B.divide(1, x), lambda x, y, g: -g * y * y, "y"),
    "square": (lambda B, x: x * x, lambda x, y, g: g * 2 * x, "x"),
}


def _tensor_arg(x, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}.")
    return x


def _silu_grad(x):
    s = x.sigmoid()
    return s * (1 + x * (1 - s))


def _unary_op(name, forward, grad, uses):
    saves_x = "x" in uses

    def backward(node, g):
        saved = node.saved_tensors()
        x = saved[0] if saves_x else None
        y = saved[-1] if "y" in uses else None
        return (grad(x, y, g),)

    cls = type(name.title() + "Op", (Op,), {
        "name": name,
        "saves": (0,) if saves_x else (),
        "saves_output": "y" in uses,
        "forward": staticmethod(forward),
        "backward": staticmethod(backward),
    })

    def fn(x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}.")
        return apply(cls, (x,), x._names)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``; the output keeps the input's names."
    return cls, fn


UNARY_OPS = {}
for _name, (_fwd, _grad, _uses) in UNARY.items():
    UNARY_OPS[_name] = _unary_op(_name, _fwd, _grad, _uses)
    globals()[_name] = UNARY_OPS[_name][1]


class _Gelu(Op):
    """Exact GELU, ``x * Phi(x)``, one fused kernel; the backward reuses the forward's ``Phi(x)``
    unless it must build a graph (``create_graph``), where it recomputes it with tensor ops."""

    name = "gelu"
    saves = (0,)
    stashes = True

    @staticmethod
    def forward(B, x):
        return B.gelu(_floating(B, x))

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        if not is_grad_enabled():
            B = node.B
            return (Tensor._make(B.gelu_backward(_floating(B, x._data), node.stash, g._data), g._names, B),)
        return (g * (0.5 * (1 + (x / _SQRT_2).erf()) + x * (-0.5 * x * x).exp() * _INV_SQRT_2PI),)


class _GeluTanh(Op):
    name = "gelu"
    saves = (0,)

    @staticmethod
    def forward(B, x):
        x = _floating(B, x)
        return 0.5 * x * (1 + B.tanh(_GELU_C * (x + 0.044715 * x * x * x)))

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        inner = (x + 0.044715 * x * x * x) * _GELU_C
        t = inner.tanh()
        d_inner = (1 + 0.134145 * x * x) * _GELU_C
        return (g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner),)


_GELU_C = math.sqrt(2.0 / math.pi)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:  # noqa: F811 - adds the tanh form
    """GELU, exact (``approximate="none"``, with erf) or the tanh approximation; keeps names."""
    if approximate == "none":
        return apply(_Gelu, (_tensor_arg(x, "gelu"),), x._names)
    if approximate == "tanh":
        return apply(_GeluTanh, (_tensor_arg(x, "gelu"),), x._names)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}.")


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


def clip(x: Tensor, min=None, max=None) -> Tensor:
    """Limit values to ``[min, max]`` (numbers or tensors); keeps names (unifies with tensor bounds)."""
    if any(b is not None and b.__class__ not in SCALARS for b in (min, max)):
        # tensors and arrays (NumPy scalars too) broadcast and unify names as the binary ops do
        out = x
        if min is not None:
            out = maximum(out, min)  # noqa: F821 - defined by the BINARY table below
        if max is not None:
            out = minimum(out, max)  # noqa: F821
        return out
    if min is None and max is None:
        raise ValueError("clip: give min, max or both.")
    return apply(_Clip, (_tensor_arg(x, "clip"),), x._names, min=min, max=max)


clamp = clip

# ----------------------------------------------------------------------------- binary


def _pow_grad_exp(a, b, y, g):
    # d(a**b)/db = a**b log(a); where a <= 0 the log is undefined and the gradient is taken as 0
    return where(a > 0, g * y * where(a > 0, a, 1).log(), 0)


def _pow_grads(a, b, y, g):
    if a.__class__ in SCALARS:  # 2 ** t: only the exponent is a tensor
        return None, (g * y * math.log(a) if a > 0 else g.zeros_like())
    # x ** 0 is constant: its gradient is 0, also at x == 0 where b * a ** (b - 1) is nan
    ga = g.zeros_like() if b.__class__ in SCALARS and b == 0 else g * b * a ** (b - 1)
    return ga, None if b.__class__ in SCALARS else _pow_grad_exp(a, b, y, g)


def _max_grads(a, b, g, a_wins):
    tie = a == b
    half = g * 0.5
    ga = where(a_wins, g, where(tie, half, 0))
    gb = where(a_wins.logical_or(tie).logical_not(), g, where(tie, half, 0))
    return ga, gb


#: name -> (forward(B, a, b), grads(a, b, y, g) -> (ga, gb), saves inputs, saves output).
BINARY = {
    "add": (lambda B, a, b: B.add(a, b), lambda a, b, y, g: (g, g), False, False),
    "sub": (lambda B, a, b: B.subtract(a, b), lambda a, b, y, g: (g, -g), False, False),
    "mul": (lambda B, a, b: B.multiply(a, b), lambda a, b, y, g: (g * b, g * a), True, False),
    "div": (lambda B, a, b: B.divide(a, b), lambda a, b, y, g: (g / b, -g * y / b), True, True),
    "pow": (lambda B, a, b: B.pow(a, b), lambda a, b, y, g: _pow_grads(a, b, y, g), True, True),
    "maximum": (lambda B, a, b: B.maximum(a, b), lambda a, b, y, g: _max_grads(a, b, g, a > b), True, False),
    "minimum": (lambda B, a, b: B.minimum(a, b), lambda a, b, y, g: _max_grads(a, b, g, a < b), True, False),
    "remainder": (lambda B, a, b: B.remainder(a, b),
                  lambda a, b, y, g: (g, None if b.__class__ in SCALARS else -g * (a / b).floor()), True, False),
    "floor_divide": (lambda B, a, b: B.floor_divide(a, b), lambda a, b, y, g: (g.zeros_like(), None), False, False),
}

#: comparisons and logical ops: no gradient, boolean output.
COMPARE = {
    "eq": lambda B, a, b: B.equal(a, b),
    "ne": lambda B, a, b: B.not_equal(a, b),
    "lt": lambda B, a, b: B.less(a, b),
    "le": lambda B, a, b: B.less_equal(a, b),
    "gt": lambda B, a, b: B.greater(a, b),
    "ge": lambda B, a, b: B.greater_equal(a, b),
    "logical_and": lambda B, a, b: B.logical_and(a, b),
    "logical_or": lambda B, a, b: B.logical_or(a, b),
    "logical_xor": lambda B, a, b: B.logical_xor(a, b),
}


def _operands(name: str, a, b):
    """``(a, b, names)``: the operands, one of them a tensor (the other a scalar or an unnamed tensor from
    an array), and the output names (rule 2)."""
    if isinstance(a, Tensor):
        b = operand(b, a)
        return a, b, (_names.unify(a._names, b._names, name) if isinstance(b, Tensor) else a._names)
    if isinstance(b, Tensor):
        a = operand(a, b)
        return a, b, (_names.unify(a._names, b._names, name) if isinstance(a, Tensor) else b._names)
    raise TypeError(f"{name}: at least one operand must be a Tensor, got {type(a).__name__} and {type(b).__name__}.")


#: binary ops that may write a large result into a temporary operand's buffer (see ops/_elision.py);
#: each is also the name of a backend function that takes ``out=``
ELIDABLE = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "maximum": "maximum",
            "minimum": "minimum"}
_MIN = _elision.MIN_SIZE


def _binary_op(name, forward, grads, saves, saves_out):
    def backward(node, g):
        saved = node.saved_tensors() if (saves or saves_out) else ()
        if saves:
            a, b = saved[0], saved[1]
        else:
            a = b = None
        y = saved[-1] if saves_out else None
        ga, gb = grads(a, b, y, g)
        sa, sb = node.in_shapes
        return (
            None if ga is None or sa is None else sum_to(ga, sa, node.in_names[0]),
            None if gb is None or sb is None else sum_to(gb, sb, node.in_names[1]),
        )

    cls = type(name.title() + "Op", (Op,), {
        "name": name,
        "saves": (0, 1) if saves else (),
        "saves_output": saves_out,
        "forward": staticmethod(forward),
        "backward": staticmethod(backward),
    })

    elidable = name in ELIDABLE and _elision.enabled
    backend_fn = ELIDABLE.get(name)

    def run(a, b, refs_a: int, refs_b: int, via_operator: bool) -> Tensor:
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            an, bn = a._names, b._names
            names = an if an is bn else unify(an, bn, name)
            if elidable and (a._data.size >= _MIN or b._data.size >= _MIN):
                out = _elision.target(a, b, refs_a, refs_b, via_operator, saves)
                if out is not None:
                    return _elided(getattr(a._B, backend_fn)(a._data, b._data, out=out), names, a, b)
            return apply(cls, (a, b), names)
        if isinstance(a, Tensor):
            if elidable and b.__class__ in SCALARS and a._data.size >= _MIN:
                out = _elision.target(a, b, refs_a, 0, via_operator, saves)
                if out is not None:
                    return _elided(getattr(a._B, backend_fn)(a._data, b, out=out), a._names, a, b)
        a, b, names = _operands(name, a, b)
        return apply(cls, (a, b), names)

    def _elided(data, names, a, b) -> Tensor:
        out = Tensor._make(data, names, a._B)
        if graph._grad_enabled and (a._rg or (isinstance(b, Tensor) and b._rg)):
            graph.record(cls, (a, b), (out,), {}, None, a._B)
        if graph._tracer is not None:
            graph._tracer(cls, (a, b), (out,), {})
        return out

    # Two entry points, because a temporary's refcount differs between ``x + y`` and ``nt.add(x, y)``;
    # each takes the counts in its own frame, where ops/_elision.py calibrated them.
    def fn(a, b) -> Tensor:
        refs_a = getrefcount(a)  # before anything else holds a or b
        refs_b = getrefcount(b)
        return run(a, b, refs_a, refs_b, False)

    def operator(a, b) -> Tensor:
        refs_a = getrefcount(a)
        refs_b = getrefcount(b)
        return run(a, b, refs_a, refs_b, True)

    operator.__name__ = f"__{name}__"
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with broadcasting; names unify (rule 2)."
    fn.operator = operator
    return cls, fn


class _CompareBase(Op):
    differentiable = False


def _compare_op(name, forward):
    cls = type(name.title() + "Op", (_CompareBase,), {"name": name, "forward": staticmethod(forward)})

    def fn(a, b) -> Tensor:
        a, b, names = _operands(name, a, b)
        return apply(cls, (a, b), names)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (no gradient); names unify (rule 2)."
    return cls, fn


BINARY_OPS = {}
for _name, (_fwd, _grads, _saves, _saves_out) in BINARY.items():
    BINARY_OPS[_name] = _binary_op(_name, _fwd, _grads, _saves, _saves_out)
    globals()[_name] = BINARY_OPS[_name][1]
for _name, _fwd in COMPARE.items():
    BINARY_OPS[_name] = _compare_op(_name, _fwd)
    globals()[_name] = BINARY_OPS[_name][1]

subtract, multiply, divide, true_divide = sub, mul, div, div  # noqa: F821 - defined by the tables
mod = remainder  # noqa: F821


class _LogicalNot(Op):
    name = "logical_not"
    differentiable = False

    @staticmethod
    def forward(B, x):
        return B.logical_not(x)


def logical_not(x: Tensor) -> Tensor:
    """Elementwise not; keeps names."""
    return apply(_LogicalNot, (_tensor_arg(x, "logical_not"),), x._names)


class _Predicate(Op):
    differentiable = False


def _predicate(name, attr):
    cls = type(name.title() + "Op", (_Predicate,), {"name": name, "forward": staticmethod(lambda B, x: getattr(B, attr)(x))})

    def fn(x: Tensor) -> Tensor:
        return apply(cls, (_tensor_arg(x, name),), x._names)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (boolean); keeps names."
    return fn


isnan = _predicate("isnan", "isnan")
isinf = _predicate("isinf", "isinf")
isfinite = _predicate("isfinite", "isfinite")

# ----------------------------------------------------------------------------- where


class _Where(Op):
    name = "where"
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


def where(cond: Tensor, a, b) -> Tensor:
    """``a`` where ``cond`` is true, else ``b``; the three operands' names unify (rule 2)."""
    like = cond if isinstance(cond, Tensor) else a if isinstance(a, Tensor) else b
    if not isinstance(like, Tensor):
        raise TypeError("where: at least one operand must be a Tensor.")
    cond = operand(cond, like)
    if not isinstance(cond, Tensor):
        raise TypeError("where: cond must be a boolean tensor.")
    a = operand(a, like)
    b = operand(b, like)
    names = cond._names
    for x in (a, b):
        if isinstance(x, Tensor):
            names = _names.unify(names, x._names, "where")
    if cond._B.dtype_of(cond._data).kind != "b":
        raise TypeError(f"where: cond must be a bool tensor, got {cond.dtype!r}.")
    if a.__class__ in SCALARS and b.__class__ in SCALARS:
        raise TypeError("where: give at least one of a, b as a tensor (the result's dtype comes from it).")
    return apply(_Where, (cond, a, b), names)


def _reverse(fn):
    return lambda a, b: fn(b, a)


METHODS = {
    **{n: f for n, (_, f) in UNARY_OPS.items()},
    **{n: f for n, (_, f) in BINARY_OPS.items()},
    "gelu": gelu, "clip": clip, "clamp": clip, "logical_not": logical_not, "isnan": isnan,
    "isinf": isinf, "isfinite": isfinite, "sub": sub, "subtract": sub, "mul": mul,  # noqa: F821
    "multiply": mul, "div": div, "divide": div, "true_divide": div,  # noqa: F821
    "__neg__": neg, "__abs__": abs,  # noqa: F821
    "__add__": add.operator, "__radd__": _reverse(add), "__sub__": sub.operator,  # noqa: F821
    "__rsub__": _reverse(sub), "__mul__": mul.operator, "__rmul__": _reverse(mul),  # noqa: F821
    "__truediv__": div.operator, "__rtruediv__": _reverse(div),  # noqa: F821
    "__floordiv__": floor_divide, "__rfloordiv__": _reverse(floor_divide),  # noqa: F821
    "__mod__": remainder, "__rmod__": _reverse(remainder),  # noqa: F821
    "__pow__": pow, "__rpow__": _reverse(pow),  # noqa: F821
    "__eq__": eq, "__ne__": ne, "__lt__": lt, "__le__": le, "__gt__": gt, "__ge__": ge,  # noqa: F821
    "__and__": logical_and, "__or__": logical_or, "__xor__": logical_xor, "__invert__": logical_not,  # noqa: F821
    "__rand__": _reverse(logical_and), "__ror__": _reverse(logical_or),  # noqa: F821
    "__rxor__": _reverse(logical_xor),  # noqa: F821
}

__all__ = sorted(
    set(UNARY_OPS) | set(BINARY_OPS)
    | {"gelu", "clip", "clamp", "where", "logical_not", "isnan", "isinf", "isfinite", "subtract", "multiply",
       "divide", "true_divide", "mod"}
)
