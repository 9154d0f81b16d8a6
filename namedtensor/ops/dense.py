"""Fused layers: ``linear``, ``embedding`` and ``dropout``, each one op on raw arrays.

Name rules (:mod:`namedtensor._names`):

* ``linear(x, weight, bias, dim=)`` (:func:`~namedtensor._names.linear`): the weight is named
  ``(out, in)``; x's ``dim`` (named ``in``, or unnamed) is contracted wherever it sits, and the output
  has x's names with that dim replaced, in place, by ``out`` (or by ``out_dim=``, e.g. to map
  ``"embed"`` to itself with a weight named ``("embed_out", "embed")``).  The bias is ``(out,)``.
* ``embedding(indices, weight, dim=vocab)`` (:func:`~namedtensor._names.embedding`): the indices'
  names plus the weight's other (embedding) name, last.
* ``dropout`` keeps the input's names.

``linear`` runs one BLAS matrix product whatever x's rank: x is viewed as a matrix (its dim last) or
as a stack of matrices (its dim inside), never copied.  Its gradients are again the two ops here
(``_Linear`` with the weight transposed for x, ``_WeightGrad`` for the weight), which are each
other's gradients, so gradients of any order run on the same kernels.  When no graph is recorded,
both are wanted (x contracted along its last axis) and the backend runs products side by side (the
NumPy backend's pool on two threads or more), the two products, independent and of equal work, run
so on raw arrays instead (``B.matmuls``: each gets its share of the threads).  ``embedding``'s gradient is a
scatter-add whose own gradient is ``embedding``; ``dropout``'s is the same mask again.
"""

from __future__ import annotations

import math
from typing import Hashable, Optional

from .. import _dtypes, _names
from ..autograd.graph import Op, apply, is_grad_enabled
from ..tensor import Tensor
from ._common import flag, has_values, tensor_arg, with_names, with_param
from ._fused import into, require_floating, same_dtype
from .inplace import edit

# ----------------------------------------------------------------------------- linear


class _Linear(Op):
    """``y = x W^T + b`` along x's axis ``ax``, where ``W`` is the weight, or its transpose when ``t``
    (the input gradient): the axis is contracted with W's second dim and replaced by W's first."""

    name = "linear"
    saves = (0, 1)

    @staticmethod
    def forward(B, x, w, b=None, *, ax, t):
        if t:
            w = B.permute_dims(w, (1, 0))
        shape = tuple(x.shape)
        n_in, n_out = shape[ax], w.shape[0]
        lead = math.prod(shape[:ax])
        if ax == len(shape) - 1:
            # (rows, in) @ (in, out): one matrix product, the transposed weight is a view
            x2, wt = B.reshape(x, (lead, n_in)), B.permute_dims(w, (1, 0))
            y = B.matmul(x2, wt) if b is None else B.addmm(b, x2, wt)
        else:
            # (out, in) @ (lead, in, rest): x's layout is kept, so the output needs no transpose either
            x3 = B.reshape(x, (lead, n_in, math.prod(shape[ax + 1 :])))
            y = B.matmul(w, x3) if b is None else B.addmm(B.reshape(b, (n_out, 1)), w, x3)
        return B.reshape(y, shape[:ax] + (n_out,) + shape[ax + 1 :])

    @staticmethod
    def backward(node, g):
        x, w = node.saved_tensors()
        ax, t = node.params["ax"], node.params["t"]
        if (not (is_grad_enabled() or t) and ax == g.ndim - 1 and node.edges[0] is not None
                and node.edges[1] is not None and node.B.products_side_by_side()):
            return _grads_side_by_side(node, g, x, w)
        gx = gw = None
        if node.edges[0] is not None:
            gx = apply(_Linear, (g, w), node.in_names[0], ax=ax, t=not t)
        if node.edges[1] is not None:
            gw = apply(_WeightGrad, (x, g) if t else (g, x), node.in_names[1], ax=ax)
        if len(node.edges) == 2:
            return gx, gw
        gb = None
        if node.edges[2] is not None:
            others = tuple(i for i in range(g.ndim) if i != ax)
            gb = with_names(g.sum(others) if others else g, node.in_names[2])
        return gx, gw, gb


def _grads_side_by_side(node, g: Tensor, x: Tensor, w: Tensor) -> tuple:
    """The input's, the weight's and the bias's gradients of ``y = x W^T + b`` along x's last axis on raw
    arrays, when no graph is recorded: the two products are independent and of equal work, and
    ``B.matmuls`` runs them side by side (the NumPy backend's pool gives each its share of threads), with
    the bias's sum beside them."""
    B = node.B
    n_out, n_in = w._data.shape
    g2 = B.reshape(g._data, (-1, n_out))
    bias = len(node.edges) == 3 and node.edges[2] is not None
    gx, gw, *gb = B.matmuls([(g2, w._data), (B.permute_dims(g2, (1, 0)), B.reshape(x._data, (-1, n_in)))],
                            (g2,) if bias else ())
    grads = (Tensor._make(B.reshape(gx, tuple(x._data.shape)), node.in_names[0], B), Tensor._make(gw, node.in_names[1], B))
    if len(node.edges) == 2:
        return grads
    return (*grads, Tensor._make(gb[0], node.in_names[2], B) if bias else None)


class _WeightGrad(Op):
    """``out[p, q] = sum of a[..., p, ...] * c[..., q, ...]`` over every axis but ``ax``: the weight
    gradient of a linear layer (``a`` the output gradient, ``c`` the input)."""

    name = "linear_weight_grad"
    saves = (0, 1)

    @staticmethod
    def forward(B, a, c, *, ax):
        shape = tuple(a.shape)
        p, q = shape[ax], c.shape[ax]
        lead = math.prod(shape[:ax])
        if ax == len(shape) - 1:
            return B.matmul(B.permute_dims(B.reshape(a, (lead, p)), (1, 0)), B.reshape(c, (lead, q)))
        rest = math.prod(shape[ax + 1 :])
        out = B.matmul(B.reshape(a, (lead, p, rest)), B.permute_dims(B.reshape(c, (lead, q, rest)), (0, 2, 1)))
        return B.reshape(out, (p, q)) if lead == 1 else B.sum(out, axis=0)

    @staticmethod
    def backward(node, gg):
        a, c = node.saved_tensors()
        ax = node.params["ax"]
        ga = apply(_Linear, (c, gg), node.in_names[0], ax=ax, t=False) if node.edges[0] is not None else None
        gc = apply(_Linear, (a, gg), node.in_names[1], ax=ax, t=True) if node.edges[1] is not None else None
        return ga, gc


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *, dim: Hashable = None,
           out_dim: Optional[str] = None) -> Tensor:
    """``x @ weight.T + bias`` along one dim of ``x``, by name: PyTorch's ``F.linear`` for named dims.

    ``weight`` is 2-D, named ``(out, in)``; ``dim`` (a name or an int; default: the weight's ``in``
    name if it has one, else x's last dim) is the dim of ``x`` contracted with ``in``, wherever it is.
    The output has x's names with ``dim`` replaced in place by ``out_dim`` (default: ``out``), e.g.

        linear(x, w, dim="embed")                       # x (batch, seq, embed), w (hidden, embed)
                                                        # -> (batch, seq, hidden)
        linear(x, w, b, dim="embed", out_dim="embed")   # w (embed_out, embed): embed -> embed

    ``bias`` is 1-D, named ``(out,)`` (or unnamed).  Parameters must have x's (float) dtype.
    """
    op = "linear"
    tensor_arg(x, op, "the input")
    tensor_arg(weight, op, "the weight")
    if bias is not None:
        tensor_arg(bias, op, "the bias")
    if weight.ndim != 2:
        raise ValueError(f"{op}: the weight must be 2-D (out, in), got names {_names.fmt(weight.names)} "
                         f"and shape {weight.shape}.")
    if bias is not None and bias.ndim != 1:
        raise ValueError(f"{op}: the bias must be 1-D (out,), got names {_names.fmt(bias.names)} "
                         f"and shape {bias.shape}.")
    if isinstance(dim, (list, tuple)):
        raise TypeError(f"{op}: dim must be one dim (a name or an int), got {dim!r}.")
    ax, names = _names.linear(x._names, weight._names, None if bias is None else bias._names, dim, out_dim, op)
    require_floating(x, op, "the input")
    same_dtype(x, weight, op, "the weight")
    same_dtype(x, bias, op, "the bias")
    n_out, n_in = weight._data.shape
    if x._data.shape[ax] != n_in:
        raise ValueError(
            f"{op}: the input's {_names._dim_label(x._names, ax)} has size {x._data.shape[ax]}, but the weight "
            f"{_names.fmt(weight._names)} of shape {weight.shape} expects {n_in} (input names "
            f"{_names.fmt(x._names)}, shape {x.shape})."
        )
    if bias is not None and bias._data.shape[0] != n_out:
        raise ValueError(f"{op}: the bias has size {bias._data.shape[0]}, but the weight {weight.shape} has {n_out} outputs.")
    inputs = (x, weight) if bias is None else (x, weight, bias)
    return apply(_Linear, inputs, names, ax=ax, t=False)


# ----------------------------------------------------------------------------- embedding


class _Embedding(Op):
    """Rows (or columns, ``wax`` 1) ``index`` of the weight, shaped ``ishape + (embed,)``; the gradient
    leaves the weight's row ``padding`` (None: none) at zero."""

    name = "embedding"

    @staticmethod
    def forward(B, w, *, index, ishape, wax, padding):
        rows = B.take(w, index, axis=wax)
        if wax == 1:
            rows = B.permute_dims(rows, (1, 0))
        return B.reshape(rows, ishape + (rows.shape[1],))

    @staticmethod
    def backward(node, g):
        return (apply(_EmbeddingGrad, (g,), node.in_names[0], wshape=tuple(node.in_shapes[0]), **node.params),)


def _padding_row(B, wshape: tuple, wax: int, padding: int, dtype):
    """A constant of ones broadcasting against the weight, 0 at its row ``padding`` along ``wax``."""
    n = wshape[wax]
    keep = B.astype(B.not_equal(B.arange(n), padding), dtype)
    return Tensor._make(B.reshape(keep, (n, 1) if wax == 0 else (1, n)), _names.unnamed(2), B)


class _EmbeddingGrad(Op):
    """The rows of ``g`` added into zeros of the weight's shape at ``index`` (repeats accumulate), the
    row ``padding`` left at zero."""

    name = "embedding_backward"

    @staticmethod
    def forward(B, g, *, index, ishape, wax, wshape, padding):
        rows, embed = wshape[wax], wshape[1 - wax]
        n = math.prod(ishape) * embed
        # a scatter into the flat weight, element by element: several times faster than row by row in NumPy
        flat = B.reshape(B.reshape(index, (-1, 1)) * embed + B.arange(embed, dtype=index.dtype), (n,))
        out = B.reshape(B.scatter_add((rows * embed,), None, flat, B.reshape(g, (n,))), (rows, embed))
        if padding is not None:
            B.setitem(out, (padding,), B.zeros((embed,), dtype=out.dtype))
        return B.permute_dims(out, (1, 0)) if wax == 1 else out

    @staticmethod
    def backward(node, gg):
        p = node.params
        if p["padding"] is not None:
            gg = gg * _padding_row(node.B, p["wshape"], p["wax"], p["padding"], gg._data.dtype)
        return (apply(_Embedding, (gg,), node.in_names[0], index=p["index"], ishape=p["ishape"], wax=p["wax"],
                      padding=p["padding"]),)


def embedding(input: Tensor, weight: Tensor, padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False, *,
              dim: Hashable = None) -> Tensor:
    """Look up ``weight``'s rows: ``out[..., :] = weight[input[...], :]``, PyTorch's ``F.embedding``.

    ``weight`` is 2-D, ``(vocab, embed)`` (named or not); ``dim`` (default: its first dim) is the one
    indexed.  ``input`` is an integer tensor with values in ``[0, size of dim)``; the output has its
    names plus the embedding name, last: ``(batch, seq)`` indices give ``(batch, seq, embed)``.
    ``padding_idx`` (negative counts from the end): that row gets no gradient.  ``max_norm``,
    ``scale_grad_by_freq`` and ``sparse`` are not supported and raise.
    """
    op = "embedding"
    indices = input
    tensor_arg(indices, op, "the indices")
    tensor_arg(weight, op, "the weight")
    for option, value, off in (("max_norm", max_norm, None), ("scale_grad_by_freq", scale_grad_by_freq, False),
                               ("sparse", sparse, False)):
        if value != off:
            raise NotImplementedError(f"{op}: {option}={value!r} is not supported; leave it at {off!r}.")
    if weight.ndim != 2:
        raise ValueError(f"{op}: the weight must be 2-D (vocab, embed), got names {_names.fmt(weight.names)} "
                         f"and shape {weight.shape}.")
    if isinstance(dim, (list, tuple)):
        raise TypeError(f"{op}: dim must be one dim of the weight (a name or an int), got {dim!r}.")
    wax, names = _names.embedding(indices._names, weight._names, dim, op)
    if indices.dtype.kind != "i":
        raise TypeError(f"{op}: the indices must be an integer tensor, got {indices.dtype!r}; use .long().")
    weight = with_param(op, weight, indices)
    B = weight._B
    index = B.reshape(indices.array, (indices.numel(),))
    if indices.dtype is not _dtypes.int64:  # int64 flat offsets in the gradient: no overflow
        index = B.astype(index, B.native(_dtypes.int64))
    n = weight._data.shape[wax]
    if padding_idx is not None:
        if isinstance(padding_idx, bool) or not isinstance(padding_idx, int) or not -n <= padding_idx < n:
            raise ValueError(f"{op}: padding_idx must be an int in [-{n}, {n}) for the weight's "
                             f"{_names._dim_label(weight._names, wax)} of size {n}, got {padding_idx!r}.")
        padding_idx %= n
    if indices.numel() and has_values(B):
        lo, hi = int(B.min(index, axis=None)), int(B.max(index, axis=None))
        if lo < 0 or hi >= n:
            raise IndexError(
                f"{op}: index {lo if lo < 0 else hi} is out of range for the weight's "
                f"{_names._dim_label(weight._names, wax)} of size {n} (weight names {_names.fmt(weight._names)}, "
                f"shape {weight.shape}); indices must be in [0, {n - 1}]."
            )
    return apply(_Embedding, (weight,), names, index=index, ishape=tuple(indices.shape), wax=wax,
                 padding=padding_idx)


# ----------------------------------------------------------------------------- dropout


class _Dropout(Op):
    """``x * keep * scale``: linear in x, so its gradient is the same op on the output gradient."""

    name = "dropout"

    @staticmethod
    def forward(B, x, *, keep, scale):
        return into(B, "multiply", B.multiply(x, keep), scale)

    @staticmethod
    def backward(node, g):
        return (apply(_Dropout, (g,), node.in_names[0], **node.params),)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; keeps names.

    ``p`` is in ``[0, 1]`` (``p == 1`` zeroes everything, as in PyTorch).  With ``p == 0`` or
    ``training=False`` it returns ``input`` itself.  ``inplace=True`` writes the result into
    ``input`` and returns it, recorded in the graph as any in-place op (refused, as in PyTorch, for a
    leaf that requires grad while grad mode is on).  The mask comes from the
    backend's random stream (``nt.manual_seed`` makes it reproducible).
    """
    op = "dropout"
    tensor_arg(input, op, "the input")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ValueError(f"{op}: p is the probability of zeroing an element, a number in [0, 1]; got {p!r}.")
    inplace = flag(inplace, "inplace", op)
    if p == 0 or not training:
        return input
    require_floating(input, op, "the input")
    B = input._B
    keep = B.rand(tuple(input._data.shape), input.dtype) >= p
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)  # PyTorch multiplies by 0: a nan stays nan
    if inplace:
        return edit(input, _dropped, op, keep, scale)
    return _dropped(input, keep, scale)


def _dropped(x: Tensor, keep, scale: float) -> Tensor:
    return apply(_Dropout, (x,), x._names, keep=keep, scale=scale)
