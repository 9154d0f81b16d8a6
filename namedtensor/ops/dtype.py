"""Changing a tensor's dtype or device, and copying it: ``to``, ``float``/``double``/``half``/``long``/
``int``/``bool``, ``type_as``, ``cpu``, ``clone``, ``contiguous``.

Name rule: all keep the input's names.  A cast between floating dtypes is
differentiable (the gradient is cast back to the input's dtype); a cast to an
integer or bool dtype has no gradient.  Converting to the dtype (and device) a
tensor already has returns the tensor itself, as in PyTorch.
"""

from __future__ import annotations

from typing import Optional

from .. import _dtypes, backends
from ..autograd.graph import Op, apply
from ..tensor import Tensor


class _Cast(Op):
    name = "to"

    @staticmethod
    def forward(B, x, dtype, src):
        return B.astype(x, B.native(dtype))

    @staticmethod
    def backward(node, g):
        p = node.params
        return (apply(_Cast, (g,), node.in_names[0], dtype=p["src"], src=p["dtype"]),)


class _CastNoGrad(_Cast):
    differentiable = False


def _is_device(s: str) -> bool:
    d = s.strip().lower()
    return d == "cpu" or d.startswith("cuda")


def _target(x, op: str):
    """Split ``to``'s positional argument into (device or None, dtype or None)."""
    if isinstance(x, Tensor):
        return x.device, x.dtype
    if isinstance(x, str) and _is_device(x):
        return x, None
    try:
        return None, _dtypes.as_dtype(x)
    except TypeError:
        raise TypeError(
            f"{op}: {x!r} is neither a dtype ({', '.join(d.name for d in _dtypes.ALL)}) nor a device "
            "('cpu', 'cuda', 'cuda:N')."
        ) from None


def to(t: Tensor, target=None, dtype=None, *, device=None, copy: bool = False) -> Tensor:
    """Convert to a dtype and/or device: ``t.to(nt.float64)``, ``t.to("float64")``, ``t.to(np.float64)``,
    ``t.to("cpu")``, ``t.to("cpu", nt.float16)``, ``t.to(other)`` (other's dtype and device).

    Returns ``t`` itself when nothing changes (unless ``copy=True``); keeps names.
    """
    if target is not None:
        dev, dt = _target(target, "to")
        if dev is not None:
            if device is not None:
                raise TypeError(f"to: the device is given twice ({target!r} and device={device!r}).")
            device = dev
        if dt is not None:
            if dtype is not None:
                raise TypeError(f"to: the dtype is given twice ({target!r} and dtype={dtype!r}).")
            dtype = dt
    if device is not None:
        B = backends.get(device)  # raises a clear error for devices that are not available
        if B.device != t.device:  # only CPU backends exist so far
            raise NotImplementedError(f"to: moving a tensor from {t.device!r} to {B.device!r} is not supported yet.")
    if dtype is None:
        return clone(t) if copy else t
    dtype = _dtypes.as_dtype(dtype)
    src = t.dtype
    if dtype is src:
        return clone(t) if copy else t
    op = _Cast if dtype.kind == "f" and src.kind == "f" else _CastNoGrad
    return apply(op, (t,), t._names, dtype=dtype, src=src)


def _caster(name: str, dtype: _dtypes.DType):
    def fn(t: Tensor) -> Tensor:
        return to(t, dtype)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``t.to({dtype!r})``; keeps names."
    return fn


# methods only: module-level names would shadow the builtins
_CASTERS = {name: _caster(name, dt) for name, dt in (
    ("float", _dtypes.float32), ("double", _dtypes.float64), ("half", _dtypes.float16),
    ("long", _dtypes.int64), ("int", _dtypes.int32), ("bool", _dtypes.bool_))}


def type_as(t: Tensor, other: Tensor) -> Tensor:
    """``t`` converted to ``other``'s dtype; keeps ``t``'s names."""
    if not isinstance(other, Tensor):
        raise TypeError(f"type_as: expected a Tensor, got {type(other).__name__}.")
    return to(t, other.dtype)


def cpu(t: Tensor) -> Tensor:
    """``t.to("cpu")``: the tensor itself when it already is on the CPU."""
    return to(t, device="cpu")


class _Clone(Op):
    name = "clone"

    @staticmethod
    def forward(B, x):
        return B.asarray(x, copy=True)

    @staticmethod
    def backward(node, g):
        return (g,)


def clone(t: Tensor) -> Tensor:
    """A copy of the data (not a view: in-place edits of one do not show in the other); keeps names."""
    return apply(_Clone, (t,), t._names)


def contiguous(t: Tensor, memory_format: Optional[object] = None) -> Tensor:
    """The tensor itself: namedtensor does not expose memory layout (PyTorch compatibility)."""
    return t


METHODS = {
    "to": to, **_CASTERS, "type_as": type_as, "cpu": cpu, "clone": clone, "contiguous": contiguous,
}
