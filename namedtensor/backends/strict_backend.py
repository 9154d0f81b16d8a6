"""A backend on ``array-api-strict``: the stand-in for "an array library that is not NumPy".

The test suite runs the op and autograd tests a second time on it, so any
NumPy-only call in the ops shows up as a failure.  What the standard lacks
(``erf``, ``einsum``, scatter-add, advanced indexing, ``pad``, random numbers)
is supplied simply, through NumPy, because this backend exists for testing.
"""

from __future__ import annotations

import numpy as np

from .base import Backend
from .numpy_backend import NumpyBackend
from .. import _dtypes


class StrictBackend(Backend):
    name = "array_api_strict"
    device = "cpu"

    def __init__(self) -> None:
        import array_api_strict

        self.xp = array_api_strict
        super().__init__()
        self._np = NumpyBackend()
        self.add = self._scalar_safe(array_api_strict.add)
        self.subtract = self._scalar_safe(array_api_strict.subtract)
        self.multiply = self._scalar_safe(array_api_strict.multiply)
        self.divide = self._scalar_safe(self._true_divide)
        self.pow = self._scalar_safe(array_api_strict.pow)
        self.fmod = self._scalar_safe(super().fmod)  # the base's abs and sign refuse a bool operand
        for fn in ("maximum", "minimum", "remainder", "floor_divide", "equal", "not_equal", "less",
                   "less_equal", "greater", "greater_equal"):
            setattr(self, fn, self._scalar_safe(getattr(array_api_strict, fn)))
        for fn in ("logical_and", "logical_or", "logical_xor"):
            setattr(self, fn, self._truthy(getattr(array_api_strict, fn)))
        self.logical_not = lambda x: array_api_strict.logical_not(self._as_bool(x))
        for fn in ("exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "acos", "asin", "atan",
                   "cosh", "sinh", "asinh", "acosh", "atanh", "log2", "log10"):
            setattr(self, fn, self._float_input(getattr(array_api_strict, fn)))
        for fn in ("atan2", "hypot", "copysign", "logaddexp"):
            setattr(self, fn, self._scalar_safe(self._float_inputs(getattr(array_api_strict, fn))))
        self.where = self._where
        # NumPy reduces and sorts bool arrays (False < True): sums and products count True as 1
        # (int64), max/min/sort stay bool; array-api-strict refuses bool in all of them
        for fn in ("sum", "prod", "cumulative_sum", "cumulative_prod", "argmax", "argmin", "argsort"):
            setattr(self, fn, self._bool_as_int(getattr(array_api_strict, fn), False))
        for fn in ("max", "min", "sort"):
            setattr(self, fn, self._bool_as_int(getattr(array_api_strict, fn), True))

    def _float_input(self, fn):
        # NumPy's rule for functions defined on floats only: integer and bool input gives float64
        def call(x):
            if not self.xp.isdtype(x.dtype, _INEXACT):
                x = self.xp.astype(x, self.xp.float64)
            return fn(x)

        return call

    def _float_inputs(self, fn):
        # the binary functions defined on floats only: NumPy computes integer and bool operands in float64
        def call(a, b):
            return fn(*(self.xp.astype(x, self.xp.float64)
                        if self.is_array(x) and not self.xp.isdtype(x.dtype, "real floating") else x
                        for x in (a, b)))

        return call

    def _bool_as_int(self, fn, back_to_bool: bool):
        xp = self.xp

        def call(x, *args, **kwargs):
            if x.dtype != xp.bool:
                return fn(x, *args, **kwargs)
            out = fn(xp.astype(x, xp.int64), *args, **kwargs)
            return xp.astype(out, xp.bool) if back_to_bool else out

        return call

    def _where(self, cond, a, b):
        # NumPy promotes the two branches (where(mask, float_array, int_array) is float64)
        return self.xp.where(cond, self._arr(a, b), self._arr(b, a))

    def _truthy(self, fn):
        # NumPy's logical ops take any dtype and test for nonzero
        def call(a, b):
            return fn(self._as_bool(a), self._as_bool(b))

        return call

    def _as_bool(self, x):
        if self.is_array(x):
            return x if x.dtype == self.xp.bool else self.xp.astype(x, self.xp.bool)
        return bool(x)

    def _scalar_safe(self, fn):
        def call(a, b):
            return fn(self._arr(a, b), self._arr(b, a))

        return call

    def _arr(self, x, other):
        # NumPy 2's promotion (the reference backend) where array-api-strict refuses mixed kinds:
        # an int/bool array with a float, a bool array with an int, a bool scalar with a number,
        # and arrays of different kinds
        xp = self.xp
        if isinstance(x, xp._array_object.Array):
            if other.__class__ is float and not xp.isdtype(x.dtype, _INEXACT):
                return xp.astype(x, xp.float64)
            if other.__class__ is complex and not xp.isdtype(x.dtype, _INEXACT):
                return xp.astype(x, xp.complex128)
            if other.__class__ is int and x.dtype == xp.bool:
                return xp.astype(x, xp.int64)
            if isinstance(other, xp._array_object.Array) and x.dtype != other.dtype:
                common = np.result_type(self._np.native(self.dtype_of(x)), self._np.native(self.dtype_of(other)))
                return xp.astype(x, self.native(_dtypes.by_name(common.name)))
            return x
        if x.__class__ is bool and isinstance(other, xp._array_object.Array) and other.dtype != xp.bool:
            return int(x)
        return x

    def _true_divide(self, a, b):
        # NumPy's rule (the reference backend): dividing integers gives float64
        xp = self.xp
        if not any(self.is_array(x) and xp.isdtype(x.dtype, _INEXACT) for x in (a, b)):
            a = xp.astype(a, xp.float64) if self.is_array(a) else a
            b = xp.astype(b, xp.float64) if self.is_array(b) else b
        return xp.divide(a, b)

    def is_array(self, x) -> bool:
        return isinstance(x, self.xp._array_object.Array)

    def asarray(self, data, dtype=None, copy=None):
        if self.is_array(data):
            out = data
        else:
            if hasattr(data, "__array__") or isinstance(data, (list, tuple)):
                data = np.asarray(data)
            out = self.xp.asarray(data)
        if dtype is not None:
            out = self.xp.astype(out, self._to_native[dtype])
        if copy:
            out = self.xp.asarray(out, copy=True)
        return out

    def to_numpy(self, x):
        return np.from_dlpack(x) if self.is_array(x) else np.asarray(x)

    def _from(self, a):
        a = np.asarray(a)  # np.ascontiguousarray would turn a 0-dim result into shape (1,)
        return self.xp.asarray(a if a.ndim == 0 else np.ascontiguousarray(a))

    def item(self, x):
        return self.to_numpy(x).item()

    def erf(self, x):
        return self._from(self._np.erf(self.to_numpy(x)))

    def einsum(self, subscripts, *arrays):
        return self._from(self._np.einsum(subscripts, *[self.to_numpy(a) for a in arrays]))

    def scatter_add(self, shape, dtype, key, values):
        return self._from(self._np.scatter_add(shape, dtype, self._np_key(key), self.to_numpy(values)))

    def _np_key(self, key):
        if isinstance(key, tuple):
            return tuple(self.to_numpy(k) if self.is_array(k) else k for k in key)
        return self.to_numpy(key) if self.is_array(key) else key

    def getitem(self, x, key):
        k = key if isinstance(key, tuple) else (key,)
        if all(i is None or i is Ellipsis or i.__class__ in (int, slice) for i in k):
            # basic keys index natively (views, as in NumPy, so writes through them reach x); array-api-strict
            # wants a '...' unless every dim is indexed, and refuses out-of-range slice bounds: clip them as
            # NumPy does.  Keys that are still refused (out-of-range ints) go below, for NumPy's error.
            try:
                return x[_clipped(k if Ellipsis in k else k + (Ellipsis,), x.shape)]
            except IndexError:
                pass
        return self._from(self.to_numpy(x)[self._np_key(key)])

    def setitem(self, x, key, value):
        # array-api-strict only writes through basic indices; this test backend
        # writes the rest through NumPy into the same buffer.
        value = self.to_numpy(value) if self.is_array(value) else value
        self.to_numpy(x)[self._np_key(key)] = value

    def pad(self, x, widths, value):
        return self._from(self._np.pad(self.to_numpy(x), widths, value))

    def tril(self, x, k):
        return self._from(np.tril(self.to_numpy(x), k))

    def triu(self, x, k):
        return self._from(np.triu(self.to_numpy(x), k))

    def seed(self, n: int) -> None:
        self._np.seed(n)

    def random_state(self):
        return self._np.random_state()

    def set_random_state(self, state) -> None:
        self._np.set_random_state(state)

    def rand(self, shape, dtype):
        return self._from(self._np.rand(shape, dtype))

    def randn(self, shape, dtype):
        return self._from(self._np.randn(shape, dtype))

    def randint(self, low, high, shape, dtype):
        return self._from(self._np.randint(low, high, shape, dtype))

    def randperm(self, n: int, dtype):
        return self._from(self._np.randperm(n, dtype))


#: the dtypes NumPy computes floating-point functions in without converting them first
_INEXACT = ("real floating", "complex floating")


def _clipped(key: tuple, shape: tuple) -> tuple:
    """A basic key (with one '...') whose slices have in-range bounds, selecting what NumPy would."""
    out, dim = [], 0
    for i in key:
        if i is Ellipsis:
            dim += len(shape) - sum(1 for j in key if j is not None and j is not Ellipsis)
        elif i is not None:
            if i.__class__ is slice:
                start, stop, step = i.indices(shape[dim])
                i = slice(start, None if stop < 0 else stop, step)  # stop -1 means before index 0, not the last
            dim += 1
        out.append(i)
    return tuple(out)
