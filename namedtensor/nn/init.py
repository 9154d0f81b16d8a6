"""Initialising parameters in place, with fan-in and fan-out given by dim name.

``xavier_uniform_(w, fan_in="embed", fan_out="hidden")``: a fan is the product of
the sizes of the dims it names (a name, or a tuple of names).  Give one and the
other is the product of the remaining dims.  Give neither and PyTorch's rule
applies by position: a weight named ``(out, in, *rest)`` has fan-in
``in * prod(rest)`` and fan-out ``out * prod(rest)`` (for the library's 2-D
weights, named ``(out_name, in_name)``, that is fan-in = the input dim).

Every function fills the tensor in place under ``no_grad``, draws from the
backend's random stream (``nt.manual_seed`` makes it repeatable) and returns
the tensor.  Gains and bounds follow ``torch.nn.init``.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple, Union

from .. import _names
from ..autograd.graph import no_grad
from ..ops.creation import rand_like, randn_like
from ..ops.elementwise import where
from ..tensor import Tensor

Dims = Union[str, int, Sequence[Union[str, int]], None]

_GAINS = {"linear": 1.0, "identity": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0,
          "conv_transpose1d": 1.0, "conv_transpose2d": 1.0, "conv_transpose3d": 1.0, "sigmoid": 1.0,
          "tanh": 5.0 / 3, "relu": math.sqrt(2.0), "selu": 3.0 / 4}


def calculate_gain(nonlinearity: str, param: Optional[float] = None) -> float:
    """The recommended gain for a nonlinearity (``"relu"`` -> sqrt(2), ``"leaky_relu"`` with slope
    ``param`` (default 0.01) -> sqrt(2 / (1 + param**2)), ``"tanh"`` -> 5/3, linear ones -> 1)."""
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"calculate_gain: the negative slope must be a number, got {slope!r}.")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity in _GAINS:
        return _GAINS[nonlinearity]
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; choose one of "
                     f"{sorted(_GAINS) + ['leaky_relu']}.")


def _as_tuple(dims: Dims) -> Tuple:
    return tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)


def calculate_fans(t: Tensor, fan_in: Dims = None, fan_out: Dims = None, op: str = "init") -> Tuple[int, int]:
    """``(fan_in, fan_out)`` of ``t``: each the product of the sizes of the dims named (see the module doc)."""
    names, shape = t.names, t.shape
    if fan_in is None and fan_out is None:
        if len(shape) < 2:
            raise ValueError(
                f"{op}: fan-in and fan-out need a tensor with at least 2 dims, this one has names "
                f"{_names.fmt(names)}; name them: fan_in=..., fan_out=..."
            )
        rest = math.prod(shape[2:])
        return shape[1] * rest, shape[0] * rest
    in_axes = _names.axes(names, _as_tuple(fan_in), op) if fan_in is not None else None
    out_axes = _names.axes(names, _as_tuple(fan_out), op) if fan_out is not None else None
    if in_axes is not None and out_axes is not None and set(in_axes) & set(out_axes):
        both = [names[a] if names[a] is not None else a for a in sorted(set(in_axes) & set(out_axes))]
        raise _names.NamesError(f"{op}: dims {both} are in both fan_in and fan_out (names {_names.fmt(names)}); "
                                "a dim counts towards one fan only.")
    if in_axes is None:
        in_axes = tuple(a for a in range(len(shape)) if a not in out_axes)
    if out_axes is None:
        out_axes = tuple(a for a in range(len(shape)) if a not in in_axes)
    return math.prod(shape[a] for a in in_axes), math.prod(shape[a] for a in out_axes)


def _fill(t: Tensor, values: Tensor) -> Tensor:
    with no_grad():
        t.copy_(values)
    return t


def _check(t: Tensor, op: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}.")


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill ``t`` with samples from U(a, b)."""
    _check(t, "uniform_")
    if not a <= b:
        raise ValueError(f"uniform_: the lower bound a={a} must not exceed the upper bound b={b}.")
    with no_grad():
        return _fill(t, rand_like(t) * (b - a) + a)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill ``t`` with samples from N(mean, std**2)."""
    _check(t, "normal_")
    if std < 0:
        raise ValueError(f"normal_: std must be >= 0, got {std}.")
    with no_grad():
        return _fill(t, randn_like(t) * std + mean)


def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> Tensor:
    """Fill ``t`` with samples from N(mean, std**2) restricted to [a, b] (bounds in absolute values,
    as in PyTorch); samples outside are redrawn."""
    _check(t, "trunc_normal_")
    if std < 0:
        raise ValueError(f"trunc_normal_: std must be >= 0, got {std}.")
    if not a < b:
        raise ValueError(f"trunc_normal_: the lower bound a={a} must be below the upper bound b={b}.")
    if std == 0 or (b - mean) / std < -6 or (a - mean) / std > 6:
        # (almost) no mass inside [a, b]: the nearest point of it is what sampling would approach
        return constant_(t, min(max(mean, a), b))
    with no_grad():
        x = randn_like(t) * std + mean
        for _ in range(1000):  # each round keeps the samples inside; P(outside) < 1 unless [a, b] is tiny
            outside = (x < a) | (x > b)
            if not outside.any():
                break
            x = where(outside, randn_like(t) * std + mean, x)
        return _fill(t, x.clip(a, b))


def constant_(t: Tensor, val: float) -> Tensor:
    """Fill ``t`` with ``val``."""
    _check(t, "constant_")
    with no_grad():
        t.fill_(val)
    return t


def zeros_(t: Tensor) -> Tensor:
    """Fill ``t`` with zeros."""
    return constant_(t, 0)


def ones_(t: Tensor) -> Tensor:
    """Fill ``t`` with ones."""
    return constant_(t, 1)


def xavier_uniform_(t: Tensor, gain: float = 1.0, *, fan_in: Dims = None, fan_out: Dims = None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)), fans by dim name."""
    _check(t, "xavier_uniform_")
    fi, fo = calculate_fans(t, fan_in, fan_out, "xavier_uniform_")
    if t.numel() == 0:
        return t
    bound = gain * math.sqrt(6.0 / (fi + fo))
    return uniform_(t, -bound, bound)


def xavier_normal_(t: Tensor, gain: float = 1.0, *, fan_in: Dims = None, fan_out: Dims = None) -> Tensor:
    """Glorot normal: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out)), fans by dim name."""
    _check(t, "xavier_normal_")
    fi, fo = calculate_fans(t, fan_in, fan_out, "xavier_normal_")
    if t.numel() == 0:
        return t
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fi + fo)))


def _kaiming_std(t: Tensor, a: float, mode: str, nonlinearity: str, fan_in: Dims, fan_out: Dims, op: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}.")
    fi, fo = calculate_fans(t, fan_in, fan_out, op)
    fan = fi if mode == "fan_in" else fo
    return calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0  # fan 0: t is empty


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", *,
                     fan_in: Dims = None, fan_out: Dims = None) -> Tensor:
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan), fan = fan_in or fan_out by ``mode``."""
    _check(t, "kaiming_uniform_")
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity, fan_in, fan_out, "kaiming_uniform_")
    return uniform_(t, -bound, bound)


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", *,
                    fan_in: Dims = None, fan_out: Dims = None) -> Tensor:
    """He normal: N(0, std**2) with std = gain / sqrt(fan), fan = fan_in or fan_out by ``mode``."""
    _check(t, "kaiming_normal_")
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity, fan_in, fan_out, "kaiming_normal_"))

