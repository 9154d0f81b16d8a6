"""A graph made runnable: straight-line Python that calls ``apply`` once per node.

:func:`build` writes the graph as the source of one function (``print(program.source)`` shows it)
and compiles it with ``exec``: no interpreter loop over nodes and no name rules or argument checks at
run time, since every node's output names and params were fixed by the trace.  Because each node goes
through ``apply``, a compiled call records the same autograd graph as an eager one (gradients are the
eager gradients), reports each op, fused ones included, to ``nt.profile``, and checks devices.

Each value's local is deleted after the last node that reads it, as an eager function's last reference
to a tensor goes: a whole training step frees its forward's values (those its backward does not keep)
before the backward runs.

Externals are read afresh at every call (the tensor object is held, its array read by ``apply``);
:meth:`Program.guards_hold` checks that they kept the names, shape, dtype and device the graph was
traced with.  Constants returned as outputs are cloned, so a caller cannot edit the graph's copy.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .._internal import backend_of, raw
from ..autograd.graph import apply
from ..tensor import Tensor
from .capture import Detached, detach_as
from .ir import Graph, Value, evaluate

__all__ = ["Program", "build"]


class Program:
    """The runnable form of one graph, for one signature."""

    def __init__(self, graph: Graph, run, source: str, externals: List[Tuple[Tensor, Tuple[Any, ...]]],
                 report: Dict[str, int]) -> None:
        self.graph = graph
        self.run = run
        self.source = source
        self.externals = externals
        self.report = report
        #: guards for externals the function reached through a container or an attribute (``weights[0]``,
        #: ``config["w"]``, ``holder.w``, ``models["a"]``'s weight): each reads that place again and says
        #: whether the same tensor, or a module in the same state, is there (``CompiledFunction._locate``)
        self.located: List[Any] = []

    def guards_hold(self, leaves: List[Any]) -> bool:
        """Whether every external still has the names, shape, dtype and device it was traced with, and is
        still the tensor at the place the function read it from (a list's item, a dict's value, an attribute
        of an argument: ``leaves``, the call's)."""
        for t, (names, shape, dtype, device) in self.externals:
            a = raw(t)
            # the array's dtype object, not its name: str() of a dtype took 2 us, most of the guard's time
            if t.names != names or a.shape != shape or a.dtype != dtype or t.device != device:
                return False
        for holds in self.located:
            if not holds(leaves):
                return False
        return True


def build(graph: Graph, report: Dict[str, int]) -> Program:
    """The program of ``graph``: a function ``run(inputs) -> output leaves``."""
    scope: Dict[str, Any] = {"apply": apply, "evaluate": evaluate, "backend_of": backend_of, "detach_as": detach_as}
    lines = ["def run(inputs):"]
    externals = []
    used = graph.used()
    dynamic = any(n.computed_params() for n in graph.nodes)
    if dynamic:
        lines.append("    env = {}")

    def bind(v: Value, text: str) -> None:
        lines.append(f"    v{v.id} = {text}")
        if dynamic:
            lines.append(f"    env[{v.id}] = v{v.id}")

    for k, v in enumerate(graph.inputs):
        if v.id in used:
            bind(v, f"inputs[{k}]")
    for v in graph.values:
        if v.kind in ("external", "constant") and v.id in used:
            scope[f"E{v.id}"] = v.source
            bind(v, f"E{v.id}")
            if v.kind == "external":
                a = raw(v.source)
                externals.append((v.source, (v.source.names, tuple(a.shape), a.dtype, v.source.device)))
    # the node after which each value's local goes (see the module docstring); returned values stay
    last = {v.id: i for i, n in enumerate(graph.nodes) for v in [*n.values_read(), *n.outputs]}
    for v in graph.outputs:
        if isinstance(v, Value):
            last.pop(v.id, None)
    drop: Dict[int, List[int]] = {}
    for vid, i in sorted(last.items()):
        drop.setdefault(i, []).append(vid)
    for i, n in enumerate(graph.nodes):
        if i:
            _drop(lines, drop.get(i - 1, ()), dynamic)
        scope[f"op{i}"] = n.op
        scope[f"names{i}"] = n.names
        args = "".join(f"v{a.id}, " if isinstance(a, Value) else f"c{i}_{j}, " for j, a in enumerate(n.args))
        for j, a in enumerate(n.args):
            if not isinstance(a, Value):
                scope[f"c{i}_{j}"] = a
        if n.computed_params():
            scope[f"params{i}"] = n.params
            first = next((a for a in n.args if isinstance(a, Value)), None)
            where = "None" if first is None else f"backend_of(v{first.id})"
            params = f"**evaluate(params{i}, env, {where})"
        else:
            scope[f"params{i}"] = n.params
            params = f"**params{i}" if n.params else ""
        call = f"apply(op{i}, ({args}), names{i}{', ' if params else ''}{params})"
        if n.op is Detached:
            call = f"detach_as({args[:-2]}, names{i})"
        if n.effect():
            scope[f"step{i}"] = n.params["run"]
            if n.outputs:
                bind(n.outputs[0], f"step{i}({args[:-2]})")
            else:
                lines.append(f"    step{i}({args[:-2]})")
            continue
        if len(n.outputs) == 1 and n.op.n_outputs == 1:
            bind(n.outputs[0], call)
        else:
            outs = ", ".join(f"v{v.id}" for v in n.outputs)
            lines.append(f"    {outs}{',' if len(n.outputs) == 1 else ''} = {call}")
            if dynamic:
                lines.extend(f"    env[{v.id}] = v{v.id}" for v in n.outputs)
    _drop(lines, drop.get(len(graph.nodes) - 1, ()), dynamic)
    results = []
    for k, v in enumerate(graph.outputs):
        if isinstance(v, Value):
            results.append(f"v{v.id}.clone()" if v.kind == "constant" else f"v{v.id}")
        else:
            scope[f"r{k}"] = v
            results.append(f"r{k}")
    lines.append(f"    return [{', '.join(results)}]")
    source = "\n".join(lines)
    exec(compile(source, "<nt.compile graph>", "exec"), scope)
    return Program(graph, scope["run"], source, externals, report)


def _drop(lines: List[str], ids, dynamic: bool) -> None:
    """The line deleting the locals ``v<id>`` of ``ids`` (and their entries of ``env``, in a program that has one)."""
    if ids:
        lines.append("    del " + ", ".join([f"v{i}" for i in ids] + ([f"env[{i}]" for i in ids] if dynamic else [])))
