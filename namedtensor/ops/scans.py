"""Scans along one dim that the Array API lacks: ``cummax``, ``cummin`` and ``logcumsumexp``.

Name rule: the output keeps the input's names (like ``cumsum``); ``cummax``/``cummin`` return
``(values, indices)``, both with the input's names.

Each scan runs as :func:`~namedtensor.ops.sorting.prefix_scan` (log2(n) rounds of whole-array
ops).  ``cummax``/``cummin`` follow PyTorch: among equal values the latest index wins, and once a
NaN is seen the values are NaN and the index is that of the latest NaN.  Their values are a
:func:`~namedtensor.ops.indexing.gather` of the input, so the gradient goes to the selected entry.
``logcumsumexp`` adds with ``logaddexp`` at every step, so a small entry after a large one is not
lost to underflow; its gradient is the reverse scan of PyTorch's (positive and negative parts of
the incoming gradient apart, in log space), written with tensor ops so that it is differentiable
again.
"""

from __future__ import annotations

import math
from typing import Optional, Union

from .. import _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import as_float_tensor
from .elementwise import where
from .indexing import gather
from .sorting import ValuesIndices, _positions, one_dim, ordered, prefix_scan

Dim = Union[str, int]

__all__ = ["cummax", "cummin", "logcumsumexp"]


class _RunningExtreme(Op):
    """The int64 index of the running maximum (``largest``) or minimum along ``axis``."""

    name = "cummax"
    differentiable = False

    @staticmethod
    def forward(B, x, axis, largest):
        floats = B.dtype_of(x).kind == "f"
        better = B.greater_equal if largest else B.less_equal

        def step(earlier, later):
            (v0, i0), (v1, i1) = earlier, later
            take = better(v1, v0)  # ties: the later index, as PyTorch's kernels
            if floats:  # a NaN wins over any number, and a later NaN over an earlier one
                nan0, nan1 = B.isnan(v0), B.isnan(v1)
                take = B.logical_or(nan1, B.logical_and(B.logical_not(nan0), take))
            return B.where(take, v1, v0), B.where(take, i1, i0)

        _, at = prefix_scan(B, (x, _positions(B, tuple(x.shape), axis)), axis, step)
        return at


class _RunningMin(_RunningExtreme):
    name = "cummin"


def _running(t: Tensor, dim, axis, largest: bool) -> ValuesIndices:
    op = "cummax" if largest else "cummin"
    ax = _names.axis(t._names, one_dim(op, dim, axis), op)
    ordered(t, op)
    at = apply(_RunningExtreme if largest else _RunningMin, (t,), t._names, axis=ax, largest=largest)
    return ValuesIndices(gather(t, ax, at), at)


def cummax(t: Tensor, dim: Optional[Dim] = None, *, axis: Optional[Dim] = None) -> ValuesIndices:
    """The running maximum along ``dim`` (a name or an int) and where it was: ``(values, indices)``,
    with ``t``'s names.  Ties take the latest index; NaN propagates.  The gradient goes to the
    selected entries."""
    return _running(t, dim, axis, True)


def cummin(t: Tensor, dim: Optional[Dim] = None, *, axis: Optional[Dim] = None) -> ValuesIndices:
    """The running minimum along ``dim`` and where it was, like :func:`cummax`."""
    return _running(t, dim, axis, False)


class _LogCumSumExp(Op):
    name = "logcumsumexp"
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x, axis, reverse):
        if reverse:
            x = B.flip(x, axis=axis)
        (y,) = prefix_scan(B, (x,), axis, lambda e, later: (B.logaddexp(e[0], later[0]),))
        return B.flip(y, axis=axis) if reverse else y

    @staticmethod
    def backward(node, g):
        # d y_k / d x_i = exp(x_i - y_k) for every i the scan of y_k covers, so
        # grad_i = exp(x_i) * (the scan the other way of g_k exp(-y_k)), taken in log space for
        # the positive and the negative parts of g apart (a log needs a positive argument)
        x, y = node.saved_tensors()
        axis, reverse = node.params["axis"], not node.params["reverse"]
        # y_k = -inf only where every x it covers is -inf: those terms give nothing (and -inf - -inf no NaN)
        y = where(y == -math.inf, math.inf, y)
        positive, negative = g > 0, g < 0
        up = _logcumsumexp(where(positive, where(positive, g, 1).log(), -math.inf) - y, axis, reverse)
        down = _logcumsumexp(where(negative, where(negative, -g, 1).log(), -math.inf) - y, axis, reverse)
        return ((x + up).exp() - (x + down).exp(),)


def _logcumsumexp(t: Tensor, axis: int, reverse: bool) -> Tensor:
    return apply(_LogCumSumExp, (t,), t._names, axis=axis, reverse=reverse)


def logcumsumexp(t: Tensor, dim: Optional[Dim] = None, *, axis: Optional[Dim] = None) -> Tensor:
    """``log(cumsum(exp(t)))`` along ``dim`` (a name or an int), without overflow or underflow; keeps
    the names.  Integer tensors are computed in float64."""
    ax = _names.axis(t._names, one_dim("logcumsumexp", dim, axis), "logcumsumexp")
    return _logcumsumexp(as_float_tensor(t), ax, False)


METHODS = {"cummax": cummax, "cummin": cummin, "logcumsumexp": logcumsumexp}
