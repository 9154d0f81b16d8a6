"""Attention for the NumPy backend, block by block: ``attention`` and ``attention_backward``, the
backend's ``Backend.attention`` hooks (base.py states what they compute) for float32 and float64.

The scores of a whole batch (16 sequences of 128 tokens, 8 heads: 8 MB in float32) do not fit in the
cache, and every pass of the softmax over them streams them through memory.  Here the batch is cut
into blocks of heads (whole trailing batch dims where they fit: each block costs a few NumPy calls)
and, for long sequences, of queries, whose scores fit in L2, about :data:`BLOCK_SCORES` elements.
Each block runs its products and its whole softmax while it is in the cache, and the blocks are
shared out among the threads of :mod:`.thread_pool`, each block's products one single-threaded BLAS
call per head.  Only the output and the log-sum-exp of each query's scores
are kept for the backward, which recomputes a block's probabilities from them (FlashAttention's
scheme); the materialised path kept every exponential, the size of the scores.  nt.compile's Numba
kernels run the same blocks with their own elementwise steps (:class:`Steps`), and hand BLAS the
operands it would read transposed (the queries and the output's gradient, scaled) as contiguous copies
with their axes swapped, which NumPy's transposing copy makes too slowly to gain.  Their backward
recomputes the exponentials too: keeping them made the benchmark block's compiled step 1.3 to 1.7%
faster, for 8 MB more at its peak, and they grow as the square of the sequence (134 MB for its batch at
512 tokens).

The scores are key-major, ``(heads, key, query)``: the softmax reduces along the second-to-last
axis, which NumPy vectorises across the contiguous rows.  The outputs and gradients are laid out as
their operands are (``empty_like``), so a head-major view of a ``(batch, seq, heads, dim)`` tensor
gets its result back in that tensor's order, ready for the next reshape without a copy.

Measured eagerly through ``scaled_dot_product_attention`` (batch 16, 8 heads, 128 queries and keys,
head dim 32, float32, this 2-core machine), blocks against the materialised path: forward 4.1 against
3.9 ms and forward plus backward 11.8 against 15.4 ms on 1 thread; 2.3 against 3.4 and 6.7 against
17.3 ms on 2.  Blocks of 4 and 2 heads were slower than these of 8 (the per-block NumPy calls).
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Tuple

import numpy as np

from . import numpy_kernels
from .thread_pool import get_num_threads, split

#: scores per block: 512 KiB of float32, in L2 beside the block's operands
BLOCK_SCORES = 1 << 17
#: the fewest queries of a block cut along the queries: fewer make each product too small for BLAS
MIN_QUERIES = 64


def takes(*arrays) -> bool:
    """Whether these kernels take the arrays: float32 or float64, one dtype, no empty dim."""
    dtype = arrays[0].dtype
    return dtype in (np.float32, np.float64) and all(a.dtype == dtype and a.size for a in arrays)


def _blocks(batch: Tuple[int, ...], n_query: int, n_key: int, budget: int, min_queries: int) -> List[tuple]:
    """The blocks: ``(index, queries)`` pairs, ``index`` ints for the outer batch dims, a slice of the next
    one and whole trailing dims (as many heads as about ``budget`` scores take), ``queries`` the query
    slices of that block (pieces of about ``budget`` scores, of at least ``min_queries`` queries)."""
    per_head = n_query * n_key
    step = n_query if per_head <= budget else min(n_query, max(min_queries, budget // n_key))
    queries = [slice(i, min(i + step, n_query)) for i in range(0, n_query, step)]
    axis, inner = len(batch), 1  # batch[axis:] whole in every block: ``inner`` heads
    while axis > 0 and inner * batch[axis - 1] * per_head <= budget:
        axis -= 1
        inner *= batch[axis]
    if axis == 0:
        return [((slice(None),) * len(batch), queries)]
    size, count = batch[axis - 1], max(1, budget // (inner * per_head))
    whole = (slice(None),) * (len(batch) - axis)
    return [(outer + (slice(lo, min(lo + count, size)),) + whole, queries)
            for outer in np.ndindex(*batch[:axis - 1]) for lo in range(0, size, count)]


def _run(blocks: list, work) -> None:
    """``work(block)`` for every block: shared among the pool's threads where the pool does the products
    (BLAS has one thread), else in order on this thread (BLAS threads each product)."""
    threads = min(get_num_threads(), len(blocks))
    if threads < 2 or not numpy_kernels.pool_does_products():
        for block in blocks:
            work(block)
        return

    def run(first: int, last: int) -> None:
        for block in blocks[first:last]:
            work(block)

    split(threads, len(blocks), run)


def _scores(k, qt, queries: slice, causal: bool, keep) -> np.ndarray:
    """Key-major scores ``k @ qt`` of one block, ``(heads, key, query)`` (``qt``: the scaled queries with
    their last two axes swapped), with -inf where a key may not be attended: after its query
    (``causal``) or not kept (``keep``: ``(heads, key)``)."""
    s = np.matmul(k, qt)
    if causal and queries.start + 1 < k.shape[-2]:
        later = np.arange(k.shape[-2])[:, None] > np.arange(queries.start, queries.stop)[None, :]
        np.copyto(s, -np.inf, where=later)
    if keep is not None:
        np.copyto(s, -np.inf, where=~keep[..., :, None])
    return s


def softmax_block(s):
    """The unnormalised softmax of one block's key-major scores ``s`` ``(..., key, query)``, over the keys:
    the exponentials ``exp(s - max)`` written over ``s``; returns each query's log-sum-exp ``(..., query)``
    (-inf for a query with no key) and the inverse sums ``(..., 1, query)`` (0 there: a zero output)."""
    top = s.max(axis=-2, keepdims=True)
    np.copyto(top, 0.0, where=~np.isfinite(top))  # no key to attend: exp(-inf - 0) = 0
    np.subtract(s, top, out=s)
    np.exp(s, out=s)
    total = s.sum(axis=-2, keepdims=True)
    with np.errstate(divide="ignore"):  # log(0) = -inf: the lse of a query with no key to attend
        lse = (top + np.log(total))[..., 0, :]
    return lse, np.divide(1.0, total, out=total, where=total != 0.0)


def transposed_block(a, scale):
    """``a * scale`` with its last two axes swapped, the second operand of a product: a view of the scaled
    copy (of ``a`` itself where ``scale`` is 1), which BLAS reads transposed."""
    return np.swapaxes(a if scale == 1 else a * scale, -1, -2)


def grad_block(p, lse, ds, delta) -> None:
    """One block's probabilities and the scores' gradient, key-major ``(..., key, query)``: ``p`` (the
    scores) becomes ``exp(p - lse)`` and ``ds`` (``dP^T``) becomes ``p * (ds - delta)``, where ``lse`` and
    ``delta`` (``rowsum(g * out)``, scaled as ``ds`` is) are ``(..., 1, query)`` and ``lse`` is +inf for a
    query with no key."""
    np.subtract(p, lse, out=p)
    np.exp(p, out=p)
    np.subtract(ds, delta, out=ds)
    np.multiply(ds, p, out=ds)


class Steps(NamedTuple):
    """The elementwise steps of a block and the layout of its products' second operands, in NumPy
    (:data:`NUMPY_STEPS`) or in kernels that compute the same (nt.compile's Numba kernels, whose
    ``transposed`` copies where NumPy's gives a view); they run on the pool's threads, one block at a
    time."""

    softmax: Callable  # softmax_block
    grad: Callable  # grad_block
    transposed: Callable  # transposed_block


NUMPY_STEPS = Steps(softmax_block, grad_block, transposed_block)


def attention(q, k, v, *, scale: float, causal: bool, key_keep, budget: int = BLOCK_SCORES,
              min_queries: int = MIN_QUERIES, steps: Steps = NUMPY_STEPS):
    """``Backend.attention`` for :func:`takes` arrays: ``(out, lse)``; ``budget`` and ``min_queries``
    size the blocks (:data:`BLOCK_SCORES`, :data:`MIN_QUERIES`)."""
    n_query, n_key = q.shape[-2], k.shape[-2]
    batch = tuple(q.shape[:-2])
    out = np.empty_like(q, shape=tuple(q.shape[:-1]) + (v.shape[-1],))
    lse = np.empty(batch + (n_query,), q.dtype)
    scale = q.dtype.type(scale)

    def work(block) -> None:
        at, pieces = block
        kb, vb = k[at], v[at]
        keep = None if key_keep is None else key_keep[at]
        for queries in pieces:
            qat = at + (queries,)
            s = _scores(kb, steps.transposed(q[qat], scale), queries, causal, keep)  # the scale paid on the small operand
            lse[qat], inv = steps.softmax(s)
            o = out[qat]
            np.matmul(np.swapaxes(s, -1, -2), vb, out=o)
            np.multiply(o, np.swapaxes(inv, -1, -2), out=o)

    _run(_blocks(batch, n_query, n_key, budget, min_queries), work)
    return out, lse


def attention_backward(q, k, v, out, lse, g, *, scale: float, causal: bool, key_keep,
                       budget: int = BLOCK_SCORES, min_queries: int = MIN_QUERIES, steps: Steps = NUMPY_STEPS):
    """``Backend.attention_backward`` for :func:`takes` arrays: ``(dq, dk, dv)``, each laid out as its
    operand (batch dims broadcast from 1 come back full size, for the caller to sum)."""
    n_query, n_key = q.shape[-2], k.shape[-2]
    batch = tuple(q.shape[:-2])
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    scale = q.dtype.type(scale)
    # a query with no key to attend (lse -inf) has no probabilities: exp(s - inf) = 0
    lse = np.where(np.isfinite(lse), lse, np.inf).astype(q.dtype, copy=False)

    def work(block) -> None:
        at, pieces = block
        kb, vb = k[at], v[at]
        keep = None if key_keep is None else key_keep[at]
        for n, queries in enumerate(pieces):
            qat = at + (queries,)
            qb, gb = q[qat], g[qat]
            # dS^T times the scale, which dq and dk both carry, paid on g's transposed copy and on delta
            # (rowsum(dP * P) = rowsum(g * out)) instead of a scaled copy of q and a pass over dq
            delta = np.expand_dims(np.vecdot(gb, out[qat]), -2)
            np.multiply(delta, scale, out=delta)
            ds = np.matmul(vb, steps.transposed(gb, scale))  # dP^T
            p = _scores(kb, steps.transposed(qb, scale), queries, causal, keep)
            steps.grad(p, np.expand_dims(lse[qat], -2), ds, delta)  # P^T and dS^T, key-major
            _accumulate(dv[at], p, gb, n)
            np.matmul(np.swapaxes(ds, -1, -2), kb, out=dq[qat])
            _accumulate(dk[at], ds, qb, n)

    _run(_blocks(batch, n_query, n_key, budget, min_queries), work)
    return dq, dk, dv


def _accumulate(target, a, b, n: int) -> None:
    """``target = a @ b`` for a block's first piece of queries, ``target += a @ b`` for the others."""
    if n == 0:
        np.matmul(a, b, out=target)
    else:
        target += np.matmul(a, b)
