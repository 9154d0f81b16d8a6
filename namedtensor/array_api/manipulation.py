"""The standard's manipulation functions, on the library's shape, joining and movement ops.

Names follow the library's rules: ``reshape`` keeps the names of the dims it leaves alone,
``concat``/``stack`` unify the inputs' names, ``expand_dims`` inserts an unnamed dim,
``permute_dims``/``moveaxis`` move names with their dims, ``broadcast_arrays`` unifies by rule 2.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

from .. import _dtypes, _names
from .._internal import backend_of, raw, wrap
from ..ops import joining as J, movement as M, shape as S
from ..ops.indexing import index_select
from ..ops.naming import permute
from ..tensor import Tensor
from ._common import Axes, Axis, axes, axis as _axis


def _broadcast_shapes(shapes: List[Tuple[int, ...]]) -> Tuple[int, ...]:
    """The shape that ``shapes`` broadcast to (right-aligned, 1 stretches), or a ValueError."""
    out: List[int] = []
    for k in range(1, max((len(s) for s in shapes), default=0) + 1):
        sizes = {s[-k] for s in shapes if len(s) >= k} - {1}
        if len(sizes) > 1:
            raise ValueError(f"broadcast_arrays: shapes {', '.join(map(str, shapes))} do not broadcast "
                             f"(sizes {sorted(sizes)} at position {-k} from the right).")
        out.insert(0, sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_arrays(*arrays: Tensor) -> List[Tensor]:
    """The tensors broadcast against each other by position; every result has the unified names."""
    shape = _broadcast_shapes([a.shape for a in arrays])
    names = _names.unify_all([a.names for a in arrays], "broadcast_arrays")
    return [S.broadcast_to(a, shape, names=names) for a in arrays]


def broadcast_to(x: Tensor, /, shape: Tuple[int, ...]) -> Tensor:
    """``x`` broadcast to ``shape``; new leading dims are unnamed."""
    return S.broadcast_to(x, tuple(shape))


def concat(arrays: Sequence[Tensor], /, *, axis: Optional[Axis] = 0) -> Tensor:
    """The tensors joined along ``axis``; ``axis=None`` joins them flattened (unnamed)."""
    if axis is None:
        return J.cat([S.reshape(a.rename(None), -1) for a in arrays], 0)
    return J.cat(list(arrays), axis)


def expand_dims(x: Tensor, /, axis: int = 0) -> Tensor:
    """``x`` with a new unnamed size-1 dim at ``axis`` (``-1`` is after the last dim)."""
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexError(f"expand_dims: axis {axis} is out of range for a tensor of {x.ndim} dims.")
    return S.unsqueeze(x, axis % (x.ndim + 1))


def flip(x: Tensor, /, *, axis: Axes = None) -> Tensor:
    """``x`` reversed along ``axis`` (every dim where None), keeping the names."""
    dims = axes(x, axis, "flip")
    return M.flip(x, tuple(range(x.ndim)) if dims is None else dims)


def moveaxis(x: Tensor, source: Union[Axis, Sequence[Axis]], destination: Union[int, Sequence[int]], /) -> Tensor:
    """``x`` with the dims ``source`` moved to the positions ``destination``; names move with them."""
    src = axes(x, source, "moveaxis")
    dst = tuple(d % x.ndim for d in (destination if isinstance(destination, (tuple, list)) else (destination,)))
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of elements.")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(x, *order)


def permute_dims(x: Tensor, /, axes: Tuple[Axis, ...]) -> Tensor:
    """``x`` with its dims in the order ``axes`` (ints or names)."""
    return permute(x, *axes)


def repeat(x: Tensor, repeats: Union[int, Tensor], /, *, axis: Optional[Axis] = None) -> Tensor:
    """Each element repeated ``repeats`` times along ``axis`` (NumPy's ``repeat``; the flattened,
    unnamed ``x`` where None); the dim keeps its name."""
    if axis is None:
        x, axis = S.reshape(x.rename(None), -1), 0
    a = _axis(x, axis, "repeat")
    B = backend_of(x)
    counts = raw(repeats) if isinstance(repeats, Tensor) else repeats
    idx = B.repeat(B.arange(x.shape[a], dtype=B.native(_dtypes.int64)), counts)
    return index_select(x, a, wrap(idx, (None,), B))


def reshape(x: Tensor, /, shape: Tuple[int, ...], *, copy: Optional[bool] = None) -> Tensor:
    """``x`` with ``shape`` (by the library's ``reshape`` name rule); ``copy=True`` copies."""
    out = S.reshape(x, *shape)
    return out.clone() if copy else out


def roll(x: Tensor, /, shift: Union[int, Tuple[int, ...]], *, axis: Axes = None) -> Tensor:
    """``x`` rolled by ``shift`` along ``axis`` (the flattened ``x`` where None), keeping the names."""
    return M.roll(x, shift, axis)


def squeeze(x: Tensor, /, axis: Union[Axis, Tuple[Axis, ...]]) -> Tensor:
    """``x`` without the size-1 dims ``axis``; a dim of another size is an error."""
    dims = axes(x, axis, "squeeze")
    if any(x.shape[d] != 1 for d in dims):
        raise ValueError(f"squeeze: dims {axis!r} must have size 1, shape is {x.shape}.")
    return S.squeeze(x, dims)


def stack(arrays: Sequence[Tensor], /, *, axis: int = 0) -> Tensor:
    """The tensors joined along a new unnamed dim at ``axis``; their names unify."""
    if not -arrays[0].ndim - 1 <= axis <= arrays[0].ndim:
        raise IndexError(f"stack: axis {axis} is out of range for tensors of {arrays[0].ndim} dims.")
    return J.stack(list(arrays), axis % (arrays[0].ndim + 1))


def tile(x: Tensor, repetitions: Tuple[int, ...], /) -> Tensor:
    """``x`` tiled ``repetitions`` times; the leading dims it adds are unnamed."""
    return M.tile(x, tuple(repetitions))


def unstack(x: Tensor, /, *, axis: Axis = 0) -> Tuple[Tensor, ...]:
    """The slices of ``x`` along ``axis``, each without that dim."""
    return tuple(J.unbind(x, axis))


__all__ = ["broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis", "permute_dims", "repeat",
           "reshape", "roll", "squeeze", "stack", "tile", "unstack"]
