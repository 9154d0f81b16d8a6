"""The standard's statistical and utility functions, on :mod:`namedtensor.ops.reductions`.

``axis`` takes ints or names (rule 3); the result has the input's names without the reduced dims,
or all of them with ``keepdims=True``.  ``max``/``min`` return values only (the library's
``nt.max``/``nt.min`` return values and indices: these are ``nt.amax``/``nt.amin``); ``std``/``var``
take the standard's ``correction`` (default 0, NumPy's; the library's default is 1).
"""

from __future__ import annotations

import builtins
from typing import Any, Optional, Union

from .._dtypes import DType
from ..ops import reductions as R
from ..ops.indexing import narrow
from ..ops.joining import cat, pad
from ..ops.naming import astype as _astype
from ..ops.shape import unsqueeze
from ..tensor import Tensor
from ._common import Axes, Axis, axis as _axis


def _reduce(fn: Any, x: Tensor, axis: Axes, keepdims: builtins.bool, dtype: Optional[DType] = None,
            **kw: Any) -> Tensor:
    """``fn`` over ``axis``; ``axis=()`` reduces nothing (the standard's rule, not "all dims")."""
    if dtype is None and not kw and axis.__class__ is not tuple and axis.__class__ is not list:
        return fn(x, axis, keepdims)  # the common call, by position: the namespace costs one call more
    if dtype is not None:
        x = _astype(x, dtype, copy=False)
    if axis == () or axis == []:
        # reducing no dim changes no value, but the dtype is the reduction's (uint8 sums to uint64): reduce a
        # size-1 dim put at the end
        out = fn(unsqueeze(x, x.ndim), dim=x.ndim, keepdim=False, **kw)
    else:
        out = fn(x, dim=axis if not isinstance(axis, list) else tuple(axis), keepdim=keepdims, **kw)
    # the library sums small integers in int64 (PyTorch's and NumPy's default); an asked dtype is the result's
    return out if dtype is None else _astype(out, dtype, copy=False)


def sum(x: Tensor, /, *, axis: Axes = None, dtype: Optional[DType] = None,
        keepdims: builtins.bool = False) -> Tensor:
    """The sum over ``axis`` (every dim where None)."""
    return _reduce(R.sum, x, axis, keepdims, dtype)


def prod(x: Tensor, /, *, axis: Axes = None, dtype: Optional[DType] = None,
         keepdims: builtins.bool = False) -> Tensor:
    """The product over ``axis``."""
    return _reduce(R.prod, x, axis, keepdims, dtype)


def mean(x: Tensor, /, *, axis: Axes = None, keepdims: builtins.bool = False) -> Tensor:
    """The mean over ``axis``."""
    return _reduce(R.mean, x, axis, keepdims)


def max(x: Tensor, /, *, axis: Axes = None, keepdims: builtins.bool = False) -> Tensor:
    """The largest values over ``axis`` (values only: the library's ``amax``)."""
    return _reduce(R.amax, x, axis, keepdims)


def min(x: Tensor, /, *, axis: Axes = None, keepdims: builtins.bool = False) -> Tensor:
    """The smallest values over ``axis`` (the library's ``amin``)."""
    return _reduce(R.amin, x, axis, keepdims)


def std(x: Tensor, /, *, axis: Axes = None, correction: Union[int, float] = 0.0,
        keepdims: builtins.bool = False) -> Tensor:
    """The standard deviation over ``axis`` with ``correction`` (0: NumPy's ``ddof=0``)."""
    return _spread(x, axis, correction).sqrt() if axis == () else _reduce(R.std, x, axis, keepdims,
                                                                          correction=correction)


def var(x: Tensor, /, *, axis: Axes = None, correction: Union[int, float] = 0.0,
        keepdims: builtins.bool = False) -> Tensor:
    """The variance over ``axis`` with ``correction``."""
    return _spread(x, axis, correction) if axis == () else _reduce(R.var, x, axis, keepdims, correction=correction)


def _spread(x: Tensor, axis: Axes, correction: Union[int, float]) -> Tensor:
    """The variance over no dims: each element alone, 0 (NaN where ``correction`` is 1), as NumPy gives."""
    d = x - x
    return d / (1 - correction) if correction != 1 else d / d


def all(x: Tensor, /, *, axis: Axes = None, keepdims: builtins.bool = False) -> Tensor:
    """Whether every element over ``axis`` is true."""
    return R.all(x, dim=axis, keepdim=keepdims) if axis != () else _astype(x, "bool")


def any(x: Tensor, /, *, axis: Axes = None, keepdims: builtins.bool = False) -> Tensor:
    """Whether some element over ``axis`` is true."""
    return R.any(x, dim=axis, keepdim=keepdims) if axis != () else _astype(x, "bool")


def _scan(op: str, fn: Any, x: Tensor, axis: Optional[Axis], dtype: Optional[DType],
          include_initial: builtins.bool, initial: int) -> Tensor:
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"{op}: axis is required for a tensor of {x.ndim} dims.")
        axis = 0
    if dtype is not None:
        x = _astype(x, dtype, copy=False)
    out = fn(x, _axis(x, axis, op))
    if dtype is not None:  # the library scans small integers in int64; an asked dtype is the result's
        out = _astype(out, dtype, copy=False)
    return pad(out, {_axis(x, axis, op): (1, 0)}, value=initial) if include_initial else out


def cumulative_sum(x: Tensor, /, *, axis: Optional[Axis] = None, dtype: Optional[DType] = None,
                   include_initial: builtins.bool = False) -> Tensor:
    """Running sums along ``axis``, keeping the names; ``include_initial`` starts with a 0."""
    return _scan("cumulative_sum", R.cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x: Tensor, /, *, axis: Optional[Axis] = None, dtype: Optional[DType] = None,
                    include_initial: builtins.bool = False) -> Tensor:
    """Running products along ``axis``, keeping the names; ``include_initial`` starts with a 1."""
    return _scan("cumulative_prod", R.cumprod, x, axis, dtype, include_initial, 1)


def diff(x: Tensor, /, *, axis: Axis = -1, n: int = 1, prepend: Optional[Tensor] = None,
         append: Optional[Tensor] = None) -> Tensor:
    """The ``n``-th forward difference along ``axis``, keeping the names (``prepend``/``append`` join first)."""
    a = _axis(x, axis, "diff")
    parts = [p for p in (prepend, x, append) if p is not None]
    y = cat(parts, a) if len(parts) > 1 else x
    for _ in range(n):
        length = y.shape[a] - 1
        if length < 0:
            raise ValueError("diff: the dim is too short for n differences.")
        y = narrow(y, a, 1, length) - narrow(y, a, 0, length)
    return y


__all__ = ["all", "any", "cumulative_prod", "cumulative_sum", "diff", "max", "mean", "min", "prod", "std", "sum",
           "var"]
