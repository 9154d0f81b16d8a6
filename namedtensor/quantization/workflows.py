"""The quantization workflows, PyTorch's: dynamic (``quantize_dynamic``), post-training static
(``prepare``, calibrate, ``convert``) and quantization-aware training (``prepare_qat``, train,
``convert``).

Each walks the model and swaps layers by type: ``quantize_dynamic`` turns each ``nn.Linear`` into a
``DynamicQuantizedLinear``; ``prepare`` into an ``ObservedLinear`` and ``prepare_qat`` into a
``QATLinear`` (its ``qconfig``: the model's ``qconfig`` attribute or the argument, a
:class:`~namedtensor.quantization.QConfig`); ``convert`` turns those into ``QuantizedLinear`` layers
with the input's scale and zero point from their observers and int8 weights.  A submodule whose
``qconfig`` is None stays float.  The functions return a new model (a deep copy) unless
``inplace=True``; the model's other layers and its names are untouched.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterable, Optional, Type, Union

from ..nn import Linear, Module
from ..nn.module import compiled_target
from ..ops.quantize import as_qdtype, qint8
from .modules import DynamicQuantizedLinear, ObservedLinear, QATLinear, QuantizedLinear, quantize_weight
from .observers import FakeQuantize, QConfig, default_dynamic_qconfig, default_qat_qconfig, default_qconfig

__all__ = ["quantize_dynamic", "prepare", "prepare_qat", "convert"]

_UNSET = object()


def _swapped(model: Module, make, qconfig: Optional[QConfig], kinds: tuple) -> Module:
    """``model`` with each module of one of ``kinds`` (itself included) replaced by ``make(module, its
    qconfig)``; a module's own ``qconfig`` attribute applies to it and below (None: left float)."""
    config = getattr(model, "qconfig", _UNSET)
    config = qconfig if config is _UNSET else config
    if isinstance(model, kinds) and config is not None:
        return make(model, config)
    _swap(model, make, config, kinds)
    return model


def _swap(model: Module, make, qconfig: Optional[QConfig], kinds: tuple) -> None:
    for name, child in list(model.named_children()):
        # a compiled layer (``self.fc = nt.compile(Linear(...))``) is its layer: it becomes the new one
        child = compiled_target(child)
        config = getattr(child, "qconfig", _UNSET)
        config = qconfig if config is _UNSET else config
        if isinstance(child, kinds) and config is not None:
            setattr(model, name, make(child, config))
        else:
            _swap(child, make, config, kinds)


def _copy(model: Module, inplace: bool, op: str) -> Module:
    if not isinstance(model, Module):
        raise TypeError(f"{op}: expected an nn.Module, got {type(model).__name__}.")
    return model if inplace else copy.deepcopy(model)


def quantize_dynamic(model: Module, qconfig_spec: Union[Iterable[Type[Module]], Dict[Type[Module], QConfig], None] = None,
                     dtype: Any = qint8, mapping: Any = None, inplace: bool = False) -> Module:
    """``model`` with its ``nn.Linear`` layers (``qconfig_spec``: a set of layer types, or a dict of types to
    QConfigs; default ``{nn.Linear}``) as :class:`DynamicQuantizedLinear`: int8 weights (per tensor by
    default, per channel of ``out`` with ``per_channel_dynamic_qconfig``), the input quantized to uint8
    at each call.  PyTorch's ``torch.ao.quantization.quantize_dynamic``."""
    op = "quantize_dynamic"
    if as_qdtype(dtype, op) is not qint8:
        raise ValueError(f"{op}: dynamic quantization stores int8 weights: dtype must be nt.qint8, got {dtype!r}.")
    if mapping is not None:
        raise NotImplementedError(f"{op}: custom mappings are not supported; nn.Linear is what quantizes.")
    spec = {Linear: default_dynamic_qconfig} if qconfig_spec is None else (
        dict(qconfig_spec) if isinstance(qconfig_spec, dict) else {t: default_dynamic_qconfig for t in qconfig_spec})
    unknown = [t for t in spec if not (isinstance(t, type) and issubclass(t, Linear))]
    if unknown:
        raise NotImplementedError(f"{op}: only nn.Linear layers have a dynamically quantized form, got "
                                  f"{', '.join(getattr(t, '__name__', repr(t)) for t in unknown)}.")
    model = _copy(model, inplace, op)
    config = spec.get(Linear, default_dynamic_qconfig)
    return _swapped(model, lambda m, c: DynamicQuantizedLinear(m, quantize_weight(m.weight, c.weight())), config,
                    (Linear,))


def prepare(model: Module, inplace: bool = False, qconfig: Optional[QConfig] = None) -> Module:
    """``model`` ready for calibration: each ``nn.Linear`` an :class:`ObservedLinear` that records its
    input's range.  Run representative data through it (in eval mode), then :func:`convert`.  The
    qconfig is the model's ``qconfig`` attribute, else ``qconfig``, else ``default_qconfig``."""
    model = _copy(model, inplace, "prepare")
    config = getattr(model, "qconfig", None) or qconfig or default_qconfig
    _check(config, "prepare", qat=False)
    return _swapped(model, ObservedLinear, config, (Linear,))


def prepare_qat(model: Module, inplace: bool = False, qconfig: Optional[QConfig] = None) -> Module:
    """``model`` ready for quantization-aware training: each ``nn.Linear`` a :class:`QATLinear` that
    fake-quantizes its input and weight.  Train it, then :func:`convert`.  The qconfig is the model's
    ``qconfig`` attribute, else ``qconfig``, else ``default_qat_qconfig``."""
    model = _copy(model, inplace, "prepare_qat")
    config = getattr(model, "qconfig", None) or qconfig or default_qat_qconfig
    _check(config, "prepare_qat", qat=True)
    return _swapped(model, QATLinear, config, (Linear,))


def _check(config: Any, op: str, qat: bool) -> None:
    if not isinstance(config, QConfig) or config.activation is None:
        raise TypeError(f"{op}: needs a QConfig with an activation observer (static quantization), got {config!r}.")
    made = config.activation()
    if qat != isinstance(made, FakeQuantize):
        want = "FakeQuantize modules (default_qat_qconfig)" if qat else "observers (default_qconfig)"
        raise TypeError(f"{op}: the qconfig's activation must make {want}, got {type(made).__name__}.")


def convert(model: Module, inplace: bool = False) -> Module:
    """The prepared (and calibrated or trained) ``model`` with each :class:`ObservedLinear` and
    :class:`QATLinear` as a :class:`QuantizedLinear`: the input's scale and zero point from its observer,
    the weight quantized to int8 as the qconfig's weight observer (or the fake quantizer's) says."""
    model = _copy(model, inplace, "convert")

    def make(m: Module, _config: QConfig) -> QuantizedLinear:
        scale, zero = m.activation_post_process.calculate_qparams()
        # a fresh weight observer of the qconfig (a QAT one is its fake quantizer's) sees the final weight
        observer = m.qconfig.weight()
        weight = quantize_weight(m.weight, getattr(observer, "activation_post_process", observer))
        return QuantizedLinear(m, weight, float(scale.item()), int(zero.item()))

    return _swapped(model, make, _STAGED, (ObservedLinear, QATLinear))


#: a stand-in qconfig for convert's walk: the staged layers carry their own
_STAGED = QConfig(None, lambda: None)
