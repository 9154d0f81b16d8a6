"""What the fused ops (``dense``, ``losses``, ``normalization``) share: argument checks and raw-array helpers.

A fused op's forward and its fast backward run on raw arrays and make their own
temporaries; :func:`into` lets them write the next step into such a temporary
instead of allocating again (on backends whose functions take ``out=``).
"""

from __future__ import annotations

from typing import Optional

from ..tensor import Tensor

REDUCTIONS = ("none", "mean", "sum")


def into(B, fn: str, a, *args):
    """``B.fn(a, *args)``, written into ``a`` when ``a`` is a temporary the caller owns and the backend
    can (``a`` must then have the result's shape and dtype), else a new array."""
    if B.supports_out and B.owns_writable(a):
        return getattr(B, fn)(a, *args, out=a)
    return getattr(B, fn)(a, *args)


def require_floating(x: Tensor, op: str, what: str) -> None:
    """Refuse non-float tensors where a fused op computes in the input's float dtype."""
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: {what} must be floating point, got {x.dtype!r}; convert it with .float() first.")


def same_dtype(x: Tensor, other: Optional[Tensor], op: str, what: str) -> None:
    """Parameters must have the input's dtype (as in PyTorch): no silent upcast of float32 activations."""
    if other is not None and other.dtype is not x.dtype:
        raise TypeError(
            f"{op}: {what} is {other.dtype!r} but the input is {x.dtype!r}; convert one of them with .to(dtype)."
        )


def reduction_arg(reduction: str, op: str) -> str:
    """A loss's ``reduction``, checked."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}.")
    return reduction
