"""``LayerNorm`` and ``RMSNorm``: normalise over named dims.

Name rule: the output has the input's names; the normalised dims are found by
name wherever they are.  The weight (and LayerNorm's bias) is named by those
dims, e.g. ``("embed",)``.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from ... import _dtypes, _names
from ...ops.creation import ones, zeros
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from ..parameter import Parameter

Dims = Union[str, Sequence[str]]
Sizes = Union[int, Sequence[int], None]


def _dims_and_sizes(dims: Any, sizes: Sizes, op: str) -> Tuple[Tuple[str, ...], Tuple[int, ...]]:
    """``("embed",), (16,)`` from ``"embed", 16``, ``("h", "d"), (4, 8)``, or ``{"embed": 16}``."""
    if isinstance(dims, dict):
        if sizes is not None:
            raise TypeError(f"{op}: give the sizes either in the dims dict or as sizes=, not both.")
        dims, sizes = tuple(dims), tuple(dims.values())
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if sizes is None:
        raise TypeError(f"{op}: give the sizes of the normalised dims {dims}, e.g. {op}('embed', 16).")
    sizes = (sizes,) if isinstance(sizes, int) else tuple(sizes)
    if len(dims) != len(sizes):
        raise ValueError(f"{op}: {len(dims)} dims {dims} but {len(sizes)} sizes {sizes}; give one size per dim.")
    if not dims:
        raise ValueError(f"{op}: give at least one dim to normalise over.")
    for d in dims:
        if not isinstance(d, str):
            raise _names.NamesError(f"{op}: the normalised dims must be given by name, got {d!r}.")
    _names.validate(dims, len(dims), op)  # valid identifiers, no repeats
    return dims, sizes


class LayerNorm(Module):
    """Reads and writes the same dims: subtracts the mean and divides by the standard deviation over
    ``dims`` (names, sizes ``sizes``), then scales by ``weight`` and shifts by ``bias`` (named ``dims``).

    ``LayerNorm("embed", 16)``, ``LayerNorm(("head", "head_dim"), (4, 8))`` or ``LayerNorm({"embed": 16})``.
    """

    def __init__(self, dims: Any, sizes: Sizes = None, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype: Any = _dtypes.float32, device: Any = None) -> None:
        super().__init__()
        self.dims, self.sizes = _dims_and_sizes(dims, sizes, "LayerNorm")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.sizes, names=self.dims, dtype=dtype, device=device))
            self.bias = Parameter(zeros(*self.sizes, names=self.dims, dtype=dtype, device=device)) if bias else None
        else:
            self.weight = None
            self.bias = None

    def forward(self, x: Tensor) -> Tensor:
        """``x`` normalised over ``dims``; same names."""
        return F.layer_norm(x, _one_or_tuple(self.dims), self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{_fmt_sizes(self.dims, self.sizes)}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """Reads and writes the same dims: divides by the root mean square over ``dims`` (names, sizes
    ``sizes``), then scales by ``weight`` (named ``dims``).  ``RMSNorm("embed", 16)``."""

    def __init__(self, dims: Any, sizes: Sizes = None, eps: Optional[float] = 1e-6,
                 elementwise_affine: bool = True, dtype: Any = _dtypes.float32, device: Any = None) -> None:
        super().__init__()
        self.dims, self.sizes = _dims_and_sizes(dims, sizes, "RMSNorm")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.sizes, names=self.dims, dtype=dtype, device=device))
        else:
            self.weight = None

    def forward(self, x: Tensor) -> Tensor:
        """``x`` divided by its root mean square over ``dims``; same names."""
        return F.rms_norm(x, _one_or_tuple(self.dims), self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{_fmt_sizes(self.dims, self.sizes)}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


def _one_or_tuple(dims: Tuple[str, ...]) -> Union[str, Tuple[str, ...]]:
    return dims[0] if len(dims) == 1 else dims


def _fmt_sizes(dims: Tuple[str, ...], sizes: Tuple[int, ...]) -> str:
    return "{" + ", ".join(f"{d!r}: {s}" for d, s in zip(dims, sizes)) + "}"
