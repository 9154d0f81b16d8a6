"""``MultiheadAttention``: self- and cross-attention, by dim name or as PyTorch's.

Two signatures (:mod:`._forms`), told apart by the first argument.

The named ``MultiheadAttention("embed", 8, 2)`` (``dim, size, num_heads``).  Name rule: the query
is ``(..., seq, dim)`` and the keys and values ``(..., key, dim)`` (for self-attention the keys
and values are the query, its ``seq`` renamed ``key``); the output has the query's names.  Inside,
each projection splits ``dim`` into ``(head, head_dim)`` with ``unflatten``,
:func:`~namedtensor.nn.functional.scaled_dot_product_attention` contracts ``head_dim`` and
normalises over ``key``, and ``flatten`` merges the heads back into ``dim`` before the output
projection.  The weights (``need_weights=True``) are named ``(..., head, seq, key)``.  Masks are
named and broadcast by name against those weights: a padding mask ``("batch", "key")`` and a
causal mask ``("seq", "key")`` combine without any reshaping.  With ``dim=None`` the dims are
found by position instead: the query is ``(..., seq, embed)`` (its last two dims), the keys and
values ``(..., key, embed)``, the weights ``(..., head, seq, key)`` unnamed, and a mask, unnamed,
lines up with the weights from the right; the output keeps the query's names.

PyTorch's ``MultiheadAttention(8, 2)`` (``embed_dim, num_heads, ..., batch_first=False``) does what
``torch.nn.MultiheadAttention`` does: inputs ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``, or
``(L, E)`` unbatched), ``forward(query, key, value, key_padding_mask=None, need_weights=True,
attn_mask=None, average_attn_weights=True, is_causal=False)`` returns ``(output, weights)``, the
weights averaged over the heads by default, and the parameters and state dict are PyTorch's
(``in_proj_weight``, ``in_proj_bias``, ``out_proj``).  The inputs are read by position; the output
keeps the query's names and the weights are unnamed.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Set, Tuple, Union

from ... import _dtypes, _names
from ...ops.creation import empty, zeros, zeros_like
from ...ops.naming import align
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ._forms import Forms, argument, is_name, is_size, refuse_names
from .linear import Linear

Names = Tuple[Optional[str], ...]

_OP = "MultiheadAttention"


def _pytorch(embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True, add_bias_kv: bool = False,
             add_zero_attn: bool = False, kdim: Optional[int] = None, vdim: Optional[int] = None,
             batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
    """PyTorch's ``nn.MultiheadAttention``."""


def _named(dim: Optional[str], size: int, num_heads: int, *, seq: str = "seq", key: str = "key", head: str = "head",
           head_dim: str = "head_dim", bias: bool = True, dropout: float = 0.0, kv_size: Optional[int] = None,
           dtype: Any = _dtypes.float32, device: Any = None) -> None:
    """Attention over the named dims ``dim`` (size ``size``), ``seq`` and ``key``."""


_FORMS = Forms(_OP, _pytorch, _named, lambda args, kwargs: is_size(argument(args, kwargs, 0, "embed_dim")))

#: the dims' names of the named layer, which the positional one (dim=None) must not be given
_DIM_NAMES = ("seq", "key", "head", "head_dim")

#: PyTorch's input projections when the keys or values have their own sizes (kdim, vdim)
_SEPARATE = ("q_proj_weight", "k_proj_weight", "v_proj_weight")


class MultiheadAttention(Module):
    """Attention over named dims: reads the query's ``dim`` (size ``size``) along ``seq`` and the keys'
    and values' ``dim`` along ``key``; writes ``dim`` with the query's names.

    ``MultiheadAttention(dim, size, num_heads, *, seq="seq", key="key", head="head", head_dim="head_dim",
    bias=True, dropout=0.0, kv_size=None, dtype=nt.float32, device=None)``: ``num_heads`` must divide
    ``size``; each head has ``size // num_heads`` features, the dim ``head_dim``.  ``kv_size`` is the
    size of the keys' and values' ``dim`` when it differs from the query's (cross-attention).
    ``dropout`` drops attention weights in training mode.  ``dim=None`` finds the dims by position.

    ``MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
    add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None, dtype=None)`` is
    PyTorch's (see the module's doc); ``add_bias_kv`` and ``add_zero_attn`` raise NotImplementedError.
    One difference: a query whose keys are all masked gets zero weights and output, where PyTorch
    gives NaN.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self._pytorch, a, given = _FORMS.bind(args, kwargs)
        (self._init_pytorch if self._pytorch else self._init_named)(a, given)

    def _init_named(self, a: Dict[str, Any], given: Set[str]) -> None:
        _FORMS.check(a, is_name, "a dim name (str) or None", ("dim",))
        dim, size, num_heads = a["dim"], a["size"], a["num_heads"]
        _check_heads(num_heads, size, "size")
        seq, key, head, head_dim = (a[n] for n in _DIM_NAMES)
        if dim is None:
            refuse_names(_OP, given & set(_DIM_NAMES))
        elif len({dim, seq, key, head, head_dim}) != 5:
            raise _names.NamesError(f"{_OP}: dim, seq, key, head and head_dim must be five different "
                                    f"names, got {(dim, seq, key, head, head_dim)}.")
        self.dropout = _check_dropout(a["dropout"])
        self.dim, self.size, self.num_heads = dim, size, num_heads
        self.seq, self.key, self.head, self.head_dim = seq, key, head, head_dim
        kv_size = size if a["kv_size"] is None else a["kv_size"]
        self.kv_size = kv_size
        options = {"bias": a["bias"], "dtype": a["dtype"], "device": a["device"]}
        self.q_proj = Linear(dim, dim, size, size, **options)
        self.k_proj = Linear(dim, dim, kv_size, size, **options)
        self.v_proj = Linear(dim, dim, kv_size, size, **options)
        self.out_proj = Linear(dim, dim, size, size, **options)

    def _init_pytorch(self, a: Dict[str, Any], given: Set[str]) -> None:
        for option in ("add_bias_kv", "add_zero_attn"):
            if a[option]:
                raise NotImplementedError(f"{_OP}: {option}=True is not supported; leave it False, PyTorch's default.")
        _FORMS.check(a, is_size, "an int", ("embed_dim", "num_heads"))
        _FORMS.check(a, lambda v: v is None or is_size(v), "an int or None", ("kdim", "vdim"))
        embed, num_heads = a["embed_dim"], a["num_heads"]
        _check_heads(num_heads, embed, "embed_dim")
        self.dropout = _check_dropout(a["dropout"])
        self.embed_dim, self.num_heads, self.batch_first = embed, num_heads, bool(a["batch_first"])
        self.kdim = embed if a["kdim"] is None else a["kdim"]
        self.vdim = embed if a["vdim"] is None else a["vdim"]
        self.head_dim = embed // num_heads
        self._qkv_same_embed_dim = self.kdim == embed and self.vdim == embed
        options = {"dtype": a["dtype"], "device": a["device"]}
        # registered in PyTorch's order, absent ones as None, so that the state dicts match key for key
        packed = ("in_proj_weight",)
        present, order = (packed, packed + _SEPARATE) if self._qkv_same_embed_dim else (_SEPARATE, _SEPARATE + packed)
        shapes = {"in_proj_weight": (3 * embed, embed), "q_proj_weight": (embed, embed),
                  "k_proj_weight": (embed, self.kdim), "v_proj_weight": (embed, self.vdim)}
        for name in order:
            weight = Parameter(empty(*shapes[name], **options)) if name in present else None
            self.register_parameter(name, weight)
            if weight is not None:
                init.xavier_uniform_(weight)
        self.register_parameter("in_proj_bias", Parameter(zeros(3 * embed, **options)) if a["bias"] else None)
        self.out_proj = Linear(embed, embed, bias=a["bias"], **options)
        if a["bias"]:
            init.zeros_(self.out_proj.bias)

    # ------------------------------------------------------------------ forward
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The named layer: ``forward(query, key=None, value=None, *, mask=None, is_causal=False,
        need_weights=False)`` gives the attended query, named like ``query``, and with
        ``need_weights=True`` also the weights ``(..., head, seq, key)``.  ``key`` defaults to
        ``query`` with ``seq`` renamed ``key``, and ``value`` to ``key``.  ``mask``: bool (True = may
        attend) or float (added to the scores), named by any of the weights' dims; ``is_causal``:
        query i attends keys j <= i.

        PyTorch's layer: ``forward(query, key, value, key_padding_mask=None, need_weights=True,
        attn_mask=None, average_attn_weights=True, is_causal=False)`` gives ``(output, weights)``
        (weights None without ``need_weights``), as ``torch.nn.MultiheadAttention``: a bool mask is True
        where attention is NOT allowed, a float one is added; ``is_causal`` is a hint that
        ``attn_mask`` is causal, and needs it."""
        if self._pytorch:
            return self._forward_pytorch(*args, **kwargs)
        return self._forward_named(*args, **kwargs)

    def _forward_named(self, query: Tensor, key: Optional[Tensor] = None, value: Optional[Tensor] = None, *,
                       mask: Optional[Tensor] = None, is_causal: bool = False,
                       need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        _check_tensors(query=query, key=key, value=value)
        if key is None and value is not None:
            raise ValueError(f"{_OP}: value= given without key=; give both, or neither for self-attention.")
        if self.dim is None:
            return self._forward_positional(query, key, value, mask, is_causal, need_weights)
        if self.seq not in query.names:
            raise _names.NamesError(f"{_OP}: the query {_names.fmt(query.names)} has no sequence dim "
                                    f"{self.seq!r}; rename its sequence dim to {self.seq!r} or build the layer "
                                    f"with seq= its name.")
        if key is None:
            # positional: a keyword rename would break for a seq named like rename's own parameter ("t")
            key = query.rename(*(self.key if n == self.seq else n for n in query.names))
        elif self.key not in key.names:
            raise _names.NamesError(f"{_OP}: the keys {_names.fmt(key.names)} have no sequence dim "
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

    def _heads(self, t: Tensor) -> Tensor:
        return t.unflatten(self.dim, ((self.head, self.num_heads), (self.head_dim, self.size // self.num_heads)))

    def _forward_positional(self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor],
                            mask: Optional[Tensor], is_causal: bool,
                            need_weights: bool) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        key = query if key is None else key
        value = key if value is None else value
        batch = _batch(query, "query")
        if mask is not None:
            mask = _positional_mask(mask, batch + ("head", "seq", "key"))
        out, weights = _attend(self.q_proj(query), self.k_proj(key), self.v_proj(value), self.num_heads, batch,
                               mask, is_causal, self.dropout if self.training else 0.0, need_weights)
        out = self.out_proj(out).refine_names(*query.names)
        return (out, weights) if need_weights else out

    def _forward_pytorch(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Optional[Tensor] = None,
                         need_weights: bool = True, attn_mask: Optional[Tensor] = None,
                         average_attn_weights: bool = True,
                         is_causal: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        _check_tensors(query=query, key=key, value=value)
        batched = query.ndim == 3
        at = 0 if self.batch_first else 1  # the batch axis of batched inputs
        if (query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim
                or key.shape[:-1] != value.shape[:-1] or (batched and key.shape[at] != query.shape[at])):
            layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
            raise ValueError(f"{_OP}: query, key and value must be {layout} (or (L, E) unbatched), with the same "
                             f"batch size and key and value of one length; got shapes {query.shape}, {key.shape}, "
                             f"{value.shape}.")
        if is_causal and attn_mask is None:
            raise ValueError(f"{_OP}: is_causal=True is a hint that attn_mask is a causal mask, so it needs "
                             "attn_mask, as in PyTorch.")
        q, k, v = self._in_projection(query, key, value)
        if batched and not self.batch_first:
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        batch = _batch(q, "query")
        mask = self._pytorch_mask(attn_mask, key_padding_mask, batch, q.shape[:-2], q.shape[-2], k.shape[-2],
                                  q.dtype)
        out, weights = _attend(q, k, v, self.num_heads, batch, mask, False,
                               self.dropout if self.training else 0.0, need_weights)
        out = self.out_proj(out)
        if batched and not self.batch_first:
            out = out.transpose(0, 1)
        out = out.refine_names(*query.names)
        if weights is not None and average_attn_weights:
            weights = weights.mean(-3)
        return out, weights

    def _in_projection(self, query: Tensor, key: Tensor, value: Tensor) -> Tuple[Tensor, ...]:
        if self.in_proj_weight is not None:
            weights = self.in_proj_weight.chunk(3, 0)
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        biases = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3, 0)
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def _pytorch_mask(self, attn_mask: Optional[Tensor], key_padding_mask: Optional[Tensor], batch: Names,
                      batch_shape: Tuple[int, ...], n_query: int, n_key: int, dtype: Any) -> Optional[Tensor]:
        """PyTorch's two masks as one float mask (added to the scores), named like the weights."""
        parts = []
        if attn_mask is not None:
            m = _additive(attn_mask, "attn_mask", dtype)
            heads = (math.prod(batch_shape) * self.num_heads, n_query, n_key)
            if m.shape == (n_query, n_key):
                parts.append(m.refine_names("seq", "key"))
            elif m.shape == heads:
                parts.append(m.reshape(*batch_shape, self.num_heads, n_query, n_key)
                             .refine_names(*batch, "head", "seq", "key"))
            else:
                raise ValueError(f"{_OP}: attn_mask has shape {attn_mask.shape}; it must be (L, S) = "
                                 f"{(n_query, n_key)} or (N * num_heads, L, S) = {heads}.")
        if key_padding_mask is not None:
            m = _additive(key_padding_mask, "key_padding_mask", dtype)
            if m.shape != batch_shape + (n_key,):
                raise ValueError(f"{_OP}: key_padding_mask has shape {key_padding_mask.shape}; it must be (N, S) = "
                                 f"{batch_shape + (n_key,)} (or (S,) unbatched).")
            parts.append(m.refine_names(*batch, "key"))
        if len(parts) < 2:
            return parts[0] if parts else None
        a, b = align(*parts)
        return a + b

    def extra_repr(self) -> str:
        if self._pytorch:
            return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                    f"batch_first={self.batch_first}")
        heads = f"heads={self.num_heads}"
        if self.dim is None:
            return f"{self.size}, {heads}, dims by position (..., seq, embed), dropout={self.dropout}"
        return (f"{self.dim!r}: {self.size}, {heads} ({self.head!r} x {self.head_dim!r}: "
                f"{self.size // self.num_heads}), seq={self.seq!r}, key={self.key!r}, dropout={self.dropout}")


def _check_heads(num_heads: Any, size: int, label: str) -> None:
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1 or size % num_heads:
        raise ValueError(f"{_OP}: num_heads ({num_heads}) must be a positive divisor of {label} ({size}).")


def _check_dropout(dropout: Any) -> float:
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"{_OP}: dropout must be in [0, 1), got {dropout!r}.")
    return float(dropout)


def _check_tensors(**tensors: Optional[Tensor]) -> None:
    for label, t in tensors.items():
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{_OP}: {label} must be a Tensor, got {type(t).__name__}.")


def _batch(t: Tensor, label: str) -> Names:
    """Names for the batch dims of ``t``, laid out ``(..., seq, embed)``, while attention runs by name."""
    if t.ndim < 2:
        raise ValueError(f"{_OP}: the {label} must have a sequence dim and a feature dim, (..., seq, embed); "
                         f"got shape {t.shape}.")
    return tuple(f"batch{i}" for i in range(t.ndim - 2))


def _positional_mask(mask: Tensor, weights: Names) -> Tensor:
    """An unnamed mask, lined up with the weights ``(..., head, seq, key)`` from the right, named like them."""
    _check_tensors(mask=mask)
    if mask.is_named:
        raise _names.NamesError(f"{_OP}: a layer built with dim=None lines the mask up with the weights "
                                f"(..., head, seq, key) by position, but the mask has names "
                                f"{_names.fmt(mask.names)}; drop them with rename(None).")
    if mask.ndim > len(weights):
        raise ValueError(f"{_OP}: the mask has shape {mask.shape}, more dims than the weights "
                         f"(..., head, seq, key) ({len(weights)}).")
    return mask.refine_names(*weights[len(weights) - mask.ndim:])


def _additive(mask: Tensor, label: str, dtype: Any) -> Tensor:
    """PyTorch's mask as the float mask added to the scores: a bool one is True where attention is NOT allowed."""
    _check_tensors(**{label: mask})
    if mask.is_named:
        raise _names.NamesError(f"{_OP}: PyTorch's {label} is read by position, but it has names "
                                f"{_names.fmt(mask.names)}; drop them with rename(None), or use the named layer "
                                f"({_OP}('embed', size, num_heads)) whose masks are named.")
    if mask.dtype.kind == "b":
        return zeros_like(mask, dtype=dtype).masked_fill(mask, float("-inf"))
    if mask.dtype.kind == "f":
        return mask.to(dtype)
    raise TypeError(f"{_OP}: {label} must be bool or floating point, got {mask.dtype!r}.")


def _split(t: Tensor, batch: Names, seq: str, num_heads: int, label: str) -> Tensor:
    """``t`` ``(..., seq, embed)``, projected, as ``(..., seq, head, head_dim)`` with the working names."""
    n = t.ndim - 2
    if not 0 <= n <= len(batch):
        raise ValueError(f"{_OP}: the {label} must be (..., {seq}, embed) with at most the query's batch dims "
                         f"({len(batch)}); got shape {t.shape}.")
    t = t.rename(None)
    shape = t.shape
    return t.reshape(*shape[:-1], num_heads, shape[-1] // num_heads).refine_names(
        *batch[len(batch) - n:], seq, "head", "head_dim")


def _attend(q: Tensor, k: Tensor, v: Tensor, num_heads: int, batch: Names, mask: Optional[Tensor], is_causal: bool,
            dropout_p: float, need_weights: bool) -> Tuple[Tensor, Optional[Tensor]]:
    """Multi-head attention of projected q ``(..., seq, embed)``, k and v ``(..., key, embed)`` whose dims are
    found by position: the output ``(..., seq, embed)`` and the weights ``(..., head, seq, key)`` (or None),
    both unnamed.  ``batch`` names q's batch dims and ``mask`` is named by the weights' working names."""
    result = F.scaled_dot_product_attention(
        _split(q, batch, "seq", num_heads, "query"), _split(k, batch, "key", num_heads, "key"),
        _split(v, batch, "key", num_heads, "value"), dim="head_dim", key_dim="key", query_dim="seq", mask=mask,
        is_causal=is_causal, dropout_p=dropout_p, return_weights=need_weights)
    out, weights = result if need_weights else (result, None)
    out = out.rename(None)
    out = out.reshape(*out.shape[:-2], out.shape[-2] * out.shape[-1])
    return out, None if weights is None else weights.rename(None)
