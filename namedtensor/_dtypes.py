"""The library's dtypes: backend-neutral objects that every backend maps to its own.

Every dtype of the Array API standard: ``bool``, signed ``int8 int16 int32 int64``, unsigned
``uint8 uint16 uint32 uint64``, ``float16 float32 float64`` and ``complex64 complex128``, with
PyTorch's spellings (``half float double short int long cfloat cdouble``).  ``nt.float32`` is the
default for floating-point data, ``nt.complex64`` for complex data.  Python scalars never change a
tensor's dtype (NumPy 2's "weak scalar" rules).
"""

from __future__ import annotations


class DType:
    """A tensor element type (``nt.float32``, ``nt.int64``, ...)."""

    __slots__ = ("name", "kind", "itemsize")

    def __init__(self, name: str, kind: str, itemsize: int) -> None:
        self.name = name
        self.kind = kind  # "f" float, "c" complex, "i" signed int, "u" unsigned int, "b" bool
        self.itemsize = itemsize

    @property
    def is_floating_point(self) -> bool:
        return self.kind == "f"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_signed(self) -> bool:
        """PyTorch's ``dtype.is_signed``: floats, complex and signed integers."""
        return self.kind in "fci"

    def __repr__(self) -> str:
        return f"nt.{self.name}"

    def __reduce__(self):
        return (by_name, (self.name,))


float16 = DType("float16", "f", 2)
float32 = DType("float32", "f", 4)
float64 = DType("float64", "f", 8)
int8 = DType("int8", "i", 1)
int16 = DType("int16", "i", 2)
int32 = DType("int32", "i", 4)
int64 = DType("int64", "i", 8)
uint8 = DType("uint8", "u", 1)
uint16 = DType("uint16", "u", 2)
uint32 = DType("uint32", "u", 4)
uint64 = DType("uint64", "u", 8)
complex64 = DType("complex64", "c", 8)
complex128 = DType("complex128", "c", 16)
bool_ = DType("bool", "b", 1)

ALL = (float16, float32, float64, complex64, complex128, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
       bool_)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"half": float16, "float": float32, "double": float64, "short": int16, "int": int32, "long": int64,
                 "cfloat": complex64, "cdouble": complex128, "bool_": bool_})

default_float = float32
default_int = int64
default_complex = complex64

#: the kinds that carry gradients (PyTorch's: floating point and complex)
DIFFERENTIABLE = "fc"


_SIGNED = {1: int8, 2: int16, 4: int32, 8: int64}
_FLOATS = {2: float16, 4: float32, 8: float64}
_COMPLEX = {4: complex64, 8: complex64, 16: complex128}  # by the itemsize of the whole number


def promote(a: DType, b: DType) -> DType:
    """NumPy 2's promotion of two dtypes: the wider within a kind; bool yields to a number; an unsigned
    integer meeting a signed one gives the signed dtype that holds both (float64 past int64); an integer
    meeting a float or complex gives the smallest one that holds it exactly (float16 for 8 bits, float32
    for 16, float64 beyond), at least as wide as the other; a float meeting a complex gives the complex
    whose parts hold both."""
    if a.kind == b.kind:
        return a if a.itemsize >= b.itemsize else b
    if "b" in (a.kind, b.kind):
        return b if a.kind == "b" else a
    if {a.kind, b.kind} == {"i", "u"}:
        s, u = (a, b) if a.kind == "i" else (b, a)
        if s.itemsize > u.itemsize:
            return s
        return float64 if u.itemsize == 8 else _SIGNED[2 * u.itemsize]
    # one is inexact (float or complex): the other, if an integer, as the smallest float holding it
    x, y = (a, b) if a.kind in "fc" else (b, a)
    part = (y.itemsize // 2 if y.kind == "c" else y.itemsize) if y.kind in "fc" else min(8, 2 * y.itemsize)
    part = max(part, x.itemsize // 2 if x.kind == "c" else x.itemsize)
    return _COMPLEX[2 * part] if "c" in (a.kind, b.kind) else _FLOATS[part]


def complex_of(dtype: DType) -> DType:
    """The complex dtype whose parts are ``dtype`` (float16 and non-floats: the default, complex64)."""
    if dtype.kind == "c":
        return dtype
    return complex128 if dtype is float64 else complex64


def real_of(dtype: DType) -> DType:
    """The dtype of a complex dtype's parts (a real dtype: itself)."""
    if dtype is complex64:
        return float32
    if dtype is complex128:
        return float64
    return dtype


def by_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise TypeError(
            f"unsupported dtype {name!r}; namedtensor supports {', '.join(d.name for d in ALL)}."
        ) from None


def as_dtype(dtype) -> DType:
    """Accept an ``nt`` dtype, its name, or anything with a ``.name`` (a NumPy dtype, ``float``...)."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        return by_name(dtype)
    if dtype is float:
        return default_float
    if dtype is int:
        return default_int
    if dtype is bool:
        return bool_
    if dtype is complex:
        return default_complex
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
    if isinstance(name, str):
        return by_name(name)
    raise TypeError(f"not a dtype: {dtype!r}")
