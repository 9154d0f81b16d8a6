"""Observers (the ranges a quantization is chosen from), fake quantization modules and QConfigs.

An observer is a module that records the range of what passes through it (``forward`` returns its
input unchanged) and turns it into a scale and zero point (``calculate_qparams``), as PyTorch's
``torch.ao.quantization`` observers do: ``MinMaxObserver`` (the running min and max),
``MovingAverageMinMaxObserver`` (their moving average) and ``PerChannelMinMaxObserver`` (one range
per entry of a channel dim, by name: ``dim="out"``).  The scale and zero point, for the range
``[lo, hi]`` widened to hold 0, are ``scale = (hi - lo) / (qmax - qmin)`` and ``zero_point = qmin -
round(lo / scale)`` (affine), or ``scale = max(-lo, hi) / ((qmax - qmin) / 2)`` and the middle of the
range as zero point (symmetric: 0 for qint8, 128 for quint8); a scale is at least ``eps``.

``FakeQuantize`` observes (while ``observer_enabled``) and fake-quantizes (while ``fake_quant_enabled``)
with the straight-through gradient, for quantization-aware training.  A ``QConfig`` pairs the factories
of the activation's and the weight's observers (or fake quantizers); ``Observer.with_args(...)``
makes such a factory.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, NamedTuple, Optional, Tuple

from .. import _dtypes, _names
from ..autograd.graph import no_grad
from ..nn import Module
from ..ops.creation import tensor, zeros
from ..ops.quantize import as_qdtype, fake_quantize_per_channel_affine, fake_quantize_per_tensor_affine, qint8, quint8
from ..tensor import Tensor

__all__ = ["MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver", "FakeQuantize", "QConfig",
           "default_qconfig", "default_per_channel_qconfig", "default_dynamic_qconfig", "per_channel_dynamic_qconfig",
           "default_qat_qconfig", "default_per_channel_qat_qconfig"]

_SCHEMES = ("per_tensor_affine", "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric")


class _ObserverBase(Module):
    """What the observers share: the dtype, the scheme, the range of the integers, and the qparams."""

    def __init__(self, dtype: Any = quint8, qscheme: str = "per_tensor_affine", quant_min: Optional[int] = None,
                 quant_max: Optional[int] = None, eps: float = 2.0 ** -23) -> None:
        super().__init__()
        name = type(self).__name__
        self.dtype = as_qdtype(dtype, name)
        if qscheme not in _SCHEMES:
            raise ValueError(f"{name}: qscheme must be one of {', '.join(_SCHEMES)}, got {qscheme!r}.")
        self.qscheme = qscheme
        self.quant_min = self.dtype.qmin if quant_min is None else int(quant_min)
        self.quant_max = self.dtype.qmax if quant_max is None else int(quant_max)
        if not self.dtype.qmin <= self.quant_min < self.quant_max <= self.dtype.qmax:
            raise ValueError(f"{name}: quant_min and quant_max must lie within {self.dtype!r}'s range "
                             f"[{self.dtype.qmin}, {self.dtype.qmax}], the first below the second.")
        self.eps = float(eps)

    @classmethod
    def with_args(cls, **kwargs: Any) -> Callable[[], "_ObserverBase"]:
        """A factory of observers with these arguments (what a :class:`QConfig` holds)."""
        return functools.partial(cls, **kwargs)

    def _qparams(self, lo: Tensor, hi: Tensor) -> Tuple[Tensor, Tensor]:
        """Scale (float64) and zero point (int64) tensors for the ranges ``[lo, hi]`` (same names)."""
        lo = lo.minimum(zeros((), dtype=lo.dtype)).to(_dtypes.float64)
        hi = hi.maximum(zeros((), dtype=hi.dtype)).to(_dtypes.float64)
        qmin, qmax = self.quant_min, self.quant_max
        if self.qscheme.endswith("symmetric"):
            scale = (hi.maximum(-lo) / ((qmax - qmin) / 2)).clip(min=self.eps)
            zero = (scale * 0 + (0 if self.dtype is qint8 else 128)).to(_dtypes.int64)
            return scale, zero
        scale = ((hi - lo) / (qmax - qmin)).clip(min=self.eps)
        zero = (qmin - (lo / scale).round()).clip(qmin, qmax).to(_dtypes.int64)
        return scale, zero


class MinMaxObserver(_ObserverBase):
    """The running min and max of everything seen (PyTorch's ``MinMaxObserver``)."""

    def __init__(self, dtype: Any = quint8, qscheme: str = "per_tensor_affine", quant_min: Optional[int] = None,
                 quant_max: Optional[int] = None, eps: float = 2.0 ** -23) -> None:
        super().__init__(dtype, qscheme, quant_min, quant_max, eps)
        if qscheme.startswith("per_channel"):
            raise ValueError(f"{type(self).__name__}: a per-channel scheme needs PerChannelMinMaxObserver.")
        self.register_buffer("min_val", tensor(float("inf")))
        self.register_buffer("max_val", tensor(float("-inf")))

    def _update(self, lo: Tensor, hi: Tensor) -> None:
        self.min_val = self.min_val.minimum(lo)
        self.max_val = self.max_val.maximum(hi)

    def forward(self, x: Tensor) -> Tensor:
        """Record ``x``'s range; returns ``x``."""
        if x.numel():
            with no_grad():
                d = x.detach().to(_dtypes.float32)
                self._update(d.min(), d.max())
        return x

    def calculate_qparams(self) -> Tuple[Tensor, Tensor]:
        """``(scale, zero_point)``: 0-d tensors, float64 and int64."""
        if not bool(self.min_val <= self.max_val):
            raise RuntimeError(f"{type(self).__name__}: nothing was observed yet; run calibration data through "
                               "the model first.")
        return self._qparams(self.min_val, self.max_val)


class MovingAverageMinMaxObserver(MinMaxObserver):
    """The moving average of each batch's min and max, weight ``averaging_constant`` for the newest
    (PyTorch's ``MovingAverageMinMaxObserver``; the first batch sets them)."""

    def __init__(self, averaging_constant: float = 0.01, dtype: Any = quint8, qscheme: str = "per_tensor_affine",
                 quant_min: Optional[int] = None, quant_max: Optional[int] = None, eps: float = 2.0 ** -23) -> None:
        super().__init__(dtype, qscheme, quant_min, quant_max, eps)
        self.averaging_constant = float(averaging_constant)

    def _update(self, lo: Tensor, hi: Tensor) -> None:
        if not bool(self.min_val <= self.max_val):
            self.min_val, self.max_val = lo, hi
            return
        c = self.averaging_constant
        self.min_val = self.min_val + c * (lo - self.min_val)
        self.max_val = self.max_val + c * (hi - self.max_val)


class PerChannelMinMaxObserver(_ObserverBase):
    """The running min and max of each entry of the channel dim ``dim`` (a name, or PyTorch's ``ch_axis``,
    an int; default the first dim: a weight's ``out``)."""

    def __init__(self, dim: Hashable = None, dtype: Any = qint8, qscheme: str = "per_channel_symmetric",
                 quant_min: Optional[int] = None, quant_max: Optional[int] = None, eps: float = 2.0 ** -23, *,
                 ch_axis: Optional[int] = None) -> None:
        super().__init__(dtype, qscheme, quant_min, quant_max, eps)
        if not qscheme.startswith("per_channel"):
            raise ValueError(f"{type(self).__name__}: qscheme must be per_channel_affine or per_channel_symmetric.")
        self.dim = ch_axis if dim is None and ch_axis is not None else (0 if dim is None else dim)
        self.register_buffer("min_val", None)
        self.register_buffer("max_val", None)

    def forward(self, x: Tensor) -> Tensor:
        """Record each channel's range of ``x``; returns ``x``."""
        with no_grad():
            d = x.detach().to(_dtypes.float32)
            ch = _names.axis(d.names, self.dim, type(self).__name__)
            others = tuple(a for a in range(d.ndim) if a != ch)
            lo, hi = d.amin(others), d.amax(others)
            if self.min_val is None:
                self.min_val, self.max_val = lo, hi
            else:
                self.min_val, self.max_val = self.min_val.minimum(lo), self.max_val.maximum(hi)
        return x

    def calculate_qparams(self) -> Tuple[Tensor, Tensor]:
        """``(scales, zero_points)``: 1-D tensors along the channel dim, float64 and int64."""
        if self.min_val is None:
            raise RuntimeError(f"{type(self).__name__}: nothing was observed yet; run data through it first.")
        return self._qparams(self.min_val, self.max_val)


class FakeQuantize(Module):
    """Fake quantization with an observer: in training (and while ``observer_enabled``) each input updates
    the observer; while ``fake_quant_enabled`` the output is ``dequantize(quantize(x))`` with the
    observer's qparams and the straight-through gradient (PyTorch's ``FakeQuantize``)."""

    def __init__(self, observer: Callable[[], Module] = MovingAverageMinMaxObserver, **observer_kwargs: Any) -> None:
        super().__init__()
        self.activation_post_process = observer(**observer_kwargs)
        self.observer_enabled = True
        self.fake_quant_enabled = True

    @classmethod
    def with_args(cls, **kwargs: Any) -> Callable[[], "FakeQuantize"]:
        return functools.partial(cls, **kwargs)

    @property
    def dtype(self):
        return self.activation_post_process.dtype

    def enable_observer(self, enabled: bool = True) -> "FakeQuantize":
        self.observer_enabled = bool(enabled)
        return self

    def disable_observer(self) -> "FakeQuantize":
        return self.enable_observer(False)

    def enable_fake_quant(self, enabled: bool = True) -> "FakeQuantize":
        self.fake_quant_enabled = bool(enabled)
        return self

    def disable_fake_quant(self) -> "FakeQuantize":
        return self.enable_fake_quant(False)

    def calculate_qparams(self) -> Tuple[Tensor, Tensor]:
        return self.activation_post_process.calculate_qparams()

    def forward(self, x: Tensor) -> Tensor:
        obs = self.activation_post_process
        if self.training and self.observer_enabled:
            obs(x)
        if not self.fake_quant_enabled:
            return x
        scale, zero = self.calculate_qparams()
        if isinstance(obs, PerChannelMinMaxObserver):
            where = {"axis": obs.dim} if isinstance(obs.dim, int) else {"dim": obs.dim}
            return fake_quantize_per_channel_affine(x, scale, zero, quant_min=obs.quant_min, quant_max=obs.quant_max,
                                                    **where)
        return fake_quantize_per_tensor_affine(x, float(scale.item()), int(zero.item()), obs.quant_min, obs.quant_max)


class QConfig(NamedTuple):
    """How to quantize a layer: factories of the activation's and the weight's observers (or fake
    quantizers); ``activation`` None for dynamic quantization (the input's range is taken per call)."""

    activation: Optional[Callable[[], Module]]
    weight: Callable[[], Module]


default_qconfig = QConfig(MinMaxObserver.with_args(dtype=quint8),
                          MinMaxObserver.with_args(dtype=qint8, qscheme="per_tensor_symmetric"))
default_per_channel_qconfig = QConfig(MinMaxObserver.with_args(dtype=quint8), PerChannelMinMaxObserver.with_args())
default_dynamic_qconfig = QConfig(None, MinMaxObserver.with_args(dtype=qint8, qscheme="per_tensor_symmetric"))
per_channel_dynamic_qconfig = QConfig(None, PerChannelMinMaxObserver.with_args())
default_qat_qconfig = QConfig(FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, dtype=quint8),
                              FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, dtype=qint8,
                                                     qscheme="per_tensor_symmetric"))
default_per_channel_qat_qconfig = QConfig(FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, dtype=quint8),
                                          FakeQuantize.with_args(observer=PerChannelMinMaxObserver))
