"""Normalisation over named dims: ``layer_norm`` and ``rms_norm``, each one op on raw arrays.

Name rule: the output keeps the input's names.  ``dims`` (a name, an int, or a tuple of them) are
the dims normalised over (:func:`~namedtensor._names.normalized`); the weight and bias have exactly
those dims, matched to them by name in any order (dim by dim, in the input's order, where a name is
``None``: :func:`~namedtensor._names.match`), so ``("embed",)`` works wherever ``"embed"`` sits.

The forward keeps only the per-row statistics (mean and inverse standard deviation), as PyTorch
does.  The input's gradient ``rstd (u - mean(u) - xhat mean(u xhat))`` with ``u = g w`` is made from
them and the saved input on raw arrays when no graph of the gradient is wanted, and with
differentiable tensor ops otherwise (for gradients of gradients).  When the normalised dims are the
last ones of a row-major input (the usual case: ``embed`` last), the input is a matrix of rows and
the forward and that raw backward are the backend's fused row kernels (``B.norm_rows``,
``B.norm_rows_backward``), or those of the ``rows`` param when it is given (nt.compile's Numba
kernels).  Otherwise they are steps on whole arrays, whose per-row sums of products
(the variance, ``mean(u xhat)``) are einsums when the normalised dims are the last ones: one pass,
no temporary.

At the end: ``add+layer_norm`` and ``add+rms_norm``, a residual add and the norm of its sum as one op,
which nt.compile makes of the two (not a public function).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Hashable, NamedTuple, Optional, Sequence, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply, is_grad_enabled
from ..tensor import Tensor
from ._common import inverse_permutation, row_hooks, tensor_arg, with_names
from ._fused import into, require_floating, same_dtype
from .naming import _permute
from .shape import _reshape

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

#: the machine epsilon of each floating dtype: PyTorch's rms_norm eps when eps is None
_EPSILON = {_dtypes.float16: 2.0 ** -10, _dtypes.float32: 2.0 ** -23, _dtypes.float64: 2.0 ** -52}


class _Plan(NamedTuple):
    """How a normalisation runs on an input of one shape."""

    axes: Tuple[int, ...]  # normalised (sorted)
    others: Tuple[int, ...]  # the rest
    n: int  # elements normalised together
    keep: Tuple[int, ...]  # the input's shape with 1 at the normalised axes
    rows: Optional[str]  # einsum summing a product over the normalised axes, when they are the last ones
    wperm: Optional[Tuple[int, ...]]  # the weight's dims in the input's order (None: they are)
    bperm: Optional[Tuple[int, ...]]
    bshape: Tuple[int, ...]  # a parameter's shape to broadcast against the input


@lru_cache(maxsize=256)
def _rows(ndim: int, axes: Tuple[int, ...]) -> Optional[str]:
    # einsum is one pass without a temporary, but NumPy's optimised einsum is only fast (not
    # transposing) when the summed axes are the last ones
    if axes != tuple(range(ndim - len(axes), ndim)):
        return None
    full = _LETTERS[:ndim]
    return f"{full},{full}->{full[: ndim - len(axes)]}"


def _is_size(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _norm_dims(op: str, x: Tensor, normalized_shape: Any, dim: Hashable) -> Hashable:
    """The dims to normalise over, as :func:`_plan` takes them: ``dim``, names given in
    ``normalized_shape``'s place, or the last dims, of PyTorch's sizes ``normalized_shape``."""
    tensor_arg(x, op, "the input")
    usage = (f"{op}(x, normalized_shape) takes PyTorch's sizes of the last dims (e.g. {op}(x, x.shape[-1:])); "
             f"dims by name are given with dim= (e.g. {op}(x, dim='embed'))")
    shape = normalized_shape
    if isinstance(shape, list):
        shape = tuple(shape)
    if dim is None and (isinstance(shape, str) or (isinstance(shape, tuple) and all(isinstance(n, str) for n in shape))):
        return shape  # a name is never a size: the named call with the dims in normalized_shape's place
    if shape is None:
        if dim is None:
            raise TypeError(f"{op}: no dims to normalise over. {usage}.")
        return dim
    sizes = (shape,) if _is_size(shape) else shape
    if not isinstance(sizes, tuple) or not all(_is_size(s) for s in sizes):
        raise TypeError(f"{op}: normalized_shape must be sizes (an int or a tuple of ints) or dim names, got "
                        f"{normalized_shape!r}. {usage}.")
    if dim is not None:
        axes, _ = _names.normalized(x._names, _names.hashable_dims(dim), op)
        got = tuple(x.shape[a] for a in axes)
        if got != sizes:
            raise ValueError(f"{op}: normalized_shape {sizes} are not the sizes {got} of the dims {dim!r} given by "
                             f"dim= (input names {_names.fmt(x._names)}, shape {x.shape}).")
        return dim
    if len(sizes) > x.ndim or tuple(x.shape[x.ndim - len(sizes):]) != sizes:
        raise ValueError(f"{op}: normalized_shape {sizes} are the sizes of the last dims in PyTorch's call, but the "
                         f"input has shape {x.shape} (names {_names.fmt(x._names)}). {usage}.")
    return tuple(range(-len(sizes), 0))


def _plan(op: str, x: Tensor, dims, weight: Optional[Tensor], bias: Optional[Tensor]) -> _Plan:
    tensor_arg(x, op, "the input")
    axes, norm_names = _names.normalized(x._names, _names.hashable_dims(dims), op)
    require_floating(x, op, "the input")
    shape = tuple(x._data.shape)
    sizes = tuple(shape[a] for a in axes)
    wanted = f"the names of the normalised dims of the input {_names.fmt(x._names)},"
    perms = []
    for p, what in ((weight, "the weight"), (bias, "the bias")):
        if p is None:
            perms.append(None)
            continue
        tensor_arg(p, op, what)
        if p.ndim != len(axes):
            raise ValueError(
                f"{op}: {what} has {p.ndim} dims (names {_names.fmt(p._names)}) but {len(axes)} dims are "
                f"normalised: {_names.fmt(norm_names)} of the input {_names.fmt(x._names)}."
            )
        perm = _names.match(norm_names, p._names, op, what, wanted)
        psizes = tuple(p._data.shape) if perm is None else tuple(p._data.shape[i] for i in perm)
        if psizes != sizes:
            raise ValueError(
                f"{op}: {what} has shape {p.shape} (names {_names.fmt(p._names)}), but the normalised dims "
                f"{_names.fmt(norm_names)} of the input have sizes {sizes}."
            )
        same_dtype(x, p, op, what)
        perms.append(perm)
    rows = _rows(len(shape), axes)
    keep = tuple(1 if i in axes else s for i, s in enumerate(shape))
    bshape = tuple(s if i in axes else 1 for i, s in enumerate(shape))
    others = tuple(i for i in range(len(shape)) if i not in axes)
    return _Plan(axes, others, math.prod(sizes), keep, rows, perms[0], perms[1], bshape)


# ----------------------------------------------------------------------------- raw steps


def _fused(B, x, plan: _Plan) -> bool:
    """Whether the backend's row kernels run this normalisation of the raw input ``x``: the normalised
    axes are the last ones and ``x`` is row-major, so it is a matrix of rows of ``plan.n`` elements."""
    return plan.rows is not None and B.row_major(x)


def _row_raw(B, w, perm, plan: _Plan):
    """A parameter's raw array as one row of the input's matrix (None stays None)."""
    if w is None:
        return None
    if perm is not None:
        w = B.permute_dims(w, perm)
    return B.reshape(w, (plan.n,))


def _unrow_raw(B, a, perm, plan: _Plan, names) -> Optional[Tensor]:
    """A parameter's gradient from a row of the input's matrix, laid out as the parameter (None stays None)."""
    if a is None:
        return None
    if len(plan.axes) > 1:
        a = B.reshape(a, tuple(plan.bshape[i] for i in plan.axes))
    if perm is not None:
        a = B.permute_dims(a, inverse_permutation(perm))
    return Tensor._make(a, names, B)


def _row_mean(B, a, b, plan: _Plan):
    """``mean(a * b)`` over the normalised axes, kept as size 1."""
    if plan.rows is None:
        return B.mean(B.multiply(a, b), axis=plan.axes, keepdims=True)
    return B.reshape(B.einsum(plan.rows, a, b), plan.keep) / plan.n


def _aligned_raw(B, w, perm, plan: _Plan):
    """A parameter's raw array laid out to broadcast against the input."""
    if perm is not None:
        w = B.permute_dims(w, perm)
    return B.reshape(w, plan.bshape)


def _param_raw(B, a, perm, plan: _Plan, names) -> Tensor:
    """A parameter's gradient: ``a`` (the input's layout) summed over the other axes, laid out as the parameter."""
    if plan.others:
        a = B.sum(a, axis=plan.others)
    if perm is not None:
        a = B.permute_dims(a, inverse_permutation(perm))
    return Tensor._make(a, names, B)


def _slots(node, at: Tuple[int, ...] = (0, 1, 2)):
    """``(wants, names)``: whether the input, the weight and the bias want gradients, and their names,
    from their positions ``at`` among the node's inputs (rms_norm has no bias: it wants none)."""
    wants = tuple(i < len(node.edges) and node.edges[i] is not None for i in at) + (False,) * (3 - len(at))
    names = tuple(node.in_names[i] for i in at) + (None,) * (3 - len(at))
    return wants, names


def _grads_raw(node, g: Tensor, x: Tensor, w: Optional[Tensor], mu, rstd, centered: bool, slots, g_add=None):
    """The input's, the weight's and (``centered``: layer_norm) the bias's gradients on raw arrays, from
    the forward's statistics ``mu`` (None for RMS) and ``rstd``: by the backend's row kernels where they
    ran the forward, else from the normalised input ``xhat`` (a temporary, which becomes the input's
    gradient) as ``rstd (u - mean(u) - xhat mean(u xhat))`` with ``u = g w`` (without ``mean(u)`` for RMS).
    ``slots``: :func:`_slots`; ``g_add`` (a tensor or None) is added to the input's gradient, which is
    then always computed."""
    B, plan = node.B, node.params["plan"]
    wants, names = slots
    if _fused(B, x._data, plan):
        rows = (math.prod(plan.keep),)
        hooks = row_hooks(B, node.params.get("rows"))
        stats = (None if mu is None else B.reshape(mu, rows), B.reshape(rstd, rows),
                 _row_raw(B, None if w is None else w._data, plan.wperm, plan), g._data)
        if g_add is None:
            gx, gw, gb = hooks.norm_rows_backward(x._data, plan.n, *stats, *wants)
        else:
            gx, gw, gb = hooks.add_norm_rows_backward(x._data, plan.n, *stats, g_add._data, *wants[1:])
        if gx is not None:
            gx = Tensor._make(gx, names[0], B)
        grads = (gx, _unrow_raw(B, gw, plan.wperm, plan, names[1]))
        return (*grads, _unrow_raw(B, gb, plan.bperm, plan, names[2])) if centered else grads
    xhat = into(B, "multiply", x._data - mu, rstd) if centered else B.multiply(x._data, rstd)
    gd = g._data
    gx = gw = None
    if wants[1]:
        gw = _param_raw(B, B.multiply(gd, xhat), plan.wperm, plan, names[1])
    if wants[0] or g_add is not None:
        u = gd if w is None else B.multiply(gd, _aligned_raw(B, w._data, plan.wperm, plan))
        dx = into(B, "add", into(B, "multiply", xhat, -_row_mean(B, u, xhat, plan)), u)
        if centered:
            dx = into(B, "subtract", dx, B.mean(u, axis=plan.axes, keepdims=True))
        dx = into(B, "multiply", dx, rstd)
        if g_add is not None:
            dx = into(B, "add", dx, g_add._data)
        gx = Tensor._make(dx, names[0], B)
    if not centered:
        return gx, gw
    return gx, gw, _param(g, plan.bperm, plan, names[2]) if wants[2] else None


# ----------------------------------------------------------------------------- differentiable steps


def _aligned(w: Tensor, perm, plan: _Plan) -> Tensor:
    """:func:`_aligned_raw`, differentiably, unnamed (the gradient goes back to ``w`` with its names)."""
    w = with_names(w, _names.unnamed(w.ndim))
    if perm is not None:
        w = _permute(w, perm, w._names)
    return _reshape(w, plan.bshape, _names.unnamed(len(plan.bshape)))


def _param(t: Tensor, perm, plan: _Plan, names) -> Tensor:
    """Sum ``t`` (the input's layout) over the other axes and lay it out as the parameter."""
    if plan.others:
        t = t.sum(plan.others)
    t = with_names(t, _names.unnamed(t.ndim))
    if perm is not None:
        t = _permute(t, inverse_permutation(perm), t._names)
    return with_names(t, names)


def _grads(node, g: Tensor, x: Tensor, w: Optional[Tensor], centered: bool, slots):
    """The input's and the weight's gradients with tensor ops, the statistics recomputed from ``x``
    (``slots``: :func:`_slots`)."""
    plan = node.params["plan"]
    wants, names = slots
    axes = plan.axes
    xu = with_names(x, _names.unnamed(x.ndim))
    gu = with_names(g, _names.unnamed(g.ndim))
    if centered:
        xu = xu - xu.mean(axes, keepdim=True)
    rstd = ((xu * xu).mean(axes, keepdim=True) + node.params["eps"]).rsqrt()
    xhat = xu * rstd
    gx = gw = None
    if wants[1]:
        gw = _param(gu * xhat, plan.wperm, plan, names[1])
    if wants[0]:
        u = gu if w is None else gu * _aligned(w, plan.wperm, plan)
        inner = u - xhat * (u * xhat).mean(axes, keepdim=True)
        if centered:
            inner = inner - u.mean(axes, keepdim=True)
        gx = with_names(inner * rstd, names[0])
    return gx, gw


def _bias_grad(node, g: Tensor, slots) -> Optional[Tensor]:
    """layer_norm's bias's gradient with tensor ops (None unless wanted)."""
    wants, names = slots
    return _param(g, node.params["plan"].bperm, node.params["plan"], names[2]) if wants[2] else None


# ----------------------------------------------------------------------------- layer_norm


class _LayerNorm(Op):
    name = "layer_norm"
    saves = (0, 1)
    stashes = True
    row_kernels = True

    @staticmethod
    def forward(B, x, w, b, *, plan, eps, rows=None):
        if _fused(B, x, plan):
            y, mu, rstd = row_hooks(B, rows).norm_rows(x, plan.n, _row_raw(B, w, plan.wperm, plan),
                                      _row_raw(B, b, plan.bperm, plan), eps, True)
            return y, (B.reshape(mu, plan.keep), B.reshape(rstd, plan.keep))
        mu = B.mean(x, axis=plan.axes, keepdims=True)
        xc = x - mu
        rstd = 1 / B.sqrt(_row_mean(B, xc, xc, plan) + eps)
        y = into(B, "multiply", xc, rstd)
        if w is not None:
            y = into(B, "multiply", y, _aligned_raw(B, w, plan.wperm, plan))
        if b is not None:
            y = into(B, "add", y, _aligned_raw(B, b, plan.bperm, plan))
        return y, (mu, rstd)

    @staticmethod
    def backward(node, g):
        x, w = node.saved_tensors()
        slots = _slots(node)
        if not is_grad_enabled():
            return _grads_raw(node, g, x, w, *node.stash, True, slots)
        return (*_grads(node, g, x, w, True, slots), _bias_grad(node, g, slots))


def layer_norm(input: Tensor, normalized_shape: Union[int, Sequence[int], Hashable, None] = None,
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5, *,
               dim: Hashable = None) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over some dims of ``input``; keeps its names.

    PyTorch's call ``layer_norm(x, normalized_shape, weight, bias, eps)`` normalises over the last
    dims, whatever their names, which must have the sizes ``normalized_shape`` (an int or a tuple
    of ints, e.g. ``w.shape``).  The named call gives the dims with ``dim=`` (a name or a tuple of
    names, anywhere in x; ``normalized_shape``, if given too, must be their sizes); a name or a
    tuple of names in ``normalized_shape``'s place is read as ``dim=`` too, since it is never a
    size.  The mean and the (biased) variance are taken over those dims together.  ``weight`` and
    ``bias`` have exactly those dims, matched by name in any order (dim by dim where unnamed):

        layer_norm(x, (16,), w, b)              # PyTorch: the last dim, of size 16
        layer_norm(x, dim="embed", weight=w)    # x (batch, seq, embed); w named ("embed",)
    """
    dims = _norm_dims("layer_norm", input, normalized_shape, dim)
    plan = _plan("layer_norm", input, dims, weight, bias)
    return apply(_LayerNorm, (input, weight, bias), input._names, plan=plan, eps=float(eps))


# ----------------------------------------------------------------------------- rms_norm


class _RMSNorm(Op):
    name = "rms_norm"
    saves = (0, 1)
    stashes = True
    row_kernels = True

    @staticmethod
    def forward(B, x, w, *, plan, eps, rows=None):
        if _fused(B, x, plan):
            y, _, rstd = row_hooks(B, rows).norm_rows(x, plan.n, _row_raw(B, w, plan.wperm, plan), None, eps, False)
            return y, B.reshape(rstd, plan.keep)
        rstd = 1 / B.sqrt(_row_mean(B, x, x, plan) + eps)
        y = B.multiply(x, rstd)
        if w is not None:
            y = into(B, "multiply", y, _aligned_raw(B, w, plan.wperm, plan))
        return y, rstd

    @staticmethod
    def backward(node, g):
        x, w = node.saved_tensors()
        slots = _slots(node, (0, 1))
        if not is_grad_enabled():
            return _grads_raw(node, g, x, w, None, node.stash, False, slots)
        return _grads(node, g, x, w, False, slots)


def rms_norm(input: Tensor, normalized_shape: Union[int, Sequence[int], Hashable, None] = None,
             weight: Optional[Tensor] = None, eps: Optional[float] = None, *, dim: Hashable = None) -> Tensor:
    """``x / sqrt(mean(x ** 2) + eps) * weight`` over some dims of ``input``; keeps its names.

    ``normalized_shape``, ``dim`` and ``weight`` are as in :func:`layer_norm`.  ``eps=None`` (the
    default, as in PyTorch) is the machine epsilon of the input's dtype.
    """
    dims = _norm_dims("rms_norm", input, normalized_shape, dim)
    plan = _plan("rms_norm", input, dims, weight, None)
    if eps is None:
        eps = _EPSILON[input.dtype]
    return apply(_RMSNorm, (input, weight), input._names, plan=plan, eps=float(eps))


# ----------------------------------------------------------------------------- a residual add and its norm
#
# nt.compile joins ``h = x + r`` to the layer or RMS norm that reads ``h`` (compiler/passes.py,
# ``fuse_residual_norms``): one node returning both ``h`` and ``norm(h)``, whose forward normalises each
# row of the sum while it is in the cache and whose backward adds the gradient ``h`` gets from its other
# readers (the residual stream) to the norm's input gradient in the same pass.  The name rule is the
# add's and the norm's: the pass joins only an add of two operands with the output's names and shape, so
# both outputs have those names.


def _add_norm_forward(B, x, r, w, b, plan: _Plan, eps: float, rows, centered: bool):
    """``((h, y), (mean, rstd))``: ``h = x + r`` and its norm (``mean`` None for RMS)."""
    if _fused(B, x, plan) and B.row_major(r):
        h, y, mu, rstd = row_hooks(B, rows).add_norm_rows(
            x, r, plan.n, _row_raw(B, w, plan.wperm, plan), _row_raw(B, b, plan.bperm, plan), eps, centered)
        return (h, y), (None if mu is None else B.reshape(mu, plan.keep), B.reshape(rstd, plan.keep))
    h = B.add(x, r)
    if centered:
        y, stats = _LayerNorm.forward(B, h, w, b, plan=plan, eps=eps, rows=rows)
        return (h, y), stats
    y, rstd = _RMSNorm.forward(B, h, w, plan=plan, eps=eps, rows=rows)
    return (h, y), (None, rstd)


def _add_norm_backward(node, g_h: Tensor, g_y: Tensor, centered: bool) -> tuple:
    """The gradients of x, r, the weight (and the bias): x and r both get ``g_h`` plus the norm's input
    gradient."""
    w, h, _ = node.saved_tensors()
    wants, names = _slots(node, (0, 2, 3) if centered else (0, 2))
    slots = ((True,) + wants[1:], names)
    if not is_grad_enabled():
        grads = _grads_raw(node, g_y, h, w, *node.stash, centered, slots, g_add=g_h)
    else:
        gx, gw = _grads(node, g_y, h, w, centered, slots)
        grads = (gx + g_h, gw) + ((_bias_grad(node, g_y, slots),) if centered else ())
    gx = grads[0]
    return (gx if node.edges[0] is not None else None, gx if node.edges[1] is not None else None, *grads[1:])


class _AddLayerNorm(Op):
    name = "add+layer_norm"
    saves = (2,)
    saves_output = True
    stashes = True
    n_outputs = 2
    row_kernels = True

    @staticmethod
    def forward(B, x, r, w, b, *, plan, eps, rows=None):
        return _add_norm_forward(B, x, r, w, b, plan, eps, rows, True)

    @staticmethod
    def backward(node, g_h, g_y):
        return _add_norm_backward(node, g_h, g_y, True)


class _AddRMSNorm(_AddLayerNorm):
    name = "add+rms_norm"

    @staticmethod
    def forward(B, x, r, w, *, plan, eps, rows=None):
        return _add_norm_forward(B, x, r, w, None, plan, eps, rows, False)

    @staticmethod
    def backward(node, g_h, g_y):
        return _add_norm_backward(node, g_h, g_y, False)


# the Op classes, for graph rewrites (compiler/passes.py): the norm's own, and the one joining an add to it
layer_norm.op = _LayerNorm  # type: ignore[attr-defined]
layer_norm.after_add = _AddLayerNorm  # type: ignore[attr-defined]
rms_norm.op = _RMSNorm  # type: ignore[attr-defined]
rms_norm.after_add = _AddRMSNorm  # type: ignore[attr-defined]
