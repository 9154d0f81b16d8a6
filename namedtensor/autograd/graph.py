"""The one way an op runs: :func:`apply`, and the graph it records.

Every op is a subclass of :class:`Op` with, in one place,

* ``forward(B, *arrays, **params)``: the computation on raw backend arrays
  (``B`` is the backend); it may return ``(out, stash)`` when ``stashes`` is set,
  to keep something (indices, a mask) for the backward;
* ``backward(node, *grads)``: the vector-Jacobian product, written with
  differentiable tensor ops so that ``create_graph=True`` gives higher-order
  gradients for free; it returns one gradient (or ``None``) per input.

The op's public function computes the output names with :mod:`namedtensor._names`
and calls ``apply(Op, inputs, names, **params)``.  ``apply`` checks devices,
runs the forward and, only when grad mode is on and an input requires grad,
records a :class:`Node` holding exactly what the op declared it needs
(``saves``: input positions, ``saves_output``).  Saved tensors carry the version
they had when saved; an in-place edit before backward is caught.  A node
references its inputs' nodes, never its outputs, so dropping the outputs frees
the graph (no reference cycles).  Grad mode, the shape tracer's slot and the
version counters are in :mod:`.mode` (re-exported here); grad mode and the
tracer are the calling thread's, so threads may run ops on disjoint graphs at
once.
"""

from __future__ import annotations

import time
from typing import Any, Tuple

from .._names import NamesError, fmt
from ..tensor import Tensor
from . import mode
from .mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled, version_counter

__all__ = ["Node", "Op", "apply", "record", "share_view", "refresh", "current", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled",
           "version_counter"]


class Op:
    """Base of every op.  See the module docstring for the pattern."""

    name = "op"
    saves: Tuple[int, ...] = ()
    saves_output = False
    stashes = False
    #: 1, a fixed count, or None for "as many as the forward returns"; >1 or None: a tuple of outputs
    n_outputs = 1
    differentiable = True
    #: the output is a view of input 0: it shares its version counter.
    view = False
    #: the output is handed out read-only (a copy standing for PyTorch's view): a write into it raises
    read_only = False
    #: the backward follows PyTorch's convention for complex operands (docs/design.md, "Autograd"); an op
    #: without it refuses to record a graph through complex tensors rather than give wrong gradients
    complex_grad = False
    #: the op takes a ``rows`` param: what runs the backend's row hooks (``norm_rows``...) in the backend's
    #: place (None: the backend); nt.compile passes the Numba kernels of backends/numba_kernels.py
    row_kernels = False

    @staticmethod
    def forward(B, *arrays, **params):  # pragma: no cover - every op overrides
        """The output array(s) from raw backend arrays (``(out, stash)`` when ``stashes``)."""
        raise NotImplementedError

    @staticmethod
    def backward(node: "Node", *grads):  # pragma: no cover
        """One gradient tensor (or None) per input, from the outputs' gradients (differentiable ops)."""
        raise NotImplementedError


class Node:
    """One op application in the graph."""

    __slots__ = (
        "op", "edges", "rank", "params", "saved", "versions", "stash", "in_shapes", "in_names",
        "in_dtypes", "B", "out_meta", "hooks", "freed", "made", "__weakref__",
    )

    def __repr__(self) -> str:
        return f"<backward of {self.op.name}>"

    def saved_tensors(self) -> tuple:
        """The saved inputs/outputs, checked against in-place edits since they were saved."""
        saved = self.saved
        if saved is None:
            raise freed_error(self)
        out = []
        for item, version in zip(saved, self.versions):
            if version is None:
                out.append(item)
                continue
            if item.__class__ is _SavedOutput:
                t = item.unpack(self)
                vc = item.vc
            else:
                t = item
                vc = version_counter(t)
            if vc[0] != version:
                raise RuntimeError(
                    f"{self.op.name}: a tensor saved for its gradient (names {fmt(t._names)}, shape "
                    f"{tuple(t._data.shape)}) was modified in place after it was saved (version {vc[0]}, "
                    f"expected {version}). Use an out-of-place op (e.g. x = x + 1 instead of x.add_(1)), "
                    "or clone() the tensor before editing it."
                )
            out.append(t)
        return tuple(out)


def freed_error(node: Node) -> RuntimeError:
    """A backward reached ``node`` after an earlier one freed what it saved (no ``retain_graph``)."""
    return RuntimeError(
        f"{node.op.name}: trying to backward through the graph a second time (its saved tensors "
        "were freed after the first backward). Pass retain_graph=True to the first backward "
        "if you need to backward twice."
    )


class _SavedOutput:
    """An output saved for backward, stored without the tensor itself (that would be a cycle)."""

    __slots__ = ("data", "names", "vc", "index")

    def __init__(self, t, index: int) -> None:
        self.data = t._data
        self.names = t._names
        self.vc = version_counter(t)
        self.index = index

    def unpack(self, node: Node):
        t = Tensor._make(self.data, self.names, node.B)
        t._vc = self.vc
        t._node = node
        t._idx = self.index
        t._rg = True
        return t


def _device_error(op: str, a, b) -> ValueError:
    return ValueError(
        f"{op}: operands are on different devices or backends: {a.device} ({a._B.name}) and "
        f"{b.device} ({b._B.name}). Move one with .to(device) first; namedtensor never copies silently."
    )


def _common_backend(op: str, a, b):
    """The backend of an op whose operands ``a`` and ``b`` have different ones: in a shape dry run the
    meta backend takes arrays of any other (reading only their shapes); anything else is an error."""
    if a._B.device == "meta":
        return a._B
    if b._B.device == "meta":
        return b._B
    raise _device_error(op, a, b)


_new = object.__new__
_clock = time.perf_counter_ns
_state = mode.state  # a thread-local: each thread sees its own grad mode and tracer
_NO_META = (None, None, None)  # what a node records about a Python-scalar input


def apply(op, inputs: tuple, names, **params) -> Any:
    """Run ``op`` on ``inputs`` (tensors or Python scalars) and give the outputs ``names``.

    A backend's refusal (NumPy's "operands could not be broadcast", a dtype without a loop) is raised
    again with the op's name in front: an error names the function the user called.
    """
    grad_enabled, tracer = _state.current  # read once, before the forward (raw arrays: it leaves both alone)
    if tracer is not None:
        start = _clock()  # the op's time, for the profiler (nt.profile); without a tracer an op pays this one test
    try:
        T = Tensor
        n = len(inputs)
        if n == 1:
            first = inputs[0]
            B = first._B
            out = op.forward(B, first._data, **params)
            needs_grad = first._rg
        elif n == 2 and isinstance(inputs[0], T) and isinstance(inputs[1], T):
            first, second = inputs
            B = first._B
            if second._B is not B:
                B = _common_backend(op.name, first, second)
            out = op.forward(B, first._data, second._data, **params)
            needs_grad = first._rg or second._rg
        else:
            B = None
            first = None
            needs_grad = False
            arrays = []
            for x in inputs:
                if isinstance(x, T):
                    if B is None:
                        B = x._B
                        first = x
                    elif x._B is not B:
                        B = _common_backend(op.name, first, x)
                    arrays.append(x._data)
                    if x._rg:
                        needs_grad = True
                else:
                    arrays.append(x)
            out = op.forward(B, *arrays, **params)
        stash = None
        if op.stashes:
            out, stash = out
        if op.n_outputs == 1:
            result = _new(T)  # Tensor._make, inlined: this is every op's hot path
            result._data = out
            result._names = names
            result._B = B
            result._node = None
            result._rg = False
            if op.view:
                result._vc = version_counter(first)
                result._view = (first, op, params)
            if needs_grad and grad_enabled and op.differentiable:
                record(op, inputs, (result,), params, stash, B)
            if tracer is not None:
                _state.span = (start, _clock())  # set last: record() may run an op of its own (refresh)
                tracer(op, inputs, (result,), params)
            return result
        results = tuple(T._make(o, o_names, B) for o, o_names in zip(out, names))
        if needs_grad and grad_enabled and op.differentiable:
            record(op, inputs, results, params, stash, B)
        if tracer is not None:
            _state.span = (start, _clock())
            tracer(op, inputs, results, params)
        return results
    except (TypeError, ValueError, OverflowError) as e:  # OverflowError: an int out of an integer dtype's range
        message = str(e)
        if isinstance(e, NamesError) or message.startswith(op.name + ":"):
            raise
        kind = (TypeError if isinstance(e, TypeError) else IndexError if isinstance(e, IndexError)
                else OverflowError if isinstance(e, OverflowError) else ValueError)
        raise kind(f"{op.name}: {message}") from e


def record(op, inputs, outputs, params, stash, B) -> None:
    """Attach a node for ``op`` to ``outputs`` (already computed from ``inputs``)."""
    T = Tensor
    node = Node()
    node.op = op
    node.params = params
    node.stash = stash
    node.B = B
    node.hooks = None
    node.freed = False
    edges = []
    meta = []
    rank = 0
    check_complex = not op.complex_grad
    for x in inputs:
        if isinstance(x, T):
            data = x._data
            if check_complex and x._rg and B.dtype_of(data).kind == "c":
                raise _complex_error(op)
            meta.append((data.shape, x._names, data.dtype))
            prev = x._node
            if prev is not None and prev.made is not None and prev.made != x._vc[0]:
                prev = refresh(x)
            if prev is not None:
                edges.append((prev, x._idx))
                if prev.rank >= rank:
                    rank = prev.rank + 1
            elif x._rg:
                edges.append(x)
                if rank == 0:
                    rank = 1
            else:
                edges.append(None)
        else:
            meta.append(_NO_META)
            edges.append(None)
    node.edges = tuple(edges)
    node.rank = rank
    node.made = outputs[0]._vc[0] if op.view else None
    node.in_shapes, node.in_names, node.in_dtypes = zip(*meta)
    if op.saves or op.saves_output:
        saved = []
        versions = []
        for i in op.saves:
            x = inputs[i]
            saved.append(x)
            versions.append(version_counter(x)[0] if isinstance(x, T) else None)
        if op.saves_output:
            for k, o in enumerate(outputs):
                saved.append(_SavedOutput(o, k))
                versions.append(version_counter(o)[0])
        node.saved = tuple(saved)
        node.versions = tuple(versions)
    else:
        node.saved = node.versions = ()
    if len(outputs) > 1:
        node.out_meta = tuple((o._data.shape, o._names, o._data.dtype) for o in outputs)
    else:
        node.out_meta = None
    if check_complex and B.dtype_of(outputs[0]._data).kind == "c":
        raise _complex_error(op)
    for k, o in enumerate(outputs):
        if k == 0 or B.dtype_of(o._data).kind in "fc":  # integer outputs (indices) carry no gradient
            o._node = node
            o._idx = k
            o._rg = True


def _complex_error(op) -> NotImplementedError:
    return NotImplementedError(
        f"{op.name}: its gradient is not implemented for complex tensors yet. Compute it without a graph "
        "(under nt.no_grad() or on .detach()ed tensors), or on the real and imaginary parts (t.real, t.imag)."
    )


def share_view(out, base, op, params: dict) -> None:
    """Mark ``out``, computed from ``base`` by ``op`` with ``params``, as a view of it (ops whose output is a
    view only on some inputs, such as reshape, or for several outputs, such as split, call this after
    ``apply``): it shares the version counter, and an in-place edit of either updates the other's history."""
    vc = out._vc = version_counter(base)
    out._view = (base, op, params)
    if out._node is not None:
        out._node.made = vc[0]


def refresh(t) -> Any:
    """Rebuild the history of the view ``t`` from its base's: an in-place edit since ``t``'s node was
    recorded changed what ``t`` holds (PyTorch regenerates a view's ``grad_fn`` the same way).  Returns
    ``t``'s node (None when its base no longer requires grad)."""
    view = getattr(t, "_view", None)
    if view is None:
        return t._node
    base, op, params = view
    with enable_grad():
        fresh = apply(op, (base,), t._names, **params)
    t._node = fresh._node
    t._idx = 0
    t._rg = fresh._rg
    return t._node


def current(t) -> None:
    """Bring ``t``'s history up to date if it is a view whose base was edited in place since (for the
    places that read a tensor's node outside :func:`record`: backward's roots and ``nt.grad``'s inputs)."""
    node = t._node
    if node is not None and node.made is not None and node.made != t._vc[0]:
        refresh(t)

