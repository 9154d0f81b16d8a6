"""Data types, data type functions and ``__array_namespace_info__`` of the Array API standard.

namedtensor has ``bool float16 float32 float64 int32 int64``; the standard's ``int8 int16 uint*
complex*`` are missing (``isdtype`` still answers for their kinds).  Promotion follows the
standard's tables within a kind and NumPy's across kinds (which the standard leaves unspecified).
"""

from __future__ import annotations

import builtins
from typing import Any, Dict, List, Optional, Tuple, Union

from .. import _dtypes, cuda
from .._dtypes import DType, bool_, float16, float32, float64, int32, int64
from ..ops.naming import astype as _astype
from ..tensor import Tensor

bool = bool_  # the standard spells it ``bool``; the module never needs the builtin

_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: False,  # namedtensor has no unsigned dtype
    "integral": lambda d: d.kind == "i",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: False,  # nor a complex one
    "numeric": lambda d: d.kind in "if",
}


def _dtype_of(a: Any, op: str) -> Union[DType, type]:
    """A dtype, the dtype of a tensor, or a Python scalar's type (a "weak" operand)."""
    if isinstance(a, Tensor):
        return a.dtype
    if isinstance(a, DType):
        return a
    if type(a) in (int, float, complex) or type(a).__name__ == "bool":
        return type(a)
    raise TypeError(f"{op}: expected dtypes, tensors or Python scalars, got {type(a).__name__}.")


def _promote(a: DType, b: DType) -> DType:
    """NumPy's promotion of two of our dtypes: the wider within a kind, bool yields to a number, and an
    integer meeting a float gives float64 (none of our floats holds every int32 and int64 exactly)."""
    if a.kind == b.kind:
        return a if a.itemsize >= b.itemsize else b
    if "b" in (a.kind, b.kind):
        return b if a.kind == "b" else a
    return float64


def result_type(*arrays_and_dtypes: Any) -> DType:
    """The dtype the standard's promotion gives ``arrays_and_dtypes``; Python scalars are weak."""
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required.")
    ds = [_dtype_of(a, "result_type") for a in arrays_and_dtypes]
    strong = [d for d in ds if isinstance(d, DType)]
    if not strong:
        raise ValueError("result_type: at least one array or dtype is required; Python scalars alone have none.")
    out = strong[0]
    for d in strong[1:]:
        out = _promote(out, d)
    for s in ds:
        if s is float and out.kind != "f":
            out = _dtypes.default_float
        elif s is complex:
            raise TypeError("result_type: namedtensor has no complex dtype.")
    return out


def can_cast(from_: Union[DType, Tensor], to: DType, /) -> builtins.bool:
    """Whether the standard's promotion casts ``from_`` to ``to`` (only within a kind, widening)."""
    f = from_.dtype if isinstance(from_, Tensor) else from_
    if not isinstance(f, DType) or not isinstance(to, DType):
        raise TypeError(f"can_cast: expected namedtensor dtypes or a tensor, got {from_!r} and {to!r}.")
    if f.kind != to.kind:
        return False
    return f.itemsize <= to.itemsize



#: IEEE 754 half, single and double precision: machine epsilon, largest finite, smallest normal
_FLOAT_LIMITS = {
    "float16": (2.0**-10, 65504.0, 2.0**-14),
    "float32": (2.0**-23, (2 - 2.0**-23) * 2.0**127, 2.0**-126),
    "float64": (2.0**-52, (2 - 2.0**-52) * 2.0**1023, 2.0**-1022),
}


class finfo_object:
    """The standard's ``finfo`` result: ``bits eps max min smallest_normal dtype``."""

    def __init__(self, dtype: DType) -> None:
        self.bits, self.dtype = 8 * dtype.itemsize, dtype
        self.eps, self.max, self.smallest_normal = _FLOAT_LIMITS[dtype.name]
        self.min = -self.max


class iinfo_object:
    """The standard's ``iinfo`` result: ``bits max min dtype``."""

    def __init__(self, dtype: DType) -> None:
        self.bits, self.dtype = 8 * dtype.itemsize, dtype
        self.min, self.max = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1


def _info_dtype(type: Union[DType, Tensor], kind: str, op: str) -> DType:
    d = type.dtype if isinstance(type, Tensor) else type
    if not isinstance(d, DType) or d.kind != kind:
        raise TypeError(f"{op}: expected a {'floating-point' if kind == 'f' else 'integer'} dtype or tensor, "
                        f"got {type!r}.")
    return d


def finfo(type: Union[DType, Tensor], /) -> finfo_object:
    """Machine limits of a floating-point dtype."""
    return finfo_object(_info_dtype(type, "f", "finfo"))


def iinfo(type: Union[DType, Tensor], /) -> iinfo_object:
    """Machine limits of an integer dtype."""
    return iinfo_object(_info_dtype(type, "i", "iinfo"))


def isdtype(dtype: DType, kind: Union[DType, str, Tuple[Union[DType, str], ...]]) -> builtins.bool:
    """Whether ``dtype`` is ``kind``: a dtype, one of the standard's kind names, or a tuple of them."""
    if not isinstance(dtype, DType):
        raise TypeError(f"isdtype: expected a namedtensor dtype, got {dtype!r}.")
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, DType):
        return dtype is kind
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind](dtype)
    raise ValueError(f"isdtype: unknown kind {kind!r}; expected a dtype or one of {', '.join(_KINDS)}.")


def astype(x: Tensor, dtype: DType, /, *, copy: builtins.bool = True, device: Optional[str] = None) -> Tensor:
    """``x`` as ``dtype`` (and on ``device``), keeping its names; ``copy=False`` reuses ``x`` where it can."""
    out = _astype(x, dtype, copy=copy)
    return out if device is None or device == out.device else out.to(device=device)


class Info:
    """What ``__array_namespace_info__()`` returns: the namespace's devices, dtypes and capabilities."""

    def capabilities(self) -> Dict[str, Any]:
        """Boolean indexing and data-dependent shapes work; a tensor has at most 64 dims, NumPy's limit."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> str:
        """``"cpu"``: creation functions allocate there unless given ``device=``."""
        return "cpu"

    def devices(self) -> List[str]:
        """``cpu``, ``cuda:N`` for each visible GPU, and ``meta`` (shapes and names, no data)."""
        return ["cpu"] + [f"cuda:{i}" for i in range(cuda.device_count() if cuda.is_available() else 0)] + ["meta"]

    def default_dtypes(self, *, device: Optional[str] = None) -> Dict[str, DType]:
        """The defaults on every device (there is no complex dtype, so no "complex floating" key)."""
        return {"real floating": _dtypes.default_float, "integral": _dtypes.default_int, "indexing": int64}

    def dtypes(self, *, device: Optional[str] = None,
               kind: Union[str, Tuple[str, ...], None] = None) -> Dict[str, DType]:
        """The dtypes namedtensor has, by name, those of ``kind`` only where given."""
        return {d.name: d for d in _dtypes.ALL if kind is None or isdtype(d, kind)}


def __array_namespace_info__() -> Info:
    """The namespace's inspection object (``devices``, ``default_dtypes``, ``dtypes``, ``capabilities``)."""
    return Info()


__all__ = ["bool", "float16", "float32", "float64", "int32", "int64", "result_type", "can_cast", "finfo", "iinfo",
           "isdtype", "astype", "__array_namespace_info__"]
