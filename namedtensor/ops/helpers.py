"""PyTorch's comparisons ``isclose``/``allclose`` and its small top-level helpers: ``is_tensor
is_floating_point numel clone from_numpy frombuffer get_default_dtype set_default_dtype``, and the method
``t.where(condition, y)``.

Name rules: ``isclose`` unifies its operands' names (rule 2, :func:`namedtensor._names.unify`), as every
comparison; ``allclose`` is a Python bool, False where the names would not broadcast under rule 2
(:func:`namedtensor._names.unifiable`), as ``equal``'s; ``t.where(condition, y)`` is
``where(condition, t, y)``, whose three operands' names unify; ``clone`` and ``from_numpy`` keep (or give)
the names.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional, Sequence

from .. import _dtypes, _names, backends
from ..autograd.graph import Op, _common_backend, apply
from ..tensor import Tensor
from ._common import as_float_array, flag, is_bool, operand, tensor_arg
from .creation import as_tensor
from .dtype import clone
from .elementwise import where

__all__ = ["isclose", "allclose", "is_tensor", "is_floating_point", "numel", "clone", "from_numpy", "frombuffer",
           "get_default_dtype", "set_default_dtype"]


# ----------------------------------------------------------------------------- isclose, allclose


class _IsClose(Op):
    """PyTorch's closeness: equal (NaN to NaN with ``equal_nan``), or a finite difference within
    ``atol + rtol * |other|``."""

    name = "isclose"
    differentiable = False

    @staticmethod
    def forward(B, a, b, rtol, atol, equal_nan):
        if not B.is_array(b):
            b = B.asarray(b)
        close = B.equal(a, b)
        floats = B.dtype_of(a).kind == "f" or B.dtype_of(b).kind == "f"
        if equal_nan and floats:
            close = B.logical_or(close, B.logical_and(B.isnan(a), B.isnan(b)))
        if rtol == 0 and atol == 0:
            return close
        fa, fb = as_float_array(B, a), as_float_array(B, b)
        error = B.abs(fa - fb)
        return B.logical_or(close, B.logical_and(B.isfinite(error), error <= atol + B.abs(rtol * fb)))


class _AllClose(_IsClose):
    name = "allclose"


def _tolerances(rtol, atol, equal_nan, op: str):
    for what, v in (("rtol", rtol), ("atol", atol)):
        if is_bool(v) or not isinstance(v, numbers.Real):
            raise TypeError(f"{op}: {what} must be a number, got {type(v).__name__} {v!r}.")
        if v < 0:
            raise ValueError(f"{op}: {what} must be >= 0, got {v!r}.")
    return float(rtol), float(atol), flag(equal_nan, "equal_nan", op)


def isclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (or equal; NaN equals NaN with
    ``equal_nan``), as ``torch.isclose``: a bool tensor whose names unify the operands' (rule 2)."""
    tensor_arg(input, "isclose", "input")
    rtol, atol, equal_nan = _tolerances(rtol, atol, equal_nan, "isclose")
    other = operand(other, input, "isclose")
    names = _names.unify(input._names, other._names, "isclose") if isinstance(other, Tensor) else input._names
    return apply(_IsClose, (input, other), names, rtol=rtol, atol=atol, equal_nan=equal_nan)


def allclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every entry is :func:`isclose`, as ``torch.allclose`` (a Python bool); shapes that do not
    broadcast raise, as in PyTorch, and names that would not broadcast under rule 2 give False, as
    ``nt.equal`` does."""
    tensor_arg(input, "allclose", "input")
    rtol, atol, equal_nan = _tolerances(rtol, atol, equal_nan, "allclose")
    other = operand(other, input, "allclose")
    if isinstance(other, Tensor):
        if other._B is not input._B:
            _common_backend("allclose", input, other)
        if not _names.unifiable(input._names, other._names):
            return False
    close = apply(_AllClose, (input, other), _names.unnamed(0), rtol=rtol, atol=atol, equal_nan=equal_nan)
    return bool(close._B.all(close._data))


# ----------------------------------------------------------------------------- small helpers


def is_tensor(obj: object) -> bool:
    """Whether ``obj`` is an ``nt.Tensor``, as ``torch.is_tensor``."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> bool:
    """Whether ``input``'s dtype is a float, as ``torch.is_floating_point``."""
    return tensor_arg(input, "is_floating_point", "input").is_floating_point()


def numel(input: Tensor) -> int:
    """The number of elements, as ``torch.numel``."""
    return tensor_arg(input, "numel", "input").numel()


def from_numpy(ndarray: Any, *, names: Optional[Sequence] = None) -> Tensor:
    """A CPU tensor of the NumPy array ``ndarray``, its dtype kept, as ``torch.from_numpy``: on the NumPy
    backend it shares the array's memory (writes to one show in the other); a CPU backend on another
    namespace (array-api-strict) copies it.  ``names=`` names it."""
    if not isinstance(ndarray, type(backends.host().asarray(()))):  # NumPy's ndarray, without importing NumPy
        raise TypeError(f"from_numpy: expected a NumPy array, got {type(ndarray).__name__}.")
    return as_tensor(ndarray, names=names, device="cpu")


def frombuffer(buffer: Any, *, dtype: Any, count: int = -1, offset: int = 0, requires_grad: bool = False,
               names: Optional[Sequence] = None) -> Tensor:
    """A 1-D CPU tensor over the bytes of ``buffer`` (``bytes``, ``bytearray``, ``memoryview``, ``array``...),
    as ``torch.frombuffer``: ``count`` elements of ``dtype`` (all by default) from byte ``offset``.  On the
    NumPy backend it shares the buffer's memory (read-only for an immutable buffer such as ``bytes``);
    another CPU backend copies it.  ``names=`` names its dim."""
    for what, v in (("count", count), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"frombuffer: {what} must be an int, got {type(v).__name__} {v!r}.")
    if dtype is None:
        raise TypeError("frombuffer: dtype is required (the buffer holds bytes, not typed values).")
    dtype = _dtypes.as_dtype(dtype)
    try:
        data = backends.host().frombuffer(buffer, dtype, count, offset)
    except (TypeError, ValueError) as e:
        raise type(e)(f"frombuffer: {e}") from None
    return as_tensor(data, names=names, device="cpu").requires_grad_(requires_grad)


def get_default_dtype() -> _dtypes.DType:
    """The dtype of new float data (Python floats, ``nt.zeros``...), as ``torch.get_default_dtype``:
    ``nt.float32`` unless :func:`set_default_dtype` changed it."""
    return _dtypes.default_float


def set_default_dtype(d: Any) -> None:
    """Make ``d`` (``nt.float32`` or ``nt.float64``, as PyTorch allows) the dtype of new float data, as
    ``torch.set_default_dtype``, for every thread; new complex data follow (``complex128`` with ``float64``).
    Integers that meet a float op still become float64 (NumPy's rule)."""
    dtype = _dtypes.as_dtype(d)
    if dtype not in (_dtypes.float32, _dtypes.float64):
        raise TypeError(f"set_default_dtype: only nt.float32 and nt.float64 can be the default, got {dtype!r}, "
                        "as in PyTorch.")
    _dtypes.default_float = dtype
    _dtypes.default_complex = _dtypes.complex_of(dtype)


def _where_method(self: Tensor, condition: Any, y: Any) -> Tensor:
    """``t.where(condition, y)``: ``t`` where ``condition`` holds, else ``y``, as PyTorch's method
    (``nt.where(condition, t, y)``); the three operands' names unify (rule 2)."""
    return where(condition, self, y)


METHODS = {"isclose": isclose, "allclose": allclose, "where": _where_method}
