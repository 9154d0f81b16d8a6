"""The NumPy backend: the CPU arrays of the library, and the reference for every other backend."""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from . import numpy_attention, numpy_kernels
from .base import Backend
from .. import _dtypes


class NumpyBackend(Backend):
    name = "numpy"
    xp = np
    device = "cpu"

    def __init__(self) -> None:
        super().__init__()
        self._to_native = {d: np.dtype(d.name) for d in _dtypes.ALL}
        self._from_native = {v: k for k, v in self._to_native.items()}
        self._rng = np.random.default_rng()
        try:
            from scipy.special import erf  # optional: fast and exact
        except ImportError:
            erf = None
        self._scipy_erf = erf
        self._special = _UNSET
        # the ufuncs' own reductions and item access skip np.sum's/np.prod's Python wrappers
        # (same results and dtypes), which is most of a small reduction's cost
        self.sum = _reduction(np.add)
        self.prod = _reduction(np.multiply)
        self.max = _reduction(np.maximum)
        self.min = _reduction(np.minimum)
        self.getitem = operator.getitem
        numpy_kernels.attach(self)  # matmul: np.matmul, or shared among the threads (set_num_threads)

    def is_array(self, x) -> bool:
        return isinstance(x, (np.ndarray, np.generic))

    def asarray(self, data, dtype=None, copy=None):
        return np.asarray(data, dtype=None if dtype is None else self._to_native[dtype], copy=copy)

    def to_numpy(self, x):
        return np.asarray(x)

    def frombuffer(self, buffer, dtype, count: int, offset: int):
        """A 1-D array over the bytes of ``buffer`` (anything with the buffer protocol), sharing them."""
        return np.frombuffer(buffer, dtype=self._to_native[dtype], count=count, offset=offset)

    def item(self, x):
        return x.item()

    def is_view_of(self, out, x) -> bool:
        # NumPy points every view at the array that owns the memory, so comparing bases is
        # exact for views made from x (and ten times cheaper than may_share_memory)
        base = getattr(out, "base", None)
        return base is not None and (base is x or base is getattr(x, "base", None))

    supports_out = True

    def owns_writable(self, x) -> bool:
        return x.__class__ is np.ndarray and x.base is None and x.flags.writeable

    def erf(self, x):
        if x.dtype == np.float32:
            return numpy_kernels.erf32(x)
        if x.dtype == np.float16:  # SciPy's erf gives float64 for float16: compute in float32, keep the dtype
            return numpy_kernels.erf32(x.astype(np.float32)).astype(np.float16)
        if self._scipy_erf is not None:
            return self._scipy_erf(x)
        return erf_series(x)

    def exp2(self, x):
        return np.exp2(x)

    def fmod(self, a, b):
        return np.fmod(a, b)

    def _scipy_special(self):
        """``scipy.special``, imported on first use, or None without SciPy (the generic versions of the
        base class run then)."""
        if self._special is _UNSET:
            try:
                import scipy.special as special
            except ImportError:
                special = None
            self._special = special
        return self._special

    def erfc(self, x):
        sp = self._scipy_special()
        return super().erfc(x) if sp is None else _in_dtype(sp.erfc, x)

    def erfinv(self, x):
        sp = self._scipy_special()
        return super().erfinv(x) if sp is None else _in_dtype(sp.erfinv, x)

    def lgamma(self, x):
        sp = self._scipy_special()
        if sp is None:
            return super().lgamma(x)
        return np.where(x == -np.inf, np.inf, _in_dtype(sp.gammaln, x))  # SciPy's gammaln(-inf) is -inf

    def digamma(self, x):
        sp = self._scipy_special()
        return super().digamma(x) if sp is None else _in_dtype(sp.psi, x)

    def polygamma(self, n, x):
        # SciPy's polygamma, (-1)**(n + 1) n! zeta(n + 1, x), loses digits for x < 0 and differs from
        # PyTorch at the poles and at +inf: the generic version for n >= 1
        return self.digamma(x) if n == 0 else super().polygamma(n, x)

    def i0(self, x):
        sp = self._scipy_special()
        return super().i0(x) if sp is None else _in_dtype(sp.i0, x)

    def i1(self, x):
        sp = self._scipy_special()
        return super().i1(x) if sp is None else _in_dtype(sp.i1, x)

    def igamma(self, a, x):
        sp = self._scipy_special()
        if sp is None:
            return super().igamma(a, x)
        # SciPy's is nan where PyTorch's edges give a nan operand a value (at x = 0, x = inf, a = inf)
        return self._incomplete_gamma_edges(a, x, _in_dtype(sp.gammainc, a, x), upper=False)

    def igammac(self, a, x):
        sp = self._scipy_special()
        if sp is None:
            return super().igammac(a, x)
        return self._incomplete_gamma_edges(a, x, _in_dtype(sp.gammaincc, a, x), upper=True)

    def gelu(self, x):
        return numpy_kernels.gelu(x, self.erf)

    def gelu_backward(self, x, cdf, g):
        return numpy_kernels.gelu_backward(x, cdf, g)

    def norm_rows(self, x, n, w, b, eps, centered):
        if numpy_kernels.takes_rows(x, w, b):
            return numpy_kernels.norm_rows(x, n, w, b, eps, centered)
        return super().norm_rows(x, n, w, b, eps, centered)

    def norm_rows_backward(self, x, n, mean, rstd, w, g, want_x, want_w, want_b):
        if numpy_kernels.takes_rows(x, w, g):
            return numpy_kernels.norm_rows_backward(x, n, mean, rstd, w, g, want_x, want_w, want_b)
        return super().norm_rows_backward(x, n, mean, rstd, w, g, want_x, want_w, want_b)

    # attention block by block, in the cache (numpy_attention.py); other dtypes and empty dims: the default
    fused_attention = True

    def attention(self, q, k, v, *, scale, causal, key_keep):
        if numpy_attention.takes(q, k, v):
            return numpy_attention.attention(q, k, v, scale=scale, causal=causal, key_keep=key_keep)
        return super().attention(q, k, v, scale=scale, causal=causal, key_keep=key_keep)

    def attention_backward(self, q, k, v, out, lse, g, *, scale, causal, key_keep):
        if numpy_attention.takes(q, k, v, out, lse, g):
            return numpy_attention.attention_backward(q, k, v, out, lse, g, scale=scale, causal=causal,
                                                      key_keep=key_keep)
        return super().attention_backward(q, k, v, out, lse, g, scale=scale, causal=causal, key_keep=key_keep)

    def addmm(self, c, a, b):
        return numpy_kernels.addmm(c, a, b)

    def matmuls(self, pairs, column_sums=()):
        return numpy_kernels.matmuls(pairs, column_sums)

    def products_side_by_side(self) -> bool:
        return numpy_kernels.pool_does_products()

    def rowdot(self, a, b):
        # one pass, no product array: about three times faster than multiply then sum
        return np.expand_dims(np.vecdot(a, b), -1)

    def row_major(self, x) -> bool:
        return x.flags.c_contiguous

    def as_row_major(self, x):
        return np.ascontiguousarray(x)

    def einsum(self, subscripts, *arrays):
        largest = max(a.size for a in arrays)
        if len(arrays) == 2 and largest > 4096:
            pooled = numpy_kernels.contract(subscripts, *arrays)  # where the pool does the products
            if pooled is not None:
                return pooled
        optimize = "greedy" if largest > 4096 or len(arrays) > 2 else False
        if largest < _LEND_BLAS_FROM:
            return np.einsum(subscripts, *arrays, optimize=optimize)
        # its products are BLAS calls of its own; lent BLAS's threads only when large, since they spin
        # for a while afterwards beside the pool's
        with numpy_kernels.blas_threads():
            return np.einsum(subscripts, *arrays, optimize=optimize)

    def scatter_add(self, shape, dtype, key, values):
        out = np.zeros(shape, dtype=values.dtype if dtype is None else self._to_native[dtype])
        np.add.at(out, key, values)
        return out

    def scatter_reduce(self, x, key, values, reduce, include_self):
        out = np.array(x, copy=True)
        ufunc = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}[reduce]
        if not include_self:
            out[key] = ufunc.identity if ufunc.identity is not None else _extreme(out.dtype, reduce == "amin")
        ufunc.at(out, key, values)
        return out

    def pad(self, x, widths, value):
        return np.pad(x, widths, mode="constant", constant_values=value)

    def tril(self, x, k):
        return np.tril(x, k)

    def triu(self, x, k):
        return np.triu(x, k)

    def logaddexp(self, a, b):
        return np.logaddexp(a, b)

    def sort_indices(self, x, axis: int, descending: bool, stable: bool):
        if not descending:
            return np.argsort(x, axis=axis, stable=stable)
        # NumPy has no descending sort: sort the reversed array ascending and reverse the result,
        # which keeps equal values in their original order (and puts NaN first, as the largest)
        n = x.shape[axis]
        rev = np.argsort(np.flip(x, axis=axis), axis=axis, stable=stable)
        return (n - 1) - np.flip(rev, axis=axis)

    def seed(self, n: int) -> None:
        self._rng = np.random.default_rng(n)

    def random_state(self):
        return self._rng.bit_generator.state

    def set_random_state(self, state) -> None:
        self._rng.bit_generator.state = state

    def rand(self, shape, dtype):
        d = self._to_native[dtype]
        if d == np.float16:
            return self._rng.random(shape, dtype=np.float32).astype(d)
        return self._rng.random(shape, dtype=d)

    def randn(self, shape, dtype):
        d = self._to_native[dtype]
        if d == np.float16:
            return self._rng.standard_normal(shape, dtype=np.float32).astype(d)
        return self._rng.standard_normal(shape, dtype=d)

    def randint(self, low, high, shape, dtype):
        return self._rng.integers(low, high, shape, dtype=self._to_native[dtype])

    def randperm(self, n: int, dtype):
        return self._rng.permutation(n).astype(self._to_native[dtype])


#: elements of an einsum's largest operand before it borrows BLAS's threads from the pool
_LEND_BLAS_FROM = 1 << 20


def _with_blas_threads(method):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with numpy_kernels.blas_threads():
            return method(self, *args, **kwargs)

    return call


#: the linear-algebra routines (LAPACK, on BLAS): BLAS has the pool's threads while they run
for _name in ("inv", "det", "slogdet", "solve", "cholesky", "eigh", "qr", "svd", "pinv"):
    setattr(NumpyBackend, _name, _with_blas_threads(getattr(NumpyBackend, _name)))

_UNSET = object()


def _in_dtype(fn, *xs):
    """SciPy's ``fn`` of float arrays ``xs`` in their promoted dtype (float16 computed in float32: SciPy gives
    float64 or float32 for it)."""
    dtype = np.result_type(*xs)
    work = [x.astype(np.float32) for x in xs] if dtype == np.float16 else xs
    return np.asarray(fn(*work)).astype(dtype, copy=False)


def _reduction(ufunc):
    """``ufunc.reduce`` with the Array API's default ``axis=None`` (every axis; a bare ufunc.reduce
    reduces axis 0 only), its arguments passed on by position: a keyword-merging
    ``functools.partial`` costs more than the reduction of a small array."""
    reduce = ufunc.reduce

    def fn(x, axis=None, dtype=None, out=None, keepdims=False):
        return reduce(x, axis, dtype, out, keepdims)

    fn.__name__ = fn.__qualname__ = ufunc.__name__ + "_reduce"
    return fn


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf_series(x):
    """erf without SciPy, accurate to ~1e-15: a positive-term series near 0, a continued fraction beyond.

    erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1))   (no cancellation)
    erfc(x) = exp(-x^2)/sqrt(pi) / (x + 1/2/(x + 1/(x + 3/2/(x + ...))))   for x > 2.5
    """
    x = np.asarray(x)
    work = x.astype(np.float64)
    a = np.abs(work)
    small = np.minimum(a, 2.5)
    x2 = small * small
    term = small.copy()
    total = small.copy()
    for n in range(1, 80):
        term = term * (2.0 * x2) / (2 * n + 1)
        total += term
    series = _TWO_OVER_SQRT_PI * np.exp(-x2) * total
    big = np.maximum(a, 2.5)
    frac = big.copy()
    for k in range(60, 0, -1):
        frac = big + (k / 2.0) / frac
    with np.errstate(over="ignore"):  # big * big overflows to inf for |x| > 1e154: exp(-inf) is the 0 we want
        cf = 1.0 - np.exp(-big * big) / math.sqrt(math.pi) / frac
    out = np.where(a <= 2.5, series, cf) * np.sign(work)
    return out.astype(x.dtype) if x.dtype.kind == "f" else out


def _extreme(dtype, largest: bool):
    """The largest (or smallest) value of ``dtype``: where an ``amin`` (``amax``) starts from nothing."""
    if dtype.kind == "f":
        return np.inf if largest else -np.inf
    if dtype.kind == "b":
        return largest
    info = np.iinfo(dtype)
    return info.max if largest else info.min
