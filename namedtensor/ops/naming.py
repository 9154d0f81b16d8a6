"""Naming and reordering dims: ``rename``/``rename_``, ``refine_names``, ``align_to``/``align_as``/
``nt.align``, ``permute``, ``transpose``/``swapaxes`` and ``.mT``; and NumPy's method spellings
``astype`` (``to``), ``copy`` (``clone``) and ``ravel`` (``flatten``), which follow those ops' rules.

The naming ops are views (no data is copied).  Their name rules live in
:mod:`namedtensor._names` (``rename_positional``, ``rename_mapping``, ``refine``,
``align_to``, ``align_union``, ``permute``, ``transpose``); gradients are
reordered back and renamed to the input's names.
"""

from __future__ import annotations

from typing import Optional, Tuple

from .. import _names
from ..autograd.graph import Op, apply
from ..conversion import degrade
from ..tensor import Tensor
from ._common import flag, inverse_permutation, tensor_arg, with_names
from .dtype import clone, to
from .shape import flatten


def _one_sequence(items: tuple) -> tuple:
    """``f(("a", "b"))`` means ``f("a", "b")`` (a list is no name, and is unhashable for the caches)."""
    if len(items) == 1 and isinstance(items[0], (list, tuple)):
        return tuple(items[0])
    return items


def _dims(dims: tuple) -> tuple:
    """Names or dims given as ``f("a", "b")`` or ``f(("a", "b"))``, as a key for the name rules' caches."""
    return _names.hashable_dims(_one_sequence(dims))


def _renamed(t: Tensor, names: tuple, rename_map: dict, op: str):
    if names and rename_map:
        raise _names.NamesError(
            f"{op}: give either positional names (t.{op}('a', 'b')) or a mapping (t.{op}(a='x')), not both."
        )
    names = _dims(names)
    if rename_map:
        return _names.rename_mapping(t._names, tuple(rename_map.items()), op)
    if len(names) == 1 and names[0] is None:
        return _names.unnamed(t.ndim)
    return _names.rename_positional(t._names, names, op)


def rename(t: Tensor, *names, **rename_map) -> Tensor:
    """``t.rename("a", "b")`` names every dim (``...`` keeps the dims it covers);
    ``t.rename(old="new")`` renames some; ``t.rename(None)`` drops all names."""
    return with_names(t, _renamed(t, names, rename_map, "rename"))


def rename_(t: Tensor, *names, **rename_map) -> Tensor:
    """:func:`rename` in place: ``t`` itself gets the new names and is returned (``t.names = names`` is
    ``t.rename_(*names)``, as in PyTorch).  Refused, like an in-place edit, on a tensor that requires
    grad while grad mode is on, and on a tensor computed in a graph: its graph knows it by its old
    names (write ``t = t.rename(...)`` there).  A leaf's ``.grad`` is renamed with it; a graph recorded
    before the rename refuses to run backward into it."""
    new = _renamed(t, names, rename_map, "rename_")
    if new == t._names:
        return t
    if t._node is not None:
        raise RuntimeError(
            f"rename_: the tensor (names {_names.fmt(t._names)}) was computed in a graph that knows it by "
            "these names; use t = t.rename(...) instead."
        )
    t._check_inplace("rename_")
    g = t.grad
    t._names = new
    if g is not None:
        t.grad = with_names(g, new)
    t._bump()  # a graph that saved the tensor under its old names refuses to use it
    return t


def refine_names(t: Tensor, *names) -> Tensor:
    """Name unnamed dims (``None`` -> any name); named dims must keep their name. ``...`` for the rest."""
    return with_names(t, _names.refine(t._names, _dims(names), "refine_names"))


class _Align(Op):
    """Permute the kept axes and insert size-1 axes (``source[j] == -1``); a view."""

    name = "align_to"
    complex_grad = True
    view = True

    @staticmethod
    def forward(B, x, source):
        kept = [s for s in source if s >= 0]
        if kept != list(range(len(kept))):
            x = B.permute_dims(x, tuple(kept))
        if len(kept) != len(source):
            shape = []
            it = iter(x.shape)
            for s in source:
                shape.append(1 if s < 0 else next(it))
            x = B.reshape(x, tuple(shape))
        return x

    @staticmethod
    def backward(node, g):
        source = node.params["source"]
        order = tuple(source.index(i) for i in range(len(node.in_names[0])))
        return (apply(_Gather, (g,), node.in_names[0], order=order),)


def _align(t: Tensor, source: Tuple[int, ...], names) -> Tensor:
    if source == tuple(range(t.ndim)):
        return with_names(t, names)
    return apply(_Align, (t,), names, source=source)


class _Gather(Op):
    """Select axes ``order`` of ``x`` (dropping the others, which must be size 1); the inverse of _Align."""

    name = "align_to"
    complex_grad = True
    view = True

    @staticmethod
    def forward(B, x, order):
        if len(order) != len(x.shape):
            x = B.reshape(x, tuple(s for i, s in enumerate(x.shape) if i in order))
            kept = sorted(order)
            order = tuple(kept.index(o) for o in order)
        if list(order) != list(range(len(order))):
            x = B.permute_dims(x, tuple(order))
        return x

    @staticmethod
    def backward(node, g):
        order = node.params["order"]
        n_in = len(node.in_names[0])
        source = [-1] * n_in
        for j, o in enumerate(order):
            source[o] = j
        return (apply(_Align, (g,), node.in_names[0], source=tuple(source)),)


def align_to(t: Tensor, *names) -> Tensor:
    """Reorder dims by name; names ``t`` lacks become size-1 dims; ``...`` stands for the rest."""
    source, out = _names.align_to(t._names, _dims(names), "align_to")
    return _align(t, source, out)


def align_as(t: Tensor, other: Tensor) -> Tensor:
    """``t.align_to(*other.names)``: broadcast ``t`` against ``other`` by name."""
    tensor_arg(other, "align_as")
    source, out = _names.align_as(t._names, other._names, "align_as")
    return _align(t, source, out)


def align(*tensors: Tensor) -> Tuple[Tensor, ...]:
    """Align every tensor to the union of their names (in order of first appearance)."""
    tensors = _one_sequence(tensors)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"align: expected Tensors, got {type(t).__name__}.")
    target = _names.align_union(tuple(t._names for t in tensors), "align")
    return tuple(align_to(t, *target) for t in tensors)


class _Permute(Op):
    name = "permute"
    complex_grad = True
    view = True

    @staticmethod
    def forward(B, x, perm):
        return B.permute_dims(x, perm)

    @staticmethod
    def backward(node, g):
        return (apply(_Permute, (g,), node.in_names[0], perm=inverse_permutation(node.params["perm"])),)


def _permute(t: Tensor, perm, names) -> Tensor:
    if perm == tuple(range(len(perm))):
        return with_names(t, names)
    return apply(_Permute, (t,), names, perm=tuple(perm))


def permute(t: Tensor, *dims) -> Tensor:
    """Reorder dims, given by name or position (``...`` with names: the rest, in order)."""
    perm, names = _names.permute(t._names, _dims(dims), "permute")
    return _permute(t, perm, names)


def transpose(t: Tensor, *dims, dim0=None, dim1=None) -> Tensor:
    """``t.transpose(d0, d1)`` swaps two dims (by name or position), PyTorch's meaning; names move with
    their dims.  NumPy's other forms: ``t.transpose()`` reverses the dims, and three or more dims, one
    tuple (``t.transpose((2, 0, 1))``) or names with ``...`` are a full permutation, as :func:`permute`."""
    if dim0 is not None or dim1 is not None:
        dims = dims + tuple(d for d in (dim0, dim1) if d is not None)
        if len(dims) != 2:
            raise TypeError(f"transpose: dim0= and dim1= name the two dims to swap, got the dims {dims!r}.")
    if len(dims) == 2 and not any(d is Ellipsis or d == "..." for d in dims):
        perm, names = _names.transpose(t._names, dims[0], dims[1], "transpose")
    elif dims:
        perm, names = _names.permute(t._names, _dims(dims), "transpose")
    else:
        perm, names = _names.permute(t._names, tuple(range(t.ndim))[::-1], "transpose")
    return _permute(t, perm, names)


def swapaxes(t: Tensor, axis0, axis1) -> Tensor:
    """NumPy's (and PyTorch's) spelling of ``t.transpose(axis0, axis1)``: swap two dims, by name or position."""
    perm, names = _names.transpose(t._names, axis0, axis1, "swapaxes")
    return _permute(t, perm, names)


def _mT(t: Tensor) -> Tensor:
    if t.ndim < 2:
        raise ValueError(f"mT: needs at least 2 dims, got {t.ndim}.")
    return transpose(t, -2, -1)


def _T(t: Tensor) -> Tensor:
    perm, names = _names.permute(t._names, tuple(range(t.ndim))[::-1], "T")
    return _permute(t, perm, names)


# ----------------------------------------------------------------------------- NumPy's spellings


def astype(t: Tensor, dtype, copy: bool = True) -> Tensor:
    """NumPy's spelling of ``t.to(dtype)`` (a dtype only), with NumPy's meaning of ``copy``: a new
    tensor even when the dtype does not change, unless ``copy=False``.  Keeps the names."""
    return to(t, dtype=dtype, copy=flag(copy, "copy", "astype"))


def copy(t: Tensor) -> Tensor:
    """NumPy's spelling of :func:`clone`: a copy of the data, with the names."""
    return clone(t)


def ravel(t: Tensor, out_name: Optional[str] = None) -> Tensor:
    """All dims as one: a 1-D tensor, as ``t.flatten()``.  Its one dim is named ``out_name``; a
    tensor with named dims needs it (names are never dropped silently), unless it has one dim only,
    which keeps its name (inside ``nt.gradual()`` the merged dim is left unnamed instead, and recorded)."""
    if t.ndim:
        try:
            _names.flatten(t._names, tuple(range(t.ndim)), out_name, "ravel")
        except _names.NamesDropped as err:
            degrade(err)  # raises outside nt.gradual(); inside, flatten below degrades the same way and records
    return flatten(t, 0, -1, out_name=out_name)


METHODS = {
    "rename": rename, "rename_": rename_, "refine_names": refine_names, "align_to": align_to, "align_as": align_as,
    "permute": permute, "transpose": transpose, "mT": property(_mT), "T": property(_T),
    "swapaxes": swapaxes, "astype": astype, "copy": copy, "ravel": ravel,
}
