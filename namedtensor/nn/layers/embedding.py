"""``Embedding``: a lookup table from integer indices to vectors along a new named dim.

Name rule: the output has the index tensor's names plus ``out_dim`` at the end
(``("batch", "seq")`` -> ``("batch", "seq", "embed")``).  The weight is named
``(vocab_dim, out_dim)``.
"""

from __future__ import annotations

from typing import Any

from ... import _dtypes
from ...ops.creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter


class Embedding(Module):
    """Reads integer indices in ``[0, num)`` (any names), writes ``out_dim`` (size ``size``) at the end.

    Weight ``(vocab_dim, out_dim)`` of shape ``(num, size)``, initialised N(0, 1) as in PyTorch.
    """

    def __init__(self, num: int, size: int, out_dim: str, vocab_dim: str = "vocab",
                 dtype: Any = _dtypes.float32, device: Any = None) -> None:
        super().__init__()
        self.num = num
        self.size = size
        self.out_dim = out_dim
        self.vocab_dim = vocab_dim
        self.weight = Parameter(empty(num, size, names=(vocab_dim, out_dim), dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """N(0, 1), as PyTorch's ``nn.Embedding``."""
        init.normal_(self.weight)

    def forward(self, indices: Tensor) -> Tensor:
        """The rows of the weight at ``indices``: names ``indices.names + (out_dim,)``."""
        return F.embedding(indices, self.weight, dim=self.vocab_dim)

    def extra_repr(self) -> str:
        return f"{{{self.vocab_dim!r}: {self.num}}} -> {{{self.out_dim!r}: {self.size}}}"
