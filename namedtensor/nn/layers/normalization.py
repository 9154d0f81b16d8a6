"""``LayerNorm`` and ``RMSNorm``: normalise over some dims.

Two signatures (:mod:`._forms`).  PyTorch's ``LayerNorm(16)`` or ``LayerNorm((4, 8))``
(``normalized_shape``) normalises over the input's last dims, whatever their names, and its
weight and bias are unnamed, of shape ``normalized_shape``.  The named ``LayerNorm("embed", 16)``
finds the normalised dims by name wherever they are, and names its weight (and bias) by them,
e.g. ``("embed",)``.  ``None`` for the dims means the last ones: ``LayerNorm(None, 16)`` is
``LayerNorm(16)``.  Either way the output has the input's names.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

from ... import _dtypes, _names
from ...ops.creation import ones, zeros
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from ..parameter import Parameter
from ._forms import Forms, argument, is_sizes

Dims = Union[str, Sequence[str]]
Sizes = Union[int, Sequence[int], None]


def _layer_norm_pytorch(normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
                        elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                        dtype: Any = None) -> None:
    """PyTorch's ``nn.LayerNorm``: over the last dims, of sizes ``normalized_shape``."""


def _layer_norm_named(dims: Any, sizes: Sizes = None, eps: float = 1e-5, elementwise_affine: bool = True,
                      bias: bool = True, dtype: Any = _dtypes.float32, device: Any = None) -> None:
    """Over the dims named ``dims``, of sizes ``sizes``."""


def _rms_norm_pytorch(normalized_shape: Union[int, Sequence[int]], eps: Optional[float] = None,
                      elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
    """PyTorch's ``nn.RMSNorm``: over the last dims, of sizes ``normalized_shape``."""


def _rms_norm_named(dims: Any, sizes: Sizes = None, eps: Optional[float] = 1e-6, elementwise_affine: bool = True,
                    dtype: Any = _dtypes.float32, device: Any = None) -> None:
    """Over the dims named ``dims``, of sizes ``sizes``."""


def _is_pytorch(args: tuple, kwargs: dict) -> bool:
    return is_sizes(argument(args, kwargs, 0, "normalized_shape"))


_FORMS = {"LayerNorm": Forms("LayerNorm", _layer_norm_pytorch, _layer_norm_named, _is_pytorch),
          "RMSNorm": Forms("RMSNorm", _rms_norm_pytorch, _rms_norm_named, _is_pytorch)}


def _bind(layer: str, args: tuple, kwargs: dict) -> Tuple[Tuple[Any, ...], Tuple[int, ...], Dict[str, Any]]:
    """The normalised dims (names, or the trailing positions ``-k..-1``), their sizes, and all arguments."""
    forms = _FORMS[layer]
    pytorch, a, _ = forms.bind(args, kwargs)
    if pytorch:
        shape = a["normalized_shape"]
        sizes = (shape,) if isinstance(shape, int) else tuple(shape)
        if min(sizes) < 0:
            raise _names.NamesError(
                f"{layer}: normalized_shape {sizes} has a negative size. PyTorch's {layer}(normalized_shape) takes "
                f"the sizes of the last dims, not their positions; to choose the dims, give them by name: "
                f"{layer}('embed', 16).")
        return tuple(range(-len(sizes), 0)), sizes, a
    dims, sizes = _dims_and_sizes(a["dims"], a["sizes"], forms)
    return dims, sizes, a


def _dims_and_sizes(dims: Any, sizes: Sizes, forms: Forms) -> Tuple[Tuple[Any, ...], Tuple[int, ...]]:
    """``("embed",), (16,)`` from ``"embed", 16``, ``("h", "d"), (4, 8)``, or ``{"embed": 16}``; dims that
    are all None are the last ones, ``(-k, ..., -1)``."""
    op = forms.layer
    if isinstance(dims, dict):
        if sizes is not None:
            raise TypeError(f"{op}: give the sizes either in the dims dict or as sizes=, not both.")
        dims, sizes = tuple(dims), tuple(dims.values())
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if sizes is None:
        raise TypeError(f"{op}: give the sizes of the normalised dims {dims}, e.g. {op}('embed', 16).")
    sizes = (sizes,) if isinstance(sizes, int) else tuple(sizes)
    if len(dims) != len(sizes):
        raise ValueError(f"{op}: {len(dims)} dims {dims} but {len(sizes)} sizes {sizes}; give one size per dim.")
    if not dims:
        raise ValueError(f"{op}: give at least one dim to normalise over.")
    if all(d is None for d in dims):
        return tuple(range(-len(dims), 0)), sizes
    named = {f"dims[{i}]": d for i, d in enumerate(dims)}
    forms.check(named, lambda d: isinstance(d, str), "a dim name (str), or every dim None (the last dims)", named)
    _names.validate(dims, len(dims), op)  # valid identifiers, no repeats
    return dims, sizes


def _names_of(dims: Tuple[Any, ...]) -> Tuple[Optional[str], ...]:
    """The parameters' names: the dims' names, or unnamed for dims found by position."""
    return tuple(d if isinstance(d, str) else None for d in dims)


class _Norm(Module):
    """What LayerNorm and RMSNorm share: the normalised dims, their sizes, the check of a positional input."""

    dims: Tuple[Any, ...]
    sizes: Tuple[int, ...]

    @property
    def normalized_shape(self) -> Tuple[int, ...]:
        """PyTorch's name for ``sizes``."""
        return self.sizes

    def _dims_of(self, x: Tensor) -> Any:
        """The dims to normalise ``x`` over, as the functional op takes them."""
        dims = self.dims
        if isinstance(dims[0], int) and tuple(x.shape[-len(dims):]) != self.sizes:
            raise ValueError(f"{type(self).__name__}: normalised over the last dims of sizes {self.sizes}, but "
                             f"the input has shape {x.shape} (names {_names.fmt(x.names)}).")
        return dims[0] if len(dims) == 1 else dims

    def extra_repr(self) -> str:
        if isinstance(self.dims[0], int):
            shape = str(self.sizes)
        else:
            shape = "{" + ", ".join(f"{d!r}: {s}" for d, s in zip(self.dims, self.sizes)) + "}"
        return f"{shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LayerNorm(_Norm):
    """Reads and writes the same dims: subtracts the mean and divides by the standard deviation over
    ``dims`` (sizes ``sizes``), then scales by ``weight`` and shifts by ``bias`` (named ``dims``).

    ``LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None)``
    is PyTorch's (the last dims); ``LayerNorm(dims, sizes=None, eps=1e-5, elementwise_affine=True, bias=True,
    dtype=nt.float32, device=None)`` the named one: ``LayerNorm("embed", 16)``,
    ``LayerNorm(("head", "head_dim"), (4, 8))`` or ``LayerNorm({"embed": 16})``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.dims, self.sizes, a = _bind("LayerNorm", args, kwargs)
        self.eps = a["eps"]
        self.elementwise_affine = a["elementwise_affine"]
        options = {"names": _names_of(self.dims), "dtype": a["dtype"], "device": a["device"]}
        if self.elementwise_affine:
            self.weight = Parameter(ones(*self.sizes, **options))
            self.bias = Parameter(zeros(*self.sizes, **options)) if a["bias"] else None
        else:
            self.weight = None
            self.bias = None

    def forward(self, x: Tensor) -> Tensor:
        """``x`` normalised over ``dims``; same names."""
        return F.layer_norm(x, weight=self.weight, bias=self.bias, eps=self.eps, dim=self._dims_of(x))


class RMSNorm(_Norm):
    """Reads and writes the same dims: divides by the root mean square over ``dims`` (sizes ``sizes``),
    then scales by ``weight`` (named ``dims``).

    ``RMSNorm(normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None)`` is
    PyTorch's (the last dims); ``RMSNorm(dims, sizes=None, eps=1e-6, elementwise_affine=True,
    dtype=nt.float32, device=None)`` the named one: ``RMSNorm("embed", 16)``.  ``eps=None`` is the
    machine epsilon of the input's dtype, as in PyTorch.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.dims, self.sizes, a = _bind("RMSNorm", args, kwargs)
        self.eps = a["eps"]
        self.elementwise_affine = a["elementwise_affine"]
        if self.elementwise_affine:
            self.weight = Parameter(ones(*self.sizes, names=_names_of(self.dims), dtype=a["dtype"],
                                         device=a["device"]))
        else:
            self.weight = None

    def forward(self, x: Tensor) -> Tensor:
        """``x`` divided by its root mean square over ``dims``; same names."""
        return F.rms_norm(x, weight=self.weight, eps=self.eps, dim=self._dims_of(x))
