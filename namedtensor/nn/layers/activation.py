"""Activation layers: ``ReLU GELU SiLU Tanh Sigmoid`` (elementwise) and ``Softmax LogSoftmax`` (along a dim).

Name rule: the output has the input's names.  ``Softmax(dim)`` normalises along the dim ``dim``: a
name wherever it is, or an int position as in PyTorch (``Softmax(dim=-1)``).  PyTorch's
``inplace=True`` (``ReLU``, ``SiLU``) is refused: these layers never overwrite their input.
"""

from __future__ import annotations

from typing import Hashable, Optional

from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from ._forms import refuse_inplace


class ReLU(Module):
    """``max(x, 0)`` elementwise; every dim passes through."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        refuse_inplace("ReLU", inplace)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class GELU(Module):
    """Gaussian error linear unit, exact (``approximate="none"``) or its tanh form (``"tanh"``);
    every dim passes through."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}.")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)`` elementwise; every dim passes through."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        refuse_inplace("SiLU", inplace)

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)


class Tanh(Module):
    """``tanh(x)`` elementwise; every dim passes through."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))`` elementwise; every dim passes through."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


def _along(layer: str, dim: Optional[Hashable]) -> Hashable:
    if dim is None:
        # PyTorch guesses a dim from the input's rank (deprecated); a guess here would be silent
        raise TypeError(f"{layer}: give the dim to normalise along, a name or an int: {layer}(dim=-1) or "
                        f"{layer}('embed'). PyTorch's dim=None (a dim guessed from the input's rank) is not "
                        "supported.")
    return dim


class Softmax(Module):
    """Softmax along the dim ``dim`` (a name, or an int); every dim passes through."""

    def __init__(self, dim: Optional[Hashable] = None) -> None:
        super().__init__()
        self.dim = _along("Softmax", dim)

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim!r}"


class LogSoftmax(Module):
    """Log of the softmax along the dim ``dim`` (a name, or an int); every dim passes through."""

    def __init__(self, dim: Optional[Hashable] = None) -> None:
        super().__init__()
        self.dim = _along("LogSoftmax", dim)

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim!r}"
