"""The backend interface: an array namespace plus what the namespace lacks.

Ops never import an array library; they call the backend of their operands
(``t._B``).  A backend exposes the Array-API functions of its namespace as
attributes (``B.exp``, ``B.sum``...), bound directly so a call costs nothing
extra, and adds the pieces the standard does not have (``erf``, ``einsum``,
``scatter_add``, ``pad``, random numbers...).  The NumPy backend ships; the
array-api-strict backend exists to keep NumPy-only calls out of the ops; the
CuPy backend comes with the GPU work.
"""

from __future__ import annotations

import math

from .. import _dtypes

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
