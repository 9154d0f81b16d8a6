"""Sorting along a dim: ``sort``, ``argsort``, ``topk``, and the order statistics ``kthvalue``,
``median``, ``nanmedian`` and ``mode``.

Name rules: ``sort``, ``argsort`` and ``topk`` keep the input's names; the sorted dim keeps its
name (``topk`` shortens it to ``k`` entries but it is still the same dim).  The order statistics
reduce one dim (:func:`namedtensor._names.reduce`: the input's names without it, all of them with
``keepdim=True``); ``median()`` and ``nanmedian()`` without a dim give a 0-dim value.
``sort``, ``topk`` and the order statistics along a dim return ``(values, indices)`` like PyTorch.

Values are a :func:`~namedtensor.ops.indexing.gather` of the input at the chosen indices, so their
gradient goes to the selected entries only (as in PyTorch).  Among equal values the order is the
stable one: ``kthvalue`` and ``median`` pick the k-th entry of a stable ascending sort (PyTorch's
``median`` picks the same; its ``kthvalue`` may pick any of equal values), ``mode`` the smallest of
the most frequent values at its last occurrence (as PyTorch's).  NaN sorts as the largest value:
``median`` of a slice holding NaN is NaN (its first one), ``nanmedian`` leaves NaN out, and
``mode`` counts NaNs as equal to each other.  Complex tensors are refused (:func:`ordered`): they have
no order in PyTorch.

This module also has what the reductions and scans share: :func:`numpy_spelling` (NumPy's
``axis=``/``keepdims=`` for PyTorch's ``dim=``/``keepdim=``), :func:`ordered`, :func:`nonempty` and
:func:`prefix_scan` (a scan with any associative step, which the Array API lacks).
"""

from __future__ import annotations

import operator
from typing import Callable, NamedTuple, Optional, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import flag, tensor_arg
from .indexing import gather
from .shape import squeeze

Dim = Union[str, int]

__all__ = ["ValuesIndices", "argsort", "sort", "topk", "kthvalue", "median", "nanmedian", "mode"]


class ValuesIndices(NamedTuple):
    """What ``sort``, ``topk`` and ``max``/``min`` along a dim return."""

    values: Tensor
    indices: Tensor


class _Argsort(Op):
    """The int64 order along ``axis``, cut to its first ``k`` entries unless ``k`` is None."""

    name = "argsort"
    differentiable = False

    @staticmethod
    def forward(B, x, axis, descending, stable, k):
        order = B.sort_indices(x, axis, descending, stable)
        if k is None:
            return order
        return order[(slice(None),) * axis + (slice(0, k), ...)]


def _order(t: Tensor, ax: int, descending: bool, stable: bool, k: Optional[int] = None) -> Tensor:
    return apply(_Argsort, (t,), t._names, axis=ax, descending=bool(descending), stable=bool(stable), k=k)


def sort(t: Tensor, dim: Dim = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """Sort along ``dim`` (a name or an int); returns ``(values, indices)``, both with ``t``'s names.

    With ``stable=True`` equal values keep their order; NaN sorts as the largest value.
    """
    ax = _names.axis(t._names, dim, "sort")
    ordered(t, "sort")
    idx = _order(t, ax, flag(descending, "descending", "sort"), flag(stable, "stable", "sort"))
    return ValuesIndices(gather(t, ax, idx), idx)


def argsort(t: Tensor, dim: Dim = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The int64 indices that sort ``t`` along ``dim``; keeps ``t``'s names (no gradient)."""
    ordered(t, "argsort")
    return _order(t, _names.axis(t._names, dim, "argsort"), flag(descending, "descending", "argsort"),
                  flag(stable, "stable", "argsort"))


def topk(t: Tensor, k: int, dim: Dim = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:
    """The ``k`` largest (or smallest) entries along ``dim``: ``(values, indices)``, keeping ``t``'s names.

    Results always come sorted (``sorted=False`` is accepted for PyTorch compatibility); among
    equal values the first ones win.
    """
    ax = _names.axis(t._names, dim, "topk")
    ordered(t, "topk")
    largest, _ = flag(largest, "largest", "topk"), flag(sorted, "sorted", "topk")
    if isinstance(k, bool) or not hasattr(k, "__index__"):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__} {k!r}.")
    k = operator.index(k)
    n = t._data.shape[ax]
    if not 0 <= k <= n:
        raise ValueError(
            f"topk: k={k} is out of range for dim {ax} of size {n} (names {_names.fmt(t._names)}); "
            f"k must be in [0, {n}]."
        )
    idx = _order(t, ax, largest, True, k)
    return ValuesIndices(gather(t, ax, idx), idx)


# ----------------------------------------------------------------------------- shared with the reductions


def numpy_spelling(op: str, dim, axis, keepdim, keepdims) -> tuple:
    """``(dim, keepdim)`` of a call that may spell them as NumPy does (``axis=``, ``keepdims=``);
    spelling one both ways is a TypeError, as it is in PyTorch."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{op}: give dim= or its NumPy spelling axis=, not both.")
        dim = axis
    if keepdims is not None:
        if keepdim is not False:
            raise TypeError(f"{op}: give keepdim= or its NumPy spelling keepdims=, not both.")
        keepdim = keepdims
    return dim, keepdim


def one_dim(op: str, dim, axis):
    """The one dim a scan or a softmax works along, given as ``dim=`` or NumPy's ``axis=`` (required)."""
    dim, _ = numpy_spelling(op, dim, axis, False, None)
    if dim is None:
        raise TypeError(f"{op}: missing the dim to work along (a name or an int), e.g. {op}(dim=-1).")
    return dim


def ordered(t: Tensor, op: str) -> None:
    """Refuse a complex tensor where ``op`` needs an order: complex numbers have none (PyTorch refuses too;
    NumPy's lexicographic order is not taken)."""
    if tensor_arg(t, op).dtype.kind == "c":
        raise TypeError(f"{op}: complex numbers have no order ({t.dtype!r}); PyTorch refuses them too. Order them "
                        "by a real key instead: t.abs(), t.real or t.angle().")


def nonempty(t: Tensor, axes, op: str) -> None:
    """Refuse to reduce a dim of size 0 where the result would be undefined (a max, a median...)."""
    for a in axes:
        if t._data.shape[a] == 0:
            raise ValueError(
                f"{op}: cannot reduce over {_names._dim_label(t._names, a)} of size 0 (names "
                f"{_names.fmt(t._names)}): the result is undefined for an empty dim."
            )


def prefix_scan(B, arrays: Tuple, axis: int, step: Callable[[Tuple, Tuple], Tuple]) -> Tuple:
    """The inclusive scan of ``arrays`` along ``axis`` with ``step(earlier, later)``, which must be
    associative: ``log2(n)`` rounds of whole-array ops (Hillis and Steele), because the Array API
    has cumulative sums and products only."""
    n = arrays[0].shape[axis]
    lead = (slice(None),) * axis
    s = 1
    while s < n:
        earlier = tuple(a[lead + (slice(0, n - s), ...)] for a in arrays)
        later = tuple(a[lead + (slice(s, n), ...)] for a in arrays)
        arrays = tuple(B.concat((a[lead + (slice(0, s), ...)], m), axis=axis)
                       for a, m in zip(arrays, step(earlier, later)))
        s *= 2
    return arrays


# ----------------------------------------------------------------------------- order statistics


def _positions(B, shape, axis: int):
    """0, 1, ..., n-1 along ``axis``, broadcast to ``shape`` (int64)."""
    at = [1] * len(shape)
    at[axis] = shape[axis]
    return B.broadcast_to(B.reshape(B.arange(shape[axis], dtype=B.native(_dtypes.int64)), tuple(at)), shape)


def _nan_count(B, x, axis: int):
    return B.sum(B.astype(B.isnan(x), B.native(_dtypes.int64)), axis=axis, keepdims=True)


class _Pick(Op):
    """The int64 index (of keepdim shape) of the entry that an order statistic picks along ``axis``:
    ``rule`` is ``"kth"`` (the ``k``-th smallest), ``"median"``, ``"nanmedian"`` or ``"mode"``."""

    name = "kthvalue"
    differentiable = False

    @staticmethod
    def forward(B, x, axis, rule, k):
        order = B.sort_indices(x, axis, False, True)
        n = x.shape[axis]
        if rule == "mode":
            return _mode_index(B, x, order, axis)
        keep = tuple(1 if d == axis else s for d, s in enumerate(x.shape))
        floats = B.dtype_of(x).kind == "f"
        if rule == "kth":
            pos = B.full(keep, k - 1, dtype=B.native(_dtypes.int64))
        elif rule == "median":
            pos = B.full(keep, (n - 1) // 2, dtype=B.native(_dtypes.int64))
            if floats:  # NaN sorts last, and a slice holding one has the first NaN as its median
                nans = _nan_count(B, x, axis)
                pos = B.where(nans > 0, n - nans, pos)
        else:
            valid = n - _nan_count(B, x, axis) if floats else B.full(keep, n, dtype=B.native(_dtypes.int64))
            pos = B.where(valid > 0, (valid - 1) // 2, B.zeros_like(valid))
        return B.take_along_axis(order, pos, axis=axis)


class _Median(_Pick):
    name = "median"


class _NanMedian(_Pick):
    name = "nanmedian"


class _Mode(_Pick):
    name = "mode"


def _mode_index(B, x, order, axis: int):
    """Where the mode is: in the stable ascending order, the end of the longest run of equal values
    (the first such run: the smallest value), i.e. its last occurrence."""
    s = B.take_along_axis(x, order, axis=axis)
    n = x.shape[axis]
    lead = (slice(None),) * axis
    before, after = s[lead + (slice(0, n - 1), ...)], s[lead + (slice(1, n), ...)]
    same = before == after
    if B.dtype_of(x).kind == "f":
        same = B.logical_or(same, B.logical_and(B.isnan(before), B.isnan(after)))
    edge = B.ones(tuple(1 if d == axis else c for d, c in enumerate(x.shape)), dtype=B.native(_dtypes.bool_))
    starts = B.concat((edge, B.logical_not(same)), axis=axis)
    ends = B.concat((B.logical_not(same), edge), axis=axis)
    k = _positions(B, tuple(x.shape), axis)
    (start,) = prefix_scan(B, (B.where(starts, k, B.zeros_like(k)),), axis,
                           lambda e, later: (B.maximum(e[0], later[0]),))
    length = B.where(ends, k - start + 1, B.zeros_like(k))
    return B.take_along_axis(order, B.argmax(length, axis=axis, keepdims=True), axis=axis)


def _pick(t: Tensor, op_class, dim, keepdim, k: Optional[int] = None) -> ValuesIndices:
    op = op_class.name
    keepdim = flag(keepdim, "keepdim", op)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim must be a single dim (a name or an int), got {dim!r}.")
    scalar = t.ndim == 0
    ax = _names.axis_or_new((), dim, op) if scalar else _names.axis(t._names, dim, op)
    ordered(t, op)
    if scalar:  # as in PyTorch, a 0-dim tensor is its own order statistic, at index 0 of dim 0 or -1
        t = t.reshape(1)
    nonempty(t, (ax,), op)
    if k is not None:
        n = t._data.shape[ax]
        if not 1 <= k <= n:
            raise IndexError(
                f"{op}: k={k} is out of range for {_names._dim_label(t._names, ax)} of size {n} (names "
                f"{_names.fmt(t._names)}); k counts from 1 and must be in [1, {n}]."
            )
    at = apply(op_class, (t,), t._names, axis=ax, rule=op if op != "kthvalue" else "kth", k=k)
    values = gather(t, ax, at)
    if keepdim and not scalar:
        return ValuesIndices(values, at)
    return ValuesIndices(squeeze(values, ax), squeeze(at, ax))


def kthvalue(t: Tensor, k: int, dim: Optional[Dim] = None, keepdim: bool = False, *, axis: Optional[Dim] = None,
             keepdims: Optional[bool] = None) -> ValuesIndices:
    """The ``k``-th smallest entry along ``dim`` (a name or an int; default the last dim), counting from
    1: ``(values, indices)`` with ``dim`` removed (kept as size 1 with ``keepdim=True``).  The gradient
    goes to the selected entry."""
    dim, keepdim = numpy_spelling("kthvalue", dim, axis, keepdim, keepdims)
    if isinstance(k, bool) or not hasattr(k, "__index__"):
        raise TypeError(f"kthvalue: k must be an int, got {type(k).__name__} {k!r}.")
    return _pick(t, _Pick, -1 if dim is None else dim, keepdim, operator.index(k))


def _median(t: Tensor, op_class, dim, keepdim) -> Union[Tensor, ValuesIndices]:
    if dim is not None:
        return _pick(t, op_class, dim, keepdim)
    if keepdim is not False:
        raise TypeError(
            f"{op_class.name}: keepdim needs a dim; {op_class.name}() of the whole tensor is a 0-dim value."
        )
    flat = t.reshape(-1, names=(None,))
    if flat.shape[0] == 0:
        raise ValueError(f"{op_class.name}: the tensor (names {_names.fmt(t._names)}, shape {t.shape}) is empty, "
                         "so it has no median.")
    return squeeze(_pick(flat, op_class, 0, True).values, 0)


def median(t: Tensor, dim: Optional[Dim] = None, keepdim: bool = False, *, axis: Optional[Dim] = None,
           keepdims: Optional[bool] = None) -> Union[Tensor, ValuesIndices]:
    """``t.median()``: the lower median of all entries (a 0-dim tensor).  ``t.median(dim)``:
    ``(values, indices)`` along one dim.  The lower median of ``n`` values is the ``(n - 1) // 2``-th of
    them sorted (not an average, as NumPy's is); a slice holding NaN has NaN as its median."""
    dim, keepdim = numpy_spelling("median", dim, axis, keepdim, keepdims)
    return _median(t, _Median, dim, keepdim)


def nanmedian(t: Tensor, dim: Optional[Dim] = None, keepdim: bool = False, *, axis: Optional[Dim] = None,
              keepdims: Optional[bool] = None) -> Union[Tensor, ValuesIndices]:
    """:func:`median` leaving NaN out (a slice of NaN only has NaN as its median, at index 0)."""
    dim, keepdim = numpy_spelling("nanmedian", dim, axis, keepdim, keepdims)
    return _median(t, _NanMedian, dim, keepdim)


def mode(t: Tensor, dim: Optional[Dim] = None, keepdim: bool = False, *, axis: Optional[Dim] = None,
         keepdims: Optional[bool] = None) -> ValuesIndices:
    """The most frequent value along ``dim`` (default the last dim) and the index of its last
    occurrence, ``(values, indices)``; among equally frequent values the smallest wins."""
    dim, keepdim = numpy_spelling("mode", dim, axis, keepdim, keepdims)
    return _pick(t, _Mode, -1 if dim is None else dim, keepdim)


METHODS = {
    "sort": sort, "argsort": argsort, "topk": topk, "kthvalue": kthvalue, "median": median, "nanmedian": nanmedian,
    "mode": mode,
}
