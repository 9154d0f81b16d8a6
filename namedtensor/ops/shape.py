"""Reshaping without reordering: ``reshape``/``view``, ``flatten``/``unflatten``, ``squeeze``/``unsqueeze``,
``expand``/``expand_as``/``broadcast_to``.

Name rules (in :mod:`namedtensor._names`):

* ``reshape``/``view``: dims of the longest common prefix and suffix of equal sizes keep their names, split
  or merged dims come out unnamed, ``names=`` names the result instead (``_names.reshape``);
* ``flatten(dims, out_name)``: the consecutive ``dims`` become one dim named ``out_name``;
  leaving out ``out_name`` is allowed only when no name would be lost (``_names.flatten``);
* ``unflatten(dim, ((name, size), ...))``: ``dim`` is replaced by the new dims (``_names.unflatten``);
  sizes without names are allowed only for an unnamed ``dim``;
* inside ``nt.gradual()`` a flatten or unflatten that would lose names leaves the new dim(s) unnamed
  instead of raising, and the report records the names dropped (``conversion.degrade``);
* ``squeeze`` removes dims (``_names.reduce``), ``unsqueeze`` inserts one (``_names.insert``);
* ``expand``/``broadcast_to``: new leading dims are unnamed unless ``names=`` names the result,
  and the given names unify with the input's (rule 2, ``_names.broadcast_to``).

Everything forwards through one ``_Reshape`` op (a view where the backend can) and one
``_Broadcast`` op (always a view); their gradients reshape back / sum back, with the input's names.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Union

from .. import _names
from ..autograd.graph import Op, apply, share_view
from ..conversion import degrade, note_dropped
from ..tensor import Tensor
from ._common import int_sizes, sum_to, tensor_arg, with_names

__all__ = ["reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "broadcast_to"]

Dim = Union[str, int]


def _track_view(out: Tensor, t: Tensor, op: type, **params: Any) -> Tensor:
    """Let ``out`` (``op`` of ``t`` with ``params``) be a view of ``t`` when its data is one: in-place edits
    show in both, and update the other's history (``share_view``)."""
    if t._B.is_view_of(out._data, t._data):
        share_view(out, t, op, params)
    return out


class _Reshape(Op):
    name = "reshape"
    complex_grad = True
    #: its output is a view of its input where the backend makes one (_track_view), which a trace on the
    #: meta device cannot tell: nt.compile treats it as one when it meets an in-place edit
    may_view = True

    @staticmethod
    def forward(B, x, shape):
        return B.reshape(x, shape)

    @staticmethod
    def backward(node, g):
        return (apply(_Reshape, (g,), node.in_names[0], shape=tuple(node.in_shapes[0])),)


def _reshape(t: Tensor, shape, names) -> Tensor:
    return _track_view(apply(_Reshape, (t,), names, shape=tuple(shape)), t, _Reshape, shape=tuple(shape))


class _Broadcast(Op):
    name = "broadcast_to"
    complex_grad = True
    view = True

    @staticmethod
    def forward(B, x, shape):
        return B.broadcast_to(x, shape)

    @staticmethod
    def backward(node, g):
        return (sum_to(g, node.in_shapes[0], node.in_names[0]),)


def reshape(t: Tensor, *shape, names: Optional[Sequence] = None) -> Tensor:
    """Reshape (one size may be -1).  The dims of the longest common prefix and suffix of equal sizes keep
    their names, the dims split or merged between them come out unnamed (``_names.reshape``); ``names=``
    names the result instead.  flatten/unflatten name the merged or split dims."""
    shape = int_sizes(shape, "reshape")
    total = t.numel()
    resolved = _infer_size(shape, total, "reshape")
    if resolved is None:
        raise ValueError(f"reshape: cannot reshape {t.shape} ({total} elements) to {shape}.")
    out_names, dropped = _names.reshape(t._names, names, t.shape, resolved, "reshape")
    if dropped:
        note_dropped("reshape", dropped)
    return _reshape(t, resolved, out_names)


def _infer_size(sizes: tuple, total: int, op: str) -> Optional[tuple]:
    """``sizes`` with its -1 (at most one) inferred so that they multiply up to ``total``, or ``None``
    when they cannot (the caller says what was being reshaped)."""
    if sizes.count(-1) > 1:
        raise ValueError(f"{op}: only one size may be -1, got {sizes}.")
    if any(s < -1 for s in sizes):
        raise ValueError(f"{op}: sizes must be non-negative (or -1 once, inferred), got {sizes}.")
    known = math.prod(s for s in sizes if s != -1)
    if -1 not in sizes:
        return sizes if known == total else None
    if known == 0:
        raise ValueError(f"{op}: the size -1 is ambiguous in {sizes}, which has a 0 size.")
    if total % known:
        return None
    return tuple(total // known if s == -1 else s for s in sizes)


view = reshape


# ----------------------------------------------------------------------------- flatten / unflatten


def flatten(t: Tensor, start_dim: Union[Dim, Sequence[Dim]] = 0, end_dim: Union[Dim, None] = -1,
            out_name: Optional[str] = None) -> Tensor:
    """Merge consecutive dims into one.  Two forms:

    * ``t.flatten(dims, out_name)``: ``dims`` is a tuple/list of consecutive dims (names or ints),
      in their order in ``t``; they become one dim named ``out_name``.
    * ``t.flatten(start_dim=0, end_dim=-1, out_name=None)`` (PyTorch's form; ``start_dim`` and
      ``end_dim`` may be names): merges ``start_dim`` through ``end_dim``.

    Without ``out_name`` the new dim is unnamed, which is allowed only when the merged dims are all
    unnamed (names are never dropped silently) or when a single dim is "merged" (it keeps its name);
    inside ``nt.gradual()`` it is allowed always, and the names dropped go to the conversion report.
    A 0-dim tensor flattens to one dim of size 1.  The result is a view where the backend can.
    """
    if isinstance(start_dim, (tuple, list)):
        dims = _names.hashable_dims(tuple(start_dim))
        if isinstance(end_dim, str) or end_dim is None:
            if out_name is not None:
                raise TypeError("flatten(dims, out_name): out_name was given twice.")
            out_name = end_dim
        elif end_dim != -1:
            raise TypeError(
                f"flatten(dims, out_name): the argument after dims is the new dim's name, got {end_dim!r}."
            )
    elif t.ndim == 0:
        # as in PyTorch, a 0-dim tensor has one dim to flatten, addressed as 0 or -1
        _names.axis_or_new((), start_dim, "flatten")
        _names.axis_or_new((), end_dim, "flatten")
        return _reshape(t, (1,), _names.validate((out_name,), 1, "flatten"))
    else:
        start = _names.axis(t._names, start_dim, "flatten")
        end = _names.axis(t._names, end_dim, "flatten")
        if start > end:
            raise ValueError(
                f"flatten: start_dim {start_dim!r} (dim {start}) comes after end_dim {end_dim!r} (dim {end}) "
                f"in a tensor with names {_names.fmt(t._names)}."
            )
        dims = tuple(range(start, end + 1))
    try:
        start, stop, names = _names.flatten(t._names, dims, out_name, "flatten")
    except _names.NamesDropped as err:
        start, stop, names = degrade(err)
        note_dropped("flatten", err.dropped)
    shape = t.shape
    return _reshape(t, shape[:start] + (math.prod(shape[start:stop]),) + shape[stop:], names)


def _unflatten_spec(sizes, names, op: str):
    """``(sizes, new_names, named)`` from ints (+ ``names=``), ``(name, size)`` pairs or a dict."""
    if isinstance(sizes, dict):
        sizes = tuple(sizes.items())
    if not isinstance(sizes, (tuple, list)):
        raise TypeError(
            f"{op}: sizes must be a tuple of ints or of (name, size) pairs, got {type(sizes).__name__}."
        )
    pairs = [isinstance(s, (tuple, list)) for s in sizes]
    if sizes and all(pairs):
        if names is not None:
            raise TypeError(f"{op}: names= cannot be combined with (name, size) pairs; give the names once.")
        for p in sizes:
            if len(p) != 2:
                raise TypeError(f"{op}: each pair must be (name, size), got {tuple(p)!r}.")
        new_names = tuple(p[0] for p in sizes)
        return int_sizes(tuple(p[1] for p in sizes), op), new_names, True
    if any(pairs):
        raise TypeError(f"{op}: sizes must be all ints or all (name, size) pairs, got {tuple(sizes)!r}.")
    ints = int_sizes((tuple(sizes),), op)
    if names is None:
        return ints, (None,) * len(ints), False
    if isinstance(names, str):
        raise _names.NamesError(f"{op}: names must be a sequence of names, not the str {names!r}.")
    names = tuple(names)
    if len(names) != len(ints):
        raise _names.NamesError(f"{op}: got {len(names)} names {_names.fmt(names)} for {len(ints)} sizes {ints}.")
    return ints, names, True


def unflatten(t: Tensor, dim: Dim, sizes: Any, names: Optional[Sequence] = None) -> Tensor:
    """Split ``dim`` into several dims: ``t.unflatten("feat", (("head", 4), ("d", -1)))``.

    ``sizes`` is a tuple of ``(name, size)`` pairs, a dict ``{name: size}``, or a tuple of ints with
    the new names in ``names=`` (or without names, for an unnamed ``dim`` only: a named dim would
    lose its name; inside ``nt.gradual()`` for a named one too, the new dims unnamed and the name
    dropped recorded).  One size may be -1 (inferred).  The result is a view where the backend can.
    """
    ax = _names.axis(t._names, dim, "unflatten")
    ints, new_names, named = _unflatten_spec(sizes, names, "unflatten")
    dropped: tuple = ()
    try:
        out_names = _names.unflatten(t._names, ax, new_names, "unflatten", named)
    except _names.NamesDropped as err:
        out_names, dropped = degrade(err), err.dropped
    shape = t.shape
    resolved = _infer_size(ints, shape[ax], "unflatten")
    if resolved is None:
        raise ValueError(
            f"unflatten: sizes {ints} don't multiply up to the size of {_names._dim_label(t._names, ax)} of size "
            f"{shape[ax]} in a tensor with names {_names.fmt(t._names)}."
        )
    if dropped:  # recorded only now: a split whose sizes are wrong dropped nothing
        note_dropped("unflatten", dropped)
    return _reshape(t, shape[:ax] + resolved + shape[ax + 1 :], out_names)


# ----------------------------------------------------------------------------- squeeze / unsqueeze


def squeeze(t: Tensor, dim: Union[Dim, Sequence[Dim], None] = None) -> Tensor:
    """Remove size-1 dims: ``dim`` (a name, an int or a tuple of them), or every size-1 dim when ``None``.

    Naming a dim whose size is not 1 is an error (PyTorch would silently keep it).  A view.
    """
    shape = t.shape
    if dim is None:
        dim = tuple(i for i, s in enumerate(shape) if s == 1)
    axes, names = _names.reduce(t._names, _names.hashable_dims(dim), False, "squeeze")
    for a in axes:
        if shape[a] != 1:
            raise ValueError(
                f"squeeze: {_names._dim_label(t._names, a)} has size {shape[a]}, not 1; only size-1 dims can be "
                f"squeezed (shape {shape}, names {_names.fmt(t._names)})."
            )
    if not axes:
        return t
    return _reshape(t, tuple(s for i, s in enumerate(shape) if i not in axes), names)


def unsqueeze(t: Tensor, dim: int, name: Optional[str] = None) -> Tensor:
    """Insert a size-1 dim at position ``dim`` of the result, named ``name`` (or unnamed).  A view."""
    if isinstance(dim, str):
        raise TypeError(
            f"unsqueeze: dim is the position of the new dim (an int), got {dim!r}; give its name with name=, "
            f"e.g. unsqueeze(0, name={dim!r})."
        )
    ax = _names.axis_or_new(t._names, dim, "unsqueeze")
    names = _names.insert(t._names, ax, name, "unsqueeze")
    shape = t.shape
    return _reshape(t, shape[:ax] + (1,) + shape[ax:], names)


def _unsqueeze_axes(t: Tensor, axes: tuple) -> Tensor:
    """Insert unnamed size-1 dims so that they sit at ``axes`` of the result (a reduction's undo)."""
    shape = list(t._data.shape)
    for a in sorted(axes):
        shape.insert(a, 1)
    return _reshape(t, shape, _names.unreduce(t._names, tuple(axes)))


# ----------------------------------------------------------------------------- expand / broadcast_to


def _broadcast_plain(t: Tensor, shape, names) -> Tensor:
    """Broadcast to ``shape`` and take ``names`` (the caller guarantees they are consistent)."""
    if tuple(t._data.shape) == tuple(shape):
        return with_names(t, names)
    return apply(_Broadcast, (t,), names, shape=tuple(shape))


def _expanded_shape(shape: tuple, sizes: tuple, op: str) -> tuple:
    """PyTorch's ``expand`` sizes: -1 keeps an existing dim's size; only size-1 dims grow."""
    lead = len(sizes) - len(shape)
    if lead < 0:
        raise ValueError(
            f"{op}: the target {sizes} has fewer dims than the tensor {shape}; the target needs at least "
            f"{len(shape)} dims."
        )
    out = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise ValueError(f"{op}: the size {s} is not allowed for the new leading dim {i} (target {sizes}).")
            out.append(s)
            continue
        cur = shape[i - lead]
        if s == -1:
            out.append(cur)
        elif s < 0:
            raise ValueError(f"{op}: sizes must be non-negative (or -1 to keep a dim), got {sizes}.")
        elif cur == s or cur == 1:
            out.append(s)
        else:
            raise ValueError(
                f"{op}: dim {i - lead} has size {cur}, which cannot be expanded to {s} (target {sizes}, tensor "
                f"{shape}); only size-1 dims can be expanded."
            )
    return tuple(out)


def _expand(t: Tensor, sizes: tuple, names, op: str) -> Tensor:
    shape = _expanded_shape(t.shape, sizes, op)
    target = _names.unnamed(len(shape)) if names is None else _names.validate(names, len(shape), op)
    return _broadcast_plain(t, shape, _names.broadcast_to(t._names, target, op))


def expand(t: Tensor, *sizes, names: Optional[Sequence] = None) -> Tensor:
    """Broadcast to ``sizes`` (PyTorch's ``expand``): -1 keeps a dim's size, only size-1 dims grow,
    new dims are added in front.  ``names=`` names the result (one per dim); they must unify with
    the input's (rule 2).  Without it, new dims are unnamed and the input's names are kept.  A view."""
    return _expand(t, int_sizes(sizes, "expand"), names, "expand")


def broadcast_to(t: Tensor, shape: Sequence[int], names: Optional[Sequence] = None) -> Tensor:
    """Broadcast to ``shape`` (NumPy's ``broadcast_to``, with ``expand``'s rules); ``names=`` as for
    :func:`expand`.  A view."""
    return _expand(t, int_sizes((shape,), "broadcast_to"), names, "broadcast_to")


def expand_as(t: Tensor, other: Tensor) -> Tensor:
    """``t.broadcast_to(other.shape, names=other.names)``: the names must unify with ``other``'s."""
    tensor_arg(other, "expand_as")
    return _expand(t, other.shape, other._names, "expand_as")


METHODS = {
    "reshape": reshape, "view": view, "flatten": flatten, "unflatten": unflatten, "squeeze": squeeze,
    "unsqueeze": unsqueeze, "expand": expand, "expand_as": expand_as, "broadcast_to": broadcast_to,
}
