"""Losses with PyTorch's signatures: ``cross_entropy``, ``nll_loss`` and ``mse_loss``, each one op on raw
arrays, and the pointwise ``l1_loss smooth_l1_loss huber_loss binary_cross_entropy
binary_cross_entropy_with_logits kl_div`` (and class-weighted ``cross_entropy``/``nll_loss``), compositions
of tensor ops.

Name rules (:mod:`namedtensor._names`):

* ``cross_entropy(logits, target, dim)`` and ``nll_loss`` (:func:`~namedtensor._names.class_target`):
  ``dim`` is the logits' class dim.  Class indices (an integer target) have the logits' dims without
  the class dim, class probabilities (a float target, ``cross_entropy`` only) all of them; the target
  is matched to the logits by name, in any order (dim by dim where a name is ``None``).  With
  ``reduction="none"`` the loss has the target's dims (minus the class dim), in the target's order;
  ``"mean"`` and ``"sum"`` give a 0-dim tensor.
* ``cross_entropy`` and ``nll_loss`` without ``dim=`` take PyTorch's class dim, 1 (0 for 1-D logits),
  whatever its name.
* ``mse_loss(input, target)`` and the pointwise losses: the names of the input, the target and any
  weights unify (rule 2); ``"none"`` keeps the unified names.  (``mse_loss`` is one op eagerly; traced by
  ``nt.compile`` it is its composition, which fuses with the ops before it.)

The forward never materialises the log-probabilities: with ``lse`` the log-sum-exp over the class
dim, the loss of class index ``t`` is ``lse - x[t]``, and label smoothing ``e`` (PyTorch's
definition: the target is ``(1 - e) onehot + e / C``) adds ``e (lse - mean(x))``.  Only ``lse`` is
kept.  The gradient ``softmax(x) - target`` is made from ``x`` and ``lse`` in a few passes when no
graph of the gradient is wanted, and with differentiable tensor ops (``softmax``, :class:`_Place`)
otherwise, so gradients of any order are right.  Class indices without label smoothing, with the
class dim last in a row-major array (the usual layout), go through the backend's row hooks
``B.cross_entropy`` and ``B.cross_entropy_backward`` (fused kernels on the GPU, the same steps as
here on the CPU).
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Hashable, Optional, Tuple

from .. import _dtypes, _names
from ..autograd.graph import Op, apply, is_grad_enabled
from ..tensor import Tensor
from ._common import (has_values, inverse_permutation, sum_to, tensor_arg, traced_as_composition, with_names,
                      with_param)
from ._fused import into, reduction_arg, require_floating, same_dtype
from .elementwise import softplus, where
from .naming import _permute
from .shape import _reshape

# ----------------------------------------------------------------------------- picking classes


def _class_key(B, idx, ax: int) -> tuple:
    """The advanced index of the entries ``idx`` (x's shape with 1 at ``ax``) name along ``ax``."""
    key = []
    nd = len(idx.shape)
    for d in range(nd):
        if d == ax:
            key.append(B.reshape(idx, tuple(idx.shape[:ax]) + tuple(idx.shape[ax + 1 :])))
        else:
            at = [1] * (nd - 1)
            at[d if d < ax else d - 1] = idx.shape[d]
            key.append(B.reshape(B.arange(idx.shape[d]), tuple(at)))
    return tuple(key)


class _Pick(Op):
    """The entries ``idx`` along ``ax`` (``idx`` has x's shape with 1 at ``ax``)."""

    name = "pick"

    @staticmethod
    def forward(B, x, *, idx, ax, shape):
        return B.take_along_axis(x, idx, axis=ax)

    @staticmethod
    def backward(node, g):
        return (apply(_Place, (g,), node.in_names[0], **node.params),)


class _Place(Op):
    """Zeros of ``shape`` with ``v`` (broadcast to ``idx``'s shape) at the entries ``idx`` along ``ax``:
    :class:`_Pick`'s adjoint."""

    name = "place"

    @staticmethod
    def forward(B, v, *, idx, ax, shape):
        out = B.zeros(shape, dtype=v.dtype)
        B.setitem(out, _class_key(B, idx, ax), B.reshape(B.broadcast_to(v, tuple(idx.shape)), _squeezed(idx, ax)))
        return out

    @staticmethod
    def backward(node, gg):
        picked = apply(_Pick, (gg,), _names.unnamed(len(node.params["shape"])), **node.params)
        return (sum_to(picked, tuple(node.in_shapes[0]), node.in_names[0]),)


def _squeezed(idx, ax: int) -> tuple:
    return tuple(idx.shape[:ax]) + tuple(idx.shape[ax + 1 :])


def _place(v: Tensor, p: dict, shape) -> Tensor:
    return apply(_Place, (v,), _names.unnamed(len(shape)), idx=p["idx"], ax=p["ax"], shape=tuple(shape))


# ----------------------------------------------------------------------------- shared steps


def _logsumexp(B, x, ax: int):
    """``log(sum(exp(x)))`` over ``ax`` (kept as size 1), shifted by the max: one temporary."""
    m = B.max(x, axis=ax, keepdims=True)
    s = B.sum(into(B, "exp", x - m), axis=ax, keepdims=True)
    return m + B.log(s)


def _reduce(B, loss, p: dict):
    """The per-element loss (x's shape with 1 at the class axis) reduced as ``p["reduction"]`` says."""
    reduction = p["reduction"]
    if reduction == "none":
        ax = p["ax"]
        loss = B.reshape(loss, _squeezed(loss, ax))
        return loss if p["out_perm"] is None else B.permute_dims(loss, p["out_perm"])
    total = B.sum(loss, axis=None)
    if reduction == "sum":
        return total
    count = _count(B, p)
    return total / count if count else total * math.nan  # all ignored: nan, as in PyTorch


def _count(B, p: dict) -> int:
    """How many targets count: fixed by the shapes, or (``None``, where a dry run made the params, as
    ``nt.compile`` does) the valid targets of this call."""
    count = p["count"]
    if count is None:
        return int(B.sum(p["valid"], axis=None)) if has_values(B) else 1  # a dry run's result has no values
    return count


def _weights(node, g: Tensor) -> Tensor:
    """Each element's weight in the reduced loss, times the output gradient: an unnamed tensor of x's
    shape with 1 at the class axis (0-dim when it is the same everywhere); 0 where ignored."""
    p = node.params
    shape, ax = node.in_shapes[0], p["ax"]
    keep = tuple(shape[:ax]) + (1,) + tuple(shape[ax + 1 :])
    w = with_names(g, _names.unnamed(g.ndim))
    if p["reduction"] == "none":
        if p["out_perm"] is not None:
            w = _permute(w, inverse_permutation(p["out_perm"]), w._names)
        w = _reshape(w, keep, _names.unnamed(len(keep)))
    elif p["reduction"] == "mean":
        w = w / max(_count(node.B, p), 1)
    valid = p.get("valid")
    if valid is not None:
        B = node.B
        w = w * Tensor._make(B.astype(valid, g._data.dtype), _names.unnamed(len(keep)), B)
    return w


def _class_dim(logits: Tensor, dim: Hashable, op: str) -> int:
    if isinstance(dim, (list, tuple)):
        raise TypeError(f"{op}: dim is the logits' class dim, one name or int; got {dim!r}.")
    ax = _names.axis(logits._names, dim, op)
    if logits._data.shape[ax] == 0:
        raise ValueError(f"{op}: the class dim {_names._dim_label(logits._names, ax)} has no classes.")
    return ax


def _index_plan(op: str, logits: Tensor, target: Tensor, ax: int, ignore_index: Optional[int],
                reduction: str) -> tuple:
    """Check class indices against the logits; return the op's params, the output names and the
    target's raw array in the logits' dim order (ignored entries kept)."""
    if target.dtype.kind != "i":
        hint = (" (class indices are integers: use .long(); class probabilities have all the logits' dims)"
                if target.dtype.kind == "f" else "")
        raise TypeError(f"{op}: the target must be an integer tensor of class indices, got {target.dtype!r}{hint}.")
    if target.ndim != logits.ndim - 1:
        raise ValueError(
            f"{op}: class indices have the logits' dims without the class dim ({logits.ndim - 1} dims), but the "
            f"target has names {_names.fmt(target._names)} and shape {target.shape} (logits "
            f"{_names.fmt(logits._names)}, shape {logits.shape}, class dim {_names._dim_label(logits._names, ax)})."
        )
    perm, out_perm, out_names = _names.class_target(logits._names, ax, target._names, False, op)
    B = logits._B
    t = target.array
    if perm is not None:
        t = B.permute_dims(t, perm)
    shape = tuple(logits._data.shape)
    expected = shape[:ax] + shape[ax + 1 :]
    if tuple(t.shape) != expected:
        raise ValueError(
            f"{op}: the target's sizes {dict(zip(target._names, target.shape))} do not match the logits' "
            f"{dict(zip(logits._names, shape))} (logits shape {shape}, class dim {_names._dim_label(logits._names, ax)})."
        )
    raw = t
    valid = None
    count = math.prod(expected)
    checked = has_values(B)
    if ignore_index is not None:
        valid = t != ignore_index
        t = B.where(valid, t, 0)
        # counted now, or (a dry run, which nt.compile replays) by the forward of each call
        count = int(B.sum(valid, axis=None)) if checked else None
    n = shape[ax]
    if count and checked:
        lo, hi = int(B.min(t, axis=None)), int(B.max(t, axis=None))
        if lo < 0 or hi >= n:
            ignore = "" if ignore_index is None else f", or ignore_index={ignore_index}"
            raise IndexError(
                f"{op}: the target holds class index {lo if lo < 0 else hi}, out of range for the "
                f"{n} classes of the logits' {_names._dim_label(logits._names, ax)} (logits names "
                f"{_names.fmt(logits._names)}); class indices must be in [0, {n - 1}]{ignore}."
            )
    keep = shape[:ax] + (1,) + shape[ax + 1 :]
    params = {"ax": ax, "idx": B.reshape(t, keep), "valid": None if valid is None else B.reshape(valid, keep),
                  "count": count, "reduction": reduction, "out_perm": out_perm}
    return params, (out_names if reduction == "none" else ()), raw


# ----------------------------------------------------------------------------- cross_entropy


class _CrossEntropy(Op):
    """Cross-entropy of class indices ``idx``; stashes the log-sum-exp."""

    name = "cross_entropy"
    saves = (0,)
    stashes = True

    @staticmethod
    def forward(B, x, *, ax, idx, valid, count, reduction, out_perm, eps):
        lse = _logsumexp(B, x, ax)
        loss = lse - B.take_along_axis(x, idx, axis=ax)
        if eps:
            loss = (1 - eps) * loss + eps * (lse - B.mean(x, axis=ax, keepdims=True))
        if valid is not None:
            loss = B.where(valid, loss, 0)
        p = {"ax": ax, "count": count, "valid": valid, "reduction": reduction, "out_perm": out_perm}
        return _reduce(B, loss, p), lse

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        p = node.params
        ax, eps = p["ax"], p["eps"]
        n = node.in_shapes[0][ax]
        w = _weights(node, g)
        if not is_grad_enabled():
            # softmax(x) - target, from x and the stashed lse, in the fresh buffer of exp
            B = node.B
            G = into(B, "exp", x._data - node.stash)
            if eps:
                G = into(B, "subtract", G, eps / n)
            G = into(B, "multiply", G, w._data)
            key = _class_key(B, p["idx"], ax)
            picked = B.reshape(B.broadcast_to((1 - eps) * w._data, tuple(p["idx"].shape)), _squeezed(p["idx"], ax))
            B.setitem(G, key, B.getitem(G, key) - picked)
            return (Tensor._make(G, node.in_names[0], B),)
        probs = with_names(x, _names.unnamed(x.ndim)).softmax(ax)
        if eps:
            probs = probs - eps / n
        G = probs * w - _place(w * (1 - eps), p, node.in_shapes[0])
        return (with_names(G, node.in_names[0]),)


class _CrossEntropyRows(_CrossEntropy):
    """:class:`_CrossEntropy` without label smoothing, the class dim last in a row-major array: the
    logits are a matrix of rows, and the backend's row hooks (fused kernels on the GPU) compute the
    loss and, when no graph of the gradient is wanted, its gradient.  Stashes the log-sum-exp (rows,)."""

    @staticmethod
    def forward(B, x, *, ax, idx, valid, count, reduction, out_perm, eps, target, ignore):
        loss, lse = B.cross_entropy(x if ax == 1 else B.reshape(x, (-1, x.shape[ax])), target, ignore)
        if reduction == "none":
            loss = B.reshape(loss, tuple(idx.shape))
        p = {"ax": ax, "count": count, "valid": valid, "reduction": reduction, "out_perm": out_perm}
        return _reduce(B, loss, p), lse

    @staticmethod
    def backward(node, g):
        if is_grad_enabled():  # the differentiable path does not read the stash
            return _CrossEntropy.backward(node, g)
        (x,) = node.saved_tensors()
        B, p = node.B, node.params
        w = _weights(node, g)._data
        rows = B.reshape(B.broadcast_to(w, tuple(p["idx"].shape)), (-1,))
        x = x._data
        if p["ax"] != 1:  # more than one dim besides the classes: a matrix of rows
            shape = tuple(x.shape)
            G = B.cross_entropy_backward(B.reshape(x, (-1, shape[-1])), node.stash, p["target"], rows, p["ignore"])
            G = B.reshape(G, shape)
        else:
            G = B.cross_entropy_backward(x, node.stash, p["target"], rows, p["ignore"])
        return (Tensor._make(G, node.in_names[0], B),)


class _SoftCrossEntropy(Op):
    """Cross-entropy of class probabilities ``q`` (its dims in the logits' order after ``perm``);
    stashes the log-sum-exp and each row's total target mass."""

    name = "cross_entropy"
    saves = (0, 1)
    stashes = True

    @staticmethod
    def forward(B, x, q, *, ax, perm, count, reduction, out_perm, eps):
        if perm is not None:
            q = B.permute_dims(q, perm)
        lse = _logsumexp(B, x, ax)
        qx = B.sum(B.multiply(q, x), axis=ax, keepdims=True)
        mass = B.sum(q, axis=ax, keepdims=True)
        if eps:
            qx = (1 - eps) * qx + eps * B.mean(x, axis=ax, keepdims=True)
            mass = (1 - eps) * mass + eps
        p = {"ax": ax, "count": count, "reduction": reduction, "out_perm": out_perm}
        return _reduce(B, lse * mass - qx, p), (lse, mass)

    @staticmethod
    def backward(node, g):
        x, q = node.saved_tensors()
        p = node.params
        ax, eps, perm = p["ax"], p["eps"], p["perm"]
        n = node.in_shapes[0][ax]
        w = _weights(node, g)
        gx = gq = None
        if not is_grad_enabled():
            B = node.B
            lse, mass = node.stash
            qd = q._data if perm is None else B.permute_dims(q._data, perm)
            if node.edges[0] is not None:
                # (mass * softmax(x) - smoothed q) * w
                G = into(B, "multiply", into(B, "exp", x._data - lse), mass)
                G = into(B, "subtract", G, qd if not eps else (1 - eps) * qd)
                if eps:
                    G = into(B, "subtract", G, eps / n)
                gx = Tensor._make(into(B, "multiply", G, w._data), node.in_names[0], B)
            if node.edges[1] is not None:
                Gq = into(B, "multiply", x._data - lse, -(1 - eps) * w._data)
                if perm is not None:
                    Gq = B.permute_dims(Gq, inverse_permutation(perm))
                gq = Tensor._make(Gq, node.in_names[1], B)
            return gx, gq
        logp = with_names(x, _names.unnamed(x.ndim)).log_softmax(ax)
        qu = with_names(q, _names.unnamed(q.ndim))
        if perm is not None:
            qu = _permute(qu, perm, qu._names)
        if node.edges[0] is not None:
            qs = qu * (1 - eps) + eps / n if eps else qu
            gx = with_names((logp.exp() * qs.sum(ax, keepdim=True) - qs) * w, node.in_names[0])
        if node.edges[1] is not None:
            Gq = logp * (w * -(1 - eps))
            if perm is not None:
                Gq = _permute(Gq, inverse_permutation(perm), Gq._names)
            gq = with_names(Gq, node.in_names[1])
        return gx, gq


def _reduction(op: str, size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    """The reduction, from PyTorch's deprecated ``size_average`` and ``reduce`` when either is given."""
    for label, flag in (("size_average", size_average), ("reduce", reduce)):
        if flag is not None and not isinstance(flag, bool):
            raise TypeError(f"{op}: {label} is PyTorch's deprecated flag, a bool or None, got {flag!r}; give the "
                            f"reduction by keyword (e.g. {op}(input, target, reduction='sum')).")
    if size_average is not None or reduce is not None:  # PyTorch's legacy_get_string
        reduction = "none" if reduce is False else ("sum" if size_average is False else "mean")
    return reduction_arg(reduction, op)


def _class_args(op: str, logits: Tensor, weight, dim: Hashable) -> Tuple[int, Optional[Tensor]]:
    """The class axis and the class weight (None or a tensor): ``dim``, else PyTorch's class dim (1, or 0 for
    1-D logits).  A name in ``weight``'s place is the class dim: a weight is never a name."""
    if isinstance(weight, str):
        if dim is not None:
            raise TypeError(f"{op}: the class dim is given twice, as {weight!r} in weight's place and dim={dim!r}.")
        weight, dim = None, weight
    if weight is not None and not isinstance(weight, Tensor):
        raise TypeError(f"{op}: weight is PyTorch's class weight, a tensor of one weight per class, got "
                        f"{weight!r}; the class dim is given by name or int with dim= (e.g. {op}(x, t, dim=-1)).")
    if dim is None:
        if logits.ndim == 0:
            raise ValueError(f"{op}: the logits are 0-dim; they need a class dim.")
        dim = 1 if logits.ndim >= 2 else 0
    ax = _class_dim(logits, dim, op)
    if weight is not None:
        if weight.ndim != 1 or weight._data.shape[0] != logits._data.shape[ax]:
            raise ValueError(f"{op}: the class weight must be 1-D with one weight per class "
                             f"({logits._data.shape[ax]}), got names {_names.fmt(weight._names)} and shape "
                             f"{weight.shape}.")
        _names.match((logits._names[ax],), weight._names, op, "the class weight", "the class dim")
        same_dtype(logits, weight, op, "the class weight")
        if weight.requires_grad and is_grad_enabled():
            raise NotImplementedError(f"{op}: the class weight gets no gradient (as in PyTorch); pass "
                                      "weight.detach().")
    return ax, weight


def _class_weights(B, weight: Tensor, ax: int, ndim: int) -> Tensor:
    """The class weight as an unnamed constant broadcasting along the class axis."""
    shape = tuple(weight._data.shape[0] if d == ax else 1 for d in range(ndim))
    return Tensor._make(B.reshape(weight._data, shape), _names.unnamed(ndim), B)


def _weighted_indices(x: Tensor, weight: Tensor, params: dict, names, eps: float, log_softmax: bool) -> Tensor:
    """PyTorch's class-weighted loss of class indices, with tensor ops: ``(1 - eps)`` times the weighted
    negative log-likelihood plus ``eps / C`` times the weighted sum of the negative log-probabilities;
    "mean" divides by the total weight of the counted targets."""
    B = x._B
    shape, ax = tuple(x._data.shape), params["ax"]
    xu = with_names(x, _names.unnamed(x.ndim))
    logp = xu.log_softmax(ax) if log_softmax else xu
    idx, valid = params["idx"], params["valid"]
    ew = B.reshape(B.take(weight._data, B.reshape(idx, (-1,)), axis=0), tuple(idx.shape))
    if valid is not None:
        ew = B.where(valid, ew, B.zeros((), dtype=ew.dtype))
    ew = Tensor._make(ew, _names.unnamed(x.ndim), B)
    picked = apply(_Pick, (logp,), _names.unnamed(x.ndim), idx=idx, ax=ax, shape=shape)
    loss = picked * ew * -(1 - eps)
    if eps:
        smooth = (logp * _class_weights(B, weight, ax, x.ndim)).sum(ax, keepdim=True) * (-eps / shape[ax])
        if valid is not None:
            smooth = smooth * Tensor._make(B.astype(valid, x._data.dtype), _names.unnamed(x.ndim), B)
        loss = loss + smooth
    reduction = params["reduction"]
    if reduction == "mean":
        return with_names(loss.sum() / ew.sum(), ())
    if reduction == "sum":
        return with_names(loss.sum(), ())
    loss = _reshape(loss, _squeezed(loss._data, ax), _names.unnamed(x.ndim - 1))
    if params["out_perm"] is not None:
        loss = _permute(loss, params["out_perm"], loss._names)
    return with_names(loss, names)


def _weighted_probs(x: Tensor, q: Tensor, weight: Tensor, ax: int, perm, out_perm, names, eps: float,
                    reduction: str) -> Tensor:
    """PyTorch's class-weighted loss of class probabilities, with tensor ops: ``-sum(w q log_softmax(x))`` over
    the classes; "mean" divides by the number of elements without the class dim, as in PyTorch."""
    B = x._B
    n = x._data.shape[ax]
    logp = with_names(x, _names.unnamed(x.ndim)).log_softmax(ax)
    qu = with_names(q, _names.unnamed(q.ndim))
    if perm is not None:
        qu = _permute(qu, perm, qu._names)
    if eps:
        qu = qu * (1 - eps) + eps / n
    loss = -(logp * qu * _class_weights(B, weight, ax, x.ndim)).sum(ax)
    if reduction == "sum":
        return with_names(loss.sum(), ())
    if reduction == "mean":
        count = math.prod(loss.shape)
        return with_names(loss.sum() / count if count else loss.sum() * math.nan, ())
    if out_perm is not None:
        loss = _permute(loss, out_perm, loss._names)
    return with_names(loss, names)


def cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                  size_average: Optional[bool] = None, ignore_index: Optional[int] = -100,
                  reduce: Optional[bool] = None, reduction: str = "mean", label_smoothing: float = 0.0, *,
                  dim: Hashable = None) -> Tensor:
    """Cross-entropy between logits (unnormalised scores over a class dim) and a target: PyTorch's
    ``F.cross_entropy``, with the class dim also given by name.

    The class dim is ``dim`` (a name or an int), else PyTorch's: dim 1 (dim 0 of 1-D logits),
    whatever its name; a name in ``weight``'s place is read as ``dim`` (a weight is never a name).
    The target holds class indices (an integer tensor with the logits' dims without the class dim)
    or class probabilities (a float tensor with all the logits' dims); it is matched to the logits by
    name, in any order.  ``weight``: one weight per class (1-D, a constant), as in PyTorch ("mean"
    then divides by the total weight of the counted targets).  ``ignore_index`` (default -100, None:
    none): class indices equal to it add nothing and are not counted.  ``label_smoothing`` ``e`` in
    [0, 1] mixes the target with the uniform distribution: ``(1 - e) target + e / C``.
    ``reduction``: "mean", "sum", or "none" (the loss per element, named like the target without the
    class dim); PyTorch's deprecated ``size_average`` and ``reduce`` map to it as in PyTorch.

        loss = cross_entropy(logits, tokens, dim="vocab")   # (batch, seq, vocab), (batch, seq) -> ()
        loss = cross_entropy(scores, labels)                # PyTorch: (N, C) and (N,)
    """
    op = "cross_entropy"
    logits = input
    tensor_arg(logits, op, "the logits")
    tensor_arg(target, op, "the target")
    reduction = _reduction(op, size_average, reduce, reduction)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0 <= label_smoothing <= 1:
        raise ValueError(f"{op}: label_smoothing must be a number in [0, 1], got {label_smoothing!r}.")
    eps = float(label_smoothing)
    logits = with_param(op, logits, target)
    ax, weight = _class_args(op, logits, weight, dim)
    require_floating(logits, op, "the logits")
    if target.dtype.kind == "f" and target.ndim == logits.ndim:
        if ignore_index not in (None, -100):
            raise ValueError(f"{op}: ignore_index applies to class indices, not to class probabilities; "
                             "give the ignored elements zero probability instead.")
        same_dtype(logits, target, op, "the target (class probabilities)")
        perm, out_perm, out_names = _names.class_target(logits._names, ax, target._names, True, op)
        shape = tuple(logits._data.shape)
        tshape = tuple(target._data.shape)
        if (tshape if perm is None else tuple(tshape[i] for i in perm)) != shape:
            raise ValueError(
                f"{op}: class probabilities have the logits' sizes {dict(zip(logits._names, shape))} (shape "
                f"{shape}), but the target has {dict(zip(target._names, tshape))} (shape {tshape})."
            )
        if weight is not None:
            return _weighted_probs(logits, target, weight, ax, perm, out_perm, out_names, eps, reduction)
        return apply(_SoftCrossEntropy, (logits, target), out_names if reduction == "none" else (), ax=ax,
                     perm=perm, count=math.prod(shape[:ax] + shape[ax + 1 :]), reduction=reduction,
                     out_perm=out_perm, eps=eps)
    params, names, raw = _index_plan(op, logits, target, ax, ignore_index, reduction)
    if weight is not None:
        return _weighted_indices(logits, weight, params, names, eps, True)
    B = logits._B
    if not eps and ax == logits.ndim - 1 and B.row_major(logits._data):
        if B.dtype_of(raw) is not _dtypes.int64:
            raw = B.astype(raw, B.native(_dtypes.int64))
        # with no ignore_index every target is a class index: any negative number ignores none
        ignore = -1 if ignore_index is None else ignore_index
        target = raw if len(raw.shape) == 1 else B.reshape(raw, (-1,))
        return apply(_CrossEntropyRows, (logits,), names, eps=eps, target=target, ignore=ignore, **params)
    return apply(_CrossEntropy, (logits,), names, eps=eps, **params)


# ----------------------------------------------------------------------------- nll_loss


class _NLLLoss(Op):
    """``-x[idx]`` along the class axis, reduced; its gradient places ``-w`` at ``idx`` (no saved input)."""

    name = "nll_loss"

    @staticmethod
    def forward(B, x, *, ax, idx, valid, count, reduction, out_perm):
        loss = B.negative(B.take_along_axis(x, idx, axis=ax))
        if valid is not None:
            loss = B.where(valid, loss, 0)
        return _reduce(B, loss, {"ax": ax, "count": count, "valid": valid, "reduction": reduction,
                                 "out_perm": out_perm})

    @staticmethod
    def backward(node, g):
        return (with_names(_place(-_weights(node, g), node.params, node.in_shapes[0]), node.in_names[0]),)


def nll_loss(input: Tensor, target: Tensor, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
             ignore_index: Optional[int] = -100, reduce: Optional[bool] = None, reduction: str = "mean", *,
             dim: Hashable = None) -> Tensor:
    """Negative log-likelihood of class indices, ``-input[target]`` along the class dim: PyTorch's
    ``F.nll_loss``, with the class dim also given by name.

    ``input`` holds log-probabilities (e.g. ``log_softmax(x, dim)``); ``target`` class indices (an
    integer tensor with the other dims, matched by name in any order).  The class dim, ``weight``,
    ``ignore_index`` and the reductions are as in :func:`cross_entropy`.
    """
    op = "nll_loss"
    log_probs = input
    tensor_arg(log_probs, op, "the log-probabilities")
    tensor_arg(target, op, "the target")
    reduction = _reduction(op, size_average, reduce, reduction)
    log_probs = with_param(op, log_probs, target)
    ax, weight = _class_args(op, log_probs, weight, dim)
    require_floating(log_probs, op, "the log-probabilities")
    params, names, _ = _index_plan(op, log_probs, target, ax, ignore_index, reduction)
    if weight is not None:
        return _weighted_indices(log_probs, weight, params, names, 0.0, False)
    return apply(_NLLLoss, (log_probs,), names, **params)


# ----------------------------------------------------------------------------- mse_loss


class _MSELoss(Op):
    name = "mse_loss"
    saves = (0, 1)

    @staticmethod
    def forward(B, a, b, *, reduction):
        d = B.subtract(a, b)
        d = into(B, "multiply", d, d)
        if reduction == "none":
            return d
        total = B.sum(d, axis=None)
        return total if reduction == "sum" else total / math.prod(d.shape)

    @staticmethod
    def backward(node, g):
        a, b = node.saved_tensors()
        d = a - b
        scale = 2.0
        if node.params["reduction"] == "mean":
            scale /= math.prod(d.shape)
        gd = d * (g * scale)
        ga = sum_to(gd, tuple(node.in_shapes[0]), node.in_names[0]) if node.edges[0] is not None else None
        gb = sum_to(-gd, tuple(node.in_shapes[1]), node.in_names[1]) if node.edges[1] is not None else None
        return ga, gb


def _broadcast_shape(sa: tuple, sb: tuple, op: str, a: Tensor, b: Tensor, what: str = "the target's") -> tuple:
    out = []
    for k in range(1, max(len(sa), len(sb)) + 1):
        x = sa[-k] if k <= len(sa) else 1
        y = sb[-k] if k <= len(sb) else 1
        if x != y and x != 1 and y != 1:
            raise ValueError(
                f"{op}: the input's shape {sa} and {what} {sb} do not broadcast (position {-k} from the "
                f"right: {x} vs {y}); names {_names.fmt(a._names)} and {_names.fmt(b._names)}."
            )
        out.append(max(x, y))
    return tuple(reversed(out))


def _pair(op: str, input: Tensor, target: Tensor, *others: Tuple[str, Optional[Tensor]]):
    """Check a pointwise loss's input, target and optional weights (float, the input's dtype, shapes that
    broadcast); the loss's names: theirs unified (rule 2)."""
    tensor_arg(input, op, "the input")
    tensor_arg(target, op, "the target")
    names = _names.unify(input._names, target._names, op)
    require_floating(input, op, "the input")
    same_dtype(input, target, op, "the target")
    shape = _broadcast_shape(tuple(input._data.shape), tuple(target._data.shape), op, input, target)
    for what, t in others:
        if t is not None:
            tensor_arg(t, op, what)
            names = _names.unify(names, t._names, op)
            same_dtype(input, t, op, what)
            shape = _broadcast_shape(shape, tuple(t._data.shape), op, input, t, f"{what}'s")
    return names


def mse_loss(input: Tensor, target: Tensor, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
             reduction: str = "mean", weight: Optional[Tensor] = None) -> Tensor:
    """Mean squared error ``(input - target) ** 2`` (times ``weight``), reduced by "mean", "sum" or "none".

    The names unify (rule 2) and the shapes broadcast; "none" gives the unified names.  ``weight`` has
    the input's shape, and "mean" then divides by its sum, as in PyTorch.  PyTorch's deprecated
    ``size_average`` and ``reduce`` map to the reduction as in PyTorch.
    """
    op = "mse_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    names = _pair(op, input, target, ("the weight", weight))
    if weight is not None:
        return _weighted_reduced(op, input, (input - target).square(), weight, reduction, names, True)
    if traced_as_composition():  # nt.compile: the difference, its square and the mean fuse with the ops before
        return _reduced((input - target).square(), reduction, names)
    return apply(_MSELoss, (input, target), names if reduction == "none" else (), reduction=reduction)


# ----------------------------------------------------------------------------- pointwise losses
#
# Compositions of differentiable tensor ops: their gradients of every order come with them.


def _reduced(loss: Tensor, reduction: str, names) -> Tensor:
    if reduction == "none":
        return with_names(loss, names)
    return loss.sum() if reduction == "sum" else loss.mean()


def _weighted_reduced(op: str, input: Tensor, loss: Tensor, weight: Tensor, reduction: str, names,
                      by_weight: bool) -> Tensor:
    """``loss * weight`` reduced; "mean" divides by the weight's sum where PyTorch does (``by_weight``)."""
    if weight.shape != input.shape:
        raise ValueError(f"{op}: the weight must have the input's shape {input.shape}, got {weight.shape} (as in "
                         "PyTorch).")
    loss = loss * weight
    if reduction == "mean" and by_weight:
        return loss.sum() / weight.sum()
    return _reduced(loss, reduction, names)


def _smooth_l1(d: Tensor, beta: float) -> Tensor:
    a = d.abs()
    return a if beta == 0 else where(a < beta, d.square() * (0.5 / beta), a - 0.5 * beta)


def _huber(d: Tensor, delta: float) -> Tensor:
    a = d.abs()
    return where(a < delta, d.square() * 0.5, (a - 0.5 * delta) * delta)


#: loss name -> (the loss of the difference d = input - target given the option, the option's name, its
#: bound, whether a weighted "mean" divides by the weight's sum: PyTorch's l1_loss does, its huber_loss not)
_POINTWISE: Dict[str, Tuple[Callable[[Tensor, float], Tensor], str, str, bool]] = {
    "l1_loss": (lambda d, _: d.abs(), "", "", True),
    "smooth_l1_loss": (_smooth_l1, "beta", ">= 0", False),
    "huber_loss": (_huber, "delta", "> 0", False),
}


def _pointwise(op: str, input: Tensor, target: Tensor, reduction: str, weight: Optional[Tensor],
               option: float = 0.0) -> Tensor:
    fn, label, bound, by_weight = _POINTWISE[op]
    if label and (isinstance(option, bool) or not isinstance(option, (int, float))
                  or not (option >= 0 if bound == ">= 0" else option > 0)):
        raise ValueError(f"{op}: {label} must be a number {bound}, got {option!r}.")
    names = _pair(op, input, target, ("the weight", weight))
    loss = fn(input - target, float(option))
    if weight is None:
        return _reduced(loss, reduction, names)
    return _weighted_reduced(op, input, loss, weight, reduction, names, by_weight)


def l1_loss(input: Tensor, target: Tensor, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
            reduction: str = "mean", weight: Optional[Tensor] = None) -> Tensor:
    """Mean absolute error ``|input - target|`` (times ``weight``); names, ``weight`` and reductions as
    :func:`mse_loss`."""
    return _pointwise("l1_loss", input, target, _reduction("l1_loss", size_average, reduce, reduction), weight)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Optional[bool] = None,
                   reduce: Optional[bool] = None, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d ** 2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input - target``; ``beta``
    0: ``|d|``); names and reductions as :func:`mse_loss`."""
    reduction = _reduction("smooth_l1_loss", size_average, reduce, reduction)
    return _pointwise("smooth_l1_loss", input, target, reduction, None, beta)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Optional[Tensor] = None) -> Tensor:
    """``0.5 d ** 2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (``d = input - target``), times
    ``weight`` (of the input's shape; "mean" divides by the number of elements, as PyTorch's does);
    names and reductions as :func:`mse_loss`."""
    return _pointwise("huber_loss", input, target, reduction_arg(reduction, "huber_loss"), weight, delta)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                         size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                         reduction: str = "mean") -> Tensor:
    """``-weight (target log(input) + (1 - target) log(1 - input))`` for probabilities ``input`` in [0, 1];
    each log is clamped at -100, as in PyTorch.  Names and reductions as :func:`mse_loss`."""
    op = "binary_cross_entropy"
    reduction = _reduction(op, size_average, reduce, reduction)
    names = _pair(op, input, target, ("the weight", weight))
    B = input._B
    x = input._data
    if has_values(B) and bool(B.any(B.logical_or(x < 0, x > 1))):
        raise ValueError(f"{op}: the input holds probabilities, every element in [0, 1] (names "
                         f"{_names.fmt(input._names)}, shape {input.shape}); for scores use "
                         "binary_cross_entropy_with_logits.")
    # the logs of numbers clamped to the smallest float32 above 0 (log < -100) before -100: no gradient is 0 * inf
    tiny = 1e-45
    loss = -(target * input.clip(tiny).log().clip(-100) + (1 - target) * (1 - input).clip(tiny).log().clip(-100))
    return _reduced(loss if weight is None else loss * weight, reduction, names)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                                     size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                                     reduction: str = "mean", pos_weight: Optional[Tensor] = None) -> Tensor:
    """:func:`binary_cross_entropy` of ``sigmoid(input)``, computed stably from the scores:
    ``weight ((1 - target) input + (1 + (pos_weight - 1) target) softplus(-input))``.  ``pos_weight``
    weighs the positive examples and broadcasts like ``weight`` (rule 2: a 1-D one of the classes
    lines up with the last dim).  Names and reductions as :func:`mse_loss`."""
    op = "binary_cross_entropy_with_logits"
    reduction = _reduction(op, size_average, reduce, reduction)
    names = _pair(op, input, target, ("the weight", weight), ("pos_weight", pos_weight))
    sp = softplus(-input)
    if pos_weight is not None:
        sp = ((pos_weight - 1) * target + 1) * sp
    loss = (1 - target) * input + sp
    return _reduced(loss if weight is None else loss * weight, reduction, names)


def kl_div(input: Tensor, target: Tensor, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence pointwise, ``target (log(target) - input)`` (0 where target is 0), for
    log-probabilities ``input``; ``log_target``: the target is log-probabilities too.  ``reduction``
    "batchmean" is the sum divided by the size of dim 0 (the mathematical KL divergence per sample);
    "mean" divides by every element, as in PyTorch.  Names as :func:`mse_loss`."""
    op = "kl_div"
    batchmean = reduction == "batchmean"
    reduction = _reduction(op, size_average, reduce, "sum" if batchmean else reduction)
    names = _pair(op, input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        loss = where(positive, target * where(positive, target, 1.0).log(), 0.0) - target * input
    out = _reduced(loss, reduction, names)
    return out / input.shape[0] if batchmean and input.ndim else out
