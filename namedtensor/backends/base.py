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

import functools
import itertools
import math

from .. import _dtypes
from .update_math import adam_coefficients, adam_update

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
    "zeros_like", "ones_like", "full_like", "moveaxis", "nonzero", "acos", "asin", "atan", "atan2", "cosh",
    "sinh", "asinh", "acosh", "atanh", "log2", "log10", "trunc", "hypot", "copysign",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_invert", "bitwise_left_shift", "bitwise_right_shift",
    "nextafter",
)

#: NumPy 1's spellings (CuPy keeps them) of the standard's names that older namespaces lack
_OLD_NAMES = {"acos": "arccos", "asin": "arcsin", "atan": "arctan", "atan2": "arctan2", "asinh": "arcsinh",
              "acosh": "arccosh", "atanh": "arctanh", "bitwise_invert": "invert", "bitwise_left_shift": "left_shift",
              "bitwise_right_shift": "right_shift"}


class Backend:
    """Base of all backends.  Subclasses set ``xp``, ``device`` and the dtype tables."""

    name = "base"
    xp = None
    device = "cpu"

    def __init__(self) -> None:
        for fn in STANDARD:
            setattr(self, fn, getattr(self.xp, fn, None) or getattr(self.xp, _OLD_NAMES.get(fn, fn)))
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

    # complex numbers (the standard has real, imag and conj since 2022.12; older namespaces spell them alike)
    def real(self, x):
        """The real part of complex ``x``, in the float dtype of its parts (``x`` itself when real)."""
        return self.xp.real(x) if self.dtype_of(x).kind == "c" else x

    def imag(self, x):
        """The imaginary part of complex ``x``, in the float dtype of its parts."""
        return self.xp.imag(x)

    def conj(self, x):
        """The complex conjugate of ``x`` (``x`` itself when real)."""
        return self.xp.conj(x) if self.dtype_of(x).kind == "c" else x

    def angle(self, x):
        """The argument of complex ``x`` in (-pi, pi]: ``atan2(imag, real)``."""
        return self.atan2(self.imag(x), self.real(x))

    def complex(self, re, im):
        """The complex array ``re + i im`` from two float arrays of one dtype (complex64 from float32,
        complex128 from float64), broadcast."""
        c = self.native(_dtypes.complex_of(self.dtype_of(re)))
        return self.add(self.astype(re, c), self.multiply(self.astype(im, c), 1j))

    def view_as_real(self, x):
        """Complex ``x`` as its real and imaginary parts along a new last axis of size 2 (a copy)."""
        return self.stack([self.real(x), self.imag(x)], axis=-1)

    def view_as_complex(self, x):
        """The complex array whose parts are ``x``'s last axis (of size 2): the inverse of :meth:`view_as_real`."""
        return self.complex(self.getitem(x, (Ellipsis, 0)), self.getitem(x, (Ellipsis, 1)))

    # what the standard lacks ---------------------------------------------------------
    def erf(self, x):
        """The error function, elementwise."""
        raise NotImplementedError

    def gelu(self, x):
        """Exact GELU and the normal CDF it multiplies by: ``(x * Phi(x), Phi(x))`` (float ``x``)."""
        cdf = (self.erf(x / _SQRT_2) + 1) * 0.5
        return x * cdf, cdf

    def addmm(self, c, a, b):
        """``a @ b + c``: a product of matrices (or stacks) and ``c`` of its dtype broadcast to it (a linear
        layer's bias), which a backend may add to each part of the product while it is in the cache."""
        y = self.matmul(a, b)
        return self.add(y, c, out=y) if self.supports_out else self.add(y, c)

    def matmuls(self, pairs, column_sums=()):
        """``[a @ b for a, b in pairs] + [s.sum(axis=0) for s in column_sums]``: independent products of
        matrices (a linear layer's input and weight gradients) and sums of matrices' columns (its bias's
        gradient), which a backend may run side by side."""
        return [self.matmul(a, b) for a, b in pairs] + [self.sum(s, axis=0) for s in column_sums]

    def products_side_by_side(self) -> bool:
        """Whether :meth:`matmuls` runs its products side by side now, faster than one after the other
        (ops then take it on raw arrays; otherwise they run each product as an op, which traces and
        profiles record)."""
        return False

    def rowdot(self, a, b):
        """The sums of ``a * b`` (real floats, one shape) along the last axis, kept as size 1."""
        return self.sum(self.multiply(a, b), axis=-1, keepdims=True)

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

    def add_norm_rows(self, x, r, n: int, w, b, eps: float, centered: bool):
        """The sum ``h = x + r`` (``r`` of ``x``'s shape and dtype) and :meth:`norm_rows` of it:
        ``(h, y, mean, rstd)``.  A residual add and the norm after it, which a backend's kernel may take
        in one pass (nt.compile joins them: ops/normalization.py)."""
        h = self.add(x, r)
        return (h, *self.norm_rows(h, n, w, b, eps, centered))

    def add_norm_rows_backward(self, x, n: int, mean, rstd, w, g, g_add, want_w: bool, want_b: bool):
        """:meth:`norm_rows_backward` with the input's gradient always computed and ``g_add`` (the
        gradient the input gets from its other readers, of its shape) added to it: ``(gx, gw, gb)``."""
        gx, gw, gb = self.norm_rows_backward(x, n, mean, rstd, w, g, True, want_w, want_b)
        return (self.add(gx, g_add, out=gx) if self.supports_out else self.add(gx, g_add)), gw, gb

    def softmax_columns(self, e, masked: bool, causal: bool = False):
        """Attention's softmax over the keys of key-major scores ``e`` (float, ``(..., key, query)``), left
        unnormalised: ``(exp(e - top), 1 / total)``, ``top`` each column's max and ``total`` the column's
        sum of exponentials, shape ``(..., 1, query)``.  With ``causal``, the scores of keys after their
        query (key j > query i, top-left aligned) count as -inf.  With ``masked``, a column with no
        finite score (a query with no key to attend) has ``top`` 0 and ``total`` 1, so its weights are
        0.  ``e`` is the caller's temporary: the exponentials may be written over it."""
        n_key, n_query = e.shape[-2], e.shape[-1]
        if causal:
            later = self.less(self.reshape(self.arange(n_query), (1, n_query)), self.reshape(self.arange(n_key), (n_key, 1)))
            cut = self.where(later, self.full((), -math.inf, dtype=e.dtype), self.zeros((), dtype=e.dtype))
            e = self.add(e, cut, out=e) if self.supports_out else self.add(e, cut)
        top = self.max(e, axis=-2, keepdims=True) if n_key else self.zeros(e.shape[:-2] + (1, n_query), dtype=e.dtype)
        if masked:
            top = self.where(self.isfinite(top), top, self.zeros_like(top))
        if self.supports_out:
            e = self.exp(self.subtract(e, top, out=e), out=e)
        else:
            e = self.exp(e - top)
        total = self.sum(e, axis=-2, keepdims=True)
        if masked:
            total = self.where(self.equal(total, 0.0), self.ones_like(total), total)
        return e, 1.0 / total

    def softmax_columns_backward(self, d, e, c):
        """``(d - c) * e``, the scores' gradient from the weights' gradient ``d`` (key-major), the
        exponentials ``e`` of :meth:`softmax_columns` and ``c`` of shape ``(..., 1, query)``; ``d`` is the
        caller's temporary and may be written over."""
        if self.supports_out:
            return self.multiply(self.subtract(d, c, out=d), e, out=d)
        return (d - c) * e

    def conv(self, x, w, stride, padding, dilation, groups: int):
        """The N-d convolution (cross-correlation) of ``x`` ``(N, C, *S)`` with ``w`` ``(O, C // groups,
        *kernel)``: im2col (one strided slice per kernel offset) and one batched matrix product per group.
        ``padding`` is one ``(before, after)`` pair per spatial axis, zeros; ``stride``, ``dilation``: ints
        per axis.  Returns ``(N, O, *out)`` (:func:`conv_out_shape`)."""
        n, c, co, kernel = x.shape[0], x.shape[1], w.shape[0], tuple(w.shape[2:])
        cols = self._windows(x, kernel, stride, padding, dilation, 0)
        out = tuple(cols.shape[3:])
        cols = self.reshape(cols, (n, groups, c // groups * math.prod(kernel), math.prod(out)))
        y = self.matmul(self.reshape(w, (groups, co // groups, -1)), cols)
        return self.reshape(y, (n, co) + out)

    def conv_input_grad(self, g, w, shape, stride, padding, dilation, groups: int):
        """The adjoint of :meth:`conv` in ``x`` (of ``shape``) for the output gradient ``g``: the weight's
        transpose times ``g`` (a matrix product per group), added back into place (col2im)."""
        n, c, co, kernel, out = shape[0], shape[1], w.shape[0], tuple(w.shape[2:]), tuple(g.shape[2:])
        wm = self.permute_dims(self.reshape(w, (groups, co // groups, -1)), (0, 2, 1))
        cols = self.matmul(wm, self.reshape(g, (n, groups, co // groups, math.prod(out))))
        cols = self.reshape(cols, (n, c, math.prod(kernel)) + out)
        return self._unwindow(cols, tuple(shape), kernel, stride, padding, dilation)

    def conv_weight_grad(self, x, g, wshape, stride, padding, dilation, groups: int):
        """The adjoint of :meth:`conv` in ``w`` (of ``wshape``): ``g`` times the input's windows, per
        group, summed over the batch."""
        n, c, co, kernel = x.shape[0], x.shape[1], wshape[0], tuple(wshape[2:])
        cols = self._windows(x, kernel, stride, padding, dilation, 0)
        cols = self.reshape(cols, (n, groups, c // groups * math.prod(kernel), -1))
        gm = self.reshape(g, (n, groups, co // groups, cols.shape[3]))
        gw = self.sum(self.matmul(gm, self.permute_dims(cols, (0, 1, 3, 2))), axis=0)
        return self.reshape(gw, tuple(wshape))

    def pool(self, x, kernel, stride, padding, dilation, mode: str, at=None):
        """Max (``mode`` "max") or average ("avg", padding counted) pooling of ``x`` ``(N, C, *S)``
        over windows of ``kernel``; max pads with -inf, avg with zeros.  Returns ``(y, k)``: ``y`` of
        shape ``(N, C, *out)``, ``k`` the offset of each maximum within its window (None for avg).
        Given ``at`` (offsets), max takes the values there instead of the maxima."""
        if mode == "avg":
            cols = self._windows(x, kernel, stride, padding, dilation, 0)
            return self.mean(cols, axis=2), None
        cols = self._windows(x, kernel, stride, padding, dilation, -math.inf)
        k = self.argmax(cols, axis=2) if at is None else at
        return self.squeeze(self.take_along_axis(cols, self.expand_dims(k, axis=2), axis=2), axis=2), k

    def pool_backward(self, g, k, shape, kernel, stride, padding, dilation, mode: str):
        """The adjoint of :meth:`pool` for the output gradient ``g``: each window's share (all of it to
        its maximum ``k``, or an equal part of it) added back into an array of ``shape``."""
        size = math.prod(kernel)
        g = self.expand_dims(g, axis=2)
        if mode == "avg":
            cols = self.broadcast_to(g / size, tuple(g.shape[:2]) + (size,) + tuple(g.shape[3:]))
        else:
            at = self.reshape(self.arange(size, dtype=k.dtype), (1, 1, size) + (1,) * (g.ndim - 3))
            cols = self.where(self.equal(at, self.expand_dims(k, axis=2)), g, self.zeros((), dtype=g.dtype))
        return self._unwindow(cols, tuple(shape), kernel, stride, padding, dilation)

    def _window_keys(self, kernel, stride, dilation, out):
        """One key per kernel offset (row-major): the strided slice of the padded input it meets."""
        lead = (slice(None), slice(None))
        for offsets in itertools.product(*(range(k) for k in kernel)):
            yield lead + tuple(slice(o * d, o * d + s * (m - 1) + 1, s)
                               for o, d, s, m in zip(offsets, dilation, stride, out))

    def _windows(self, x, kernel, stride, padding, dilation, value):
        """``x`` ``(N, C, *S)`` padded with ``value`` as its sliding windows, ``(N, C, K, *out)`` with ``K``
        the kernel's offsets (im2col)."""
        if any(lo or hi for lo, hi in padding):
            x = self.pad(x, ((0, 0), (0, 0)) + tuple(padding), value)
        out = conv_out_shape(tuple(x.shape[2:]), kernel, stride, ((0, 0),) * len(kernel), dilation)
        return self.stack([self.getitem(x, key) for key in self._window_keys(kernel, stride, dilation, out)], axis=2)

    def _unwindow(self, cols, shape, kernel, stride, padding, dilation):
        """The adjoint of :meth:`_windows`: ``cols`` ``(N, C, K, *out)`` added into zeros of ``shape``
        (col2im), where the windows overlap too."""
        padded = shape[:2] + tuple(s + lo + hi for s, (lo, hi) in zip(shape[2:], padding))
        acc = self.zeros(padded, dtype=cols.dtype)
        for i, key in enumerate(self._window_keys(kernel, stride, dilation, tuple(cols.shape[3:]))):
            self.setitem(acc, key, self.getitem(acc, key) + self.getitem(cols, (slice(None), slice(None), i)))
        if not any(lo or hi for lo, hi in padding):
            return acc
        return self.getitem(acc, (slice(None), slice(None)) + tuple(slice(lo, lo + s) for s, (lo, _) in
                                                                    zip(shape[2:], padding)))

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
        eps, step_size, decay, l2 = adam_coefficients(lr, beta1, beta2, eps, weight_decay, step, decoupled)
        for p, grad, exp_avg, exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs):
            adam_update(self, p, grad, exp_avg, exp_avg_sq, None, beta1, beta2, eps, step_size, decay, l2)

    #: whether :meth:`attention` is a fused kernel that scaled_dot_product_attention should call (for
    #: the calls it takes: no dropout, causal and key-padding masks only); otherwise the op computes
    #: attention itself, with a CPU-friendly layout of the scores
    fused_attention = False

    def attention(self, q, k, v, *, scale: float, causal: bool, key_keep):
        """Scaled dot-product attention: ``(out, lse)``.

        ``q`` (*batch, Lq, D), ``k`` (*batch, Lk, D), ``v`` (*batch, Lk, Dv), float, one dtype, any
        strides (views, batch dims broadcast with stride 0 among them); ``key_keep`` None or bool
        (*batch, Lk), True = may attend; ``causal``: query i attends key j only when j <= i.  ``out``
        (*batch, Lq, Dv) in q's dtype; ``lse`` (*batch, Lq) the log-sum-exp of each query's scaled,
        masked scores (float32 for float16 input).  A query with no key to attend gets ``out = 0`` and
        ``lse = -inf``.  A kernel on ``(N, L, D)`` arrays takes its calls through :meth:`_attention_3d`.
        The op hands ``lse`` back to :meth:`attention_backward` of the same hooks untouched.

        This default materialises the (*batch, Lq, Lk) scores (in float32 for float16 input): it is what
        a backend with :attr:`fused_attention` falls back to for inputs its kernel does not take.
        """
        dtype = q.dtype
        q, k, v = (self._attention_work(x) for x in (q, k, v))
        s = self.matmul(q * scale, self._swap_last(k))
        allowed = self._attention_allowed(s.shape, causal, key_keep)
        if allowed is not None:
            s = self.where(allowed, s, -math.inf)
        n_key = s.shape[-1]
        if n_key == 0:
            top = self.zeros(tuple(s.shape[:-1]) + (1,), dtype=s.dtype)
        else:
            top = self.max(s, axis=-1, keepdims=True)
            top = self.where(self.isfinite(top), top, 0.0)  # no key to attend: exp(-inf - 0) = 0
        e = self.exp(s - top)
        total = self.sum(e, axis=-1, keepdims=True)
        some = self.greater(total, 0.0)
        safe = self.where(some, total, 1.0)
        out = self.astype(self.matmul(e, v) / safe, dtype)
        lse = self.where(some, top + self.log(safe), -math.inf)
        return out, self.reshape(lse, tuple(s.shape[:-1]))

    def attention_backward(self, q, k, v, out, lse, g, *, scale: float, causal: bool, key_keep):
        """The gradients ``(dq, dk, dv)`` of :meth:`attention` for the output's gradient ``g``, from its
        ``out`` and ``lse`` (shapes as there; each gradient has its operand's shape, batch dims
        broadcast included): with ``P = exp(S - lse)`` (0 where masked), ``dV = P^T g``,
        ``dS = P * (g V^T - rowsum(g * out))``, ``dQ = scale dS K``, ``dK = scale dS^T Q``.  This
        default materialises P, as :meth:`attention` does."""
        dtypes = (q.dtype, k.dtype, v.dtype)
        q, k, v, out, g = (self._attention_work(x) for x in (q, k, v, out, g))
        lse = self.astype(lse, q.dtype)
        s = self.matmul(q * scale, self._swap_last(k))
        finite = self.expand_dims(self.isfinite(lse), axis=-1)
        allowed = self._attention_allowed(s.shape, causal, key_keep)
        allowed = finite if allowed is None else self.logical_and(allowed, finite)
        lse = self.expand_dims(self.where(self.isfinite(lse), lse, 0.0), axis=-1)
        p = self.exp(self.where(allowed, s - lse, -math.inf))
        dv = self.matmul(self._swap_last(p), g)
        delta = self.sum(g * out, axis=-1, keepdims=True)
        ds = p * (self.matmul(g, self._swap_last(v)) - delta)
        dq = self.matmul(ds, k) * scale
        dk = self.matmul(self._swap_last(ds), q) * scale
        return tuple(self.astype(x, d) for x, d in zip((dq, dk, dv), dtypes))

    def _attention_3d(self, kernel, q, k, v, *, scale: float, causal: bool, key_keep):
        """:meth:`attention` by ``kernel``, which takes ``(N, L, D)`` arrays and ``(N, Lk)`` keys (the CUDA
        kernels): the batch dims flattened into N, the results shaped back."""
        batch = tuple(q.shape[:-2])
        n = math.prod(batch)
        q3, k3, v3 = (self._flat(x, n, 2) for x in (q, k, v))
        keep = None if key_keep is None else self._flat(key_keep, n, 1)
        out, lse = kernel(q3, k3, v3, scale=scale, causal=causal, key_keep=keep)
        return self.reshape(out, batch + tuple(out.shape[1:])), self.reshape(lse, batch + tuple(lse.shape[1:]))

    def _attention_backward_3d(self, kernel, q, k, v, out, lse, g, *, scale: float, causal: bool, key_keep):
        """:meth:`attention_backward` by a kernel on ``(N, L, D)`` arrays, as :meth:`_attention_3d`."""
        n = math.prod(q.shape[:-2])
        q3, k3, v3, out3, g3 = (self._flat(x, n, 2) for x in (q, k, v, out, g))
        keep = None if key_keep is None else self._flat(key_keep, n, 1)
        grads = kernel(q3, k3, v3, out3, self._flat(lse, n, 1), g3, scale=scale, causal=causal, key_keep=keep)
        return tuple(self.reshape(x, tuple(like.shape)) for x, like in zip(grads, (q, k, v)))

    def _flat(self, x, n: int, core: int):
        """``x`` with its batch dims flattened into one of size ``n`` and its last ``core`` dims kept (a copy
        where the strides allow no view: batch dims broadcast with stride 0 become real)."""
        return self.reshape(x, (n,) + tuple(x.shape[len(x.shape) - core:]))

    def _attention_work(self, x):
        """``x`` in the dtype the default attention computes in: float32 for float16, else its own."""
        if self.dtype_of(x) is _dtypes.float16:
            return self.astype(x, self.native(_dtypes.float32))
        return x

    def _swap_last(self, x):
        n = len(x.shape)
        return self.permute_dims(x, tuple(range(n - 2)) + (n - 1, n - 2))

    def _attention_allowed(self, shape, causal: bool, key_keep):
        """The bool (query, key) pairs that may attend, broadcastable to the scores' ``shape``
        (*batch, Lq, Lk), or None when all may."""
        allowed = None
        if causal:
            i = self.reshape(self.arange(shape[-2]), (shape[-2], 1))
            j = self.reshape(self.arange(shape[-1]), (1, shape[-1]))
            allowed = self.greater_equal(i, j)
        if key_keep is not None:
            keep = self.expand_dims(key_keep, axis=-2)
            allowed = keep if allowed is None else self.logical_and(allowed, keep)
        return allowed

    def row_major(self, x) -> bool:
        """Whether ``x``'s elements lie in memory in row-major order (True where the backend has no
        notion of layout): then a reshape of ``x`` is free and its rows are contiguous."""
        return True

    def as_row_major(self, x):
        """``x`` itself where :meth:`row_major`, else a copy whose elements lie in row-major order."""
        return x

    # linear algebra: the standard's linalg extension, on stacks of matrices in the last two dims ---
    def inv(self, x):
        """The inverse of each square matrix."""
        return self.xp.linalg.inv(x)

    def det(self, x):
        """The determinant of each square matrix (shape ``x.shape[:-2]``)."""
        return self.xp.linalg.det(x)

    def slogdet(self, x):
        """``(sign, log|det|)`` of each square matrix."""
        sign, logabsdet = self.xp.linalg.slogdet(x)
        return sign, logabsdet

    def solve(self, a, b):
        """``x`` with ``a @ x == b``: ``a`` (..., n, n) and ``b`` (..., n, k) of equal batch shapes."""
        return self.xp.linalg.solve(a, b)

    def cholesky(self, x):
        """The lower Cholesky factor of each symmetric (Hermitian) positive-definite matrix."""
        return self.xp.linalg.cholesky(x)

    def eigh(self, x):
        """``(eigenvalues, eigenvectors)`` of each symmetric (Hermitian) matrix (its lower triangle), ascending;
        the eigenvalues are real."""
        w, v = self.xp.linalg.eigh(x)
        return w, v

    def qr(self, x, mode: str):
        """``(q, r)`` of each matrix; ``mode`` is ``"reduced"`` or ``"complete"``."""
        q, r = self.xp.linalg.qr(x, mode=mode)
        return q, r

    def svd(self, x, full_matrices: bool):
        """``(u, s, vh)`` of each matrix, singular values descending."""
        u, s, vh = self.xp.linalg.svd(x, full_matrices=full_matrices)
        return u, s, vh

    def pinv(self, x, atol, rtol):
        """The pseudo-inverse of each matrix, from its SVD: singular values at most
        ``max(atol, rtol * largest)`` count as zero; ``atol`` and ``rtol`` are floats or arrays of one value
        per matrix (shape ``x.shape[:-2]``, or one that broadcasts to it)."""
        m, n = x.shape[-2:]
        if m == 0 or n == 0:
            return self.zeros(x.shape[:-2] + (n, m), dtype=x.dtype)
        u, s, vh = self.svd(x, False)
        atol, rtol = (v if isinstance(v, float) else self.expand_dims(v, axis=-1) for v in (atol, rtol))
        cutoff = self.max(s, axis=-1, keepdims=True) * rtol
        if not isinstance(atol, float):
            cutoff = self.maximum(cutoff, atol)
        elif atol > 0:
            cutoff = self.maximum(cutoff, self.full_like(cutoff, atol))
        keep = self.greater(s, cutoff)
        s_inv = self.where(keep, 1.0 / self.where(keep, s, self.ones_like(s)), self.zeros_like(s))
        last = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
        vh, u = self.permute_dims(vh, last), self.permute_dims(u, last)
        if self.dtype_of(x).kind == "c":  # pinv = V S^-1 U^H: conjugate transposes
            vh, u = self.conj(vh), self.conj(u)
        return self.matmul(vh * self.expand_dims(s_inv, axis=-2), u)

    def einsum(self, subscripts, *arrays):
        """NumPy's ``einsum`` with letter subscripts (``"ij,jk->ik"``)."""
        raise NotImplementedError

    def scatter_add(self, shape, dtype, key, values):
        """A zero array of ``shape`` with ``values`` added at ``key`` (repeated indices accumulate)."""
        raise NotImplementedError

    def scatter_reduce(self, x, key, values, reduce: str, include_self: bool):
        """A copy of ``x`` with ``values`` combined into it at ``key`` by ``reduce`` (``"sum" "prod" "amax"
        "amin"``): ``key`` is one integer array per axis, broadcasting to ``values``' shape; repeated
        positions combine all their values, in order.  Without ``include_self`` a position that ``key``
        reaches starts from its first value instead of from ``x``.

        Generic version: the values go in rounds, the k-th round taking each position's k-th value, so
        that no round writes a position twice (plain advanced writes keep only one of repeated ones).
        """
        shape = tuple(x.shape)
        int64 = self.native(_dtypes.int64)
        linear, stride = None, 1
        for k, n in zip(reversed(key), reversed(shape)):
            term = self.astype(k, int64) * stride
            linear = term if linear is None else linear + term
            stride *= n
        vshape = tuple(values.shape)
        linear = self.reshape(self.broadcast_to(linear, vshape), (-1,))
        values = self.reshape(values, (-1,))
        out = self.reshape(self.asarray(x, copy=True), (-1,))
        n = linear.shape[0]
        if n == 0:
            return self.reshape(out, shape)
        order = self.sort_indices(linear, 0, False, True)
        linear, values = self.take(linear, order, axis=0), self.take(values, order, axis=0)
        starts = self.concat([self.ones((1,), dtype=self.native(_dtypes.bool_)), linear[1:] != linear[:-1]])
        group = self.cumulative_sum(self.astype(starts, int64)) - 1
        rank = self.arange(n, dtype=int64) - self.take(self.nonzero(starts)[0], group, axis=0)
        combine = {"sum": self.add, "prod": self.multiply, "amax": self.maximum, "amin": self.minimum}[reduce]
        for r in range(int(self.item(self.max(rank))) + 1):
            chosen = rank == r
            at, v = self.getitem(linear, chosen), self.getitem(values, chosen)
            self.setitem(out, at, v if r == 0 and not include_self else combine(self.getitem(out, at), v))
        return self.reshape(out, shape)

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

    def tri_indices(self, row: int, col: int, offset: int, lower: bool, dtype):
        """The ``(2, N)`` coordinates of the entries of a ``row x col`` matrix on and below (``lower``) or on
        and above diagonal ``offset``, row by row (PyTorch's ``tril_indices``/``triu_indices``)."""
        r = self.reshape(self.arange(row, dtype=dtype), (row, 1))
        c = self.reshape(self.arange(col, dtype=dtype), (1, col))
        inside = (c - r <= offset) if lower else (c - r >= offset)
        return self.astype(self.stack(self.nonzero(inside), axis=0), dtype)

    def sort_indices(self, x, axis: int, descending: bool, stable: bool):
        """``argsort`` along ``axis``; descending order keeps ties in their original order when stable."""
        return self.argsort(x, axis=axis, descending=descending, stable=stable)

    def searchsorted(self, edges, x, right: bool):
        """For each element of ``x``, the index of the first element of the sorted 1-D ``edges`` that is
        ``>= x`` (``> x`` when ``right``), as int64 of ``x``'s shape (``bucketize``, ``histogram``)."""
        flat = self.reshape(x, (-1,))
        at = self.xp.searchsorted(edges, flat, side="right" if right else "left")
        return self.reshape(self.astype(at, self.native(_dtypes.int64)), tuple(x.shape))

    # the FFTs: the standard's fft extension; the ops cast first (complex in, or real floats for rfft) --
    def fft(self, x, n: int, axis: int, norm: str, inverse: bool):
        """The complex DFT (``inverse``: its inverse) of ``x`` along ``axis``, cut or zero-padded to ``n``."""
        return (self.xp.fft.ifft if inverse else self.xp.fft.fft)(x, n=n, axis=axis, norm=norm)

    def rfft(self, x, n: int, axis: int, norm: str):
        """The DFT of real ``x`` along ``axis`` (cut or padded to ``n``): the ``n // 2 + 1`` bins from 0."""
        return self.xp.fft.rfft(x, n=n, axis=axis, norm=norm)

    def irfft(self, x, n: int, axis: int, norm: str):
        """The real signal of length ``n`` whose DFT's first ``n // 2 + 1`` bins are ``x`` (Hermitian)."""
        return self.xp.fft.irfft(x, n=n, axis=axis, norm=norm)

    def logaddexp(self, a, b):
        """``log(exp(a) + exp(b))`` without overflow (for namespaces that lack it)."""
        m = self.maximum(a, b)
        m = self.where(self.isfinite(m), m, self.zeros_like(m))  # -inf - -inf would be nan
        return m + self.log(self.exp(a - m) + self.exp(b - m))

    def exp2(self, x):
        """``2 ** x``, elementwise (not in the standard)."""
        return self.pow(2.0, x)

    def fmod(self, a, b):
        """C's remainder, with the sign of the dividend (``remainder`` has the divisor's); exact, as
        ``remainder`` is, since the magnitudes' remainders are the same."""
        a_abs, b_abs = (self.abs(v) if self.is_array(v) else abs(v) for v in (a, b))
        return self.multiply(self.sign(a) if self.is_array(a) else (a > 0) - (a < 0), self.remainder(a_abs, b_abs))

    # special functions ---------------------------------------------------------------
    # Written with array ops only, so that every namespace has them; the NumPy backend takes SciPy's
    # where it is installed, the CuPy backend cupyx.scipy.special's.  Each works in the input's float
    # dtype (float16 in float32) and is accurate to a few ulps of float64 (tests/test_special.py).

    def _special_in(self, x):
        """``(x, dtype)``: float ``x`` in the dtype a special function works in (float16 in float32),
        and the dtype to give the result back in."""
        if self.dtype_of(x) is _dtypes.float16:
            return self.astype(x, self.native(_dtypes.float32)), x.dtype
        return x, None

    def _special_out(self, y, dtype):
        return y if dtype is None else self.astype(y, dtype)

    def erfc(self, x):
        """``1 - erf(x)`` without cancellation: Laplace's continued fraction for ``|x| >= 1.5``."""
        x, back = self._special_in(x)
        a = self.abs(x)
        big = self.minimum(self.maximum(a, 1.5), 30.0)  # erfc(30) is below the smallest double
        frac = big
        for k in range(_ERFC_TERMS, 0, -1):
            frac = big + (k / 2.0) / frac
        # exp(-big**2) as exp(-hi**2) exp(-(big - hi)(big + hi)), hi**2 exact: big**2 rounded would
        # be off by big**2 ulps in the exponent
        hi = self.trunc(big * 4096.0) / 4096.0
        tail = self.exp(-(hi * hi)) * self.exp(-(big - hi) * (big + hi)) / _SQRT_PI / frac
        upper = self.where(a < 1.5, 1.0 - self.erf(a), tail)
        return self._special_out(self.where(x < 0, 2.0 - upper, upper), back)

    def erfinv(self, x):
        """The inverse of erf on [-1, 1]: Giles' single-precision approximation, then Newton steps on
        ``erf(y) = |x|`` (on ``log erfc(y) = log(1 - |x|)`` where ``|x| > 0.5``: 1 - |x| is exact there)."""
        x, back = self._special_in(x)
        a = self.abs(x)
        inside = a < 1
        a = self.where(inside, a, 0.0)
        w = -self.log((1.0 - a) * (1.0 + a))
        central, tail = w - 2.5, self.sqrt(self.maximum(w, 5.0)) - 3.0
        y = self.where(w < 5.0, _horner(central, _GILES_CENTRAL), _horner(tail, _GILES_TAIL)) * a
        far = a > 0.5
        for _ in range(4):
            # Newton's y - f(y) / f'(y) for f = erf(y) - a, and in the tail, where that converges slowly
            # from Giles' start, for f = log(erfc(y)) - log(1 - a) (1 - a exact, log erfc nearly quadratic)
            slope = _TWO_OVER_SQRT_PI * self.exp(-(y * y))
            upper = self.erfc(self.where(far, y, 1.0))
            miss = self.where(far, (self.log(upper) - self.log1p(-a)) * upper, a - self.erf(y))
            y = y + miss / slope
        y = self.where(inside, y, self.where(self.abs(x) == 1, math.inf, self.full_like(y, math.nan)))
        return self._special_out(self.copysign(y, x), back)

    def lgamma(self, x):
        """``log |Gamma(x)|``: the Taylor series of lgamma about 2 (or a shift onto it) below 10,
        Stirling's series above, and the reflection formula for ``x <= 0``; ``+inf`` at the poles and
        at ``+-inf``, as in PyTorch."""
        x, back = self._special_in(x)
        infinite = self.isinf(x)
        x = self.where(infinite, 1.0, x)
        y = self.where(x > 0, x, 1.0 - x)  # for x <= 0, the reflection's lgamma(1 - x)
        # below 10: lgamma(y) = S(z) + correction, with S(z) = lgamma(2 + z) by its series, |z| <= 1/2
        r, prod = y, self.ones_like(y)
        for _ in range(8):  # lgamma(r) = lgamma(r - 1) + log(r - 1), down to r < 2.5
            step = self.logical_and(r >= 2.5, y < 10)
            prod = self.where(step, prod * (r - 1.0), prod)
            r = self.where(step, r - 1.0, r)
        small, middle = y < 0.5, y < 1.5
        z = self.where(small, y, self.where(middle, y - 1.0, self.where(y < 10, r - 2.0, 0.0)))
        tiny = self.where(small, y, 1.0)
        correction = self.where(small, -self.log1p(tiny) - self.log(tiny),
                                self.where(middle, -self.log1p(self.where(middle, z, 0.0)), self.log(prod)))
        series = z * _horner(z, _lgamma_series())
        big = self.maximum(y, 10.0)
        stirling = (big - 0.5) * self.log(big) - big + _HALF_LOG_2PI + _horner(1.0 / (big * big), _STIRLING) / big
        positive = self.where(y < 10, series + correction, stirling)
        s = self.abs(self.sin(math.pi * (x - self.round(x))))
        pole = s == 0
        reflected = _LOG_PI - self.log(self.where(pole, 1.0, s)) - positive
        out = self.where(x > 0, positive, self.where(pole, math.inf, reflected))
        return self._special_out(self.where(infinite, math.inf, out), back)

    def digamma(self, x):
        """The derivative of lgamma: :meth:`polygamma` of order 0 (the generic one: a backend's own
        polygamma may send order 0 here)."""
        return Backend.polygamma(self, 0, x)

    def polygamma(self, n: int, x):
        """The ``n``-th derivative of digamma (``n = 0``: digamma itself): the recurrence
        ``psi_n(x) = psi_n(x + 1) + (-1)**(n + 1) n! / x**(n + 1)`` up to where the asymptotic series
        holds, and for ``x <= 0`` the reflection formula ``psi_n(x) = (-1)**n psi_n(1 - x) - pi d^n/dx^n
        cot(pi x)`` (the derivatives of cot are polynomials in cot).  At the poles (the integers
        ``<= 0``) digamma is ``-inf`` at +0, ``+inf`` at -0 and nan elsewhere, and ``n >= 1`` gives the
        limit from the right, ``(-1)**(n + 1) inf``, as PyTorch does; at ``+inf`` the limit, at ``-inf``
        nan."""
        x, back = self._special_in(x)
        sign = -1.0 if n % 2 == 0 else 1.0  # (-1)**(n + 1)
        fact = float(math.factorial(n)) if n <= 170 else math.inf
        top = 10 + 2 * n  # from here on the asymptotic series below is exact to double precision
        given = x
        x = self.where(self.isinf(x), 1.0, x)
        y = self.where(x > 0, x, 1.0 - x)
        total = self.zeros_like(y)
        for _ in range(top):
            low = y < top
            total = total + self.where(low, sign * fact * self.pow(self.where(low, y, 1.0), -(n + 1.0)), 0.0)
            y = self.where(low, y + 1.0, y)
        inv = 1.0 / y
        inv2 = inv * inv
        terms = [b * math.factorial(2 * k + n - 1) / math.factorial(2 * k) for k, b in enumerate(_BERNOULLI, 1)]
        series = inv2 * _horner(inv2, terms[::-1])  # sum_k B_2k (2k + n - 1)! / (2k)! / y**2k
        if n == 0:
            asymptotic = self.log(y) - 0.5 * inv - series
        else:
            asymptotic = sign * self.pow(inv, float(n)) * (fact / n + fact * 0.5 * inv + series)
        positive = asymptotic + total
        r = x - self.round(x)
        pole = r == 0
        r = self.where(pole, 0.5, r)
        # cot(pi r) as tan(pi (1/2 - |r|)) near |r| = 1/2, where 1/2 - |r| is exact: pi r rounded would
        # put an error of 1e-16 into a cot that should be 0
        near_half = self.abs(r) > 0.25
        c = self.where(near_half, self.sign(r) * self.tan(math.pi * (0.5 - self.abs(r))),
                       1.0 / self.tan(math.pi * self.where(near_half, 0.25, r)))
        reflected = (-1.0) ** n * positive - math.pi ** (n + 1) * _horner(c, _cot_derivative(n))
        if n == 0:  # a simple pole: +-inf at -+0 (the side of 0 it is approached from), nan elsewhere
            at_pole = self.where(x == 0, -self.copysign(self.full_like(x, math.inf), x), math.nan)
        else:  # the limit from the right, as at +0
            at_pole = self.full_like(x, sign * math.inf)
        out = self.where(x > 0, positive, self.where(pole, at_pole, reflected))
        out = self.where(given == math.inf, 0.0 if n else math.inf, self.where(given == -math.inf, math.nan, out))
        return self._special_out(out, back)

    def i0(self, x):
        """The modified Bessel function of the first kind of order 0 (:meth:`_bessel_i`)."""
        return self._bessel_i(x, 0)

    def i1(self, x):
        """The modified Bessel function of the first kind of order 1 (:meth:`_bessel_i`)."""
        return self._bessel_i(x, 1)

    def _bessel_i(self, x, order: int):
        """``I_order(x)`` for order 0 or 1: the power series up to ``|x| = 20``, whose terms are all
        positive (no cancellation), and the asymptotic series of ``e^x / sqrt(2 pi x)`` above, whose terms
        are below 1e-17 by the 30th there; ``I_1`` is odd.  At +-inf it is nan, as SciPy's and PyTorch's are."""
        x, back = self._special_in(x)
        a = self.abs(x)
        half = self.minimum(a, 20.0) * 0.5
        h2 = half * half
        term = half if order else self.ones_like(half)
        series = term
        for k in range(1, 60):  # (x/2)^(2k + order) / (k! (k + order)!); at |x| = 20 the 50th is below 1e-17
            term = term * h2 / float(k * (k + order))
            series = series + term
        big = self.maximum(self.where(self.isinf(a), 20.0, a), 20.0)
        mu = 4.0 * order * order
        term = self.ones_like(big)
        tail = term
        for j in range(1, 30):
            term = term * (-(mu - (2 * j - 1) ** 2) / (8.0 * j)) / big
            tail = tail + term
        root = self.exp(big * 0.5)  # e^x as root * root: e^x alone overflows before I(x) does
        asymptotic = root * (root / self.sqrt((2 * math.pi) * big)) * tail
        out = self.where(a <= 20.0, series, self.where(self.isinf(a), math.nan, asymptotic))
        if order:
            out = self.where(x < 0, -out, out)
        return self._special_out(out, back)

    def igamma(self, a, x):
        """The regularized lower incomplete gamma function ``P(a, x)`` (:meth:`_incomplete_gamma`)."""
        return self._incomplete_gamma(a, x, upper=False)

    def igammac(self, a, x):
        """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``
        (:meth:`_incomplete_gamma`)."""
        return self._incomplete_gamma(a, x, upper=True)

    def _incomplete_gamma(self, a, x, upper: bool):
        """``Q(a, x)`` if ``upper`` else ``P(a, x)``, of float arrays (broadcast; the result in their
        promoted dtype), computed in float64: for ``x < a + 1`` the series ``P = x^a e^-x / Gamma(a + 1)
        sum_n x^n / ((a + 1) ... (a + n))``, else Legendre's continued fraction of ``Q`` (modified Lentz),
        each to a fixed number of terms, which gives about 1e-14 relative for ``a <= 1e3`` (the series
        needs ``~sqrt(a)`` terms where ``x`` is near ``a``); the other function is 1 minus the one computed
        (at most about 0.6 there), except where ``a < 1/2`` (:meth:`_small_upper_gamma`).  The edges are
        PyTorch's (:meth:`_incomplete_gamma_edges`)."""
        dtype = self.xp.result_type(a, x)
        f64 = self.native(_dtypes.float64)
        a, x = self.xp.broadcast_arrays(self.astype(a, f64), self.astype(x, f64))
        regular = self.logical_and(self.logical_and(a > 0, x > 0), self.logical_and(a < math.inf, x < math.inf))
        a_in, x_in = a, x
        a, x = self.where(regular, a, 1.0), self.where(regular, x, 1.0)
        series = x < a + 1.0
        # the series of P where it is taken (elsewhere x = 0: its terms vanish)
        xs = self.where(series, x, 0.0)
        term = self.ones_like(a)
        total = term
        for n in range(1, _IGAMMA_SERIES_TERMS + 1):
            term = term * xs / (a + float(n))
            total = total + term
        p_series = self.exp(self._gamma_prefix(a, x, 1)) * total
        # the continued fraction of Q, x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)),
        # where it is taken (elsewhere on x = a + 1, where it converges)
        xc = self.where(series, a + 1.0, x)
        b = xc + 1.0 - a
        c = self.full_like(a, 1.0 / _LENTZ_TINY)
        d = 1.0 / b
        h = d
        for i in range(1, _IGAMMA_FRACTION_TERMS + 1):
            an = -i * (i - a)
            b = b + 2.0
            d = an * d + b
            d = self.where(self.abs(d) < _LENTZ_TINY, _LENTZ_TINY, d)
            c = b + an / c
            c = self.where(self.abs(c) < _LENTZ_TINY, _LENTZ_TINY, c)
            d = 1.0 / d
            h = h * d * c
        q_fraction = self.exp(self._gamma_prefix(a, xc, 0)) * h
        if upper:
            # below a = 1/2, Q is small where P is near 1: a series of Q itself there
            small = self.logical_and(series, a < 0.5)
            q_series = self._small_upper_gamma(self.where(small, a, 0.25), self.where(small, x, 1.0))
            out = self.where(small, q_series, self.where(series, 1.0 - p_series, q_fraction))
        else:
            out = self.where(series, p_series, 1.0 - q_fraction)
        out = self.where(regular, out, math.nan)  # nan operands; the edges follow
        return self.astype(self._incomplete_gamma_edges(a_in, x_in, out, upper), dtype)

    def _incomplete_gamma_edges(self, a, x, out, upper: bool):
        """``out``, ``P(a, x)`` (or ``Q``, if ``upper``), with PyTorch's values at the edges, which it tests in
        this order (so that a nan operand may still meet one): nan where ``a`` or ``x`` is negative; at
        ``a = 0``, ``P = 1`` for ``x > 0``, else nan; at ``x = 0``, ``P = 0``; at ``a = inf``, nan for
        ``x = inf``, else ``P = 0``; at ``x = inf``, ``P = 1``.  (``Q = 1 - P``.)"""
        one, zero = (0.0, 1.0) if upper else (1.0, 0.0)
        x_inf, a_inf, a_zero = x == math.inf, a == math.inf, a == 0
        # the rules from the last to the first, each overriding those after it
        out = self.where(x_inf, one, out)
        out = self.where(a_inf, zero, out)
        out = self.where(self.logical_and(a_inf, x_inf), math.nan, out)
        out = self.where(x == 0, zero, out)
        out = self.where(a_zero, one, out)
        out = self.where(self.logical_and(a_zero, self.logical_not(x > 0)), math.nan, out)
        return self.where(self.logical_or(a < 0, x < 0), math.nan, out)

    def _small_upper_gamma(self, a, x):
        """``Q(a, x)`` for float64 ``0 < a < 1/2``, ``0 < x < a + 1`` without the cancellation of ``1 - P``:
        ``Q = 1 - x^a / Gamma(a + 1) - a x^a / Gamma(a + 1) sum_n>=1 (-x)^n / (n! (a + n))``, from the series of
        the lower incomplete gamma function, with ``lgamma(1 + a) = lgamma(2 + a) - log1p(a)`` by the
        series of lgamma about 2 (the library's lgamma of ``1 + a`` would lose ``a``'s digits)."""
        log_power = a * self.log(x) - (a * _horner(a, _lgamma_series()) - self.log1p(a))  # log(x^a / Gamma(a + 1))
        term = self.ones_like(x)
        total = self.zeros_like(x)
        for n in range(1, _SMALL_UPPER_GAMMA_TERMS + 1):
            term = term * -x / float(n)
            total = total + term / (a + float(n))
        return -self.expm1(log_power) - a * self.exp(log_power) * total

    def _gamma_prefix(self, a, x, shift: int):
        """``log(x^a e^-x / Gamma(a + shift))`` (``shift`` 0 or 1) for positive finite float64 ``a, x``:
        with the backend's lgamma below ``a = 10``; above, with Stirling's series for lgamma and
        ``a log(x / a) + a - x`` as ``a log1p(t) - (x - a)``, ``t = (x - a) / a``, near ``x = a``, which
        keeps ``a log a`` (up to 7e3) from cancelling: the error is then that of rounding ``x``."""
        direct = a * self.log(x) - x - self.lgamma(a + 1.0 if shift else a)
        big = self.maximum(a, 10.0)
        t = (x - big) / big
        near = self.abs(t) < 0.5
        log_ratio = self.where(near, self.log1p(self.where(near, t, 0.0)), self.log(x / big))
        stirling = (big * log_ratio - (x - big) + 0.5 * self.log(big) - _HALF_LOG_2PI
                    - _horner(1.0 / (big * big), _STIRLING) / big)
        if shift:
            stirling = stirling - self.log(big)
        return self.where(a < 10, direct, stirling)

    # random numbers ------------------------------------------------------------------
    def seed(self, n: int) -> None:
        """Restart the random stream from seed ``n``."""
        raise NotImplementedError

    def random_state(self) -> object:
        """A snapshot of the random stream that compares equal before and after a stretch that drew
        nothing (``nt.compile`` refuses to freeze numbers drawn while tracing)."""
        return None

    def set_random_state(self, state: object) -> None:
        """Go back to a snapshot of :meth:`random_state` (where the backend can; CuPy's stream goes on)."""

    def rand(self, shape, dtype):
        """Uniform samples in [0, 1) of a float ``nt`` dtype."""
        raise NotImplementedError

    def randn(self, shape, dtype):
        """Standard normal samples of a float ``nt`` dtype."""
        raise NotImplementedError

    def randint(self, low, high, shape, dtype):
        """Integers in ``[low, high)`` of an integer ``nt`` dtype."""
        raise NotImplementedError

    def randperm(self, n: int, dtype):
        """A random permutation of ``0 .. n-1`` in an ``nt`` dtype: the order that sorts ``n`` uniform
        samples (ties among float64 samples are too rare to bias it)."""
        return self.astype(self.argsort(self.rand((n,), _dtypes.float64)), self.native(dtype))


def conv_out_shape(size, kernel, stride, padding, dilation) -> tuple:
    """The spatial output shape of a sliding window of ``kernel`` over ``size`` (PyTorch's formula)."""
    return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                 for s, k, st, (lo, hi), d in zip(size, kernel, stride, padding, dilation))


def _horner(x, coefficients):
    """The polynomial with ``coefficients`` (highest power first) at ``x``."""
    out = coefficients[0]
    for c in coefficients[1:]:
        out = out * x + c
    return out


_SQRT_PI = math.sqrt(math.pi)
_TWO_OVER_SQRT_PI = 2.0 / _SQRT_PI
_LOG_PI = math.log(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: continued-fraction terms of erfc: 1.5e-15 relative from |x| = 1.5 on
_ERFC_TERMS = 80
#: M. Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): single precision
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
#: terms of the incomplete gamma function's series (for x < a + 1) and continued fraction (x >= a + 1):
#: 1e-15 relative up to a = 1e3, where each needs the most (x near a + 1)
_IGAMMA_SERIES_TERMS = 300
_IGAMMA_FRACTION_TERMS = 150
#: terms of the series of Q for a < 1/2 (x < 3/2 there): 1.5**30 / 30! is 1e-27
_SMALL_UPPER_GAMMA_TERMS = 30
#: the modified Lentz method's stand-in for a zero denominator
_LENTZ_TINY = 1e-300
#: B_2, B_4, ..., B_20 (Bernoulli numbers) for the asymptotic series of lgamma and polygamma
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)
#: Stirling's series of lgamma(y) - ((y - 1/2) log y - y + log(2 pi) / 2), in 1/y**2, highest first, times 1/y
_STIRLING = tuple(b / (2 * k * (2 * k - 1)) for k, b in enumerate(_BERNOULLI[:8], 1))[::-1]


@functools.lru_cache(maxsize=None)
def _lgamma_series() -> tuple:
    """lgamma(2 + z) = z * (this polynomial in z, highest power first), for |z| <= 1/2:
    ``(1 - gamma) z + sum_k>=2 (-1)**k (zeta(k) - 1) / k z**k``, to 30 terms (error below 4**-30)."""
    coefficients = [1.0 - _EULER_GAMMA] + [(-1) ** k * _zeta_minus_one(k) / k for k in range(2, 31)]
    return tuple(coefficients[::-1])


_EULER_GAMMA = 0.5772156649015329


def _zeta_minus_one(k: int) -> float:
    """``zeta(k) - 1`` for an integer ``k >= 2``: a sum to N, then the Euler-Maclaurin tail."""
    n = 256
    head = math.fsum(m ** -k for m in range(2, n))
    tail = n ** (1 - k) / (k - 1) + n ** -k / 2 + k * n ** (-k - 1) / 12 - k * (k + 1) * (k + 2) * n ** (-k - 3) / 720
    return head + tail


@functools.lru_cache(maxsize=None)
def _cot_derivative(n: int) -> tuple:
    """The polynomial ``P_n`` (highest power first) with ``d^n/dx^n cot(pi x) = pi**n P_n(cot(pi x))``:
    ``P_0(c) = c``, ``P_k+1(c) = -(1 + c**2) P_k'(c)``."""
    p = [0, 1]  # lowest power first while building
    for _ in range(n):
        d = [i * p[i] for i in range(1, len(p))] or [0]
        p = [0] * (len(d) + 2)
        for i, c in enumerate(d):
            p[i] -= c
            p[i + 2] -= c
    return tuple(float(c) for c in reversed(p))
