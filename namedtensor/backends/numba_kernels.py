"""Numba kernels for the NumPy backend's row hooks, which compiled graphs run in the backend's place.

``norm_rows`` and ``norm_rows_backward`` (LayerNorm and RMSNorm), ``add_norm_rows`` and its backward (a
residual add and the norm of its result) and ``softmax_columns`` with its
backward (attention's softmax over the keys) compute what the backend's hooks of those names do
(base.py describes them), taking each row through all its steps while it is in the cache where the
NumPy backend takes a pass over a whole block per step; the exponentials are numba_math's vectorized
ones, with products and sums contracted into fused multiply-adds (one rounding for two: values may
differ from the hooks' by an ulp).  The norms' sums accumulate in float64 and their statistics come
back in the input's dtype, from which the elementwise terms are computed in that dtype, as the hooks
compute them; the softmax sums in the input's dtype, as NumPy does.  Rows are split
among ``nt.get_num_threads()`` threads when there are enough of them (the kernels release the GIL);
the weight's and the bias's gradients are summed per thread, then over the threads.  ``attention`` and its backward run the
NumPy backend's blocks (numpy_attention.py) with each block's elementwise steps one call of a kernel
here, on the pool's thread that has the block.
Inputs the kernels do not take (other dtypes, other layouts, empty rows) go to the NumPy backend's
hooks.

nt.compile hands this module to the nodes of the ops that take a ``rows`` param (``Op.row_kernels``:
layer and RMS norm, attention); importing it imports Numba.  ``adam_`` is the update of
``Adam(fused=True)`` and ``AdamW(fused=True)`` on the CPU: the backend's Adam step in one pass over each
parameter instead of a chunked pass per operation.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import numpy_attention
from .numba_math import exp_of
from .numpy_kernels import takes_rows
from .thread_pool import get_num_threads, split, split_by_part
from .update_math import adam_coefficients, adam_update

__all__ = ["norm_rows", "norm_rows_backward", "add_norm_rows", "add_norm_rows_backward", "softmax_columns",
           "softmax_columns_backward", "attention", "attention_backward", "adam_"]

#: elements of a block before it is split among threads: a hand-off costs about 30 microseconds, a row of
#: a few hundred elements about a tenth of one (the benchmark block's norms, 2048 rows of 256, take 90 to
#: 200 us a pass on one thread and 100 to 165 split in two: the forwards about break even)
_PARALLEL_FROM = 1 << 18


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _forward(first, last, x, res, h, w, b, y, mean, rstd, eps):
    n = x.shape[1]
    zero = np.zeros(1, y.dtype)[0]
    for i in range(first, last):
        row = x[i]
        if h is not None:  # add_norm_rows: the sum is normalised while its row is in the cache
            row = h[i]
            xi, ri = x[i], res[i]
            for j in range(n):
                row[j] = xi[j] + ri[j]
        m = 0.0
        if mean is not None:  # LayerNorm (Numba drops the branch for RMSNorm's None)
            for j in range(n):
                m += row[j]
            m /= n
            mean[i] = m
        v = 0.0
        for j in range(n):
            d = row[j] - m
            v += d * d
        rstd[i] = 1.0 / math.sqrt(v / n + eps)
        # the output from the statistics in the row's dtype, as the backend computes it: float32 lanes
        # are twice float64's (the benchmark block's norm, 2048 rows of 256: 150 against 89 us)
        r = rstd[i]
        mu = zero if mean is None else mean[i]
        out = y[i]
        if w is None:
            for j in range(n):
                out[j] = (row[j] - mu) * r
        elif b is None:
            for j in range(n):
                out[j] = (row[j] - mu) * r * w[j]
        else:
            for j in range(n):
                out[j] = (row[j] - mu) * r * w[j] + b[j]


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _backward(first, last, x, g, mean, rstd, w, gx, gw, gb, g_add):
    n = x.shape[1]
    # the elementwise terms in the row's dtype, as the forward's output: the float64 ones are rounded
    # through this array first (Numba would widen a whole loop to float64 with them), the sums stay float64
    terms = np.empty(2, x.dtype)
    zero = np.zeros(1, x.dtype)[0]
    for i in range(first, last):
        row, grow = x[i], g[i]
        mu = zero if mean is None else mean[i]
        r = rstd[i]
        if gw is not None:
            for j in range(n):
                gw[j] += grow[j] * ((row[j] - mu) * r)
        if gb is not None:
            for j in range(n):
                gb[j] += grow[j]
        if gx is None:
            continue
        s_uxhat = 0.0
        s_u = 0.0
        for j in range(n):
            u = grow[j] if w is None else grow[j] * w[j]
            s_uxhat += u * (row[j] - mu)
            s_u += u
        terms[0] = s_uxhat * r / n
        terms[1] = 0.0 if mean is None else s_u / n
        c, d = terms[0], terms[1]
        out = gx[i]
        # the residual's gradient added in the same loop: a pass of its own made the block's add + norm
        # backward 205 to 221 us instead of 175 to 189 (1 thread)
        if g_add is None:
            for j in range(n):
                u = grow[j] if w is None else grow[j] * w[j]
                out[j] = r * (u - (row[j] - mu) * r * c - d)
        else:
            extra = g_add[i]
            for j in range(n):
                u = grow[j] if w is None else grow[j] * w[j]
                out[j] = r * (u - (row[j] - mu) * r * c - d) + extra[j]


def _parts(rows: int, n: int) -> int:
    return max(1, min(get_num_threads(), rows)) if rows * n >= _PARALLEL_FROM else 1


def _backend():
    from . import cpu

    return cpu()


def norm_rows(x, n: int, w, b, eps: float, centered: bool):
    """``Backend.norm_rows``."""
    if not takes_rows(x, w, b):
        return _backend().norm_rows(x, n, w, b, eps, centered)
    y, mean, rstd = _norm_rows(x.reshape(-1, n), None, w, b, eps, centered)
    return y.reshape(x.shape), mean, rstd


def add_norm_rows(x, r, n: int, w, b, eps: float, centered: bool):
    """``Backend.add_norm_rows``, in one pass over the rows."""
    if not (takes_rows(x, r, w, b) and r.flags.c_contiguous and r.shape == x.shape):
        return _backend().add_norm_rows(x, r, n, w, b, eps, centered)
    y, mean, rstd, h = _norm_rows(x.reshape(-1, n), r.reshape(-1, n), w, b, eps, centered)
    return h.reshape(x.shape), y.reshape(x.shape), mean, rstd


def _norm_rows(x2, r2, w, b, eps: float, centered: bool):
    """The norm of the rows of ``x2`` (of ``x2 + r2`` where ``r2`` is given, also returned)."""
    rows = x2.shape[0]
    y = np.empty(x2.shape, x2.dtype)
    h = None if r2 is None else np.empty(x2.shape, x2.dtype)
    mean = np.empty(rows, x2.dtype) if centered else None
    rstd = np.empty(rows, x2.dtype)
    split(_parts(rows, x2.shape[1]), rows, _forward, x2, r2, h, w, b, y, mean, rstd, float(eps))
    return (y, mean, rstd) if h is None else (y, mean, rstd, h)


def norm_rows_backward(x, n: int, mean, rstd, w, g, want_x: bool, want_w: bool, want_b: bool):
    """``Backend.norm_rows_backward``."""
    if not takes_rows(x, w, g, mean, rstd):
        return _backend().norm_rows_backward(x, n, mean, rstd, w, g, want_x, want_w, want_b)
    return _norm_rows_backward(x, n, mean, rstd, w, g, None, want_x, want_w, want_b)


def add_norm_rows_backward(x, n: int, mean, rstd, w, g, g_add, want_w: bool, want_b: bool):
    """``Backend.add_norm_rows_backward``: ``g_add`` is added to the input's gradient in the same pass."""
    if not (takes_rows(x, w, g, mean, rstd, g_add) and g_add.shape == x.shape):
        return _backend().add_norm_rows_backward(x, n, mean, rstd, w, g, g_add, want_w, want_b)
    return _norm_rows_backward(x, n, mean, rstd, w, g, g_add, True, want_w, want_b)


def _norm_rows_backward(x, n: int, mean, rstd, w, g, g_add, want_x: bool, want_w: bool, want_b: bool):
    x2 = x.reshape(-1, n)
    g2 = np.ascontiguousarray(np.reshape(g, (-1, n)), dtype=x.dtype)
    add2 = None if g_add is None else np.ascontiguousarray(np.reshape(g_add, (-1, n)))
    rows = x2.shape[0]
    parts = _parts(rows, n)
    gx = np.empty(x2.shape, x.dtype) if want_x else None
    gw = np.zeros((parts, n)) if want_w else None  # float64 sums, one row per thread
    gb = np.zeros((parts, n)) if want_b else None
    split_by_part(parts, rows, lambda k, first, last: _backward(
        first, last, x2, g2, mean, rstd, w, gx, None if gw is None else gw[k], None if gb is None else gb[k], add2))
    return (None if gx is None else gx.reshape(x.shape),
            None if gw is None else gw.sum(axis=0).astype(x.dtype),
            None if gb is None else gb.sum(axis=0).astype(x.dtype))


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract", "reassoc"})
def _softmax_columns(first, last, e, inv, lse, masked, causal):
    n_key, n_query = e.shape[1], e.shape[2]
    top = np.empty(n_query, e.dtype)
    total = np.empty(n_query, e.dtype)  # the input's dtype: float64 sums would halve the lanes (NumPy sums so too)
    # 0 and -inf in the scores' dtype: a float64 constant would widen the loops to float64
    zero, minus_inf = np.zeros(1, e.dtype)[0], np.full(1, -np.inf, e.dtype)[0]
    for i in range(first, last):
        s = e[i]
        top[:] = minus_inf
        for k in range(n_key):
            row = s[k]
            # causal: the queries before key k get -inf added to its score, as the backend adds it (a
            # select, so the loop still vectorizes)
            cut = min(k, n_query) if causal else 0
            for q in range(n_query):
                score = row[q] + (minus_inf if q < cut else zero)
                top[q] = score if (score > top[q] or score != score) else top[q]  # NumPy's max: a NaN wins
        if masked:
            for q in range(n_query):
                top[q] = top[q] if math.isfinite(top[q]) else zero
        total[:] = zero
        for k in range(n_key):
            row = s[k]
            cut = min(k, n_query) if causal else 0
            for q in range(n_query):
                weight = exp_of(row[q] + (minus_inf if q < cut else zero) - top[q])
                row[q] = weight
                total[q] += weight
        for q in range(n_query):
            inv[i, q] = 1.0 / (1.0 if masked and total[q] == 0.0 else total[q])
        if lse is not None:  # attention's blocks: log(0) = -inf for a query with no key
            for q in range(n_query):
                lse[i, q] = top[q] + math.log(total[q])


def softmax_columns(e, masked: bool, causal: bool = False):
    """``Backend.softmax_columns``; the exponentials are written over ``e``."""
    if not takes_rows(e):
        return _backend().softmax_columns(e, masked, causal)
    n_key, n_query = e.shape[-2], e.shape[-1]
    e3 = e.reshape(math.prod(e.shape[:-2]), n_key, n_query)
    inv = np.empty((e3.shape[0], n_query), e.dtype)
    split(_parts(e3.shape[0], n_key * n_query), e3.shape[0], _softmax_columns, e3, inv, None, masked, causal)
    return e, inv.reshape(e.shape[:-2] + (1, n_query))


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _softmax_columns_backward(first, last, d, e, c):
    for i in range(first, last):
        ds, es, cs = d[i], e[i], c[i]
        for k in range(ds.shape[0]):
            drow, erow = ds[k], es[k]
            for q in range(ds.shape[1]):
                drow[q] = (drow[q] - cs[q]) * erow[q]


def softmax_columns_backward(d, e, c):
    """``Backend.softmax_columns_backward``, in one pass over ``d``."""
    if not (takes_rows(d, e, c) and e.shape == d.shape and c.shape == d.shape[:-2] + (1, d.shape[-1])
            and c.flags.c_contiguous):
        return _backend().softmax_columns_backward(d, e, c)
    n_key, n_query = d.shape[-2], d.shape[-1]
    d3 = d.reshape(math.prod(d.shape[:-2]), n_key, n_query)
    e3 = e.reshape(d3.shape)
    c2 = c.reshape(d3.shape[0], n_query)
    split(_parts(d3.shape[0], n_key * n_query), d3.shape[0], _softmax_columns_backward, d3, e3, c2)
    return d


# ----------------------------------------------------------------------------- attention's blocks


def _softmax_block(s):
    """numpy_attention.softmax_block in one kernel call (this thread: the blocks are the pool's work); a
    query with no key gets an inverse sum of 1 here, 0 there, its exponentials being 0 either way."""
    n_key, n_query = s.shape[-2], s.shape[-1]
    e3 = s.reshape(-1, n_key, n_query)
    inv = np.empty((e3.shape[0], n_query), s.dtype)
    lse = np.empty_like(inv)
    _softmax_columns(0, e3.shape[0], e3, inv, lse, True, False)
    return lse.reshape(s.shape[:-2] + (n_query,)), inv.reshape(s.shape[:-2] + (1, n_query))


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _grad_block(p, lse, ds, delta):
    for i in range(p.shape[0]):
        top, c = lse[i], delta[i]
        for k in range(p.shape[1]):
            prow, drow = p[i, k], ds[i, k]  # prow holds the scores, which become the probabilities
            for q in range(p.shape[2]):
                w = exp_of(prow[q] - top[q])
                prow[q] = w
                drow[q] = (drow[q] - c[q]) * w


def _grad_rows(p, lse, ds, delta) -> None:
    """numpy_attention.grad_block in one pass (``p`` and ``ds`` fresh contiguous blocks)."""
    n_key, n_query = p.shape[-2], p.shape[-1]
    n = ds.size // (n_key * n_query)

    def rows(a):
        return np.ascontiguousarray(a).reshape(n, n_query)

    _grad_block(p.reshape(n, n_key, n_query), rows(lse), ds.reshape(n, n_key, n_query), rows(delta))


@njit(cache=True, nogil=True, error_model="numpy")
def _transpose_scaled(a, scale, out):
    for b in range(a.shape[0]):
        for h in range(a.shape[1]):
            for i in range(a.shape[2]):
                for j in range(a.shape[3]):
                    out[b, h, j, i] = a[b, h, i, j] * scale


def _transposed(a, scale):
    """numpy_attention.transposed_block made contiguous, so that BLAS reads its operand untransposed: a
    block's scores ``k @ q^T`` (8 heads of 128 x 32 by 32 x 128, float32) took 54 us with ``q^T`` a view and
    34 with it contiguous, and this copy takes 8.5 (NumPy's transposing copy 29)."""
    n, d = a.shape[-2], a.shape[-1]
    out = np.empty(a.shape[:-2] + (d, n), a.dtype)
    lead = a.shape[-3] if a.ndim > 2 else 1  # 4 dims: a view of a block of heads (a copy only for odd layouts)
    _transpose_scaled(a.reshape(-1, lead, n, d), a.dtype.type(scale), out.reshape(-1, lead, d, n))
    return out


_STEPS = numpy_attention.Steps(_softmax_block, _grad_rows, _transposed)


def attention(q, k, v, *, scale: float, causal: bool, key_keep):
    """``Backend.attention`` block by block as the NumPy backend runs it (numpy_attention.py), each
    block's softmax one kernel call here."""
    if not numpy_attention.takes(q, k, v):
        return _backend().attention(q, k, v, scale=scale, causal=causal, key_keep=key_keep)
    return numpy_attention.attention(q, k, v, scale=scale, causal=causal, key_keep=key_keep, steps=_STEPS)


def attention_backward(q, k, v, out, lse, g, *, scale: float, causal: bool, key_keep):
    """``Backend.attention_backward`` block by block, each block's gradient step one pass here."""
    if not numpy_attention.takes(q, k, v, out, g):  # then the forward took them neither: lse is the lse
        return _backend().attention_backward(q, k, v, out, lse, g, scale=scale, causal=causal, key_keep=key_keep)
    return numpy_attention.attention_backward(q, k, v, out, lse, g, scale=scale, causal=causal, key_keep=key_keep,
                                              steps=_STEPS)


# ----------------------------------------------------------------------------- Adam(fused=True)

#: elements of all the parameters before their update is split among threads: about a nanosecond each,
#: against tens of microseconds for a hand-off (the benchmark block's 0.8 million: 0.64 ms on one thread)
_ADAM_PARALLEL_FROM = 1 << 17


# no contracted multiply-adds here: the fused update is the grouped one bit for bit
@njit(cache=True, nogil=True, error_model="numpy")
def _adam(first, last, x, g, m, v, v_max, negate, decay, l2, beta1, keep1, beta2, keep2, eps, step_size):
    # update_math.adam_chunk's operations in its order, each rounded to the parameter's dtype as NumPy's
    # float32 loops round them: the same values, bit for bit, in one pass.  The loop runs over slices
    # indexed from 0: an index that might be negative (wrapped around) keeps LLVM from vectorizing.
    xs, gs, ms, vs = x[first:last], g[first:last], m[first:last], v[first:last]
    tops = v_max[first:last] if v_max is not None else None
    for i in range(last - first):
        gi = -gs[i] if negate else gs[i]
        xi = xs[i]
        if decay is not None:
            xi = xi * decay
        if l2 is not None:
            gi = gi + xi * l2
        vi = vs[i] * beta2 + gi * gi * keep2
        mi = ms[i] * beta1 + gi * keep1
        vs[i] = vi
        ms[i] = mi
        if tops is not None:
            top = tops[i]
            vi = vi if (vi > top or vi != vi) else top  # np.maximum: a NaN wins
            tops[i] = vi
        xs[i] = xi - mi / (np.sqrt(vi) + eps) * step_size


def adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *, lr: float, beta1: float, beta2: float,
          eps: float, weight_decay: float, step: int, decoupled: bool, maximize: bool) -> None:
    """One Adam step (``decoupled``: AdamW) in place, each parameter in one pass: what the backend's
    ``adamw_`` computes (with amsgrad's running maxima ``max_exp_avg_sqs``, a list or None, and
    ``maximize``), bit for bit.  The parameters' elements, end to end, are cut into one run per thread
    (a run may span several parameters: a model's many small ones share the threads too).  Arrays the
    kernel does not take (not float32/64, not C-contiguous) are updated by the backend's chunked
    passes instead."""
    eps, step_size, decay, l2 = adam_coefficients(lr, beta1, beta2, eps, weight_decay, step, decoupled)
    maxima = max_exp_avg_sqs if max_exp_avg_sqs is not None else [None] * len(params)
    work = []  # the kernel's arguments after (first, last), per parameter it takes
    for x, grad, m, v, v_max in zip(params, grads, exp_avgs, exp_avg_sqs, maxima):
        if not takes_rows(x, m, v, v_max) or not all(a is None or a.flags.c_contiguous for a in (m, v, v_max)):
            adam_update(_backend(), x, grad, m, v, v_max, beta1, beta2, eps, step_size, decay, l2, maximize)
            continue
        t = x.dtype.type
        work.append((x.reshape(-1), np.ascontiguousarray(grad, dtype=x.dtype).reshape(-1), m.reshape(-1),
                     v.reshape(-1), None if v_max is None else v_max.reshape(-1), maximize,
                     None if decay is None else t(decay), None if l2 is None else t(l2), t(beta1), t(1 - beta1),
                     t(beta2), t(1 - beta2), t(eps), t(step_size)))
    sizes = [args[0].size for args in work]
    total = sum(sizes)
    parts = max(1, min(get_num_threads(), total // _ADAM_PARALLEL_FROM))
    bounds = [total * p // parts for p in range(parts + 1)]

    def run(first: int, last: int) -> None:
        start = 0
        for args, n in zip(work, sizes):
            lo, hi = max(bounds[first] - start, 0), min(bounds[last] - start, n)
            if lo < hi:
                _adam(lo, hi, *args)
            start += n

    split(parts, parts, run)
