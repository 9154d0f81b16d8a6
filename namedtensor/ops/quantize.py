"""Quantized tensors with names: ``quantize_per_tensor``, ``quantize_per_channel``, :class:`QuantizedTensor`,
``dequantize``, and the fake quantization that quantization-aware training trains through.

Name rule: a quantized tensor keeps the names of the float tensor it quantizes, and so does its
``int_repr()`` and ``dequantize()``.  Per-channel scales and zero points are 1-D tensors along the
channel dim, which is given by name (``dim="out"``; an int as PyTorch's ``axis``): their one dim is
named like it, or unnamed (:func:`namedtensor._names.quant_channel`), and they broadcast along it
wherever it sits.

Numbers, as ONNX's QuantizeLinear and DequantizeLinear and PyTorch compute them: ``q = clamp(round(x /
scale) + zero_point, qmin, qmax)`` with ties rounded to even, stored as int8 (``nt.qint8``, -128 to
127) or uint8 (``nt.quint8``, 0 to 255); ``dequantize(q) = (q - zero_point) * scale`` in float32.
``fake_quantize_per_tensor_affine``/``..._per_channel_affine`` give ``dequantize(quantize(x))`` in x's
dtype, with PyTorch's straight-through gradient: ``g`` where ``round(x / scale) + zero_point`` lies in
``[quant_min, quant_max]``, 0 elsewhere (none for the scales and zero points).
"""

from __future__ import annotations

import math
from typing import Any, Hashable, NamedTuple, Optional, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import tensor_arg
from ._fused import require_floating
from .dense import _Linear

__all__ = ["QDType", "qint8", "quint8", "QuantizedTensor", "quantize_per_tensor", "quantize_per_channel",
           "fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine", "quantized_linear"]


class QDType(NamedTuple):
    """A quantized dtype: its name, the storage dtype and the range of the stored integers."""

    name: str
    storage: _dtypes.DType
    qmin: int
    qmax: int

    def __repr__(self) -> str:
        return f"nt.{self.name}"

    # one object per quantized dtype, as the dtypes are: copies of a model keep comparing by identity
    def __copy__(self) -> "QDType":
        return self

    def __deepcopy__(self, memo: dict) -> "QDType":
        return self

    def __reduce__(self) -> str:
        return self.name


qint8 = QDType("qint8", _dtypes.int8, -128, 127)
quint8 = QDType("quint8", _dtypes.uint8, 0, 255)


def as_qdtype(dtype: Any, op: str) -> QDType:
    """``nt.qint8``/``nt.quint8``, or the storage dtypes ``nt.int8``/``nt.uint8`` and those names."""
    for q in (qint8, quint8):
        if dtype is q or dtype == q.name or dtype is q.storage or dtype == q.storage.name:
            return q
    raise TypeError(f"{op}: dtype must be nt.qint8 or nt.quint8 (int8 or uint8 storage), got {dtype!r}.")


# ----------------------------------------------------------------------------- the ops


def _along(B, p, axis: Optional[int], ndim: int):
    """A scale or zero point laid out to broadcast against the input: a number per tensor, or a 1-D array
    along ``axis``."""
    if axis is None:
        return p
    return B.reshape(p, tuple(-1 if d == axis else 1 for d in range(ndim)))


def _quantized(B, x, scale, zero_point, axis):
    """``round(x / scale) + zero_point``, unclamped, in x's float dtype."""
    s, z = _along(B, scale, axis, x.ndim), _along(B, zero_point, axis, x.ndim)
    return B.add(B.round(B.divide(x, s)), z)


class _Quantize(Op):
    name = "quantize"
    differentiable = False

    @staticmethod
    def forward(B, x, scale, zero_point, *, axis, qmin, qmax, storage):
        q = B.clip(_quantized(B, x, scale, zero_point, axis), qmin, qmax)
        return B.astype(q, B.native(storage))


class _Dequantize(Op):
    name = "dequantize"
    differentiable = False

    @staticmethod
    def forward(B, q, scale, zero_point, *, axis):
        f32 = B.native(_dtypes.float32)
        s, z = _along(B, scale, axis, q.ndim), _along(B, zero_point, axis, q.ndim)
        return B.astype(B.multiply(B.subtract(B.astype(q, f32), z), s), f32)


class _FakeQuantize(Op):
    name = "fake_quantize"
    stashes = True

    @staticmethod
    def forward(B, x, scale, zero_point, *, axis, qmin, qmax):
        q = _quantized(B, x, scale, zero_point, axis)
        inside = B.logical_and(B.greater_equal(q, qmin), B.less_equal(q, qmax))
        s, z = _along(B, scale, axis, x.ndim), _along(B, zero_point, axis, x.ndim)
        y = B.multiply(B.subtract(B.clip(q, qmin, qmax), z), s)
        return B.astype(y, x.dtype), inside

    @staticmethod
    def backward(node, g):
        # straight through where the value was representable, as PyTorch's fake quantization
        mask = Tensor._make(node.stash, node.in_names[0], node.B)
        return (g * mask, None, None)


# ----------------------------------------------------------------------------- quantized tensors


class QuantizedTensor:
    """Integers with a scale and a zero point per tensor or per channel (by name): what
    :func:`quantize_per_tensor` and :func:`quantize_per_channel` return.  ``dequantize()`` gives the float
    tensor back; ``int_repr()`` the stored integers (int8 or uint8); both keep the names."""

    __slots__ = ("_q", "_scale", "_zero_point", "_dim", "_dtype")

    def __init__(self, q: Tensor, scale: Union[float, Tensor], zero_point: Union[int, Tensor],
                 dim: Optional[int], dtype: QDType) -> None:
        self._q, self._scale, self._zero_point, self._dim, self._dtype = q, scale, zero_point, dim, dtype

    # ---- what it is

    @property
    def names(self) -> Tuple[Optional[str], ...]:
        return self._q.names

    @property
    def shape(self) -> tuple:
        return self._q.shape

    @property
    def ndim(self) -> int:
        return self._q.ndim

    @property
    def dtype(self) -> QDType:
        return self._dtype

    @property
    def device(self) -> str:
        return self._q.device

    @property
    def is_quantized(self) -> bool:
        return True

    def qscheme(self) -> str:
        """``"per_tensor_affine"`` or ``"per_channel_affine"`` (PyTorch's ``torch.per_..._affine``)."""
        return "per_tensor_affine" if self._dim is None else "per_channel_affine"

    def int_repr(self) -> Tensor:
        """The stored integers, int8 or uint8, with the names."""
        return self._q

    def q_scale(self) -> float:
        self._per_tensor("q_scale")
        return self._scale

    def q_zero_point(self) -> int:
        self._per_tensor("q_zero_point")
        return self._zero_point

    def q_per_channel_scales(self) -> Tensor:
        self._per_channel("q_per_channel_scales")
        return self._scale

    def q_per_channel_zero_points(self) -> Tensor:
        self._per_channel("q_per_channel_zero_points")
        return self._zero_point

    def q_per_channel_axis(self) -> int:
        self._per_channel("q_per_channel_axis")
        return self._dim

    def q_per_channel_dim(self) -> Hashable:
        """The channel dim's name (its position where unnamed)."""
        self._per_channel("q_per_channel_dim")
        name = self._q.names[self._dim]
        return self._dim if name is None else name

    def _per_tensor(self, what: str) -> None:
        if self._dim is not None:
            raise RuntimeError(f"{what}: the tensor is quantized per channel (along {self.q_per_channel_dim()!r}); "
                               "use q_per_channel_scales() and q_per_channel_zero_points().")

    def _per_channel(self, what: str) -> None:
        if self._dim is None:
            raise RuntimeError(f"{what}: the tensor is quantized per tensor; use q_scale() and q_zero_point().")

    # ---- back to floats

    def dequantize(self) -> Tensor:
        """``(q - zero_point) * scale``, float32, with the names."""
        scale, zero = self._params()
        return apply(_Dequantize, (self._q, scale, zero), self._q.names, axis=self._dim)

    def _params(self) -> tuple:
        if self._dim is None:
            return self._scale, self._zero_point
        return self._scale.to(_dtypes.float32), self._zero_point.to(_dtypes.float32)

    def __repr__(self) -> str:
        from ..backends.formatting import format_values

        t = self.dequantize()
        body = "..." if self.device == "meta" else format_values(t._B.to_numpy(t.array), indent=len("tensor("))
        parts = [f"tensor({body}", f"names={_names.fmt(self.names)}", f"shape={self.shape}", f"dtype={self._dtype!r}"]
        if self.device != "cpu":
            parts.append(f"device={self.device!r}")
        parts.append(f"quantization_scheme={self.qscheme()}")
        if self._dim is None:
            parts += [f"scale={self._scale!r}", f"zero_point={self._zero_point!r}"]
        else:
            parts += [f"dim={self.q_per_channel_dim()!r}", f"scales={self._scale.tolist()!r}",
                      f"zero_points={self._zero_point.tolist()!r}"]
        return ", ".join(parts) + ")"


def _checked(input: Tensor, op: str) -> Tensor:
    tensor_arg(input, op, "the input")
    require_floating(input, op, "the input")
    return input


def quantize_per_tensor(input: Tensor, scale: float, zero_point: int, dtype: Any) -> QuantizedTensor:
    """``input`` quantized with one ``scale`` and ``zero_point`` (``dtype`` ``nt.qint8`` or ``nt.quint8``):
    PyTorch's ``torch.quantize_per_tensor``; keeps the names."""
    op = "quantize_per_tensor"
    _checked(input, op)
    q = as_qdtype(dtype, op)
    scale, zero_point = _number(scale, float, op, "scale"), _number(zero_point, int, op, "zero_point")
    if not scale > 0:
        raise ValueError(f"{op}: scale must be positive, got {scale}.")
    if not q.qmin <= zero_point <= q.qmax:
        raise ValueError(f"{op}: zero_point {zero_point} is outside {q!r}'s range [{q.qmin}, {q.qmax}].")
    stored = apply(_Quantize, (input, scale, zero_point), input._names, axis=None, qmin=q.qmin, qmax=q.qmax,
                   storage=q.storage)
    return QuantizedTensor(stored, scale, zero_point, None, q)


def quantize_per_channel(input: Tensor, scales: Tensor, zero_points: Tensor, axis: Hashable = None, dtype: Any = None,
                         *, dim: Hashable = None) -> QuantizedTensor:
    """``input`` quantized with one scale and zero point per entry of the channel dim ``dim`` (a name; or
    PyTorch's ``axis``, an int): PyTorch's ``torch.quantize_per_channel(input, scales, zero_points, axis,
    dtype)``.  ``scales`` (float) and ``zero_points`` (integers) are 1-D along that dim, named like it or
    unnamed; the result keeps the input's names."""
    op = "quantize_per_channel"
    _checked(input, op)
    if (axis is None) == (dim is None):
        raise TypeError(f"{op}: give the channel dim once, as dim= (a name) or axis (an int), e.g. "
                        f"{op}(w, scales, zero_points, dim='out', dtype=nt.qint8).")
    q = as_qdtype(dtype, op)
    for p, what in ((scales, "scales"), (zero_points, "zero_points")):
        tensor_arg(p, op, what)
    ch = _names.quant_channel(input._names, dim if dim is not None else axis, (scales._names, zero_points._names), op)
    n = input.shape[ch]
    if scales.shape != (n,) or zero_points.shape != (n,):
        raise ValueError(f"{op}: the scales {scales.shape} and zero points {zero_points.shape} must have one entry per "
                         f"channel of {_names._dim_label(input._names, ch)} ({n}).")
    if zero_points.dtype.kind not in "iu":
        raise TypeError(f"{op}: zero_points must be integers, got {zero_points.dtype!r}.")
    if not bool((scales > 0).all()):
        raise ValueError(f"{op}: every scale must be positive.")
    if not bool(((zero_points >= q.qmin) & (zero_points <= q.qmax)).all()):
        raise ValueError(f"{op}: zero points outside {q!r}'s range [{q.qmin}, {q.qmax}].")
    names = (input._names[ch],)
    scales = scales.detach().to(_dtypes.float64).rename(*names)
    zero_points = zero_points.detach().to(_dtypes.int64).rename(*names)
    f = input.dtype
    stored = apply(_Quantize, (input, scales.to(f), zero_points.to(f)), input._names, axis=ch, qmin=q.qmin,
                   qmax=q.qmax, storage=q.storage)
    return QuantizedTensor(stored, scales, zero_points, ch, q)


def _number(v: Any, kind: type, op: str, what: str):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ValueError(f"{op}: {what} must be one number, got a tensor of shape {v.shape}.")
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and v != int(v)):
        raise TypeError(f"{op}: {what} must be {'an integer' if kind is int else 'a number'}, got {v!r}.")
    return kind(v)


# ----------------------------------------------------------------------------- the quantized linear layer

#: the largest contracted size whose int8 x uint8 products add up exactly in float32 (24-bit significand)
_EXACT_F32 = (1 << 24) // (255 * 128)


class _QuantizedLinear(Op):
    """``y = x W^T + b`` with x quantized to uint8 (``x_scale`` None: per call, from x's range, as ONNX's
    DynamicQuantizeLinear does) and W stored as int8: the integer products of ``(x_q - x_zp)`` and ``(w_q -
    w_zp)`` summed exactly (in float32 while they fit its significand, float64 beyond), then scaled by
    ``x_scale * w_scale`` (per output channel where W is quantized per channel)."""

    name = "quantized_linear"
    differentiable = False

    @staticmethod
    def forward(B, x, w_q, w_scale, w_zero, b=None, *, ax, x_scale, x_zero):
        f32 = B.native(_dtypes.float32)
        x = B.astype(x, f32)
        if x_scale is None:  # the range of this input, widened to hold 0 (arrays: a dry run traces them too)
            zero = B.zeros((), dtype=f32)
            lo = B.minimum(B.min(x, axis=None), zero) if math.prod(x.shape) else zero
            hi = B.maximum(B.max(x, axis=None), zero) if math.prod(x.shape) else zero
            span = B.divide(B.subtract(hi, lo), f32.type(255.0))
            x_scale = B.where(B.equal(span, zero), B.ones((), dtype=f32), span)
            x_zero = B.clip(B.round(B.divide(B.negative(lo), x_scale)), 0, 255)
        else:
            x_scale, x_zero = f32.type(x_scale), f32.type(x_zero)
        xq = B.clip(B.add(B.round(B.divide(x, x_scale)), x_zero), 0, 255)
        work = f32 if x.shape[ax] <= _EXACT_F32 else B.native(_dtypes.float64)
        per_channel = hasattr(w_scale, "shape")
        zero = B.reshape(B.astype(w_zero, work), (-1, 1)) if per_channel else work.type(w_zero)
        # the integers, centred, multiplied as the float layer multiplies (its layouts, its products)
        acc = _Linear.forward(B, B.astype(B.subtract(xq, x_zero), work), B.subtract(B.astype(w_q, work), zero),
                              ax=ax, t=False)
        scale = B.multiply(B.astype(w_scale, work) if per_channel else work.type(w_scale), B.astype(x_scale, work))
        y = B.astype(B.multiply(acc, _along(B, scale, ax if per_channel else None, len(x.shape))), f32)
        return y if b is None else B.add(y, _along(B, B.astype(b, f32), ax, len(x.shape)))


def quantized_linear(input: Tensor, weight: QuantizedTensor, bias: Optional[Tensor] = None, *, dim: Hashable = None,
                     out_dim: Optional[str] = None, scale: Optional[float] = None,
                     zero_point: Optional[int] = None) -> Tensor:
    """``linear(input, weight.dequantize(), bias, dim=, out_dim=)`` computed as int8 arithmetic: the input
    quantized to uint8 with ``scale`` and ``zero_point`` (static quantization), or, without them, with
    the scale and zero point of its own range at each call (dynamic quantization); ``weight`` is a
    :class:`QuantizedTensor` of int8 ``(out, in)``, per tensor or per channel of its ``out`` dim.  The
    names are :func:`linear`'s.  Not differentiable (quantized models run inference; training runs
    through fake quantization)."""
    op = "quantized_linear"
    tensor_arg(input, op, "the input")
    require_floating(input, op, "the input")
    if not isinstance(weight, QuantizedTensor) or weight.dtype is not qint8 or weight.ndim != 2:
        raise TypeError(f"{op}: the weight must be a 2-D QuantizedTensor of nt.qint8 (out, in), got "
                        f"{type(weight).__name__}.")
    if weight._dim not in (None, 0):
        raise ValueError(f"{op}: a weight quantized per channel must be so along its out dim (its first), not "
                         f"{weight.q_per_channel_dim()!r}.")
    if (scale is None) != (zero_point is None):
        raise TypeError(f"{op}: give the input's scale and zero_point together (static), or neither (dynamic).")
    if scale is not None:
        scale, zero_point = _number(scale, float, op, "scale"), _number(zero_point, int, op, "zero_point")
        if not scale > 0 or not 0 <= zero_point <= 255:
            raise ValueError(f"{op}: the input's scale must be positive and its zero_point in [0, 255] (uint8), got "
                             f"{scale} and {zero_point}.")
    q = weight.int_repr()
    ax, names = _names.linear(input._names, q._names, None if bias is None else bias._names, dim, out_dim, op)
    if input.shape[ax] != q.shape[1]:
        raise ValueError(f"{op}: the input's {_names._dim_label(input._names, ax)} has size {input.shape[ax]}, but "
                         f"the weight {q.shape} expects {q.shape[1]}.")
    w_scale, w_zero = weight._params()
    inputs = (input, q, w_scale, w_zero) + (() if bias is None else (bias,))
    return apply(_QuantizedLinear, inputs, names, ax=ax, x_scale=scale, x_zero=zero_point)


# ----------------------------------------------------------------------------- fake quantization


def fake_quantize_per_tensor_affine(input: Tensor, scale: float, zero_point: int, quant_min: int,
                                    quant_max: int) -> Tensor:
    """``dequantize(quantize(input))`` in input's dtype, clamped to ``[quant_min, quant_max]``, with the
    straight-through gradient: PyTorch's ``torch.fake_quantize_per_tensor_affine``."""
    op = "fake_quantize_per_tensor_affine"
    _checked(input, op)
    scale, zero_point = _number(scale, float, op, "scale"), _number(zero_point, int, op, "zero_point")
    qmin, qmax = _range(quant_min, quant_max, zero_point, op)
    if not scale > 0:
        raise ValueError(f"{op}: scale must be positive, got {scale}.")
    return apply(_FakeQuantize, (input, scale, zero_point), input._names, axis=None, qmin=qmin, qmax=qmax)


def fake_quantize_per_channel_affine(input: Tensor, scale: Tensor, zero_point: Tensor, axis: Hashable = None,
                                     quant_min: int = None, quant_max: int = None, *, dim: Hashable = None) -> Tensor:
    """Per channel of ``dim`` (a name; or PyTorch's ``axis``): PyTorch's
    ``torch.fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max)``."""
    op = "fake_quantize_per_channel_affine"
    _checked(input, op)
    if (axis is None) == (dim is None):
        raise TypeError(f"{op}: give the channel dim once, as dim= (a name) or axis (an int).")
    tensor_arg(scale, op, "scale")
    tensor_arg(zero_point, op, "zero_point")
    ch = _names.quant_channel(input._names, dim if dim is not None else axis, (scale._names, zero_point._names), op)
    qmin, qmax = _range(quant_min, quant_max, None, op)
    if scale.shape != (input.shape[ch],) or zero_point.shape != (input.shape[ch],):
        raise ValueError(f"{op}: scale {scale.shape} and zero_point {zero_point.shape} must have one entry per "
                         f"channel of {_names._dim_label(input._names, ch)} ({input.shape[ch]}).")
    f = input.dtype
    return apply(_FakeQuantize, (input, scale.detach().to(f), zero_point.detach().to(f)), input._names, axis=ch,
                 qmin=qmin, qmax=qmax)


def _range(quant_min: Any, quant_max: Any, zero_point: Optional[int], op: str) -> Tuple[int, int]:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (quant_min, quant_max)):
        raise TypeError(f"{op}: quant_min and quant_max must be integers, got {quant_min!r} and {quant_max!r}.")
    if not quant_min <= quant_max:
        raise ValueError(f"{op}: quant_min ({quant_min}) must not exceed quant_max ({quant_max}).")
    if zero_point is not None and not quant_min <= zero_point <= quant_max:
        raise ValueError(f"{op}: zero_point {zero_point} is outside [quant_min, quant_max] = [{quant_min}, {quant_max}].")
    return quant_min, quant_max
