"""``Linear``: contracts one dim with a weight and writes another in its place; ``Identity``.

Two signatures (:mod:`._forms`).  PyTorch's ``Linear(4, 8)`` (``in_features, out_features``) reads
the input's last dim, whatever its name, and writes an unnamed dim there; its weight is unnamed
``(out, in)``, so its state dict is PyTorch's.  The named ``Linear("embed", "hidden", 8, 32)`` reads
the input's ``"embed"`` dim wherever it is and writes ``"hidden"`` at that position; every other dim
passes through.  Its weight is named ``("hidden", "embed")`` and its bias ``("hidden",)``.  A layer
that maps a dim to itself (``Linear("embed", "embed", 8, 8)``) names its weight ``("embed_out",
"embed")`` (a tensor cannot have a name twice) and its bias ``("embed_out",)``; the output dim is
still called ``"embed"``.  ``None`` for ``in_dim`` means the last dim, for ``out_dim`` an unnamed
output dim: ``Linear(None, None, 4, 8)`` is ``Linear(4, 8)``.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from ... import _dtypes
from ...ops.creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ._forms import Forms, argument, is_name, is_size


def _pytorch(in_features: int, out_features: int, bias: bool = True, device: Any = None,
             dtype: Any = None) -> None:
    """PyTorch's ``nn.Linear``: on the last dim, unnamed weight ``(out_features, in_features)``."""


def _named(in_dim: Optional[str], out_dim: Optional[str], in_size: int, out_size: int, bias: bool = True,
           dtype: Any = _dtypes.float32, device: Any = None) -> None:
    """``in_dim`` (size ``in_size``) read wherever it is, ``out_dim`` (size ``out_size``) written in its place."""


_FORMS = Forms("Linear", _pytorch, _named, lambda args, kwargs: is_size(argument(args, kwargs, 0, "in_features")))


class Linear(Module):
    """``y = x @ W.T + b`` along one dim: reads ``in_dim`` (size ``in_size``), writes ``out_dim``
    (size ``out_size``) in its place; other dims pass through.

    ``Linear(in_features, out_features, bias=True, device=None, dtype=None)`` is PyTorch's: it reads
    the last dim and writes an unnamed one (``in_dim = out_dim = None``).
    ``Linear(in_dim, out_dim, in_size, out_size, bias=True, dtype=nt.float32, device=None)`` reads
    and writes named dims.  Weight ``(out_dim, in_dim)`` (``(in_dim + "_out", in_dim)`` when the two
    names are equal), bias ``(out_dim,)``; initialised as PyTorch's ``nn.Linear`` (uniform, bound
    1/sqrt(in_size)).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        pytorch, a, _ = _FORMS.bind(args, kwargs)
        if pytorch:
            _FORMS.check(a, is_size, "an int", ("in_features", "out_features"))
            a.update(in_dim=None, out_dim=None, in_size=a["in_features"], out_size=a["out_features"])
        else:
            _FORMS.check(a, is_name, "a dim name (str) or None", ("in_dim", "out_dim"))
            _FORMS.check(a, is_size, "an int", ("in_size", "out_size"))
        _FORMS.check(a, lambda v: isinstance(v, bool), "a bool", ("bias",))
        self.in_dim, self.out_dim = in_dim, out_dim = a["in_dim"], a["out_dim"]
        self.in_size, self.out_size = in_size, out_size = a["in_size"], a["out_size"]
        w_out = out_dim + "_out" if out_dim is not None and out_dim == in_dim else out_dim
        options = {"dtype": a["dtype"], "device": a["device"]}
        self.weight = Parameter(empty(out_size, in_size, names=(w_out, in_dim), **options))
        self.bias = Parameter(empty(out_size, names=(w_out,), **options)) if a["bias"] else None
        self.reset_parameters()

    @property
    def in_features(self) -> int:
        """PyTorch's name for ``in_size``."""
        return self.in_size

    @property
    def out_features(self) -> int:
        """PyTorch's name for ``out_size``."""
        return self.out_size

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: weight kaiming-uniform (a=sqrt(5)), bias U(-1/sqrt(in), 1/sqrt(in))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), fan_in=self.in_dim)
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_size) if self.in_size > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with ``in_dim`` (the last dim if None) replaced in place by ``out_dim``."""
        return F.linear(x, self.weight, self.bias, dim=self.in_dim, out_dim=self.out_dim)

    def extra_repr(self) -> str:
        if self.in_dim is None and self.out_dim is None:
            return f"in_features={self.in_size}, out_features={self.out_size}, bias={self.bias is not None}"
        reads, writes = f"{{{self.in_dim!r}: {self.in_size}}}", f"{{{self.out_dim!r}: {self.out_size}}}"
        return f"{reads} -> {writes}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input unchanged (all dims pass through); arguments are accepted and ignored."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        """``x`` itself."""
        return x
