"""``nt.compile``: a function or module traced once per signature, optimised, and replayed.

A call looks up its signature (capture.py: names, shapes, dtypes, devices and ``requires_grad`` of
the tensor arguments, the other arguments, the grad mode, a module's training flags) in the cache; a
new one is traced on the meta device, optimised (passes.py) and built into a program (program.py).
A program whose externals changed (a parameter given another shape) is traced again.  After
``cache_limit`` signatures, new ones run eagerly, with one warning that says which parts of the
signature changed.  What cannot be traced runs eagerly too, with a warning naming the op or step
(``fullgraph=True`` raises instead).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import sys
import types
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from .._internal import FUNCTION_TYPES, PLAIN_TYPES, backend_of, is_plain_value
from ..backends import cpu, heap, numpy_kernels
from ..nn import Module
from ..nn.module import Compiled, compiled_target, state_key
from ..ops.elementwise import add
from ..ops.normalization import layer_norm, rms_norm
from ..tensor import Tensor
from . import cuda_codegen, formulas, numba_codegen
from .capture import Untraceable, capture, describe_key, flatten, signature, unflatten
from .guards import DEPTH, contents, locate, put, reach, read, settings
from .ir import Graph, Node, Value
from .passes import fuse_elementwise, fuse_residual_norms, optimize, split_biases
from .program import Program, build

__all__ = ["compile", "CompiledFunction", "optimize_for"]


def fusible_on(backend: str) -> Optional[Callable[[Node], bool]]:
    """Which nodes a graph on ``backend`` fuses (None: none): those whose chains get a generated kernel
    there, since a fused op without one would only add the recomputation of its backward.  CuPy, and
    NumPy with Numba: every formula (formulas.SCALAR), but on NumPy a float32 power by other than the
    numbers the kernels do by products (formulas.float32_pow) where NumPy has a SIMD loop for it:
    numba_math.pow32 computes in float64 and takes five times as long per element as NumPy's AVX-512
    loop (bench/kernel_math.py), more than the passes over memory that fusing it saves; other backends
    none."""
    if not (backend == "cupy" or (backend == "numpy" and numba_codegen.numba_available())):
        return None
    numpy_pow32 = backend == "numpy" and numpy_kernels.simd_loop("power", "fff")

    def fusible(n: Node) -> bool:
        values = [*n.outputs, *(a for a in n.args if isinstance(a, Value))]
        return (len(n.outputs) == 1 and formulas.scalar_op(n.op) and formulas.fusible_dtypes(values)
                and all(isinstance(a, (Value, bool, int, float)) for a in n.args)
                and not (numpy_pow32 and formulas.float32_pow(n.op.__name__, n.args, n.outputs[0].dtype)))

    return fusible


def absorbs(n: Node) -> bool:
    """Whether a node ends a chain's kernel: a sum or mean of a float tensor over any dims, or a softmax or
    log-softmax along any dim: scale + mask + softmax in one pass."""
    x = n.args[0] if n.args and n.outputs else None  # a step (a backward pass) has no outputs
    if not (isinstance(x, Value) and x.dtype in formulas.FLOATS and n.outputs[0].dtype == x.dtype):
        return False
    return formulas.reduces(n.op, n.params, len(x.shape)) or formulas.softmaxes(n.op, len(x.shape))


def kernels_on(backend: str) -> Callable:
    """``kernels(chain, inputs, outputs) -> (forward, backward)``: the kernels generated for a fused chain
    on ``backend``, each a dict by backend name (empty where there are none)."""
    codegen = cuda_codegen if backend == "cupy" else numba_codegen

    def kernels(chain, inputs: List[Value], outputs: List[Value]) -> Tuple[Dict[str, Callable], Dict[str, Callable]]:
        forward = codegen.forward_kernel(chain, inputs, outputs)
        backward = None if forward is None else codegen.backward_kernel(chain, inputs, outputs)
        return ({} if forward is None else {backend: forward}), ({} if backward is None else {backend: backward})

    return kernels


#: the norms a residual add joins (passes.fuse_residual_norms): each norm's op and the op doing both
_AFTER_ADD = {layer_norm.op: layer_norm.after_add, rms_norm.op: rms_norm.after_add}


def optimize_for(graph: Graph, backend: str, fuse: bool) -> Dict[str, int]:
    """Run the passes on ``graph`` as for a program on ``backend`` (``fuse``: with the kernels, passes.optimize);
    returns what each did.  Fused chains get kernels where the backend has them; on the CPU the norms and
    attention run Numba's row kernels and a residual add joins its norm in them, on the GPU in the CUDA
    norm kernel."""
    fusible = fusible_on(backend) if fuse else None
    if fusible is None:
        return optimize(graph)
    cpu_kernels = backend == "numpy"
    in_rows = (lambda n: n.params.get("rows") is not None) if cpu_kernels else (lambda n: True)
    return optimize(graph, lambda g: fuse_elementwise(
        g, fusible, kernels_on(backend), alone=lambda n: cpu_kernels and formulas.faster_alone(n.op.__name__, n.args),
        absorbs=absorbs, math_calls=numba_codegen.MATH_CALLS if cpu_kernels else None),
        rows=_row_kernels() if cpu_kernels else None,
        split=lambda g: split_biases(g, fusible, add.op),
        residual=lambda g: fuse_residual_norms(g, add.op, _AFTER_ADD, in_rows))


def _row_kernels():
    """The Numba kernels of the NumPy backend's row hooks, imported (with Numba) when first needed."""
    from ..backends import numba_kernels

    return numba_kernels


_REBINDS = "a value read from outside"


class CompiledFunction(Compiled):
    """What ``nt.compile(fn)`` returns: call it as ``fn``.  ``explain()`` describes what was compiled."""

    def __init__(self, fn: Callable, fuse: bool, cache_limit: int, fullgraph: bool) -> None:
        self._fn = fn
        self._fuse = fuse
        self._cache_limit = cache_limit
        self._fullgraph = fullgraph
        self._cache: Dict[Tuple[Any, ...], Optional[Program]] = {}
        self._fallbacks: Dict[Tuple[Any, ...], str] = {}
        self._warned_limit = False
        self._warned_unhashable = False
        self._rebinds: Optional[str] = None  # why, once a trace rebound what the function reads from outside
        self._trees: Dict[int, Any] = {}  # positional tensor arguments only: the tree of n of them
        #: the module whose state the function reads: the compiled module, or the module of a bound method
        #: (``nt.compile(model.generate)``)
        self._module = fn if isinstance(fn, Module) else getattr(fn, "__self__", None)
        if not isinstance(self._module, Module):
            self._module = None
        #: the closure cells and globals the function and the user code it reaches read (guards.reach): found
        #: again at each trace, since a rebound helper may read others
        self._places = reach(fn, self._module)
        #: readers of the plain values in containers near those places, with their paths (guards.settings),
        #: found at each trace
        self._settings: List[Tuple[Callable[[List[Any]], tuple], str, bool]] = []
        self._module_alone = self._reads_only_the_module()
        self._warned_unlocated = False
        functools.update_wrapper(self, fn if not isinstance(fn, Module) else fn.forward)
        self._made = True  # from here on, a compiled module's new attributes are the module's (__setattr__)

    def _extra(self, leaves: List[Any]) -> Tuple[Any, ...]:
        """The part of the signature outside the arguments: which tensor objects the function reads (a
        parameter replaced by another, a closure's or a global's tensor rebound) and the settings its
        graph specialised: the plain values (numbers, strings, None, tuples of them) and the functions of
        the closure cells and globals it and the user code it reaches read (guards.reach), and a module's
        training flags and settings (``state_key``), and the plain values of the containers near them
        (``CONFIG["scale"]``, ``args.causal``: guards.settings)."""
        module = self._module
        places = self._places
        if self._module_alone:
            return state_key(module)
        held: List[Any] = [] if module is None else [state_key(module)]
        # every call pays this loop (a compiled call of a small chain costs a few microseconds): the
        # class tests come inline, the plain scalars first
        for c in places.cells:
            _hold(held, contents(c))
        for scope, n in places.scopes:
            _hold(held, scope.get(n))
        for cls, n in places.class_attributes:
            _hold(held, vars(cls).get(n))
        for read_settings, _, _ in self._settings:
            held.append(read_settings(leaves))
        return tuple(held)

    def _reads_only_the_module(self) -> bool:
        """Whether the signature's outside part is the compiled module's ``state_key`` alone (no place, no
        settings): :meth:`_extra` then is that key itself."""
        return self._module is self._fn and not self._places.labels and not self._settings

    def _extra_labels(self) -> List[Tuple[str, bool]]:
        """What each part of :meth:`_extra` is, and whether its items are attributes, for the message of the
        cache limit."""
        if self._module_alone:
            return [("the module's training flags", False), ("its parameters", False), ("its buffers", False),
                    ("its classes and settings", False)]
        module = [] if self._module is None else [("the module's training flags, tensors, classes and settings", False)]
        return (module + [(label, False) for label in self._places.labels]
                + [(label, attribute) for _, label, attribute in self._settings])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors_only = not kwargs
        for x in args:
            if x.__class__ is not Tensor:
                tensors_only = False
                break
        if tensors_only:  # the common call: tensors alone, whose tree depends on their count only
            leaves = args
            tree = self._trees.get(len(args))
            if tree is None:
                tree = self._trees[len(args)] = flatten((args, kwargs))[1]
        else:
            leaves, tree = flatten((args, kwargs))
        try:
            key = signature(leaves, tree, self._extra(leaves))
        except TypeError as e:
            return self._unhashable(str(e), args, kwargs)
        program = self._cache.get(key, False)
        if program is False or (program is not None and program.externals and not program.guards_hold(leaves)):
            with _collection_paused():
                program = self._compile(leaves, tree)
                if program is not None:  # the call again, which finds the program: its first run loads kernels
                    return self(*args, **kwargs)
        if program is None:
            return self._fn(*args, **kwargs)
        outs = program.run(leaves if tensors_only else [x for x in leaves if isinstance(x, Tensor)])
        tree = program.graph.tree
        return outs[0] if tree is None else unflatten(tree, outs)

    def _compile(self, leaves, tree) -> Optional[Program]:
        if self._rebinds is not None:  # eager from now on: every call would be a new signature, traced for nothing
            return None
        # found again at each trace (a helper rebound to one that reads other globals), the key with them
        self._places = reach(self._fn, self._module, leaves)
        self._settings = settings(self._places, self._modules_read(leaves), leaves)
        self._module_alone = self._reads_only_the_module()
        key = signature(leaves, tree, self._extra(leaves))
        if key not in self._cache and len(self._cache) >= self._cache_limit:
            if not self._warned_limit:
                self._warned_limit = True
                warnings.warn(self._limit_message(key), stacklevel=3)
            self._fallbacks[key] = "cache limit"
            return None
        try:
            graph = self._capture(leaves, tree)
        except Untraceable as e:
            if self._fullgraph:
                raise RuntimeError(f"nt.compile(fullgraph=True): {e}") from None
            rebinds = e.what == _REBINDS
            warnings.warn(f"nt.compile: {_name(self._fn)} runs eagerly {'from now on' if rebinds else 'for this signature'}: "
                          f"{e}.", stacklevel=3)
            self._cache[key] = None
            self._fallbacks[key] = str(e)
            if rebinds:
                self._rebinds = str(e)
            return None
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        backend = (backend_of(tensors[0]) if tensors else cpu()).name
        program = self._cache[key] = build(graph, optimize_for(graph, backend, self._fuse))
        program.located = self._locate([t for t, _ in program.externals if id(t) not in graph.made], leaves)
        heap.retain_by_default()
        return program

    def _locate(self, externals: List[Tensor], leaves: List[Any]) -> List[Callable[[List[Any]], bool]]:
        """Guards for the externals that the signature does not hold by identity (a tensor of a closure
        cell or a global read, a parameter or buffer of the compiled module or of a module read) but that
        sit in a container or an attribute near what the function reads (guards.locate): each reads that
        place again at every call and holds while the same tensor is there, or, for a tensor of a module
        found there, while that module's ``state_key`` is what it was.  A tensor put in the old one's
        place, ``model.train()`` or a replaced weight then trace again instead of the graph reading the
        old state.  Externals found nowhere are said once: the graph keeps reading those tensor objects."""
        modules = self._modules_read(leaves)
        held = {id(v) for _, _, v in self._places.values() if isinstance(v, Tensor)}
        for m in modules:  # modules whose state_key the signature holds
            held.update(id(t) for t in (*m.parameters(), *m.buffers()))
        wanted = {id(t): t for t in externals if id(t) not in held}
        if not wanted:
            return []
        found, lost = locate(wanted, self._places, modules, leaves)
        if lost and not self._warned_unlocated:
            self._warned_unlocated = True
            shapes = ", ".join(f"{t.names} {tuple(t.shape)}" for t in lost[:3]) + (" ..." if len(lost) > 3 else "")
            warnings.warn(f"nt.compile: {_name(self._fn)} reads {len(lost)} tensor(s) ({shapes}) that were found "
                          f"neither in its arguments nor within {DEPTH} steps of its closure, its globals, the "
                          "defaults and modules it reads: the graph reads those tensor objects at every call, so "
                          "another tensor put in their place is not seen. Pass such a tensor as an argument, or "
                          "keep it in a module or a global.", stacklevel=4)
        return found

    def _capture(self, leaves, tree) -> Graph:
        """``capture``, refused where the dry run rebinds what the function reads from outside (a global, a
        closure's variable: ``n += 1`` on a counter) or changes the state of a module it reads
        (:meth:`_modules_read`: an attribute, a parameter, a buffer, a sub-module: :func:`_module_dicts`),
        which a graph would not do at the next call: the values are put back first, so that the eager run
        that follows does it once."""
        before = self._places.values()
        modules = [(d, dict(d)) for m in self._modules_read(leaves) for d in _module_dicts(m)]
        try:
            return capture(self._fn, leaves, tree)
        finally:
            changed = [(owner, key, value) for owner, key, value in before if read(owner, key) is not value]
            for owner, key, value in changed:
                put(owner, key, value)
            for d, was in modules:
                if d.keys() != was.keys() or any(d[k] is not v for k, v in was.items()):
                    changed.append(d)
                    d.clear()
                    d.update(was)
            if changed and sys.exc_info()[0] is None:
                raise Untraceable(_REBINDS, "the function rebinds a global, a closure's variable or a module's "
                                  "attribute, which a graph would not rebind again at the next call")

    def _modules_read(self, leaves: List[Any]) -> List[Module]:
        """The modules whose state the signature holds (``state_key``) and a trace must leave as it was: the
        compiled module (or a bound method's), modules in the closure cells and globals it reads, and
        modules passed as arguments (``self`` of a method compiled with ``@nt.compile``)."""
        found = [] if self._module is None else [self._module]
        found += [v for v in (compiled_target(v) for _, _, v in self._places.values())
                  if isinstance(v, Module) and v is not self._module]
        arguments = [m for m in map(compiled_target, leaves) if isinstance(m, Module)]  # a compiled one as its module
        return found + [m for m in arguments if all(m is not f for f in found)]

    def _unhashable(self, why: str, args, kwargs) -> Any:
        """A call with an argument that can be no part of a signature (an array, a set): eager, said once."""
        message = (f"an argument is neither a tensor nor hashable ({why}), so it cannot be specialised into a "
                   "graph; pass arrays as tensors")
        if self._fullgraph:
            raise RuntimeError(f"nt.compile(fullgraph=True): {message}")
        if not self._warned_unhashable:
            self._warned_unhashable = True
            warnings.warn(f"nt.compile: {_name(self._fn)} runs eagerly: {message}.", stacklevel=3)
        return self._fn(*args, **kwargs)

    def _limit_message(self, key) -> str:
        parts = describe_key(key)
        previous = next(reversed(self._cache)) if self._cache else None
        changed = [p for p in parts if previous is None or p not in describe_key(previous)]
        labels = self._extra_labels()
        if previous is not None and len(previous[2]) == len(key[2]) == len(labels):
            # the places read from outside that changed, by name (a global counter, a config's number)
            changed = [p for p in changed if not p.startswith("the tensors and settings read from outside")]
            for (label, attribute), was, now in zip(labels, previous[2], key[2]):
                if was != now:
                    changed += _changes(label, attribute, was, now)
        return (f"nt.compile: {_name(self._fn)} was traced for {self._cache_limit} signatures (cache_limit="
                f"{self._cache_limit}); new signatures run eagerly from now on. This one differs from the last "
                f"in: {'; '.join(changed) or 'nothing visible'}. Pass cache_limit= to keep more, give the "
                "function fewer shapes (pad to a few sizes), or pass a number that changes at every call as a "
                "tensor.")

    def signatures(self) -> List[str]:
        """The signatures traced so far, those that run eagerly included, each described as ``explain()``
        heads it: ``len(compiled.signatures())`` counts them against ``cache_limit``."""
        return ["; ".join(describe_key(key)) for key in self._cache]

    def explain(self) -> str:
        """Each signature's graph after the passes, what the passes did, and why a signature runs eagerly."""
        out = []
        for key, program in self._cache.items():
            out.append("signature: " + "; ".join(describe_key(key)))
            if program is None:
                out.append(f"  runs eagerly: {self._fallbacks.get(key)}")
                continue
            out.append("  " + ", ".join(f"{k}: {v}" for k, v in program.report.items()))
            out.extend("  " + line for line in str(program.graph).splitlines())
        return "\n".join(out) if out else "nothing compiled yet"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # ``@nt.compile`` on a method: read through an instance, the compiled function bound to it, which
        # then is an argument of each call (a module by its state_key: capture.signature)
        return self if obj is None else types.MethodType(self, obj)

    def __getattr__(self, name: str) -> Any:
        # a compiled module is used as the module (parameters(), train(), state_dict()...); before
        # __init__ (copy and pickle make an object first) there is nothing to forward to
        try:
            fn = self.__dict__["_fn"]
        except KeyError:
            raise AttributeError(name) from None
        attr = getattr(fn, name)
        if isinstance(attr, types.MethodType) and attr.__self__ is fn and isinstance(fn, Module):
            # a method that returns the module (to(), train(), eval(), float()...) returns the compiled one,
            # as in PyTorch: ``model = nt.compile(model).to("cuda")`` stays compiled
            @functools.wraps(attr)
            def method(*args: Any, **kwargs: Any) -> Any:
                out = attr(*args, **kwargs)
                return self if out is fn else out

            return method
        return attr

    def __setattr__(self, name: str, value: Any) -> None:
        # ``compiled.eps = 1e-3`` or ``compiled.head = Linear(...)`` changes the module (whose state_key the
        # next call reads), as it would uncompiled; this object's own attributes are those __init__ made
        d = self.__dict__
        if name in d or not d.get("_made") or not isinstance(d["_fn"], Module):
            object.__setattr__(self, name, value)
        else:
            setattr(d["_fn"], name, value)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        if name in d or not isinstance(d.get("_fn"), Module):
            object.__delattr__(self, name)
        else:
            delattr(d["_fn"], name)

    def __reduce__(self) -> Tuple[Callable, tuple]:
        # copied or pickled as the function or module and the options: its graphs hold arrays, kernels and
        # weak references that belong to this process, and a copy of a module reads the copy's parameters
        # anyway, so the copy traces afresh (copy.deepcopy of a compiled model is a compiled copy)
        return CompiledFunction, (self._fn, self._fuse, self._cache_limit, self._fullgraph)

    def __repr__(self) -> str:
        return f"nt.compile({self._fn!r})"


@contextlib.contextmanager
def _collection_paused():
    """Python's cyclic garbage collector off for a block (unless it was off already).  Tracing, and
    importing Numba and loading its kernels, make hundreds of thousands of objects: each full collection
    they set off walks every object of the process, about 60 ms where PyTorch and JAX are imported too,
    about a third of a warm compile.  The block's cycles are collected after it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _hold(held: List[Any], x: Any) -> None:
    """Add to ``held`` what a call's signature keeps of ``x``, read from outside (``CompiledFunction._extra``):
    one entry per place, None for what it does not keep, so that the message of the cache limit can name
    the places that changed."""
    cls = x.__class__
    if cls in PLAIN_TYPES:
        held.append((cls, x))  # 1 and True are one key otherwise
    elif isinstance(x, Tensor):
        held.append(id(x))
    elif cls is tuple and is_plain_value(x):
        held.append((cls, x))
    elif isinstance(x, Module):  # a model read from a global or a closure: its flags, settings and tensors
        held.append(state_key(x))
    elif cls is CompiledFunction:  # another compiled function or module called from this one
        held.append((x, state_key(x._fn) if isinstance(x._fn, Module) else None))
    elif cls in FUNCTION_TYPES:  # a helper or an activation rebound (``act = nt.gelu``): by identity
        held.append(x)
    else:
        held.append(None)


def _changes(label: str, attribute: bool, was: Any, now: Any) -> List[str]:
    """How a part of the signature held from outside changed, in words: ``global STEP (3 -> 4)``, a config's
    items (``CONFIG['lr'] (0.1 -> 0.2)``: guards.plain_items), else the place's name alone."""
    def plain(part: Any) -> bool:
        return isinstance(part, tuple) and len(part) == 2 and part[0] in PLAIN_TYPES | {tuple}

    def items(part: Any) -> Optional[dict]:
        if isinstance(part, tuple) and all(isinstance(p, tuple) and len(p) == 3 for p in part):
            return {k: v for k, _, v in part}
        return None

    if plain(was) and plain(now):
        return [f"{label} ({was[1]!r} -> {now[1]!r})"]
    before, after = items(was), items(now)
    if before is None or after is None:
        return [label]
    return [f"{label}{f'.{k}' if attribute else f'[{k!r}]'} ({before.get(k, '-')!r} -> {after.get(k, '-')!r})"
            for k in {**before, **after} if before.get(k, _changes) != after.get(k, _changes)] or [label]


def _module_dicts(module: Module):
    """The dicts that hold a module tree's state: each module's attributes, parameters, buffers and
    sub-modules (``self.cache = t`` in a forward lands in one of them)."""
    for m in module.modules():
        d = m.__dict__
        yield d
        for store in ("_parameters", "_buffers", "_modules"):
            inner = d.get(store)
            if isinstance(inner, dict):
                yield inner


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def compile(fn: Optional[Callable] = None, *, fuse: bool = True, cache_limit: int = 8,
            fullgraph: bool = False) -> Any:
    """Compile ``fn`` (a function or a ``nn.Module``): traced once per signature into a graph of named
    values, optimised (constant folding, common subexpressions, dead code, fused elementwise kernels)
    and replayed.  Results and gradients are the eager ones.  Usable as ``@nt.compile`` and
    ``@nt.compile(fuse=False)``.

    ``cache_limit``: how many signatures to trace before new ones run eagerly (with a warning).
    ``fullgraph=True``: raise instead of running eagerly what cannot be traced.
    """
    if fn is None:
        return lambda f: compile(f, fuse=fuse, cache_limit=cache_limit, fullgraph=fullgraph)
    if not callable(fn):
        raise TypeError(f"compile: expected a function or a Module, got {type(fn).__name__}.")
    if isinstance(cache_limit, bool) or not isinstance(cache_limit, int) or cache_limit < 1:
        raise ValueError(f"compile: cache_limit must be an int >= 1, got {cache_limit!r}.")
    return CompiledFunction(fn, fuse, cache_limit, fullgraph)
