"""The scatter family and indexed writes, with PyTorch's meaning: ``scatter scatter_add scatter_reduce
index_add index_copy index_fill index_put masked_scatter take``, and the in-place forms ``scatter_
scatter_add_ scatter_reduce_ index_add_ index_copy_ index_fill_ index_put_ masked_scatter_``.

Name rules:

* ``scatter scatter_add scatter_reduce`` (gather's inverse, :func:`namedtensor._names.scatter`): the
  index and src have the input's number of dims and unify with each other dim by dim; outside ``dim``
  they name the input's dims as it does (``None`` matches any name) and may fill its ``None`` dims; at
  ``dim`` they may carry a name of their own (the positions they read along, ``"k"`` after a top-k).
  The output has the input's names, so filled.
* ``index_add index_copy`` (index_select's inverse, :func:`namedtensor._names.index_add`): source has
  the input's dims, with ``dim`` as long as the 1-D index; at ``dim`` source's and the index's names
  unify, elsewhere source's names meet the input's as in ``scatter``.
* ``index_fill``: the input's names (the value is a number or a 0-dim tensor).
* ``index_put(indices, values)``: ``t[indices] = values``'s rule (:func:`namedtensor._names.setitem`).
* ``masked_scatter(mask, source)``: the input and the mask broadcast by rule 2 (:func:`namedtensor._names.unify`);
  source is read flat, in row-major order, so its names play no part.
* ``take(input, index)``: the input read flat, so the output has the index's names and shape.

The in-place forms write the out-of-place result into self (:func:`namedtensor.ops.inplace.edit`), so
they follow the in-place rules: self keeps its shape, other names may fill its ``None`` dims, a leaf
that requires grad is refused outside ``no_grad``, and in the graph an edit is the op plus a write.

Index values are checked as PyTorch checks them: ``scatter``'s, ``index_add``'s and ``index_copy``'s lie
in ``[0, size)``; ``index_fill``, ``index_put`` and ``take`` also take negative ones (from the end).  A
dry run (the meta device) skips these checks, which need values.  Src, source and values are cast to
the input's dtype by NumPy's 'same_kind' rule (PyTorch wants equal dtypes; a float is never written
into an integer tensor).

Gradients are PyTorch's: a write (``scatter``, ``index_copy``, ``index_fill``, ``index_put``,
``masked_scatter``) gives the input a zero gradient where it was overwritten and the written values the
gradient read at their positions; a sum (``scatter_add``, ``index_add``, ``accumulate=True``) gives both
the whole gradient; ``"mean"`` divides it by each position's count; ``"amax"``/``"amin"`` send it to
the elements that equal the result, split evenly among ties (with ``include_self=False`` the input
takes part only where nothing was scattered, unlike PyTorch, which also counts an input that happens
to equal the result); ``"prod"`` is PyTorch's formula without division by zero.  The values go in
through the backend's ``scatter_reduce``; every backward is written with ops whose own gradients
exist, so gradients of gradients work.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import flag, has_values, operand, tensor_arg, with_names
from .dtype import to
from .elementwise import where
from .indexing import _GetItem, _index_error, _index_tensor, _ScatterAdd, _Take, as_number, check_value_kind, plan
from .inplace import edit
from .shape import _broadcast_plain, _Reshape

Dim = Union[str, int]

__all__ = [
    "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill", "index_put",
    "masked_scatter", "take",
]

#: ``scatter``'s reductions (PyTorch's ``"add"``/``"multiply"``) as ``scatter_reduce``'s
_SCATTER_REDUCE = {"add": "sum", "multiply": "prod"}
_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


# ----------------------------------------------------------------------------- ops on a key


class _Scatter(Op):
    """A copy of ``x`` with ``v`` written at ``key`` (one broadcasting integer array per dim, or any NumPy key)."""

    name = "scatter"

    @staticmethod
    def forward(B, x, v, key):
        out = B.asarray(x, copy=True)
        B.setitem(out, key, v)
        return out

    @staticmethod
    def backward(node, g):
        key = node.params["key"]
        gx = _zero_at(g, key, node.in_names[0]) if node.edges[0] is not None else None
        gv = _at(g, key, node.in_names[1]) if node.edges[1] is not None else None
        return gx, gv


class _ZeroAt(Op):
    """``g`` with zeros at ``key``: the gradient of what a write replaced (a projection, so its own backward)."""

    name = "scatter_backward"

    @staticmethod
    def forward(B, g, key):
        out = B.asarray(g, copy=True)
        B.setitem(out, key, 0)
        return out

    @staticmethod
    def backward(node, gg):
        return (_zero_at(gg, node.params["key"], node.in_names[0]),)


def _zero_at(g: Tensor, key, names) -> Tensor:
    return apply(_ZeroAt, (g,), names, key=key)


def _at(g: Tensor, key, names) -> Tensor:
    """``g`` read at ``key``: the gradient of the values written there (scatter-added back by its backward)."""
    return apply(_Take, (g,), names, key=key)


class _ScatterSum(Op):
    """``x`` with ``v`` added at ``key`` (repeats accumulate); without ``include_self`` the positions
    reached start from zero."""

    name = "scatter_add"

    @staticmethod
    def forward(B, x, v, key, include_self):
        return B.scatter_reduce(x, key, v, "sum", include_self)

    @staticmethod
    def backward(node, g):
        p = node.params
        gx = None
        if node.edges[0] is not None:
            gx = with_names(g, node.in_names[0]) if p["include_self"] else _zero_at(g, p["key"], node.in_names[0])
        gv = _at(g, p["key"], node.in_names[1]) if node.edges[1] is not None else None
        return gx, gv


def _count(B, x, v, key, include_self: bool):
    """How many values each position of ``x`` combines (1 where ``key`` reaches none), in ``x``'s dtype."""
    return B.scatter_reduce(B.ones(x.shape, dtype=x.dtype), key, B.ones(v.shape, dtype=x.dtype), "sum", include_self)


class _ScatterReduce(Op):
    """``x`` with ``v`` combined into it at ``key`` by ``"prod" "mean" "amax" "amin"``."""

    name = "scatter_reduce"
    saves = (0, 1)
    saves_output = True

    @staticmethod
    def forward(B, x, v, key, reduce, include_self):
        if reduce != "mean":
            return B.scatter_reduce(x, key, v, reduce, include_self)
        total = B.scatter_reduce(x, key, v, "sum", include_self)
        count = _count(B, x, v, key, include_self)
        # integers average with floor division, as in PyTorch
        return B.divide(total, count) if B.dtype_of(x).kind == "f" else B.floor_divide(total, count)

    @staticmethod
    def backward(node, g):
        x, v, y = node.saved_tensors()
        p = node.params
        key, reduce, include_self = p["key"], p["reduce"], p["include_self"]
        in_x, in_v = node.in_names
        B = node.B
        if reduce == "mean":
            share = g / _constant(_count(B, x._data, v._data, key, include_self), B)
            gx = with_names(share, in_x) if include_self else _zero_at(g, key, in_x)
            return gx, _at(share, key, in_v)
        if reduce == "prod":
            return _prod_backward(node, g, x, v, y)
        # amax/amin: the elements equal to the result share its gradient evenly
        hit_x = x._data == y._data
        if not include_self:
            hit_x = B.logical_and(hit_x, B.logical_not(_reached(B, x._data, key)))
        hit_v = v._data == B.getitem(y._data, key)
        dt = x._data.dtype
        count = B.scatter_reduce(B.astype(hit_x, dt), key, B.astype(hit_v, dt), "sum", True)
        share = g / _constant(B.where(count == 0, B.ones_like(count), count), B)  # nan results hit nothing
        gx = with_names(share * _constant(B.astype(hit_x, dt), B), in_x)
        return gx, _at(share, key, in_v) * _constant(B.astype(hit_v, dt), B)


def _constant(a, B) -> Tensor:
    """A raw array as an unnamed constant tensor (no graph)."""
    return Tensor._make(a, _names.unnamed(len(a.shape)), B)


def _reached(B, x, key):
    """A bool array of ``x``'s shape, true where ``key`` reaches."""
    out = B.zeros(x.shape, dtype=B.native(_dtypes.bool_))
    B.setitem(out, key, True)
    return out


def _prod_backward(node, g: Tensor, x: Tensor, v: Tensor, y: Tensor) -> tuple:
    """PyTorch's gradient of a scatter product, without dividing by zero.

    The input's is ``g`` times the product of the values scattered onto it.  A value's is ``g`` times
    the product of everything else at its position: ``y / v`` where ``v`` is not 0; where ``v`` is the
    only 0 at its position, the product with ``v`` replaced by 1; where there are several zeros, 0.
    """
    p = node.params
    key, include_self = p["key"], p["include_self"]
    in_x, in_v = node.in_names
    B = node.B
    gx = gv = None
    if node.edges[0] is not None:
        if include_self:
            ones = _constant(B.ones(x._data.shape, dtype=x._data.dtype), B)
            gx = with_names(g * _reduce_into(ones, v, key, "prod", True, in_x), in_x)
        else:
            gx = _zero_at(g, key, in_x)
    if node.edges[1] is not None:
        zero = v._data == 0
        dt = v._data.dtype
        zeros_there = B.getitem(B.scatter_reduce(B.zeros(x._data.shape, dtype=dt), key, B.astype(zero, dt), "sum", True),
                                key)
        single = _constant(B.logical_and(zero, zeros_there == 1), B)
        others = _reduce_into(x, where(single, 1, v), key, "prod", include_self, in_x)
        gv = with_names(where(single, _at(g * others, key, in_v), _at(g * y, key, in_v) / where(_constant(zero, B), 1, v)),
                        in_v)
    return gx, gv


def _reduce_into(x: Tensor, v: Tensor, key, reduce: str, include_self: bool, names) -> Tensor:
    """``x`` with the values ``v`` (already of ``x``'s dtype) combined into it at ``key`` by ``reduce``."""
    if reduce == "sum":
        return apply(_ScatterSum, (x, v), names, key=key, include_self=include_self)
    return apply(_ScatterReduce, (x, v), names, key=key, reduce=reduce, include_self=include_self)


# ----------------------------------------------------------------------------- arguments


def _index_arg(index: Any, t: Tensor, op: str) -> Tensor:
    """``index`` as an integer tensor of ``t``'s backend."""
    idx = _index_tensor(index, t, op)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{op}: the index must be an integer tensor, got {idx.dtype!r}.")
    return idx


def _vector(index: Any, t: Tensor, op: str) -> Tensor:
    """A 1-D integer index (a 0-dim one is one position)."""
    idx = _index_arg(index, t, op)
    if idx.ndim == 0:
        return Tensor._make(t._B.reshape(idx.array, (1,)), _names.unnamed(1), t._B)
    if idx.ndim != 1:
        raise IndexError(
            f"{op}: the index must be a 1-D integer tensor (a vector of positions), got shape {idx.shape} and "
            f"names {_names.fmt(idx._names)}."
        )
    return idx


def _check_range(t: Tensor, idx: Tensor, size: int, where_: str, op: str, negative: bool = False) -> None:
    """Index values in ``[0, size)`` (``[-size, size)`` with ``negative``), where the data are real."""
    B = t._B
    if not (has_values(B) and has_values(idx._B)) or idx.numel() == 0:
        return
    lo, hi = int(B.item(B.min(idx.array))), int(B.item(B.max(idx.array)))
    low = -size if negative else 0
    if lo < low or hi >= size:
        allowed = f"[{low}, {size})"
        raise IndexError(
            f"{op}: index {hi if hi >= size else lo} is out of bounds for {where_} of size {size} (names "
            f"{_names.fmt(t._names)}, shape {t.shape}); indices must lie in {allowed}."
        )


def _values(v: Any, t: Tensor, what: str, op: str) -> Tensor:
    """``v`` (a tensor or an array) in ``t``'s dtype, by the 'same_kind' rule (differentiable)."""
    if as_number(v) is not None and not isinstance(v, Tensor):
        raise TypeError(f"{op}: {what} must be a tensor, got {type(v).__name__} {v!r}.")
    v = operand(v, t, op)
    check_value_kind(t.dtype, v.dtype.kind, op)
    return v if v.dtype is t.dtype else to(v, t.dtype)


def _number(value: Any, t: Tensor, what: str, op: str):
    """``value`` as a Python number that fits ``t``'s dtype."""
    number = as_number(value)
    if number is None or isinstance(value, Tensor):
        raise TypeError(f"{op}: {what} must be a number, got {type(value).__name__}.")
    check_value_kind(t.dtype, "b" if isinstance(number, bool) else "i" if isinstance(number, int) else "f", op)
    return number


def _filled(t: Tensor, shape, number) -> Tensor:
    """A constant tensor of ``shape`` full of ``number``, in ``t``'s dtype."""
    B = t._B
    return _constant(B.full(tuple(shape), number, dtype=B.native(t.dtype)), B)


def _key(B, shape, ax: int, along) -> tuple:
    """One integer array per dim, broadcasting to ``shape``: ``along`` at ``ax``, each position elsewhere."""
    int64 = B.native(_dtypes.int64)
    key = []
    for d, n in enumerate(shape):
        if d == ax:
            key.append(along)
        else:
            at = [1] * len(shape)
            at[d] = n
            key.append(B.reshape(B.arange(n, dtype=int64), tuple(at)))
    return tuple(key)


def _reduction(reduce: Optional[str], op: str) -> Optional[str]:
    """``scatter``'s ``reduce=`` as ``scatter_reduce``'s name (``None``: a plain write)."""
    if reduce is None:
        return None
    if reduce in _SCATTER_REDUCE:
        return _SCATTER_REDUCE[reduce]
    if reduce in _REDUCTIONS:
        return reduce
    raise ValueError(
        f"{op}: reduce must be 'add' or 'multiply' (or scatter_reduce's {', '.join(map(repr, _REDUCTIONS))}), "
        f"got {reduce!r}."
    )


# ----------------------------------------------------------------------------- scatter


def _scatter(t: Tensor, dim: Dim, index: Any, src: Any, value: Any, reduce: Optional[str], include_self: bool,
             op: str) -> Tensor:
    tensor_arg(t, op)
    ax = _names.axis(t._names, dim, op)
    idx = _index_arg(index, t, op)
    B = t._B
    if value is not None or not isinstance(src, Tensor) and as_number(src) is not None:
        if value is not None and src is not None:
            raise TypeError(f"{op}: give src or value, not both.")
        number = _number(src if value is None else value, t, "value", op)
        names = _names.scatter(t._names, ax, idx._names, None, op)
        v = None
    elif src is None:
        raise TypeError(f"{op}: give src (a tensor) or value (a number).")
    else:
        v = _values(src, t, "src", op)
        names = _names.scatter(t._names, ax, idx._names, v._names, op)
    for d, si in enumerate(idx.shape):
        if (d != ax and si > t.shape[d]) or (v is not None and si > v.shape[d]):
            raise ValueError(
                f"{op}: the index (shape {idx.shape}) is larger than "
                + (f"the input (shape {t.shape})" if d != ax and si > t.shape[d] else f"src (shape {v.shape})")
                + f" at dim {d}; it may be no larger than src in any dim, and than the input outside dim {ax}."
            )
    _check_range(t, idx, t.shape[ax], _names._dim_label(t._names, ax), op)
    if v is None:
        v = _filled(t, idx.shape, number)
    elif v.shape != idx.shape:
        # PyTorch reads src only at the index's positions: the corner of the index's shape
        v = apply(_GetItem, (v,), v._names, key=tuple(slice(0, s) for s in idx.shape))
    key = _key(B, idx.shape, ax, idx.array)
    if reduce is None:
        return apply(_Scatter, (t, v), names, key=key)
    if reduce == "mean" and t.dtype.kind == "b":
        raise TypeError(f"{op}: reduce='mean' needs a number dtype, got {t.dtype!r}.")
    return _reduce_into(t, v, key, reduce, include_self, names)


def scatter(input: Tensor, dim: Dim, index: Any, src: Any = None, *, value: Any = None,
            reduce: Optional[str] = None) -> Tensor:
    """PyTorch's ``scatter``: a copy of ``input`` with ``out[..., index[i, j, ...], ...] = src[i, j, ...]``
    along ``dim`` (a name or an int).

    ``index`` has ``input``'s number of dims and is no larger than ``src`` in any dim, nor than ``input``
    outside ``dim``; ``src`` is a tensor, or a number (also as ``value=``).  ``reduce="add"`` or
    ``"multiply"`` combines instead of writing (so do ``scatter_reduce``'s names, with its
    ``include_self=True``).  Repeated positions in a plain write keep one of their values (PyTorch does
    not say which).  Names: :func:`namedtensor._names.scatter`; the output has ``input``'s.
    """
    return _scatter(input, dim, index, src, value, _reduction(reduce, "scatter"), True, "scatter")


def scatter_(self: Tensor, dim: Dim, index: Any, src: Any = None, *, value: Any = None,
             reduce: Optional[str] = None) -> Tensor:
    """In place :func:`scatter`; returns self."""
    return edit(self, scatter, "scatter_", dim, index, src, value=value, reduce=reduce)


def scatter_add(input: Tensor, dim: Dim, index: Any, src: Any) -> Tensor:
    """PyTorch's ``scatter_add``: a copy of ``input`` with ``src[i, j, ...]`` added at
    ``index[i, j, ...]`` along ``dim``; repeated positions add up.  Shapes and names as :func:`scatter`."""
    return _scatter(input, dim, index, _tensor_src(src, "scatter_add"), None, "sum", True, "scatter_add")


def scatter_add_(self: Tensor, dim: Dim, index: Any, src: Any) -> Tensor:
    """In place :func:`scatter_add`; returns self."""
    return edit(self, scatter_add, "scatter_add_", dim, index, src)


def _tensor_src(src: Any, op: str) -> Any:
    if src is None or (not isinstance(src, Tensor) and as_number(src) is not None):
        raise TypeError(f"{op}: src must be a tensor, got {type(src).__name__} {src!r}.")
    return src


def scatter_reduce(input: Tensor, dim: Dim, index: Any, src: Any, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """PyTorch's ``scatter_reduce``: ``src[i, j, ...]`` combined into ``input`` at ``index[i, j, ...]``
    along ``dim`` by ``reduce``: ``"sum" "prod" "mean" "amax" "amin"`` (integers average with floor
    division).  Without ``include_self`` the positions reached combine only the values scattered there.
    Shapes and names as :func:`scatter`."""
    if reduce not in _REDUCTIONS:
        raise ValueError(
            f"scatter_reduce: reduce must be one of {', '.join(map(repr, _REDUCTIONS))}, got {reduce!r}."
        )
    include_self = flag(include_self, "include_self", "scatter_reduce")
    return _scatter(input, dim, index, _tensor_src(src, "scatter_reduce"), None, reduce, include_self,
                    "scatter_reduce")


def scatter_reduce_(self: Tensor, dim: Dim, index: Any, src: Any, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """In place :func:`scatter_reduce`; returns self."""
    return edit(self, scatter_reduce, "scatter_reduce_", dim, index, src, reduce, include_self=include_self)


# ----------------------------------------------------------------------------- index_add, index_copy, index_fill


def _along(t: Tensor, dim: Dim, index: Any, source: Any, op: str):
    """``(names, key, source)`` for writing ``source`` into ``t`` at the positions ``index`` along ``dim``."""
    tensor_arg(t, op)
    ax = _names.axis(t._names, dim, op)
    idx = _vector(index, t, op)
    v = _values(source, t, "source", op)
    names = _names.index_add(t._names, ax, idx._names, v._names, op)
    want = t.shape[:ax] + (idx.shape[0],) + t.shape[ax + 1:]
    if v.shape != want:
        raise ValueError(
            f"{op}: source has shape {v.shape}, but the input's shape {t.shape} with dim {ax} as long as the "
            f"index ({idx.shape[0]}) is {want}."
        )
    _check_range(t, idx, t.shape[ax], _names._dim_label(t._names, ax), op)
    B = t._B
    at = [1] * t.ndim
    at[ax] = idx.shape[0]
    return names, _key(B, want, ax, B.reshape(idx.array, tuple(at))), v


def index_add(input: Tensor, dim: Dim, index: Any, source: Any, *, alpha: Any = 1) -> Tensor:
    """PyTorch's ``index_add``: a copy of ``input`` with ``alpha * source`` added along ``dim`` at the
    positions of the 1-D ``index`` (``source`` is ``input``'s shape with ``dim`` as long as the index);
    repeated positions add up.  Names: :func:`namedtensor._names.index_add`."""
    names, key, v = _along(input, dim, index, source, "index_add")
    alpha = _number(alpha, input, "alpha", "index_add")
    if alpha != 1:
        v = v * alpha
    return apply(_ScatterSum, (input, v), names, key=key, include_self=True)


def index_add_(self: Tensor, dim: Dim, index: Any, source: Any, *, alpha: Any = 1) -> Tensor:
    """In place :func:`index_add`; returns self."""
    return edit(self, index_add, "index_add_", dim, index, source, alpha=alpha)


def index_copy(input: Tensor, dim: Dim, index: Any, source: Any) -> Tensor:
    """PyTorch's ``index_copy``: a copy of ``input`` with the slices of ``source`` along ``dim`` written at
    the positions of the 1-D ``index``.  Shapes and names as :func:`index_add`."""
    names, key, v = _along(input, dim, index, source, "index_copy")
    return apply(_Scatter, (input, v), names, key=key)


def index_copy_(self: Tensor, dim: Dim, index: Any, source: Any) -> Tensor:
    """In place :func:`index_copy`; returns self."""
    return edit(self, index_copy, "index_copy_", dim, index, source)


def index_fill(input: Tensor, dim: Dim, index: Any, value: Any) -> Tensor:
    """PyTorch's ``index_fill``: a copy of ``input`` with ``value`` (a number or a 0-dim tensor, whose
    gradient is the sum over the filled positions) at the positions of the 1-D ``index`` along ``dim``
    (negative positions count from the end).  Keeps ``input``'s names."""
    op = "index_fill"
    tensor_arg(input, op)
    ax = _names.axis(input._names, dim, op)
    idx = _vector(index, input, op)
    size = input.shape[ax]
    _check_range(input, idx, size, _names._dim_label(input._names, ax), op, negative=True)
    B = input._B
    shape = input.shape[:ax] + (idx.shape[0],) + input.shape[ax + 1:]
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"{op}: the value must be a number or a 0-dim tensor, got shape {value.shape}.")
        v = _broadcast_plain(_values(value, input, "value", op), shape, _names.unnamed(len(shape)))
    else:
        v = _filled(input, shape, _number(value, input, "value", op))
    positions = idx.array
    if has_values(B):
        positions = B.where(positions < 0, positions + size, positions)
    at = [1] * input.ndim
    at[ax] = idx.shape[0]
    return apply(_Scatter, (input, v), input._names, key=_key(B, shape, ax, B.reshape(positions, tuple(at))))


def index_fill_(self: Tensor, dim: Dim, index: Any, value: Any) -> Tensor:
    """In place :func:`index_fill`; returns self."""
    return edit(self, index_fill, "index_fill_", dim, index, value)


# ----------------------------------------------------------------------------- index_put, masked_scatter, take


def index_put(input: Tensor, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Tensor:
    """PyTorch's ``index_put``: a copy of ``input`` with ``input[indices] = values`` (``indices`` a tuple of
    integer or boolean index tensors, as in ``t[i, j]``); with ``accumulate=True`` the values are added,
    repeated positions adding up.  ``values`` (a number or a tensor) broadcasts onto the indexed part.
    Names: ``t[indices] = values``'s (:func:`namedtensor._names.setitem`)."""
    op = "index_put"
    tensor_arg(input, op)
    if not isinstance(indices, (tuple, list)) or not all(
            isinstance(i, Tensor) or (not isinstance(i, (int, float, slice)) and i is not None and i is not Ellipsis)
            for i in indices):
        raise TypeError(
            f"{op}: indices must be a tuple of integer or boolean tensors, got {indices!r}; for slices or ints "
            "use t[key] = values (or t[{'dim': ...}] by name)."
        )
    accumulate = flag(accumulate, "accumulate", op)
    key = tuple(_index_tensor(i, input, op) for i in indices)
    raw, tokens, region, _ = plan(input, key, op)
    B = input._B
    try:
        shape = tuple(B.getitem(input._data, raw).shape)
    except IndexError as e:
        raise _index_error(op, input, e) from None
    number = None if isinstance(values, Tensor) else as_number(values)
    if number is not None:
        names = input._names
        v = _filled(input, shape, _number(number, input, "values", op))
    else:
        v = _values(values, input, "values", op)
        names = _names.setitem(input._names, tokens, v._names, op)
        if len(v.shape) > len(shape) or any(a != 1 and a != b for a, b in zip(v.shape[::-1], shape[::-1])):
            raise ValueError(
                f"{op}: values of shape {v.shape} do not broadcast onto the indexed part's shape {shape} "
                f"(names {_names.fmt(region)})."
            )
        v = _broadcast_plain(v, shape, _names.unify(region, v._names, op))
    if accumulate:
        added = apply(_ScatterAdd, (v,), names, shape=tuple(input.shape), key=raw)
        return with_names(input, names) + added
    return apply(_Scatter, (input, v), names, key=raw)


def index_put_(self: Tensor, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Tensor:
    """In place :func:`index_put`; returns self."""
    return edit(self, index_put, "index_put_", indices, values, accumulate)


def masked_scatter(input: Tensor, mask: Any, source: Any) -> Tensor:
    """PyTorch's ``masked_scatter``: a copy of ``input`` whose entries where ``mask`` is true take the
    elements of ``source`` in row-major order (source needs at least as many elements as the mask has
    true entries).  ``input`` and the mask broadcast by rule 2, which gives the names; source is read flat,
    so its names play no part.  The gradient of source's elements that were not read is 0."""
    op = "masked_scatter"
    tensor_arg(input, op)
    if isinstance(mask, (bool, int, float)):
        raise TypeError(f"{op}: the mask must be a boolean tensor or array, got {type(mask).__name__}.")
    mask = operand(mask, input, op)
    if mask.dtype.kind != "b":
        raise TypeError(f"{op}: the mask must be a bool tensor, got {mask.dtype!r}.")
    v = _values(source, input, "source", op)
    names = _names.unify(input._names, mask._names, op)
    n = len(names)
    shape = []
    for a, b in zip((1,) * (n - input.ndim) + input.shape, (1,) * (n - mask.ndim) + mask.shape):
        if a != b and 1 not in (a, b):
            raise ValueError(
                f"{op}: the input's shape {input.shape} and the mask's {mask.shape} do not broadcast (names "
                f"{_names.fmt(input._names)} and {_names.fmt(mask._names)})."
            )
        shape.append(a if b == 1 else b)
    shape = tuple(shape)
    B = input._B
    m = B.broadcast_to(mask.array, shape)
    count = int(B.item(B.sum(B.astype(m, B.native(_dtypes.int64)))))
    if count > v.numel():
        raise ValueError(
            f"{op}: source has {v.numel()} elements (shape {v.shape}), fewer than the {count} true entries of "
            "the mask; it needs one element for each."
        )
    flat = apply(_Reshape, (v,), _names.unnamed(1), shape=(v.numel(),))
    head = apply(_GetItem, (flat,), _names.unnamed(1), key=(slice(0, count),))
    return apply(_Scatter, (_broadcast_plain(input, shape, names), head), names, key=(m,))


def masked_scatter_(self: Tensor, mask: Any, source: Any) -> Tensor:
    """In place :func:`masked_scatter` (the mask broadcasts onto self); returns self."""
    return edit(self, masked_scatter, "masked_scatter_", mask, source)


def take(input: Tensor, index: Any) -> Tensor:
    """PyTorch's ``take``: the elements of ``input`` read flat (row-major) at the integer ``index``
    (negative positions count from the end); the output has the index's shape and names."""
    op = "take"
    tensor_arg(input, op)
    idx = _index_arg(index, input, op)
    n = input.numel()
    _check_range(input, idx, n, f"the input read flat ({n} elements)", op, negative=True)
    flat = apply(_Reshape, (input,), _names.unnamed(1), shape=(n,))
    return apply(_Take, (flat,), idx._names, key=(idx.array,))


METHODS = {
    "scatter": scatter, "scatter_": scatter_, "scatter_add": scatter_add, "scatter_add_": scatter_add_,
    "scatter_reduce": scatter_reduce, "scatter_reduce_": scatter_reduce_, "index_add": index_add,
    "index_add_": index_add_, "index_copy": index_copy, "index_copy_": index_copy_, "index_fill": index_fill,
    "index_fill_": index_fill_, "index_put": index_put, "index_put_": index_put_, "masked_scatter": masked_scatter,
    "masked_scatter_": masked_scatter_, "take": take,
}
