"""``MLP`` and ``TransformerBlock`` (pre-norm): a dim in, the same dim out.

Name rule: both read and write ``dim`` (``"embed"``) along ``seq``; every other dim passes
through.  The MLP widens ``dim`` into ``mlp_dim`` (``"mlp"``) and back; the block is
``x + attn(norm1(x))`` then ``x + mlp(norm2(x))``, with the attention of
:class:`~namedtensor.nn.MultiheadAttention`.  With ``dim=None`` they find their dims by position,
as PyTorch code does: the input is ``(..., seq, embed)``, the parameters are unnamed, and the
output keeps the input's names.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ... import _dtypes
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from .attention import MultiheadAttention
from .dropout import Dropout
from .linear import Linear
from ._forms import refuse_names
from .normalization import LayerNorm, RMSNorm


def _unnamed(layer: str, names: Dict[str, Optional[str]], defaults: Dict[str, str]) -> None:
    """A layer with ``dim=None`` has no dim names: refuse the ones given (those that differ from the defaults)."""
    refuse_names(layer, (k for k, v in names.items() if v != defaults[k]))


class MLP(Module):
    """``fc2(gelu(fc1(x)))``: reads ``dim`` (size ``size``), widens it to ``mlp_dim`` (``mlp_size``), writes
    ``dim`` back in its place; ``dropout`` after the output in training mode.  ``dim=None``: the last dim,
    and the hidden dim is unnamed."""

    def __init__(self, dim: Optional[str], size: int, mlp_size: int, *, mlp_dim: Optional[str] = "mlp",
                 dropout: float = 0.0, bias: bool = True, dtype: Any = _dtypes.float32, device: Any = None) -> None:
        super().__init__()
        if dim is None:
            _unnamed("MLP", {"mlp_dim": mlp_dim}, {"mlp_dim": "mlp"})
            mlp_dim = None
        self.dim = dim
        self.fc1 = Linear(dim, mlp_dim, size, mlp_size, bias=bias, dtype=dtype, device=device)
        self.fc2 = Linear(mlp_dim, dim, mlp_size, size, bias=bias, dtype=dtype, device=device)
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``x`` through the two layers; same names."""
        out = self.drop(self.fc2(F.gelu(self.fc1(x))))
        # by position the output dim is written unnamed, but it is the input's dim again
        return out.refine_names(*x.names) if self.dim is None and x.is_named else out


_DEFAULT_NAMES = {"seq": "seq", "key": "key", "head": "head", "head_dim": "head_dim", "mlp_dim": "mlp"}


class TransformerBlock(Module):
    """Pre-norm Transformer block: reads and writes ``dim`` (size ``size``) along ``seq``.

    ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``; ``norm`` is ``"layer"`` (LayerNorm) or
    ``"rms"`` (RMSNorm) over ``dim``.  The attention has ``num_heads`` heads (dims ``head`` and
    ``head_dim``), keys named ``key``; the MLP's hidden dim is ``mlp_dim`` of size ``mlp_size``
    (default ``4 * size``).  ``dim=None``: the dims by position, the input ``(..., seq, embed)``.
    """

    def __init__(self, dim: Optional[str], size: int, num_heads: int, mlp_size: Optional[int] = None, *,
                 seq: str = "seq", key: str = "key", head: str = "head", head_dim: str = "head_dim",
                 mlp_dim: str = "mlp", dropout: float = 0.0, norm: str = "layer", bias: bool = True,
                 dtype: Any = _dtypes.float32, device: Any = None) -> None:
        super().__init__()
        if norm not in ("layer", "rms"):
            raise ValueError(f"TransformerBlock: norm must be 'layer' or 'rms', got {norm!r}.")
        Norm = LayerNorm if norm == "layer" else RMSNorm
        options = {"dtype": dtype, "device": device}
        names = {"seq": seq, "key": key, "head": head, "head_dim": head_dim}
        mlp_names = {"mlp_dim": mlp_dim}
        if dim is None:
            _unnamed("TransformerBlock", {**names, **mlp_names}, _DEFAULT_NAMES)
            names, mlp_names = {}, {}
        self.dim, self.seq = dim, seq
        self.norm1 = Norm(dim, size, **options)
        self.attn = MultiheadAttention(dim, size, num_heads, **names, bias=bias, dropout=dropout, **options)
        self.norm2 = Norm(dim, size, **options)
        self.mlp = MLP(dim, size, 4 * size if mlp_size is None else mlp_size, **mlp_names, dropout=dropout,
                       bias=bias, **options)
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor, *, mask: Optional[Tensor] = None, is_causal: bool = False) -> Tensor:
        """``x`` through attention and MLP, each added back to its input; same names.  ``mask`` and
        ``is_causal`` go to the attention (see :class:`~namedtensor.nn.MultiheadAttention`)."""
        x = x + self.drop(self.attn(self.norm1(x), mask=mask, is_causal=is_causal))
        return x + self.mlp(self.norm2(x))
