"""Reshaping without reordering: ``reshape``/``view``, ``flatten``/``unflatten``, ``squeeze``/``unsqueeze``,
``expand``/``broadcast_to``.

Name rules in :mod:`namedtensor._names` (``flatten``, ``unflatten``, ``insert``,
``remove``, ``broadcast_to``); a reshape of a named tensor needs ``names=``.
All forward through one ``_Reshape`` op (a view where the backend can) and one
``_Broadcast`` op, whose gradients reshape back / sum back.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .. import _names
from ..autograd.graph import Op, apply, version_counter
from ..tensor import Tensor
from ._common import sum_to


class _Reshape(Op):
    name = "reshape"

    @staticmethod
    def forward(B, x, shape):
        return B.reshape(x, shape)

    @staticmethod
    def backward(node, g):
        return (apply(_Reshape, (g,), node.in_names[0], shape=tuple(node.in_shapes[0])),)


def _reshape(t: Tensor, shape, names) -> Tensor:
    out = apply(_Reshape, (t,), names, shape=tuple(shape))
    if t._B.is_view_of(out._data, t._data):
        out._vc = version_counter(t)
    return out


class _Broadcast(Op):
    name = "broadcast_to"
    view = True

    @staticmethod
    def forward(B, x, shape):
        return B.broadcast_to(x, shape)

    @staticmethod
    def backward(node, g):
        return (sum_to(g, node.in_shapes[0], node.in_names[0]),)


def reshape(t: Tensor, *shape, names: Optional[Sequence] = None) -> Tensor:
    """Reshape (one size may be -1).  A named tensor needs ``names=`` for the result (names cannot be
    inferred through an arbitrary reshape); flatten/unflatten keep names without asking."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if names is None:
        if t.is_named:
            raise _names.NamesError(
                f"reshape: the input has names {_names.fmt(t._names)}; a reshape cannot infer names, so give "
                "names= for the result (or use flatten/unflatten, which keep names)."
            )
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: only one size may be -1, got {shape}.")
    total = t.numel()
    if -1 in shape:
        if known == 0 or total % known:
            raise ValueError(f"reshape: cannot reshape {t.shape} ({total} elements) to {shape}.")
        shape = tuple(total // known if s == -1 else s for s in shape)
    elif known != total:
        raise ValueError(f"reshape: cannot reshape {t.shape} ({total} elements) to {shape}.")
    return _reshape(t, shape, _names.validate(names, len(shape), "reshape"))


view = reshape


def _unsqueeze_axes(t: Tensor, axes) -> Tensor:
    """Insert unnamed size-1 dims so that they sit at ``axes`` of the result (a reduction's undo)."""
    shape = list(t._data.shape)
    names = list(t._names)
    for a in sorted(axes):
        shape.insert(a, 1)
        names.insert(a, None)
    return _reshape(t, shape, _names.validate(names, len(names)))


def _broadcast_plain(t: Tensor, shape, names) -> Tensor:
    """Broadcast to ``shape`` and take ``names`` (the caller guarantees they are consistent)."""
    if tuple(t._data.shape) == tuple(shape):
        from ._common import with_names

        return with_names(t, names)
    return apply(_Broadcast, (t,), names, shape=tuple(shape))


METHODS = {"reshape": reshape, "view": view, "_unsqueeze_axes": _unsqueeze_axes, "_broadcast_plain": _broadcast_plain}
