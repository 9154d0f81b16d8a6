"""In-place ops: ``add_ sub_ mul_ div_ clamp_ masked_fill_ zero_ fill_ copy_``, ``t[key] = value``
and the augmented operators ``+= -= *= /=``.

Name rule (:func:`namedtensor._names.inplace`): self keeps its dims; the other
operand's names unify with self's (rule 2), which may only fill self's ``None``
dims, and self takes the unified names.  ``t[key] = value``: the value's names
unify with the indexed region's (the names ``t[key]`` would have) and fill self's
``None`` dims through the region dims that are self's (:func:`namedtensor._names.setitem`).

What an in-place op may do: the other operand broadcasts onto self without
changing its shape; the result is cast to self's dtype by NumPy's 'same_kind'
rule (bool -> int -> float, never a float into an int); tensors that require
grad are refused while grad mode is on (``Tensor._check_inplace``; an optimizer
step runs under ``nt.no_grad()``).  The write goes into self's array, so every
view of it sees the change, and bumps the version counter that self shares with
its views: a graph that saved one of them for backward then refuses to use it.
"""

from __future__ import annotations

from typing import Any

from .. import _names
from ..autograd.graph import _device_error
from ..tensor import Tensor
from ._common import operand
from .indexing import as_number, check_fits, check_value_kind, masked_args, plan, scalar_kind

_ALL = (Ellipsis,)


def _write(t: Tensor, key, value, op: str) -> None:
    """``t.array[key] = value``, then bump the version; backend errors become clear ones."""
    try:
        t._B.setitem(t.array, key, value)
    except (ValueError, IndexError) as e:
        raise _write_error(t, e, value, op) from None
    t._bump()


def _write_error(t: Tensor, e: Exception, value, op: str) -> Exception:
    """The clear error for a write into ``t`` that the backend refused with ``e``."""
    if isinstance(e, IndexError):
        return IndexError(f"{op}: {e} (writing into a tensor with names {_names.fmt(t._names)}, shape {t.shape}).")
    if "read-only" in str(e):
        return ValueError(
            f"{op}: cannot write into this tensor (names {_names.fmt(t._names)}, shape {t.shape}): its data "
            "is a read-only view (expand/broadcast_to repeat elements without copying them). Write into a "
            "clone() instead."
        )
    shape = getattr(value, "shape", ())
    return ValueError(
        f"{op}: cannot write a value of shape {tuple(shape)} into the indexed part of a tensor with names "
        f"{_names.fmt(t._names)} and shape {t.shape}: {e}"
    )


def _other(t: Tensor, other, names, op: str):
    """``other`` ready to combine with ``t`` in place: ``(raw operand, names after filling)``.

    A tensor (or array) must fit ``t``'s shape; it is cast to ``t``'s dtype so the computation stays
    in it (and strict backends need no mixed-kind promotion).  Numbers and tensors of a higher kind
    than ``t``'s are refused, so every result below has ``t``'s dtype.
    """
    number = as_number(other)
    if number is not None:
        check_value_kind(t.dtype, scalar_kind(number), op)
        return number, names
    other = operand(other, t, op)
    if other._B is not t._B and t.device != "meta":  # a meta tensor (dry run) takes any operand's shape
        raise _device_error(op, t, other)
    names = _names.inplace(names, other._names, op)
    check_fits(t._data.shape, other._data.shape, "the other operand", op)
    dt, odt = t.dtype, other.dtype
    check_value_kind(dt, odt.kind, op)
    data = other.array
    if odt is not dt:
        data = t._B.astype(data, t._B.native(dt))
    return data, names


def _apply_inplace(t: Tensor, fn: str, operands: tuple, op: str) -> None:
    """``t = B.<fn>(t, *operands)`` into ``t``'s own buffer, then bump the version.

    Where the backend takes ``out=`` the result is computed straight into the buffer (no temporary,
    one pass; NumPy handles an operand that overlaps it); elsewhere it is computed, then copied in.
    """
    B = t._B
    x = t.array
    if not B.supports_out:
        _write(t, _ALL, getattr(B, fn)(x, *operands), op)
        return
    try:
        getattr(B, fn)(x, *operands, out=x)
    except ValueError as e:
        raise _write_error(t, e, operands[0], op) from None
    t._bump()


def _binary_inplace(name: str, backend_fn: str, float_result: bool = False):
    def fn(self: Tensor, other) -> Tensor:
        self._check_inplace(name, other)
        if float_result and self.dtype.kind != "f":
            raise TypeError(
                f"{name}: true division gives floats, which cannot be written into a tensor of dtype "
                f"{self.dtype!r}; use the out-of-place op or convert first (e.g. .float())."
            )
        o, names = _other(self, other, self._names, name)
        _apply_inplace(self, backend_fn, (o,), name)
        self._names = names
        return self

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"In place ``{name[:-1]}``: other broadcasts onto self (no growing); other's names may "
                  "fill self's None dims; returns self.")
    return fn


add_ = _binary_inplace("add_", "add")
sub_ = _binary_inplace("sub_", "subtract")
mul_ = _binary_inplace("mul_", "multiply")
div_ = _binary_inplace("div_", "divide", float_result=True)


def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """In place ``clamp``: limit to ``[min, max]`` (numbers or tensors that fit self); returns self."""
    self._check_inplace("clamp_", min, max)
    if min is None and max is None:
        raise ValueError("clamp_: give min, max or both.")
    names = self._names
    lo = hi = None
    if min is not None:
        lo, names = _other(self, min, names, "clamp_")
    if max is not None:
        hi, names = _other(self, max, names, "clamp_")
    _apply_inplace(self, "clip", (lo, hi), "clamp_")
    self._names = names
    return self


def masked_fill_(self: Tensor, mask: Any, value: Any) -> Tensor:
    """In place ``masked_fill``: ``value`` (number or 0-dim tensor) where ``mask`` is true; returns self."""
    self._check_inplace("masked_fill_", value)
    mask, value, names = masked_args(self, mask, value, "masked_fill_")
    B = self._B
    dt = self.dtype
    v = B.astype(value.array, B.native(dt)) if isinstance(value, Tensor) else B.asarray(value, dtype=dt)
    m = mask.array
    shape = self._data.shape
    if mask._data.shape != shape:
        m = B.broadcast_to(m, shape)
    # a mask write touches only the selected entries: no full-size temporary, no second pass
    _write(self, m, v, "masked_fill_")
    self._names = names
    return self


def fill_(self: Tensor, value: Any) -> Tensor:
    """Set every element to ``value`` (a number or a 0-dim tensor); returns self."""
    self._check_inplace("fill_", value)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"fill_: the value must be a number or a 0-dim tensor, got shape {value.shape}; "
                             "use copy_ to write a tensor.")
    elif as_number(value) is None:
        raise TypeError(f"fill_: the value must be a number or a 0-dim tensor, got {type(value).__name__}.")
    v, _ = _other(self, value, self._names, "fill_")
    _write(self, _ALL, v, "fill_")
    return self


def zero_(self: Tensor) -> Tensor:
    """Set every element to zero; returns self."""
    return fill_(self, False if self.dtype.kind == "b" else 0)


def copy_(self: Tensor, src: Any) -> Tensor:
    """Copy ``src`` (a tensor or array that broadcasts onto self) into self; returns self.

    ``src``'s names may fill self's ``None`` dims; its dtype is cast to self's ('same_kind')."""
    self._check_inplace("copy_", src)
    if as_number(src) is not None and getattr(src, "ndim", None) is None:  # a 0-dim array is an array
        raise TypeError("copy_: src must be a tensor or an array; use fill_ for a number.")
    v, names = _other(self, src, self._names, "copy_")
    _write(self, _ALL, v, "copy_")
    self._names = names
    return self


def setitem(self: Tensor, key: Any, value: Any) -> None:
    """``t[key] = value``: key as for ``t[key]`` (positional or a dict by name); value a number, tensor
    or array whose names unify with the indexed part's names and may fill self's ``None`` dims."""
    self._check_inplace("setitem", value)
    raw, tokens, _, _ = plan(self, key, "setitem")
    number = as_number(value)
    if number is not None:
        check_value_kind(self.dtype, scalar_kind(number), "setitem")
        _write(self, raw, number, "setitem")
        return
    value = operand(value, self, "setitem")
    if value._B is not self._B and self.device != "meta":
        raise _device_error("setitem", self, value)
    names = _names.setitem(self._names, tokens, value._names, "setitem")
    check_value_kind(self.dtype, value.dtype.kind, "setitem")
    _write(self, raw, value.array, "setitem")
    self._names = names


METHODS = {
    "add_": add_, "sub_": sub_, "mul_": mul_, "div_": div_, "clamp_": clamp_, "clip_": clamp_,
    "masked_fill_": masked_fill_, "fill_": fill_, "zero_": zero_, "copy_": copy_, "__setitem__": setitem,
    "__iadd__": add_, "__isub__": sub_, "__imul__": mul_, "__itruediv__": div_,
}
