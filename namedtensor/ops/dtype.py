"""Changing a tensor's dtype or device, and copying it: ``to``, ``float``/``double``/``half``/``long``/
``int``/``short``/``char``/``byte``/``bool``/``cfloat``/``cdouble``, ``type_as``, ``cpu``, ``cuda``,
``clone``, ``contiguous``.

Name rule: all keep the input's names.  A cast between floating and complex
dtypes is differentiable (the gradient is cast back to the input's dtype; a real
input's is the real part of the complex one, as in PyTorch); a cast to an
integer or bool dtype has no gradient.  A move to another device is a copy and
differentiable: the gradient goes back to the source device.  Converting to the
dtype (and device) a tensor already has returns the tensor itself, as in PyTorch.
"""

from __future__ import annotations

import warnings
from typing import Optional

from .. import _dtypes, backends
from ..autograd import mode
from ..autograd.graph import Op, apply, record
from ..tensor import Tensor
from ._common import tensor_arg


class _Cast(Op):
    name = "to"
    complex_grad = True

    @staticmethod
    def forward(B, x, dtype, src):
        if src.kind == "c" and dtype.kind != "c":
            # PyTorch's meaning on every backend (array-api-strict refuses the cast): bool is z != 0, a
            # number the real part
            if dtype.kind == "b":
                return B.not_equal(x, 0)
            x = B.real(x)
        return B.astype(x, B.native(dtype))

    @staticmethod
    def backward(node, g):
        p = node.params
        if p["src"].kind != "c" and g.dtype.kind == "c":
            g = g.real  # real -> complex: the real input's gradient is the real part
            if g.dtype is p["src"]:
                return (g,)
        return (apply(_Cast, (g,), node.in_names[0], dtype=p["src"], src=g.dtype),)


class _CastNoGrad(_Cast):
    differentiable = False


def _is_device(s: str) -> bool:
    d = s.strip().lower()
    return d in ("cpu", "meta") or d.startswith("cuda")


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
            "('cpu', 'cuda', 'cuda:N', 'meta')."
        ) from None


class _ToDevice(Op):
    """A copy onto another backend's device; run by :func:`_move` (``apply`` keeps the input's backend)."""

    name = "to"
    complex_grad = True

    @staticmethod
    def backward(node, g):
        return (_move(g, backends.get(node.params["src"]), False),)


def _move(t: Tensor, B, non_blocking: bool) -> Tensor:
    """``t`` copied onto backend ``B`` (another device), recorded for autograd."""
    out = Tensor._make(backends.transfer(t.array, t._B, B, non_blocking), t._names, B)
    if B.device == "meta":  # a spec of t for a dry run (shapes only): a leaf of its own
        if t._rg:
            out.requires_grad_(True)  # before the tracer knows the spec: it refuses leaves it knows changing
        tracer = mode.current_tracer()
        if tracer is not None and hasattr(tracer, "alias_hook"):
            tracer.alias_hook(out, t)  # nt.compile's graph reads t itself where the dry run read its spec
        return out
    if t._rg and mode.is_grad_enabled():
        record(_ToDevice, (t,), (out,), {"src": t.device}, None, B)
    return out


def to(t: Tensor, target=None, dtype=None, *, device=None, copy: bool = False,
       non_blocking: bool = False) -> Tensor:
    """Convert to a dtype and/or device: ``t.to(nt.float64)``, ``t.to("float64")``, ``t.to(np.float64)``,
    ``t.to("cpu")``, ``t.to("cuda")``, ``t.to("cuda:1", nt.float16)``, ``t.to(other)`` (other's dtype and
    device).

    Returns ``t`` itself when nothing changes (unless ``copy=True``); keeps names.  A move to another
    device copies (and is differentiable); ``non_blocking=True`` queues a host-to-GPU copy without
    waiting for it (it overlaps other work when ``t`` is pinned: :func:`namedtensor.cuda.pin`).
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
    if dtype is not None:
        dtype = _dtypes.as_dtype(dtype)
    if device is not None:
        B = backends.get(device)  # raises a clear error for devices that are not available
        if B.device != t.device:
            # cast on the side where the data are smaller: fewer bytes cross the bus
            if dtype is not None and dtype.itemsize < t.dtype.itemsize:
                return _move(_cast(t, dtype, False), B, non_blocking)
            return _cast(_move(t, B, non_blocking), dtype, False)
    return _cast(t, dtype, copy)


def _cast(t: Tensor, dtype, copy: bool) -> Tensor:
    """``t`` in ``dtype`` (an nt dtype, or None: keep it); ``t`` itself when nothing changes unless ``copy``."""
    src = t.dtype
    if dtype is None or dtype is src:
        return clone(t) if copy else t
    if src.kind == "c" and dtype.kind not in "cb":
        warnings.warn(f"to: casting complex values to {dtype!r} discards the imaginary part (as in PyTorch and "
                      "NumPy); take t.real or t.abs() to say which real number is meant.", UserWarning, stacklevel=3)
    op = _Cast if dtype.kind in _dtypes.DIFFERENTIABLE and src.kind in _dtypes.DIFFERENTIABLE else _CastNoGrad
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
    ("long", _dtypes.int64), ("int", _dtypes.int32), ("short", _dtypes.int16), ("char", _dtypes.int8),
    ("byte", _dtypes.uint8), ("bool", _dtypes.bool_), ("cfloat", _dtypes.complex64),
    ("cdouble", _dtypes.complex128))}


def type_as(t: Tensor, other: Tensor) -> Tensor:
    """``t`` converted to ``other``'s dtype; keeps ``t``'s names."""
    return to(t, tensor_arg(other, "type_as").dtype)


def cpu(t: Tensor) -> Tensor:
    """``t.to("cpu")``: the tensor itself when it already is on the CPU."""
    return to(t, device="cpu")


def cuda(t: Tensor, device=None, non_blocking: bool = False) -> Tensor:
    """``t.to("cuda")`` (the current device), ``t.cuda(1)`` for ``"cuda:1"``; the tensor itself when it
    already is there."""
    if device is None:
        device = "cuda"
    elif isinstance(device, int) and not isinstance(device, bool):
        device = f"cuda:{device}"
    return to(t, device=device, non_blocking=non_blocking)


class _Clone(Op):
    name = "clone"
    complex_grad = True

    @staticmethod
    def forward(B, x):
        return B.asarray(x, copy=True)

    @staticmethod
    def backward(node, g):
        return (g,)


def to_device(t: Tensor, device: str, /, *, stream: Optional[object] = None) -> Tensor:
    """The Array API standard's ``x.to_device(device)``: ``t.to(device=device)`` (``stream``, for a
    CUDA stream to order the copy on, is not supported: the copy runs on the current stream)."""
    if stream is not None:
        raise NotImplementedError("to_device: stream= is not supported; the copy runs on the device's current "
                                  "stream (leave stream=None).")
    return to(t, device=device)


def clone(t: Tensor) -> Tensor:
    """A copy of the data (not a view: in-place edits of one do not show in the other); keeps names."""
    return apply(_Clone, (t,), t._names)


def contiguous(t: Tensor, memory_format: Optional[object] = None) -> Tensor:
    """The tensor itself: namedtensor does not expose memory layout (PyTorch compatibility)."""
    return t


METHODS = {
    "to": to, "to_device": to_device, **_CASTERS, "type_as": type_as, "cpu": cpu, "cuda": cuda, "clone": clone,
    "contiguous": contiguous,
}
