"""Losses: ``cross_entropy``, ``nll_loss`` and ``mse_loss``, each one op on raw arrays.

Name rules (:mod:`namedtensor._names`):

* ``cross_entropy(logits, target, dim)`` and ``nll_loss`` (:func:`~namedtensor._names.class_target`):
  ``dim`` is the logits' class dim.  Class indices (an integer target) have the logits' dims without
  the class dim, class probabilities (a float target, ``cross_entropy`` only) all of them; the target
  is matched to the logits by name, in any order (dim by dim where a name is ``None``).  With
  ``reduction="none"`` the loss has the target's dims (minus the class dim), in the target's order;
  ``"mean"`` and ``"sum"`` give a 0-dim tensor.
* ``mse_loss(input, target)``: the names unify (rule 2); ``"none"`` keeps the unified names.

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
from typing import Hashable, Optional

from .. import _dtypes, _names
from ..autograd.graph import Op, apply, is_grad_enabled
from ..tensor import Tensor
from ._common import has_values, inverse_permutation, sum_to, tensor_arg, with_names, with_param
from ._fused import into, reduction_arg, require_floating, same_dtype
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
    count = p["count"]
    return total / count if count else total * math.nan  # all ignored: nan, as in PyTorch


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
        w = w / max(p["count"], 1)
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
        if checked:
            count = int(B.sum(valid, axis=None))
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
        p = {"ax": ax, "count": count, "reduction": reduction, "out_perm": out_perm}
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
        p = {"ax": ax, "count": count, "reduction": reduction, "out_perm": out_perm}
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


def cross_entropy(logits: Tensor, target: Tensor, dim: Hashable, ignore_index: Optional[int] = None,
                  label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
    """Cross-entropy between the logits (unnormalised scores over the class dim ``dim``) and a target.

    The target holds class indices (an integer tensor with the logits' dims without ``dim``) or class
    probabilities (a float tensor with all the logits' dims); it is matched to the logits by name, in
    any order.  ``ignore_index``: class indices equal to it add nothing (and "mean" does not count
    them).  ``label_smoothing`` ``e`` in [0, 1] mixes the target with the uniform distribution, as in
    PyTorch: ``(1 - e) target + e / C``.  ``reduction``: "mean" (over the counted elements), "sum", or
    "none" (the loss per element, named like the target without the class dim).

        loss = cross_entropy(logits, tokens, dim="vocab")   # (batch, seq, vocab), (batch, seq) -> ()
    """
    op = "cross_entropy"
    tensor_arg(logits, op, "the logits")
    tensor_arg(target, op, "the target")
    reduction_arg(reduction, op)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0 <= label_smoothing <= 1:
        raise ValueError(f"{op}: label_smoothing must be a number in [0, 1], got {label_smoothing!r}.")
    eps = float(label_smoothing)
    logits = with_param(op, logits, target)
    ax = _class_dim(logits, dim, op)
    require_floating(logits, op, "the logits")
    if target.dtype.kind == "f" and target.ndim == logits.ndim:
        if ignore_index is not None:
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
        return apply(_SoftCrossEntropy, (logits, target), out_names if reduction == "none" else (), ax=ax,
                     perm=perm, count=math.prod(shape[:ax] + shape[ax + 1 :]), reduction=reduction,
                     out_perm=out_perm, eps=eps)
    params, names, raw = _index_plan(op, logits, target, ax, ignore_index, reduction)
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
        return _reduce(B, loss, {"ax": ax, "count": count, "reduction": reduction, "out_perm": out_perm})

    @staticmethod
    def backward(node, g):
        return (with_names(_place(-_weights(node, g), node.params, node.in_shapes[0]), node.in_names[0]),)


def nll_loss(log_probs: Tensor, target: Tensor, dim: Hashable, ignore_index: Optional[int] = None,
             reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class indices: ``-log_probs[target]`` along the class dim ``dim``.

    ``log_probs`` are log-probabilities (e.g. ``log_softmax(x, dim)``); ``target`` holds class indices
    (an integer tensor with the other dims, matched by name in any order).  ``ignore_index`` and
    ``reduction`` are as in :func:`cross_entropy`.
    """
    op = "nll_loss"
    tensor_arg(log_probs, op, "the log-probabilities")
    tensor_arg(target, op, "the target")
    reduction_arg(reduction, op)
    log_probs = with_param(op, log_probs, target)
    ax = _class_dim(log_probs, dim, op)
    require_floating(log_probs, op, "the log-probabilities")
    params, names, _ = _index_plan(op, log_probs, target, ax, ignore_index, reduction)
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


def _broadcast_shape(sa: tuple, sb: tuple, op: str, a: Tensor, b: Tensor) -> tuple:
    out = []
    for k in range(1, max(len(sa), len(sb)) + 1):
        x = sa[-k] if k <= len(sa) else 1
        y = sb[-k] if k <= len(sb) else 1
        if x != y and x != 1 and y != 1:
            raise ValueError(
                f"{op}: the input's shape {sa} and the target's {sb} do not broadcast (position {-k} from the "
                f"right: {x} vs {y}); names {_names.fmt(a._names)} and {_names.fmt(b._names)}."
            )
        out.append(max(x, y))
    return tuple(reversed(out))


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error ``(input - target) ** 2``, reduced by "mean", "sum" or "none".

    The names unify (rule 2) and the shapes broadcast; "none" gives the unified names.
    """
    op = "mse_loss"
    tensor_arg(input, op, "the input")
    tensor_arg(target, op, "the target")
    reduction_arg(reduction, op)
    names = _names.unify(input._names, target._names, op)
    require_floating(input, op, "the input")
    same_dtype(input, target, op, "the target")
    _broadcast_shape(tuple(input._data.shape), tuple(target._data.shape), op, input, target)
    return apply(_MSELoss, (input, target), names if reduction == "none" else (), reduction=reduction)
