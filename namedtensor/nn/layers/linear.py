"""``Linear``: contracts one named dim with a weight and writes another in its place; ``Identity``.

Name rule: ``Linear("embed", "hidden", 8, 32)`` reads the input's ``"embed"``
dim wherever it is and writes ``"hidden"`` at that position; every other dim
passes through.  Its weight is named ``("hidden", "embed")`` and its bias
``("hidden",)``.  A layer that maps a dim to itself (``Linear("embed",
"embed", 8, 8)``) names its weight ``("embed_out", "embed")`` (a tensor cannot
have a name twice) and its bias ``("embed_out",)``; the output dim is still
called ``"embed"``.
"""

from __future__ import annotations

import math
from typing import Any

from ... import _dtypes
from ...ops.creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter


class Linear(Module):
    """``y = x @ W.T + b`` along one named dim: reads ``in_dim`` (size ``in_size``), writes ``out_dim``
    (size ``out_size``) in its place; other dims pass through.

    Weight ``(out_dim, in_dim)`` (``(in_dim + "_out", in_dim)`` when the two names are equal),
    bias ``(out_dim,)``; initialised as PyTorch's ``nn.Linear`` (uniform, bound 1/sqrt(in_size)).
    """

    def __init__(self, in_dim: str, out_dim: str, in_size: int, out_size: int, bias: bool = True,
                 dtype: Any = _dtypes.float32, device: Any = None) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.in_size = in_size
        self.out_size = out_size
        w_out = out_dim + "_out" if out_dim == in_dim else out_dim
        self.weight = Parameter(empty(out_size, in_size, names=(w_out, in_dim), dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_size, names=(w_out,), dtype=dtype, device=device))
        else:
            self.bias = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: weight kaiming-uniform (a=sqrt(5)), bias U(-1/sqrt(in), 1/sqrt(in))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), fan_in=self.in_dim)
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_size) if self.in_size > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with ``in_dim`` replaced in place by ``out_dim``."""
        return F.linear(x, self.weight, self.bias, dim=self.in_dim, out_dim=self.out_dim)

    def extra_repr(self) -> str:
        reads, writes = f"{{{self.in_dim!r}: {self.in_size}}}", f"{{{self.out_dim!r}: {self.out_size}}}"
        return f"{reads} -> {writes}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input unchanged (all dims pass through); arguments are accepted and ignored."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        """``x`` itself."""
        return x
