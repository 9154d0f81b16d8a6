"""NumPy references of the fused CUDA kernels: the same algorithms, step by step, on the CPU.

Each function has the signature of the :class:`~namedtensor.backends.base.Backend` hook of the same
name (without ``self``); the CUDA kernels (:mod:`namedtensor.backends.cuda_kernels`) implement the
same functions for CuPy arrays.  The test suite runs every op through a backend whose hooks are
these functions and checks it against the unfused ops, so the algorithms are verified on machines
without a GPU; the GPU tests check the kernels against these references.

What the kernels do, and so what these do:

* **Precision.**  float16 input is computed in float32 (the kernels load half, accumulate in
  float, store half); float32 in float32, float64 in float64.  Results are rounded once, to the
  input's dtype; the statistics kept for a backward (the norms' mean and rstd, the attention's
  ``lse``) stay in the accumulation dtype.
* **Row reductions** (softmax, log-softmax, cross-entropy, LayerNorm/RMSNorm): one block per row,
  the maximum first, then the sum of ``exp(x - max)`` (two passes over the row).  Softmax over an
  axis that is not the last views the array as ``(outer, n, inner)`` and reduces over ``n`` with
  stride ``inner`` (:func:`_outer_n_inner`); nothing is transposed.
* **GELU**: elementwise, the exact erf form.
* **Adam/AdamW** (:func:`adamw_`): one launch per dtype over all the parameters ("multi-tensor
  apply"): a table of the tensors' sizes and a list of ``(tensor, start)`` chunks, each handled
  alone (a block on the GPU), parameters and state updated in place.
* **Attention** (:func:`attention`, :func:`attention_backward`): FlashAttention-2.  The forward
  walks blocks of ``block_m`` queries and, for each, blocks of ``block_n`` keys, keeping a running
  maximum ``m``, a running sum ``l`` and an output accumulator rescaled by ``exp(m_old - m_new)``;
  key blocks entirely above the causal diagonal are skipped, and the (Lq, Lk) score matrix is never
  formed.  The backward recomputes the probabilities block by block from the saved ``lse``, key
  blocks outer and query blocks inner (dQ is added to by every key block: atomics on the GPU).
  The blocks run over all the batch rows at once here (on the GPU: one program per (row, block)).
"""

from __future__ import annotations

import math

import numpy as np

from .numpy_backend import erf_series

try:
    from scipy.special import erf as _scipy_erf
except ImportError:  # scipy is optional: the series is as exact, only slower
    _scipy_erf = None

_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _acc(dtype) -> np.dtype:
    """The dtype a kernel accumulates ``dtype`` input in: float64 stays, the rest is float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _load(x):
    """``x`` as the kernel sees it once loaded: in its accumulation dtype."""
    return np.asarray(x).astype(_acc(x.dtype), copy=False)


def _erf(x):
    """erf in float64 (the reference of the kernels' ``erff``/``erf``), in ``x``'s dtype."""
    x64 = x.astype(np.float64)
    return (_scipy_erf(x64) if _scipy_erf is not None else erf_series(x64)).astype(x.dtype)


# ----------------------------------------------------------------------------- softmax


def _outer_n_inner(x, axis: int):
    """``x`` seen as ``(outer, n, inner)``, ``n`` along ``axis``: the kernels' view of a reduction over
    any axis of a row-major array (rows of ``n`` elements ``inner`` apart)."""
    shape = x.shape
    axis = axis % len(shape)
    return np.ascontiguousarray(x).reshape(math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :]))


def softmax(x, axis: int, log: bool):
    """Softmax (log-softmax when ``log``) of ``x`` along ``axis``: per row, max, then the sum of
    ``exp(x - max)``, then the normalised values."""
    x3 = _load(_outer_n_inner(x, axis))
    top = x3.max(axis=1, keepdims=True)
    z = x3 - top
    e = np.exp(z)
    total = e.sum(axis=1, keepdims=True)
    y = z - np.log(total) if log else e / total
    return y.astype(x.dtype).reshape(x.shape)


def softmax_backward(y, g, axis: int, log: bool):
    """The input's gradient from the forward's output ``y``: ``y * (g - sum(g * y))`` (softmax) or
    ``g - exp(y) * sum(g)`` (log-softmax), the sums along ``axis``."""
    y3, g3 = _load(_outer_n_inner(y, axis)), _load(_outer_n_inner(g, axis))
    if log:
        gx = g3 - np.exp(y3) * g3.sum(axis=1, keepdims=True)
    else:
        gx = y3 * (g3 - (g3 * y3).sum(axis=1, keepdims=True))
    return gx.astype(np.result_type(y, g)).reshape(y.shape)


# ----------------------------------------------------------------------------- cross-entropy


def _logsumexp_rows(x):
    """Each row's log-sum-exp (``x`` loaded, (rows, C)): max, then the sum of ``exp(x - max)``."""
    top = x.max(axis=1)
    return top + np.log(np.exp(x - top[:, None]).sum(axis=1))


def cross_entropy(logits, target, ignore_index: int):
    """``(loss, lse)`` per row of ``logits`` (rows, C) for class indices ``target`` (rows,):
    ``lse`` the row's log-sum-exp, ``loss = lse - logits[r, target[r]]``, 0 where ``target`` is
    ``ignore_index``.  Both in the logits' dtype."""
    x = _load(logits)
    lse = _logsumexp_rows(x)
    valid = target != ignore_index
    picked = x[np.arange(x.shape[0]), np.where(valid, target, 0)]
    loss = np.where(valid, lse - picked, 0.0)
    return loss.astype(logits.dtype), lse.astype(logits.dtype)


def cross_entropy_backward(logits, lse, target, g, ignore_index: int):
    """``(softmax(logits) - onehot(target)) * g[:, None]``, from the forward's ``lse``; rows whose
    target is ``ignore_index`` get zeros."""
    x = _load(logits)
    valid = target != ignore_index
    p = np.exp(x - _load(lse)[:, None])
    rows = np.arange(x.shape[0])
    p[rows, np.where(valid, target, 0)] -= 1.0
    out = p * np.where(valid, _load(g), 0.0)[:, None]
    return out.astype(logits.dtype)


# ----------------------------------------------------------------------------- GELU


def gelu(x):
    """Exact GELU and the normal CDF it multiplies by: ``(x * Phi(x), Phi(x))``."""
    xa = _load(x)
    cdf = (_erf(xa * xa.dtype.type(_INV_SQRT_2)) + 1) * 0.5
    return (xa * cdf).astype(x.dtype), cdf.astype(x.dtype)


def gelu_backward(x, cdf, g):
    """``g * (Phi(x) + x * phi(x))`` from the CDF the forward returned."""
    xa = _load(x)
    out = _load(g) * (_load(cdf) + xa * np.exp(xa * xa * -0.5) * _INV_SQRT_2PI)
    return out.astype(np.result_type(x, g))


# ----------------------------------------------------------------------------- LayerNorm / RMSNorm


def norm_rows(x, n: int, w, b, eps: float, centered: bool):
    """LayerNorm (``centered``) or RMSNorm of the rows of ``n`` elements of ``x``: per row the mean
    (LayerNorm), then the mean square of the centred row, ``rstd = 1 / sqrt(that + eps)``.  Returns
    ``(y, mean, rstd)``, the statistics (rows,) in the accumulation dtype, float32 for float16 input
    as in PyTorch (a float16 mean would lose the rows whose spread is small beside their mean;
    ``mean`` None for RMSNorm)."""
    xa = _load(x).reshape(-1, n)
    mean = xa.mean(axis=1) if centered else None
    xc = xa - mean[:, None] if centered else xa
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=1) + eps)
    y = xc * rstd[:, None]
    if w is not None:
        y = y * _load(w)
    if b is not None:
        y = y + _load(b)
    return y.astype(x.dtype).reshape(x.shape), mean, rstd


def norm_rows_backward(x, n: int, mean, rstd, w, g, want_x: bool, want_w: bool, want_b: bool):
    """The gradients ``(gx, gw, gb)`` of :func:`norm_rows` (each None unless wanted):
    ``gx = rstd (u - mean(u) - xhat mean(u xhat))`` with ``u = g w`` (no ``mean(u)`` for RMSNorm),
    ``gw = sum over rows of g xhat``, ``gb = sum over rows of g``."""
    xa, ga = _load(x).reshape(-1, n), _load(g).reshape(-1, n)
    r = _load(rstd)[:, None]
    xhat = (xa if mean is None else xa - _load(mean)[:, None]) * r
    gw = (ga * xhat).sum(axis=0).astype(x.dtype) if want_w else None
    gb = ga.sum(axis=0).astype(x.dtype) if want_b else None
    gx = None
    if want_x:
        u = ga if w is None else ga * _load(w)
        inner = u - xhat * (u * xhat).mean(axis=1, keepdims=True)
        if mean is not None:
            inner = inner - u.mean(axis=1, keepdims=True)
        gx = (inner * r).astype(x.dtype).reshape(x.shape)
    return gx, gw, gb


# ----------------------------------------------------------------------------- Adam / AdamW

#: elements per chunk of :func:`adamw_` (one GPU block's share of a tensor)
CHUNK = 65536


def adamw_(params, grads, exp_avgs, exp_avg_sqs, *, lr: float, beta1: float, beta2: float, eps: float,
           weight_decay: float, step: int, decoupled: bool, chunk: int = CHUNK) -> None:
    """One Adam (``decoupled=False``: weight decay added to the grad, L2) or AdamW (``decoupled``:
    ``p *= 1 - lr * weight_decay``) step, in place, on lists of arrays of one dtype: PyTorch's
    formulas, ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
    ``p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)``.

    Multi-tensor apply: the tensors are flattened, cut into chunks of ``chunk`` elements listed as
    ``(tensor, start)``, and each chunk is loaded, updated in the accumulation dtype and stored."""
    arrays = [params, grads, exp_avgs, exp_avg_sqs]
    flats = [[a.reshape(-1) for a in group] for group in arrays]  # copies where an array is not contiguous
    table = [(i, start) for i, p in enumerate(flats[0]) for start in range(0, p.size, chunk)]
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    for i, start in table:
        k = slice(start, start + chunk)
        p, g, m, v = (_load(f[i][k]) for f in flats)
        if weight_decay != 0:
            if decoupled:
                p = p * (1.0 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        p = p - (lr / bc1) * m / (np.sqrt(v) / bc2_sqrt + eps)
        for f, new in ((flats[0], p), (flats[2], m), (flats[3], v)):
            f[i][k] = new
    for group, flat in ((params, flats[0]), (exp_avgs, flats[2]), (exp_avg_sqs, flats[3])):
        for a, f in zip(group, flat):
            if not np.shares_memory(a, f):  # a non-contiguous array was updated through a copy
                a[...] = f.reshape(a.shape)


# ----------------------------------------------------------------------------- attention


def _allowed(i0: int, i1: int, j0: int, j1: int, causal: bool, key_keep):
    """The (batch, queries i0:i1, keys j0:j1) pairs that may attend (broadcastable bool), or None."""
    allowed = None
    if causal:
        allowed = (np.arange(i0, i1)[:, None] >= np.arange(j0, j1)[None, :])[None]
    if key_keep is not None:
        keep = key_keep[:, None, j0:j1]
        allowed = keep if allowed is None else allowed & keep
    return allowed


def attention(q, k, v, *, scale: float, causal: bool, key_keep, block_m: int = 64, block_n: int = 64):
    """Scaled dot-product attention, FlashAttention-2's forward: ``(out, lse)``.

    ``q`` (N, Lq, D), ``k`` (N, Lk, D), ``v`` (N, Lk, Dv); ``key_keep`` None or bool (N, Lk), True =
    may attend; ``causal``: query i attends key j only when j <= i.  ``out`` (N, Lq, Dv) in q's
    dtype, ``lse`` (N, Lq) the log-sum-exp of each query's scaled, masked scores (float32 for
    float16 input); a query with no key to attend gets ``out = 0`` and ``lse = -inf``.
    """
    n, n_query, _ = q.shape
    n_key, n_value = k.shape[1], v.shape[2]
    acc = _acc(q.dtype)
    out = np.zeros((n, n_query, n_value), q.dtype)
    lse = np.full((n, n_query), -np.inf, acc)
    for i0 in range(0, n_query, block_m):
        i1 = min(i0 + block_m, n_query)
        qb = _load(q[:, i0:i1]) * acc.type(scale)
        top = np.full((n, i1 - i0), -np.inf, acc)  # running maximum
        total = np.zeros((n, i1 - i0), acc)  # running sum of exp(s - top)
        o = np.zeros((n, i1 - i0, n_value), acc)
        # key blocks starting after the last query of this block lie above the causal diagonal
        stop = min(n_key, i1) if causal else n_key
        for j0 in range(0, stop, block_n):
            j1 = min(j0 + block_n, n_key)
            s = qb @ _load(k[:, j0:j1]).transpose(0, 2, 1)
            allowed = _allowed(i0, i1, j0, j1, causal, key_keep)
            if allowed is not None:
                s = np.where(allowed, s, -np.inf)
            new_top = np.maximum(top, s.max(axis=2))
            shift = np.where(np.isfinite(new_top), new_top, 0.0)  # rows with no key yet: exp(-inf) = 0
            rescale = np.exp(top - shift)
            p = np.exp(s - shift[..., None])
            total = total * rescale + p.sum(axis=2)
            o = o * rescale[..., None] + p @ _load(v[:, j0:j1])
            top = new_top
        some = total > 0
        safe = np.where(some, total, 1.0)
        out[:, i0:i1] = np.where(some[..., None], o / safe[..., None], 0.0).astype(q.dtype)
        lse[:, i0:i1] = np.where(some, top + np.log(safe), -np.inf)
    return out, lse


def attention_backward(q, k, v, out, lse, g, *, scale: float, causal: bool, key_keep, block_m: int = 64,
                       block_n: int = 64):
    """FlashAttention-2's backward: ``(dq, dk, dv)`` from the forward's ``out`` and ``lse`` and the
    output's gradient ``g``, the probabilities recomputed block by block, ``P = exp(S - lse)``:
    ``dV = P^T dO``, ``dS = P * (dO V^T - rowsum(dO * O))``, ``dK = scale dS^T Q``, ``dQ = scale dS K``."""
    n_query = q.shape[1]
    n_key = k.shape[1]
    acc = _acc(q.dtype)
    delta = (_load(g) * _load(out)).sum(axis=2)  # rowsum(dO * O) = rowsum(dP * P)
    finite = np.isfinite(lse)
    lse_safe = np.where(finite, lse, 0.0).astype(acc)
    dq = np.zeros(q.shape, acc)
    dk = np.zeros(k.shape, k.dtype)
    dv = np.zeros(v.shape, v.dtype)
    for j0 in range(0, n_key, block_n):
        j1 = min(j0 + block_n, n_key)
        kb, vb = _load(k[:, j0:j1]), _load(v[:, j0:j1])
        dkb = np.zeros(kb.shape, acc)
        dvb = np.zeros(vb.shape, acc)
        # query blocks ending before this key block's first key lie above the causal diagonal
        first = (j0 // block_m) * block_m if causal else 0
        for i0 in range(first, n_query, block_m):
            i1 = min(i0 + block_m, n_query)
            qb, gb = _load(q[:, i0:i1]), _load(g[:, i0:i1])
            s = (qb * acc.type(scale)) @ kb.transpose(0, 2, 1)
            allowed = finite[:, i0:i1, None]
            extra = _allowed(i0, i1, j0, j1, causal, key_keep)
            if extra is not None:
                allowed = allowed & extra
            p = np.exp(np.where(allowed, s - lse_safe[:, i0:i1, None], -np.inf))
            dvb += p.transpose(0, 2, 1) @ gb
            dp = gb @ vb.transpose(0, 2, 1)
            ds = p * (dp - delta[:, i0:i1, None])
            dkb += scale * (ds.transpose(0, 2, 1) @ qb)
            dq[:, i0:i1] += scale * (ds @ kb)
        dk[:, j0:j1] = dkb
        dv[:, j0:j1] = dvb
    return dq.astype(q.dtype), dk, dv
