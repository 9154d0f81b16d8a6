"""Helpers every op module shares: checking and converting arguments, and reducing gradients of broadcasts."""

from __future__ import annotations

from typing import Optional, Union

from .. import _dtypes, _names, backends
from ..autograd.graph import Op, _common_backend, apply
from ..autograd.mode import current_tracer
from ..tensor import Tensor

SCALARS = (bool, int, float, complex)


def tensor_arg(x, op: str, what: Optional[str] = None) -> Tensor:
    """``x`` itself, or the TypeError saying that ``op``'s argument (``what``, where there are several)
    is not a tensor."""
    if not isinstance(x, Tensor):
        if what is None:
            raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}.")
        raise TypeError(f"{op}: {what} must be a Tensor, got {type(x).__name__}.")
    return x


def as_float_array(B, x):
    """Raw array ``x`` itself when floating-point or complex, else as float64 (NumPy's result for integer
    input, on every backend)."""
    return x if B.dtype_of(x).kind in "fc" else B.astype(x, B.native(_dtypes.float64))


def as_float_tensor(t: Tensor) -> Tensor:
    """``t`` itself when floating-point, else a float64 copy, as NumPy promotes (integer tensors never
    carry a graph)."""
    B = t._B
    data = as_float_array(B, t._data)
    return t if data is t._data else Tensor._make(data, t._names, B)


def operand(x, like: Tensor, op: str) -> Union[Tensor, bool, int, float]:
    """A binary op's other operand: a tensor, a Python scalar (kept raw), or an array (an unnamed constant)."""
    if isinstance(x, Tensor) or x.__class__ in SCALARS:
        return x
    B = like._B
    if B.device == "meta" and not B.is_array(x):
        B = backends.cpu()  # a dry run keeps the constant's values: a compiled graph holds them
    if isinstance(x, (list, tuple)) and _holds_tensor(x):
        # NumPy would stack the tensors into an unnamed array: names and gradients lost, and x.max(dim)'s
        # (values, indices) subtracted as two rows where the sizes happen to broadcast
        fields = getattr(type(x), "_fields", None)
        hint = (f" {type(x).__name__} is the pair {fields} that ops such as max(dim) return: take one, e.g. "
                f".{fields[0]}" if fields else " Stack them first (nt.stack) or pass one tensor")
        raise TypeError(f"{op}: unsupported operand of type {type(x).__name__} holding tensors; expected a Tensor, "
                        f"a number or an array.{hint}.")
    if B.is_array(x) or hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        data = B.asarray(x)
        return Tensor._make(data, _names.unnamed(len(data.shape)), B)
    raise TypeError(f"{op}: unsupported operand of type {type(x).__name__}; expected a Tensor, a number or an array.")


def _holds_tensor(x) -> bool:
    return any(isinstance(e, Tensor) or (isinstance(e, (list, tuple)) and _holds_tensor(e)) for e in x)


def with_param(op: str, t: Tensor, other: Tensor) -> Tensor:
    """``t``, ready for an op that also reads tensor ``other`` as a parameter (indices, targets), which
    ``apply()`` does not check: ``other`` on another device is the device error, except in a shape dry
    run, where a real ``t`` that meets a meta ``other`` goes on as its meta spec."""
    if other._B is t._B:
        return t
    B = _common_backend(op, t, other)
    return t if B is t._B else t.to(B.device)


def has_values(B) -> bool:
    """False on the meta device (a shape dry run): there, ops skip their checks of values (index
    ranges), which a real run makes."""
    return B.device != "meta"


class _Rename(Op):
    """Give the same data other names (a view); the gradient is renamed back."""

    name = "rename"
    complex_grad = True
    view = True

    @staticmethod
    def forward(B, x):
        return x

    @staticmethod
    def backward(node, g):
        return (with_names(g, node.in_names[0]),)


def row_hooks(B, rows):
    """What runs an op's row kernels (``Op.row_kernels``): its ``rows`` param when given, else the backend."""
    return B if rows is None else rows


def traced_as_composition() -> bool:
    """Whether this thread's ops report to a tracer that wants compositions (nt.compile's): an op that is
    one fused step eagerly then records its parts instead, which fuse with the ops around them."""
    tracer = current_tracer()
    return tracer is not None and getattr(tracer, "traces_compositions", False)


def with_names(t: Tensor, names) -> Tensor:
    """``t`` with ``names`` (already validated), differentiably; ``t`` itself when they are equal."""
    if t._names == names:
        return t
    return apply(_Rename, (t,), names)


def sum_to(g: Tensor, shape, names) -> Tensor:
    """Reduce a broadcast gradient back to an operand's ``shape``, with the operand's ``names``."""
    gshape = g._data.shape
    if gshape == shape:
        return with_names(g, names)
    lead = len(gshape) - len(shape)
    ones = tuple(lead + i for i, s in enumerate(shape) if s == 1 and gshape[lead + i] != 1)
    if ones:
        g = g.sum(ones, keepdim=True)
    if lead:
        g = g.sum(tuple(range(lead)))
    return with_names(g, names)


def inverse_permutation(perm) -> tuple:
    """The permutation that undoes ``perm`` (for gradients of reorderings)."""
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return tuple(inverse)


def is_bool(value: object) -> bool:
    """Whether ``value`` is a bool, Python's or NumPy's (NumPy's is no ``int``, and no import is needed)."""
    return isinstance(value, bool) or (value.__class__.__name__ in ("bool", "bool_")
                                       and value.__class__.__module__ == "numpy")


def flag(value: object, name: str, op: str) -> bool:
    """A bool argument (``keepdim``, ``descending``...) as a Python bool: ``keepdim="yes"`` would be true
    and ``keepdim=[]`` false, so anything but a bool (Python's or NumPy's) is refused."""
    if value.__class__ is bool:
        return value
    if is_bool(value):
        return bool(value)
    raise TypeError(f"{op}: {name} must be a bool, got {type(value).__name__} {value!r}.")


def int_sizes(args, op: str, nonnegative: bool = False) -> tuple:
    """``f(2, 3)`` and ``f((2, 3))`` alike, as a tuple of ints (NumPy ints accepted, bools refused)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    out = []
    for s in args:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{op}: sizes must be ints, got {type(s).__name__} {s!r}.")
        s = int(s.__index__())
        if nonnegative and s < 0:
            raise ValueError(f"{op}: sizes must be >= 0, got {s}.")
        out.append(s)
    return tuple(out)
