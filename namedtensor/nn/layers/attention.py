"""``MultiheadAttention``: self- and cross-attention whose every dim has a name.

Name rule: the query is ``(..., seq, dim)`` and the keys and values ``(..., key, dim)`` (for
self-attention the keys and values are the query, its ``seq`` renamed ``key``); the output has
the query's names.  Inside, each projection splits ``dim`` into ``(head, head_dim)`` with
``unflatten``, :func:`~namedtensor.nn.functional.scaled_dot_product_attention` contracts
``head_dim`` and normalises over ``key``, and ``flatten`` merges the heads back into ``dim``
before the output projection.  The weights (``need_weights=True``) are named
``(..., head, seq, key)``.  Masks are named and broadcast by name against those weights: a
padding mask ``("batch", "key")`` and a causal mask ``("seq", "key")`` combine without any
reshaping.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from ... import _dtypes, _names
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from .linear import Linear


class MultiheadAttention(Module):
    """Attention over named dims: reads the query's ``dim`` (size ``size``) along ``seq`` and the keys'
    and values' ``dim`` along ``key``; writes ``dim`` with the query's names.

    ``num_heads`` must divide ``size``; each head has ``size // num_heads`` features, the dim
    ``head_dim``.  ``kv_size`` is the size of the keys' and values' ``dim`` when it differs from
    the query's (cross-attention).  ``dropout`` drops attention weights in training mode.
    """

    def __init__(self, dim: str, size: int, num_heads: int, *, seq: str = "seq", key: str = "key",
                 head: str = "head", head_dim: str = "head_dim", bias: bool = True, dropout: float = 0.0,
                 kv_size: Optional[int] = None, dtype: Any = _dtypes.float32, device: Any = None) -> None:
        super().__init__()
        if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1 or size % num_heads:
            raise ValueError(f"MultiheadAttention: num_heads ({num_heads}) must be a positive divisor of size "
                             f"({size}).")
        if len({dim, seq, key, head, head_dim}) != 5:
            raise _names.NamesError(f"MultiheadAttention: dim, seq, key, head and head_dim must be five different "
                                    f"names, got {(dim, seq, key, head, head_dim)}.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1), got {dropout!r}.")
        self.dim, self.size, self.num_heads = dim, size, num_heads
        self.seq, self.key, self.head, self.head_dim = seq, key, head, head_dim
        self.dropout = dropout
        kv_size = size if kv_size is None else kv_size
        self.kv_size = kv_size
        options = {"bias": bias, "dtype": dtype, "device": device}
        self.q_proj = Linear(dim, dim, size, size, **options)
        self.k_proj = Linear(dim, dim, kv_size, size, **options)
        self.v_proj = Linear(dim, dim, kv_size, size, **options)
        self.out_proj = Linear(dim, dim, size, size, **options)

    def _heads(self, t: Tensor) -> Tensor:
        return t.unflatten(self.dim, ((self.head, self.num_heads), (self.head_dim, self.size // self.num_heads)))

    def forward(self, query: Tensor, key: Optional[Tensor] = None, value: Optional[Tensor] = None, *,
                mask: Optional[Tensor] = None, is_causal: bool = False,
                need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """The attended query, named like ``query``; with ``need_weights=True`` also the weights
        ``(..., head, seq, key)``.  ``key`` defaults to ``query`` with ``seq`` renamed ``key``, and
        ``value`` to ``key``.  ``mask``: bool (True = may attend) or float (added to the scores),
        named by any of the weights' dims; ``is_causal``: query i attends keys j <= i."""
        for label, t in (("query", query), ("key", key), ("value", value)):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"MultiheadAttention: {label} must be a Tensor, got {type(t).__name__}.")
        if self.seq not in query.names:
            raise _names.NamesError(f"MultiheadAttention: the query {_names.fmt(query.names)} has no sequence dim "
                                    f"{self.seq!r}; rename its sequence dim to {self.seq!r} or build the layer "
                                    f"with seq= its name.")
        if key is None:
            if value is not None:
                raise ValueError("MultiheadAttention: value= given without key=; give both, or neither "
                                 "for self-attention.")
            # positional: a keyword rename would break for a seq named like rename's own parameter ("t")
            key = query.rename(*(self.key if n == self.seq else n for n in query.names))
        elif self.key not in key.names:
            raise _names.NamesError(f"MultiheadAttention: the keys {_names.fmt(key.names)} have no sequence dim "
                                    f"{self.key!r} (the query {_names.fmt(query.names)}); rename the keys' "
                                    f"sequence dim to {self.key!r} or build the layer with key= its name.")
        if value is None:
            value = key
        q = self._heads(self.q_proj(query))
        k = self._heads(self.k_proj(key))
        v = self._heads(self.v_proj(value))
        result = F.scaled_dot_product_attention(
            q, k, v, dim=self.head_dim, key_dim=self.key, query_dim=self.seq, mask=mask, is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0, return_weights=need_weights)
        out = result[0] if need_weights else result
        out = self.out_proj(out.flatten((self.head, self.head_dim), self.dim))
        if not need_weights:
            return out
        # the op orders the weights' batch dims as in the query, where head sits at dim's place
        return out, result[1].align_to(..., self.head, self.seq, self.key)

    def extra_repr(self) -> str:
        return (f"{self.dim!r}: {self.size}, heads={self.num_heads} ({self.head!r} x {self.head_dim!r}: "
                f"{self.size // self.num_heads}), seq={self.seq!r}, key={self.key!r}, dropout={self.dropout}")
