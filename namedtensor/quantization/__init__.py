"""``nt.quantization``: PyTorch's quantization workflows for models with named dims.

Quantized tensors themselves are top-level (``nt.quantize_per_tensor``, ``nt.quantize_per_channel``,
``nt.QuantizedTensor``, ``nt.qint8``, ``nt.quint8``; ops/quantize.py).  Here: observers, fake
quantization and QConfigs (observers.py), the quantized and staged linear layers (modules.py), and the
workflows (workflows.py): ``quantize_dynamic(model, {nn.Linear}, dtype=nt.qint8)``; ``prepare`` ->
calibrate -> ``convert``; ``prepare_qat`` -> train -> ``convert``.  Quantized layers run eagerly (int8
arithmetic, exact, on the float BLAS) and export to ONNX (``nt.onnx.export``), where ONNX Runtime runs
them with its int8 kernels.
"""

from ..ops.quantize import quantized_linear
from .modules import DynamicQuantizedLinear, ObservedLinear, QATLinear, QuantizedLinear, quantize_weight
from .observers import (FakeQuantize, MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver, QConfig,
                        default_dynamic_qconfig, default_per_channel_qat_qconfig, default_per_channel_qconfig,
                        default_qat_qconfig, default_qconfig, per_channel_dynamic_qconfig)
from .workflows import convert, prepare, prepare_qat, quantize_dynamic

__all__ = ["quantize_dynamic", "prepare", "prepare_qat", "convert", "QConfig", "MinMaxObserver",
           "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver", "FakeQuantize", "DynamicQuantizedLinear",
           "QuantizedLinear", "ObservedLinear", "QATLinear", "quantize_weight", "quantized_linear", "default_qconfig",
           "default_per_channel_qconfig", "default_dynamic_qconfig", "per_channel_dynamic_qconfig",
           "default_qat_qconfig", "default_per_channel_qat_qconfig"]
