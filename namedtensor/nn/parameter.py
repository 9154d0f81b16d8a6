"""``Parameter``: a named tensor that a :class:`~namedtensor.nn.Module` registers as learnable.

A parameter is an ordinary leaf :class:`~namedtensor.Tensor` that requires grad;
the subclass only marks it, so that ``module.weight = Parameter(...)`` registers
it.  Ops on a parameter return plain tensors (names follow the op's rule as for
any tensor); the parameter itself keeps its names for life, and so does its
``.grad``.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .. import _names
from .._internal import leaf_view
from ..ops.creation import tensor
from ..tensor import Tensor


class Parameter(Tensor):
    """A learnable tensor: ``Parameter(nt.zeros(4, 8, names=("hidden", "embed")))``.

    ``data`` is a Tensor (its array is shared, not copied, and its names kept unless ``names=``
    is given) or anything :func:`namedtensor.tensor` accepts.  ``requires_grad`` defaults to True.
    """

    __slots__ = ()

    def __new__(cls, data=None, names: Optional[Sequence] = None, requires_grad: bool = True) -> "Parameter":
        if data is None:
            raise TypeError("Parameter: give the data, e.g. Parameter(nt.zeros(4, names=('hidden',))).")
        if not isinstance(data, Tensor):
            data = tensor(data, names=names)
        names = data.names if names is None else _names.validate(names, data.ndim, "Parameter")
        p = leaf_view(data, names, cls)  # a parameter made from a tensor is a view of it, as in PyTorch
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data=None, names: Optional[Sequence] = None, requires_grad: bool = True) -> None:
        pass  # all done in __new__ (Tensor has no __init__ to call)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce__(self):
        args = (self._B.to_numpy(self.array), self._names, self.dtype.name, self._rg)
        return (_rebuild_parameter, args if self.device == "cpu" else args + (self.device,))

    def __deepcopy__(self, memo) -> "Parameter":
        p = Parameter(self.detach().clone(), requires_grad=self._rg)
        memo[id(self)] = p
        return p


def _rebuild_parameter(array, names, dtype, requires_grad, device=None) -> Parameter:
    return Parameter(tensor(array, names=names, dtype=dtype, device=device), requires_grad=requires_grad)
