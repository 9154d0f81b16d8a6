"""Collectives on named tensors: ``all_reduce``, ``broadcast``, ``all_gather``, ``reduce_scatter``.

Name rules:

* ``all_reduce(t, op)`` and ``broadcast(t, src)`` write the result into ``t`` itself (in place, as
  PyTorch's) and return it: names, shape and dtype unchanged.
* ``all_gather(t, dim)`` stacks the ranks' tensors, in rank order, along a new dim: the rule of
  ``stack`` (a name is placed first; an int is a position, and the new dim is unnamed).
* ``reduce_scatter(t, dim, op)`` reduces the ranks' tensors and keeps this rank's block of
  ``dim``: names unchanged, that dim's size divided by the number of ranks.

Before it moves data, a collective checks, with one small exchange of metadata, that every rank
passed a tensor with the same names, shape and dtype, and the same arguments: on a mismatch every
rank raises the same error (a ``NamesError`` when the names differ) instead of hanging or mixing
up dims.  ``check=False`` skips that exchange for hot loops whose tensors are known to agree.

``async_op=True`` starts the collective and returns a :class:`Work`; ``work.wait()`` finishes it
and returns the result.  Every wait (and the metadata check) raises a ``TimeoutError`` past the
group's timeout (``init_process_group(timeout=...)``), naming the collective and the ranks that did
not arrive, or a ``RuntimeError`` at once when a rank it waits for has exited.  Until then the tensor must be neither read nor written.  Collectives are
not recorded by autograd.  Reductions: ``"sum"``, ``"mean"`` (floating dtypes), ``"max"``, ``"min"``,
``"prod"``; on bool tensors ``"max"`` is any and ``"min"`` is all.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Hashable, Optional

from .. import _names
from .._internal import backend_of, bump_version, check_inplace, raw, wrap
from .._names import NamesError, fmt
from ..tensor import Tensor
from .group import ProcessGroup, require_group

OPS = ("sum", "mean", "max", "min", "prod")


class Work:
    """A collective in flight (``async_op=True``): ``wait()`` finishes it and returns its result."""

    __slots__ = ("op", "_group", "_handle", "_finish", "_result", "_seq")

    def __init__(self, op: str, group: ProcessGroup, handle: Any, finish: Callable[[], Tensor]) -> None:
        self.op = op
        self._group = group
        self._handle = handle
        self._finish = finish
        self._result: Optional[Tensor] = None
        self._seq = group.watch.start()

    def wait(self) -> Tensor:
        """Block until the collective is done; the result (for ``all_reduce``/``broadcast``, the
        tensor given, now holding it).  Past the group's timeout it raises a ``TimeoutError``."""
        if self._handle is not None:
            self._group.watch.wait(partial(self._group.transport.test, self._handle), self.op, self._seq)
            self._handle = None
            self._result = self._finish()
            self._finish = None
        return self._result

    def is_completed(self) -> bool:
        """Whether the collective is done (finishing it if so), without blocking."""
        if self._handle is not None and self._group.transport.test(self._handle):
            self.wait()
        return self._handle is None

    def __repr__(self) -> str:
        return f"Work({self.op}, {'done' if self._handle is None else 'in flight'})"


def _start(group: ProcessGroup, op: str, handle: Any, finish: Callable[[], Tensor], async_op: bool):
    work = Work(op, group, handle, finish)
    return work if async_op else work.wait()


def _check_tensor(t: Any, op: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}.")


def _check_op(reduce: str, t: Tensor, op: str) -> None:
    if reduce not in OPS:
        raise ValueError(f"{op}: unknown op {reduce!r}; choose one of {', '.join(map(repr, OPS))}.")
    kind = t.dtype.kind
    if reduce == "mean" and kind not in "fc":
        raise TypeError(f"{op}: op='mean' needs a floating tensor, got {t.dtype!r}; use op='sum' and divide.")
    if kind == "c" and reduce in ("max", "min"):
        raise TypeError(f"{op}: op={reduce!r} on a complex tensor; complex numbers have no order (PyTorch refuses "
                        "them too): reduce t.abs() or the parts.")
    if kind == "b" and reduce not in ("max", "min"):
        raise TypeError(f"{op}: op={reduce!r} on a bool tensor; use op='max' (any rank) or op='min' (every rank).")


def _agree(group: ProcessGroup, what: str, t: Tensor, **args: Hashable) -> None:
    """Raise the same error on every rank unless all ranks passed alike tensors and arguments."""
    mine = (t.names, tuple(t.shape), t.dtype.name, tuple(sorted(args.items())))
    every = group.watch.exchange(mine, what)
    if all(s == every[0] for s in every):
        return
    odd = [r for r, s in enumerate(every) if s != every[0]]
    shown = [0] + odd[:3]

    def describe(r: int) -> str:
        names, shape, dtype, extra = every[r]
        more = "".join(f", {k}={v!r}" for k, v in extra)
        return f"rank {r}: names {fmt(names)}, shape {shape}, {dtype}{more}"

    cls = NamesError if any(every[r][0] != every[0][0] for r in odd) else ValueError
    also = f" (and {len(odd) - 3} more ranks differ from rank 0)" if len(odd) > 3 else ""
    raise cls(f"{what}: the ranks passed different tensors or arguments: {'; '.join(describe(r) for r in shown)}"
              f"{also}. A collective needs the same names, shape, dtype and arguments on every rank "
              "(align_to/rename so the names agree).")


def _write_back(t: Tensor, transport: Any, buf: Any) -> None:
    B = backend_of(t)
    B.setitem(raw(t), ..., transport.to_backend(B, buf))


def all_reduce(t: Tensor, op: str = "sum", *, async_op: bool = False, check: bool = True):
    """Reduce ``t`` over all ranks with ``op`` and write the result into ``t`` on every rank (in
    place; returns ``t``, or a :class:`Work` with ``async_op=True``).  Names unchanged."""
    group = require_group("all_reduce")
    _check_tensor(t, "all_reduce")
    _check_op(op, t, "all_reduce")
    check_inplace(t, "all_reduce")
    if check:
        _agree(group, "all_reduce", t, op=op)
    transport = group.transport
    buf, shared = transport.stage(backend_of(t), raw(t))
    handle = transport.all_reduce(buf, op)

    def finish() -> Tensor:
        if op == "mean":
            buf[...] /= group.size
        if not shared:
            _write_back(t, transport, buf)
        bump_version(t)
        return t

    return _start(group, "all_reduce", handle, finish, async_op)


def broadcast(t: Tensor, src: int = 0, *, async_op: bool = False, check: bool = True):
    """Copy rank ``src``'s ``t`` into ``t`` on every other rank (in place; returns ``t``, or a
    :class:`Work` with ``async_op=True``).  Names unchanged."""
    group = require_group("broadcast")
    _check_tensor(t, "broadcast")
    if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < group.size:
        raise ValueError(f"broadcast: src must be a rank from 0 to {group.size - 1}, got {src!r}.")
    check_inplace(t, "broadcast")
    if check:
        _agree(group, "broadcast", t, src=src)
    transport = group.transport
    buf, shared = transport.stage(backend_of(t), raw(t))
    handle = transport.broadcast(buf, src)

    def finish() -> Tensor:
        if not shared and group.rank != src:
            _write_back(t, transport, buf)
        bump_version(t)
        return t

    return _start(group, "broadcast", handle, finish, async_op)


def all_gather(t: Tensor, dim: Hashable, *, async_op: bool = False, check: bool = True):
    """Every rank's ``t``, stacked in rank order along a new dim ``dim`` (a new name, placed first;
    or an int position, unnamed), as a new tensor on every rank (or a :class:`Work` with
    ``async_op=True``)."""
    group = require_group("all_gather")
    _check_tensor(t, "all_gather")
    ax, names = _names.stack((t.names,), dim, "all_gather")
    if check:
        _agree(group, "all_gather", t, dim=dim)
    transport = group.transport
    B = backend_of(t)
    send, _ = transport.stage(B, raw(t))
    recv = transport.empty((group.size, *t.shape), send)
    handle = transport.all_gather(send, recv)

    def finish() -> Tensor:
        out = transport.to_backend(B, recv)
        if ax:
            out = B.permute_dims(out, (*range(1, ax + 1), 0, *range(ax + 1, t.ndim + 1)))
        return wrap(out, names, B)

    return _start(group, "all_gather", handle, finish, async_op)


def reduce_scatter(t: Tensor, dim: Hashable, op: str = "sum", *, async_op: bool = False, check: bool = True):
    """Reduce ``t`` over all ranks with ``op``, split the result along ``dim`` into one block per
    rank and return this rank's block (rank ``r`` gets the ``r``-th), a new tensor with ``t``'s names
    (or a :class:`Work` with ``async_op=True``).  ``dim``'s size must be a multiple of the ranks."""
    group = require_group("reduce_scatter")
    _check_tensor(t, "reduce_scatter")
    _check_op(op, t, "reduce_scatter")
    ax = _names.axis(t.names, dim, "reduce_scatter")
    size = t.shape[ax]
    if size % group.size:
        raise ValueError(f"reduce_scatter: dim {dim!r} of a tensor with names {fmt(t.names)} and shape "
                         f"{t.shape} has size {size}, which {group.size} ranks cannot split evenly; pad it to "
                         "a multiple of the world size.")
    if check:
        _agree(group, "reduce_scatter", t, dim=dim, op=op)
    transport = group.transport
    B = backend_of(t)
    order = (ax, *(i for i in range(t.ndim) if i != ax))
    front = B.permute_dims(raw(t), order) if ax else raw(t)  # the blocks must be contiguous runs
    send, _ = transport.stage(B, front)
    recv = transport.empty((size // group.size, *send.shape[1:]), send)
    handle = transport.reduce_scatter(send, recv, op)

    def finish() -> Tensor:
        if op == "mean":
            recv[...] /= group.size
        out = transport.to_backend(B, recv)
        if ax:
            out = B.permute_dims(out, tuple(order.index(i) for i in range(t.ndim)))
        return wrap(out, t.names, B)

    return _start(group, "reduce_scatter", handle, finish, async_op)
