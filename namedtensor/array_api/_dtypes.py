"""Data types, data type functions and ``__array_namespace_info__`` of the Array API standard.

namedtensor has every dtype of the standard: ``bool``, ``int8 int16 int32 int64``, ``uint8 uint16
uint32 uint64``, ``float16 float32 float64`` and ``complex64 complex128``.  Promotion follows the
standard's tables where it has them and NumPy 2's elsewhere (the standard leaves mixed kinds
unspecified): an integer meeting a float gives the smallest float that holds it exactly, at least the
float's width, and ``uint64`` meeting a signed integer gives ``float64``.
"""

from __future__ import annotations

import builtins
from typing import Any, Dict, List, Optional, Tuple, Union

from .. import _dtypes, cuda
from .._dtypes import (DType, bool_, complex64, complex128, float16, float32, float64, int8, int16, int32, int64,
                       uint8, uint16, uint32, uint64)
from ..ops.naming import astype as _astype
from ..tensor import Tensor

bool = bool_  # the standard spells it ``bool``; the module never needs the builtin

_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
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
        out = _dtypes.promote(out, d)
    for s in ds:
        if s is float and out.kind not in "fc":
            out = _dtypes.default_float
        elif s is complex and out.kind != "c":
            out = _dtypes.complex_of(out)
    return out


def can_cast(from_: Union[DType, Tensor], to: DType, /) -> builtins.bool:
    """Whether the standard's type promotion casts ``from_`` to ``to``: within a kind when widening, and
    across the kinds its tables join (an unsigned integer to a wider signed one, a float to the complex
    whose parts are at least as wide); never between integers and floats, or from bool."""
    f = from_.dtype if isinstance(from_, Tensor) else from_
    if not isinstance(f, DType) or not isinstance(to, DType):
        raise TypeError(f"can_cast: expected namedtensor dtypes or a tensor, got {from_!r} and {to!r}.")
    if f.kind == to.kind:
        return f.itemsize <= to.itemsize
    if (f.kind, to.kind) == ("u", "i"):
        return f.itemsize < to.itemsize
    if (f.kind, to.kind) == ("f", "c"):
        return f.itemsize <= to.itemsize // 2
    return False



#: IEEE 754 half, single and double precision: machine epsilon, largest finite, smallest normal
_FLOAT_LIMITS = {
    "float16": (2.0**-10, 65504.0, 2.0**-14),
    "float32": (2.0**-23, (2 - 2.0**-23) * 2.0**127, 2.0**-126),
    "float64": (2.0**-52, (2 - 2.0**-52) * 2.0**1023, 2.0**-1022),
}


class finfo_object:
    """The standard's ``finfo`` result: ``bits eps max min smallest_normal dtype``; a complex dtype's are its
    parts' (``bits`` those of one part, ``dtype`` the part's float dtype), as in NumPy."""

    def __init__(self, dtype: DType) -> None:
        dtype = _dtypes.real_of(dtype)
        self.bits, self.dtype = 8 * dtype.itemsize, dtype
        self.eps, self.max, self.smallest_normal = _FLOAT_LIMITS[dtype.name]
        self.min = -self.max


class iinfo_object:
    """The standard's ``iinfo`` result: ``bits max min dtype``."""

    def __init__(self, dtype: DType) -> None:
        self.bits, self.dtype = 8 * dtype.itemsize, dtype
        if dtype.kind == "u":
            self.min, self.max = 0, 2**self.bits - 1
        else:
            self.min, self.max = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1


def _info_dtype(type: Union[DType, Tensor], kinds: str, op: str) -> DType:
    d = type.dtype if isinstance(type, Tensor) else type
    if not isinstance(d, DType) or d.kind not in kinds:
        raise TypeError(f"{op}: expected a {'floating-point or complex' if kinds == 'fc' else 'integer'} dtype or "
                        f"tensor, got {type!r}.")
    return d


def finfo(type: Union[DType, Tensor], /) -> finfo_object:
    """Machine limits of a floating-point dtype (of a complex dtype's parts)."""
    return finfo_object(_info_dtype(type, "fc", "finfo"))


def iinfo(type: Union[DType, Tensor], /) -> iinfo_object:
    """Machine limits of an integer dtype, signed or unsigned."""
    return iinfo_object(_info_dtype(type, "iu", "iinfo"))


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
        """The defaults on every device."""
        return {"real floating": _dtypes.default_float, "complex floating": _dtypes.default_complex,
                "integral": _dtypes.default_int, "indexing": int64}

    def dtypes(self, *, device: Optional[str] = None,
               kind: Union[str, Tuple[str, ...], None] = None) -> Dict[str, DType]:
        """The standard's dtypes, by name, those of ``kind`` only where given (``float16``, which
        namedtensor also has, is not one of them)."""
        return {d.name: d for d in _dtypes.ALL if d is not float16 and (kind is None or isdtype(d, kind))}


def __array_namespace_info__() -> Info:
    """The namespace's inspection object (``devices``, ``default_dtypes``, ``dtypes``, ``capabilities``)."""
    return Info()


__all__ = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
           "float64", "complex64", "complex128", "result_type", "can_cast", "finfo", "iinfo",
           "isdtype", "astype", "__array_namespace_info__"]
