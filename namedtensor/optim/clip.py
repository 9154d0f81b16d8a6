"""Gradient clipping: ``clip_grad_norm_`` (rescale all gradients so their joint norm is at most a bound)
and ``clip_grad_value_`` (clamp every gradient element), as in ``torch.nn.utils``.

The gradients keep their names.  Each clipped ``.grad`` is replaced by a new tensor rather than written
in place: after backward one gradient buffer may be shared by several parameters (``x + y`` hands both
the same gradient) or be a read-only broadcast, so an in-place write could scale a gradient twice.
"""

from __future__ import annotations

import functools
import math
from typing import Iterable, List, Union

from .. import _dtypes, backends
from .._internal import backend_of, wrap
from ..autograd.mode import outside_ops, work_done, work_started
from ..tensor import Tensor

Tensors = Union[Tensor, Iterable[Tensor]]


def _tensors(parameters: Tensors, op: str) -> List[Tensor]:
    """The parameters given, as a list (read once: a generator such as ``model.parameters()``)."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}: parameters must be tensors, got a {type(p).__name__}.")
    return params


def _norm(g: Tensor, norm_type: float) -> float:
    """The ``norm_type``-norm of one gradient, as a Python float."""
    if g.numel() == 0:
        return 0.0
    B = backend_of(g)
    a = B.reshape(g.array, (-1,))
    if norm_type == math.inf:
        return float(B.item(B.max(B.abs(a))))
    if norm_type == 2.0 and g.dtype in (_dtypes.float32, _dtypes.float64):
        return math.sqrt(float(B.item(B.matmul(a, a))))  # one BLAS dot: no temporary
    if norm_type == 1.0:
        return float(B.item(B.sum(B.abs(a))))
    return float(B.item(B.sum(B.pow(B.abs(a), norm_type)))) ** (1.0 / norm_type)


def clip_grad_norm_(parameters: Tensors, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> Tensor:
    """Scale the gradients of ``parameters`` so that their total ``norm_type``-norm (the norm of the
    per-gradient norms) is at most ``max_norm``; returns the total norm before clipping, a 0-dim tensor.

    As in PyTorch the scale is ``min(1, max_norm / (total + 1e-6))``.  A non-finite total raises with
    ``error_if_nonfinite=True``; otherwise the gradients are scaled by it (giving zeros or NaNs).
    """
    op = "clip_grad_norm_"
    given = _tensors(parameters, op)
    norm_type = float(norm_type)
    if not (norm_type > 0):
        raise ValueError(f"{op}: norm_type must be a positive number or inf, got {norm_type}.")
    max_norm = float(max_norm)
    if not (max_norm >= 0):
        raise ValueError(f"{op}: max_norm must be >= 0, got {max_norm}.")
    # nt.compile makes the clipping a step of its graph, run at every call on that call's gradients
    trainable = [p for p in given if p.requires_grad]
    replay = functools.partial(clip_grad_norm_, given, max_norm, norm_type, error_if_nonfinite)
    traced = outside_ops(op, "scales the gradients", replay=replay,
                         result=trainable[0].dtype if trainable else _dtypes.float32)
    if traced is not False:
        return traced
    params = [p for p in given if p.grad is not None]
    if not params:
        B = backends.cpu()
        return wrap(B.asarray(0.0, dtype=_dtypes.float32), (), B)
    start = work_started()
    norms = [_norm(p.grad, norm_type) for p in params]
    if norm_type == math.inf:
        total = max(norms)
    else:
        total = math.fsum(n ** norm_type for n in norms) ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(
            f"{op}: the total norm of order {norm_type} of the gradients is non-finite ({total}), so it cannot "
            "be clipped. To scale the gradients by the non-finite norm anyway, set error_if_nonfinite=False."
        )
    coef = max_norm / (total + 1e-6)
    scaled = not coef >= 1.0  # a NaN total scales by NaN, as in PyTorch
    if scaled:
        for p in params:
            g = p.grad
            B = backend_of(g)
            p.grad = wrap(B.multiply(g.array, coef), g.names, B)
    g = params[0].grad
    B = backend_of(g)
    if start is not None:  # the norms read each gradient once; scaling reads it again and writes a new one
        work_done(op, start, (3 if scaled else 1) * sum(p.grad.array.nbytes for p in params), B)
    return wrap(B.asarray(total, dtype=g.dtype), (), B)


def clip_grad_value_(parameters: Tensors, clip_value: float) -> None:
    """Clamp every gradient element of ``parameters`` to ``[-clip_value, clip_value]``."""
    op = "clip_grad_value_"
    given = _tensors(parameters, op)
    clip_value = float(clip_value)
    if not (clip_value >= 0):
        raise ValueError(f"{op}: clip_value must be >= 0, got {clip_value}.")
    if outside_ops(op, "clamps the gradients", replay=functools.partial(clip_grad_value_, given, clip_value)):
        return
    start = work_started()
    clamped = []
    for p in given:
        if p.grad is None:
            continue
        g = p.grad
        B = backend_of(g)
        p.grad = wrap(B.clip(g.array, -clip_value, clip_value), g.names, B)
        clamped.append(p.grad)
    if start is not None:
        work_done(op, start, 2 * sum(g.array.nbytes for g in clamped), backend_of(clamped[0]) if clamped else None)
