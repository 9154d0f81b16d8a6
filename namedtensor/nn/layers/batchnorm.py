"""``BatchNorm1d``, ``BatchNorm2d``, ``BatchNorm3d`` and ``GroupNorm``: normalise per channel.

Two signatures (:mod:`._forms`).  PyTorch's ``BatchNorm2d(16)`` and ``GroupNorm(4, 16)`` act on
``(N, C, *)`` by position, whatever the names; their parameters and buffers are unnamed and their
state dicts are PyTorch's (``weight``, ``bias``, ``running_mean``, ``running_var``,
``num_batches_tracked``).  The named ``BatchNorm2d("chan", 16)`` and ``GroupNorm("chan", 4, 16)``
find the channel dim by name wherever it is (batch norm's statistics are over every other dim, group
norm's over each group and every dim but ``batch=``, default the first); their parameters and running
statistics are named ``("chan",)``.  Either way the output has the input's names.
"""

from __future__ import annotations

from typing import Any, Optional

from ... import _dtypes
from ...ops.creation import ones, tensor, zeros
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ._forms import Forms, argument, is_name, is_size


def _batch_norm_pytorch(num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1, affine: bool = True,
                        track_running_stats: bool = True, device: Any = None, dtype: Any = None) -> None:
    """PyTorch's ``nn.BatchNormNd``: on ``(N, C, *)`` by position."""


def _batch_norm_named(dim: str, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                      affine: bool = True, track_running_stats: bool = True, dtype: Any = _dtypes.float32,
                      device: Any = None) -> None:
    """The channel dim ``dim`` by name, wherever it is; statistics over every other dim."""


def _group_norm_pytorch(num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                        device: Any = None, dtype: Any = None) -> None:
    """PyTorch's ``nn.GroupNorm``: on ``(N, C, *)`` by position."""


def _group_norm_named(dim: str, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                      batch: Any = None, dtype: Any = _dtypes.float32, device: Any = None) -> None:
    """The channel dim ``dim`` by name; separate statistics along ``batch`` (default: the first dim)."""


def _first_is_size(args: tuple, kwargs: dict) -> bool:
    return is_size(argument(args, kwargs, 0, "num_features", "num_groups"))


def _bind(forms: Forms, args: tuple, kwargs: dict) -> dict:
    """Every argument by name, ``dim`` None in PyTorch's form, the types checked."""
    pytorch, a, _ = forms.bind(args, kwargs)
    if pytorch:
        a["dim"] = None
    else:
        forms.check(a, lambda v: isinstance(v, str), "a dim name (str)", ("dim",))
    sizes = [k for k in ("num_features", "num_groups", "num_channels") if k in a]
    forms.check(a, lambda v: is_size(v) and v > 0, "a positive int", sizes)
    forms.check(a, lambda v: isinstance(v, bool), "a bool", [k for k in ("affine", "track_running_stats") if k in a])
    return a


class _BatchNorm(Module):
    """An N-d batch norm layer; see the module docstring."""

    n = 0
    _forms: Forms

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        a = _bind(self._forms, args, kwargs)
        self.num_features, self.eps, self.momentum = a["num_features"], a["eps"], a["momentum"]
        self.affine, self.track_running_stats, self.dim = a["affine"], a["track_running_stats"], a["dim"]
        options = {"names": (self.dim,), "dtype": a["dtype"], "device": a["device"]}
        self.weight = Parameter(ones(self.num_features, **options)) if self.affine else None
        self.bias = Parameter(zeros(self.num_features, **options)) if self.affine else None
        if self.track_running_stats:
            self.register_buffer("running_mean", zeros(self.num_features, **options))
            self.register_buffer("running_var", ones(self.num_features, **options))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=_dtypes.int64, device=a["device"]))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches tracked (PyTorch's)."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """The running statistics reset, the weight 1 and the bias 0 (PyTorch's)."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input(self, x: Tensor) -> None:
        """PyTorch's form takes ``(N, C, *spatial)`` with exactly ``n`` spatial dims (1-d: also ``(N, C)``)."""
        allowed = (2, 3) if self.n == 1 else (self.n + 2,)
        if self.dim is None and x.ndim not in allowed:
            raise ValueError(f"{type(self).__name__}: expected {' or '.join(f'{d}D' for d in allowed)} input (got "
                             f"{x.ndim}D input of names {x.names}); pass the channel dim by name, "
                             f"{type(self).__name__}('chan', {self.num_features}), for other layouts.")

    def forward(self, x: Tensor) -> Tensor:
        """``x`` normalised per channel (the batch's statistics in training, the running ones in eval)."""
        self._check_input(x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            # momentum=None is PyTorch's cumulative average: the n-th batch weighs 1/n
            factor = 1.0 / int(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
        # without running statistics the batch's own normalise, in eval too
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch, factor, self.eps, dim=self.dim)

    def extra_repr(self) -> str:
        where = "" if self.dim is None else f"{self.dim!r}, "
        return (f"{where}{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


def _batch_norm_layer(n: int) -> type:
    """The ``n``-d layer class, ``BatchNormNd``."""
    name = f"BatchNorm{n}d"
    doc = (f"PyTorch's ``nn.{name}(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, "
           f"device=None, dtype=None)`` on ``(N, C, *{n} spatial)``, or named: ``{name}(dim, num_features, ..., "
           "dtype=nt.float32, device=None)``, statistics over every dim but ``dim``.  ``momentum=None`` is a "
           "cumulative average.")
    forms = Forms(name, _batch_norm_pytorch, _batch_norm_named, _first_is_size)
    return type(name, (_BatchNorm,), {"n": n, "_forms": forms, "__doc__": doc, "__module__": __name__})


BatchNorm1d, BatchNorm2d, BatchNorm3d = (_batch_norm_layer(n) for n in (1, 2, 3))


class GroupNorm(Module):
    """The channels split into ``num_groups`` groups, each normalised per sample, then scaled by ``weight``
    and shifted by ``bias`` (per channel).

    ``GroupNorm(num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None)`` is PyTorch's,
    on ``(N, C, *)``; ``GroupNorm(dim, num_groups, num_channels, eps=1e-5, affine=True, batch=None,
    dtype=nt.float32, device=None)`` the named one: ``GroupNorm("chan", 4, 16, batch="batch")``.
    """

    _forms = Forms("GroupNorm", _group_norm_pytorch, _group_norm_named, _first_is_size)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        a = _bind(self._forms, args, kwargs)
        if a["num_channels"] % a["num_groups"]:
            raise ValueError(f"GroupNorm: num_channels ({a['num_channels']}) must be divisible by num_groups "
                             f"({a['num_groups']}).")
        batch = a.get("batch")
        if not (is_name(batch) or (isinstance(batch, tuple) and all(isinstance(b, str) for b in batch))):
            raise self._forms.error(f"batch must be a dim name, a tuple of names or None, got {batch!r}")
        self.num_groups, self.num_channels, self.eps = a["num_groups"], a["num_channels"], a["eps"]
        self.affine, self.dim, self.batch = a["affine"], a["dim"], batch
        options = {"names": (self.dim,), "dtype": a["dtype"], "device": a["device"]}
        self.weight = Parameter(ones(self.num_channels, **options)) if self.affine else None
        self.bias = Parameter(zeros(self.num_channels, **options)) if self.affine else None

    def forward(self, x: Tensor) -> Tensor:
        """``x`` normalised per sample and group of channels; same names."""
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps, dim=self.dim, batch=self.batch)

    def extra_repr(self) -> str:
        where = "" if self.dim is None else f"{self.dim!r}, "
        return f"{where}{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
