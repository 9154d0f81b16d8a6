"""Helpers shared by the Array API modules: resolving the standard's ``axis`` arguments."""

from __future__ import annotations

from typing import Hashable, Optional, Sequence, Tuple, Union

from .. import _names
from ..tensor import Tensor

#: the standard's ``axis``: an int, or (namedtensor's rule 3) a dim name, or a tuple of them
Axis = Union[int, str]
Axes = Union[Axis, Sequence[Axis], None]


def axis(x: Tensor, a: Hashable, op: str) -> int:
    """The non-negative position of ``a`` (a name or an int) in ``x``, errors naming ``op``."""
    return _names.axis(x.names, a, op)


def axes(x: Tensor, a: Axes, op: str) -> Optional[Tuple[int, ...]]:
    """``a`` as a tuple of non-negative positions, or None for "every dim"."""
    if a is None:
        return None
    if isinstance(a, (tuple, list)):
        return tuple(axis(x, d, op) for d in a)
    return (axis(x, a, op),)
