"""PyTorch's statistics and counting: ``quantile nanquantile nansum nanmean count_nonzero``, the histograms
``bincount histc histogram bucketize``, and ``trapezoid dist cosine_similarity``.

Name rules:

* ``nansum nanmean count_nonzero``: the reductions' rule (:func:`namedtensor._names.reduce`: the input's
  names without the reduced dims, all of them with ``keepdim=True``).
* ``quantile``/``nanquantile`` (:func:`namedtensor._names.quantile`): the reductions' rule for one dim (or
  every dim with ``dim=None``); a 1-D tensor ``q`` adds a leading dim, as PyTorch does, named as ``q``'s
  dim is (unnamed for an unnamed ``q``).
* ``bincount histc histogram``: one unnamed dim (the bins; ``histogram``'s edges too): counts have no dims
  of the input.  ``bucketize`` keeps the input's names (the boundaries are a 1-D lookup table).
* ``trapezoid`` (:func:`namedtensor._names.trapezoid`): ``y``'s names without ``dim``, broadcast with ``x``'s
  (rule 2) where ``x`` has as many dims; a 1-D ``x`` runs along ``dim`` and is named like it, if at all.
* ``dist``: the operands' names unify (rule 2); the result is 0-dim.
* ``cosine_similarity`` (:func:`namedtensor._names.reduce_broadcast`): the operands' names unify (rule 2)
  and ``dim`` is removed.

Gradients: ``quantile``'s is a gather of the sorted input (linear interpolation between the two values it
lies between), ``nansum``'s and ``nanmean``'s are 0 at NaN; counts, histograms and bucket indices have none.
The histograms, whose sizes depend on the values only through ``bincount``, are one op each on raw arrays
(``B.scatter_add``, ``B.searchsorted``); the rest are compositions of differentiable ops.  Each function
that reduces also takes NumPy's ``axis=`` and ``keepdims=``.
"""

from __future__ import annotations

import builtins
import math
import numbers
from typing import NamedTuple, Optional, Sequence, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import as_float_tensor, flag, has_values, is_bool, tensor_arg, with_names
from .elementwise import isnan, lerp, ne, sub, where
from .indexing import gather
from .reductions import norm, sum
from .sets import searchsorted
from .shape import broadcast_to, squeeze
from .sorting import nonempty, numpy_spelling, sort

Dim = Union[str, int]
Dims = Union[Dim, Sequence[Dim], None]  # None: every dim

__all__ = [
    "quantile", "nanquantile", "nansum", "nanmean", "count_nonzero", "bincount", "histc", "histogram", "bucketize",
    "trapezoid", "dist", "cosine_similarity", "Histogram",
]


def _number(v: object, what: str, op: str) -> float:
    if is_bool(v) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {what} must be a number, got {type(v).__name__} {v!r}.")
    return float(v)


def _int(v: object, what: str, op: str) -> int:
    if is_bool(v) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}: {what} must be an int, got {type(v).__name__} {v!r}.")
    return int(v.__index__())


def _unnamed(t: Tensor) -> Tensor:
    return with_names(t, _names.unnamed(t.ndim))


# ----------------------------------------------------------------------------- nansum, nanmean, count_nonzero


def _reduce_check(t: Tensor, dim: Dims, keepdim: bool, op: str) -> bool:
    """``keepdim`` checked, and the reduction's names worked out once under ``op``'s name (so that a bad dim
    is reported as ``op``'s, not as the op it is made of)."""
    keepdim = flag(keepdim, "keepdim", op)
    _names.reduce(t._names, _names.hashable_dims(dim), keepdim, op)
    return keepdim


def _without_nan(t: Tensor) -> Tensor:
    return where(isnan(t), 0, t) if t.dtype.kind == "f" else t


def nansum(input: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype=None,
           axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Sum over ``dim`` (names, ints, a tuple, or ``None`` for all) treating NaN as 0, as ``torch.nansum``;
    ``dtype=`` casts the input first.  The gradient is 0 at NaN."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("nansum", dim, axis, keepdim, keepdims)
    tensor_arg(input, "nansum", "input")
    keepdim = _reduce_check(input, dim, keepdim, "nansum")
    x = input if dtype is None else input.to(dtype)
    return sum(_without_nan(x), dim, keepdim)


def nanmean(input: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype=None,
            axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Mean of the non-NaN entries over ``dim``, as ``torch.nanmean`` (a slice of NaN only gives NaN); the
    input must be floating point (or be cast to it by ``dtype=``).  The gradient is 0 at NaN."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("nanmean", dim, axis, keepdim, keepdims)
    tensor_arg(input, "nanmean", "input")
    keepdim = _reduce_check(input, dim, keepdim, "nanmean")
    x = input if dtype is None else input.to(dtype)
    if x.dtype.kind != "f":
        raise TypeError(f"nanmean: the input must be floating point, got {x.dtype!r}, as in PyTorch; pass "
                        "dtype=nt.float64 or convert it first.")
    present = isnan(x).logical_not()
    return sum(_without_nan(x), dim, keepdim) / sum(present, dim, keepdim).to(x.dtype)


def count_nonzero(input: Tensor, dim: Dims = None, *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """The number of non-zero entries (int64) over ``dim`` (names, ints, a tuple, or ``None`` for all), as
    ``torch.count_nonzero``; NumPy's ``axis=`` and ``keepdims=`` too."""
    dim, keepdim = numpy_spelling("count_nonzero", dim, axis, False, keepdims)
    tensor_arg(input, "count_nonzero", "input")
    keepdim = _reduce_check(input, dim, keepdim, "count_nonzero")
    return sum(ne(input, 0), dim, keepdim)


# ----------------------------------------------------------------------------- quantile

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


class _QuantileRanks(Op):
    """Where each quantile ``q`` lies among the sorted values ``s`` of each slice (its last axis, NaN
    last): the int64 positions of the values below and above it and the weight of the one above, each of
    shape ``s.shape[:-1] + q.shape``; PyTorch's ranks, computed in ``s``'s dtype.  No gradient."""

    name = "quantile"
    differentiable = False
    n_outputs = 3

    @staticmethod
    def forward(B, s, q, ignore_nan, interpolation):
        n = s.shape[-1]
        nan = B.isnan(s)
        if ignore_nan:
            valid = B.sum(B.astype(B.logical_not(nan), s.dtype), axis=-1, keepdims=True)
            ranks = q * (valid - 1)
            ranks = B.where(ranks < 0, B.zeros_like(ranks), ranks)  # a slice of NaN only: its first NaN
        else:
            ranks = B.broadcast_to(q * (n - 1), tuple(s.shape[:-1]) + tuple(q.shape))
            # a slice holding NaN has NaN as its quantiles: the last entry, where NaN sorts
            ranks = B.where(B.any(nan, axis=-1, keepdims=True), B.full_like(ranks, n - 1), ranks)
        if interpolation == "lower":
            ranks = B.floor(ranks)
        elif interpolation == "higher":
            ranks = B.ceil(ranks)
        elif interpolation == "nearest":
            ranks = B.round(ranks)  # half to even, as PyTorch's round
        index = B.native(_dtypes.int64)
        below = B.astype(B.floor(ranks), index)
        above = B.astype(B.ceil(ranks), index)
        if interpolation == "midpoint":
            weight = B.full_like(ranks, 0.5)
        else:
            weight = ranks - B.floor(ranks)
        return below, above, weight


def _q_tensor(q, like: Tensor, op: str) -> Tuple[Tensor, bool]:
    """``(q as a 1-D tensor of like's dtype and device, whether q was a number or a 0-dim tensor)``."""
    B = like._B
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise ValueError(f"{op}: q must be a number or a 0-dim or 1-D tensor, got {q.ndim} dims "
                             f"(names {_names.fmt(q._names)}).")
        if q.dtype is not like.dtype:
            raise TypeError(f"{op}: q must have the input's dtype {like.dtype!r}, got {q.dtype!r}, as in PyTorch; "
                            "convert it with q.to(input.dtype).")
        if has_values(q._B) and not bool(q._B.all(q._B.logical_and(q._data >= 0, q._data <= 1))):
            raise ValueError(f"{op}: q values must be in [0, 1].")
        scalar = q.ndim == 0
        return _unnamed(q.reshape(1) if scalar else q), scalar
    q = _number(q, "q", op)
    if not 0 <= q <= 1:
        raise ValueError(f"{op}: q must be in [0, 1], got {q!r}.")
    return Tensor._make(B.asarray([q], dtype=like.dtype), _names.unnamed(1), B), True


def _quantile(input: Tensor, q, dim, keepdim, interpolation: str, op: str) -> Tensor:
    tensor_arg(input, op, "input")
    keepdim = flag(keepdim, "keepdim", op)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim must be a single dim (a name or an int) or None, got {dim!r}.")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}.")
    if input.dtype.kind != "f":
        raise TypeError(f"{op}: the input must be floating point, got {input.dtype!r}, as in PyTorch; convert it "
                        "first (input.double()).")
    qt, scalar = _q_tensor(q, input, op)
    q_names = None if scalar or not isinstance(q, Tensor) else q._names
    ax, names = _names.quantile(input._names, _names.hashable_dims(dim), keepdim, q_names, op)
    x = _unnamed(input)
    if ax is None:
        x, ax = x.reshape(-1), 0
    nonempty(x, (ax,), op)
    last = x.ndim - 1
    if ax != last:
        x = x.permute(*[d for d in range(x.ndim) if d != ax], ax)
    s = sort(x, -1).values
    below, above, weight = apply(_QuantileRanks, (s, qt), (_names.unnamed(x.ndim),) * 3,
                                 ignore_nan=op == "nanquantile", interpolation=interpolation)
    out = gather(s, -1, below)
    if interpolation in ("linear", "midpoint"):
        out = lerp(out, gather(s, -1, above), weight)
    if out.ndim > 1:  # the quantiles lead, as in PyTorch
        out = out.permute(out.ndim - 1, *range(out.ndim - 1))
    if scalar:
        out = squeeze(out, 0)
    if keepdim:
        lead = 0 if scalar else 1
        kept = tuple(1 if dim is None or d == ax else size for d, size in enumerate(input.shape))
        out = out.reshape(out.shape[:lead] + kept)
    return with_names(out, names)


def quantile(input: Tensor, q: Union[float, Tensor], dim: Optional[Dim] = None, keepdim: bool = False, *,
             interpolation: str = "linear", axis: Optional[Dim] = None, keepdims: Optional[bool] = None) -> Tensor:
    """The ``q``-th quantiles over ``dim`` (a name or an int; ``None``: all entries), as ``torch.quantile``:
    ``q`` is a number or a 1-D tensor (its quantiles lead the result, in a dim named as q's), in [0, 1];
    ``interpolation`` is ``'linear'`` (differentiable), ``'lower'``, ``'higher'``, ``'midpoint'`` or
    ``'nearest'``.  A slice holding NaN gives NaN."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("quantile", dim, axis, keepdim, keepdims)
    return _quantile(input, q, dim, keepdim, interpolation, "quantile")


def nanquantile(input: Tensor, q: Union[float, Tensor], dim: Optional[Dim] = None, keepdim: bool = False, *,
                interpolation: str = "linear", axis: Optional[Dim] = None,
                keepdims: Optional[bool] = None) -> Tensor:
    """:func:`quantile` leaving NaN out, as ``torch.nanquantile`` (a slice of NaN only gives NaN)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("nanquantile", dim, axis, keepdim, keepdims)
    return _quantile(input, q, dim, keepdim, interpolation, "nanquantile")


# ----------------------------------------------------------------------------- histograms


class _Bincount(Op):
    name = "bincount"
    differentiable = False

    @staticmethod
    def forward(B, x, weights, length, dtype):
        values = B.ones(tuple(x.shape), dtype=B.native(dtype)) if weights is None else B.astype(weights, B.native(dtype))
        return B.scatter_add((length,), dtype, (x,), values)


def bincount(input: Tensor, weights: Optional[Tensor] = None, minlength: int = 0) -> Tensor:
    """How often each value ``0, 1, ..., max(input)`` occurs in the 1-D non-negative integer ``input`` (at
    least ``minlength`` bins), as ``torch.bincount``; with ``weights`` (of input's shape) their sums instead,
    in the weights' float dtype (float64 for integer weights).  One unnamed dim; no gradient."""
    tensor_arg(input, "bincount", "input")
    minlength = _int(minlength, "minlength", "bincount")
    if input.ndim != 1 or input.dtype.kind not in "iu":
        raise ValueError(f"bincount: input must be a 1-D tensor of integers, got {input.ndim} dims of "
                         f"{input.dtype!r}.")
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be >= 0, got {minlength}.")
    dtype = _dtypes.int64
    if weights is not None:
        tensor_arg(weights, "bincount", "weights")
        if weights.shape != input.shape:
            raise ValueError(f"bincount: weights must have input's shape {input.shape}, got {weights.shape}.")
        dtype = weights.dtype if weights.dtype.kind == "f" else _dtypes.float64
    B = input._B
    n = input.shape[0]
    if n and has_values(B) and int(B.min(input._data)) < 0:
        raise ValueError("bincount: input must hold non-negative integers only.")
    length = builtins.max(int(B.max(input._data)) + 1 if n else 0, minlength)
    return apply(_Bincount, (input, weights), _names.unnamed(1), length=length, dtype=dtype)


def _range(B, x, lo: Optional[float], hi: Optional[float], widen: float):
    """The histogram's range as arrays: ``(lo, hi)`` given, else the data's min and max (0 and 0 for no
    data), moved apart by ``widen`` on each side where they are equal."""
    if lo is not None:
        return lo, hi
    if x.shape[0] == 0:
        lo_a = hi_a = B.zeros((), dtype=x.dtype)
    else:
        lo_a, hi_a = B.min(x), B.max(x)
    same = lo_a == hi_a
    return B.where(same, lo_a - widen, lo_a), B.where(same, hi_a + widen, hi_a)


def _counts(B, x, bin_of, inside, bins: int, weight):
    """Each bin's count (or sum of weights) of the entries ``inside``."""
    ones = B.ones_like(x) if weight is None else weight
    values = B.where(inside, ones, B.zeros_like(ones))
    at = B.where(inside, bin_of, B.zeros_like(bin_of))
    return B.scatter_add((bins,), B.dtype_of(values), (at,), values)


def _finite_range(t: Tensor, op: str) -> None:
    """Refuse a histogram over the data's range when that is not finite (NaN or inf in the data), as
    PyTorch does."""
    B = t._B
    if t.numel() and has_values(B):
        lo, hi = float(B.min(t._data)), float(B.max(t._data))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"{op}: the data's range [{lo}, {hi}] is not finite; give the range explicitly.")


class _Histc(Op):
    name = "histc"
    differentiable = False

    @staticmethod
    def forward(B, x, bins, lo, hi):
        x = B.reshape(x, (-1,))
        lo, hi = _range(B, x, lo, hi, 1.0)
        inside = B.logical_and(x >= lo, x <= hi)
        # PyTorch's linear rule, the right edge in the last bin
        pos = B.astype(B.floor((x - lo) * bins / (hi - lo)), B.native(_dtypes.int64))
        pos = B.clip(B.where(inside, pos, B.zeros_like(pos)), 0, bins - 1)
        return _counts(B, x, pos, inside, bins, None)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """A histogram of ``bins`` equal bins over ``[min, max]`` (the data's range when both are equal), as
    ``torch.histc``: entries outside are left out, ``max`` counts in the last bin; one unnamed dim of the
    input's float dtype.  No gradient."""
    tensor_arg(input, "histc", "input")
    bins = _int(bins, "bins", "histc")
    lo, hi = _number(min, "min", "histc"), _number(max, "max", "histc")
    if bins <= 0:
        raise ValueError(f"histc: bins must be > 0, got {bins}.")
    if lo > hi:
        raise ValueError(f"histc: max must be larger than min, got min={lo!r} and max={hi!r}.")
    if input.dtype.kind != "f":
        raise TypeError(f"histc: the input must be floating point, got {input.dtype!r}; convert it first.")
    same = lo == hi
    if same:
        _finite_range(input, "histc")
    return apply(_Histc, (input,), _names.unnamed(1), bins=bins, lo=None if same else lo, hi=None if same else hi)


class Histogram(NamedTuple):
    """What :func:`histogram` returns, as PyTorch's ``torch.return_types.histogram``."""

    hist: Tensor
    bin_edges: Tensor


class _Edges(Op):
    """``bins + 1`` equally spaced edges over the range (the data's when ``lo`` is None), as PyTorch's
    ``linspace``: from the left end in the first half, from the right end in the second."""

    name = "histogram"
    differentiable = False

    @staticmethod
    def forward(B, x, bins, lo, hi):
        lo, hi = _range(B, B.reshape(x, (-1,)), lo, hi, 0.5)
        step = (hi - lo) / bins
        k = B.astype(B.arange(bins + 1), x.dtype)
        return B.where(k < (bins + 1) // 2, lo + step * k, hi - step * (bins - k))


class _Histogram(Op):
    name = "histogram"
    differentiable = False

    @staticmethod
    def forward(B, x, edges, weight, density):
        x = B.reshape(x, (-1,))
        bins = edges.shape[0] - 1
        inside = B.logical_and(x >= edges[0], x <= edges[-1])
        pos = B.searchsorted(edges, x, True) - 1
        pos = B.clip(B.where(inside, pos, B.zeros_like(pos)), 0, bins - 1)  # the right edge: the last bin
        hist = _counts(B, x, pos, inside, bins, None if weight is None else B.reshape(weight, (-1,)))
        if density:
            hist = hist / (B.sum(hist) * (edges[1:] - edges[:-1]))
        return hist


def histogram(input: Tensor, bins: Union[int, Tensor], *, range: Optional[Tuple[float, float]] = None,
              weight: Optional[Tensor] = None, density: bool = False) -> Tuple[Tensor, Tensor]:
    """``(hist, bin_edges)`` as ``torch.histogram``: ``bins`` equal bins over ``range`` (default the data's),
    or the increasing 1-D edges ``bins``; each bin holds ``[left, right)``, the last one ``[left, right]``;
    ``weight`` (input's shape) sums weights instead of counting, ``density`` divides by the total and the bin
    widths.  Both are one unnamed dim of the input's float dtype; no gradient."""
    tensor_arg(input, "histogram", "input")
    density = flag(density, "density", "histogram")
    if input.dtype.kind != "f":
        raise TypeError(f"histogram: the input must be floating point, got {input.dtype!r}; convert it first.")
    if weight is not None:
        tensor_arg(weight, "histogram", "weight")
        if weight.shape != input.shape or weight.dtype is not input.dtype:
            raise ValueError(f"histogram: weight must have input's shape {input.shape} and dtype {input.dtype!r}, "
                             f"got {weight.shape} and {weight.dtype!r}.")
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram: range= goes with a number of bins, not with given edges.")
        if bins.ndim != 1 or bins.shape[0] < 2 or bins.dtype is not input.dtype:
            raise ValueError(f"histogram: bin edges must be a 1-D tensor of at least 2 edges of the input's dtype "
                             f"{input.dtype!r}, got shape {bins.shape} of {bins.dtype!r}.")
        edges = _unnamed(bins).detach()
    else:
        n = _int(bins, "bins", "histogram")
        if n <= 0:
            raise ValueError(f"histogram: bins must be > 0, got {n}.")
        lo = hi = None
        if range is not None:
            if not isinstance(range, (tuple, list)) or len(range) != 2:
                raise TypeError(f"histogram: range must be a pair (min, max), got {range!r}.")
            lo, hi = (_number(v, "range", "histogram") for v in range)
            if lo > hi:
                raise ValueError(f"histogram: range's max must be at least its min, got {range!r}.")
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
        if range is None:
            _finite_range(input, "histogram")
        edges = apply(_Edges, (input,), _names.unnamed(1), bins=n, lo=lo, hi=hi)
    hist = apply(_Histogram, (input, edges, weight), _names.unnamed(1), density=density)
    return Histogram(hist, edges)


def bucketize(input: Tensor, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The index of each entry's bucket among the increasing 1-D ``boundaries``, as ``torch.bucketize``:
    the first ``i`` with ``input <= boundaries[i]`` (``<`` with ``right=True``); int64 (int32 with
    ``out_int32``), keeping the input's names.  No gradient."""
    tensor_arg(input, "bucketize", "input")
    tensor_arg(boundaries, "bucketize", "boundaries")
    out_int32, right = flag(out_int32, "out_int32", "bucketize"), flag(right, "right", "bucketize")
    if boundaries.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be a 1-D tensor, got {boundaries.ndim} dims.")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ----------------------------------------------------------------------------- trapezoid, dist, cosine_similarity


def trapezoid(y: Tensor, x: Optional[Tensor] = None, *, dx: Optional[float] = None, dim: Dim = -1) -> Tensor:
    """The trapezoidal rule along ``dim`` (a name or an int), as ``torch.trapezoid``: samples ``y`` at
    spacing ``dx`` (default 1) or at points ``x`` (1-D along ``dim``, or broadcasting with ``y``)."""
    tensor_arg(y, "trapezoid", "y")
    if x is not None and dx is not None:
        raise TypeError("trapezoid: give x or dx, not both.")
    if x is not None:
        tensor_arg(x, "trapezoid", "x")
    ax, names = _names.trapezoid(y._names, None if x is None else x._names, dim, "trapezoid")
    yy = _unnamed(y)
    if x is None or x.ndim == 1:
        n = y.shape[ax]
        if x is not None and x.shape[0] != n:
            raise ValueError(f"trapezoid: x has {x.shape[0]} points but y has {n} along dim {ax}.")
        if n == 0:
            return with_names(yy.sum(ax), names)
        if x is None:
            step = 1.0 if dx is None else _number(dx, "dx", "trapezoid")
            # PyTorch's form: the sum less half the ends
            ends = yy.narrow(ax, 0, 1).squeeze(ax) + yy.narrow(ax, n - 1, 1).squeeze(ax)
            return with_names((yy.sum(ax) - ends * 0.5) * step, names)
        xx = _unnamed(x)
        gaps = (xx.narrow(0, 1, n - 1) - xx.narrow(0, 0, n - 1)).reshape((n - 1,) + (1,) * (y.ndim - 1 - ax))
        return with_names((gaps * (yy.narrow(ax, 1, n - 1) + yy.narrow(ax, 0, n - 1))).sum(ax) / 2, names)
    ndim = builtins.max(y.ndim, x.ndim)
    yy = yy.reshape((1,) * (ndim - y.ndim) + y.shape)
    xx = _unnamed(x).reshape((1,) * (ndim - x.ndim) + x.shape)
    n = yy.shape[ax]
    if xx.shape[ax] != n:
        raise ValueError(f"trapezoid: x and y must have the same size along dim {ax}, got shapes {x.shape} and "
                         f"{y.shape}.")
    if n == 0:
        return with_names((yy * xx).sum(ax), names)
    gaps = xx.narrow(ax, 1, n - 1) - xx.narrow(ax, 0, n - 1)
    return with_names((gaps * (yy.narrow(ax, 1, n - 1) + yy.narrow(ax, 0, n - 1))).sum(ax) / 2, names)


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm of ``input - other`` over all entries (a 0-dim tensor), as ``torch.dist``; the two
    broadcast and their names unify (rule 2)."""
    tensor_arg(input, "dist", "input")
    tensor_arg(other, "dist", "other")
    _names.unify(input._names, other._names, "dist")
    p = _number(p, "p", "dist")
    return norm(sub(as_float_tensor(input), as_float_tensor(other)), p)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: Dim = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between ``x1`` and ``x2`` along ``dim`` (a name or an int; PyTorch's default,
    1, by position), as ``F.cosine_similarity``: ``x1 . x2 / (max(|x1|, eps) max(|x2|, eps))``.  The two
    broadcast and their names unify (rule 2); ``dim`` is removed."""
    tensor_arg(x1, "cosine_similarity", "x1")
    tensor_arg(x2, "cosine_similarity", "x2")
    eps = _number(eps, "eps", "cosine_similarity")
    ax, names = _names.reduce_broadcast(x1._names, x2._names, dim, "cosine_similarity")
    a, b = as_float_tensor(_unnamed(x1)), as_float_tensor(_unnamed(x2))
    shape = tuple(a.shape) if a.shape == b.shape else _broadcast_shape(a.shape, b.shape)
    a, b = broadcast_to(a, shape), broadcast_to(b, shape)
    na = norm(a, 2, ax, keepdim=True).clamp_min(eps)
    nb = norm(b, 2, ax, keepdim=True).clamp_min(eps)
    return with_names(((a / na) * (b / nb)).sum(ax), names)


def _broadcast_shape(sa, sb) -> tuple:
    n = builtins.max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    out = []
    for i, (u, v) in enumerate(zip(sa, sb)):
        if u != v and 1 not in (u, v):
            raise ValueError(f"cosine_similarity: shapes {sa} and {sb} do not broadcast (dim {i}: {u} vs {v}).")
        out.append(builtins.max(u, v))
    return tuple(out)


METHODS = {
    "quantile": quantile, "nanquantile": nanquantile, "nansum": nansum, "nanmean": nanmean,
    "count_nonzero": count_nonzero, "bincount": bincount, "histc": histc, "histogram": histogram,
    "dist": dist,
}
