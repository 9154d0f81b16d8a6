"""Backward traversal: ``t.backward()`` and ``nt.grad``.

Nodes are visited in decreasing rank (a node's rank is one more than its
deepest input), from a heap as in Chainer: every consumer of a node has a
higher rank, so when a node is popped all its output gradients have arrived
and are summed once.  Gradients are tensors; with ``create_graph=True`` the
backward runs with grad mode on and records a graph of its own, which is how
gradients of gradients work.  Saved arrays are released node by node unless
``retain_graph=True``.

A leaf's new ``.grad`` owns its buffer: optimizers and clipping edit gradients in place, so a
buffer that another leaf, the caller (``backward(gradient)``) or a view also sees is copied first.

A leaf is finished (its ``register_hook`` hooks run, ``.grad`` accumulates, then its
``register_post_accumulate_grad_hook`` hooks run) as soon as the last node that uses it has run,
not at the end of the pass: data-parallel training starts all-reducing a gradient while the rest
of the backward goes on.  Knowing "last" takes a walk over the graph that counts each leaf's uses;
it is done only while some tensor has a post-accumulate hook, otherwise leaves finish at the end.
``queue_callback(fn)`` runs ``fn()`` when the current backward pass ends.

A pass runs in the calling thread, with that thread's grad mode and its own queue of callbacks, and
keeps all its state in the pass object: threads may run backwards at once on disjoint graphs.

One pass is a :class:`_Backward`: it seeds the graph with the roots' gradients, runs the nodes,
finishes the leaves and collects what ``nt.grad`` asked for, one method per step.  The engine sits
above the ops and calls them by their functions (``add``, ``to``...); ``backward`` and
``register_post_accumulate_grad_hook`` are installed on ``Tensor`` from :data:`METHODS`.
"""

from __future__ import annotations

import functools
import heapq
import sys
import threading
import weakref
from typing import Callable, Optional, Sequence

from .._names import fmt, grad_names_error
from ..ops.dtype import to
from ..ops.elementwise import add
from ..ops.inplace import zero_
from ..ops.naming import rename
from ..tensor import Tensor
from .graph import current, freed_error
from .mode import _GradMode, current_tracer, outside_ops, work_done, work_started


_getrefcount = getattr(sys, "getrefcount", None)


class _Holder:
    __slots__ = ("_data",)


def _refs(holder) -> int:
    data = holder._data
    return _getrefcount(data)


def _exclusive_refs():
    """What :func:`_refs` counts for an array that only its tensor references, on this interpreter
    (None where counts cannot be trusted: no getrefcount, or free-threaded Python)."""
    gil = getattr(sys, "_is_gil_enabled", None)
    if _getrefcount is None or (gil is not None and not gil()):
        return None
    holder = _Holder()
    holder._data = object()
    return _refs(holder)


_EXCLUSIVE = _exclusive_refs()


def _own(g, taken: set):
    """``g`` if nothing else can see its buffer, else a copy; ``taken`` holds the ids of
    buffers already handed out in this backward."""
    if (id(g._data) in taken or _EXCLUSIVE is None or not g._B.owns_writable(g._data)
            or _refs(g) != _EXCLUSIVE):
        # a raw copy, not the clone op: buffer bookkeeping is no op of the user's (nor a row of a trace)
        g = Tensor._make(g._B.asarray(g._data, copy=True), g._names, g._B)
    taken.add(id(g._data))
    return g


def _as_seq(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _root_grads(roots, grad_outputs) -> list:
    """The gradient each root starts from: the one given (checked against the root), or 1 for a scalar."""
    if grad_outputs is None:
        grad_outputs = [None] * len(roots)
    if len(grad_outputs) != len(roots):
        raise ValueError(f"backward: got {len(grad_outputs)} gradients for {len(roots)} outputs.")
    return [_root_grad(r, g) for r, g in zip(roots, grad_outputs)]


def _root_grad(r, g):
    if not isinstance(r, Tensor):
        raise TypeError(f"backward: expected tensors, got {type(r).__name__}.")
    current(r)  # a view of a tensor edited in place since: its history is rebuilt first
    if not r._rg:
        raise RuntimeError(
            "backward: the tensor does not require grad and has no graph: did an input have "
            "requires_grad=True, and was the computation outside no_grad()?"
        )
    if g is None:
        if r.dtype.kind == "c":
            raise RuntimeError("backward: a gradient can only be created implicitly for a real scalar output; "
                               "this one is complex: take its .real or .abs(), or pass gradient=.")
        if r._data.size != 1 or r.ndim != 0:
            raise RuntimeError(
                f"backward: a gradient can only be created implicitly for a scalar (0-dim) output; "
                f"this one has names {fmt(r._names)} and shape {tuple(r.shape)}. Reduce it (e.g. .sum()) "
                "or pass gradient=."
            )
        return Tensor._make(r._B.ones((), dtype=r._data.dtype), (), r._B)
    if not isinstance(g, Tensor):
        g = Tensor._make(r._B.asarray(g, dtype=r._B.dtype_of(r._data)), r._names, r._B)
    if tuple(g.shape) != tuple(r.shape):
        raise ValueError(
            f"backward: the gradient has shape {tuple(g.shape)} but the output has shape {tuple(r.shape)}."
        )
    if not g.is_named and r.ndim:
        g = rename(g, *r._names)
    if g._names != r._names:
        raise grad_names_error("backward", "output", r._names, g._names)
    return g


def _run_hooks(hooks, g):
    """Call each hook on the gradient in turn; a tensor it returns replaces the gradient (same names and shape)."""
    for hook in hooks:
        res = hook(g)
        if res is None:
            continue
        if not isinstance(res, Tensor):
            raise TypeError(f"hook: a gradient hook must return a Tensor or None, got {type(res).__name__}.")
        if res._data.shape != g._data.shape:
            raise ValueError(
                f"hook: the hook returned a gradient of shape {tuple(res.shape)} for a tensor of shape "
                f"{tuple(g.shape)}; a gradient has exactly its tensor's shape."
            )
        if res._names != g._names:
            raise grad_names_error("hook", "tensor", g._names, res._names)
        g = res
    return g


#: id -> weak reference of each live leaf that has a post-accumulate hook; while there is none,
#: backward skips counting uses (a dict by id: a WeakSet would compare tensors with ``==``).  One for
#: all threads: a hook belongs to its tensor, whichever thread runs the backward that reaches it
_post_hooked: dict = {}


class _Passes(threading.local):
    """This thread's backward passes in progress: a hook that queues a callback means its own
    thread's pass, whatever other threads are running."""

    def __init__(self) -> None:
        #: one list of callbacks per pass (a hook may run a backward of its own)
        self.callbacks = []


_passes = _Passes()


def queue_callback(fn: Callable[[], None]) -> None:
    """Call ``fn()`` once when the backward pass now running ends, after every leaf's ``.grad`` is
    set (as PyTorch's ``Variable._execution_engine.queue_callback``); for hooks that start work
    during backward and must finish it before the optimizer step."""
    callbacks = _passes.callbacks
    if not callbacks:
        raise RuntimeError("queue_callback: no backward pass is running; call it from a hook during backward.")
    callbacks[-1].append(fn)


def accumulate_grads(tensors: Sequence, grads: Sequence) -> None:
    """``backward(inputs=...)``'s last step: add each gradient (None: none) to its tensor's ``.grad``,
    then run the leaves' post-accumulate hooks, as a pass of its own (callbacks they queue run last)."""
    callbacks = _passes.callbacks
    callbacks.append([])
    try:
        for t, g in zip(tensors, grads):
            if g is not None:
                t.grad = g if t.grad is None else add(t.grad, g)
                if t._node is None:
                    for hook in getattr(t, "_post_hooks", ()):
                        hook(t)
        for fn in callbacks[-1]:
            fn()
    finally:
        callbacks.pop()


def _leaf_uses(roots) -> tuple:
    """Over the nodes reachable from ``roots``: ``id(leaf) -> number of edges to it``, and
    ``id(node) -> ids of the leaves it feeds`` (for the nodes that feed any)."""
    uses = {}
    feeds = {}
    seen = set()
    stack = [r._node for r in roots if r._node is not None]
    while stack:
        node = stack.pop()
        key = id(node)
        if key in seen:
            continue
        seen.add(key)
        fed = None
        for edge in node.edges:
            if edge is None:
                continue
            if edge.__class__ is tuple:
                if id(edge[0]) not in seen:
                    stack.append(edge[0])
            else:
                leaf = id(edge)
                uses[leaf] = uses.get(leaf, 0) + 1
                if fed is None:
                    fed = feeds[key] = []
                fed.append(leaf)
    return uses, feeds


def _accumulate(store: dict, key, owner, g):
    prev = store.get(key)
    if prev is None:
        store[key] = [owner, g]
    else:
        prev[1] = add(prev[1], g)


def _captures(inputs) -> tuple:
    """Where ``nt.grad`` takes the gradient of each of ``inputs``: ``id(leaf) -> positions`` and
    ``(id(node), output index) -> positions``."""
    leaves = {}
    nodes = {}
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad: inputs must be tensors, got {type(t).__name__}.")
        current(t)
        if not t._rg:
            raise RuntimeError(f"grad: input {i} (names {fmt(t._names)}) does not require grad.")
        if t._node is None:
            leaves.setdefault(id(t), []).append(i)
        else:
            nodes.setdefault((id(t._node), t._idx), []).append(i)
    return leaves, nodes


class _Backward:
    """One backward pass: its state, and a method per step (seed, run a node, finish a leaf, results).

    Without ``inputs`` the leaves' gradients accumulate into ``.grad``; with ``inputs`` (``nt.grad``)
    they are captured, one per input, and ``.grad`` is left alone.
    """

    __slots__ = ("retain_graph", "create_graph", "inputs", "capture_leaf", "capture_node", "captured",
                 "pending", "heap", "counter", "leaves", "taken", "uses", "feeds", "run_op_backward")

    def __init__(self, grads: list, retain_graph: bool, create_graph: bool, inputs: Optional[list]) -> None:
        self.retain_graph = retain_graph
        self.create_graph = create_graph
        self.inputs = inputs
        if inputs is None:
            self.capture_leaf = self.capture_node = {}
            self.captured = []
        else:
            self.capture_leaf, self.capture_node = _captures(inputs)
            self.captured = [None] * len(inputs)
        self.pending = {}  # id(node) -> [node, list of per-output grads]
        self.heap = []
        self.counter = 0
        self.leaves = {}  # id(leaf) -> [leaf, its gradient so far]
        self.taken = {id(g._data) for g in grads}  # the caller's buffers stay the caller's
        # id(leaf) -> uses not yet run (a leaf whose count drops to 0 is finished at once), and
        # id(node) -> the leaves it feeds; counted only for post-accumulate hooks
        self.uses = self.feeds = None
        # a tracer that times each node's own work (the profiler) runs the nodes' backwards; looked up
        # once per pass, not per node
        self.run_op_backward = getattr(current_tracer(), "run_backward_node", None)

    def count_leaf_uses(self, roots) -> None:
        self.uses, self.feeds = _leaf_uses(roots)

    def seed(self, roots, grads) -> None:
        """Hand each root's gradient to the node that made it (or, for a leaf, to the leaf)."""
        for r, g in zip(roots, grads):
            if r._node is None:
                _accumulate(self.leaves, id(r), r, g)
            else:
                self.send((r._node, r._idx), g)
        if self.uses is not None:
            for key in [k for k in self.leaves if k not in self.uses]:  # a root leaf that nothing else feeds
                self.finish(*self.leaves.pop(key))

    def send(self, edge, g) -> None:
        """Add ``g`` to what ``edge`` (a ``(node, output index)`` or a leaf) has received."""
        if edge.__class__ is tuple:
            node, idx = edge
            pending = self.pending
            entry = pending.get(id(node))
            if entry is None:
                entry = pending[id(node)] = [node, [None] * (len(node.out_meta) if node.out_meta else 1)]
                heapq.heappush(self.heap, (-node.rank, self.counter, id(node)))
                self.counter += 1
            slot = entry[1]
            slot[idx] = g if slot[idx] is None else add(slot[idx], g)
        else:
            _accumulate(self.leaves, id(edge), edge, g)

    def run(self) -> None:
        """Run the nodes, deepest last; then finish the leaves that are left: every leaf when no
        uses were counted, else those fed by a node that got no gradient."""
        heap = self.heap
        run_node = self.run_node
        while heap:
            run_node(heapq.heappop(heap)[2])
        for leaf, g in self.leaves.values():
            self.finish(leaf, g)

    def run_node(self, key: int) -> None:
        """Run the backward of the node ``key``, whose output gradients have all arrived."""
        node, out_grads = self.pending.pop(key)
        if node.freed:
            raise freed_error(node)
        # only a node with several outputs can miss a gradient
        if node.out_meta is not None or node.hooks or self.capture_node:
            self.complete(node, out_grads)
        if self.run_op_backward is None:
            in_grads = node.op.backward(node, *out_grads)
        else:
            in_grads = self.run_op_backward(node, out_grads)
        if not self.retain_graph:
            node.saved = None
            node.stash = None
            node.freed = True
        send = self.send
        for edge, g, dt in zip(node.edges, in_grads, node.in_dtypes):
            if edge is not None and g is not None:
                if g._data.dtype != dt:
                    # an input narrower than the op's result (float32 * float64) gets its gradient
                    # in its own dtype, as in PyTorch; a real input's gradient is the real part of a
                    # complex one (real * complex)
                    want = node.B._from_native[dt]
                    if want.kind != "c" and g.dtype.kind == "c":
                        g = g.real
                    if g._data.dtype != dt:
                        g = to(g, want)
                send(edge, g)
        if self.feeds is not None and key in self.feeds:
            out_grads = in_grads = g = None  # a finished leaf's .grad may then take its buffer
            self.count_down(self.feeds[key])

    def complete(self, node, out_grads: list) -> None:
        """A node's output gradients as its backward takes them: zeros for an output that got none,
        then the outputs' hooks; ``nt.grad`` captures those it asked for."""
        for k, g in enumerate(out_grads):
            if g is None:
                shape, names, dtype = node.out_meta[k]
                out_grads[k] = Tensor._make(node.B.zeros(shape, dtype=dtype), names, node.B)
            if node.hooks and k in node.hooks:
                out_grads[k] = _run_hooks(node.hooks[k], out_grads[k])
            if self.capture_node:
                for slot in self.capture_node.get((id(node), k), ()):
                    self.captured[slot] = out_grads[k]

    def count_down(self, fed) -> None:
        """One use of each leaf in ``fed`` has run; finish those with none left."""
        uses = self.uses
        for leaf in fed:
            left = uses[leaf] - 1
            uses[leaf] = left
            if left == 0 and leaf in self.leaves:
                self.finish(*self.leaves.pop(leaf))

    def finish(self, leaf, g) -> None:
        """``leaf``'s gradient is complete: run its hooks, then capture it (``nt.grad``) or add it to
        ``.grad`` and run the post-accumulate hooks."""
        hooks = getattr(leaf, "_hooks", None)
        if hooks:
            g = _run_hooks(hooks, g)
        if self.inputs is not None:
            for slot in self.capture_leaf.get(id(leaf), ()):
                self.captured[slot] = g
            return
        if not self.create_graph:
            if leaf.grad is None:
                g = _own(g, self.taken)
            g = g.detach()
        leaf.grad = g if leaf.grad is None else add(leaf.grad, g)
        for hook in getattr(leaf, "_post_hooks", ()):
            hook(leaf)

    def results(self, allow_unused: bool) -> tuple:
        """The captured gradient of each input (``nt.grad``), out of the graph unless ``create_graph``."""
        captured = self.captured
        for i, g in enumerate(captured):
            if g is None and not allow_unused:
                raise RuntimeError(
                    f"grad: input {i} was not used to compute the outputs; pass allow_unused=True "
                    "to get None for it."
                )
            if g is not None and not self.create_graph:
                captured[i] = g.detach()
        return tuple(captured)


def run_backward(roots, grad_outputs=None, retain_graph: Optional[bool] = None, create_graph: bool = False,
                 inputs: Optional[Sequence] = None, allow_unused: bool = False) -> Optional[tuple]:
    """The engine behind ``Tensor.backward`` and ``nt.grad``.

    Without ``inputs`` the leaves' gradients accumulate into ``.grad`` and None is returned;
    with ``inputs`` their gradients are returned (one per input) and ``.grad`` is left alone.
    """
    tracer = current_tracer()
    # nt.compile's tracer records the pass as a step of its graph (then it does not run now), or refuses it
    if (tracer is not None and hasattr(tracer, "backward_hook")
            and tracer.backward_hook(roots, grad_outputs, retain_graph, create_graph, inputs)):
        return None
    roots = _as_seq(roots)
    if retain_graph is None:
        retain_graph = create_graph
    grads = _root_grads(roots, _as_seq(grad_outputs))
    pass_ = _Backward(grads, retain_graph, create_graph, inputs)
    if _post_hooked and inputs is None:
        pass_.count_leaf_uses(roots)
    callbacks = _passes.callbacks
    callbacks.append([])
    try:
        with _GradMode(create_graph):
            pass_.seed(roots, grads)
            pass_.run()
        for fn in callbacks[-1]:
            fn()
    finally:
        callbacks.pop()
    return None if inputs is None else pass_.results(allow_unused)


def grad(outputs, inputs, grad_outputs=None, retain_graph: Optional[bool] = None, create_graph: bool = False,
         allow_unused: bool = False) -> tuple:
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``.

    Each gradient has the names of its input.  With ``create_graph=True`` the
    gradients are themselves differentiable.
    """
    single = not isinstance(inputs, (list, tuple))
    inputs = [inputs] if single else list(inputs)
    return run_backward(outputs, grad_outputs, retain_graph, create_graph, inputs=inputs,
                        allow_unused=allow_unused)


def zero_grads(tensors, set_to_none: bool = True, row: str = "zero_grad") -> None:
    """Reset the ``.grad`` of each tensor, for ``Module.zero_grad`` and ``Optimizer.zero_grad``: to None
    (no memory kept; the next backward assigns), or to zeros, in place as in PyTorch (a leaf's
    gradient owns its buffer); a gradient with a graph (``create_graph``) is replaced by plain zeros.
    ``row``: the name of its row in a profile (with the bytes of the zeros written)."""
    tensors = list(tensors)
    if outside_ops("zero_grad", "resets gradients", replay=functools.partial(zero_grads, tensors, set_to_none, row)):
        return
    start = work_started()
    for t in tensors:
        g = t.grad
        if g is None:
            continue
        if set_to_none:
            t.grad = None
        elif g._rg:
            B = g._B
            t.grad = Tensor._make(B.zeros_like(g._data), g._names, B)
        else:
            with _GradMode(False):
                zero_(g)
    if start is not None:
        zeroed = [] if set_to_none else [t.grad for t in tensors if t.grad is not None]
        work_done(row, start, sum(g._data.nbytes for g in zeroed), zeroed[0]._B if zeroed else None)


# ----------------------------------------------------------------------------- Tensor methods


def backward(self: Tensor, gradient=None, retain_graph: Optional[bool] = None, create_graph: bool = False,
             inputs=None) -> None:
    """Accumulate the gradient of this tensor into ``.grad`` of the leaves it depends on."""
    if inputs is not None:
        ins = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        grads = run_backward(self, gradient, retain_graph, create_graph, inputs=ins, allow_unused=True)
        accumulate_grads(ins, grads)
        return
    run_backward(self, gradient, retain_graph, create_graph)


def register_post_accumulate_grad_hook(self: Tensor, hook: Callable[["Tensor"], None]) -> Callable[[], None]:
    """Call ``hook(tensor)`` on a leaf right after backward updated its ``.grad``: as soon as every
    contribution to it is in, while the rest of the backward goes on (as PyTorch's).

    Returns a function that removes the hook.
    """
    if self._node is not None or not self._rg:
        raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors that require grad have one.")
    outside_ops("register_post_accumulate_grad_hook", "registers a hook, which a graph would not register again at "
                                                      "the next call; register it outside the compiled function")
    try:
        hooks = self._post_hooks
    except AttributeError:
        hooks = self._post_hooks = []
    hooks.append(hook)
    key = id(self)
    if key not in _post_hooked:
        _post_hooked[key] = weakref.ref(self, lambda _, key=key: _post_hooked.pop(key, None))

    def remove() -> None:
        if hook in hooks:
            hooks.remove(hook)
        if not hooks:
            _post_hooked.pop(key, None)

    return remove


METHODS = {"backward": backward, "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook}
