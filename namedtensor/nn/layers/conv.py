"""``Conv1d``, ``Conv2d``, ``Conv3d``: one N-d layer, :func:`namedtensor.nn.functional.conv`; and
``ConvTranspose1d``, ``ConvTranspose2d``, ``ConvTranspose3d``, the same layer on
:func:`namedtensor.nn.functional.conv_transpose`.

Two signatures (:mod:`._forms`).  PyTorch's ``Conv2d(3, 16, 3, padding=1)`` acts on ``(N, C, H, W)``
(or ``(C, H, W)``) by position, whatever the names; its weight is unnamed ``(out, in // groups, *kernel)``
and its state dict is PyTorch's.  The named ``Conv2d("chan", ("h", "w"), 3, 16, 3, padding=1)`` finds
the channel dim and the spatial dims by name wherever they are; the output keeps the input's names
(the channel dim takes ``out_dim=`` if given).  Its weight is named ``(chan_out, chan, h, w)`` (or
``(out_dim, chan, h, w)``) and its bias ``(chan_out,)``.  A transposed layer's weight is
``(in, out // groups, *kernel)``, named ``(chan, chan_out, h, w)``, as PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Union

from ... import _dtypes
from ...ops.creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ._forms import Forms, argument, is_size, is_sizes

Ints = Union[int, Sequence[int]]


def _pytorch(in_channels: int, out_channels: int, kernel_size: Ints, stride: Ints = 1, padding: Union[str, Ints] = 0,
             dilation: Ints = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device: Any = None,
             dtype: Any = None) -> None:
    """PyTorch's ``nn.ConvNd``: on ``(N, C, *spatial)`` by position."""


def _named(dim: str, spatial: Sequence[str], in_channels: int, out_channels: int, kernel_size: Ints, stride: Ints = 1,
           padding: Union[str, Ints] = 0, dilation: Ints = 1, groups: int = 1, bias: bool = True,
           padding_mode: str = "zeros", out_dim: Optional[str] = None, dtype: Any = _dtypes.float32,
           device: Any = None) -> None:
    """The channel dim ``dim`` and the ``spatial`` dims by name, wherever they are."""


def _pytorch_transpose(in_channels: int, out_channels: int, kernel_size: Ints, stride: Ints = 1, padding: Ints = 0,
                       output_padding: Ints = 0, groups: int = 1, bias: bool = True, dilation: Ints = 1,
                       padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
    """PyTorch's ``nn.ConvTransposeNd``: on ``(N, C, *spatial)`` by position."""


def _named_transpose(dim: str, spatial: Sequence[str], in_channels: int, out_channels: int, kernel_size: Ints,
                     stride: Ints = 1, padding: Ints = 0, output_padding: Ints = 0, groups: int = 1, bias: bool = True,
                     dilation: Ints = 1, padding_mode: str = "zeros", out_dim: Optional[str] = None,
                     dtype: Any = _dtypes.float32, device: Any = None) -> None:
    """The channel dim ``dim`` and the ``spatial`` dims by name, wherever they are."""


class _ConvNd(Module):
    """An N-d convolution layer, or a transposed one; see the module docstring."""

    n = 0
    transposed = False
    _forms: Forms

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        forms, n = self._forms, self.n
        pytorch, a, _ = forms.bind(args, kwargs)
        if pytorch:
            a.update(dim=None, spatial=None, out_dim=None)
        else:
            forms.check(a, lambda v: isinstance(v, str), "a dim name (str)", ("dim",))
            forms.check(a, lambda v: isinstance(v, (tuple, list)) and len(v) == n and all(isinstance(s, str) for s in v),
                        f"a tuple of {n} dim names", ("spatial",))
            forms.check(a, lambda v: v is None or isinstance(v, str), "a dim name (str) or None", ("out_dim",))
        forms.check(a, is_size, "an int", ("in_channels", "out_channels", "groups"))
        forms.check(a, is_sizes, "an int or a tuple of ints", ("kernel_size", "stride", "dilation"))
        if self.transposed:
            forms.check(a, is_sizes, "an int or a tuple of ints", ("padding", "output_padding"))
        forms.check(a, lambda v: isinstance(v, bool), "a bool", ("bias",))
        if a["padding_mode"] != "zeros":
            raise NotImplementedError(f"{forms.layer}: padding_mode={a['padding_mode']!r} is not supported; "
                                      "only 'zeros' is (pad the input with nt.pad first for other modes).")
        groups = a["groups"]
        if groups < 1 or a["in_channels"] % groups or a["out_channels"] % groups:
            raise ValueError(f"{forms.layer}: in_channels ({a['in_channels']}) and out_channels "
                             f"({a['out_channels']}) must be divisible by groups ({groups}).")
        kernel = tuple(a["kernel_size"]) if isinstance(a["kernel_size"], (tuple, list)) else (a["kernel_size"],) * n
        self.in_channels, self.out_channels, self.kernel_size = a["in_channels"], a["out_channels"], kernel
        self.stride, self.padding, self.dilation, self.groups = a["stride"], a["padding"], a["dilation"], groups
        self.output_padding = a.get("output_padding", 0)
        self.padding_mode = "zeros"
        self.dim, self.out_dim = a["dim"], a["out_dim"]
        self.spatial = None if a["spatial"] is None else tuple(a["spatial"])
        if self.dim is None:
            out_name = None
        else:
            out = self.dim if self.out_dim is None else self.out_dim
            out_name = out + "_out" if out == self.dim else out
        # PyTorch's layouts: (out, in // groups, *kernel), transposed (in, out // groups, *kernel)
        if self.transposed:
            sizes, names = (self.in_channels, self.out_channels // groups), (self.dim, out_name)
        else:
            sizes, names = (self.out_channels, self.in_channels // groups), (out_name, self.dim)
        names += (None,) * n if self.spatial is None else self.spatial
        options = {"dtype": a["dtype"], "device": a["device"]}
        self.weight = Parameter(empty(*sizes, *kernel, names=names, **options))
        self.bias = Parameter(empty(self.out_channels, names=(out_name,), **options)) if a["bias"] else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = the
        weight's second dim (in_channels / groups, transposed out_channels / groups) * kernel volume
        (kaiming-uniform with a=sqrt(5) for the weight)."""
        fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor, output_size: Optional[Sequence[int]] = None) -> Tensor:
        """``x`` convolved: the channel dim and the spatial dims change size, every name stays.

        ``output_size`` (transposed layers only, as PyTorch's): the spatial sizes wanted, or the whole
        output shape; it picks the output padding among the sizes the stride allows."""
        if self.transposed:
            return F.conv_transpose(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                    self.groups, self.dilation, dim=self.dim, spatial=self.spatial,
                                    out_dim=self.out_dim, output_size=output_size)
        if output_size is not None:
            raise TypeError(f"{type(self).__name__}.forward: output_size= belongs to the transposed convolutions "
                            "(ConvTransposeNd), as in PyTorch.")
        return F.conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups,
                      dim=self.dim, spatial=self.spatial, out_dim=self.out_dim)

    def extra_repr(self) -> str:
        where = "" if self.dim is None else f"dim={self.dim!r}, spatial={self.spatial!r}, "
        return (f"{where}{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, "
                + (f"output_padding={self.output_padding}, " if self.transposed else "")
                + f"dilation={self.dilation}, groups={self.groups}, "
                f"bias={self.bias is not None}")


def _layer(n: int, transposed: bool = False) -> type:
    """The ``n``-d layer class, ``ConvNd`` or (``transposed``) ``ConvTransposeNd``."""
    name = f"ConvTranspose{n}d" if transposed else f"Conv{n}d"
    options = ("output_padding=0, groups=1, bias=True, dilation=1" if transposed else
               "dilation=1, groups=1, bias=True")
    doc = (f"PyTorch's ``nn.{name}``, ``{name}(in_channels, out_channels, kernel_size, stride=1, padding=0, "
           f"{options}, padding_mode='zeros', device=None, dtype=None)`` on ``(N, C, *{n} "
           f"spatial)``, or named: ``{name}(dim, spatial, in_channels, out_channels, kernel_size, ..., "
           "out_dim=None, dtype=nt.float32, device=None)``.  Only padding_mode='zeros' is supported.")
    pytorch, named = (_pytorch_transpose, _named_transpose) if transposed else (_pytorch, _named)
    forms = Forms(name, pytorch, named, lambda args, kwargs: is_size(argument(args, kwargs, 0, "in_channels")))
    return type(name, (_ConvNd,), {"n": n, "transposed": transposed, "_forms": forms, "__doc__": doc,
                                   "__module__": __name__})


Conv1d, Conv2d, Conv3d = (_layer(n) for n in (1, 2, 3))
ConvTranspose1d, ConvTranspose2d, ConvTranspose3d = (_layer(n, transposed=True) for n in (1, 2, 3))
