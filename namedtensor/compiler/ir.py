"""The graph IR of ``nt.compile``: values that carry names, and the ops between them.

A :class:`Graph` is a straight-line program.  Each :class:`Value` is one tensor with its names, shape
and dtype, and comes from one of four places (``kind``): an argument of the compiled function
(``"input"``, its position among the flattened arguments), a tensor the function reads from outside
(``"external"``: a module's parameter, a tensor captured by a closure; read afresh at every call, so an
optimizer's updates are seen), a constant made while tracing (``"constant"``: held by the graph alone,
so nothing can change it), or an op (``"op"``).  A :class:`Node` applies one op of the library to
values and Python numbers with the params the op's public function computed, the output names
included: running a graph calls ``apply`` with exactly what the traced call passed, so the name
rules, the autograd recording and the values are the eager ones.

Params may hold raw arrays of traced tensors (an index the op reads as a parameter): those are
:class:`ArrayOf` placeholders, filled with the value's array at run time, and :class:`Derived` ones,
arrays that a backend function made from them (recomputed at run time).
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from .._internal import raw

__all__ = ["Value", "Node", "Graph", "ArrayOf", "Derived", "RANDOM", "map_leaves", "evaluate", "placeholders",
           "draws", "arrays_read"]

Names = Tuple[Optional[str], ...]


class Value:
    """One tensor of the program."""

    __slots__ = ("id", "names", "shape", "dtype", "kind", "source")

    def __init__(self, id: int, names: Names, shape: Tuple[int, ...], dtype: str, kind: str,
                 source: Any = None) -> None:
        self.id = id
        self.names = names
        self.shape = shape
        self.dtype = dtype
        self.kind = kind
        #: the argument's position ("input"), the tensor itself ("external", "constant"), the node ("op")
        self.source = source

    def describe(self) -> str:
        dims = ", ".join(str(s) if n is None else f"{n}={s}" for n, s in zip(self.names, self.shape))
        return f"({dims}) {self.dtype}"

    def __repr__(self) -> str:
        return f"%{self.id}"


class ArrayOf:
    """A param that is the raw array of a traced value."""

    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"array(%{self.value.id})"


#: the backend functions that draw random numbers: a node whose params hold one draws at every call
RANDOM = frozenset({"rand", "randn", "randint", "randperm"})


class Derived(NamedTuple):
    """A param that a backend function computed, during the trace, from traced arrays (an index tensor
    reshaped, cast or offset by the op's public function): recomputed from them at run time."""

    fn: str
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]

    def __repr__(self) -> str:
        return f"{self.fn}(...)"


class Node:
    """``outputs = op(*args, **params)`` with the output names ``names`` (one tuple per output)."""

    __slots__ = ("op", "args", "params", "outputs", "names")

    def __init__(self, op: type, args: Tuple[Any, ...], params: Dict[str, Any], outputs: Tuple[Value, ...],
                 names: Any) -> None:
        self.op = op
        self.args = args
        self.params = params
        self.outputs = outputs
        self.names = names

    def computed_params(self) -> List[Any]:
        """The placeholders among the params (:class:`ArrayOf` and :class:`Derived`), outermost first."""
        return placeholders(self.params)

    def draws(self) -> bool:
        """Whether the node draws random numbers at every call (dropout's mask)."""
        return draws(self.params)

    def effect(self) -> bool:
        """Whether the node is a step with effects outside the graph's values (capture.Step: a backward
        pass, an optimizer's step), which keeps its place."""
        return getattr(self.op, "effect", False)

    def values_read(self) -> List[Value]:
        """The values this node reads: its tensor arguments and the arrays among its params."""
        read = [a for a in self.args if isinstance(a, Value)]
        read.extend(arrays_read(self.params))
        return read

    def __repr__(self) -> str:
        args = ", ".join(repr(a) for a in self.args)
        if self.effect():
            outs = "".join(f"{v!r}: {v.describe()} = " for v in self.outputs)
            return f"{outs}{self.params['what']}({args})"
        outs = ", ".join(f"{v!r}: {v.describe()}" for v in self.outputs)
        params = "".join(f", {k}={_short(v)}" for k, v in self.params.items())
        return f"{outs} = {self.op.name}({args}{params})"


def placeholders(x: Any) -> List[Any]:
    """The :class:`ArrayOf` and :class:`Derived` placeholders in params ``x``, outermost first, in the order
    :func:`evaluate` meets them."""
    found: List[Any] = []

    def walk(y: Any) -> None:
        if isinstance(y, (ArrayOf, Derived)):
            found.append(y)
        if isinstance(y, (tuple, list)):
            for z in y:
                walk(z)
        elif isinstance(y, dict):
            for z in y.values():
                walk(z)

    walk(x)
    return found


def draws(x: Any) -> bool:
    """Whether params (or a recipe) ``x`` draw random numbers when evaluated."""
    return any(isinstance(p, Derived) and p.fn in RANDOM for p in placeholders(x))


def arrays_read(x: Any) -> List[Value]:
    """The values whose arrays params (or a recipe) ``x`` read, each once, in the order of first reading."""
    return list({p.value.id: p.value for p in placeholders(x) if isinstance(p, ArrayOf)}.values())


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def map_leaves(x: Any, fn, stop=None) -> Any:
    """``x`` (params: nested tuples, named tuples, lists and dicts) with ``fn`` applied to each leaf, and to
    each part for which ``stop(part)`` is true instead of its items; the containers keep their types, and
    a container in which nothing changed is ``x`` itself."""
    if stop is not None and stop(x):
        return fn(x)
    if isinstance(x, (tuple, list)):
        items = [map_leaves(y, fn, stop) for y in x]
        if all(a is b for a, b in zip(items, x)):
            return x
        if isinstance(x, list):
            return items
        return x.__class__(*items) if hasattr(x, "_fields") else tuple(items)
    if isinstance(x, dict):
        items = {k: map_leaves(v, fn, stop) for k, v in x.items()}
        return x if all(items[k] is x[k] for k in x) else items
    return fn(x)


def evaluate(params: Any, env: Optional[Dict[int, Any]], B: Any, arrays: Tuple[Any, ...] = ()) -> Any:
    """``params`` with each :class:`ArrayOf` replaced by its value's array (``env`` maps value ids to
    tensors; without it, ``arrays`` holds the arrays of the values read, in the order of first
    reading), and each :class:`Derived` by the array its backend function makes of them again on ``B``."""
    order: Dict[int, int] = {}

    def leaf(p: Any) -> Any:
        if isinstance(p, Derived):
            return getattr(B, p.fn)(*map_leaves(p.args, leaf, stop), **map_leaves(p.kwargs, leaf, stop))
        if not isinstance(p, ArrayOf):
            return p
        if env is not None:
            return raw(env[p.value.id])
        return arrays[order.setdefault(p.value.id, len(order))]

    def stop(p: Any) -> bool:
        return isinstance(p, Derived)

    return map_leaves(params, leaf, stop)


class Graph:
    """A traced program: its values by kind, its nodes in order, and what it returns."""

    def __init__(self) -> None:
        self.values: List[Value] = []
        self.inputs: List[Value] = []
        self.nodes: List[Node] = []
        self.outputs: List[Any] = []  # Values, or Python objects returned as they are
        self.tree: Any = None  # how the outputs are nested (see compiler/capture.py)
        #: ids of the externals that a factory made during the trace or that nothing but the graph holds: in no
        #: place outside, nothing to guard
        self.made: set = set()

    def new_value(self, names: Names, shape, dtype: str, kind: str, source: Any = None) -> Value:
        v = Value(len(self.values), names, tuple(shape), dtype, kind, source)
        self.values.append(v)
        return v

    def used(self) -> set:
        """The ids of the values that nodes or outputs read."""
        ids = {v.id for n in self.nodes for v in n.values_read()}
        ids.update(v.id for v in self.outputs if isinstance(v, Value))
        return ids

    def __str__(self) -> str:
        used = self.used()
        head = ", ".join(f"{v!r}: {v.describe()}" for v in self.inputs)
        lines = [f"graph({head}):"]
        for v in self.values:
            if v.kind in ("external", "constant") and v.id in used:
                lines.append(f"    {v!r}: {v.describe()} = {v.kind}")
        lines.extend(f"    {n!r}" for n in self.nodes)
        lines.append("    return " + ", ".join(repr(v) for v in self.outputs))
        return "\n".join(lines)
