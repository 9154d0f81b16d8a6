"""Activation layers: ``ReLU GELU SiLU Tanh Sigmoid`` (elementwise) and ``Softmax LogSoftmax`` (along a dim).

Name rule: the output has the input's names.  ``Softmax(dim)`` normalises along
the dim named ``dim`` wherever it is.
"""

from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from ..module import Module


class ReLU(Module):
    """``max(x, 0)`` elementwise; every dim passes through."""

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


class Softmax(Module):
    """Softmax along the dim ``dim`` (a name, or an int); every dim passes through."""

    def __init__(self, dim) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim!r}"


class LogSoftmax(Module):
    """Log of the softmax along the dim ``dim`` (a name, or an int); every dim passes through."""

    def __init__(self, dim) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim!r}"
