"""Reductions over dims given by name, tuple of names, or int: ``sum``, ``mean``, ...

Name rule (:func:`namedtensor._names.reduce`): the output has the input's names
minus the reduced dims; ``keepdim=True`` keeps them all (as size 1).
"""

from __future__ import annotations

from typing import Optional

from .. import _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor


def _plan(t: Tensor, dim, keepdim: bool, op: str):
    return _names.reduce(t._names, _names.hashable_dims(dim), bool(keepdim), op)


def _expand_back(g: Tensor, node) -> Tensor:
    """A reduced gradient broadcast back to the input's shape and names."""
    axes, keepdim = node.params["axes"], node.params["keepdim"]
    in_shape, in_names = node.in_shapes[0], node.in_names[0]
    if not keepdim:
        g = g._unsqueeze_axes(axes)
    return g._broadcast_plain(in_shape, in_names)


class _Sum(Op):
    name = "sum"

    @staticmethod
    def forward(B, x, axes, keepdim):
        return B.sum(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(node, g):
        return (_expand_back(g, node),)


def sum(t: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001 - PyTorch spelling
    """Sum over ``dim`` (a name, an int, a tuple of them, or ``None`` for all)."""
    axes, names = _plan(t, dim, keepdim, "sum")
    return apply(_Sum, (t,), names, axes=axes, keepdim=bool(keepdim))


class _Mean(Op):
    name = "mean"

    @staticmethod
    def forward(B, x, axes, keepdim):
        return B.mean(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(node, g):
        shape = node.in_shapes[0]
        count = 1
        for a in node.params["axes"]:
            count *= shape[a]
        return (_expand_back(g, node) / count,)


def mean(t: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim``; integer tensors are averaged in float32."""
    axes, names = _plan(t, dim, keepdim, "mean")
    if t.dtype.kind != "f":
        t = t.float()
    return apply(_Mean, (t,), names, axes=axes, keepdim=bool(keepdim))


METHODS = {"sum": sum, "mean": mean}
