"""Tracing a function into a :class:`~namedtensor.compiler.ir.Graph`: the signature, the dry run, the checks.

``capture(fn, args, kwargs)`` calls ``fn`` once on meta stand-ins for its tensor arguments (``nt.spec``'s
device: names, shapes and dtypes flow through the real op code, no element is computed), with a tracer
installed that turns every op into a node.  Tensors that no op of the trace made are the graph's
externals (parameters, tensors from closures) or constants (made during the trace and held by nothing
else); see ir.py.

What a graph cannot replay makes the trace stop with :class:`Untraceable`, naming the op or the step:
a value the code reads (``bool(t)``, ``t.item()``, a boolean mask: :class:`DataDependentError`),
gradients handed back to the function (``nt.grad``), a step on state that no op carries and that no
call makes again (reading or setting ``.grad``, a hook: ``state_hook``), ``enable_grad`` inside a call
without grad mode, a leaf made to require grad, an in-place write that someone else would see (into an argument,
an external, a view; ``edit_hook``), random numbers drawn outside an op, or params computed from traced
values outside the op.  ``nt.compile`` then runs the function eagerly, with a warning.  Other in-place
writes become the ops they are: the tensor written stands for the op's new value from then on
(``edited``), so the graph stays pure but for its steps: a ``backward()``, ``zero_grad``, gradient
clipping and an optimizer's or a scheduler's ``step()`` become :class:`Step` nodes, which a replay runs in their
place (the dry run skips them).  Values made without history (ops under ``no_grad``, ``detach()``,
``.data``) go through a :class:`Detached` node, since a replay runs in the call's grad mode.

:func:`signature` is the cache key of a call: for each tensor argument its names, shape, dtype, device
and ``requires_grad``, a module argument by its ``state_key`` (``self`` of a method compiled with
``@nt.compile``), the other arguments themselves (they must be hashable: they are specialised
into the graph), the grad mode, the default float dtype (``nt.set_default_dtype``: the dtype of the
constants a factory makes inside) and conversion mode (``nt.gradual``, where flatten leaves unnamed the
dims it raises for outside), and what the function reads from outside (``api._extra``).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import sys
import weakref
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from .. import _dtypes
from .._internal import (backend_of, key_of, leaf_view, raw, restore_tensor_state, swap_tracer, tensor_state,
                         version_counter, wrap)
from ..autograd.engine import run_backward
from ..autograd.graph import Op
from ..autograd.mode import is_grad_enabled, no_grad
from ..backends import get as backend_for, host_random, made as made_backends
from ..backends.meta_backend import META, OBSERVER, DataDependentError, MetaArray
from ..conversion import active as conversion_mode
from ..nn.module import Module, compiled_target, state_key
from ..tensor import Tensor
from .ir import ArrayOf, Derived, Graph, Node, Value, arrays_read, draws, evaluate, map_leaves

__all__ = ["Untraceable", "flatten", "unflatten", "signature", "capture"]


class Untraceable(Exception):
    """A step the graph cannot replay: ``what`` (an op's name or a step) and why."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")
        self.what = what
        self.why = why


# ----------------------------------------------------------------------------- argument trees


def flatten(obj: Any) -> Tuple[List[Any], Any]:
    """``(leaves, tree)``: the tensors and other leaves of nested tuples, lists, dicts, named tuples and
    dataclasses (whose fields are all arguments of their ``__init__``), and their shape."""
    leaves: List[Any] = []
    return leaves, _walk(obj, leaves)


class _Fields(NamedTuple):
    """A tree node of a named tuple or a dataclass: its class and how to make it again."""

    cls: type
    dataclass: bool
    names: Tuple[str, ...]


# The recursions are module functions, not closures: a closure that calls itself is a reference cycle,
# which would keep the leaves (tensors) alive until the next garbage collection.
def _walk(x: Any, leaves: List[Any]) -> Any:
    if isinstance(x, Tensor):
        leaves.append(x)
        return None
    cls = x.__class__
    if cls is tuple or cls is list:
        return (cls, tuple(_walk(y, leaves) for y in x))
    if cls is dict:
        return (dict, tuple((k, _walk(v, leaves)) for k, v in x.items()))
    if isinstance(x, tuple) and isinstance(getattr(cls, "_fields", None), tuple):  # a named tuple
        return (_Fields(cls, False, cls._fields), tuple(_walk(y, leaves) for y in x))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = dataclasses.fields(x)
        if all(f.init for f in fields):
            return (_Fields(cls, True, tuple(f.name for f in fields)),
                    tuple(_walk(getattr(x, f.name), leaves) for f in fields))
    leaves.append(x)
    return None


def unflatten(tree: Any, leaves: List[Any]) -> Any:
    """The nested structure ``tree`` (from :func:`flatten`) with ``leaves`` in its places."""
    return _build(tree, iter(leaves))


def _build(node: Any, it) -> Any:
    if node is None:
        return next(it)
    kind, items = node
    if kind.__class__ is _Fields:
        values = [_build(v, it) for v in items]
        return kind.cls(**dict(zip(kind.names, values))) if kind.dataclass else kind.cls(*values)
    if kind is dict:
        return {k: _build(v, it) for k, v in items}
    return kind(_build(v, it) for v in items)


def signature(leaves: List[Any], tree: Any, extra: Tuple[Any, ...] = ()) -> Tuple[Any, ...]:
    """The cache key of a call with these flattened arguments (see the module docstring)."""
    key: List[Any] = [tree, (is_grad_enabled(), _dtypes.default_float, conversion_mode()), extra]
    for x in leaves:
        if isinstance(x, Tensor):
            key.append(key_of(x))
        elif isinstance(compiled_target(x), Module):  # a module or a compiled one: by identity, and its state
            key.append((x.__class__, x, state_key(x)))
        else:
            hash(x)  # an unhashable argument cannot be a key: the caller falls back
            key.append((x.__class__, x))
    return tuple(key)


def describe_key(key: Tuple[Any, ...]) -> List[str]:
    """Each part of a signature in words (for the message when the cache is full)."""
    tree, (grad, default_float, converting), extra, *args = key
    parts = [f"grad mode {'on' if grad else 'off'}", f"default float dtype {default_float}",
             f"conversion mode (nt.gradual) {'on' if converting else 'off'}"]
    if extra:
        parts.append(f"the tensors and settings read from outside, the training flags ({len(extra)} parts)")
    for i, a in enumerate(args):
        if len(a) == 5:
            names, shape, dtype, backend, rg = a
            dims = ", ".join(str(s) if n is None else f"{n}={s}" for n, s in zip(names, shape))
            parts.append(f"argument {i}: ({dims}) {dtype} on {backend.device}{', requires_grad' if rg else ''}")
        elif isinstance(compiled_target(a[1]), Module):
            parts.append(f"argument {i}: the {type(compiled_target(a[1])).__name__} module's training flags, tensors "
                         "and settings")
        else:
            parts.append(f"argument {i}: {a[1]!r}")
    return parts


# ----------------------------------------------------------------------------- the trace


def _random_states() -> List[Any]:
    # the CPU backend first: tensors made during a dry run on specs live there, and a backend first made
    # inside the trace would change the list as a draw does
    backend_for("cpu")
    return [b.random_state() for b in made_backends()]


class _Recorder:
    """The tracer: turns each op into a node, and knows each traced tensor's value."""

    #: an op that is one fused step eagerly (mse_loss) records its parts, which fuse with their neighbours
    traces_compositions = True

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.grad_mode = is_grad_enabled()  # the call's: the mode a replay runs every node in
        # id(tensor) -> (tensor, value, its version counter, the count when seen)
        self.seen: Dict[int, Tuple[Tensor, Value, Any, int]] = {}
        # for edit_hook, kept as the trace goes (a scan of the trace at every edit made a trace of n writes
        # cost n^2): id(version counter) -> the seen tensors that share it (a view shares its base's), and
        # the values that a node which may return a view read
        self.sharing: Dict[int, set] = {}
        self.viewed: set = set()
        self.arrays: Dict[int, Value] = {}  # id(meta array) -> the traced value that holds it
        self.derived: Dict[int, Tuple[MetaArray, str, tuple, dict]] = {}  # id(meta array) -> how it was made
        self.made_here: Dict[int, "weakref.ref[Tensor]"] = {}  # id(tensor) -> a tensor a factory made in the trace
        self.edited_made: List["weakref.ref[Tensor]"] = []  # those of them written into
        #: id -> (its state before, its external value) of an external being written into (a buffer's running
        #: statistics), between edit_hook and edited
        self.writing: Dict[int, Tuple[tuple, Value]] = {}

    def backward_hook(self, roots, grad_outputs, retain_graph, create_graph, inputs) -> bool:
        """A backward pass inside the function: a :class:`Step` of the graph that runs it on the replay's
        tensors, in its place among the other steps (the dry run computes no gradient).  ``nt.grad`` and
        ``backward(inputs=...)``, whose gradients the function reads, are refused."""
        if inputs is not None:
            raise Untraceable("backward", "gradients returned to the function (nt.grad, backward(inputs=...)) "
                                          "are values a graph cannot hand back; call backward() without inputs")
        roots = list(roots) if isinstance(roots, (list, tuple)) else [roots]
        given = grad_outputs if isinstance(grad_outputs, (list, tuple)) else [grad_outputs] * (grad_outputs is not None)
        if not all(isinstance(t, Tensor) for t in (*roots, *given)):
            raise Untraceable("backward", "a gradient given as something other than a tensor")
        args = tuple(self.value_of(t, "backward") for t in (*roots, *given))
        self._step("backward", functools.partial(_backward_step, len(roots), bool(given), retain_graph, create_graph),
                   args)
        return True

    def state_hook(self, what: str, why: str, t: Optional[Tensor], replay: Optional[Callable], result: Any) -> Any:
        """A step on state that no op carries (``mode.outside_ops``): one that ``replay()`` makes again (an
        optimizer's step, ``zero_grad``, gradient clipping) becomes a :class:`Step` of the graph, and a 0-dim
        tensor it returns (``result``: its dtype) a value of the graph, whose stand-in goes back to the
        function; the others (reading ``.grad``...), which the graph would not replay, are refused.  A meta
        tensor the trace has not met (``t``) is the dry run's own: a parameter moved to the meta device
        (``with_param``) takes its ``requires_grad``."""
        if replay is not None:
            if result is None:
                self._step(what, replay, ())
                return True
            dtype = _dtypes.as_dtype(result)
            spec = wrap(MetaArray((), META.native(dtype)), (), META)
            v = self.graph.new_value((), (), str(raw(spec).dtype), "op")
            v.source = Node(Step, (), {"what": what, "run": functools.partial(_returning, what, dtype, replay)},
                            (v,), ())
            self.graph.nodes.append(v.source)
            self.know(spec, v)
            return spec
        if t is not None and isinstance(raw(t), MetaArray) and id(t) not in self.seen:
            return False
        raise Untraceable(what, why)

    def _step(self, what: str, run: Callable, args: tuple) -> None:
        self.graph.nodes.append(Node(Step, args, {"what": what, "run": run}, (), None))

    def inplace_hook(self, t: Tensor, op: str) -> None:
        """A sampler's draw into ``t`` (``uniform_``...): random numbers a graph would repeat."""
        raise Untraceable(op, f"writes in place random numbers, drawn outside an op, into a tensor {t.names}: a "
                              "graph would repeat them at every call")

    def edit_hook(self, t: Tensor, op: str) -> None:
        """An in-place op on the whole of ``t`` (``x += y``, ``x.relu_()``): the graph holds its result as a
        new value, which ``t`` stands for from then on (:meth:`edited`).  That is the edit only where no other
        tensor sees ``t``'s data: ``t`` is made inside the function (by an op, by a factory, or a constant the
        graph alone holds), and neither a view nor viewed."""
        v = self.value_of(t, op)  # t is among the seen from here on
        vc = version_counter(t)
        if v.kind == "external" and self.made_by_factory(t):  # the graph's own copy from now on, which edits leave alone
            v.kind, v.source = "constant", wrap(raw(t), t.names, backend_of(t))
        if v.kind == "external":
            what = self._external_write_refused(t, v, vc)
            if what is None:
                self.writing[id(t)] = (tensor_state(t), v)
                return
        elif v.kind == "input":
            what = "that is an argument of the function"
        elif (getattr(t, "_view", None) is not None or (v.kind == "op" and _may_view(v.source.op))
              or v.id in self.viewed or len(self.sharing[id(vc)]) > 1):
            what = "that may share its data with a view"
        elif v.kind == "op" and v.source.op.read_only:  # eagerly the write raises, which it then does
            what = "that is read-only (the copy that diagonal, unfold, real, imag or view_as_real hands out)"
        else:
            return
        raise Untraceable(op, f"writes in place into a tensor {t.names} {what}, which graphs do not trace yet "
                              "(write x = x.op() instead of x.op_(), x = x + y instead of x += y)")

    def edited(self, t: Tensor, result: Tensor) -> None:
        """After an edit that :meth:`edit_hook` allowed: ``t`` now stands for ``result``'s value.  An external
        gets a write-back step there (the passes move nothing across it), which copies the value into its
        array at run time, and stays the external (read live, a leaf whose gradient the ops after it
        reach, as eagerly): the trace's ``t`` gets its own array and state back at once."""
        if self.made_by_factory(t):
            self.edited_made.append(self.made_here[id(t)])
        value = self.value_of(result, "edit")
        writing = self.writing.pop(id(t), None)
        if writing is None:
            self.know(t, value)
            return
        state, external = writing
        restore_tensor_state(t, state)
        if result.requires_grad:  # eagerly t joins the graph, which a copy into its array would not do
            raise Untraceable("in-place write", f"into a tensor {t.names} from outside the function of a value that "
                                                "requires grad, which graphs do not trace yet")
        self._step("write", _write_back, (value, t))
        self.know(t, external)

    def _external_write_refused(self, t: Tensor, v: Value, vc: Any) -> Optional[str]:
        """Why an edit of external ``t`` cannot be a write-back step (None: it can): another tensor may see
        its data (a view, which eagerly sees the edit at once), or eagerly the edit raises (a leaf that
        requires grad, with grad mode on).  The nodes that read ``t`` before stay before the write-back,
        which no pass moves anything across, and read the external itself at run time: a backward that
        saved it refuses it after the write, as eagerly."""
        if t.requires_grad and is_grad_enabled():
            return "that requires grad (a parameter: write under nt.no_grad())"
        if getattr(t, "_view", None) is not None or v.id in self.viewed or len(self.sharing[id(vc)]) > 1:
            return "from outside the function that may share its data with a view"
        return None

    def made(self, t: Tensor) -> None:
        """A factory (``nt.zeros``, ``nt.tensor``...) made ``t`` during the trace: the function may write into
        it, as into an op's result (the graph holds a copy of the tensor as a constant, and the writes are
        values of the graph)."""
        self.made_here[id(t)] = weakref.ref(t)

    def made_by_factory(self, t: Tensor) -> bool:
        made = self.made_here.get(id(t))
        return made is not None and made() is t

    def alias_hook(self, spec: Tensor, t: Tensor) -> None:
        self.know(spec, self.value_of(t, "to"))

    def detach_hook(self, t: Tensor, out: Tensor) -> None:
        """``out`` made over ``t``'s array outside the ops (``detach()``, ``.data``): a traced value's
        becomes a :class:`Detached` node at once, not when ``out`` is first read, so that ``t`` counts as
        viewed from here on, and an edit of either, which eagerly shows in the other, runs eagerly.  A traced
        value over a real array (an op of externals alone, ``w.norm()``, computed for real by the dry run)
        counts too: else ``out`` would be read as a constant, the dry run's value at every call."""
        a = raw(t)
        if id(t) in self.seen or (isinstance(a, MetaArray) and id(a) in self.arrays):
            self._detached(out, self.value_of(t, "detach"))

    def know(self, t: Tensor, v: Value) -> None:
        self._see(t, v, version_counter(t))
        self.arrays[id(raw(t))] = v

    def _see(self, t: Tensor, v: Value, vc: Any) -> None:
        before = self.seen.get(id(t))
        if before is not None and before[2] is not vc:
            self.sharing[id(before[2])].discard(id(t))
        self.seen[id(t)] = (t, v, vc, vc[0])
        self.sharing.setdefault(id(vc), set()).add(id(t))

    def value_of(self, t: Tensor, op: str) -> Value:
        entry = self.seen.get(id(t))
        if entry is not None:
            vc = version_counter(t)
            if vc is not entry[2]:  # t became a view after it was seen (it shares its base's counter now)
                self._see(t, entry[1], vc)
            elif vc[0] != entry[3]:
                raise Untraceable(op, "reads a tensor that was written in place inside the compiled function, "
                                      "which graphs do not trace yet")
            return entry[1]
        a = raw(t)
        if isinstance(a, MetaArray):
            recipe = self.param(a, op) if id(a) in self.derived else None
            if not isinstance(recipe, Derived):
                raise Untraceable(op, f"reads a tensor {t.names} computed outside the library's ops, which a "
                                      "graph cannot replay")
            reads = arrays_read(recipe)
            if reads or draws(recipe):
                # made by backend functions from traced arrays (a weighted loss's picked weights): a node
                # that makes it again at every call, outside autograd as the eager tensor is
                v = self.graph.new_value(t.names, a.shape, str(a.dtype), "op")
                v.source = Node(Computed, tuple(reads), {"recipe": recipe}, (v,), t.names)
                self.graph.nodes.append(v.source)
                self.know(t, v)
                return v
            # made from sizes alone (pooling's bins, quantile's q): a constant, made once the trace knows
            # the device
            v = self.graph.new_value(t.names, a.shape, str(a.dtype), "constant", (recipe, t.names))
        else:
            v = self.graph.new_value(t.names, a.shape, str(a.dtype), "external", t)
        self.know(t, v)
        return v

    def _detached(self, t: Tensor, v: Value) -> Value:
        """``t``, a tensor without history over ``v``'s array, as a :class:`Detached` node of ``v``."""
        cut = self.graph.new_value(t.names, v.shape, v.dtype, "op")
        cut.source = Node(Detached, (v,), {}, (cut,), t.names)
        self.graph.nodes.append(cut.source)
        self.viewed.add(v.id)
        self.know(t, cut)
        return cut

    def derive(self, out: Any, fn: str, args: tuple, kwargs: dict) -> None:
        """Remember that the meta backend's ``fn`` made ``out`` (the meta backend's observer, while tracing)."""
        for o in out if isinstance(out, tuple) else (out,):
            if isinstance(o, MetaArray):
                self.derived[id(o)] = (o, fn, args, kwargs)  # o is kept: its id stays its own

    def param(self, x: Any, op: str) -> Any:
        if not isinstance(x, MetaArray):
            return x
        v = self.arrays.get(id(x))
        if v is not None:
            return ArrayOf(v)
        how = self.derived.get(id(x))
        if how is None:
            raise Untraceable(op, "its arguments hold values computed outside the traced ops (random "
                                  "numbers drawn before the op, for one), which a graph would repeat")
        _, fn, args, kwargs = how
        return Derived(fn, map_leaves(args, lambda p: self.param(p, op)), map_leaves(kwargs, lambda p: self.param(p, op)))

    def __call__(self, op, inputs, outputs, params) -> None:
        args = tuple(self.value_of(x, op.name) if isinstance(x, Tensor) else x for x in inputs)
        params = map_leaves(params, lambda p: self.param(p, op.name))
        outs = []
        for o in outputs:
            a = raw(o)
            v = self.graph.new_value(o.names, a.shape, str(a.dtype), "op")
            self.know(o, v)
            outs.append(v)
        names = outputs[0].names if len(outputs) == 1 and op.n_outputs == 1 else tuple(o.names for o in outputs)
        node = Node(op, args, params, tuple(outs), names)
        for v in outs:
            v.source = node
        if _may_view(op):
            self.viewed.update(a.id for a in args if isinstance(a, Value))
        self.graph.nodes.append(node)
        if is_grad_enabled() != self.grad_mode:
            if not self.grad_mode:
                raise Untraceable(op.name, "records a graph (enable_grad) inside a function called without grad "
                                           "mode, and a replay runs every op in the call's mode")
            # run under no_grad inside the function: a replay runs in grad mode, so the results are cut
            # from the graph instead, as eagerly they have no history
            for o, v in zip(outputs, outs):
                self._detached(o, v)


def _may_view(op: type) -> bool:
    """Whether ``op``'s output may be a view of its input (the meta device cannot tell which are)."""
    return op.view or getattr(op, "may_view", False)


def _spec(t: Tensor) -> Tensor:
    a = raw(t)
    s = wrap(MetaArray(a.shape, META.native(_dtypes.as_dtype(t.dtype))), t.names, META)
    if t.requires_grad:
        s.requires_grad_(True)
    return s


def capture(fn: Callable, leaves: List[Any], tree: Any, constants_on: Optional[str] = None) -> Graph:
    """Trace ``fn`` called with ``unflatten(tree, leaves)`` (tensors replaced by meta specs) into a graph.
    Constants are computed on ``constants_on`` (default: the tensor arguments' device), e.g. on the CPU
    where the arguments are specs, whose meta device holds no values."""
    graph = Graph()
    recorder = _Recorder(graph)
    specs = []
    for i, x in enumerate(leaves):
        if isinstance(x, Tensor):
            s = _spec(x)
            v = graph.new_value(x.names, raw(x).shape, str(raw(x).dtype), "input", i)
            graph.inputs.append(v)
            recorder.know(s, v)
            specs.append(s)
        else:
            specs.append(x)
    args, kwargs = unflatten(tree, specs)
    before, host_before = _random_states(), host_random.states()
    previous, observer = swap_tracer(recorder), OBSERVER.fn
    OBSERVER.fn = recorder.derive
    try:
        result = fn(*args, **kwargs)
    except DataDependentError as e:
        raise Untraceable(_last_op(graph), f"the next step needs values ({e})") from None
    finally:
        swap_tracer(previous)
        OBSERVER.fn = observer
    if _random_states() != before:
        for b, state in zip(made_backends(), before):
            b.set_random_state(state)  # the eager run that follows draws what it would have drawn
        raise Untraceable("random numbers", "were drawn while tracing (nt.randn, dropout of a constant...), and a "
                                            "graph would repeat the same numbers at every call")
    if not host_random.same(host_random.states(), host_before):
        host_random.restore(host_before)
        raise Untraceable("random numbers", "were drawn from Python's random or NumPy's global generator while "
                                            "tracing (random.random(), np.random.rand()), and a graph would repeat "
                                            "the same numbers at every call; draw them outside the function and "
                                            "pass them in, or use nt.rand")
    out_leaves, graph.tree = flatten(result)
    held = next((x for x in out_leaves if not isinstance(x, Tensor) and _holds_spec(x)), None)
    if held is not None:
        raise Untraceable("return", f"returns tensors inside a {type(held).__name__}, which a graph cannot make "
                                    "again; return them in tuples, lists, dicts, named tuples or dataclasses")
    # generator expressions, whose variables end with them: a tensor left in a loop variable would count
    # as held from outside below
    graph.outputs.extend(recorder.value_of(x, "return") if isinstance(x, Tensor) else x for x in out_leaves)
    written = next((t.names for t, _, vc, version in recorder.seen.values()
                    if version_counter(t) is vc and vc[0] != version), None)
    if written is not None:
        raise Untraceable("in-place write", f"a tensor {written} was written in place inside the compiled "
                                            "function, which graphs do not trace yet")
    del result, out_leaves, args, kwargs, specs
    recorder.seen.clear()
    if _still_held(recorder.edited_made):
        raise Untraceable("in-place write", "into a tensor made inside the function that something outside it "
                                            "still holds after the call (a global, an attribute), which graphs "
                                            "do not trace yet")
    _classify_externals(graph, recorder)
    _make_constants(graph, leaves, constants_on)
    return graph


def _holds_spec(x: Any, budget: int = 10_000) -> bool:
    """Whether a tensor of the dry run (a meta spec) is reachable from ``x`` (an object the function
    returned that :func:`flatten` does not open), looking at up to ``budget`` objects."""
    seen, todo = set(), [x]
    while todo and len(seen) < budget:
        y = todo.pop()
        if id(y) in seen or isinstance(y, (type, str, bytes, int, float)):
            continue
        seen.add(id(y))
        if isinstance(y, Tensor) and isinstance(raw(y), MetaArray):
            return True
        todo.extend(gc.get_referents(y))
    return False


def _still_held(refs: List["weakref.ref[Tensor]"]) -> bool:
    """Whether one of these tensors is still alive after the trace.  The trace's own objects may hold one in
    a reference cycle (the tensor stands for an edit's result, whose history has a node that saved the
    tensor): those go in a collection of the youngest objects (nt.compile pauses the collector during the
    trace, so they are all young), then of all, before the answer is yes."""
    for generation in (None, 0, 2):
        if generation is not None:
            gc.collect(generation)
        if not any(ref() is not None for ref in refs):
            return False
    return True


class Step(Op):
    """A step with effects outside the graph's values, in its place among the nodes: a backward pass, an
    optimizer's or a scheduler's step, ``zero_grad``.  A program calls ``params["run"]`` with the
    tensors of its arguments; the passes keep it, and move, merge or fuse nothing across it."""

    name = "step"
    differentiable = False
    effect = True


def _returning(what: str, dtype, replay: Callable) -> Tensor:
    """A :class:`Step` that returns a 0-dim tensor, at run time: its result, of the dtype the graph was
    traced with (the ops after it were)."""
    out = replay()
    if out.dtype is not dtype or out.ndim:
        raise RuntimeError(f"{what} inside nt.compile: it returned a tensor of shape {tuple(out.shape)} and dtype "
                           f"{out.dtype!r}, but the graph was traced for a 0-dim {dtype!r} (the gradients' dtype "
                           "changed); call it outside the compiled function.")
    return out


def _write_back(value: Tensor, target: Tensor) -> None:
    """A write-back :class:`Step` at run time: ``value`` copied into external ``target``, as the edits inside
    the function wrote it eagerly (a new version of ``target``, which graphs that saved it refuse)."""
    with no_grad():
        target.copy_(value)


def _backward_step(n_roots: int, given: bool, retain_graph, create_graph, *tensors) -> None:
    """A backward :class:`Step` at run time: the pass on the replay's roots (and given gradients)."""
    run_backward(list(tensors[:n_roots]), list(tensors[n_roots:]) if given else None, retain_graph, create_graph)


class Detached(Op):
    """``x`` without history: what ``detach()`` or an op under ``no_grad`` inside the function gives eagerly.
    A program runs it as :func:`detach_as` (``detach()``'s own steps: the same array and version counter,
    so that an edit of either shows in the other and graphs that saved ``x`` refuse it afterwards)."""

    name = "detach"
    differentiable = False
    may_view = True  # the trace refuses in-place edits of it or of x, which others would see

    @staticmethod
    def forward(B, x):
        return x


def detach_as(x: Tensor, names) -> Tensor:
    """A :class:`Detached` node's result at run time: ``x.detach()`` named ``names``."""
    return leaf_view(x, names)


class Computed(Op):
    """A tensor that an op's public function made from traced arrays with backend functions: its recipe
    runs again on the arrays of this call (not differentiable: the eager tensor is no op's output)."""

    name = "computed"
    differentiable = False

    @staticmethod
    def forward(B, *arrays, recipe):
        return evaluate(recipe, None, B, arrays)


def _make_constants(graph: Graph, leaves: List[Any], device: Optional[str]) -> None:
    """The constants recorded as recipes, computed on ``device``, by default that of the tensor arguments
    (the CPU without any)."""
    if device is None:
        device = next((x.device for x in leaves if isinstance(x, Tensor)), "cpu")
    B = backend_for(device)
    for v in graph.values:
        if v.kind == "constant" and isinstance(v.source, tuple) and isinstance(v.source[0], Derived):
            recipe, names = v.source
            v.source = wrap(evaluate(recipe, {}, B), names, B)


def _last_op(graph: Graph) -> str:
    return f"after {graph.nodes[-1].op.name}" if graph.nodes else "before the first op"


def _classify_externals(graph: Graph, recorder: _Recorder) -> None:
    """An external held by nothing but the graph, whose array nothing else holds either, was made during
    the trace: it is a constant.  A tensor made in the trace over an outside tensor's array (``w.data``,
    ``w.detach()``) stays an external: the optimizer's in-place updates of ``w`` must be seen.  An external
    that nothing but the graph holds (an op's wrapped scalar, ``w.data``), or that a factory made in the
    trace, is in no place outside: ``graph.made``, which no guard looks for."""
    for v in graph.values:
        if v.kind != "external":
            continue
        # counted: the reference held (v.source, the tensor's _data) and getrefcount's argument
        alone = sys.getrefcount(v.source) <= 2
        if alone and sys.getrefcount(raw(v.source)) <= 2:
            v.kind = "constant"
        elif alone or recorder.made_by_factory(v.source):
            graph.made.add(id(v.source))
