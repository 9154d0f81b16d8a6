"""Fused elementwise kernels for the NumPy backend: erf in float32, and GELU forward and backward.

NumPy makes one pass over memory per operation, and a chain of them on a large array streams it
through main memory each time.  These kernels walk the data in blocks that stay in the CPU cache
and run every step of the formula on one block, in preallocated scratch buffers.  NumPy releases
the GIL inside each operation, so the blocks are shared out among a pool of threads
(:func:`set_num_threads`; by default ``OMP_NUM_THREADS``, else the CPUs this process may use), as
PyTorch runs its elementwise kernels on its intra-op threads.

float32 ``erf`` is the rational approximation used by Eigen and XLA (an odd polynomial over an
even one on [-4, 4], beyond which float32 erf is +-1): absolute error below 5e-7, a few float32
ulps, at a fraction of the cost of SciPy's float64 evaluation.  float64 keeps the exact ``erf``
the backend was given (SciPy's, or the series in :mod:`.numpy_backend`).
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

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


def _default_threads() -> int:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_threads = _default_threads()
_pool = None
_pool_lock = threading.Lock()


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for the blockwise kernels (BLAS keeps the count it was started with)."""
    global _threads, _pool
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: the number of threads must be a positive int, got {n!r}.")
    with _pool_lock:
        if _pool is not None and n != _threads:
            _pool.shutdown(wait=True)
            _pool = None
        _threads = n


def get_num_threads() -> int:
    """How many threads the blockwise kernels use."""
    return _threads


def run_blocks(n: int, work, n_scratch: int, dtype) -> None:
    """Call ``work(i, j, scratch)`` for consecutive blocks ``[i, j)`` covering ``range(n)``, each thread
    on a contiguous run of blocks with its own ``n_scratch`` scratch buffers of ``dtype``."""
    n_blocks = -(-n // BLOCK)
    workers = min(_threads, n_blocks)

    def run(lo: int, hi: int) -> None:
        scratch = [np.empty(min(hi - lo, BLOCK), dtype) for _ in range(n_scratch)]
        for i in range(lo, hi, BLOCK):
            j = min(i + BLOCK, hi)
            work(i, j, [b[: j - i] for b in scratch])

    if workers <= 1:
        run(0, n)
        return
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_threads, thread_name_prefix="namedtensor-kernel")
        pool = _pool
    per = -(-n_blocks // workers) * BLOCK
    futures = [pool.submit(run, lo, min(lo + per, n)) for lo in range(per, n, per)]
    run(0, min(per, n))  # the calling thread takes the first run
    for f in futures:
        f.result()


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
