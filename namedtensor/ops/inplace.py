"""In-place ops: ``add_ sub_ mul_ div_ clamp_ masked_fill_ zero_ fill_ copy_``, ``t[key] = value``,
the augmented operators ``+= -= *= /= &= |= ^= <<= >>=``, an in-place variant ``x.op_()`` of every other
elementwise op (``exp_ relu_ pow_ logical_and_ xlogy_ bitwise_and_``..., made from the exported names of the
elementwise families, ``elementwise``, ``special_math`` and ``bitwise``, so an op added there gets its
variant), and the samplers ``uniform_ normal_ bernoulli_ exponential_ random_
geometric_ log_normal_ cauchy_``.

Name rule (:func:`namedtensor._names.inplace`): self keeps its dims; the other
operand's names unify with self's (rule 2), which may only fill self's ``None``
dims, and self takes the unified names.  ``t[key] = value``: the value's names
unify with the indexed region's (the names ``t[key]`` would have) and fill self's
``None`` dims through the region dims that are self's (:func:`namedtensor._names.setitem`).

What an in-place op may do: the other operand broadcasts onto self without
changing its shape; the result is cast to self's dtype by NumPy's 'same_kind'
rule (bool -> int -> float, never a float into an int).  The write goes into
self's array, so every view of it sees the change, and bumps the version
counter that self shares with its views: a graph that saved one of them for
backward then refuses to use it.

In the graph, as in PyTorch: an edit in grad mode of a tensor that requires grad, or with an
operand that does, is recorded as the out-of-place op plus a write.  Self's history is rebased: its
new node has self's previous node as input (the old value, copied first where the op's backward
needs it, as PyTorch's ``original_self``).  An edit of a view updates the history of the tensor it
views (:class:`_CopySlices`, PyTorch's ``CopySlices``), and every view of an edited tensor rebuilds
its own from it when next used (``autograd.graph.refresh``).  A leaf that requires grad, or a view
of one, is refused outside ``no_grad`` (an optimizer step runs under ``nt.no_grad()``).  With no
graph to record (``no_grad``, or nothing requires grad), the edit is a plain write, as cheap as
before.  :func:`edit` is the machinery for any op: ``F.dropout(x, inplace=True)`` is
``edit(x, dropout, "dropout", p=p)``.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable

from .. import _dtypes, _names
from ..autograd.graph import (
    Op, _device_error, _state, apply, enable_grad, no_grad, record, refresh, version_counter,
)
from ..tensor import Tensor
from . import bitwise, elementwise, special_math
from ._common import operand, sum_to, tensor_arg, with_names
from .dtype import clone
from .elementwise import clip, where
from .indexing import (
    _GetItem, _Take, as_number, check_fits, check_value_kind, masked_args, masked_fill, plan, scalar_kind,
)

_ALL = (Ellipsis,)


# ----------------------------------------------------------------------------- the graph of an edit


def _path(t: Tensor) -> tuple:
    """``(root, path)``: the tensor whose data ``t`` views (``t`` itself if it is no view) and the view
    ops from it to ``t``, ``((op, params, names), ...)``."""
    path = []
    view = getattr(t, "_view", None)
    while view is not None:
        base, op, params = view
        path.append((op, params, t._names))
        t = base
        view = getattr(t, "_view", None)
    path.reverse()
    return t, tuple(path)


def _replay(t: Tensor, path: tuple) -> Tensor:
    """The view that ``path`` takes of ``t``."""
    for op, params, names in path:
        t = apply(op, (t,), names, **params)
    return t


def _leaf_error(op: str, t: Tensor, what: str) -> RuntimeError:
    """A leaf that requires grad (``t``) edited in place, itself or through a view (``what``)."""
    return RuntimeError(
        f"{op}: in-place edit of {what} that requires grad (a leaf, names {_names.fmt(t._names)}): its "
        "gradient would be of a value that no longer exists. Use the out-of-place op (x = x + y), or edit "
        "under nt.no_grad() (e.g. an optimizer step)."
    )


#: what :func:`_records` returns in nt.compile's trace for an op that makes its edit a value there
TRACED = "traced"


def _records(self: Tensor, op: str, *others: Any) -> Any:
    """Whether the edit ``op`` of ``self`` (reading ``others``) must be recorded in the graph; refuses
    leaves that require grad and views of them, as PyTorch does.  In nt.compile's trace (a tracer with an
    ``edit_hook``) it is :data:`TRACED` once the hook allowed the edit: the op then writes nothing, and
    ``self`` stands for the op's result (:func:`_stands_for`)."""
    grad_enabled, tracer = _state.current  # read inline: every in-place op passes here
    if tracer is not None and hasattr(tracer, "edit_hook"):
        tracer.edit_hook(self, op)
        return TRACED
    if not grad_enabled:
        return False
    if self._rg and self._node is None:
        raise _leaf_error(op, self, "a tensor")
    needs = self._rg
    for o in others:
        if isinstance(o, Tensor) and o._rg:
            needs = True
    if getattr(self, "_view", None) is None:
        return needs
    root = _path(self)[0]
    if root._rg:
        if root._node is None:
            raise _leaf_error(op, root, "a view of a tensor")
        return True
    return needs


def _current(self: Tensor) -> Tensor:
    """Self's value as the graph sees it now: self, or, for a view, the view taken again of its root's
    current history."""
    root, path = _path(self)
    if not path or not root._rg:
        return self
    with enable_grad():
        return _replay(root, path)


def _snapshot(t: Tensor) -> Tensor:
    """``t``'s history on a copy of its data: what an op's backward may save, safe from the write."""
    old = Tensor._make(t._B.asarray(t._data, copy=True), t._names, t._B)
    old._vc = [version_counter(t)[0]]  # its own: nothing else writes into the copy
    old._node = t._node
    if t._node is not None:
        old._idx = t._idx
    old._rg = t._rg
    return old


class _CopySlices(Op):
    """A tensor after an in-place edit of a view of it: the view's region holds the edit's result
    (input 1), the rest its old value (input 0).  Recorded after the write, never run forward."""

    name = "copy_slices"

    @staticmethod
    def backward(node, g):
        path = node.params["path"]
        B = node.B
        with no_grad():
            keep = Tensor._make(B.ones(g._data.shape, dtype=g._data.dtype), g._names, B)
            _replay(keep, path).zero_()  # the views write through to keep's own buffer
        return g * keep, with_names(_replay(g, path), node.in_names[1])


def _commit(self: Tensor, y: Tensor, names, op: str) -> Tensor:
    """Make ``y`` (the edit's result, a tensor of self's shape in the graph) self's value and history."""
    if y._data is not self._data:
        check_value_kind(self.dtype, y.dtype.kind, op)
        data = y._data
        if data.dtype != self._data.dtype:
            data = self._B.astype(data, self._B.native(self.dtype))
        _write(self, _ALL, data, op)
    self._names = names
    root, path = _path(self)
    if not path:
        if y._node is not None and y._node.made is not None:
            y = clone(y)  # a view's node carries the version of its own base; a root takes a node of its own
        self._node = y._node
        if y._node is not None:
            self._idx = y._idx
        self._rg = y._rg
        return self
    if root._rg or y._rg:
        record(_CopySlices, (root, y), (root,), {"path": path}, None, self._B)
    refresh(self)
    return self


def _result(self: Tensor, y: Any, op: str) -> Any:
    """The names self takes from an edit's result ``y``, after checking that it fits self."""
    if not isinstance(y, Tensor):
        raise TypeError(f"{op}: the op gave a {type(y).__name__}, not one tensor; it has no in-place form.")
    if y._data.shape != self._data.shape:
        raise ValueError(
            f"{op}: the result has shape {y.shape}, but an in-place op cannot change self's shape {self.shape} "
            "(the other operands must broadcast onto it)."
        )
    check_value_kind(self.dtype, y.dtype.kind, op)
    return _names.inplace(self._names, y._names, op)


def edit(self: Tensor, fn: Callable[..., Tensor], op: str, *args: Any, **kwargs: Any) -> Tensor:
    """Write ``fn(self, *args, **kwargs)`` into ``self`` and return ``self``: the in-place form of any op
    whose result has self's shape.  Recorded in the graph (where something requires grad) as ``fn``'s
    own nodes plus a write; the errors of ``fn`` name ``op``.  Traced by ``nt.compile`` it is ``fn``'s
    nodes alone: the tracer's ``edit_hook`` checks that no other tensor sees self's data, and ``self``
    stands for the result from then on (no write is replayed)."""
    tensor_arg(self, op)
    graph = _records(self, op, *args, *kwargs.values())
    base = getattr(fn, "__name__", op)
    try:
        y = fn(_snapshot(_current(self)) if graph is True else self, *args, **kwargs)
    except (TypeError, ValueError, IndexError) as e:
        message = str(e)
        if not message.startswith(base + ":") or base == op:
            raise
        raise type(e)(op + message[len(base):]) from None
    names = _result(self, y, op)
    if graph is TRACED:
        return _stands_for(self, y, names)
    if graph:
        return _commit(self, y, names, op)
    data = y._data
    if data.dtype != self._data.dtype:
        data = self._B.astype(data, self._B.native(self.dtype))
    _write(self, _ALL, data, op)
    self._names = names
    return self


def _stands_for(self: Tensor, y: Tensor, names) -> Tensor:
    """In nt.compile's trace: ``self`` names ``y`` (cast to self's dtype, as a write casts) from now on,
    and holds its array: a tensor the function made with a factory turns into a spec, whose values the
    next steps cannot read as if the write had not happened."""
    if y.dtype is not self.dtype:
        y = y.to(self.dtype)
    self._names = names
    self._data, self._B = y._data, y._B
    self._node, self._rg = y._node, y._rg
    if y._node is not None:
        self._idx = y._idx
    _state.current[1].edited(self, y)
    return self


def _overwrite(self: Tensor, values: Any, names, op: str) -> Tensor:
    """Replace self's values by ``values`` (a number or a tensor that broadcasts onto self) in the graph:
    the old value gets a zero gradient, and self stays in the graph, as in PyTorch."""
    B = self._B
    everywhere = Tensor._make(B.ones(self._data.shape, dtype=B.native(_dtypes.bool_)), _names.unnamed(self.ndim), B)
    return _commit(self, where(everywhere, values, _current(self)), names, op)


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
            "is a read-only view (expand/broadcast_to repeat elements without copying them; the results of diagonal, "
            "unfold, real, imag and view_as_real are copies, unlike PyTorch's views, so a write would not reach their "
            "input). Write into a clone() instead."
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


def _binary_inplace(name: str, backend_fn: str, out_of_place: Callable, float_result: bool = False,
                    saves_self: bool = True):
    """The in-place form of a binary op; ``saves_self`` says whether its backward reads self's old value,
    which must then be copied before the write (add and sub read neither operand)."""

    def fn(self: Tensor, other) -> Tensor:
        if float_result and self.dtype.kind not in "fc":
            raise TypeError(
                f"{name}: true division gives floats, which cannot be written into a tensor of dtype "
                f"{self.dtype!r}; use the out-of-place op or convert first (e.g. .float())."
            )
        graph = _records(self, name, other)
        if graph is TRACED:
            return edit(self, out_of_place, name, other)
        o, names = _other(self, other, self._names, name)
        if graph:
            old = _current(self)
            return _commit(self, out_of_place(_snapshot(old) if saves_self else old, other), names, name)
        _apply_inplace(self, backend_fn, (o,), name)
        self._names = names
        return self

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"In place ``{name[:-1]}``: other broadcasts onto self (no growing); other's names may "
                  "fill self's None dims; returns self.")
    return fn


add_ = _binary_inplace("add_", "add", elementwise.add, saves_self=False)
sub_ = _binary_inplace("sub_", "subtract", elementwise.sub, saves_self=False)
mul_ = _binary_inplace("mul_", "multiply", elementwise.mul)
div_ = _binary_inplace("div_", "divide", elementwise.div, float_result=True)


def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """In place ``clamp``: limit to ``[min, max]`` (numbers or tensors that fit self); returns self."""
    if min is None and max is None:
        raise ValueError("clamp_: give min, max or both.")
    graph = _records(self, "clamp_", min, max)
    if graph is TRACED:
        return edit(self, clip, "clamp_", min, max)
    names = self._names
    lo = hi = None
    if min is not None:
        lo, names = _other(self, min, names, "clamp_")
    if max is not None:
        hi, names = _other(self, max, names, "clamp_")
    if graph:
        return _commit(self, clip(_snapshot(_current(self)), min, max), names, "clamp_")
    _apply_inplace(self, "clip", (lo, hi), "clamp_")
    self._names = names
    return self


def masked_fill_(self: Tensor, mask: Any, value: Any) -> Tensor:
    """In place ``masked_fill``: ``value`` (number or 0-dim tensor) where ``mask`` is true; returns self."""
    graph = _records(self, "masked_fill_", value)
    if graph is TRACED:
        return edit(self, masked_fill, "masked_fill_", mask, value)
    mask, value, names = masked_args(self, mask, value, "masked_fill_")
    if graph:
        return _commit(self, masked_fill(_current(self), mask, value), names, "masked_fill_")
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
    graph = _records(self, "fill_", value)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"fill_: the value must be a number or a 0-dim tensor, got shape {value.shape}; "
                             "use copy_ to write a tensor.")
    elif as_number(value) is None:
        raise TypeError(f"fill_: the value must be a number or a 0-dim tensor, got {type(value).__name__}.")
    if graph is TRACED:  # before _other: a spec's value fills a factory's (real) tensor there
        _put(self, ..., value, "fill_")
        return self
    v, _ = _other(self, value, self._names, "fill_")
    if graph:
        return _overwrite(self, value, self._names, "fill_")
    _write(self, _ALL, v, "fill_")
    return self


def zero_(self: Tensor) -> Tensor:
    """Set every element to zero; returns self."""
    return fill_(self, False if self.dtype.kind == "b" else 0)


def copy_(self: Tensor, src: Any) -> Tensor:
    """Copy ``src`` (a tensor or array that broadcasts onto self) into self; returns self.

    ``src``'s names may fill self's ``None`` dims; its dtype is cast to self's ('same_kind')."""
    graph = _records(self, "copy_", src)
    if as_number(src) is not None and getattr(src, "ndim", None) is None:  # a 0-dim array is an array
        raise TypeError("copy_: src must be a tensor or an array; use fill_ for a number.")
    if graph is TRACED:  # before _other: a spec is copied into a factory's (real) tensor there
        _put(self, ..., operand(src, self, "copy_"), "copy_")
        return self
    v, names = _other(self, src, self._names, "copy_")
    if graph:
        return _overwrite(self, operand(src, self, "copy_"), names, "copy_")
    _write(self, _ALL, v, "copy_")
    self._names = names
    return self


class _IndexPut(Op):
    """``t[key] = value`` in the graph: the value (input 1) in the indexed region, the old value
    (input 0) elsewhere.  Eagerly recorded after the write; nt.compile's graphs run its forward, a copy
    of the old value written into (the edit as a value: :func:`edit`), or with ``in_place`` the old
    value's own array, where the compiler found that nothing else holds it (passes.write_in_place)."""

    name = "setitem"

    @staticmethod
    def forward(B, x, value, *, key, basic, region, in_place=False):
        # a 0-dim result may be stored as a NumPy scalar, which takes no write: an array of it, then
        out = x if in_place and hasattr(x, "__setitem__") else B.asarray(x, copy=True)
        B.setitem(out, key, value)
        return out

    @staticmethod
    def backward(node, g):
        key, basic = node.params["key"], node.params["basic"]
        B = node.B
        keep = B.ones(g._data.shape, dtype=g._data.dtype)
        B.setitem(keep, key, 0)
        ga = g * Tensor._make(keep, g._names, B)
        shape = node.in_shapes[1]
        if shape is None:  # a number was written
            return ga, None
        part = apply(_GetItem if basic else _Take, (g,), node.params["region"], key=key)
        return ga, sum_to(part, shape, node.in_names[1])


def setitem(self: Tensor, key: Any, value: Any) -> None:
    """``t[key] = value``: key as for ``t[key]`` (positional or a dict by name); value a number, tensor
    or array whose names unify with the indexed part's names and may fill self's ``None`` dims."""
    _put(self, key, value, "setitem")


def _put(self: Tensor, key: Any, value: Any, op: str) -> None:
    """``setitem`` for the in-place op ``op`` (``fill_`` and ``copy_`` are writes of the whole tensor too,
    as values in nt.compile's trace)."""
    graph = _records(self, op, value)
    raw, tokens, region, basic = plan(self, key, "setitem")
    number = as_number(value)
    if number is not None:
        check_value_kind(self.dtype, scalar_kind(number), "setitem")
        names = self._names
        data = number
    else:
        value = operand(value, self, "setitem")
        # in a trace the node's apply decides (a spec goes with an array of any device, as in every op)
        if value._B is not self._B and self.device != "meta" and graph is not TRACED:
            raise _device_error("setitem", self, value)
        names = _names.setitem(self._names, tokens, value._names, "setitem")
        check_value_kind(self.dtype, value.dtype.kind, "setitem")
        data = value.array
    if graph is TRACED:
        after = apply(_IndexPut, (self, number if number is not None else value), names, key=raw, basic=basic,
                      region=region)
        _stands_for(self, after, names)
        return
    if not graph:
        _write(self, raw, data, "setitem")
        self._names = names
        return
    before = _current(self)
    _write(self, raw, data, "setitem")
    after = Tensor._make(self._data, names, self._B)
    record(_IndexPut, (before, number if number is not None else value), (after,),
           {"key": raw, "basic": basic, "region": region}, None, self._B)
    _commit(self, after, names, "setitem")


# ----------------------------------------------------------------------------- samplers


def _float_only(self: Tensor, op: str) -> None:
    if self.dtype.kind != "f":
        raise TypeError(f"{op}: draws floats, which cannot be written into a tensor of dtype {self.dtype!r}.")


def _number(v: Any, what: str, op: str) -> float:
    if isinstance(v, bool) or as_number(v) is None:
        raise TypeError(f"{op}: {what} must be a number, got {type(v).__name__} {v!r}.")
    return float(v)


def _draw(self: Tensor, values, op: str) -> Tensor:
    """Write the raw array ``values`` (drawn for self) into self; in the graph, as new constant values."""
    B = self._B
    if values.dtype != self._data.dtype:
        values = B.astype(values, B.native(self.dtype))
    graph = _records(self, op)
    if graph is TRACED:  # random draws make no value of a graph
        _state.current[1].inplace_hook(self, op)
    if graph:
        return _overwrite(self, Tensor._make(values, self._names, B), self._names, op)
    _write(self, _ALL, values, op)
    return self


def _uniform(self: Tensor) -> Any:
    """Raw samples of U[0, 1) with self's shape, in self's dtype where it is a float."""
    B = self._B
    dt = self.dtype if self.dtype.kind == "f" else _dtypes.float64
    return B.rand(self._data.shape, dt)


def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0) -> Tensor:
    """Fill with samples of the uniform distribution on ``[from_, to)``; returns self."""
    _float_only(self, "uniform_")
    a, b = _number(from_, "from", "uniform_"), _number(to, "to", "uniform_")
    if not a <= b:
        raise ValueError(f"uniform_: expects from <= to, got from={a} and to={b}.")
    return _draw(self, _uniform(self) * (b - a) + a, "uniform_")


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with samples of the normal distribution N(mean, std**2); returns self."""
    _float_only(self, "normal_")
    m, sd = _number(mean, "mean", "normal_"), _number(std, "std", "normal_")
    if not sd >= 0:
        raise ValueError(f"normal_: expects std >= 0, got {sd}.")
    return _draw(self, self._B.randn(self._data.shape, self.dtype) * sd + m, "normal_")


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0) -> Tensor:
    """Fill with ``exp`` of samples of N(mean, std**2) (PyTorch's defaults: mean 1, std 2); returns self."""
    _float_only(self, "log_normal_")
    m, sd = _number(mean, "mean", "log_normal_"), _number(std, "std", "log_normal_")
    if not sd > 0:
        raise ValueError(f"log_normal_: expects std > 0, got {sd}.")
    B = self._B
    return _draw(self, B.exp(B.randn(self._data.shape, self.dtype) * sd + m), "log_normal_")


def exponential_(self: Tensor, lambd: float = 1.0) -> Tensor:
    """Fill with samples of the exponential distribution of rate ``lambd``; returns self."""
    _float_only(self, "exponential_")
    rate = _number(lambd, "lambd", "exponential_")
    if not rate > 0:
        raise ValueError(f"exponential_: expects lambd > 0, got {rate}.")
    # 1 - u lies in (0, 1]: its log is finite
    return _draw(self, -self._B.log(1 - _uniform(self)) / rate, "exponential_")


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0) -> Tensor:
    """Fill with samples of the Cauchy distribution with ``median`` and scale ``sigma``; returns self."""
    _float_only(self, "cauchy_")
    m, s = _number(median, "median", "cauchy_"), _number(sigma, "sigma", "cauchy_")
    if not s > 0:
        raise ValueError(f"cauchy_: expects sigma > 0, got {s}.")
    return _draw(self, m + s * self._B.tan(math.pi * (_uniform(self) - 0.5)), "cauchy_")


def geometric_(self: Tensor, p: float) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...); returns self."""
    q = _number(p, "p", "geometric_")
    if not 0 < q < 1:
        raise ValueError(f"geometric_: expects 0 < p < 1, got {q}.")
    B = self._B
    # with u' = 1 - u in (0, 1]: P(floor(log u' / log(1 - p)) + 1 = k) = (1 - p)**(k - 1) p
    return _draw(self, B.floor(B.log(1 - _uniform(self)) / math.log1p(-q)) + 1, "geometric_")


def bernoulli_(self: Tensor, p: Any = 0.5) -> Tensor:
    """Fill with 1 where a draw succeeds with probability ``p`` (a number, or a tensor of probabilities
    that broadcasts onto self), else 0; returns self."""
    if isinstance(p, Tensor):
        _names.inplace(self._names, p._names, "bernoulli_")
        check_fits(self._data.shape, p._data.shape, "p", "bernoulli_")
        prob = p.array
    else:
        prob = _number(p, "p", "bernoulli_")
        if not 0 <= prob <= 1:
            raise ValueError(f"bernoulli_: expects 0 <= p <= 1, got {prob}.")
    return _draw(self, _uniform(self) < prob, "bernoulli_")


def random_(self: Tensor, from_: int = 0, to: Any = None) -> Tensor:
    """Fill with integers drawn uniformly from ``[from_, to)``; ``random_(to)`` draws from ``[0, to)``, and
    ``random_()`` from ``[0, 2**mantissa]`` for floats (every integer the dtype holds exactly), or over the
    dtype's non-negative range for integers (``[0, 2)`` for bool), as in PyTorch; returns self."""
    for what, v in (("from", from_), ("to", to)):
        if v is not None and (isinstance(v, bool) or not hasattr(v, "__index__")):
            raise TypeError(f"random_: {what} must be an int, got {type(v).__name__} {v!r}.")
    dt = self.dtype
    if dt.kind == "c":
        raise TypeError(f"random_: draws integers, which a complex tensor ({dt!r}) does not take (PyTorch refuses "
                        "it too); fill the parts: nt.complex(re, im).")
    if to is None:
        if from_ != 0:
            from_, to = 0, from_
        elif dt.kind == "f":
            to = 2 ** {2: 11, 4: 24, 8: 53}[dt.itemsize] + 1
        elif dt.kind == "b":
            to = 2
        else:
            to = 2 ** (8 * dt.itemsize - 1)
    low, high = int(from_), int(to)
    if high <= low:
        raise ValueError(f"random_: expects from < to, got from={low} and to={high}.")
    lowest = 0 if dt.kind == "u" else -(2 ** (8 * dt.itemsize - 1))
    if dt.kind in "iu" and (low < lowest or high > 2 ** (8 * dt.itemsize - 1)):
        raise ValueError(f"random_: [from, to) = [{low}, {high}) is out of the range of {dt.name}.")
    return _draw(self, self._B.randint(low, high, self._data.shape, _dtypes.int64), "random_")


# ----------------------------------------------------------------------------- the elementwise family's variants

#: elementwise ops with no in-place variant (none in PyTorch): ``Tensor.where(cond, y)`` takes self as the
#: value, ``positive`` is self
_NO_VARIANT = frozenset({"where", "positive"})
#: the variants written out above, with a raw fast path, by the out-of-place op they edit
_WRITTEN = {elementwise.add: add_, elementwise.sub: sub_, elementwise.mul: mul_, elementwise.div: div_,
            elementwise.clip: clamp_}


def _variant(name: str, fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``self.name_(...)``: the method ``fn(self, ...)`` written into self (:func:`edit`)."""
    op = name + "_"

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return edit(self, fn, op, *args, **kwargs)

    method.__name__ = method.__qualname__ = op
    method.__doc__ = f"In place ``{name}``: the result is written into self (which it must fit); returns self."
    signature = inspect.signature(fn)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p.replace(name="self", annotation=Tensor) if i == 0 else p
                    for i, p in enumerate(signature.parameters.values())],
        return_annotation=Tensor)
    return method


def _variants() -> dict:
    """``op_`` for each op of the elementwise families' exports that is a Tensor method: ``x.op_(...)`` writes
    ``x.op(...)`` (the method, which for some ops orders the arguments differently: ``x.polygamma(n)``)."""
    table = {}
    for family in (elementwise, special_math, bitwise):
        for name in family.__all__:
            method = family.METHODS.get(name)
            if method is not None and name not in _NO_VARIANT:
                table[name + "_"] = _WRITTEN.get(method) or _variant(name, method)
    return table


_VARIANTS = _variants()

METHODS = {
    **_VARIANTS,
    "masked_fill_": masked_fill_, "fill_": fill_, "zero_": zero_, "copy_": copy_, "__setitem__": setitem,
    "__iadd__": add_, "__isub__": sub_, "__imul__": mul_, "__itruediv__": div_,
    "__iand__": _VARIANTS["bitwise_and_"], "__ior__": _VARIANTS["bitwise_or_"], "__ixor__": _VARIANTS["bitwise_xor_"],
    "__ilshift__": _VARIANTS["bitwise_left_shift_"], "__irshift__": _VARIANTS["bitwise_right_shift_"],
    "uniform_": uniform_, "normal_": normal_, "log_normal_": log_normal_, "exponential_": exponential_,
    "cauchy_": cauchy_, "geometric_": geometric_, "bernoulli_": bernoulli_, "random_": random_,
}
