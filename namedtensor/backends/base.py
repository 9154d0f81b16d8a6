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

from .. import _dtypes

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
        try:
            return self._to_native[dtype]
        except KeyError:
            raise TypeError(f"dtype {dtype!r} is not available on the {self.name} backend.") from None

    def dtype_of(self, x) -> _dtypes.DType:
        try:
            return self._from_native[x.dtype]
        except KeyError:
            raise TypeError(
                f"unsupported array dtype {x.dtype}; namedtensor supports "
                f"{', '.join(d.name for d in _dtypes.ALL)}."
            ) from None

    # conversion ----------------------------------------------------------------------
    def is_array(self, x) -> bool:
        raise NotImplementedError

    def asarray(self, data, dtype=None, copy=None):
        raise NotImplementedError

    def to_numpy(self, x):
        raise NotImplementedError

    def scalar_operand(self, value, like):
        """A Python scalar ready to combine with array ``like`` (NumPy 2 weak-scalar rules)."""
        return value

    def is_view_of(self, out, x) -> bool:
        return False

    #: whether the namespace's elementwise functions take ``out=`` (used to reuse temporaries' buffers)
    supports_out = False

    def owns_writable(self, x) -> bool:
        """``x`` owns its memory (is not a view of another array) and may be written."""
        return False

    def item(self, x):
        raise NotImplementedError

    def tolist(self, x):
        return self.to_numpy(x).tolist()

    # what the standard lacks ---------------------------------------------------------
    def erf(self, x):
        raise NotImplementedError

    def einsum(self, subscripts, *arrays):
        raise NotImplementedError

    def scatter_add(self, shape, dtype, key, values):
        """A zero array of ``shape`` with ``values`` added at ``key`` (repeated indices accumulate)."""
        raise NotImplementedError

    def getitem(self, x, key):
        return x[key]

    def setitem(self, x, key, value):
        x[key] = value

    def pad(self, x, widths, value):
        raise NotImplementedError

    def tril(self, x, k):
        raise NotImplementedError

    def triu(self, x, k):
        raise NotImplementedError

    def sort_indices(self, x, axis: int, descending: bool, stable: bool):
        """``argsort`` along ``axis``; descending order keeps ties in their original order when stable."""
        return self.argsort(x, axis=axis, descending=descending, stable=stable)

    def logaddexp(self, a, b):
        m = self.maximum(a, b)
        m = self.where(self.isfinite(m), m, self.zeros_like(m))  # -inf - -inf would be nan
        return m + self.log(self.exp(a - m) + self.exp(b - m))

    # random numbers ------------------------------------------------------------------
    def seed(self, n: int) -> None:
        raise NotImplementedError

    def rand(self, shape, dtype):
        raise NotImplementedError

    def randn(self, shape, dtype):
        raise NotImplementedError

    def randint(self, low, high, shape, dtype):
        raise NotImplementedError
