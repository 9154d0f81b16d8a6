"""The quantized linear layers, and the stages a float ``nn.Linear`` goes through on its way there.

* ``DynamicQuantizedLinear`` (``quantize_dynamic``): int8 weights, the input quantized to uint8 at each
  call from its own range.
* ``ObservedLinear`` (``prepare``): a ``Linear`` whose input passes an observer while calibration data
  runs; ``QATLinear`` (``prepare_qat``): a ``Linear`` that fake-quantizes its input and weight and
  trains through them (straight-through gradients).
* ``QuantizedLinear`` (``convert``): int8 weights and the input quantized with the scale and zero point
  that calibration or training chose.

Every quantized layer reads and writes the dims its ``Linear`` did (``in_dim``, ``out_dim``, by name);
its weight is stored as buffers (``weight_int``, int8 ``(out, in)`` with the weight's names,
``weight_scale`` and ``weight_zero_point``, 0-d or along ``out``), so its state dict saves and loads
as any other, and ``weight()`` gives it as a :class:`~namedtensor.QuantizedTensor` (PyTorch's spelling).
The output is float32, as the quantized layers of PyTorch's dynamic quantization give.
"""

from __future__ import annotations

from .. import _dtypes
from ..autograd.graph import no_grad
from ..nn import Linear, Module
from ..nn import functional as F
from ..ops.quantize import QuantizedTensor, qint8, quantize_per_channel, quantize_per_tensor, quantized_linear
from ..tensor import Tensor
from .observers import PerChannelMinMaxObserver, QConfig

__all__ = ["DynamicQuantizedLinear", "QuantizedLinear", "ObservedLinear", "QATLinear", "quantize_weight"]


def quantize_weight(weight: Tensor, observer: Module) -> QuantizedTensor:
    """``weight`` quantized to qint8 with the qparams ``observer`` (a weight observer, fresh) finds in it."""
    with no_grad():
        observer(weight.detach())
        scale, zero = observer.calculate_qparams()
        if isinstance(observer, PerChannelMinMaxObserver):
            where = {"axis": observer.dim} if isinstance(observer.dim, int) else {"dim": observer.dim}
            return quantize_per_channel(weight.detach(), scale, zero, dtype=qint8, **where)
        return quantize_per_tensor(weight.detach(), float(scale.item()), int(zero.item()), qint8)


class _QuantizedBase(Module):
    """The int8 weight as buffers, the bias, and the dims of the float layer."""

    def __init__(self, linear: Linear, weight: QuantizedTensor) -> None:
        super().__init__()
        if weight.dtype is not qint8:
            raise TypeError(f"{type(self).__name__}: weights are quantized to nt.qint8, got {weight.dtype!r}.")
        self.in_dim, self.out_dim = linear.in_dim, linear.out_dim
        self.in_size, self.out_size = linear.in_size, linear.out_size
        self.register_buffer("weight_int", weight.int_repr())
        scheme = weight.qscheme()
        per_channel = scheme == "per_channel_affine"
        self.register_buffer("weight_scale", weight.q_per_channel_scales() if per_channel
                             else weight.int_repr().new_tensor(weight.q_scale(), dtype=_dtypes.float64))
        self.register_buffer("weight_zero_point", weight.q_per_channel_zero_points() if per_channel
                             else weight.int_repr().new_tensor(weight.q_zero_point(), dtype=_dtypes.int64))
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())

    def weight(self) -> QuantizedTensor:
        """The int8 weight, with its scale and zero point (per tensor, or per channel along ``out``)."""
        if self.weight_scale.ndim:
            return QuantizedTensor(self.weight_int, self.weight_scale, self.weight_zero_point, 0, qint8)
        return QuantizedTensor(self.weight_int, float(self.weight_scale.item()), int(self.weight_zero_point.item()),
                               None, qint8)

    def extra_repr(self) -> str:
        reads = "the last dim" if self.in_dim is None else repr(self.in_dim)
        scheme = "per channel" if self.weight_scale.ndim else "per tensor"
        return (f"{reads} ({self.in_size}) -> {self.out_dim!r} ({self.out_size}), weights qint8 {scheme}, "
                f"bias={self.bias is not None}")


class DynamicQuantizedLinear(_QuantizedBase):
    """A ``Linear`` with int8 weights whose input is quantized to uint8 at each call, from its own range."""

    def forward(self, x: Tensor) -> Tensor:
        return quantized_linear(x, self.weight(), self.bias, dim=self.in_dim, out_dim=self.out_dim)


class QuantizedLinear(_QuantizedBase):
    """A ``Linear`` with int8 weights whose input is quantized to uint8 with the fixed ``scale`` and
    ``zero_point`` that calibration (or quantization-aware training) chose."""

    def __init__(self, linear: Linear, weight: QuantizedTensor, scale: float, zero_point: int) -> None:
        super().__init__(linear, weight)
        self.register_buffer("input_scale", self.weight_int.new_tensor(float(scale), dtype=_dtypes.float64))
        self.register_buffer("input_zero_point", self.weight_int.new_tensor(int(zero_point), dtype=_dtypes.int64))

    def forward(self, x: Tensor) -> Tensor:
        return quantized_linear(x, self.weight(), self.bias, dim=self.in_dim, out_dim=self.out_dim,
                                scale=float(self.input_scale.item()), zero_point=int(self.input_zero_point.item()))

    def extra_repr(self) -> str:
        return (super().extra_repr() + f", input scale={float(self.input_scale.item()):.6g}, "
                f"zero_point={int(self.input_zero_point.item())}")


def _linear_like(linear: Linear, new: Linear) -> Linear:
    """``new`` (made without weights) given ``linear``'s dims and parameters."""
    new.in_dim, new.out_dim, new.in_size, new.out_size = linear.in_dim, linear.out_dim, linear.in_size, linear.out_size
    new.weight = linear.weight
    new.bias = linear.bias
    return new


class ObservedLinear(Linear):
    """A ``Linear`` whose input passes the activation observer of its ``qconfig`` (``prepare``)."""

    def __init__(self, linear: Linear, qconfig: QConfig) -> None:
        Module.__init__(self)
        _linear_like(linear, self)
        self.qconfig = qconfig
        self.activation_post_process = qconfig.activation()

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(self.activation_post_process(x))


class QATLinear(Linear):
    """A ``Linear`` that fake-quantizes its input and its weight (``prepare_qat``): it trains with the
    rounding the quantized layer will have, the gradients passing straight through."""

    def __init__(self, linear: Linear, qconfig: QConfig) -> None:
        Module.__init__(self)
        _linear_like(linear, self)
        self.qconfig = qconfig
        self.activation_post_process = qconfig.activation()
        self.weight_fake_quant = qconfig.weight()

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(self.activation_post_process(x), self.weight_fake_quant(self.weight), self.bias,
                        dim=self.in_dim, out_dim=self.out_dim)

