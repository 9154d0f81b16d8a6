"""The backend interface: an array namespace plus what the namespace lacks.

Ops never import an array library; they call the backend of their operands (``B``).  A backend
exposes the Array-API functions of its namespace as attributes (``B.exp``, ``B.sum``...), bound
directly so a call costs nothing extra, and adds the pieces the standard does not have (``erf``,
``einsum``, ``scatter_add``, ``pad``, random numbers...).  It also has the fused kernels' hooks
(softmax, cross-entropy, LayerNorm/RMSNorm rows, GELU, AdamW, attention): the plain computation
here, CPU kernels for GELU and the norms in the NumPy backend, CUDA kernels in the CuPy backend.
The backends: NumPy (the CPU, and the reference for the others), array-api-strict (to keep
NumPy-only calls out of the ops), CuPy (one per GPU) and meta (shapes and dtypes only, for dry
runs).  docs/design.md, "Backends and devices", has the whole picture.
"""

from __future__ import annotations

import math

from .. import _dtypes
from .update_math import adam_chunk, adam_coefficients, chunks, out_ops

_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

#: Array-API names every backend binds from its namespace.
STANDARD = (
    "abs", "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sign", "floor",
    "ceil", "round", "negative", "square", "add", "subtract", "multiply", "divide", "floor_divide",
    "remainder", "pow", "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_not", "logical_xor", "where", "sum", "prod", "max", "min",
    "mean", "std", "var", "argmax", "argmin", "any", "all", "cumulative_sum", "cumulative_prod",
    "sort", "argsort", "matmul", "reshape", "permute_dims", "expand_dims", "squeeze", "broadcast_to",
    "concat", "stack", "flip", "roll", "tile", "repeat", "take", "take_along_axis", "zeros", "ones",
    "empty", "full", "arange", "linspace", "eye", "astype", "clip", "isnan", "isinf", "isfinite",
    "zeros_like", "ones_like", "full_like", "moveaxis", "nonzero",
)


class Backend:
    """Base of all backends.  Subclasses set ``xp``, ``device`` and the dtype tables."""

    name = "base"
    xp = None
    device = "cpu"

    def __init__(self) -> None:
        for fn in STANDARD:
            setattr(self, fn, getattr(self.xp, fn))
        if hasattr(self.xp, "logaddexp"):  # in the standard since 2022.12; the method below is the fallback
            self.logaddexp = self.xp.logaddexp
        native = {}
        for d in _dtypes.ALL:
            found = getattr(self.xp, "bool" if d is _dtypes.bool_ else d.name, None)
            if found is not None:
                native[d] = found
        self._to_native = native
        self._from_native = {v: k for k, v in native.items()}

    def __repr__(self) -> str:
        return f"<{self.name} backend on {self.device}>"

    # dtypes --------------------------------------------------------------------------
    def native(self, dtype: _dtypes.DType):
        """The namespace's dtype for an ``nt`` dtype (TypeError when it has none)."""
        try:
            return self._to_native[dtype]
        except KeyError:
            raise TypeError(f"dtype {dtype!r} is not available on the {self.name} backend.") from None

    def dtype_of(self, x) -> _dtypes.DType:
        """The ``nt`` dtype of array ``x`` (TypeError for dtypes the library does not support)."""
        try:
            return self._from_native[x.dtype]
        except KeyError:
            raise TypeError(
                f"unsupported array dtype {x.dtype}; namedtensor supports "
                f"{', '.join(d.name for d in _dtypes.ALL)}."
            ) from None

    # conversion ----------------------------------------------------------------------
    def is_array(self, x) -> bool:
        """Whether ``x`` is an array of this backend's namespace."""
        raise NotImplementedError

    def asarray(self, data, dtype=None, copy=None):
        """An array of ``data`` (``dtype``: an ``nt`` dtype; ``copy`` as in the Array API)."""
        raise NotImplementedError

    def to_numpy(self, x):
        """``x`` as a NumPy array (no copy where the memory allows it)."""
        raise NotImplementedError

    def is_view_of(self, out, x) -> bool:
        """Whether ``out`` may share memory with ``x`` (False when the backend cannot tell)."""
        return False

    #: whether the namespace's elementwise functions take ``out=`` (used to reuse temporaries' buffers)
    supports_out = False

    def owns_writable(self, x) -> bool:
        """``x`` owns its memory (is not a view of another array) and may be written."""
        return False

    def item(self, x):
        """The one element of ``x`` as a Python number."""
        raise NotImplementedError

    def tolist(self, x):
        """``x`` as nested Python lists."""
        return self.to_numpy(x).tolist()

    # what the standard lacks ---------------------------------------------------------
    def erf(self, x):
        """The error function, elementwise."""
        raise NotImplementedError

    def gelu(self, x):
        """Exact GELU and the normal CDF it multiplies by: ``(x * Phi(x), Phi(x))`` (float ``x``)."""
        cdf = (self.erf(x / _SQRT_2) + 1) * 0.5
        return x * cdf, cdf

    def gelu_backward(self, x, cdf, g):
        """GELU's input gradient ``g * (Phi(x) + x * phi(x))``, from the CDF its forward returned."""
        return g * (cdf + x * self.exp(x * x * -0.5) * _INV_SQRT_2PI)

    def norm_rows(self, x, n: int, w, b, eps: float, centered: bool):
        """LayerNorm (``centered``) or RMSNorm of each row of ``x`` seen as a matrix of rows of ``n``
        elements (``x`` float, row-major):  ``(x - mean) * rstd * w + b`` with
        ``rstd = 1 / sqrt(mean((x - mean) ** 2) + eps)`` (RMSNorm: no ``mean``, no ``b``); ``w`` and ``b``
        have shape (n,) or are None.  Returns ``(y, mean, rstd)``: ``y`` of ``x``'s shape, the statistics
        of shape (rows,) (``mean`` None for RMSNorm)."""
        shape = x.shape
        x = self.reshape(x, (-1, n))
        mean = None
        if centered:
            mean = self.mean(x, axis=1)
            x = x - self.expand_dims(mean, axis=1)
        rstd = 1 / self.sqrt(self.mean(x * x, axis=1) + eps)
        y = x * self.expand_dims(rstd, axis=1)
        if w is not None:
            y = y * w
        if b is not None:
            y = y + b
        return self.reshape(y, shape), mean, rstd

    def norm_rows_backward(self, x, n: int, mean, rstd, w, g, want_x: bool, want_w: bool, want_b: bool):
        """The gradients ``(gx, gw, gb)`` of :meth:`norm_rows` for the output's gradient ``g`` (``x``'s
        shape), from the statistics it returned (``mean`` None for RMSNorm); each is None unless wanted.
        ``gx = rstd (u - mean(u) - xhat mean(u xhat))`` with ``u = g w`` (RMSNorm: no ``mean(u)``)."""
        shape = x.shape
        x, g = self.reshape(x, (-1, n)), self.reshape(g, (-1, n))
        rstd = self.expand_dims(rstd, axis=1)
        xhat = (x if mean is None else x - self.expand_dims(mean, axis=1)) * rstd
        gw = self.sum(g * xhat, axis=0) if want_w else None
        gb = self.sum(g, axis=0) if want_b else None
        gx = None
        if want_x:
            u = g if w is None else g * w
            inner = u - xhat * self.mean(u * xhat, axis=1, keepdims=True)
            if mean is not None:
                inner = inner - self.mean(u, axis=1, keepdims=True)
            gx = self.reshape(inner * rstd, shape)
        return gx, gw, gb

    # The hooks below are the fused kernels' entry points (the CuPy backend runs CUDA kernels;
    # kernel_reference.py has their algorithms in NumPy).  These defaults are the plain computations
    # the ops have always made, so a backend without kernels loses nothing.

    def softmax(self, x, axis: int, log: bool):
        """Softmax (log-softmax when ``log``) of the float array ``x`` along ``axis``, shifted by the
        maximum: no overflow."""
        top = self.max(x, axis=axis, keepdims=True)
        if log:
            z = x - top
            return z - self.log(self.sum(self.exp(z), axis=axis, keepdims=True))
        e = self.exp(x - top)
        return e / self.sum(e, axis=axis, keepdims=True)

    def softmax_backward(self, y, g, axis: int, log: bool):
        """The input's gradient of :meth:`softmax` from its output ``y`` and the output's gradient ``g``:
        ``y * (g - sum(g * y))``, or ``g - exp(y) * sum(g)`` for log-softmax (sums along ``axis``)."""
        if log:
            return g - self.exp(y) * self.sum(g, axis=axis, keepdims=True)
        return y * (g - self.sum(g * y, axis=axis, keepdims=True))

    def cross_entropy(self, logits, target, ignore_index: int):
        """Cross-entropy of each row of ``logits`` (rows, C), float, with class index ``target`` (rows,):
        ``(loss, lse)``, ``lse`` the row's log-sum-exp and ``loss = lse - logits[r, target[r]]``, 0
        where ``target`` is ``ignore_index``; both (rows,), in the logits' dtype.  Targets other than
        ``ignore_index`` are in ``[0, C)`` (the op checks)."""
        top = self.max(logits, axis=1, keepdims=True)
        e = logits - top
        e = self.exp(e, out=e) if self.supports_out else self.exp(e)
        lse = top + self.log(self.sum(e, axis=1, keepdims=True))
        t = self.reshape(target, (-1, 1))
        valid = self.not_equal(t, ignore_index)
        loss = self.where(valid, lse - self.take_along_axis(logits, self.where(valid, t, 0), axis=1), 0)
        return self.reshape(loss, (-1,)), self.reshape(lse, (-1,))

    def cross_entropy_backward(self, logits, lse, target, g, ignore_index: int):
        """The logits' gradient of :meth:`cross_entropy` for the loss's gradient ``g`` (rows,):
        ``(softmax(logits) - onehot(target)) * g[:, None]`` from the forward's ``lse``; zero rows
        where ``target`` is ``ignore_index``."""
        G = logits - self.reshape(lse, (-1, 1))
        G = self.exp(G, out=G) if self.supports_out else self.exp(G)
        valid = self.not_equal(target, ignore_index)
        w = self.where(valid, g, 0)
        col = self.reshape(w, (-1, 1))
        G = self.multiply(G, col, out=G) if self.supports_out else self.multiply(G, col)
        key = (self.arange(G.shape[0]), self.where(valid, target, 0))
        self.setitem(G, key, self.getitem(G, key) - w)
        return G

    def adamw_(self, params, grads, exp_avgs, exp_avg_sqs, *, lr: float, beta1: float, beta2: float,
               eps: float, weight_decay: float, step: int, decoupled: bool) -> None:
        """One Adam step (``decoupled``: AdamW) in place on lists of arrays of one dtype: parameters,
        their gradients (only read), first and second moments.  PyTorch's formulas: weight decay
        ``p *= 1 - lr * weight_decay`` (AdamW) or ``g += weight_decay * p`` (Adam, L2),
        ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
        ``p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)``.

        Computed parameter by parameter in cache-sized chunks (the optimizers' helper), as
        ``p -= c * m / (sqrt(v) + eps sqrt(1 - beta2^step))`` with ``c = lr sqrt(1 - beta2^step) /
        (1 - beta1^step)``: the same values up to rounding, in fewer passes."""
        F = out_ops(self)
        eps, step_size, decay, l2 = adam_coefficients(lr, beta1, beta2, eps, weight_decay, step, decoupled)
        for p, grad, exp_avg, exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs):
            for x, g, (m, v), tmp in chunks(self, p, grad, [exp_avg, exp_avg_sq]):
                adam_chunk(F, x, g, m, v, None, tmp, beta1, beta2, eps, step_size, decay, l2)

    #: whether :meth:`attention` is a fused kernel that scaled_dot_product_attention should call (for
    #: the calls it takes: no dropout, causal and key-padding masks only); otherwise the op computes
    #: attention itself, with a CPU-friendly layout of the scores
    fused_attention = False

    def attention(self, q, k, v, *, scale: float, causal: bool, key_keep):
        """Scaled dot-product attention: ``(out, lse)``.

        ``q`` (N, Lq, D), ``k`` (N, Lk, D), ``v`` (N, Lk, Dv), float, one dtype; ``key_keep`` None or
        bool (N, Lk), True = may attend; ``causal``: query i attends key j only when j <= i.  ``out``
        (N, Lq, Dv) in q's dtype; ``lse`` (N, Lq) the log-sum-exp of each query's scaled, masked
        scores (float32 for float16 input).  A query with no key to attend gets ``out = 0`` and
        ``lse = -inf``.

        This default materialises the (N, Lq, Lk) scores (in float32 for float16 input): it is what a
        backend with :attr:`fused_attention` falls back to for inputs its kernel does not take.
        """
        dtype = q.dtype
        q, k, v = (self._attention_work(x) for x in (q, k, v))
        s = self.matmul(q * scale, self._swap_last(k))
        allowed = self._attention_allowed(s.shape, causal, key_keep)
        if allowed is not None:
            s = self.where(allowed, s, -math.inf)
        n, n_query, n_key = s.shape
        if n_key == 0:
            top = self.zeros((n, n_query, 1), dtype=s.dtype)
        else:
            top = self.max(s, axis=2, keepdims=True)
            top = self.where(self.isfinite(top), top, 0.0)  # no key to attend: exp(-inf - 0) = 0
        e = self.exp(s - top)
        total = self.sum(e, axis=2, keepdims=True)
        some = self.greater(total, 0.0)
        safe = self.where(some, total, 1.0)
        out = self.astype(self.matmul(e, v) / safe, dtype)
        lse = self.where(some, top + self.log(safe), -math.inf)
        return out, self.reshape(lse, (n, n_query))

    def attention_backward(self, q, k, v, out, lse, g, *, scale: float, causal: bool, key_keep):
        """The gradients ``(dq, dk, dv)`` of :meth:`attention` for the output's gradient ``g``, from its
        ``out`` and ``lse``: with ``P = exp(S - lse)`` (0 where masked), ``dV = P^T g``,
        ``dS = P * (g V^T - rowsum(g * out))``, ``dQ = scale dS K``, ``dK = scale dS^T Q``.  This
        default materialises P, as :meth:`attention` does."""
        dtypes = (q.dtype, k.dtype, v.dtype)
        q, k, v, out, g = (self._attention_work(x) for x in (q, k, v, out, g))
        lse = self.astype(lse, q.dtype)
        s = self.matmul(q * scale, self._swap_last(k))
        finite = self.expand_dims(self.isfinite(lse), axis=2)
        allowed = self._attention_allowed(s.shape, causal, key_keep)
        allowed = finite if allowed is None else self.logical_and(allowed, finite)
        lse = self.expand_dims(self.where(self.isfinite(lse), lse, 0.0), axis=2)
        p = self.exp(self.where(allowed, s - lse, -math.inf))
        dv = self.matmul(self._swap_last(p), g)
        delta = self.sum(g * out, axis=2, keepdims=True)
        ds = p * (self.matmul(g, self._swap_last(v)) - delta)
        dq = self.matmul(ds, k) * scale
        dk = self.matmul(self._swap_last(ds), q) * scale
        return tuple(self.astype(x, d) for x, d in zip((dq, dk, dv), dtypes))

    def _attention_work(self, x):
        """``x`` in the dtype the default attention computes in: float32 for float16, else its own."""
        if self.dtype_of(x) is _dtypes.float16:
            return self.astype(x, self.native(_dtypes.float32))
        return x

    def _swap_last(self, x):
        return self.permute_dims(x, (0, 2, 1))

    def _attention_allowed(self, shape, causal: bool, key_keep):
        """The bool (query, key) pairs that may attend, broadcastable to the scores' ``shape``
        (N, Lq, Lk), or None when all may."""
        allowed = None
        if causal:
            i = self.reshape(self.arange(shape[1]), (1, shape[1], 1))
            j = self.reshape(self.arange(shape[2]), (1, 1, shape[2]))
            allowed = self.greater_equal(i, j)
        if key_keep is not None:
            keep = self.reshape(key_keep, (shape[0], 1, shape[2]))
            allowed = keep if allowed is None else self.logical_and(allowed, keep)
        return allowed

    def row_major(self, x) -> bool:
        """Whether ``x``'s elements lie in memory in row-major order (True where the backend has no
        notion of layout): then a reshape of ``x`` is free and its rows are contiguous."""
        return True

    def einsum(self, subscripts, *arrays):
        """NumPy's ``einsum`` with letter subscripts (``"ij,jk->ik"``)."""
        raise NotImplementedError

    def scatter_add(self, shape, dtype, key, values):
        """A zero array of ``shape`` with ``values`` added at ``key`` (repeated indices accumulate)."""
        raise NotImplementedError

    def getitem(self, x, key):
        """``x[key]`` with NumPy's indexing (integer arrays and masks included)."""
        return x[key]

    def setitem(self, x, key, value):
        """``x[key] = value`` in place, with NumPy's indexing."""
        x[key] = value

    def pad(self, x, widths, value):
        """``x`` padded with ``value``: ``widths`` is one ``(before, after)`` pair per axis."""
        raise NotImplementedError

    def tril(self, x, k):
        """``x`` with the elements above diagonal ``k`` of the last two axes set to 0."""
        raise NotImplementedError

    def triu(self, x, k):
        """``x`` with the elements below diagonal ``k`` of the last two axes set to 0."""
        raise NotImplementedError

    def sort_indices(self, x, axis: int, descending: bool, stable: bool):
        """``argsort`` along ``axis``; descending order keeps ties in their original order when stable."""
        return self.argsort(x, axis=axis, descending=descending, stable=stable)

    def logaddexp(self, a, b):
        """``log(exp(a) + exp(b))`` without overflow (for namespaces that lack it)."""
        m = self.maximum(a, b)
        m = self.where(self.isfinite(m), m, self.zeros_like(m))  # -inf - -inf would be nan
        return m + self.log(self.exp(a - m) + self.exp(b - m))

    # random numbers ------------------------------------------------------------------
    def seed(self, n: int) -> None:
        """Restart the random stream from seed ``n``."""
        raise NotImplementedError

    def rand(self, shape, dtype):
        """Uniform samples in [0, 1) of a float ``nt`` dtype."""
        raise NotImplementedError

    def randn(self, shape, dtype):
        """Standard normal samples of a float ``nt`` dtype."""
        raise NotImplementedError

    def randint(self, low, high, shape, dtype):
        """Integers in ``[low, high)`` of an integer ``nt`` dtype."""
        raise NotImplementedError
