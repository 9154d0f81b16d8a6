"""The standard's creation functions, on :mod:`namedtensor.ops.creation`.

The standard takes shapes as tuples and has no ``names=``: results are unnamed, except ``*_like``
(the argument's names), ``tril``/``triu`` (the input's) and ``meshgrid`` (each input's name where
its dim lands).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

from .. import interop
from .._dtypes import DType
from ..ops import creation as C
from ..ops import movement as M
from ..ops.naming import astype as _astype
from ..ops.shape import broadcast_to, reshape
from ..tensor import Tensor

Shape = Union[int, Sequence[int]]


def _shape(shape: Shape) -> Tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def arange(start: Union[int, float], /, stop: Union[int, float, None] = None, step: Union[int, float] = 1, *,
           dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """Evenly spaced values in ``[start, stop)``; the standard's ``stop=None`` counts from 0 to ``start``."""
    return C.arange(start, stop, step, dtype=dtype, device=device)


def asarray(obj: Any, /, *, dtype: Optional[DType] = None, device: Optional[str] = None,
            copy: Optional[bool] = None) -> Tensor:
    """A tensor of ``obj``; a tensor keeps its names.  ``copy=False`` refuses data that needs a copy."""
    if isinstance(obj, Tensor):
        same = (dtype is None or dtype is obj.dtype) and (device is None or device == obj.device)
        if copy is False and not same:
            raise ValueError("asarray: copy=False, but converting the tensor's dtype or device needs a copy.")
        out = obj if same else _astype(obj, obj.dtype if dtype is None else dtype).to(device=device or obj.device)
        return out.clone() if copy and out is obj else out
    if copy is False and not hasattr(obj, "__array_interface__") and not hasattr(obj, "__dlpack__"):
        raise ValueError(f"asarray: copy=False, but a {type(obj).__name__} has no buffer to share.")
    return (C.tensor if copy else C.as_tensor)(obj, dtype=dtype, device=device)


def empty(shape: Shape, *, dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """An uninitialised unnamed tensor."""
    return C.empty(_shape(shape), dtype=dtype, device=device)


def zeros(shape: Shape, *, dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """An unnamed tensor of zeros."""
    return C.zeros(_shape(shape), dtype=dtype, device=device)


def ones(shape: Shape, *, dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """An unnamed tensor of ones."""
    return C.ones(_shape(shape), dtype=dtype, device=device)


def full(shape: Shape, fill_value: Union[bool, int, float], *, dtype: Optional[DType] = None,
         device: Optional[str] = None) -> Tensor:
    """An unnamed tensor of ``fill_value``."""
    return C.full(_shape(shape), fill_value, dtype=dtype, device=device)


def empty_like(x: Tensor, /, *, dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """Uninitialised, with ``x``'s shape and names."""
    return C.empty_like(x, dtype=dtype, device=device)


def zeros_like(x: Tensor, /, *, dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """Zeros with ``x``'s shape and names."""
    return C.zeros_like(x, dtype=dtype, device=device)


def ones_like(x: Tensor, /, *, dtype: Optional[DType] = None, device: Optional[str] = None) -> Tensor:
    """Ones with ``x``'s shape and names."""
    return C.ones_like(x, dtype=dtype, device=device)


def full_like(x: Tensor, /, fill_value: Union[bool, int, float], *, dtype: Optional[DType] = None,
              device: Optional[str] = None) -> Tensor:
    """``fill_value`` with ``x``'s shape and names."""
    return C.full_like(x, fill_value, dtype=dtype, device=device)


def eye(n_rows: int, n_cols: Optional[int] = None, /, *, k: int = 0, dtype: Optional[DType] = None,
        device: Optional[str] = None) -> Tensor:
    """Ones on the ``k``-th diagonal; ``k != 0`` is the band ``tril(k)`` and ``triu(k)`` of ones share."""
    if k == 0:
        return C.eye(n_rows, n_cols, dtype=dtype, device=device)
    cols = n_rows if n_cols is None else n_cols
    k = max(-n_rows, min(k, cols))  # a diagonal past the corner is as empty as the one at it
    return M.triu(M.tril(ones((n_rows, cols), dtype=dtype, device=device), k), k)


def linspace(start: Union[int, float], stop: Union[int, float], /, num: int, *, dtype: Optional[DType] = None,
             device: Optional[str] = None, endpoint: bool = True) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (excluded where ``endpoint=False``)."""
    if endpoint:
        return C.linspace(start, stop, num, dtype=dtype, device=device)
    # NumPy's spacing without the endpoint: the first num of num + 1 points
    return C.linspace(start, stop, num + 1, dtype=dtype, device=device)[:num]


def meshgrid(*arrays: Tensor, indexing: str = "xy") -> List[Tensor]:
    """Coordinate grids of 1-D tensors; each output dim carries the name of the input it comes from."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}.")
    if any(a.ndim != 1 for a in arrays):
        raise ValueError("meshgrid: every array must be 1-D.")
    order = list(range(len(arrays)))
    if indexing == "xy" and len(arrays) > 1:
        order[0], order[1] = 1, 0  # "xy" puts the first input's dim second, as NumPy does
    shape = tuple(arrays[i].shape[0] for i in order)
    names = tuple(arrays[i].names[0] for i in order)
    out = []
    for i, a in enumerate(arrays):
        where = order.index(i)
        lifted = reshape(a, *[-1 if j == where else 1 for j in range(len(arrays))],
                         names=tuple(a.names[0] if j == where else None for j in range(len(arrays))))
        out.append(broadcast_to(lifted, shape, names=names))
    return out


def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    """``x`` with the entries above diagonal ``k`` of its last two dims zeroed; keeps the names."""
    return M.tril(x, k)


def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    """``x`` with the entries below diagonal ``k`` of its last two dims zeroed; keeps the names."""
    return M.triu(x, k)


def from_dlpack(x: Any, /, *, device: Optional[str] = None, copy: Optional[bool] = None) -> Tensor:
    """An unnamed tensor sharing the memory of a DLPack producer (``copy=True`` copies it)."""
    out = interop.from_dlpack(x, device=device)
    return out.clone() if copy else out


__all__ = ["arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace",
           "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like"]
