"""``Dropout``: zeroes elements at random while training.

Name rule: the output has the input's names.
"""

from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from ._forms import refuse_inplace


class Dropout(Module):
    """In training mode, zero each element with probability ``p`` and scale the rest by 1/(1-p);
    in eval mode, the identity.  Reads and writes every dim unchanged.  Seeded by ``nt.manual_seed``.
    PyTorch's ``inplace=True`` is not supported."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        refuse_inplace("Dropout", inplace)
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p is the probability of zeroing an element, a number in [0, 1); got {p!r}.")
        self.p = float(p)

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with dropout applied when ``self.training``; same names."""
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
