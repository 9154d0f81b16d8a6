"""The library's dtypes: backend-neutral objects that every backend maps to its own.

``nt.float32`` is the default for floating-point data.  Python scalars never
change a tensor's dtype (NumPy 2's "weak scalar" rules).
"""

from __future__ import annotations


class DType:
    """A tensor element type (``nt.float32``, ``nt.int64``, ...)."""

    __slots__ = ("name", "kind", "itemsize")

    def __init__(self, name: str, kind: str, itemsize: int) -> None:
        self.name = name
        self.kind = kind  # "f" float, "i" signed int, "b" bool
        self.itemsize = itemsize

    @property
    def is_floating_point(self) -> bool:
        return self.kind == "f"

    def __repr__(self) -> str:
        return f"nt.{self.name}"

    def __reduce__(self):
        return (by_name, (self.name,))


float16 = DType("float16", "f", 2)
float32 = DType("float32", "f", 4)
float64 = DType("float64", "f", 8)
int32 = DType("int32", "i", 4)
int64 = DType("int64", "i", 8)
bool_ = DType("bool", "b", 1)

ALL = (float16, float32, float64, int32, int64, bool_)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"half": float16, "float": float32, "double": float64, "int": int32, "long": int64, "bool_": bool_})

default_float = float32
default_int = int64


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
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
    if isinstance(name, str):
        return by_name(name)
    raise TypeError(f"not a dtype: {dtype!r}")
