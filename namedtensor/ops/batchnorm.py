"""Normalisation per channel: ``batch_norm`` and ``group_norm``.

Name rule: the output keeps the input's names.  The channel dim is ``dim=`` (by name, anywhere) or
PyTorch's dim 1 of ``(N, C, *)``; the weight, the bias and the running statistics have that one dim,
named like it or unnamed (:func:`~namedtensor._names.channel_norm`).  ``batch_norm`` takes its
statistics over every other dim; ``group_norm`` splits the channels into groups and takes them over
each group and every dim but the batch dims (``batch=``, default the first dim, PyTorch's N).

Both are compositions of differentiable ops (mean, subtraction, ``rsqrt``, reshapes), so their
gradients of any order, their meta-backend dry run and their CuPy version come from those ops; the
running statistics are updated in place outside the graph, as PyTorch does.
"""

from __future__ import annotations

import math
from typing import Hashable, Optional, Tuple

from .. import _names
from ..autograd.mode import no_grad
from ..tensor import Tensor
from ._common import tensor_arg, with_names
from ._fused import require_floating, same_dtype
from .shape import _reshape


def _check(op: str, x: Tensor, params: Tuple[Tuple[str, Optional[Tensor]], ...], dim: Hashable,
           batch: Hashable) -> Tuple[int, Tuple[int, ...]]:
    """The channel axis and the batch axes of ``x``, after checking the parameters ``(what, tensor)``."""
    tensor_arg(x, op, "the input")
    require_floating(x, op, "the input")
    for what, p in params:
        if p is not None:
            tensor_arg(p, op, what)
    ch, bx = _names.channel_norm(x._names, _names.hashable_dims(dim), _names.hashable_dims(batch),
                                 tuple(None if p is None else p._names for _, p in params), op)
    for what, p in params:
        if p is None:
            continue
        if p.shape != (x.shape[ch],):
            raise ValueError(f"{op}: {what} has shape {p.shape}, but the channel dim of the input (names "
                             f"{_names.fmt(x._names)}, shape {x.shape}) has size {x.shape[ch]}.")
        same_dtype(x, p, op, what)
    return ch, bx


def _channel(p: Tensor, x: Tensor, ch: int) -> Tensor:
    """The per-channel ``p`` laid out to broadcast against ``x`` at the channel axis ``ch``, named like it."""
    name = x._names[ch]
    trailing = x.ndim - ch - 1
    p = with_names(p, (name,))
    return _reshape(p, p.shape + (1,) * trailing, (name,) + _names.unnamed(trailing))


def _affine(y: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], ch: int) -> Tensor:
    """``y * weight + bias``, both per channel."""
    if weight is not None:
        y = y * _channel(weight, y, ch)
    if bias is not None:
        y = y + _channel(bias, y, ch)
    return y


def _update(stat: Tensor, batch: Tensor, momentum: float) -> None:
    """``stat = (1 - momentum) stat + momentum batch``, in place and outside the graph; ``batch`` (the
    batch's statistic, size 1 but at the channel) takes ``stat``'s names, so the buffer keeps its own."""
    with no_grad():
        new = _reshape(batch.detach(), stat.shape, stat._names)
        stat.copy_(stat * (1 - momentum) + new * momentum)


def batch_norm(input: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5, *, dim: Hashable = None) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` per channel; keeps the input's names.

    PyTorch's call: ``input`` is ``(N, C, *)`` and the channel dim is 1, whatever its name; the named
    call gives the channel dim with ``dim=`` (anywhere).  ``training``: the mean and the biased variance
    are the batch's, over every dim but the channel dim, and the running statistics (where given) move
    towards the batch's mean and unbiased variance by ``momentum``, in place.  Otherwise the running
    statistics normalise.  ``weight``, ``bias`` and the running statistics are ``(C,)``, named like the
    channel dim or unnamed:

        batch_norm(x, rm, rv, w, b, training=True)                # PyTorch: x (N, C, H, W)
        batch_norm(x, rm, rv, w, b, training=True, dim="chan")    # x (batch, h, w, chan)
    """
    op = "batch_norm"
    ch, _ = _check(op, input, (("running_mean", running_mean), ("running_var", running_var),
                               ("the weight", weight), ("the bias", bias)), dim, ())
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError(f"{op}: running_mean and running_var must be given when training=False (they "
                             "normalise); pass training=True to use the batch's statistics.")
        y = (input - _channel(running_mean, input, ch)) * (_channel(running_var, input, ch) + eps).rsqrt()
        return _affine(y, weight, bias, ch)
    reduced = tuple(a for a in range(input.ndim) if a != ch)
    n = math.prod(input.shape[a] for a in reduced)
    if n <= 1:
        raise ValueError(f"{op}: expected more than 1 value per channel when training, got an input of shape "
                         f"{input.shape} (names {_names.fmt(input._names)}).")
    mean = input.mean(reduced, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(reduced, keepdim=True)
    if running_mean is not None:
        _update(running_mean, mean, momentum)
    if running_var is not None:
        _update(running_var, var * (n / (n - 1)), momentum)
    return _affine(centered * (var + eps).rsqrt(), weight, bias, ch)


def group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5, *, dim: Hashable = None, batch: Hashable = None) -> Tensor:
    """The channels split into ``num_groups`` groups, each normalised per sample; keeps the input's names.

    PyTorch's call: ``input`` is ``(N, C, *)``, the channel dim is 1 and the sample dim 0.  The named
    call gives the channel dim with ``dim=`` and the dims that keep separate statistics with ``batch=``
    (a name or a tuple of names; default the first dim).  The mean and the biased variance are taken
    over each group's channels and every other dim; ``weight`` and ``bias`` are ``(C,)``, named like
    the channel dim or unnamed:

        group_norm(x, 4, w, b)                                   # PyTorch: x (N, C, H, W)
        group_norm(x, 4, w, b, dim="chan", batch="batch")        # x (batch, h, w, chan)
    """
    op = "group_norm"
    if not isinstance(num_groups, int) or isinstance(num_groups, bool) or num_groups < 1:
        raise TypeError(f"{op}: num_groups must be a positive int, got {num_groups!r}.")
    ch, bx = _check(op, input, (("the weight", weight), ("the bias", bias)), dim, batch)
    channels = input.shape[ch]
    if channels % num_groups:
        raise ValueError(f"{op}: the {channels} channels (input names {_names.fmt(input._names)}, shape "
                         f"{input.shape}) cannot be split into {num_groups} groups of equal size.")
    names = input._names
    # the channel dim split in place into (group, channel in group): a reshape, no copy when contiguous
    split = _reshape(input, input.shape[:ch] + (num_groups, channels // num_groups) + input.shape[ch + 1:],
                     _names.replace(names, ch, (None, None), op))
    kept = {ch} | {a if a < ch else a + 1 for a in bx}
    reduced = tuple(a for a in range(split.ndim) if a not in kept)
    centered = split - split.mean(reduced, keepdim=True)
    var = (centered * centered).mean(reduced, keepdim=True)
    y = _reshape(centered * (var + eps).rsqrt(), input.shape, names)
    return _affine(y, weight, bias, ch)
