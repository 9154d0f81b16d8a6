"""Raw-array update math shared by the optimizers (``namedtensor.optim``) and the backends' generic
``adamw_`` hook: no tensors, no names, only a backend ``B`` and its arrays.

``chunks`` cuts a large parameter, its grad and its state into cache-sized pieces; ``out_ops`` gives
the backend's elementwise functions taking ``out=`` (writing straight into a buffer, or through a copy
where the backend has none); ``adam_coefficients`` and ``adam_chunk`` are one Adam/AdamW step on such
pieces.  They live with the backends because fused kernels implement the same update: the CUDA
kernel (``cuda/adam.cu``) and its NumPy reference (``kernel_reference.adamw_``) follow these formulas.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Sequence, Tuple

#: elements per chunk: a chunk of every operand of an update (parameter, grad, state, a temporary) stays in
#: the core's cache through all the update's passes, so they cost arithmetic rather than memory traffic
CHUNK = 32768

_ELEMENTWISE = ("add", "subtract", "multiply", "divide", "negative", "sqrt", "maximum")


class _CopyingOut:
    """A backend's elementwise functions taking ``out=`` for a backend whose functions do not:
    the result is computed, then copied into ``out``."""

    def __init__(self, B) -> None:
        for name in _ELEMENTWISE:
            setattr(self, name, _copying(B, getattr(B, name)))


def _copying(B, fn):
    def call(*args, out=None):
        r = fn(*args)
        if out is None:
            return r
        B.setitem(out, Ellipsis, r)
        return out

    return call


_out_ops: Dict[Any, Any] = {}


def out_ops(B):
    """``B``'s elementwise functions, each taking ``out=`` (the backend itself where its functions do)."""
    if B.supports_out:
        return B
    ops = _out_ops.get(B)
    if ops is None:
        ops = _out_ops[B] = _CopyingOut(B)
    return ops


def chunks(B, x, grad, states: Sequence):
    """Matching pieces of a parameter's raw array ``x``, its gradient and its state arrays, with a
    scratch array the size of the piece for temporaries: one ``(x, grad, states, tmp)`` per piece.

    Where the backend takes ``out=``, large contiguous arrays are cut into flat chunks of ``CHUNK``
    elements (views: writes land in the buffers; the grad is only read, so it may be a copy);
    otherwise the whole arrays come as one piece.
    """
    shape = x.shape
    n = math.prod(shape)
    if n > CHUNK and B.supports_out:
        whole = (x, *states)
        flat = [B.reshape(a, (-1,)) for a in whole]
        if all(B.is_view_of(f, a) for f, a in zip(flat, whole)):  # else non-contiguous: no chunks
            g = B.reshape(grad, (-1,))
            tmp = B.empty((CHUNK,), dtype=x.dtype)
            get = B.getitem
            for start in range(0, n, CHUNK):
                k = slice(start, min(n, start + CHUNK))
                t = tmp if k.stop - start == CHUNK else get(tmp, slice(0, k.stop - start))
                yield get(flat[0], k), get(g, k), [get(f, k) for f in flat[1:]], t
            return
    yield x, grad, states, B.empty(shape, dtype=x.dtype)


def adam_coefficients(lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
                      decoupled: bool) -> Tuple[float, float, Any, Any]:
    """``(eps', step_size, decay, l2)`` for :func:`adam_chunk` at ``step``: PyTorch's update
    ``p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)`` rewritten as
    ``p -= step_size * m / (sqrt(v) + eps')`` (the same values up to rounding, in fewer passes);
    ``decay`` multiplies the parameter (AdamW) and ``l2`` adds ``l2 * p`` to the gradient (Adam), or None."""
    bc2_sqrt = (1 - beta2 ** step) ** 0.5
    decay = 1 - lr * weight_decay if decoupled and weight_decay != 0 else None
    l2 = weight_decay if not decoupled and weight_decay != 0 else None
    return eps * bc2_sqrt, lr / (1 - beta1 ** step) * bc2_sqrt, decay, l2


def adam_update(B, x, grad, m, v, v_max, beta1: float, beta2: float, eps: float, step_size: float, decay, l2,
                maximize: bool = False) -> None:
    """One Adam step in place on a parameter's raw arrays, chunk by chunk (:func:`chunks`,
    :func:`adam_chunk`): parameter ``x``, gradient ``grad`` (only read; negated with ``maximize``),
    moments ``m`` and ``v``, amsgrad's running max ``v_max`` (or None).  The optimizer's per-parameter
    path, the backends' generic ``adamw_`` and the fused kernel's fallback all run it."""
    F = out_ops(B)
    for xc, gc, s, tmp in chunks(B, x, grad, [m, v] + ([] if v_max is None else [v_max])):
        adam_chunk(F, xc, F.negative(gc) if maximize else gc, s[0], s[1], None if v_max is None else s[2], tmp,
                   beta1, beta2, eps, step_size, decay, l2)


def adam_chunk(F, x, g, m, v, v_max, tmp, beta1: float, beta2: float, eps: float, step_size: float,
               decay, l2) -> None:
    """One Adam step in place on raw arrays of one chunk: parameter ``x``, gradient ``g`` (only read),
    moments ``m`` and ``v``, amsgrad's running max ``v_max`` (or None), scratch ``tmp``; ``F``: the
    backend's ``out=`` functions; the coefficients from :func:`adam_coefficients`."""
    if decay is not None:
        F.multiply(x, decay, out=x)
    if l2 is not None:
        g = F.add(g, F.multiply(x, l2))
    F.multiply(v, beta2, out=v)
    F.multiply(g, g, out=tmp)
    F.multiply(tmp, 1 - beta2, out=tmp)
    F.add(v, tmp, out=v)
    F.multiply(m, beta1, out=m)
    F.multiply(g, 1 - beta1, out=tmp)
    F.add(m, tmp, out=m)
    if v_max is not None:
        v = F.maximum(v_max, v, out=v_max)
    F.sqrt(v, out=tmp)
    F.add(tmp, eps, out=tmp)
    F.divide(m, tmp, out=tmp)
    F.multiply(tmp, step_size, out=tmp)
    F.subtract(x, tmp, out=x)
