"""``Embedding``: a lookup table from integer indices to vectors along a new dim.

Two signatures (:mod:`._forms`).  PyTorch's ``Embedding(10, 3)`` (``num_embeddings,
embedding_dim``) has an unnamed weight ``(10, 3)`` and adds an unnamed dim at the end.  The named
``Embedding(10, 3, "embed")`` names its weight ``(vocab_dim, out_dim)``; the output has the index
tensor's names plus ``out_dim`` at the end (``("batch", "seq")`` -> ``("batch", "seq", "embed")``).
The third argument decides: a str is ``out_dim``, an int or None PyTorch's ``padding_idx``.
"""

from __future__ import annotations

from typing import Any, Optional

from ... import _dtypes
from ...autograd.graph import no_grad
from ...ops.creation import empty
from ...ops.elementwise import where
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ._forms import Forms, argument, is_size


def _pytorch(num_embeddings: int, embedding_dim: int, padding_idx: Optional[int] = None,
             max_norm: Optional[float] = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
             sparse: bool = False, _weight: Any = None, _freeze: bool = False, device: Any = None,
             dtype: Any = None) -> None:
    """PyTorch's ``nn.Embedding``: unnamed weight ``(num_embeddings, embedding_dim)``."""


def _named(num: int, size: int, out_dim: Optional[str], vocab_dim: Optional[str] = "vocab", *,
           padding_idx: Optional[int] = None, dtype: Any = _dtypes.float32, device: Any = None) -> None:
    """Weight ``(vocab_dim, out_dim)`` of shape ``(num, size)``."""


def _is_pytorch(args: tuple, kwargs: dict) -> bool:
    return not isinstance(argument(args, kwargs, 2), str) and "out_dim" not in kwargs and "vocab_dim" not in kwargs


_FORMS = Forms("Embedding", _pytorch, _named, _is_pytorch)

#: PyTorch's options this layer does not have, with their "off" values: any other value is refused
_UNSUPPORTED = {"max_norm": None, "scale_grad_by_freq": False, "sparse": False, "_weight": None, "_freeze": False}


class Embedding(Module):
    """Reads integer indices in ``[0, num)`` (any names), writes ``out_dim`` (size ``size``) at the end.

    ``Embedding(num_embeddings, embedding_dim, padding_idx=None, ..., device=None, dtype=None)`` is
    PyTorch's (unnamed weight and output dim); ``max_norm``, ``scale_grad_by_freq``, ``sparse``,
    ``_weight`` and ``_freeze`` are not supported and raise NotImplementedError.
    ``Embedding(num, size, out_dim, vocab_dim="vocab", *, padding_idx=None, dtype=nt.float32,
    device=None)`` is the named one.  Weight ``(vocab_dim, out_dim)`` of shape ``(num, size)``,
    initialised N(0, 1) as in PyTorch.  ``padding_idx``, as in PyTorch: that row starts at zero and
    gets no gradient.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        pytorch, a, _ = _FORMS.bind(args, kwargs)
        if pytorch:
            _FORMS.check(a, is_size, "an int", ("num_embeddings", "embedding_dim"))
            for key, off in _UNSUPPORTED.items():
                if (a[key] is not None) if off is None else a[key] != off:
                    raise NotImplementedError(f"Embedding: {key}={a[key]!r} is not supported; leave it at "
                                              f"PyTorch's default {off!r}.")
            a.update(num=a["num_embeddings"], size=a["embedding_dim"], out_dim=None, vocab_dim=None)
        else:
            _FORMS.check(a, is_size, "an int", ("num", "size"))
        self.num, self.size = a["num"], a["size"]
        self.out_dim, self.vocab_dim = a["out_dim"], a["vocab_dim"]
        self.padding_idx = _padding_index(a["padding_idx"], self.num)
        self.weight = Parameter(empty(self.num, self.size, names=(self.vocab_dim, self.out_dim), dtype=a["dtype"],
                                      device=a["device"]))
        self.reset_parameters()

    @property
    def num_embeddings(self) -> int:
        """PyTorch's name for ``num``."""
        return self.num

    @property
    def embedding_dim(self) -> int:
        """PyTorch's name for ``size``."""
        return self.size

    def reset_parameters(self) -> None:
        """N(0, 1), as PyTorch's ``nn.Embedding``; the padding row zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, indices: Tensor) -> Tensor:
        """The rows of the weight at ``indices``: names ``indices.names + (out_dim,)``."""
        out = F.embedding(indices, self.weight, dim=self.vocab_dim)
        if self.padding_idx is None:
            return out
        # the padding row's value, cut off from the gradient: it reaches the weight only through these places
        return where((indices == self.padding_idx).unsqueeze(-1), out.detach(), out)

    def extra_repr(self) -> str:
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        if self.vocab_dim is None and self.out_dim is None:
            return f"{self.num}, {self.size}{padding}"
        return f"{{{self.vocab_dim!r}: {self.num}}} -> {{{self.out_dim!r}: {self.size}}}{padding}"


def _padding_index(padding_idx: Optional[int], num: int) -> Optional[int]:
    """``padding_idx`` in ``[0, num)``; a negative one counts from the end, as in PyTorch."""
    if padding_idx is None:
        return None
    if not is_size(padding_idx):
        raise TypeError(f"Embedding: padding_idx must be an int or None, got {padding_idx!r}.")
    if not -num <= padding_idx < num:
        raise ValueError(f"Embedding: padding_idx={padding_idx} must be within the {num} embeddings "
                         f"([{-num}, {num - 1}]).")
    return padding_idx % num
