"""PyTorch's shape helpers, with names: ``repeat_interleave``, ``unfold``, ``view_as``/``reshape_as``,
``diag``/``diag_embed``, ``diff``, ``rot90``/``fliplr``/``flipud``, ``meshgrid``/``cartesian_prod`` and
``tril_indices``/``triu_indices``.

Name rules (in :mod:`namedtensor._names`):

* ``repeat_interleave(t, repeats, dim)``: ``t``'s names (``dim`` grows); a named 1-D ``repeats`` must be
  named like ``dim`` (``_names.repeat_interleave``).  ``dim=None`` flattens ``t`` first, with ``reshape``'s
  rule (a 1-D ``t`` keeps its name, merged dims come out unnamed).
* ``t.unfold(dim, size, step, name=)``: ``dim`` keeps its name and now counts the windows; the window is
  a new last dim named ``name``, unnamed by default (``_names.unfold``).
* ``t.view_as(other)``/``t.reshape_as(other)``: ``reshape``'s rule to ``other``'s shape, then ``other``'s
  names where ``other`` is named; the two must line up as in rule 2 (``_names.reshape_as``).
* ``diag(t, diagonal, names=)``: 1-D to a 2-D matrix, 2-D to its 1-D diagonal; the result's dims are
  new, unnamed unless ``names=`` (``_names.diag``).  ``diag_embed(t, offset, dim1, dim2, names=)``: the
  last dim goes, two new dims (named by ``names=``, unnamed by default) sit at ``dim1`` and ``dim2`` of
  the result, the other dims keep their names (``_names.diag_embed``).
* ``diff(t, n, dim, prepend, append)``: ``t``'s names; ``prepend``/``append`` are concatenated along
  ``dim`` with ``cat``'s rule (``_names.cat``).
* ``rot90(t, k, dims)``: an odd ``k`` swaps the two dims with their names, as PyTorch's transpose
  does; an even ``k`` keeps them (``_names.rot90``).  ``fliplr``/``flipud`` are ``flip`` of dim 1 / 0
  and keep the names.
* ``meshgrid(*tensors, indexing)``: output dim ``i`` has input ``i``'s name (``"xy"`` swaps the first
  two; ``_names.meshgrid``).  ``cartesian_prod``'s ``(N, k)`` result is unnamed unless ``names=``.
* ``tril_indices``/``triu_indices``: ``(2, N)`` int64 coordinates, unnamed.

Like ``diagonal``, ``unfold`` copies where PyTorch gives a view, and hands the copy out read-only so
that a write raises instead of missing the input.  ``rot90``, ``fliplr`` and ``flipud`` are copies,
as in PyTorch, made by ``flip``.  Gradients: ``repeat_interleave`` sums
the copies back (the indexing ops' scatter), ``unfold`` adds the overlapping windows back (``_Fold``,
whose gradient is ``unfold`` again), ``diag_embed``'s is the ``diagonal`` of the gradient; the others
are made of differentiable ops.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, _common_backend, apply
from ..conversion import note_dropped
from ..tensor import Tensor
from ._common import has_values, int_sizes, is_bool, tensor_arg, with_names, with_param
from .creation import _backend, _finish, _int_arg, arange
from .elementwise import ne
from .indexing import _Take
from .indexing import diagonal as _diagonal  # diag's argument is named diagonal, as in PyTorch
from .joining import _Cat, _promoted, _same_dtype, stack
from .movement import flip
from .naming import transpose
from .shape import _reshape, reshape

__all__ = [
    "repeat_interleave", "diag", "diag_embed", "diff", "rot90", "fliplr", "flipud", "meshgrid", "cartesian_prod",
    "tril_indices", "triu_indices",
]

Dim = Union[str, int]


def _names_arg(names: Optional[Sequence]):
    """A ``names=`` argument as a cache key: a tuple of plain names (a str is kept, for the rule's error)."""
    return names if names is None or isinstance(names, str) else _names.hashable_dims(tuple(names))


# ----------------------------------------------------------------------------- repeat_interleave


class _RepeatInterleave(_Take):
    """Each entry along the axis taken as often as its count (an index along the axis); the gradient
    sums the copies back (``_Take``'s)."""

    name = "repeat_interleave"


def repeat_interleave(input: Tensor, repeats: Union[int, Tensor, None] = None, dim: Optional[Dim] = None, *,
                      output_size: Optional[int] = None) -> Tensor:
    """Repeat each entry of ``input`` along ``dim`` (a name or an int) ``repeats`` times, next to itself:
    ``repeats`` is an int or a 0-D or 1-D integer tensor (one count per entry, or one for all).
    ``dim=None`` flattens ``input`` first (``reshape``'s rule: a 1-D input keeps its name).  The result
    keeps the names; a named ``repeats`` must be named like ``dim``.  ``output_size`` is the result's
    size along ``dim`` (checked; in a shape dry run it stands for the sum of a tensor of counts).
    ``repeat_interleave(counts)`` alone is PyTorch's ``repeat_interleave(arange(len(counts)), counts)``."""
    op = "repeat_interleave"
    tensor_arg(input, op)
    if repeats is None:
        if dim is not None:
            raise TypeError(f"{op}: dim= needs repeats; repeat_interleave(counts) alone takes only the counts.")
        if input.ndim != 1:
            raise ValueError(f"{op}: repeat_interleave(counts) needs 1-D counts, got shape {input.shape}.")
        index = arange(input.shape[0], dtype=_dtypes.int64, device=input.device)
        return repeat_interleave(index, input, 0, output_size=output_size)
    if output_size is not None:
        output_size = _int_arg(output_size, "output_size", op)
    if dim is None:
        input = reshape(input, -1)
        dim = 0
    if isinstance(repeats, Tensor):
        input = with_param(op, input, repeats)
        if repeats.ndim > 1:
            raise ValueError(f"{op}: repeats must be an int or a 0-D or 1-D tensor, got shape {repeats.shape}.")
        if repeats.dtype.kind not in "iu":
            raise TypeError(f"{op}: repeats must hold integers, got {repeats.dtype!r}.")
        ax, names = _names.repeat_interleave(input._names, dim, repeats._names, op)
        B, n = input._B, input.shape[ax]
        int64 = B.native(_dtypes.int64)
        counts = B.astype(repeats._data, int64)
        if repeats.numel() == 1:
            counts = B.broadcast_to(B.reshape(counts, (1,)), (n,))
        elif repeats.shape[0] != n:
            raise ValueError(
                f"{op}: repeats has {repeats.shape[0]} counts but {_names._dim_label(names, ax)} of {_names.fmt(names)} "
                f"has size {n}; give one count per entry (or one count for all)."
            )
        if has_values(B):
            if n and bool(B.any(counts < 0)):
                raise ValueError(f"{op}: repeats must be non-negative, got a negative count.")
            total = int(B.sum(counts)) if n else 0
            if output_size is not None and output_size != total:
                raise ValueError(f"{op}: output_size is {output_size} but the repeats add up to {total}.")
            index = B.repeat(B.arange(n, dtype=int64), counts)
        elif output_size is not None:
            index = B.arange(output_size, dtype=int64)  # a dry run knows only the size of the index
        else:
            index = B.repeat(B.arange(n, dtype=int64), counts)  # raises: the size depends on the counts
    else:
        if is_bool(repeats) or not hasattr(repeats, "__index__"):
            raise TypeError(f"{op}: repeats must be an int or an integer tensor, got {type(repeats).__name__}.")
        r = int(repeats.__index__())
        if r < 0:
            raise ValueError(f"{op}: repeats must be non-negative, got {r}.")
        ax, names = _names.repeat_interleave(input._names, dim, None, op)
        B, n = input._B, input.shape[ax]
        int64 = B.native(_dtypes.int64)
        if output_size is not None and output_size != n * r:
            raise ValueError(f"{op}: output_size is {output_size} but {n} entries repeated {r} times are {n * r}.")
        index = B.arange(n * r, dtype=int64) // r if r else B.arange(0, dtype=int64)
    return apply(_RepeatInterleave, (input,), names, key=(slice(None),) * ax + (index,))


# ----------------------------------------------------------------------------- unfold


def _window_index(B, n: int, size: int, step: int):
    """The flat index of every window's entries along an axis of size ``n``, window after window."""
    count = (n - size) // step + 1
    int64 = B.native(_dtypes.int64)
    starts = B.reshape(B.arange(0, count * step, step, dtype=int64), (count, 1))
    return B.reshape(starts + B.reshape(B.arange(size, dtype=int64), (1, size)), (count * size,)), count


class _Unfold(Op):
    """The windows of ``size`` every ``step`` entries along ``axis``: the axis counts them and a new last
    axis holds each window."""

    name = "unfold"
    read_only = True

    @staticmethod
    def forward(B, x, axis, size, step):
        shape = tuple(x.shape)
        index, count = _window_index(B, shape[axis], size, step)
        y = B.reshape(B.take(x, index, axis=axis), shape[:axis] + (count, size) + shape[axis + 1 :])
        y = B.moveaxis(y, axis + 1, -1)
        # PyTorch's unfold is a view: a write into it changes the input.  This one is a copy, so it is
        # handed out read-only (a broadcast view of itself), and a write raises instead of changing nothing
        return B.broadcast_to(y, y.shape)

    @staticmethod
    def backward(node, g):
        p = node.params
        n = node.in_shapes[0][p["axis"]]
        return (apply(_Fold, (g,), node.in_names[0], axis=p["axis"], size=p["size"], step=p["step"], n=n),)


class _Fold(Op):
    """The adjoint of :class:`_Unfold`: each window added back where it came from (overlaps add up)."""

    name = "unfold_backward"

    @staticmethod
    def forward(B, g, axis, size, step, n):
        index, count = _window_index(B, n, size, step)
        g = B.moveaxis(g, -1, axis + 1)
        shape = tuple(g.shape)
        flat = B.reshape(g, shape[:axis] + (count * size,) + shape[axis + 2 :])
        return B.scatter_add(shape[:axis] + (n,) + shape[axis + 2 :], None, (slice(None),) * axis + (index,), flat)

    @staticmethod
    def backward(node, gg):
        p = node.params
        return (apply(_Unfold, (gg,), node.in_names[0], axis=p["axis"], size=p["size"], step=p["step"]),)


def unfold(input: Tensor, dimension: Dim, size: int, step: int, *, name: Optional[str] = None) -> Tensor:
    """PyTorch's ``t.unfold(dimension, size, step)``: the windows of ``size`` entries, every ``step``
    entries, along ``dimension`` (a name or an int).  That dim keeps its name and now counts the
    windows; each window is a new last dim, named ``name`` (unnamed by default).  A read-only copy,
    where PyTorch gives a view: writing into it raises."""
    op = "unfold"
    tensor_arg(input, op)
    ax, names = _names.unfold(input._names, dimension, name, op)
    size, step = int_sizes((size, step), op)
    n = input.shape[ax]
    if size < 0 or size > n:
        raise ValueError(
            f"{op}: the window size {size} must be between 0 and the size {n} of {_names._dim_label(input._names, ax)} "
            f"of {_names.fmt(input._names)}."
        )
    if step <= 0:
        raise ValueError(f"{op}: step must be positive, got {step}.")
    return apply(_Unfold, (input,), names, axis=ax, size=size, step=step)


# ----------------------------------------------------------------------------- view_as / reshape_as


def _reshape_as(t: Tensor, other: Tensor, op: str) -> Tensor:
    tensor_arg(other, op, "other")
    shape = other.shape
    if t.numel() != other.numel():
        raise ValueError(
            f"{op}: cannot reshape {t.shape} ({t.numel()} elements) to other's shape {shape} "
            f"({other.numel()} elements)."
        )
    names, dropped = _names.reshape_as(t._names, other._names, t.shape, shape, op)
    if dropped:
        note_dropped(op, dropped)
    return _reshape(t, shape, names)


def reshape_as(t: Tensor, other: Tensor) -> Tensor:
    """``t`` reshaped to ``other``'s shape.  The names are ``reshape``'s (the dims of the common prefix and
    suffix keep theirs), then ``other``'s where ``other`` is named: at each position they must be equal
    or one of them ``None`` (rule 2).  A view where the backend can."""
    return _reshape_as(t, other, "reshape_as")


def view_as(t: Tensor, other: Tensor) -> Tensor:
    """PyTorch's ``t.view_as(other)``: :func:`reshape_as` (``view`` is ``reshape`` here)."""
    return _reshape_as(t, other, "view_as")


# ----------------------------------------------------------------------------- diag / diag_embed


class _DiagEmbed(Op):
    """The last axis put on diagonal ``offset`` of two new axes, at ``axis1`` (rows) and ``axis2`` (columns)
    of the result; zeros elsewhere.  The gradient is the diagonal of the gradient."""

    name = "diag_embed"

    @staticmethod
    def forward(B, x, offset, axis1, axis2):
        batch, n = tuple(x.shape[:-1]), x.shape[-1]
        m = n + abs(offset)
        i = B.arange(n, dtype=B.native(_dtypes.int64))
        rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
        square = B.scatter_add(batch + (m, m), None, (Ellipsis, rows, cols), x)
        nb = len(batch)
        others = iter(range(nb))
        perm = tuple(nb if p == axis1 else nb + 1 if p == axis2 else next(others) for p in range(nb + 2))
        return B.permute_dims(square, perm)

    @staticmethod
    def backward(node, g):
        p = node.params
        return (_diagonal(g, p["offset"], p["axis1"], p["axis2"], out_name=node.in_names[0][-1]),)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1, *,
               names: Optional[Sequence[Optional[str]]] = None) -> Tensor:
    """A tensor whose ``(dim1, dim2)`` matrices have ``input``'s last dim on diagonal ``offset`` (above the
    main one when positive), zeros elsewhere.  ``dim1`` and ``dim2`` are positions in the result (ints);
    the two new dims are unnamed unless ``names=`` (a pair) names them; the other dims keep their names."""
    op = "diag_embed"
    tensor_arg(input, op)
    new = (None, None) if names is None else _names_arg(names)
    if isinstance(new, str):
        raise _names.NamesError(f"{op}: names= is a pair of names for the two new dims, not the str {new!r}.")
    a1, a2, out = _names.diag_embed(input._names, dim1, dim2, new, op)
    return apply(_DiagEmbed, (input,), out, offset=_int_arg(offset, "offset", op), axis1=a1, axis2=a2)


def diag(input: Tensor, diagonal: int = 0, *, names: Optional[Sequence[Optional[str]]] = None) -> Tensor:
    """PyTorch's ``diag``: a 1-D ``input`` gives the square matrix with it on diagonal ``diagonal`` (above
    the main one when positive), a 2-D ``input`` gives that diagonal (a copy).  The result's dims are new
    ones, unnamed unless ``names=`` names them (one name per dim of the result)."""
    op = "diag"
    tensor_arg(input, op)
    out = _names.diag(input._names, _names_arg(names), op)
    k = _int_arg(diagonal, "diagonal", op)
    if input.ndim == 1:
        return apply(_DiagEmbed, (input,), out, offset=k, axis1=0, axis2=1)
    # diagonal hands out a read-only copy (it stands for PyTorch's view); diag is a copy in PyTorch too
    return _diagonal(input, k, 0, 1, out_name=out[0]).clone()


# ----------------------------------------------------------------------------- diff


def diff(input: Tensor, n: int = 1, dim: Dim = -1, prepend: Optional[Tensor] = None,
         append: Optional[Tensor] = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (a name or an int): ``x[1:] - x[:-1]``, ``n`` times
    (``!=`` for bool tensors, as in PyTorch).  ``prepend``/``append`` are concatenated along ``dim``
    first: they have ``input``'s number of dims and their names match it dim by dim (``cat``'s rule).
    Keeps the names."""
    op = "diff"
    tensor_arg(input, op)
    n = _int_arg(n, "n", op)
    if n < 0:
        raise ValueError(f"{op}: n must be non-negative, got {n}.")
    ax = _names.axis(input._names, dim, op)
    parts = []
    for what, p in (("prepend", prepend), ("input", input), ("append", append)):
        if p is None:
            continue
        tensor_arg(p, op, what)
        if p.ndim != input.ndim:
            raise ValueError(
                f"{op}: {what} must have the input's {input.ndim} dims, got shape {p.shape} with names "
                f"{_names.fmt(p._names)}."
            )
        parts.append(p)
    x = input
    if len(parts) > 1:
        _, names = _names.cat(tuple(p._names for p in parts), ax, op)
        for p in parts:
            if p.shape[:ax] != input.shape[:ax] or p.shape[ax + 1 :] != input.shape[ax + 1 :]:
                raise ValueError(
                    f"{op}: prepend and append must have the input's shape {input.shape} except along "
                    f"{_names._dim_label(names, ax)}, got {', '.join(str(q.shape) for q in parts)}."
                )
        x = apply(_Cat, _promoted(tuple(parts)), names, axis=ax)
    lead = (slice(None),) * ax
    for _ in range(n):
        later, earlier = x[lead + (slice(1, None),)], x[lead + (slice(None, -1),)]
        x = ne(later, earlier) if x.dtype is _dtypes.bool_ else later - earlier
    return x


# ----------------------------------------------------------------------------- rot90 / fliplr / flipud


def rot90(input: Tensor, k: int = 1, dims: Sequence[Dim] = (0, 1)) -> Tensor:
    """Rotate by ``k`` quarter turns in the plane of ``dims`` (two names or ints), from the first towards the
    second, as PyTorch does.  An odd ``k`` swaps the two dims with their names.  A copy, as PyTorch's
    (``flip``, then ``transpose``; ``k % 4 == 0`` copies ``input``)."""
    op = "rot90"
    tensor_arg(input, op)
    if isinstance(dims, str) or not isinstance(dims, (tuple, list)):
        raise TypeError(f"{op}: dims must be a pair of dims (names or ints), got {dims!r}.")
    k, a, b, _ = _names.rot90(input._names, k, _names.hashable_dims(tuple(dims)), op)
    if k == 1:
        return transpose(flip(input, b), a, b)
    if k == 2:
        return flip(input, a, b)
    if k == 3:
        return transpose(flip(input, a), a, b)
    return flip(input, ())


def fliplr(input: Tensor) -> Tensor:
    """Reverse dim 1 (left and right), for tensors of 2 dims or more: ``flip(input, 1)``.  Keeps the names."""
    tensor_arg(input, "fliplr")
    if input.ndim < 2:
        raise ValueError(f"fliplr: needs at least 2 dims, got {input.ndim} dims {_names.fmt(input._names)}.")
    return flip(input, 1)


def flipud(input: Tensor) -> Tensor:
    """Reverse dim 0 (up and down), for tensors of 1 dim or more: ``flip(input, 0)``.  Keeps the names."""
    tensor_arg(input, "flipud")
    if input.ndim < 1:
        raise ValueError("flipud: needs at least 1 dim, got a 0-dim tensor.")
    return flip(input, 0)


# ----------------------------------------------------------------------------- meshgrid / cartesian_prod


class _Meshgrid(Op):
    """A 0-D or 1-D tensor laid along axis ``pos`` of ``shape`` and broadcast over the others (a view)."""

    name = "meshgrid"
    view = True

    @staticmethod
    def forward(B, x, shape, pos):
        along = tuple(s if i == pos else 1 for i, s in enumerate(shape))
        return B.broadcast_to(B.reshape(x, along), shape)

    @staticmethod
    def backward(node, g):
        pos = node.params["pos"]
        others = tuple(i for i in range(g.ndim) if i != pos)
        g = g.sum(others) if others else g
        return (_reshape(g, tuple(node.in_shapes[0]), node.in_names[0]),)


def _tensors(tensors: tuple, op: str) -> tuple:
    """``f(a, b)`` and ``f([a, b])`` alike: a non-empty tuple of tensors on one device, of one dtype."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise ValueError(f"{op}: expects at least one tensor.")
    for i, t in enumerate(tensors):
        tensor_arg(t, op, f"argument {i}")
        if t._B is not tensors[0]._B:
            _common_backend(op, tensors[0], t)  # tensors on two devices: the device error
    _same_dtype(tensors, op)
    return tensors


def meshgrid(*tensors: Tensor, indexing: str = "ij") -> Tuple[Tensor, ...]:
    """PyTorch's ``meshgrid`` (``indexing="ij"`` by default): for 0-D or 1-D tensors, one tensor each whose
    dim ``i`` runs along input ``i`` (``"xy"`` swaps the first two dims).  Output dim ``i`` has input ``i``'s
    name, so the inputs' names must differ.  The results are read-only views (broadcasts)."""
    op = "meshgrid"
    tensors = _tensors(tensors, op)
    names, positions = _names.meshgrid(tuple(t._names for t in tensors), indexing, op)
    sizes = [0] * len(tensors)
    for t, p in zip(tensors, positions):
        sizes[p] = t.numel()
    shape = tuple(sizes)
    return tuple(apply(_Meshgrid, (t,), names, shape=shape, pos=p) for t, p in zip(tensors, positions))


def cartesian_prod(*tensors: Tensor, names: Optional[Sequence[Optional[str]]] = None) -> Tensor:
    """PyTorch's ``cartesian_prod`` of 1-D tensors: the ``(N, k)`` tensor of every combination, the last
    input varying fastest.  Unnamed (a row is no dim of the inputs) unless ``names=``; one input is
    returned as it is (with ``names=``, renamed), as PyTorch returns it."""
    op = "cartesian_prod"
    tensors = _tensors(tensors, op)
    for t in tensors:
        if t.ndim != 1:
            raise ValueError(f"{op}: expects 1-D tensors, got shape {t.shape} with names {_names.fmt(t._names)}.")
    if len(tensors) == 1:
        t = tensors[0]
        return t if names is None else with_names(t, _names.validate(_names_arg(names), 1, op))
    grids = meshgrid(*(t.rename(None) for t in tensors))
    total = math.prod(t.shape[0] for t in tensors)
    out = stack([_reshape(g, (total,), _names.unnamed(1)) for g in grids], 1)
    return out if names is None else with_names(out, _names.validate(_names_arg(names), 2, op))


# ----------------------------------------------------------------------------- tril_indices / triu_indices


def _tri_indices(row: int, col: int, offset: int, dtype, device, lower: bool, op: str) -> Tensor:
    row, col = int_sizes((row, col), op, nonnegative=True)
    offset = _int_arg(offset, "offset", op)
    dt = _dtypes.int64 if dtype is None else _dtypes.as_dtype(dtype)
    if dt.kind != "i":
        raise TypeError(f"{op}: dtype must be an integer dtype, got {dt!r}.")
    B = _backend(device)
    return _finish(B.tri_indices(row, col, offset, lower, B.native(dt)), None, B, False, op)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The ``(2, N)`` coordinates (row, then column) of the entries of a ``row x col`` matrix on and below
    diagonal ``offset``, row by row; int64 unless ``dtype=``, unnamed."""
    return _tri_indices(row, col, offset, dtype, device, True, "tril_indices")


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """Like :func:`tril_indices`, for the entries on and above diagonal ``offset``."""
    return _tri_indices(row, col, offset, dtype, device, False, "triu_indices")


METHODS = {
    "repeat_interleave": repeat_interleave, "unfold": unfold, "view_as": view_as, "reshape_as": reshape_as,
    "diag": diag, "diag_embed": diag_embed, "diff": diff, "rot90": rot90, "fliplr": fliplr, "flipud": flipud,
}
