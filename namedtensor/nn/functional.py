"""``namedtensor.nn.functional``: the functional API with PyTorch's spellings, for named dims.

    import namedtensor.nn.functional as F
    h = F.gelu(F.linear(x, w1, b1, dim="embed"))             # (batch, seq, embed) -> (batch, seq, hidden)
    loss = F.cross_entropy(logits, tokens, dim="vocab", label_smoothing=0.1)

Where PyTorch takes a position or a shape, these take dim names: ``linear``'s ``dim`` is the
contracted dim, ``layer_norm``/``rms_norm`` normalise over named ``dims``, ``cross_entropy`` and
``nll_loss`` take the class ``dim``.  Every function is an op of :mod:`namedtensor.ops` (its name
rule is in :mod:`namedtensor._names`; docs/design.md lists them by family), only re-exported here.
"""

from __future__ import annotations

from ..ops.attention import causal_mask, scaled_dot_product_attention
from ..ops.dense import dropout, embedding, linear
from ..ops.elementwise import gelu, relu, sigmoid, silu, tanh
from ..ops.losses import cross_entropy, mse_loss, nll_loss
from ..ops.normalization import layer_norm, rms_norm
from ..ops.reductions import log_softmax, softmax

__all__ = [
    "causal_mask",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "mse_loss",
    "nll_loss",
    "relu",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
    "tanh",
]
