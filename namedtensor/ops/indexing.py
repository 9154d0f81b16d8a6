"""Indexing: ``t[key]`` by position or by name, ``isel``, ``select``, ``narrow``, ``index_select``,
``gather`` and ``masked_fill``.

A key is positional (``t[0, 2:5]``, ``...``, ``None``, integer arrays or tensors,
boolean masks, lists of ints) or a dict by name (``t[{"batch": 0, "seq": slice(2, 5)}]``,
which is the positional key with ``:`` for every dim not mentioned).  Name rule
(:func:`namedtensor._names.index`): NumPy's result, carrying the names of the dims
that survive; an int drops its dim, ``None`` inserts an unnamed dim, a boolean mask
gives one unnamed dim, and a named integer index tensor puts its own names where
the indexed dim was (NumPy's placement of advanced indices).

Keys made only of ints and slices (the common case, positional or by name) take a
fast path whose plan is cached on ``(names, kinds of the key items)``; they give
views, as in NumPy.  The gradient of any indexing is the output gradient added into
zeros of the input's shape: a plain write for basic keys, a scatter-add for
advanced ones (repeated indices accumulate).  Each of those backward ops has
indexing as its own backward, so gradients of gradients work.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any, Dict, Hashable, Optional, Sequence, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, _common_backend, apply
from ..tensor import Tensor
from ._common import SCALARS, operand, tensor_arg, with_names
from .elementwise import where
from .naming import permute
from .shape import _broadcast_plain

Dim = Union[str, int]

_FULL = slice(None)
_INT = ("int",)
_SLICE = ("slice",)
_SEP = ("sep",)
_NEW = ("new",)

# ----------------------------------------------------------------------------- ops


class _GetItem(Op):
    """Basic indexing (ints, slices, ``None``, ``...``): a view of the input."""

    name = "getitem"
    complex_grad = True
    view = True

    @staticmethod
    def forward(B, x, key):
        return B.getitem(x, key)

    @staticmethod
    def backward(node, g):
        return (apply(_SetIntoZeros, (g,), node.in_names[0], shape=tuple(node.in_shapes[0]), key=node.params["key"]),)


class _SetIntoZeros(Op):
    """The gradient of basic indexing: ``g`` written into zeros (basic keys never repeat an element)."""

    name = "getitem_backward"
    complex_grad = True

    @staticmethod
    def forward(B, g, shape, key):
        out = B.zeros(shape, dtype=g.dtype)
        B.setitem(out, key, g)
        return out

    @staticmethod
    def backward(node, gg):
        return (apply(_GetItem, (gg,), node.in_names[0], key=node.params["key"]),)


class _Take(Op):
    """Advanced indexing (integer arrays, boolean masks): a copy."""

    name = "getitem"
    complex_grad = True

    @staticmethod
    def forward(B, x, key):
        return B.getitem(x, key)

    @staticmethod
    def backward(node, g):
        return (apply(_ScatterAdd, (g,), node.in_names[0], shape=tuple(node.in_shapes[0]), key=node.params["key"]),)


class _IndexSelect(_Take):
    name = "index_select"


class _ScatterAdd(Op):
    """The gradient of advanced indexing: ``g`` added into zeros at ``key`` (repeats accumulate)."""

    name = "getitem_backward"
    complex_grad = True

    @staticmethod
    def forward(B, g, shape, key):
        return B.scatter_add(shape, None, key, g)

    @staticmethod
    def backward(node, gg):
        return (apply(_Take, (gg,), node.in_names[0], key=node.params["key"]),)


# ----------------------------------------------------------------------------- planning a key


def _index_error(op: str, t: Tensor, e: Exception) -> IndexError:
    return IndexError(f"{op}: {e} (indexing a tensor with names {_names.fmt(t._names)} and shape {t.shape}).")


#: fast-path plans, keyed on (names, classes of the key items) or, for a dict key, on (names, its dims,
#: classes of its values); ``None`` marks a key that needs the general path
_FAST: Dict[Any, Any] = {}


_ELLIPSIS = type(Ellipsis)
_TOKENS = {int: (_INT,), slice: (_SLICE,), type(None): (_NEW,)}


def _basic_plan(names: _names.Names, classes: tuple, op: str):
    """``(tokens, output names, needs a '...')`` for a key of ints, slices, ``None`` and ``...``, or ``None``.

    A key that leaves no dim gives a NumPy scalar (a copy); with a '...' it gives a 0-dim view.
    """
    if any(c not in _TOKENS and c is not _ELLIPSIS for c in classes):
        return None
    if classes.count(_ELLIPSIS) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...').")
    used = sum(1 for c in classes if c is int or c is slice)
    if used > len(names):
        raise IndexError(
            f"{op}: too many indices: {used} for a tensor with {len(names)} dims {_names.fmt(names)}."
        )
    tokens = []
    for c in classes:
        tokens.extend(_TOKENS[c] if c is not _ELLIPSIS else (_SLICE,) * (len(names) - used))
    tokens = tuple(tokens)
    out = _names.index(names, tokens, op)
    return tokens, out, not out and _ELLIPSIS not in classes


def _dict_plan(names: _names.Names, dims: tuple, classes: tuple, op: str):
    """``(axes, key length, tokens, output names, needs a '...')`` for a dict key of ints and slices, or ``None``."""
    if any(c is not int and c is not slice for c in classes):
        return None
    axes = tuple(_names.axis(names, d, op) for d in dims)
    if len(set(axes)) != len(axes):
        raise _names.NamesError(f"{op}: the key's dims {dims!r} index the same dim of {_names.fmt(names)} twice.")
    length = max(axes) + 1 if axes else 0
    pos = [slice] * length
    for ax, c in zip(axes, classes):
        pos[ax] = c
    return (axes, length) + _basic_plan(names, tuple(pos), op)


def _cached(ck, make, *args):
    if len(_FAST) > 65536:
        _FAST.clear()
    p = _FAST[ck] = make(*args)
    return p


def _index_tensor(v, t: Tensor, op: str) -> Tensor:
    """An index item that is not an int or a slice, as an integer or boolean tensor of ``t``'s backend."""
    if isinstance(v, Tensor):
        if v._B is not t._B:
            _common_backend(op, t, v)  # an error unless a shape dry run mixes in meta tensors
        idx = v
    else:
        B = t._B
        if isinstance(v, (list, tuple)) and len(v) == 0:
            data = B.asarray([], dtype=_dtypes.int64)
        elif isinstance(v, (list, tuple)) or B.is_array(v) or hasattr(v, "__array__"):
            try:
                data = B.asarray(v)
            except (TypeError, ValueError) as e:
                raise TypeError(f"{op}: cannot use {type(v).__name__} {v!r} as an index: {e}") from None
        else:
            raise TypeError(
                f"{op}: an index must be an int, a slice, None, ..., an integer or boolean tensor/array, "
                f"or a list of ints; got {type(v).__name__} {v!r}."
            )
        idx = Tensor._make(data, _names.unnamed(len(data.shape)), B)
    if idx.dtype.kind == "f":
        raise TypeError(f"{op}: index tensors must be integer or bool, got {idx.dtype!r}.")
    return idx


def _is_int_like(k) -> bool:
    """A NumPy integer or 0-dim integer array: an int, as in NumPy (0-dim tensors index as arrays)."""
    return (k.__class__ is not bool and not isinstance(k, Tensor) and hasattr(k, "__index__")
            and getattr(k, "ndim", 0) == 0)


def _by_name(t: Tensor, key: dict, op: str) -> tuple:
    """A dict key ``{dim: index}`` as the positional key (``:`` for the dims not mentioned)."""
    names = t._names
    pos = [_FULL] * len(names)
    for dim, v in key.items():
        ax = _names.axis(names, dim, op)
        if pos[ax] is not _FULL:
            raise _names.NamesError(f"{op}: the key {key!r} indexes dim {ax} of {_names.fmt(names)} twice.")
        c = v.__class__
        if c is not int and c is not slice:
            if v is None or v is Ellipsis:
                raise TypeError(
                    f"{op}: an index by name must be an int, a slice or an index tensor, got {v!r} for {dim!r}; "
                    "None and ... only make sense in a positional key."
                )
            if not _is_int_like(v):
                v = _index_tensor(v, t, op)
                if v.dtype.kind == "b" and v.ndim != 1:
                    raise IndexError(
                        f"{op}: a boolean mask given by name indexes one dim, so it must be 1-D; got shape "
                        f"{v.shape} for {dim!r}. Use a positional key for a mask over several dims."
                    )
        pos[ax] = v
    while pos and pos[-1] is _FULL:
        pos.pop()
    return tuple(pos)


def plan(t: Tensor, key: Any, op: str = "getitem") -> tuple:
    """``(raw key, tokens, output names, basic)`` for ``t[key]``; ``basic`` keys give views.

    ``tokens`` is the key as :func:`namedtensor._names.index` reads it.  Shared with
    ``__setitem__`` (where the output names are the indexed region's).
    """
    names = t._names
    c = key.__class__
    if c is dict and len(key) == 1:
        # the common t[{"seq": ...}]: one dim, its plan cached on (names, dim, class of the index)
        for d, v in key.items():
            ck = (names, d, v.__class__)
        p = _FAST.get(ck, False)
        if p is False:
            p = _cached(ck, _dict_plan, names, (d,), (v.__class__,), op)
        if p is not None:
            axes, length, tokens, out, add_ellipsis = p
            key = (_FULL,) * axes[0] + (v,)
            return (key + (Ellipsis,) if add_ellipsis else key), tokens, out, True
    if c is dict:
        ck = (names, tuple(key), tuple([v.__class__ for v in key.values()]))
        p = _FAST.get(ck, False)
        if p is False:
            p = _cached(ck, _dict_plan, names, ck[1], ck[2], op)
        if p is None:
            return _plan_general(t, _by_name(t, key, op), op)
        axes, length, tokens, out, add_ellipsis = p
        pos = [_FULL] * length
        for ax, v in zip(axes, key.values()):
            pos[ax] = v
        key = tuple(pos)
    else:
        if c is not tuple:
            key = (key,)
        ck = (names, tuple([k.__class__ for k in key]))
        p = _FAST.get(ck, False)
        if p is False:
            p = _cached(ck, _basic_plan, names, ck[1], op)
        if p is None:
            return _plan_general(t, key, op)
        tokens, out, add_ellipsis = p
    return (key + (Ellipsis,) if add_ellipsis else key), tokens, out, True


def _plan_general(t: Tensor, key: tuple, op: str):
    names = t._names
    ndim = len(names)
    items: list = []
    tokens: list = []
    masks: list = []  # (position in items, mask shape)
    basic = True
    ellipsis_at = -1
    used = 0
    for k in key:
        kc = k.__class__
        if kc is int:
            items.append(k)
            tokens.append(_INT)
            used += 1
        elif kc is slice:
            items.append(_plain_slice(k, op))
            tokens.append(_SLICE)
            used += 1
        elif k is None:
            items.append(None)
            tokens.append(_NEW)
        elif k is Ellipsis:
            if ellipsis_at >= 0:
                raise IndexError(f"{op}: an index can only have a single ellipsis ('...'), got {key!r}.")
            ellipsis_at = len(items)
            items.append(Ellipsis)
            tokens.append(None)
        elif kc is bool:
            raise TypeError(f"{op}: a Python bool is not an index; use a boolean tensor as a mask.")
        elif _is_int_like(k):
            items.append(operator.index(k))
            tokens.append(_INT)
            used += 1
        else:
            idx = _index_tensor(k, t, op)
            basic = False
            if idx.dtype.kind == "b":
                masks.append((len(items), idx.shape))
                tokens.append(("mask", idx.ndim, idx._names))
                used += idx.ndim
            else:
                tokens.append(("array", idx._names))
                used += 1
            items.append(idx.array)
    if used > ndim:
        raise IndexError(
            f"{op}: too many indices: the key indexes {used} dims of a tensor with {ndim} dims {_names.fmt(names)}."
        )
    if ellipsis_at >= 0:
        fill = ndim - used
        if fill == 0 and not basic:
            # an empty '...' still separates advanced indices in NumPy (a[:, i, ..., i] puts the
            # index dims first): keep it in the key, and as a token that only breaks adjacency
            tokens[ellipsis_at] = _SEP
        else:
            items[ellipsis_at:ellipsis_at + 1] = [_FULL] * fill
            tokens[ellipsis_at:ellipsis_at + 1] = [_SLICE] * fill
            masks = [(p if p < ellipsis_at else p + fill - 1, s) for p, s in masks]
    if masks:
        _check_masks(t, tokens, masks, op)
    tokens = tuple(tokens)
    out = _names.index(names, tokens, op)
    if basic and not out:
        items.append(Ellipsis)
    return tuple(items), tokens, out, basic


def _plain_slice(s: slice, op: str) -> slice:
    """A slice with int (or None) bounds: 0-dim int tensors and NumPy ints become Python ints."""
    parts = (s.start, s.stop, s.step)
    if all(p is None or p.__class__ is int for p in parts):
        return s
    try:
        return slice(*(None if p is None else operator.index(p) for p in parts))
    except TypeError:
        raise TypeError(f"{op}: slice bounds must be ints or None, got {s!r}.") from None


def _check_masks(t: Tensor, tokens: list, masks: list, op: str) -> None:
    src = 0
    where_src = {}
    for i, tok in enumerate(tokens):
        where_src[i] = src
        if tok[0] in ("int", "slice", "array"):
            src += 1
        elif tok[0] == "mask":
            src += tok[1]
    for pos, shape in masks:
        start = where_src[pos]
        own = tuple(t.shape[start:start + len(shape)])
        # a mask dim of size 0 selects nothing from any dim (the Array API standard's rule and NumPy's)
        if len(own) != len(shape) or any(m != s and m != 0 for m, s in zip(shape, own)):
            raise IndexError(
                f"{op}: the boolean mask of shape {tuple(shape)} does not match the shape {own} of the dims "
                f"{_names.fmt(t._names[start:start + len(shape)])} it indexes (dims {start} to "
                f"{start + len(shape) - 1} of {_names.fmt(t._names)})."
            )


# ----------------------------------------------------------------------------- public


def getitem(t: Tensor, key: Any) -> Tensor:
    """``t[key]``: positional (ints, slices, ``...``, ``None``, index tensors/arrays, masks) or by
    name (``t[{"batch": 0, "seq": slice(2, 5)}]``).  Ints and slices give views."""
    raw, _, names, basic = plan(t, key, "getitem")
    try:
        return apply(_GetItem if basic else _Take, (t,), names, key=raw)
    except IndexError as e:
        raise _index_error("getitem", t, e) from None


def isel(t: Tensor, indexers: Optional[Dict[Hashable, Any]] = None, **by_name) -> Tensor:
    """Index by name: ``t.isel(batch=0, seq=slice(2, 5))`` is ``t[{"batch": 0, "seq": slice(2, 5)}]``."""
    key = dict(indexers or {}, **by_name)
    return getitem(t, key)


def select(t: Tensor, dim: Dim, index: int) -> Tensor:
    """The slice at ``index`` along ``dim`` (a name or an int); ``dim`` is removed.  A view."""
    ax = _names.axis(t._names, dim, "select")
    if isinstance(index, Tensor):
        index = index.__index__()
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"select: the index must be an int, got {type(index).__name__} {index!r}.")
    index = operator.index(index)
    size = t.shape[ax]
    if not -size <= index < size:
        raise IndexError(
            f"select: index {index} is out of range for {_names._dim_label(t._names, ax)} of size {size} "
            f"(names {_names.fmt(t._names)}, shape {t.shape})."
        )
    names = _names.remove(t._names, ax)
    key = (_FULL,) * ax + (index,)
    if not names:
        key = key + (Ellipsis,)
    return apply(_GetItem, (t,), names, key=key)


def narrow(t: Tensor, dim: Dim, start: int, length: int) -> Tensor:
    """Elements ``start`` to ``start + length`` along ``dim``; names kept.  A view."""
    ax = _names.axis(t._names, dim, "narrow")
    size = t.shape[ax]
    for v in (start, length):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"narrow: start and length must be ints, got {type(v).__name__} {v!r}.")
    start, length = operator.index(start), operator.index(length)
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise IndexError(
            f"narrow: start {start} and length {length} do not fit in {_names._dim_label(t._names, ax)} of size "
            f"{size} (names {_names.fmt(t._names)}, shape {t.shape}); need 0 <= start and start + length <= {size}."
        )
    key = (_FULL,) * ax + (slice(start, start + length),)
    return apply(_GetItem, (t,), t._names, key=key)


def index_select(t: Tensor, dim: Dim, index: Any) -> Tensor:
    """The entries at the 1-D integer ``index`` along ``dim``.  A named index replaces the dim's name
    with its own; an unnamed one keeps it."""
    ax = _names.axis(t._names, dim, "index_select")
    idx = _index_tensor(index, t, "index_select")
    if idx.ndim != 1 or idx.dtype.kind != "i":
        raise IndexError(
            f"index_select: the index must be a 1-D integer tensor, got {idx.dtype!r} with shape {idx.shape} "
            f"and names {_names.fmt(idx._names)}."
        )
    names = _names.index_select(t._names, ax, idx._names, "index_select")
    try:
        return apply(_IndexSelect, (t,), names, key=(_FULL,) * ax + (idx.array,))
    except IndexError as e:
        raise _index_error("index_select", t, e) from None


class _Gather(Op):
    name = "gather"
    complex_grad = True

    @staticmethod
    def forward(B, x, ax, index, crop):
        if crop is not None:
            x = B.getitem(x, crop)
        return B.take_along_axis(x, index, axis=ax)

    @staticmethod
    def backward(node, g):
        p = node.params
        return (apply(_GatherBackward, (g,), node.in_names[0], shape=tuple(node.in_shapes[0]), ax=p["ax"],
                      index=p["index"], crop=p["crop"]),)


class _GatherBackward(Op):
    """Scatter-add along ``ax`` into zeros of the gathered tensor's shape."""

    name = "gather_backward"
    complex_grad = True

    @staticmethod
    def forward(B, g, shape, ax, index, crop):
        key = []
        ndim = len(shape)
        for d in range(ndim):
            if d == ax:
                key.append(index)
            else:
                at = [1] * ndim
                at[d] = index.shape[d]
                key.append(B.reshape(B.arange(index.shape[d]), tuple(at)))
        return B.scatter_add(shape, None, tuple(key), g)

    @staticmethod
    def backward(node, gg):
        p = node.params
        return (apply(_Gather, (gg,), node.in_names[0], ax=p["ax"], index=p["index"], crop=p["crop"]),)


def gather(t: Tensor, dim: Dim, index: Any) -> Tensor:
    """PyTorch's ``gather``: ``out[..., j, ...] = t[..., index[..., j, ...], ...]`` along ``dim``.

    ``index`` has ``t``'s number of dims and, outside ``dim``, sizes no larger than ``t``'s; the output
    has ``index``'s shape.  Names outside ``dim`` unify; at ``dim`` the index's name wins (if it has one).
    """
    ax = _names.axis(t._names, dim, "gather")
    idx = _index_tensor(index, t, "gather")
    if idx.dtype.kind != "i":
        raise TypeError(f"gather: the index must be an integer tensor, got {idx.dtype!r}.")
    names = _names.gather(t._names, ax, idx._names, "gather")
    smaller = False
    for d, (si, st) in enumerate(zip(idx.shape, t.shape)):
        if d != ax and si > st:
            raise IndexError(
                f"gather: the index has size {si} at {_names._dim_label(idx._names, d)}, larger than the input's "
                f"{st} (index shape {idx.shape}, input shape {t.shape}); outside dim {ax} it may only be smaller."
            )
        smaller = smaller or (d != ax and si < st)
    # PyTorch lets the index be smaller outside dim: gather from the matching corner of t
    crop = tuple(_FULL if d == ax else slice(0, s) for d, s in enumerate(idx.shape)) if smaller else None
    try:
        return apply(_Gather, (t,), names, ax=ax, index=idx.array, crop=crop)
    except IndexError as e:
        raise _index_error("gather", t, e) from None


def check_fits(shape: Sequence[int], other_shape: Sequence[int], what: str, op: str) -> None:
    """``other_shape`` must broadcast onto ``shape`` without changing it (in-place ops, masks)."""
    if other_shape == shape:
        return
    n, m = len(shape), len(other_shape)
    if m > n or any(o != 1 and o != s for o, s in zip(other_shape[::-1], shape[::-1])):
        raise ValueError(
            f"{op}: {what} of shape {tuple(other_shape)} does not broadcast onto the tensor's shape {tuple(shape)} "
            "(it may only have fewer dims or size-1 dims; the tensor's shape cannot change)."
        )


def check_value_kind(dtype: _dtypes.DType, value_kind: str, op: str) -> None:
    """NumPy's 'same_kind' casting: bool -> int (signed or unsigned) -> float -> complex, never back (a float
    would be truncated, a complex lose its imaginary part)."""
    rank = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}
    if rank[value_kind] > rank[dtype.kind]:
        what = {"c": "a complex", "f": "a float", "i": "an int", "u": "an int", "b": "a bool"}[value_kind]
        raise TypeError(
            f"{op}: cannot write {what} value into a tensor of dtype {dtype!r} (it would be truncated); "
            "convert the tensor first (e.g. .float()) or give a value of its kind."
        )


def as_number(v: Any) -> Union[bool, int, float, None]:
    """``v`` as a Python number if it is one (or a NumPy scalar / 0-dim array), else ``None``."""
    if v.__class__ in SCALARS:
        return v
    if isinstance(v, (Tensor, list, tuple, str)) or getattr(v, "ndim", 0) != 0:
        return None
    kind = getattr(getattr(v, "dtype", None), "kind", None)
    if kind == "b":
        return bool(v)
    if kind == "f":  # before __index__: a 0-dim ndarray has one, which refuses floats
        return float(v)
    if hasattr(v, "__index__"):
        return operator.index(v)
    if hasattr(v, "__float__"):
        return float(v)
    return None


def scalar_kind(v: Union[bool, int, float, complex]) -> str:
    """The dtype kind a Python number writes as: ``"b"``, ``"i"``, ``"f"`` or ``"c"``."""
    return "b" if isinstance(v, bool) else "i" if isinstance(v, int) else "c" if isinstance(v, complex) else "f"


class _MaskedFill(Op):
    name = "masked_fill"
    complex_grad = True
    saves = (1,)

    @staticmethod
    def forward(B, x, mask, value):
        dt = B.dtype_of(x)
        if B.is_array(value) and B.dtype_of(value) is not dt:
            value = B.astype(value, B.native(dt))
        elif not B.is_array(value):
            value = B.asarray(value, dtype=dt)
        return B.where(mask, value, x)

    @staticmethod
    def backward(node, g):
        (mask,) = node.saved_tensors()
        gx = with_names(where(mask, 0, g), node.in_names[0]) if node.edges[0] is not None else None
        gv = where(mask, g, 0).sum() if node.edges[2] is not None else None
        return (gx, None, gv)


def masked_args(t: Tensor, mask: Any, value: Any, op: str) -> tuple:
    """Checked ``(mask, value, names)`` for ``masked_fill`` and ``masked_fill_``."""
    tensor_arg(t, op)
    if mask.__class__ in SCALARS:
        raise TypeError(f"{op}: the mask must be a boolean tensor or array, got {type(mask).__name__}.")
    mask = operand(mask, t, op)
    if mask._B is not t._B:
        _common_backend(op, t, mask)
    if mask.dtype.kind != "b":
        raise TypeError(f"{op}: the mask must be a bool tensor, got {mask.dtype!r}.")
    names = _names.masked(t._names, mask._names, op)
    check_fits(t.shape, mask.shape, "the mask", op)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(
                f"{op}: the value must be a number or a 0-dim tensor, got a tensor of shape {value.shape} "
                f"and names {_names.fmt(value._names)}; use nt.where(mask, value, t) to fill from a tensor."
            )
        if value._B is not t._B:
            _common_backend(op, t, value)
        check_value_kind(t.dtype, value.dtype.kind, op)
    else:
        number = as_number(value)
        if number is None:
            raise TypeError(f"{op}: the value must be a number or a 0-dim tensor, got {type(value).__name__}.")
        value = number
        check_value_kind(t.dtype, scalar_kind(value), op)
    return mask, value, names


def masked_fill(t: Tensor, mask: Any, value: Any) -> Tensor:
    """``t`` with ``value`` (a number or 0-dim tensor) where ``mask`` is true.  The mask broadcasts onto
    ``t`` (it cannot add dims or grow sizes); names unify (rule 2)."""
    mask, value, names = masked_args(t, mask, value, "masked_fill")
    return apply(_MaskedFill, (t, mask, value), names)


class _MaskedSelect(_Take):
    name = "masked_select"


def masked_select(t: Tensor, mask: Any) -> Tensor:
    """The entries of ``t`` where the boolean ``mask`` is true, as a 1-D unnamed tensor (row-major
    order).  ``t`` and the mask broadcast together as in PyTorch, by position with names checked
    (rule 2).  The gradient goes back to the selected entries."""
    tensor_arg(t, "masked_select")
    if mask.__class__ in SCALARS:
        raise TypeError(f"masked_select: the mask must be a boolean tensor or array, got {type(mask).__name__}.")
    mask = operand(mask, t, "masked_select")
    if mask._B is not t._B:
        _common_backend("masked_select", t, mask)
    if mask.dtype.kind != "b":
        raise TypeError(f"masked_select: the mask must be a bool tensor, got {mask.dtype!r}.")
    names = _names.unify(t._names, mask._names, "masked_select")
    shape = []
    for k in range(1, len(names) + 1):
        a = t.shape[-k] if k <= t.ndim else 1
        b = mask.shape[-k] if k <= mask.ndim else 1
        if a != b and 1 not in (a, b):
            raise ValueError(
                f"masked_select: the tensor's shape {t.shape} and the mask's {mask.shape} do not broadcast "
                f"(names {_names.fmt(t._names)} and {_names.fmt(mask._names)})."
            )
        shape.insert(0, b if a == 1 else a)
    shape = tuple(shape)
    B = t._B
    wide = _broadcast_plain(t, shape, names)
    return apply(_MaskedSelect, (wide,), _names.unnamed(1), key=(B.broadcast_to(mask.array, shape),))


class _Diagonal(_Take):
    name = "diagonal"
    read_only = True

    @staticmethod
    def forward(B, x, key):
        # PyTorch's diagonal is a view: a write into it changes the input.  This one is a copy, so it is
        # handed out read-only (a broadcast view of itself), and a write raises instead of changing nothing
        out = B.getitem(x, key)
        return B.broadcast_to(out, out.shape)


def diagonal(t: Tensor, offset: int = 0, dim1: Dim = 0, dim2: Dim = 1, *, out_name: Optional[str] = None) -> Tensor:
    """The diagonal of the dims ``dim1`` and ``dim2`` (names or ints), ``offset`` above the main one
    (below it when negative).  Both dims go; the diagonal is a new last dim named ``out_name``, unnamed
    by default.  Unlike PyTorch's, the result is a copy, not a view, so it is read-only: writing
    into it raises (where the backend can refuse writes) instead of leaving ``t`` unchanged.  The
    gradient goes back to the diagonal."""
    a, b, names = _names.diagonal(t._names, dim1, dim2, out_name, "diagonal")
    if isinstance(offset, bool) or not hasattr(offset, "__index__"):
        raise TypeError(f"diagonal: offset must be an int, got {type(offset).__name__} {offset!r}.")
    offset = operator.index(offset)
    first, second = (-offset if offset < 0 else 0), (offset if offset > 0 else 0)
    length = builtins.max(0, builtins.min(t.shape[a] - first, t.shape[b] - second))
    B = t._B
    int64 = B.native(_dtypes.int64)
    rows, cols = B.arange(first, first + length, dtype=int64), B.arange(second, second + length, dtype=int64)
    moved = permute(t, *(d for d in range(t.ndim) if d not in (a, b)), a, b)
    return apply(_Diagonal, (moved,), names, key=(Ellipsis, rows, cols))


METHODS = {
    "__getitem__": getitem, "isel": isel, "select": select, "narrow": narrow, "index_select": index_select,
    "gather": gather, "masked_fill": masked_fill, "masked_select": masked_select, "diagonal": diagonal,
}
