"""Distance layers: ``CosineSimilarity``.

Name rule: ``F.cosine_similarity``'s: the two inputs' names unify (rule 2) and the dim ``dim`` (a name
wherever it is, or an int position as in PyTorch, default 1) is removed.
"""

from __future__ import annotations

from typing import Hashable

from ...tensor import Tensor
from .. import functional as F
from ..module import Module


class CosineSimilarity(Module):
    """The cosine similarity of two inputs along ``dim`` (PyTorch's ``nn.CosineSimilarity(dim=1, eps=1e-8)``),
    which the output lacks."""

    def __init__(self, dim: Hashable = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)

    def extra_repr(self) -> str:
        return f"dim={self.dim!r}, eps={self.eps!r}"
