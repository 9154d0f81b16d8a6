"""einops-style rearranging by name: ``rearrange``, ``reduce``, ``repeat``.

Name rule (:func:`namedtensor._names.rearrange_plan`): the pattern's words are dim names.  The left
side names the input's dims in order, as ``refine_names`` does (an unnamed dim takes its word, a
named dim must carry it); ``...`` stands for the dims not listed, which keep their names.  A group
``(head d)`` on the left splits a dim (sizes from keyword arguments, one inferred); ``embed=(head d)``
also checks the dim's name.  On the right a group merges dims into one, which is named only when
written ``embed=(head d)`` (a group of one word keeps it), never by an invented name.  The output's
names are the right side's words.

    nt.rearrange(x, "batch seq embed=(head d) -> batch head seq d", head=8)
    nt.rearrange(y, "batch head seq d -> batch seq embed=(head d)")

The ops are compositions of view ops (a reshape that splits, a permute, a reshape that merges),
a reduction and a broadcast, so gradients come from those ops and a rearrange is a view wherever
the reshapes are.  The plan is cached per (pattern, names, shape, sizes).
"""

from __future__ import annotations

import numbers

from .. import _names
from ..tensor import Tensor
from ._common import tensor_arg
from .naming import _permute
from .reductions import amax, amin, mean, prod
from .reductions import sum as _sum
from .shape import _broadcast_plain, _reshape

__all__ = ["rearrange", "reduce", "repeat"]

_REDUCTIONS = {"sum": _sum, "mean": mean, "max": amax, "min": amin, "prod": prod}


def _plan(t: Tensor, pattern: str, sizes: dict, op: str) -> _names.RearrangePlan:
    tensor_arg(t, op)
    if not isinstance(pattern, str):
        raise TypeError(f"{op}: the pattern must be a str such as 'batch seq -> seq batch', got {pattern!r}.")
    for w, s in sizes.items():
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
            raise TypeError(f"{op}: the size {w}={s!r} must be an int >= 0.")
    pairs = tuple(sorted((w, int(s)) for w, s in sizes.items()))
    return _names.rearrange_plan(pattern, t._names, tuple(t.shape), pairs, op)


def _run(t: Tensor, plan: _names.RearrangePlan, reduction: str = "") -> Tensor:
    x = t
    if x.shape != plan.split_shape or x._names != plan.split_names:
        x = _reshape(x, plan.split_shape, plan.split_names)
    if plan.reduce_axes:
        x = _REDUCTIONS[reduction](x, plan.reduce_axes)
    x = _permute(x, plan.perm, plan.perm_names)
    if x.shape != plan.expand_shape:
        x = _reshape(x, plan.expand_shape, plan.expand_names)
    if plan.expand_shape != plan.full_shape:
        x = _broadcast_plain(x, plan.full_shape, plan.expand_names)
    if x.shape != plan.out_shape or x._names != plan.out_names:
        x = _reshape(x, plan.out_shape, plan.out_names)
    return x


def rearrange(t: Tensor, pattern: str, **sizes: int) -> Tensor:
    """Reorder, split and merge dims by name, einops' ``rearrange``: the attention head split is
    ``nt.rearrange(x, "batch seq embed=(head d) -> batch head seq d", head=8)``.

    The left side's words name ``t``'s dims in order (an unnamed dim takes its word, a named one must
    carry it); ``(a b)`` splits a dim, with sizes given as keyword arguments (one may be inferred);
    on the right ``(a b)`` merges dims into an unnamed dim and ``name=(a b)`` into a dim named
    ``name``; ``...`` stands for the dims not listed.  A view where the reshapes are views."""
    return _run(t, _plan(t, pattern, sizes, "rearrange"))


def reduce(t: Tensor, pattern: str, reduction: str, **sizes: int) -> Tensor:
    """einops' ``reduce``: the words of the left side missing on the right are reduced with
    ``reduction``, one of ``sum mean max min prod`` (``max``/``min`` are :func:`amax`/:func:`amin`:
    ties share the gradient).  ``nt.reduce(x, "batch seq embed -> batch embed", "mean")``; the
    pattern is :func:`rearrange`'s, so ``"b (seq 2) e -> b seq e"`` pools pairs."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduce: the reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}.")
    return _run(t, _plan(t, pattern, sizes, "reduce"), reduction)


def repeat(t: Tensor, pattern: str, **sizes: int) -> Tensor:
    """einops' ``repeat``: the words of the right side that the left lacks are new dims, each with
    its size as a keyword argument: ``nt.repeat(x, "seq embed -> batch seq embed", batch=4)`` (a
    broadcast view); in a group, ``"h w -> h (w copy)"``, the copies are merged (a copy of the data)."""
    return _run(t, _plan(t, pattern, sizes, "repeat"))
