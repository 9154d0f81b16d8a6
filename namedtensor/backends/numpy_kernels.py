"""Fused kernels for the NumPy backend: erf in float32, GELU forward and backward, and LayerNorm /
RMSNorm forward and backward over the rows of a matrix.

NumPy makes one pass over memory per operation, and a chain of them on a large array streams it
through main memory each time.  These kernels walk the data in blocks that stay in the CPU cache
and run every step of the formula on one block, in preallocated scratch buffers.  NumPy releases
the GIL inside each operation, so the elementwise kernels share their blocks out among the threads
of :mod:`.thread_pool` (``nt.set_num_threads``), as PyTorch runs its elementwise kernels on its
intra-op threads.  Once ``nt.set_num_threads`` has run with two threads or more, the same pool
shares out the matrix products too (:func:`matmul`, BLAS on one thread: see "one pool" below).

The norm kernels (:func:`norm_rows`, :func:`norm_rows_backward`) walk blocks of whole rows on the
calling thread (:func:`run_rows`).  Their operations are short, and in a training step the other
cores are mostly held by OpenBLAS's worker threads, which spin for a while after every matrix
product: a second thread of ours would only take turns with one of them (measured: slower than one
thread there, though faster in isolation).  They favour in-place operations on whole blocks
(NumPy's fastest loops, about twice as fast as writing a third buffer, and faster than
broadcasting a per-row value along rows as short as a model's width), so a per-row value is first
spread over a scratch block.  Their results do not depend on the number of threads.

float32 ``erf`` is the rational approximation used by Eigen and XLA (an odd polynomial over an
even one on [-4, 4], beyond which float32 erf is +-1): absolute error below 5e-7, a few float32
ulps, at a fraction of the cost of SciPy's float64 evaluation.  float64 keeps the exact ``erf``
the backend was given (SciPy's, or the series in :mod:`.numpy_backend`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import weakref

import numpy as np

from .thread_pool import get_num_threads, split, split_by_part

#: elements per block: a handful of 256 KiB float32 buffers stay in L2, and each operation on a
#: block is long enough that passing the GIL between threads costs little beside it
BLOCK = 1 << 16

_ERF_NUM = tuple(np.float32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02))
_ERF_DEN = tuple(np.float32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02))
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ----------------------------------------------------------------------------- one pool for products too
#
# OpenBLAS's idle workers spin for about 0.1 s after each product.  In a training step a product comes
# every few milliseconds, so they never rest, and a kernel split between two of our threads shares a
# core with one of them (inside the benchmark block's step on 2 cores, our kernels ran 2 ms faster on
# one thread).  Once nt.set_num_threads has run, BLAS gets one thread and this pool shares out the
# products instead (:func:`matmul`), lending BLAS its threads for the linear-algebra routines
# (:func:`blas_threads`): one pool, no spinning workers beside it.

#: set by :func:`pool_products`: BLAS has one thread, and products go to :func:`matmul`
_products = False
_blas = None  # threadpoolctl's controls of the loaded BLAS libraries, made once
#: the NumPy backends, whose ``matmul`` is ``np.matmul`` itself unless the pool does the products (so
#: that a small product costs no Python call more than before)
_backends: "weakref.WeakSet" = weakref.WeakSet()
#: multiply-adds of a product before it is shared among threads (a hand-off costs tens of microseconds)
_SPLIT_FROM = 1 << 22


def _blas_libraries(refresh: bool = False):
    """threadpoolctl's controls of the BLAS libraries loaded (when last refreshed: SciPy brings its own)."""
    global _blas
    if _blas is None or refresh:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController().select(user_api="blas")
    return _blas


def pool_products(on: bool) -> None:
    """Give BLAS one thread and the products to this pool's threads (``on``), or BLAS as many threads
    as the pool and the products to BLAS (as on one thread, where both are the same)."""
    global _products
    _blas_libraries(refresh=True).limit(limits=1 if on else get_num_threads())  # stays in force: the handle only restores
    _products = on
    for backend in list(_backends):
        attach(backend)


def pool_does_products() -> bool:
    """Whether this pool's threads do the products (BLAS has one thread): :func:`pool_products`."""
    return _products


def attach(backend) -> None:
    """Give a NumPy backend the ``matmul`` of the current mode, and keep it up to date."""
    _backends.add(backend)
    backend.matmul = matmul if _products else np.matmul


_lent = 0  # how many blas_threads() blocks are open, in all threads
_lent_lock = threading.Lock()


@contextlib.contextmanager
def blas_threads():
    """A block in which BLAS has the pool's threads (a linear-algebra routine), where the pool does the
    products; elsewhere nothing changes.  Blocks open in several threads at once share the loan: BLAS
    goes back to one thread when the last one closes."""
    global _lent
    threads = get_num_threads()
    if not (_products and threads > 1):
        yield
        return
    with _lent_lock:
        if _lent == 0:
            _blas_libraries().limit(limits=threads)
        _lent += 1
    try:
        yield
    finally:
        with _lent_lock:
            _lent -= 1
            if _lent == 0:
                _blas_libraries().limit(limits=1)


def contract(subscripts: str, a, b):
    """``np.einsum(subscripts, a, b)`` as one pooled :func:`matmul`, where the pool does the products
    and both are float arrays of one dtype with no letter repeated in an operand: the dims only one
    operand has and the output lacks are summed first, then each operand is laid out as a stack of
    matrices (the shared output dims, then its own output dims or the contracted ones), multiplied,
    and the result put in the output's order.  Anything else is ``None``: the caller's ``np.einsum``."""
    if not _products or get_num_threads() < 2 or a.dtype != b.dtype or a.dtype.char not in "fd" or "->" not in subscripts:
        return None
    ins, out = subscripts.split("->")
    sa, sb = ins.split(",")
    if len(set(sa)) != len(sa) or len(set(sb)) != len(sb) or len(set(out)) != len(out) or not set(out) <= set(sa + sb):
        return None
    if a.ndim != len(sa) or b.ndim != len(sb) or any(
            a.shape[sa.index(c)] != b.shape[sb.index(c)] for c in sa if c in sb):
        return None
    alone_a = tuple(i for i, c in enumerate(sa) if c not in sb and c not in out)
    alone_b = tuple(i for i, c in enumerate(sb) if c not in sa and c not in out)
    if alone_a:
        a, sa = a.sum(axis=alone_a), "".join(c for c in sa if c in sb or c in out)
    if alone_b:
        b, sb = b.sum(axis=alone_b), "".join(c for c in sb if c in sa or c in out)
    size = {**dict(zip(sa, a.shape)), **dict(zip(sb, b.shape))}
    shared = [c for c in out if c in sa and c in sb]
    rows = [c for c in out if c in sa and c not in sb]
    cols = [c for c in out if c in sb and c not in sa]
    summed = [c for c in sa if c in sb and c not in out]
    count = [math.prod(size[c] for c in group) for group in (shared, rows, summed, cols)]
    left = np.transpose(a, [sa.index(c) for c in shared + rows + summed]).reshape(count[0], count[1], count[2])
    right = np.transpose(b, [sb.index(c) for c in shared + summed + cols]).reshape(count[0], count[2], count[3])
    product = matmul(left, right).reshape([size[c] for c in shared + rows + cols])
    order = shared + rows + cols
    return np.transpose(product, [order.index(c) for c in out])


def _product(a, b, out, add):
    """``np.matmul(a, b, out=out)``, plus ``add`` (broadcast to the product, in its dtype) if given."""
    out = np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    return out if add is None else np.add(out, add, out=out)


def matmul(a, b, out=None, add=None):
    """``np.matmul(a, b, out=out)``, shared among the pool's threads where the work is large enough: a
    stack by its first stacked axis that has several matrices; a matrix by the contracted dim where it
    is the longest (partial products added up after), else by rows or by columns, whichever are more.
    Each part is one call of BLAS, which has one thread (:func:`pool_products`).  Other dtypes and
    small products are ``np.matmul``'s alone.  ``add`` (a bias: broadcast to the product, of its
    dtype) is added to each part by the thread that made it, while the part is in the cache."""
    threads = get_num_threads()
    if (threads < 2 or a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype.char not in "fd"
            or (out is not None and out.dtype != a.dtype)):
        return _product(a, b, out, add)
    m, n = a.shape[-2], b.shape[-1]
    # the multiply-adds, read off the sizes (a stack that broadcasts does more): small products return
    # before any shape arithmetic
    if max(a.size * n, b.size * m) < _SPLIT_FROM:
        return _product(a, b, out, add)
    if out is None:
        out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (m, n), a.dtype)
    if add is not None:
        add = np.broadcast_to(add, out.shape)  # a view: each part takes its slice
    axis = next((d for d in range(a.ndim - 2) if a.shape[d] >= threads), None) if a.ndim == b.ndim else None
    if axis is not None:
        count, whole = a.shape[axis], b.shape[axis] == 1  # b broadcast along it: every part reads all of b

        def run(first: int, last: int) -> None:
            at = tuple(slice(first, last) if d == axis else slice(None) for d in range(a.ndim))
            _product(a[at], b if whole else b[at], out[at], None if add is None else add[at])
    elif a.shape[-1] >= max(m, n):
        # the contracted dim is the longest (a weight's gradient): each thread multiplies its slice of
        # it, packing its parts of a and b only, and the partial products are added up after
        parts = min(threads, a.shape[-1])
        partial = np.empty((parts,) + out.shape, out.dtype)
        split_by_part(parts, a.shape[-1], lambda p, lo, hi: np.matmul(a[..., lo:hi], b[..., lo:hi, :], out=partial[p]))
        np.sum(partial, axis=0, out=out)
        return out if add is None else np.add(out, add, out=out)
    elif n > m:  # by columns: each thread packs its part of b, and all of the smaller a
        count = n

        def run(first: int, last: int) -> None:
            at = (Ellipsis, slice(first, last))
            _product(a, b[at], out[at], None if add is None else add[at])
    else:  # by rows: each thread packs its part of a, and all of the smaller b
        count = m

        def run(first: int, last: int) -> None:
            at = (Ellipsis, slice(first, last), slice(None))
            _product(a[at], b, out[at], None if add is None else add[at])

    split(min(threads, count), count, run)
    return out


def addmm(c, a, b):
    """``a @ b + c`` (``Backend.addmm``): the pool's threads add ``c`` to their parts of the product, where
    it does the products; else one pass after the product, written into it."""
    return matmul(a, b, add=c) if _products else _product(a, b, None, c)


def matmuls(pairs: list, column_sums: tuple = ()) -> list:
    """``[a @ b for a, b in pairs] + [s.sum(axis=0) for s in column_sums]`` for independent products of
    matrices, side by side where the pool does the products: the products (a linear layer's two
    gradients) are cut into as many pieces as the pool has threads, each product into a share of them
    by its rows or its columns (whichever are more), and every thread makes its pieces whole, one BLAS
    call each.  Against one product after the other, each cut among all the threads, no thread packs
    the other's operands, and a product whose contracted dim is the longest (a weight's gradient) needs
    no partial products added up: measured for the benchmark block's layers on 2 threads, 1.29 against
    1.39 ms for a 2048 x 256 x 256 pair.  The sums (a bias's gradient) go by columns to the threads of
    the first product (the input's gradient, the faster: the weight's has its first operand transposed),
    which read the array anyway, instead of a pass after the products on one thread while the others
    wait."""
    threads = get_num_threads()
    if (not _products or threads < 2 or len(pairs) < 2
            or any(a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype.char not in "fd" for a, b in pairs)
            or len({a.dtype for a, _ in pairs}) > 1 or sum(a.size * b.shape[1] for a, b in pairs) < _SPLIT_FROM
            or any(s.ndim != 2 for s in column_sums)):
        return [matmul(a, b) for a, b in pairs] + [np.sum(s, axis=0) for s in column_sums]
    outs = [np.empty((a.shape[0], b.shape[1]), a.dtype) for a, b in pairs]
    sums = [np.empty(s.shape[1:], s.dtype) for s in column_sums]
    pieces = []
    for i, ((a, b), out) in enumerate(zip(pairs, outs)):
        share = max(1, threads * (i + 1) // len(pairs) - threads * i // len(pairs))
        m, n = out.shape
        cuts = [m * p // share for p in range(share + 1)] if m >= n else [n * p // share for p in range(share + 1)]
        for p, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
            # the sums' columns from p / share to (p + 1) / share: empty on the other products' pieces
            columns = [(s[:, s.shape[1] * p // share:s.shape[1] * (p + 1) // share],
                        total[s.shape[1] * p // share:s.shape[1] * (p + 1) // share])
                       for s, total in zip(column_sums, sums)] if i == 0 else []
            if hi > lo:
                pieces.append((a[lo:hi], b, out[lo:hi], columns) if m >= n else (a, b[:, lo:hi], out[:, lo:hi], columns))
            elif columns:
                pieces.append((None, None, None, columns))

    def run(first: int, last: int) -> None:
        for a, b, out, columns in pieces[first:last]:
            if a is not None:
                np.matmul(a, b, out=out)
            for s, total in columns:
                np.sum(s, axis=0, out=total)

    split(min(threads, len(pieces)), len(pieces), run)
    return outs + sums


@functools.lru_cache(maxsize=None)
def simd_loop(ufunc: str, types: str) -> bool:
    """Whether NumPy runs the loop of ``ufunc`` for ``types`` (``"fff"``: its operands' and result's type
    codes) with one of the SIMD targets it dispatches to at run time on this CPU, rather than its
    baseline build (``numpy.lib.introspect.opt_func_info``; for ``power`` on x86, its AVX-512 loop
    against the C library's ``pow`` one element at a time)."""
    from numpy.lib.introspect import opt_func_info

    info = opt_func_info(func_name=f"^{ufunc}$").get(ufunc, {}).get(types)
    if not info:
        return False
    targets = {t for t in info["available"].split() if not t.startswith("baseline")}
    return info["current"] in targets


def takes_rows(x, *others) -> bool:
    """Whether the row kernels take ``x`` (float32/64, C-contiguous, nonempty) with ``others`` (of its
    dtype, or None): this module's and backends/numba_kernels.py's."""
    return (x.dtype in (np.float32, np.float64) and x.size > 0 and x.flags.c_contiguous
            and all(o is None or o.dtype == x.dtype for o in others))


def run_blocks(n: int, work, n_scratch: int, dtype) -> None:
    """Call ``work(i, j, scratch)`` for consecutive blocks ``[i, j)`` covering ``range(n)``, each thread
    on a contiguous run of blocks with its own ``n_scratch`` scratch buffers of ``dtype``."""
    n_blocks = -(-n // BLOCK)

    def run(first: int, last: int) -> None:
        lo, hi = first * BLOCK, min(last * BLOCK, n)
        scratch = [np.empty(min(hi - lo, BLOCK), dtype) for _ in range(n_scratch)]
        for i in range(lo, hi, BLOCK):
            j = min(i + BLOCK, hi)
            work(i, j, [b[: j - i] for b in scratch])

    split(min(get_num_threads(), n_blocks), n_blocks, run)


def rows_per_block(width: int) -> int:
    """How many rows of ``width`` elements :func:`run_rows` puts in a block (at least one)."""
    return max(1, BLOCK // max(width, 1))


_kept = threading.local()


def _kept_scratch(count: int, shape, dtype) -> list:
    """``count`` scratch arrays of ``shape`` (rows, width), kept by the calling thread from one call to
    the next: fresh memory this size is mapped (page faults) and unmapped again on every call."""
    size = shape[0] * shape[1]
    if size > 4 * BLOCK:  # a few very wide rows: not worth keeping
        return [np.empty(shape, dtype) for _ in range(count)]
    kept = getattr(_kept, "buffers", None)
    if kept is None:
        kept = _kept.buffers = {}
    dtype = np.dtype(dtype)
    buffers = kept.get(dtype, [])
    if len(buffers) < count or buffers[0].size < size:
        buffers = kept[dtype] = [np.empty(max(size, BLOCK), dtype) for _ in range(max(count, len(buffers)))]
    return [b[:size].reshape(shape) for b in buffers[:count]]


def run_rows(rows: int, width: int, work, n_scratch: int, dtype) -> None:
    """Call ``work(i, j, scratch)`` on the calling thread for consecutive blocks of rows ``[i, j)``
    covering ``range(rows)`` (:func:`rows_per_block` rows each), with ``n_scratch`` scratch buffers
    of shape ``(j - i, width)``."""
    step = rows_per_block(width)
    scratch = _kept_scratch(n_scratch, (min(step, rows), width), dtype)
    for i in range(0, rows, step):
        j = min(i + step, rows)
        work(i, j, [b[: j - i] for b in scratch])


def _horner(x2, coeffs, out):
    """``out`` = the polynomial with ``coeffs`` (highest power first) at ``x2``."""
    np.multiply(x2, coeffs[0], out=out)
    out += coeffs[1]
    for c in coeffs[2:]:
        out *= x2
        out += c
    return out


def _erf32_block(x, out, a, b, c) -> None:
    """``out = erf(x)`` on one float32 block; ``a b c`` are scratch buffers of its size."""
    np.clip(x, -4.0, 4.0, out=a)
    np.multiply(a, a, out=b)
    _horner(b, _ERF_NUM, c)
    c *= a
    _horner(b, _ERF_DEN, a)
    np.divide(c, a, out=out)


def _flat(x):
    return np.ascontiguousarray(x).reshape(-1)


def erf32(x):
    """erf of a float32 array, blockwise."""
    flat = _flat(x)
    out = np.empty(flat.shape, np.float32)

    def work(i, j, scratch):
        _erf32_block(flat[i:j], out[i:j], *scratch)

    run_blocks(flat.size, work, 3, np.float32)
    return out.reshape(np.shape(x))


def gelu(x, erf):
    """``(x * Phi(x), Phi(x))``, Phi the standard normal CDF, for a float array (``erf`` for float64)."""
    if x.dtype != np.float32:
        cdf = erf(x * _INV_SQRT_2)
        cdf *= 0.5
        cdf += 0.5
        return x * cdf, cdf
    flat = _flat(x)
    y = np.empty(flat.shape, np.float32)
    cdf = np.empty(flat.shape, np.float32)
    inv_sqrt_2, half = np.float32(_INV_SQRT_2), np.float32(0.5)

    def work(i, j, scratch):
        s, a, b, c = scratch
        xb, cb = flat[i:j], cdf[i:j]
        np.multiply(xb, inv_sqrt_2, out=s)
        _erf32_block(s, cb, a, b, c)
        cb *= half
        cb += half
        np.multiply(xb, cb, out=y[i:j])

    run_blocks(flat.size, work, 4, np.float32)
    shape = np.shape(x)
    return y.reshape(shape), cdf.reshape(shape)


def gelu_backward(x, cdf, g):
    """``g * (Phi(x) + x * phi(x))``: GELU's input gradient from the CDF its forward kept."""
    fx, fc, fg = _flat(x), _flat(cdf), _flat(g)
    out = np.empty(fx.shape, np.result_type(x, g))
    half, norm = fx.dtype.type(-0.5), fx.dtype.type(_INV_SQRT_2PI)

    def work(i, j, scratch):
        (t,) = scratch
        xb = fx[i:j]
        np.multiply(xb, xb, out=t)
        t *= half
        np.exp(t, out=t)
        t *= xb
        t *= norm
        t += fc[i:j]
        np.multiply(fg[i:j], t, out=out[i:j])

    run_blocks(fx.size, work, 1, fx.dtype)
    return out.reshape(np.shape(x))


def norm_rows(x, n: int, w, b, eps: float, centered: bool):
    """LayerNorm (``centered``) or RMSNorm of the rows of ``n`` elements of the C-contiguous float array
    ``x``: ``(y, mean, rstd)`` as ``Backend.norm_rows`` describes."""
    y = np.empty(x.shape, x.dtype)
    x2, y2 = x.reshape(-1, n), y.reshape(-1, n)
    rows = x2.shape[0]
    mean = np.empty(rows, x.dtype) if centered else None
    rstd = np.empty(rows, x.dtype)

    def work(i, j, scratch):
        (t,) = scratch
        xb, yb, r = x2[i:j], y2[i:j], rstd[i:j]
        src = xb
        if centered:
            m = mean[i:j]
            np.einsum("ij->i", xb, out=m)
            m /= n
            np.copyto(t, m[:, None])
            np.subtract(xb, t, out=t)
            src = t
        np.einsum("ij,ij->i", src, src, out=r)
        r /= n
        r += eps
        np.sqrt(r, out=r)
        np.divide(1, r, out=r)
        np.copyto(yb, r[:, None])
        yb *= src
        if w is not None:
            yb *= w
        if b is not None:
            yb += b

    run_rows(rows, n, work, 1, x.dtype)
    return y, mean, rstd


def norm_rows_backward(x, n: int, mean, rstd, w, g, want_x: bool, want_w: bool, want_b: bool):
    """The gradients ``(gx, gw, gb)`` of :func:`norm_rows` (``mean`` None for RMSNorm), as
    ``Backend.norm_rows_backward`` describes: ``gx = u - xhat mean(u xhat) - mean(u)`` with
    ``u = g w rstd`` (no ``mean(u)`` for RMSNorm)."""
    x2, g2 = x.reshape(-1, n), np.reshape(g, (-1, n))
    rows = x2.shape[0]
    gx = np.empty(x.shape, x.dtype) if want_x else None
    gx2 = gx.reshape(-1, n) if want_x else None
    gw = np.zeros(n, x.dtype) if want_w else None  # sums of the blocks' column sums
    gb = np.zeros(n, x.dtype) if want_b else None

    def work(i, j, scratch):
        xhat, u = scratch
        xb, gblock = x2[i:j], g2[i:j]
        np.copyto(u, rstd[i:j, None])
        if mean is None:
            np.multiply(xb, u, out=xhat)
        else:
            np.copyto(xhat, mean[i:j, None])
            np.subtract(xb, xhat, out=xhat)
            xhat *= u
        if want_w:
            np.add(gw, np.einsum("ij,ij->j", gblock, xhat), out=gw)
        if want_b:
            np.add(gb, np.einsum("ij->j", gblock), out=gb)
        if not want_x:
            return
        if w is not None:
            u *= w
        u *= gblock
        c = np.einsum("ij,ij->i", u, xhat)
        c /= n
        out = gx2[i:j]
        np.copyto(out, c[:, None])
        out *= xhat
        if mean is not None:
            c = np.einsum("ij->i", u)
            c /= n
            np.copyto(xhat, c[:, None])
            out += xhat
        np.subtract(u, out, out=out)

    run_rows(rows, n, work, 2, x.dtype)
    return gx, gw, gb
