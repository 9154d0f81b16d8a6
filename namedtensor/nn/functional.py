"""``namedtensor.nn.functional``: PyTorch's functional API, which also takes dims by name.

    import namedtensor.nn.functional as F
    h = F.gelu(F.linear(x, w1, b1))                           # PyTorch: acts on x's last dim
    h = F.gelu(F.linear(x, w1, b1, dim="embed"))              # (batch, seq, embed) -> (batch, seq, hidden)
    y = F.layer_norm(h, w.shape, w, b)                        # PyTorch: sizes of the last dims
    y = F.layer_norm(h, weight=w, bias=b, dim="hidden")       # named: the dims by name
    loss = F.cross_entropy(logits, tokens)                    # PyTorch: class dim 1, ignore_index=-100
    loss = F.cross_entropy(logits, tokens, dim="vocab", label_smoothing=0.1)

A call spelled as in PyTorch means what it means in PyTorch (same defaults, same edge cases) or
raises; the named forms add ``dim=`` (and, for attention, ``key_dim=``).  Sizes are sizes: where
PyTorch takes a shape (``normalized_shape``), an int or a tuple of ints is one, and dims by name
are given with ``dim=``.  Every function is an op of :mod:`namedtensor.ops` (its name rule is in
:mod:`namedtensor._names`; docs/design.md lists them by family); ``softmax`` and ``log_softmax``
are PyTorch's spellings of the ops, which require ``dim``.
"""

from __future__ import annotations

from typing import Any, Hashable

from ..ops import reductions
from ..ops.attention import causal_mask, scaled_dot_product_attention
from ..ops.batchnorm import batch_norm, group_norm
from ..ops.conv import conv, conv1d, conv2d, conv3d, conv_transpose, conv_transpose1d, conv_transpose2d, conv_transpose3d
from ..ops.pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, avg_pool1d,
                             avg_pool2d, avg_pool3d, max_pool1d, max_pool2d, max_pool3d)
from ..ops.dense import dropout, embedding, linear
from .._internal import flag
from ..ops import elementwise
from ..ops.elementwise import gelu, sigmoid, tanh
from ..ops.inplace import edit
from ..ops.losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from ..ops.normalization import layer_norm, rms_norm
from ..ops.statistics import cosine_similarity
from ..tensor import Tensor

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "causal_mask",
    "conv",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "group_norm",
    "huber_loss",
    "kl_div",
    "l1_loss",
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
    "smooth_l1_loss",
    "softmax",
    "tanh",
    "threshold",
]


def _along(op: str, input: Tensor, dim: Hashable, dtype: Any) -> Tensor:
    """The input cast to ``dtype`` (if given) for a softmax along ``dim``, which must be given."""
    if dim is None:
        raise TypeError(f"{op}: dim is required: PyTorch's choice of a dim when none is given is deprecated "
                        f"and depends on the input's rank; give it by name or int, e.g. F.{op}(x, dim=-1).")
    return input if dtype is None else input.to(dtype)


def softmax(input: Tensor, dim: Hashable = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """PyTorch's ``F.softmax``: ``exp(x) / sum(exp(x))`` along ``dim`` (a name or an int, required),
    computed in ``dtype`` when given; keeps the names."""
    return reductions.softmax(_along("softmax", input, dim, dtype), dim)


def log_softmax(input: Tensor, dim: Hashable = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """PyTorch's ``F.log_softmax``: ``log(softmax(x, dim))`` computed directly, ``dim`` required; keeps the names."""
    return reductions.log_softmax(_along("log_softmax", input, dim, dtype), dim)


def _activation(op: str, input: Tensor, inplace: bool, *args: Any) -> Tensor:
    """``op`` of ``input``; with PyTorch's ``inplace=True`` its result is written into ``input`` (recorded
    in the graph like any in-place op) and ``input`` is returned."""
    fn = getattr(elementwise, op)
    return edit(input, fn, op + "_", *args) if flag(inplace, "inplace", op) else fn(input, *args)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """PyTorch's ``F.relu``: ``max(x, 0)``; keeps the names."""
    return _activation("relu", input, inplace)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """PyTorch's ``F.silu``: ``x * sigmoid(x)``; keeps the names."""
    return _activation("silu", input, inplace)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """PyTorch's ``F.threshold``: ``x`` where ``x > threshold``, else ``value``; keeps the names."""
    return _activation("threshold", input, inplace, threshold, value)
