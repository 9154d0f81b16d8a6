"""Reductions, scans and the softmax family, over dims given by name, tuple of names, or int.

Name rules:

* reductions (``sum mean prod amax amin std var logsumexp norm any all``, ``max``/``min``/
  ``argmax``/``argmin``): :func:`namedtensor._names.reduce`, the input's names minus the
  reduced dims; ``keepdim=True`` keeps them all (as size 1).  ``dim=None`` reduces every dim.
* ``std_mean``/``var_mean``: two such tensors, ``(std, mean)`` or ``(var, mean)``.
* along one dim (``cumsum cumprod softmax log_softmax``): the output keeps the input's names.
* ``cdist``: :func:`namedtensor._names.cdist` (batch dims unified, the two row dims' names);
  ``equal`` is a Python bool, False where the names would not broadcast (:func:`namedtensor._names.unifiable`).

Each function also takes NumPy's ``axis=`` and ``keepdims=`` for ``dim=`` and ``keepdim=``.

``max``/``min`` with a dim return ``(values, indices)`` and send the gradient to the selected
element; ``amax``/``amin`` (and ``max``/``min`` of the whole tensor) split it evenly among ties,
as PyTorch does.  Products (``prod``, ``cumprod``) have gradients that are right when the input
holds zeros: ``prod``'s is a product of exclusive cumulative products (no division), ``cumprod``'s
divides by the input only when it holds no zero.
``softmax``/``log_softmax`` and their backward are the backend's hooks (``B.softmax``,
``B.softmax_backward``: fused kernels on the GPU).
Integer tensors are averaged, normalised and softmaxed in float64 (NumPy's rule, as for every op that
needs floats); bool tensors sum, multiply and
scan as int64 (``True`` is 1) and their max/min are bool, as in NumPy.
"""

from __future__ import annotations

import builtins
import math
import numbers
from typing import Optional, Sequence, Tuple, Union

from .. import _names
from ..autograd.graph import Op, _common_backend, apply, is_grad_enabled
from ..tensor import Tensor
from ._common import as_float_tensor, flag, inverse_permutation, tensor_arg, with_names
from .elementwise import eq, maximum, minimum, where
from .indexing import gather
from .shape import _broadcast_plain, _unsqueeze_axes, squeeze, unsqueeze
from .sorting import ValuesIndices, nonempty, numpy_spelling, one_dim, ordered

Dim = Union[str, int]
Dims = Union[Dim, Sequence[Dim], None]  # None: every dim

__all__ = [
    "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "std", "var", "logsumexp", "norm",
    "any", "all", "cumsum", "cumprod", "softmax", "log_softmax", "std_mean", "var_mean", "cdist", "equal",
]


def _plan(t: Tensor, dim, keepdim: bool, op: str):
    """``(axes, names, keepdim)``: the reduced axes and the output names, and ``keepdim`` checked (a bool)."""
    keepdim = flag(keepdim, "keepdim", op)
    return _names.reduce(t._names, _names.hashable_dims(dim), keepdim, op) + (keepdim,)


def _expand_back(g: Tensor, node) -> Tensor:
    """A reduced gradient broadcast back to the input's shape and names."""
    axes, keepdim = node.params["axes"], node.params["keepdim"]
    in_shape, in_names = node.in_shapes[0], node.in_names[0]
    if not keepdim:
        g = _unsqueeze_axes(g, axes)
    return _broadcast_plain(g, in_shape, in_names)


def _kept(y: Tensor, node) -> Tensor:
    """A reduction's output with the reduced dims back as unnamed size-1 dims (to broadcast against the input)."""
    return y if node.params["keepdim"] else _unsqueeze_axes(y, node.params["axes"])


def _one_axis(t: Tensor, dim, op: str) -> int:
    if isinstance(dim, (tuple, list)):
        hint = {"max": " To reduce several dims use amax.", "min": " To reduce several dims use amin."}
        raise TypeError(f"{op}: dim must be a single dim (a name or an int), got {dim!r}.{hint.get(op, '')}")
    return _names.axis(t._names, dim, op)


# ----------------------------------------------------------------------------- sum, mean


class _Sum(Op):
    name = "sum"
    complex_grad = True

    @staticmethod
    def forward(B, x, axes, keepdim):
        return B.sum(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(node, g):
        return (_expand_back(g, node),)


def sum(t: Tensor, dim: Dims = None, keepdim: bool = False,
        *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Sum over ``dim`` (a name, an int, a tuple of them, or ``None`` for all)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("sum", dim, axis, keepdim, keepdims)
    axes, names, keepdim = _plan(t, dim, keepdim, "sum")
    return apply(_Sum, (t,), names, axes=axes, keepdim=keepdim)


class _Mean(Op):
    name = "mean"
    complex_grad = True

    @staticmethod
    def forward(B, x, axes, keepdim):
        return B.mean(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(node, g):
        shape = node.in_shapes[0]
        return (_expand_back(g, node) / math.prod(shape[a] for a in node.params["axes"]),)


def mean(t: Tensor, dim: Dims = None, keepdim: bool = False,
         *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Mean over ``dim``; integer tensors are averaged in float64."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("mean", dim, axis, keepdim, keepdims)
    axes, names, keepdim = _plan(t, dim, keepdim, "mean")
    return apply(_Mean, (as_float_tensor(t),), names, axes=axes, keepdim=keepdim)


# ----------------------------------------------------------------------------- scans


def _scan(B, scan, x, axis: int, exclusive: bool, reverse: bool):
    """A cumulative ``scan`` along ``axis``, from the back when ``reverse``; ``exclusive`` leaves
    out each element itself (the first output is the identity)."""
    if reverse:
        x = B.flip(x, axis=axis)
    y = scan(x, axis=axis, include_initial=exclusive)
    if exclusive:
        y = y[(slice(None),) * axis + (slice(0, -1), ...)]
    return B.flip(y, axis=axis) if reverse else y


class _Cumsum(Op):
    name = "cumsum"

    @staticmethod
    def forward(B, x, axis, exclusive, reverse):
        return _scan(B, B.cumulative_sum, x, axis, exclusive, reverse)

    @staticmethod
    def backward(node, g):
        # out_k sums x over S(k); x_i reaches every out_k with i in S(k): the scan the other way
        p = node.params
        return (_cumsum(g, p["axis"], p["exclusive"], not p["reverse"]),)


def _cumsum(t: Tensor, axis: int, exclusive: bool, reverse: bool) -> Tensor:
    return apply(_Cumsum, (t,), t._names, axis=axis, exclusive=exclusive, reverse=reverse)


def cumsum(t: Tensor, dim: Optional[Dim] = None, *, axis: Optional[Dim] = None) -> Tensor:
    """Cumulative sum along ``dim`` (a name or an int); keeps the names."""
    dim = one_dim("cumsum", dim, axis)
    return _cumsum(t, _names.axis(t._names, dim, "cumsum"), False, False)


class _Cumprod(Op):
    name = "cumprod"
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x, axis, exclusive, reverse):
        return _scan(B, B.cumulative_prod, x, axis, exclusive, reverse)

    @staticmethod
    def backward(node, g):
        x, y = node.saved_tensors()
        p = node.params
        axis, exclusive, reverse = p["axis"], p["exclusive"], p["reverse"]
        B = node.B
        if not bool(B.any(x._data == 0)):
            # out_k is the product of x over S(k), so d out_k / d x_i = out_k / x_i for every i in S(k)
            return (_cumsum(g * y, axis, exclusive, not reverse) / x,)
        return (_cumprod_grad_with_zeros(x, g, axis, exclusive, reverse),)


def _cumprod_grad_with_zeros(x: Tensor, g: Tensor, axis: int, exclusive: bool, reverse: bool) -> Tensor:
    """The cumprod gradient without dividing by x: O(n^2) memory along ``axis``.

    A new dim ``i`` is put before ``axis`` (whose index is ``j``, then ``k`` for the output):
    ``c[i, k]`` is the same cumulative product of ``x`` with ``x_i`` replaced by 1, i.e. the
    product over ``S(k)`` without ``x_i``, and ``grad_i = sum_k [i in S(k)] g_k c[i, k]``.
    """
    B = x._B
    n = x._data.shape[axis]
    at = [1] * (x.ndim + 1)
    at[axis] = at[axis + 1] = n
    i = B.reshape(B.arange(n), (n, 1))
    j = B.reshape(B.arange(n), (1, n))
    diagonal = Tensor._make(B.reshape(i == j, tuple(at)), _names.unnamed(len(at)), B)
    if reverse:
        inside = (i > j) if exclusive else (i >= j)
    else:
        inside = (i < j) if exclusive else (i <= j)
    inside = Tensor._make(B.reshape(inside, tuple(at)), _names.unnamed(len(at)), B)
    wide = where(diagonal, 1, _unsqueeze_axes(x, (axis,)))
    c = apply(_Cumprod, (wide,), wide._names, axis=axis + 1, exclusive=exclusive, reverse=reverse)
    terms = where(inside, c * _unsqueeze_axes(g, (axis,)), 0)
    return with_names(terms.sum(axis + 1), x._names)


def _cumprod(t: Tensor, axis: int, exclusive: bool, reverse: bool) -> Tensor:
    return apply(_Cumprod, (t,), t._names, axis=axis, exclusive=exclusive, reverse=reverse)


def cumprod(t: Tensor, dim: Optional[Dim] = None, *, axis: Optional[Dim] = None) -> Tensor:
    """Cumulative product along ``dim`` (a name or an int); keeps the names.  Its gradient is
    right when the input holds zeros (at O(n^2) memory along ``dim`` in that case)."""
    dim = one_dim("cumprod", dim, axis)
    return _cumprod(t, _names.axis(t._names, dim, "cumprod"), False, False)


# ----------------------------------------------------------------------------- prod


class _Prod(Op):
    name = "prod"
    saves = (0,)

    @staticmethod
    def forward(B, x, axes, keepdim):
        return B.prod(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        g = _expand_back(g, node)
        axes = node.params["axes"]
        return (g * _product_of_others(x, axes) if axes else g,)


def _product_of_others(x: Tensor, axes) -> Tensor:
    """For each element, the product of the other elements of its slice over ``axes``: the
    exclusive cumulative products from the front times those from the back (no division)."""
    if len(axes) == 1:
        (a,) = axes
        return _cumprod(x, a, True, False) * _cumprod(x, a, True, True)
    # the exclusive products scan one axis: move the dims to the end and flatten them into one
    kept = [a for a in range(x.ndim) if a not in axes]
    perm = kept + list(axes)
    moved = x.permute(*perm)
    lead = len(kept)
    n = math.prod(moved.shape[lead:])
    flat = moved.reshape(moved.shape[:lead] + (n,), names=moved.names[:lead] + (None,))
    others = _cumprod(flat, lead, True, False) * _cumprod(flat, lead, True, True)
    others = others.reshape(moved.shape, names=moved.names)
    return others.permute(*inverse_permutation(perm))


def prod(t: Tensor, dim: Dims = None, keepdim: bool = False,
         *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Product over ``dim`` (a name, an int, a tuple of them, or ``None`` for all).

    The gradient is right with zeros in the input (it never divides by it)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("prod", dim, axis, keepdim, keepdims)
    axes, names, keepdim = _plan(t, dim, keepdim, "prod")
    return apply(_Prod, (t,), names, axes=axes, keepdim=keepdim)


# ----------------------------------------------------------------------------- max, min


class _Amax(Op):
    name = "amax"
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x, axes, keepdim, largest):
        return (B.max if largest else B.min)(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(node, g):
        x, y = node.saved_tensors()
        return (_expand_back(g, node) * _tie_weights(node, x._data, y._data, x._names),)


class _Amin(_Amax):
    name = "amin"


def _tie_weights(node, x, extreme, names) -> Tensor:
    """A constant: 1/count where array ``x`` equals its slice's ``extreme`` (the node's output, as an
    array; count = how many do), else 0.  Built on raw arrays: no graph for a constant."""
    B = node.B
    axes = node.params["axes"]
    if not node.params["keepdim"]:
        extreme = B.expand_dims(extreme, axis=axes)
    hit = B.astype(x == extreme, x.dtype)
    return Tensor._make(hit / B.sum(hit, axis=axes, keepdims=True), names, B)


def _extreme(t: Tensor, dim, keepdim: bool, largest: bool, op: str) -> Tensor:
    axes, names, keepdim = _plan(t, dim, keepdim, op)
    nonempty(t, axes, op)
    ordered(t, op)
    return apply(_Amax if largest else _Amin, (t,), names, axes=axes, keepdim=keepdim, largest=largest)


def amax(t: Tensor, dim: Dims = None, keepdim: bool = False,
         *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Largest value over ``dim`` (a name, an int, a tuple, or ``None`` for all); the gradient
    is split evenly among ties."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("amax", dim, axis, keepdim, keepdims)
    return _extreme(t, dim, keepdim, True, "amax")


def amin(t: Tensor, dim: Dims = None, keepdim: bool = False,
         *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Smallest value over ``dim``; the gradient is split evenly among ties."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("amin", dim, axis, keepdim, keepdims)
    return _extreme(t, dim, keepdim, False, "amin")


def _extreme_along(t: Tensor, dim, keepdim: bool, largest: bool, op: str) -> ValuesIndices:
    keepdim = flag(keepdim, "keepdim", op)
    ax = _one_axis(t, dim, op)
    nonempty(t, (ax,), op)
    ordered(t, op)
    at = apply(_Argmax, (t,), t._names, axis=ax, keepdim=True, largest=largest)
    values = gather(t, ax, at)  # its gradient goes to the selected entry only
    if keepdim:
        return ValuesIndices(values, at)
    return ValuesIndices(squeeze(values, ax), squeeze(at, ax))


def max(t: Tensor, dim: Union[Dim, Tensor, None] = None,
        keepdim: bool = False, *, axis: Dims = None, keepdims: Optional[bool] = None) -> Union[Tensor, ValuesIndices]:
    """``t.max()``: the largest value (a 0-dim tensor; ties share the gradient).
    ``t.max(dim)``: ``(values, indices)`` along one dim (the gradient goes to the selected entry).
    ``t.max(other)``: elementwise :func:`maximum`."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("max", dim, axis, keepdim, keepdims)
    if isinstance(dim, Tensor):
        return maximum(t, dim)
    if dim is None:
        return _extreme(t, None, keepdim, True, "max")
    return _extreme_along(t, dim, keepdim, True, "max")


def min(t: Tensor, dim: Union[Dim, Tensor, None] = None,
        keepdim: bool = False, *, axis: Dims = None, keepdims: Optional[bool] = None) -> Union[Tensor, ValuesIndices]:
    """Like :func:`max`, for the smallest value (``t.min(other)`` is :func:`minimum`)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("min", dim, axis, keepdim, keepdims)
    if isinstance(dim, Tensor):
        return minimum(t, dim)
    if dim is None:
        return _extreme(t, None, keepdim, False, "min")
    return _extreme_along(t, dim, keepdim, False, "min")


class _Argmax(Op):
    name = "argmax"
    differentiable = False

    @staticmethod
    def forward(B, x, axis, keepdim, largest):
        if axis is None:
            out = (B.argmax if largest else B.argmin)(x)
            return B.reshape(out, (1,) * len(x.shape)) if keepdim else out
        return (B.argmax if largest else B.argmin)(x, axis=axis, keepdims=keepdim)


def _arg_extreme(t: Tensor, dim, keepdim: bool, largest: bool, op: str) -> Tensor:
    ordered(t, op)
    if dim is None:
        keepdim = flag(keepdim, "keepdim", op)
        nonempty(t, range(t.ndim), op)
        names = t._names if keepdim else ()
        return apply(_Argmax, (t,), names, axis=None, keepdim=keepdim, largest=largest)
    ax = _one_axis(t, dim, op)
    _, names, keepdim = _plan(t, dim, keepdim, op)
    nonempty(t, (ax,), op)
    return apply(_Argmax, (t,), names, axis=ax, keepdim=keepdim, largest=largest)


def argmax(t: Tensor, dim: Dims = None, keepdim: bool = False,
           *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Index (int64) of the largest value along ``dim``; ``dim=None`` gives the index into the
    flattened tensor.  The first one wins among ties.  No gradient."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("argmax", dim, axis, keepdim, keepdims)
    return _arg_extreme(t, dim, keepdim, True, "argmax")


def argmin(t: Tensor, dim: Dims = None, keepdim: bool = False,
           *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Index (int64) of the smallest value along ``dim`` (``None``: into the flattened tensor)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("argmin", dim, axis, keepdim, keepdims)
    return _arg_extreme(t, dim, keepdim, False, "argmin")


# ----------------------------------------------------------------------------- var, std


class _Var(Op):
    name = "var"
    saves = (0,)

    @staticmethod
    def forward(B, x, axes, keepdim, correction):
        return B.var(x, axis=axes, keepdims=keepdim, correction=correction)

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        axes = node.params["axes"]
        dof = math.prod(node.in_shapes[0][a] for a in axes) - node.params["correction"]
        scale = 2.0 / dof if dof > 0 else math.nan
        return (_expand_back(g, node) * (x - x.mean(axes, keepdim=True)) * scale,)


def _correction(unbiased: Optional[bool], correction, op: str):
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}: give correction= or unbiased=, not both.")
    if unbiased is not None:
        return 1 if flag(unbiased, "unbiased", op) else 0
    if correction is None:
        return 1
    if isinstance(correction, bool) or not isinstance(correction, numbers.Real):
        raise TypeError(f"{op}: correction must be a number, got {type(correction).__name__} {correction!r}.")
    return correction


def _variance(t: Tensor, dim: Dims, unbiased: Optional[bool], keepdim: bool, correction, op: str) -> Tensor:
    c = _correction(unbiased, correction, op)
    axes, names, keepdim = _plan(t, dim, keepdim, op)
    return apply(_Var, (as_float_tensor(t),), names, axes=axes, keepdim=keepdim, correction=c)


def var(t: Tensor, dim: Dims = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
        correction: Optional[float] = None, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Variance over ``dim``, dividing by ``N - correction`` (default 1, Bessel's correction;
    ``unbiased=False`` means ``correction=0``).  Integer tensors are computed in float64."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("var", dim, axis, keepdim, keepdims)
    return _variance(t, dim, unbiased, keepdim, correction, "var")


def std(t: Tensor, dim: Dims = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
        correction: Optional[float] = None, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Standard deviation over ``dim``: ``var(...).sqrt()`` with the same arguments."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("std", dim, axis, keepdim, keepdims)
    return _variance(t, dim, unbiased, keepdim, correction, "std").sqrt()


def var_mean(t: Tensor, dim: Dims = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
             correction: Optional[float] = None, axis: Dims = None,
             keepdims: Optional[bool] = None) -> Tuple[Tensor, Tensor]:
    """``(var, mean)`` over ``dim``, with :func:`var`'s arguments (a tuple, as in PyTorch)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("var_mean", dim, axis, keepdim, keepdims)
    return _variance(t, dim, unbiased, keepdim, correction, "var_mean"), mean(t, dim, keepdim)


def std_mean(t: Tensor, dim: Dims = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
             correction: Optional[float] = None, axis: Dims = None,
             keepdims: Optional[bool] = None) -> Tuple[Tensor, Tensor]:
    """``(std, mean)`` over ``dim``, with :func:`std`'s arguments (a tuple, as in PyTorch)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("std_mean", dim, axis, keepdim, keepdims)
    return _variance(t, dim, unbiased, keepdim, correction, "std_mean").sqrt(), mean(t, dim, keepdim)


# ----------------------------------------------------------------------------- logsumexp, norm


class _LogSumExp(Op):
    name = "logsumexp"
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x, axes, keepdim):
        m = B.max(x, axis=axes, keepdims=True)
        # an all -inf (or +inf) slice would give inf - inf; shifting it by 0 gives -inf (inf) as it should
        m = B.where(B.isfinite(m), m, B.zeros_like(m))
        out = B.log(B.sum(B.exp(x - m), axis=axes, keepdims=True)) + m
        return out if keepdim else B.squeeze(out, axis=axes)

    @staticmethod
    def backward(node, g):
        x, y = node.saved_tensors()
        return (_expand_back(g, node) * (x - _kept(y, node)).exp(),)


def logsumexp(t: Tensor, dim: Dims = None, keepdim: bool = False,
              *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """``log(sum(exp(t)))`` over ``dim``, computed without overflow (``None``: all dims)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("logsumexp", dim, axis, keepdim, keepdims)
    axes, names, keepdim = _plan(t, dim, keepdim, "logsumexp")
    nonempty(t, axes, "logsumexp")
    return apply(_LogSumExp, (as_float_tensor(t),), names, axes=axes, keepdim=keepdim)


class _Norm(Op):
    name = "norm"
    saves = (0,)
    saves_output = True

    @staticmethod
    def forward(B, x, axes, keepdim, p):
        if p == 2:
            return B.sqrt(B.sum(x * x, axis=axes, keepdims=keepdim))
        a = B.abs(x)
        if p == 1:
            return B.sum(a, axis=axes, keepdims=keepdim)
        if p == math.inf:
            return B.max(a, axis=axes, keepdims=keepdim)
        if p == -math.inf:
            return B.min(a, axis=axes, keepdims=keepdim)
        if p == 0:
            return B.sum(B.astype(a != 0, x.dtype), axis=axes, keepdims=keepdim)
        return B.sum(a ** p, axis=axes, keepdims=keepdim) ** (1.0 / p)

    @staticmethod
    def backward(node, g):
        x, y = node.saved_tensors()
        p = node.params["p"]
        g = _expand_back(g, node)
        if p == 0:
            return (g * 0,)
        if p == 1:
            return (g * x.sign(),)
        if p in (math.inf, -math.inf):
            return (g * x.sign() * _tie_weights(node, node.B.abs(x._data), y._data, x._names),)
        y = _kept(y, node)
        if p == 2:
            # where the norm is 0 the whole slice is 0, so the subgradient 0 comes out by itself
            return (g * x / where(y > 0, y, 1),)
        nonzero = x != 0
        power = where(nonzero, where(nonzero, x.abs(), 1) ** (p - 1), 0)
        return (g * x.sign() * power / where(y > 0, y, 1) ** (p - 1),)


def norm(t: Tensor, p: Union[float, str] = 2, dim: Dims = None, keepdim: bool = False,
         *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Vector ``p``-norm over ``dim`` (``None``: all dims): ``p`` is 2 (default, also ``"fro"``), 1,
    ``inf`` (largest ``|x|``), ``-inf`` (smallest), 0 (count of non-zeros) or any other number.
    The gradient of the 2-norm at 0 is 0.  A complex tensor's norm is real: that of ``|t|``."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("norm", dim, axis, keepdim, keepdims)
    if p == "fro":
        p = 2
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        hint = f" To give the dim, write norm(dim={p!r})." if isinstance(p, (str, tuple, list)) else ""
        raise ValueError(f"norm: p must be a number (2, 1, inf, -inf, 0, ...) or 'fro', got {p!r}.{hint}")
    axes, names, keepdim = _plan(t, dim, keepdim, "norm")
    if p in (math.inf, -math.inf):
        nonempty(t, axes, "norm")
    if t.dtype.kind == "c":
        t = t.abs()  # a complex norm is the norm of the absolute values, real, as PyTorch's (abs carries the gradient)
    return apply(_Norm, (as_float_tensor(t),), names, axes=axes, keepdim=keepdim, p=float(p))


_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` ``(..., P, M)`` and each row of ``x2``
    ``(..., R, M)``: ``(..., P, R)``, named by the batch dims (unified, rule 2) and the two row dims
    (whose names must differ); the feature dims must have the same name where both have one.

    ``p`` is any number >= 0 or ``inf``, as in PyTorch, and the gradient at a distance of 0 is 0.
    The distances are always computed from the differences (``compute_mode`` is accepted for
    PyTorch compatibility: the matrix-product shortcut would only lose precision), which takes
    ``(..., P, R, M)`` memory."""
    tensor_arg(x1, "cdist", "x1")
    tensor_arg(x2, "cdist", "x2")
    names = _names.cdist(x1._names, x2._names, "cdist")
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"cdist: compute_mode must be one of {_COMPUTE_MODES}, got {compute_mode!r}.")
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not p >= 0:
        raise ValueError(f"cdist: p must be a number >= 0 (or inf), got {p!r}.")
    if x1.dtype.kind != "f" or x1.dtype != x2.dtype:
        raise TypeError(f"cdist: x1 and x2 must be floating-point tensors of one dtype, got {x1.dtype!r} and "
                        f"{x2.dtype!r}.")
    s1, s2 = x1.shape, x2.shape
    batch_ok = builtins.all(a == b or 1 in (a, b) for a, b in zip(s1[-3::-1], s2[-3::-1]))
    if s1[-1] != s2[-1] or not batch_ok:
        raise ValueError(
            f"cdist: shapes {s1} and {s2} do not fit (..., P, M) and (..., R, M): the feature sizes must be equal "
            "and the batch dims must broadcast."
        )
    rows = unsqueeze(with_names(x1, _names.unnamed(x1.ndim)), -2)
    cols = unsqueeze(with_names(x2, _names.unnamed(x2.ndim)), -3)
    return with_names(norm(rows - cols, p, -1), names)


def equal(a: Tensor, b: Tensor) -> bool:
    """PyTorch's ``torch.equal``: True when ``a`` and ``b`` have the same shape and the same values
    (NaN is never equal to itself; dtypes may differ).  Their names must line up as rule 2 lets
    them broadcast (equal, or ``None`` on one side); names that do not give False."""
    tensor_arg(a, "equal", "a")
    tensor_arg(b, "equal", "b")
    if a._B is not b._B:
        _common_backend("equal", a, b)
    if a.shape != b.shape or not _names.unifiable(a._names, b._names):
        return False
    return bool(all(eq(a, b)))


# ----------------------------------------------------------------------------- any, all


class _Any(Op):
    name = "any"
    differentiable = False

    @staticmethod
    def forward(B, x, axes, keepdim, every):
        return (B.all if every else B.any)(x, axis=axes, keepdims=keepdim)


def any(t: Tensor, dim: Dims = None, keepdim: bool = False,
        *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Whether any entry over ``dim`` is non-zero (bool; no gradient)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("any", dim, axis, keepdim, keepdims)
    axes, names, keepdim = _plan(t, dim, keepdim, "any")
    return apply(_Any, (t,), names, axes=axes, keepdim=keepdim, every=False)


def all(t: Tensor, dim: Dims = None, keepdim: bool = False,
        *, axis: Dims = None, keepdims: Optional[bool] = None) -> Tensor:
    """Whether every entry over ``dim`` is non-zero (bool; no gradient)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_spelling("all", dim, axis, keepdim, keepdims)
    axes, names, keepdim = _plan(t, dim, keepdim, "all")
    return apply(_Any, (t,), names, axes=axes, keepdim=keepdim, every=True)


# ----------------------------------------------------------------------------- softmax


class _Softmax(Op):
    """Softmax (``log``: log-softmax) along ``axis``: the backend's hook (a fused kernel on the GPU).
    The backward is the hook's too when no graph is recorded, else tensor ops (differentiable again)."""

    name = "softmax"
    saves_output = True

    @staticmethod
    def forward(B, x, axis, log):
        if x.shape[axis] == 0:  # nothing to normalise: an empty result, as in PyTorch (no kernel sees it)
            return B.zeros(x.shape, dtype=x.dtype)
        return B.softmax(x, axis, log)

    @staticmethod
    def backward(node, g):
        (y,) = node.saved_tensors()
        axis, log = node.params["axis"], node.params["log"]
        if not is_grad_enabled() and node.in_shapes[0][axis]:
            B = node.B
            return (Tensor._make(B.softmax_backward(y._data, g._data, axis, log), node.in_names[0], B),)
        if log:
            return (g - y.exp() * g.sum(axis, keepdim=True),)
        return (y * (g - (g * y).sum(axis, keepdim=True)),)


class _LogSoftmax(_Softmax):
    name = "log_softmax"


def softmax(t: Tensor, dim: Optional[Dim] = None, *, axis: Optional[Dim] = None) -> Tensor:
    """``exp(t) / sum(exp(t))`` along ``dim`` (a name or an int), without overflow; keeps the names."""
    dim = one_dim("softmax", dim, axis)
    ax = _names.axis(t._names, dim, "softmax")
    return apply(_Softmax, (as_float_tensor(t),), t._names, axis=ax, log=False)


def log_softmax(t: Tensor, dim: Optional[Dim] = None, *, axis: Optional[Dim] = None) -> Tensor:
    """``log(softmax(t, dim))`` computed directly (accurate for very negative logits); keeps the names."""
    dim = one_dim("log_softmax", dim, axis)
    ax = _names.axis(t._names, dim, "log_softmax")
    return apply(_LogSoftmax, (as_float_tensor(t),), t._names, axis=ax, log=True)


METHODS = {
    "sum": sum, "mean": mean, "prod": prod, "max": max, "min": min, "amax": amax, "amin": amin,
    "argmax": argmax, "argmin": argmin, "std": std, "var": var, "logsumexp": logsumexp, "norm": norm,
    "any": any, "all": all, "cumsum": cumsum, "cumprod": cumprod, "softmax": softmax, "log_softmax": log_softmax,
    "equal": equal,
}
