"""``MaxPool1d/2d/3d``, ``AvgPool1d/2d/3d``, ``AdaptiveAvgPool1d/2d/3d``: PyTorch's signatures plus
``spatial=`` (the N spatial dims by name, default: the last N); the output keeps the input's names."""

from __future__ import annotations

from typing import Any, Dict

from ...ops import pooling
from ...tensor import Tensor
from ..module import Module


class _Pool(Module):
    """A pooling layer: its arguments, passed to the N-d function ``fn`` of :mod:`namedtensor.ops.pooling`."""

    n = 0
    fn: Any = None
    _defaults: Dict[str, Any] = {}

    def __init__(self, *args: Any, spatial: Any = None, **kwargs: Any) -> None:
        super().__init__()
        keys = list(self._defaults)
        if len(args) > len(keys):
            raise TypeError(f"{type(self).__name__}: takes at most {len(keys)} positional arguments ({', '.join(keys)}).")
        unknown = sorted(set(kwargs) - set(keys))
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {unknown}; it takes {', '.join(keys)}, spatial.")
        self.options = {**self._defaults, **dict(zip(keys, args)), **kwargs}
        if self.options[keys[0]] is None and keys[0] == "kernel_size":
            raise TypeError(f"{type(self).__name__}: kernel_size is required.")
        self.spatial = spatial

    def forward(self, x: Tensor) -> Any:
        """``x`` pooled over its spatial dims; every name stays."""
        return type(self).fn(x, self.n, **self.options, spatial=self.spatial)

    def extra_repr(self) -> str:
        where = "" if self.spatial is None else f", spatial={self.spatial!r}"
        return ", ".join(f"{k}={v!r}" for k, v in self.options.items()) + where


_MAX = {"kernel_size": None, "stride": None, "padding": 0, "dilation": 1, "return_indices": False, "ceil_mode": False}
_AVG = {"kernel_size": None, "stride": None, "padding": 0, "ceil_mode": False, "count_include_pad": True,
        "divisor_override": None}
_ADAPTIVE = {"output_size": None}


def _layer(kind: str, fn: Any, defaults: Dict[str, Any], n: int) -> type:
    name = f"{kind}{n}d"
    doc = (f"PyTorch's ``nn.{name}({', '.join(defaults)})`` over the last {n} dims, or over the dims named by "
           f"``spatial=`` (a tuple of {n} names); the output keeps the input's names.")
    return type(name, (_Pool,), {"n": n, "fn": staticmethod(fn), "_defaults": defaults, "__doc__": doc,
                                 "__module__": __name__})


MaxPool1d, MaxPool2d, MaxPool3d = (_layer("MaxPool", pooling.max_pool, _MAX, n) for n in (1, 2, 3))
AvgPool1d, AvgPool2d, AvgPool3d = (_layer("AvgPool", pooling.avg_pool, _AVG, n) for n in (1, 2, 3))
AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d = (
    _layer("AdaptiveAvgPool", pooling.adaptive_avg_pool, _ADAPTIVE, n) for n in (1, 2, 3))
