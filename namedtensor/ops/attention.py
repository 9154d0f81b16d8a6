"""Attention by name: ``scaled_dot_product_attention`` (one fused op) and ``causal_mask``.

Name rule (:func:`namedtensor._names.attention`): ``dim`` is the feature dim q and k contract,
``key_dim`` the keys' sequence dim (in k and v); the queries' sequence dim is the one dim of q
that is neither ``dim`` nor a dim of k (or ``query_dim=``).  q's other dims are batch dims,
matched by name in k and v (any order; one they lack broadcasts: multi-query attention).  The
output has q's names with ``dim`` replaced in place by v's value-feature name; the weights are
named ``batch... + (seq, key_dim)``, batch dims in q's order.  A mask is aligned to the weights
by name (:func:`namedtensor._names.attention_mask`): bool (True = may attend) or float (added to
the scores).

The op brings the operands to working layouts, ``(batch..., seq, dim)`` for q and
``(batch..., key_dim, feature)`` for k and v (permuted views, with size-1 dims for the batch dims
they lack), so each product is one batched matmul.  The scores are computed key-major,
``(batch..., key, seq)``: the softmax then reduces along the second-to-last axis, which NumPy
vectorises across the contiguous rows (reducing along the last axis is ~2.5x slower); the backend's
``softmax_columns`` (or the ``rows`` param's: nt.compile's Numba kernel) takes it.  The forward
keeps the unnormalised exponentials and divides only the small output by their sums.  A query
with no key to attend gets zero weights and a zero output.

The backward uses the stashed exponentials as constants when no graph is recorded (the usual
case), with ``rowsum(dP * P) = rowsum(g * out)`` (as FlashAttention does) to avoid a pass over
the scores; under ``create_graph`` it recomputes the probabilities with tensor ops from the saved
inputs, so the gradient is differentiable again.

On a backend with fused attention (``B.fused_attention``: CuPy's CUDA kernels, the NumPy backend's
blocks, backends/numpy_attention.py), calls without dropout, weights or float masks, whose bool mask
only pads keys (it does not vary along the queries), run ``B.attention`` instead
(:class:`_FusedAttention`) on the operands' working layouts broadcast to one batch; it keeps only the
output and the log-sum-exp of the scores for the backward.  nt.compile's CPU graphs with Numba hand
it their kernels (the ``rows`` param), which run the same blocks, each block's steps one kernel call.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple, Union

from .. import _names, backends
from ..autograd.graph import Op, apply, is_grad_enabled
from ..tensor import Tensor
from ._common import int_sizes, inverse_permutation, row_hooks, sum_to, tensor_arg, with_names
from .elementwise import where
from .naming import _permute
from .shape import _reshape

_OP = "scaled_dot_product_attention"


# ----------------------------------------------------------------------------- layouts


def _to_work(B, x, src):
    """Raw array ``x`` in a working layout: axes taken in ``src``'s order, size-1 dims where it says -1."""
    perm = tuple(s for s in src if s >= 0)
    if perm != tuple(range(len(perm))):
        x = B.permute_dims(x, perm)
    if len(perm) != len(src):
        sizes = iter(x.shape)
        x = B.reshape(x, tuple(next(sizes) if s >= 0 else 1 for s in src))
    return x


def _t_to_work(t: Tensor, src) -> Tensor:
    """:func:`_to_work` for a tensor, differentiably (the working layout is unnamed)."""
    perm = tuple(s for s in src if s >= 0)
    t = _permute(with_names(t, _names.unnamed(t.ndim)), perm, _names.unnamed(len(perm)))
    if len(perm) != len(src):
        sizes = iter(t._data.shape)
        t = _reshape(t, tuple(next(sizes) if s >= 0 else 1 for s in src), _names.unnamed(len(src)))
    return t


def _t_from_work(g: Tensor, src, shape, names) -> Tensor:
    """A gradient in a working layout (maybe broadcast larger) back to its operand's shape and names."""
    perm = tuple(s for s in src if s >= 0)
    g = sum_to(g, tuple(shape[s] if s >= 0 else 1 for s in src), _names.unnamed(len(src)))
    if len(perm) != len(src):
        g = _reshape(g, tuple(shape[s] for s in perm), _names.unnamed(len(perm)))
    return with_names(_permute(g, inverse_permutation(perm), _names.unnamed(len(perm))), names)


def _swap(B, x):
    """A view of ``x`` with its last two axes swapped."""
    n = len(x.shape)
    return B.permute_dims(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _key_major(src):
    """A mask's working source for the key-major scores: the last two entries swapped."""
    return src[:-2] + (src[-1], src[-2])


def _causal(B, n_query: int, n_key: int, key_major: bool = False):
    """Bool ``(n_query, n_key)`` (or its transpose): True where key j <= query i (top-left aligned)."""
    i = B.reshape(B.arange(n_query), (1, n_query) if key_major else (n_query, 1))
    j = B.reshape(B.arange(n_key), (n_key, 1) if key_major else (1, n_key))
    return B.greater_equal(i, j)


def _fits(small, big) -> bool:
    """Whether shape ``small`` broadcasts into ``big`` without growing it."""
    return len(small) <= len(big) and all(s == b or s == 1 for s, b in zip(reversed(small), reversed(big)))


def _const(B, x) -> Tensor:
    return Tensor._make(x, _names.unnamed(len(x.shape)), B)


def _keep_scale(p: float) -> float:
    return 0.0 if p >= 1.0 else 1.0 / (1.0 - p)


# ----------------------------------------------------------------------------- the op
#
# Raw-array helpers that write into their first operand where the backend allows (NumPy); they
# are only called on arrays the op itself allocated.


def _imul(B, x, y):
    return B.multiply(x, y, out=x) if B.supports_out and _fits(getattr(y, "shape", ()), x.shape) else B.multiply(x, y)


def _iadd(B, x, y):
    return B.add(x, y, out=x) if B.supports_out and _fits(y.shape, x.shape) else B.add(x, y)


def _work_shape(a, b) -> tuple:
    """The shape of ``a @ b`` for working-layout operands (same ndim; batch sizes equal or 1)."""
    return tuple(y if x == 1 else x for x, y in zip(a.shape[:-2], b.shape[:-2])) + (a.shape[-2], b.shape[-1])


def _product(B, a, b, src, scale=None):
    """``(a @ b) * scale`` (``scale``: a number, an array or None) for working-layout operands, as an array
    in the axis order of the tensor whose working layout takes its axis ``src[j]`` to position ``j``
    (``src`` a permutation).

    Where the backend takes ``out=`` the product is written straight into that order, so the result
    is contiguous there (a later flatten or reshape of it is a view, not a copy).
    """
    work = _work_shape(a, b)
    back = inverse_permutation(src)
    if not B.supports_out:
        product = B.matmul(a, b)
        return B.permute_dims(product if scale is None else B.multiply(product, scale), back)
    out = B.empty(tuple(work[j] for j in back), dtype=a.dtype)
    view = B.permute_dims(out, src)
    B.matmul(a, b, out=view)
    if scale is not None:
        B.multiply(view, scale, out=view)
    return out


def _allowed(B, mask, n_query: int, n_key: int, src, is_causal: bool, key_major: bool):
    """The bool array of (query, key) pairs that may attend, in the scores' layout; None when all may."""
    allowed = _causal(B, n_query, n_key, key_major) if is_causal else None
    if mask is not None and B.dtype_of(mask).kind == "b":
        m = _to_work(B, mask, _key_major(src) if key_major else src)
        allowed = m if allowed is None else B.logical_and(allowed, m)
    return allowed


def _forward(B, q, k, v, mask, prm):
    """Raw arrays: the output (in its names' order), the exponentials (key-major), 1/their sums per query
    ``(batch..., 1, seq)``, and the dropout keep-mask (key-major) or None."""
    qw = _to_work(B, q, prm["q_src"])
    kw = _to_work(B, k, prm["k_src"])
    e = B.matmul(kw, _swap(B, qw * prm["scale"]))  # the scores, key-major
    n_key, n_query = e.shape[-2], e.shape[-1]
    if mask is not None and B.dtype_of(mask).kind == "f":
        e = _iadd(B, e, _to_work(B, mask, _key_major(prm["m_src"])))
    allowed = _allowed(B, mask, n_query, n_key, prm["m_src"], False, True)  # the softmax takes is_causal
    if allowed is not None:  # adding 0 / -inf (an array the mask's size) spares a pass writing a new array
        e = _iadd(B, e, B.where(allowed, B.zeros((), dtype=e.dtype), B.full((), -math.inf, dtype=e.dtype)))
    masked = mask is not None or prm["is_causal"] or n_key == 0  # (no key at all: every query fully masked)
    e, inv = row_hooks(B, prm.get("rows")).softmax_columns(e, masked, prm["is_causal"])
    keep = None
    kept = e
    scale_out = inv
    if prm["dropout_p"] > 0:
        keep = B.greater_equal(B.rand(tuple(e.shape), B.dtype_of(e)), prm["dropout_p"])
        kept = B.multiply(e, keep)
        scale_out = inv * _keep_scale(prm["dropout_p"])
    # the output is laid out like q (its names are q's, with the value dim for dim)
    out = _product(B, _swap(B, kept), _to_work(B, v, prm["v_src"]), prm["q_src"], _swap(B, scale_out))
    return out, e, inv, keep


def _weights(B, e, inv, keep, dropout_p: float):
    """The attention weights (after dropout), ``(batch..., seq, key)``, as a new array's view."""
    w = B.multiply(e, inv)
    if keep is not None:
        w = _imul(B, _imul(B, w, keep), _keep_scale(dropout_p))
    return _swap(B, w)


class _Attention(Op):
    name = _OP
    saves = (0, 1, 2, 3)
    saves_output = True  # the backward needs the output; saving it also catches in-place edits of it
    stashes = True
    row_kernels = True  # the softmax: B.softmax_columns

    @staticmethod
    def forward(B, q, k, v, mask, **prm):
        out, e, inv, keep = _forward(B, q, k, v, mask, prm)
        return out, (e, inv, keep)

    @staticmethod
    def backward(node, g):
        return _backward(node, g, None)


class _AttentionWeights(_Attention):
    """The same op, returning the weights too."""

    n_outputs = 2

    @staticmethod
    def forward(B, q, k, v, mask, **prm):
        out, e, inv, keep = _forward(B, q, k, v, mask, prm)
        weights = _weights(B, e, inv, keep, prm["dropout_p"])
        return (out, weights), (e, inv, keep)

    @staticmethod
    def backward(node, g, g_weights):
        return _backward(node, g, g_weights)


def _backward(node, g: Tensor, g_weights: Optional[Tensor]):
    saved = node.saved_tensors()
    q, k, v, mask, out = saved[:5]
    if is_grad_enabled():  # create_graph: gradients that are functions of the inputs again
        return _grads_graph(node, q, k, v, mask, g, g_weights, node.stash[2])
    return _grads_fast(node, q, k, v, out, g, g_weights, saved[5] if g_weights is not None else None)


def _grads_graph(node, q, k, v, mask, g, g_weights, keep) -> tuple:
    """The gradients with tensor ops, from probabilities recomputed from q, k (and the mask); ``keep``:
    the dropout keep-mask (key-major) or None."""
    prm = node.params
    d_scores, weights, gw = _scores_grad_graph(node.B, q, k, v, mask, g, g_weights, prm, keep)
    scale = prm["scale"]
    shapes, names = node.in_shapes, node.in_names
    grads = [None, None, None, None]
    if node.edges[0] is not None:
        gq = (d_scores @ _t_to_work(k, prm["k_src"])) * scale
        grads[0] = _t_from_work(gq, prm["q_src"], shapes[0], names[0])
    if node.edges[1] is not None:
        gk = (d_scores.mT @ _t_to_work(q, prm["q_src"])) * scale
        grads[1] = _t_from_work(gk, prm["k_src"], shapes[1], names[1])
    if node.edges[2] is not None:
        grads[2] = _t_from_work(weights.mT @ gw, prm["v_src"], shapes[2], names[2])
    if node.edges[3] is not None:
        grads[3] = _t_from_work(d_scores, prm["m_src"], shapes[3], names[3])
    return tuple(grads)


def _grads_fast(node, q, k, v, out, g, g_weights, weights_out) -> tuple:
    """The gradients on raw arrays, from the stashed exponentials (constants: no graph is recorded)."""
    B, prm = node.B, node.params
    d, w, g_v = _scores_grad_fast(B, v, out, g, g_weights, weights_out, prm, node.stash)
    scale = prm["scale"]
    products = ((_swap(B, d), _to_work(B, k._data, prm["k_src"]), prm["q_src"], scale),
                (d, _to_work(B, q._data, prm["q_src"]), prm["k_src"], scale),
                (w, g_v, prm["v_src"], None))
    grads = []
    for i, (a, b, src, factor) in enumerate(products):
        if node.edges[i] is None:
            grads.append(None)
            continue
        shape, names = node.in_shapes[i], node.in_names[i]
        if -1 not in src and _work_shape(a, b) == tuple(shape[s] for s in src):
            grads.append(Tensor._make(_product(B, a, b, src, factor), names, B))
        else:  # the operand lacks or broadcasts a batch dim: reduce the product to its shape
            product = B.matmul(a, b)
            product = product if factor is None else B.multiply(product, factor)
            grads.append(_t_from_work(_const(B, product), src, shape, names))
    if node.edges[3] is not None:
        grads.append(_t_from_work(_const(B, _swap(B, d)), prm["m_src"], node.in_shapes[3], node.in_names[3]))
    else:
        grads.append(None)
    return tuple(grads)


def _grad_to_work(g: Tensor, prm) -> Tensor:
    """The output's gradient in the working layout ``(batch..., seq, value)``, unnamed."""
    return _permute(with_names(g, _names.unnamed(g.ndim)), prm["q_src"],
                    _names.unnamed(g.ndim))


def _scores_grad_fast(B, v, out, g, g_weights, weights_out, prm, stash):
    """Gradient of the (scaled) scores from the stashed exponentials, on raw arrays.

    Returns key-major ``d`` (the scores' gradient) and ``w`` (the weights, up to the per-query factor
    that ``g_v`` carries) with the gradient ``g_v``: the gradients are ``d^T @ k`` and ``d @ q`` (times
    the scale) and ``w @ g_v``.
    """
    e, inv, keep = stash
    c = _keep_scale(prm["dropout_p"])
    gw = B.permute_dims(g._data, prm["q_src"])
    ow = B.permute_dims(out._data, prm["q_src"])
    inv_col = _swap(B, inv)
    g_inv = B.multiply(gw, inv_col)  # g / sum(exp): the normalisation moved onto the small operand
    # rowsum(dP * P) over the keys equals rowsum(g * out) over the features
    row = B.rowdot(gw, ow)
    if g_weights is not None:
        row = row + B.rowdot(g_weights._data, weights_out._data)
    d = B.matmul(_to_work(B, v._data, prm["v_src"]), _swap(B, g_inv))  # dP^T / sum(exp), key-major
    if g_weights is not None:
        d = _iadd(B, d, B.multiply(_swap(B, g_weights._data), inv))
    if keep is not None:
        d = _imul(B, _imul(B, d, keep), c)
    # dS^T = P^T * (dP^T - rowsum)
    d = row_hooks(B, prm.get("rows")).softmax_columns_backward(d, e, B.multiply(_swap(B, row), inv))
    if keep is None:
        w, g_v = e, g_inv
    else:
        w, g_v = B.multiply(e, keep), B.multiply(g_inv, c)
    return d, w, g_v


def _probs(B, q: Tensor, k: Tensor, mask: Optional[Tensor], prm: dict) -> Tensor:
    """The attention probabilities recomputed with tensor ops (query-major), for higher-order gradients."""
    qw, kw = _t_to_work(q, prm["q_src"]), _t_to_work(k, prm["k_src"])
    s = (qw * prm["scale"]) @ kw.mT
    if mask is not None and mask.dtype.kind == "f":
        s = s + _t_to_work(mask, prm["m_src"])
    n_query, n_key = s.shape[-2:]
    allowed = _allowed(B, None if mask is None else mask._data, n_query, n_key, prm["m_src"], prm["is_causal"],
                       False)
    if allowed is not None:
        s = where(_const(B, allowed), s, -math.inf)
    if n_key == 0:
        return s  # empty: nothing to normalise
    if mask is None and not prm["is_causal"]:
        return s.softmax(-1)
    row_ok = B.isfinite(B.max(s._data, axis=-1, keepdims=True))
    if B.all(row_ok):
        return s.softmax(-1)
    ok = _const(B, row_ok)  # queries with no key to attend: zero weights (and a zero gradient)
    return where(ok, where(ok, s, 0.0).softmax(-1), 0.0)


def _scores_grad_graph(B, q, k, v, mask, g, g_weights, prm, keep):
    """``(d_scores, weights, gw)`` as tensors (query-major), differentiable: the probabilities recomputed
    from q, k (and the mask).  The gradients are ``d_scores @ k``, ``d_scores^T @ q`` (times the scale)
    and ``weights^T @ gw``."""
    probs = _probs(B, q, k, mask, prm)
    keep_scale = None
    if keep is not None:
        keep_scale = _const(B, _swap(B, B.multiply(B.astype(keep, probs._data.dtype), _keep_scale(prm["dropout_p"]))))
    weights = probs if keep_scale is None else probs * keep_scale
    gw = _grad_to_work(g, prm)
    d_weights = gw @ _t_to_work(v, prm["v_src"]).mT
    if g_weights is not None:
        d_weights = d_weights + with_names(g_weights, _names.unnamed(g_weights.ndim))
    d_probs = d_weights if keep_scale is None else d_weights * keep_scale
    # softmax's backward: p * (dp - sum(dp * p)) along the keys
    return probs * (d_probs - (d_probs * probs).sum(-1, keepdim=True)), weights, gw


# ----------------------------------------------------------------------------- the fused kernel
#
# A backend with ``fused_attention`` runs attention as one hook on the working layouts (CuPy flattens the
# batch dims for its FlashAttention kernels, which never form the scores; NumPy computes blocks of heads
# in the cache).  It takes causal and key-padding masks only, no dropout and no weights; other calls
# take the path above.


def _fusable(B, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], m_src, dropout_p: float,
             return_weights: bool) -> bool:
    """Whether the backend's fused attention takes this call."""
    if not B.fused_attention or return_weights or dropout_p > 0:
        return False
    if mask is not None and (mask.dtype.kind != "b" or (m_src[-2] >= 0 and mask.shape[m_src[-2]] != 1)):
        return False  # a float mask, or a bool mask that varies along the queries: not key padding
    return all(t._data.shape[a] for t in (q, k, v) for a in range(t.ndim))  # the kernels want no empty dim


def _batch_sizes(q, k, v, prm) -> tuple:
    """The batch dims' sizes of the weights (q, k and v may broadcast theirs from 1)."""
    sizes = [tuple(x.shape[s] if s >= 0 else 1 for s in prm[key][:-2])
             for x, key in ((q, "q_src"), (k, "k_src"), (v, "v_src"))]
    return tuple(max(c) for c in zip(*sizes))


def _broadcast(B, x, src, batch: tuple):
    """Raw array ``x`` in its working layout, broadcast to the ``batch`` dims (a view)."""
    x = _to_work(B, x, src)
    full = batch + tuple(x.shape[len(batch):])
    return x if tuple(x.shape) == full else B.broadcast_to(x, full)


def _fused_inputs(B, q, k, v, mask, prm):
    """``(q, k, v, key_keep)`` as the backend's fused attention takes them (raw arrays, views)."""
    batch = _batch_sizes(q, k, v, prm)
    qw, kw, vw = (_broadcast(B, x, prm[key], batch) for x, key in ((q, "q_src"), (k, "k_src"), (v, "v_src")))
    keep = None
    if mask is not None:
        n_key = kw.shape[-2]
        keep = B.reshape(B.broadcast_to(_to_work(B, mask, prm["m_src"]), batch + (1, n_key)), batch + (n_key,))
    return qw, kw, vw, keep


class _FusedAttention(Op):
    """Attention by the backend's fused kernel (``B.attention``) on the operands' working layouts,
    broadcast to one batch; stashes its output (working layout) and the log-sum-exp of the scores.  The
    backward is the kernel's (``B.attention_backward``) when no graph is recorded, else tensor ops
    (differentiable again)."""

    name = _OP
    saves = (0, 1, 2, 3)
    saves_output = True
    stashes = True
    row_kernels = True  # B.attention and its backward: nt.compile's Numba kernels inside the blocks

    @staticmethod
    def forward(B, q, k, v, mask, **prm):
        qw, kw, vw, keep = _fused_inputs(B, q, k, v, mask, prm)
        out, lse = row_hooks(B, prm.get("rows")).attention(qw, kw, vw, scale=prm["scale"], causal=prm["is_causal"],
                                                           key_keep=keep)
        return B.permute_dims(out, inverse_permutation(prm["q_src"])), (out, lse)

    @staticmethod
    def backward(node, g):
        q, k, v, mask, _ = node.saved_tensors()
        if is_grad_enabled():
            return _grads_graph(node, q, k, v, mask, g, None, None)
        B, prm = node.B, node.params
        qw, kw, vw, keep = _fused_inputs(B, q._data, k._data, v._data, None if mask is None else mask._data, prm)
        out, lse = node.stash
        gw = B.permute_dims(g._data, prm["q_src"])
        grads = row_hooks(B, prm.get("rows")).attention_backward(qw, kw, vw, out, lse, gw, scale=prm["scale"],
                                                                 causal=prm["is_causal"], key_keep=keep)
        result = []
        for i, (grad, key) in enumerate(zip(grads, ("q_src", "k_src", "v_src"))):
            if node.edges[i] is None:
                result.append(None)
                continue
            result.append(_t_from_work(_const(B, grad), prm[key], node.in_shapes[i], node.in_names[i]))
        return (*result, None)  # a bool mask has no gradient


# ----------------------------------------------------------------------------- public functions


def _check_sizes(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], plan, m_src) -> None:
    """Sizes of dims shared by name agree (batch dims may broadcast from 1), else a ValueError."""
    q_src, k_src, v_src = plan[:3]
    work = [(label, t, tuple(t.shape[s] if s >= 0 else 1 for s in src))
            for label, t, src in (("q", q, q_src), ("k", k, k_src), ("v", v, v_src))]
    (_, _, qs), (_, _, ks), (_, _, vs) = work
    weights = plan[4]

    def fail(what: str) -> ValueError:
        shapes = ", ".join(f"{label} {_names.fmt(t.names)} shape {t.shape}" for label, t, _ in work)
        if mask is not None:
            shapes += f", mask {_names.fmt(mask.names)} shape {mask.shape}"
        return ValueError(f"{_OP}: {what} ({shapes}).")

    if qs[-1] != ks[-1]:
        raise fail(f"q and k must have the same size along their feature dim {q.names[q_src[-1]]!r}: "
                   f"{qs[-1]} vs {ks[-1]}")
    if ks[-2] != vs[-2]:
        raise fail(f"k and v must have the same size along key_dim {weights[-1]!r}: {ks[-2]} vs {vs[-2]}")
    sizes = list(qs[:-1]) + [ks[-2]]
    for j, name in enumerate(weights[:-2]):
        got = {x[j] for x in (qs, ks, vs)} - {1}
        if len(got) > 1:
            raise fail(f"the batch dim {name!r} has sizes {qs[j]} (q), {ks[j]} (k), {vs[j]} (v); "
                       "they must be equal (or 1, to broadcast)")
        sizes[j] = got.pop() if got else 1
    if mask is not None:
        for j, s in enumerate(m_src):
            if s >= 0 and mask.shape[s] not in (1, sizes[j]):
                raise fail(f"the mask's dim {weights[j]!r} has size {mask.shape[s]} but the weights' has "
                           f"{sizes[j]}; it must be equal (or 1, to broadcast)")


def _mask_arg(mask: Optional[Tensor], dtype) -> Optional[Tensor]:
    """The mask checked, a float one cast to the operands' dtype."""
    if mask is None:
        return None
    tensor_arg(mask, _OP, "mask")
    kind = mask.dtype.kind
    if kind not in ("b", "f"):
        raise TypeError(f"{_OP}: mask must be bool (True = may attend) or floating point (added to the "
                        f"scores), got {mask.dtype!r}.")
    return mask.to(dtype) if kind == "f" and mask.dtype != dtype else mask


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False, *, dim: Optional[str] = None,
                                 key_dim: Optional[str] = None, query_dim: Optional[str] = None,
                                 mask: Optional[Tensor] = None,
                                 return_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """``softmax(q k^T * scale + mask) v``: PyTorch's call by position, or every dim matched by name.

    **PyTorch's form** (no ``dim=``): ``query`` ``(..., L, E)``, ``key`` ``(..., S, E)``, ``value``
    ``(..., S, Ev)`` give ``(..., L, Ev)``; the batch dims broadcast from the right (their names
    unify, rule 2) and ``attn_mask`` broadcasts to the weights ``(..., L, S)``: bool (True = may
    attend) or float (added to the scores).  ``is_causal`` may not be combined with ``attn_mask``, as
    in PyTorch; ``enable_gqa=True`` is not supported (repeat k and v along the heads instead).

    **The named form** (``dim=`` and ``key_dim=``): ``dim`` is the feature dim that q and k share and
    contract (e.g. ``"head_dim"``); ``key_dim`` the keys' sequence dim, in k and v (e.g. ``"key"``).
    The queries' sequence dim is inferred, the one dim of q that is neither ``dim`` nor a dim of k
    (``query_dim=`` names it when k and v lack a batch dim, as in multi-query attention).  q's other
    dims are batch dims; k and v have them by name, in any order, or lack them (they broadcast).  v
    has one value-feature dim besides.  The output has q's names, with ``dim`` replaced in place by
    v's feature name.  ``mask``: bool or float as above, every dim named, a subset of the weights'
    dims in any order (aligned by name).  ``return_weights=True`` returns ``(out, weights)``, weights
    named ``(*batch, seq, key_dim)``.

    Both: ``is_causal``: query i attends keys j <= i (top-left aligned).  A query with no key to
    attend gets zero weights and a zero output.  ``scale`` defaults to ``1/sqrt(E)``; ``dropout_p``
    drops weights (with the backend's random stream, seeded by ``nt.manual_seed``) and scales the
    rest by ``1/(1-p)``.
    """
    q, k, v = query, key, value
    for label, t in (("q", q), ("k", k), ("v", v)):
        tensor_arg(t, _OP, label)
    for label, n in (("dim", dim), ("key_dim", key_dim), ("query_dim", query_dim)):
        if not isinstance(n, str) and n is not None:
            raise TypeError(f"{_OP}: {label}= must be a dim name (str), got {type(n).__name__} {n!r}.")
    named = dim is not None or key_dim is not None
    if named and (dim is None or key_dim is None):
        raise TypeError(f"{_OP}: the named form takes both dim= (the feature dim) and key_dim= (the keys' sequence "
                        f"dim), got dim={dim!r}, key_dim={key_dim!r}; without either, q, k and v are PyTorch's "
                        "(..., L, E), (..., S, E), (..., S, Ev).")
    if named and attn_mask is not None:
        raise TypeError(f"{_OP}: with dim= the mask is aligned by name: give it as mask=, not attn_mask= (which "
                        "is PyTorch's mask, broadcast by position to (..., L, S)).")
    if not named and (mask is not None or query_dim is not None or return_weights):
        raise TypeError(f"{_OP}: mask=, query_dim= and return_weights= belong to the named form (dim=, key_dim=); "
                        "PyTorch's form takes attn_mask=, broadcast by position to (..., L, S).")
    if enable_gqa:
        raise NotImplementedError(f"{_OP}: enable_gqa=True is not supported; repeat k and v along the heads "
                                  "(k.repeat_interleave) or use the named form, where k and v may lack the head dim.")
    if attn_mask is not None and is_causal:
        raise ValueError(f"{_OP}: attn_mask and is_causal=True cannot be given together (as in PyTorch); fold the "
                         "causal mask into attn_mask.")
    dtype = q.dtype
    if dtype.kind != "f" or k.dtype != dtype or v.dtype != dtype:
        raise TypeError(f"{_OP}: q, k and v must have one floating-point dtype, got {q.dtype!r}, {k.dtype!r}, "
                        f"{v.dtype!r}. Convert with .to(dtype) first.")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{_OP}: dropout_p must be in [0, 1], got {dropout_p!r}.")
    if named:
        plan = _names.attention(q._names, k._names, v._names, dim, key_dim, query_dim, _OP)
        mask = _mask_arg(mask, dtype)
        m_src = None if mask is None else _names.attention_mask(mask._names, plan[4], q._names, k._names,
                                                                v._names, _OP)
    else:
        mask = _mask_arg(attn_mask, dtype)
        q_names, q_src, k_src, v_src, m_src, out_names, weights_names = _names.attention_positional(
            q._names, k._names, v._names, None if mask is None else mask._names, _OP)
        if len(q_names) != q.ndim:
            q = _reshape(q, (1,) * (len(q_names) - q.ndim) + tuple(q.shape), q_names)
        plan = (q_src, k_src, v_src, out_names, weights_names)
    q_src, k_src, v_src, out_names, weights_names = plan
    _check_sizes(q, k, v, mask, plan, m_src)
    if scale is None:
        d = q.shape[q_src[-1]]
        scale = 1.0 / math.sqrt(d) if d else 1.0
    params = dict(q_src=q_src, k_src=k_src, v_src=v_src, m_src=m_src, scale=float(scale),
                  is_causal=bool(is_causal), dropout_p=float(dropout_p))
    if _fusable(q._B, q, k, v, mask, m_src, dropout_p, return_weights):
        return apply(_FusedAttention, (q, k, v, mask), out_names, **params)
    if return_weights:
        return apply(_AttentionWeights, (q, k, v, mask), (out_names, weights_names), **params)
    return apply(_Attention, (q, k, v, mask), out_names, **params)


def causal_mask(size: int, key_size: Optional[int] = None, *, dim: str = "seq", key_dim: str = "key",
                device: str = "cpu") -> Tensor:
    """Bool mask named ``(dim, key_dim)``, shape ``(size, key_size)``: True where key j <= query i."""
    n, m = int_sizes((size, size if key_size is None else key_size), "causal_mask", nonnegative=True)
    names = _names.validate((dim, key_dim), 2, "causal_mask")
    B = backends.get(device)
    return Tensor._make(_causal(B, n, m), names, B)

