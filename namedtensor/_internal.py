"""The internal surface of the modules above ``ops``: making tensors from raw arrays and back.

``nn``, ``optim``, ``distributed``, ``serialization``, ``data``, ``cuda``, the interop modules
(``interop``, ``numpy_protocols``, ``display``, ``checking``, ``tracing``) and ``testing`` work on
raw backend arrays in places (an optimizer step, a DDP bucket, a checkpoint, a device move).  The
rule: those modules use only this module and the public API (``t.names``, ``t.requires_grad``,
``t.grad_fn``, ``t.device``, ``t.array``..., and the public functions of ``_names`` and ``_dtypes``),
never a tensor's private slots or another module's underscore names.  ``tests/test_internal_api.py``
checks it.

This module belongs to the ``ops`` layer: it imports ``tensor``, ``autograd.mode`` and ``ops``,
never the modules above.  Each function is one attribute access or call, so hot paths (layers'
forward, optimizer steps, DDP hooks) pay nothing for going through it.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable, Optional, Tuple, Type, TypeVar

from ._dtypes import DType
from .autograd import mode
from .autograd.mode import op_span, version_counter
from .backends.base import Backend
from .ops._common import flag, int_sizes, operand
from .ops.dtype import _target as parse_to_arg
from .tensor import Tensor

__all__ = ["wrap", "raw", "backend_of", "key_of", "bump_version", "replace_array", "tensor_state",
           "restore_tensor_state", "check_inplace", "leaf_view", "swap_tracer", "op_span", "int_sizes", "operand",
           "parse_to_arg", "flag"]

Names = Tuple[Optional[str], ...]
T = TypeVar("T", bound=Tensor)

_make = Tensor._make


def wrap(array: Any, names: Names, backend: Backend) -> Tensor:
    """A new tensor (a leaf, no grad) around raw ``array`` of ``backend``, named ``names``: a tuple
    with one name or None per dim, already validated (``_names.validate``)."""
    return _make(array, names, backend)


def raw(t: Tensor) -> Any:
    """``t``'s raw backend array as stored, not a copy.  A 0-dim result may be stored as a NumPy
    scalar; ``t.array`` always gives an array of the backend."""
    return t._data


def backend_of(t: Tensor) -> Backend:
    """The backend of ``t``'s array (its device's namespace of raw-array functions)."""
    return t._B


def key_of(t: Tensor) -> Tuple[Any, ...]:
    """``t``'s part of a compiled call's cache key: its names, shape, dtype, backend and whether it requires
    grad (one call: a compiled call of a small chain pays a few microseconds in all)."""
    a = t._data
    return t._names, a.shape, a.dtype, t._B, t._rg


def bump_version(t: Tensor) -> None:
    """Count an in-place write into ``t``'s array, so that graphs which saved the old values refuse them."""
    version_counter(t)[0] += 1


#: the classes of plain values (:func:`is_plain_value`), besides tuples of them
PLAIN_TYPES = frozenset((bool, int, float, complex, str, type(None), DType))


#: the classes of functions, which ``nt.compile``'s signature holds by identity where they are settings: a
#: helper or an activation rebound (``act = nt.gelu``, ``model.forward = f``)
FUNCTION_TYPES = frozenset((types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial))


def is_plain_value(x: Any) -> bool:
    """Whether ``x`` is a number, a string, None, a dtype (``nt.float16``: one object per dtype), or a tuple
    of them: a setting that a compiled graph specialises (a module's ``eps``, a global scale, an output
    dtype), so ``nt.compile`` guards on its value."""
    return x.__class__ in PLAIN_TYPES or (x.__class__ is tuple and all(is_plain_value(y) for y in x))


def replace_array(t: Tensor, array: Any, backend: Optional[Backend] = None) -> None:
    """Give ``t`` a new array in place (on ``backend``, default its own): the object stays, so modules and
    optimizers keep it (``Module.to``).  Counts as an in-place write."""
    t._data = array
    if backend is not None:
        t._B = backend
    bump_version(t)


_UNSET = object()


def tensor_state(t: Tensor) -> tuple:
    """What an in-place edit traced by ``nt.compile`` changes of ``t`` (its array, backend, names and
    history), for :func:`restore_tensor_state` once the trace is over."""
    return t._data, t._B, t._names, t._node, t._rg, getattr(t, "_idx", _UNSET)


def restore_tensor_state(t: Tensor, state: tuple) -> None:
    """Put back what :func:`tensor_state` took."""
    t._data, t._B, t._names, t._node, t._rg, idx = state
    if idx is not _UNSET:
        t._idx = idx


def check_inplace(t: Tensor, op: str, *others: Any) -> None:
    """Refuse op ``op`` writing into ``t`` (reading ``others``) while grad mode would lose gradients."""
    t._check_inplace(op, *others)


def leaf_view(source: Tensor, names: Names, cls: Type[T] = Tensor) -> T:
    """A new leaf of class ``cls`` (``Tensor`` or a subclass) over ``source``'s array, named ``names``
    (validated), not requiring grad: a view, so in-place edits and version counts show in both."""
    t = Tensor.__new__(cls)
    t._data = source._data
    t._names = names
    t._B = source._B
    t._node = None
    t._rg = False
    t._vc = version_counter(source)
    return t


def swap_tracer(tracer: Optional[Callable]) -> Optional[Callable]:
    """Install ``tracer``, called as ``tracer(op, inputs, outputs, params)`` after every op of this
    thread (None: no tracer), and return the one it replaces, to be put back when the recording ends
    (traces nest).  While it runs, ``op_span()`` is the op's ``(start, end)`` in ``time.perf_counter_ns``."""
    return mode.swap_tracer(tracer)
