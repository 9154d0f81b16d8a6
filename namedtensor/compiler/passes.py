"""The passes over a traced graph: dead code, common subexpressions, constants, elementwise fusion,
Numba row kernels.

Every pass takes a :class:`~namedtensor.compiler.ir.Graph` and rewrites it in place.  A traced graph
is pure (in-place writes are traced as new values, and random draws refuse to trace; see capture.py)
but for its steps (``Node.effect``: a backward pass, an optimizer's step), so a node
may be dropped when nothing reads its outputs, merged with an identical earlier one, or evaluated once
when it reads constants only; a step is kept where it is, and nothing is merged, moved or fused across it.

Before fusion, a linear layer whose output only one fusible node reads gives its bias to an add node
of its own (``split_biases``), so that the bias joins the chain's kernel (bias + GELU: one pass instead
of two, and the bias's gradient summed inside the backward kernel).  Fusion groups consecutive
elementwise nodes whose outputs have one shape into one node of a fused
op (``namedtensor/ops/fusion.py``), with a kernel generated for the whole group where the code
generators know every member (formulas.py); a group's outputs are the members' values that something
after it reads.  Ops that run the backend's row hooks (``Op.row_kernels``: layer and RMS norm,
attention) are given Numba kernels (backends/numba_kernels.py) in the backend's place (their ``rows``
param), and a residual add and the norm of its result become one node returning both
(``fuse_residual_norms``: the sum is normalised while each row is in the cache, and the backward adds
the residual stream's gradient in the norm's pass); this comes before fusion, so that such an add
joins its norm rather than a chain.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ..autograd.graph import apply
from ..autograd.mode import no_grad
from ..ops.fusion import Chain, Member, fused
from .formulas import COMPOSITE, SOFTMAXES, broadcast_shape, calls_math, split_reduction
from .ir import ArrayOf, Graph, Node, Value, map_leaves

__all__ = ["eliminate_dead_code", "eliminate_common_subexpressions", "fold_constants", "split_biases",
           "fuse_elementwise", "use_row_kernels", "fuse_residual_norms", "write_in_place", "optimize"]


def _rewrite(graph: Graph, replace: Dict[int, Value]) -> None:
    """Make every reader of a value in ``replace`` (by id) read its replacement."""
    if not replace:
        return

    def swap(a: Any) -> Any:
        if isinstance(a, Value):
            return replace.get(a.id, a)
        if isinstance(a, ArrayOf) and a.value.id in replace:
            return ArrayOf(replace[a.value.id])
        return a

    for n in graph.nodes:
        n.args = tuple(swap(a) for a in n.args)
        n.params = map_leaves(n.params, swap)
    graph.outputs = [swap(v) for v in graph.outputs]


def eliminate_dead_code(graph: Graph) -> int:
    """Drop the nodes none of whose outputs reach the graph's outputs; returns how many."""
    live = {v.id for v in graph.outputs if isinstance(v, Value)}
    kept: List[Node] = []
    for n in reversed(graph.nodes):
        if n.effect() or any(v.id in live for v in n.outputs):
            kept.append(n)
            live.update(v.id for v in n.values_read())
    dropped = len(graph.nodes) - len(kept)
    graph.nodes = kept[::-1]
    return dropped


def _key(a: Any) -> Any:
    if isinstance(a, Value):
        return ("v", a.id)
    if isinstance(a, ArrayOf):
        return ("a", a.value.id)
    if isinstance(a, (tuple, list)):
        return (a.__class__, tuple(_key(x) for x in a))
    if isinstance(a, dict):
        return (dict, tuple((k, _key(v)) for k, v in a.items()))
    return (a.__class__, a)


def eliminate_common_subexpressions(graph: Graph) -> int:
    """Merge each node into an earlier one of the same op on the same arguments and params; returns how
    many were merged.  Nodes whose params cannot be compared (raw arrays) stay."""
    seen: Dict[Any, Node] = {}
    replace: Dict[int, Value] = {}
    kept: List[Node] = []
    for n in graph.nodes:
        if replace:
            _rewrite_node(n, replace)
        if n.draws():  # two draws are two different masks
            kept.append(n)
            continue
        if n.effect():  # a step: two are two steps, and a node after it may read what it changed
            seen.clear()
            kept.append(n)
            continue
        try:
            key = (n.op, _key(n.args), _key(n.params), n.names)
            hash(key)
        except TypeError:
            kept.append(n)
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = n
            kept.append(n)
        else:
            replace.update({v.id: w for v, w in zip(n.outputs, first.outputs)})
    merged = len(graph.nodes) - len(kept)
    graph.nodes = kept
    graph.outputs = [replace.get(v.id, v) if isinstance(v, Value) else v for v in graph.outputs]
    return merged


def _rewrite_node(n: Node, replace: Dict[int, Value]) -> None:
    one = Graph()
    one.nodes = [n]
    _rewrite(one, replace)


def fold_constants(graph: Graph) -> int:
    """Replace each node that reads only constants by its result, computed now; returns how many were
    folded.  (Random draws refuse to trace, so every op here gives the same result at every call.)"""
    kept: List[Node] = []
    folded = 0
    for n in graph.nodes:
        reads = n.values_read()
        if reads and not n.effect() and not n.computed_params() and all(v.kind == "constant" for v in reads):
            with no_grad():
                out = apply(n.op, tuple(a.source if isinstance(a, Value) else a for a in n.args), n.names, **n.params)
            for v, t in zip(n.outputs, out if isinstance(out, tuple) else (out,)):
                v.kind, v.source = "constant", t
            folded += 1
        else:
            kept.append(n)
    graph.nodes = kept
    return folded


# ----------------------------------------------------------------------------- fusion


#: ops whose backward hands the gradient on as it is: a fused kernel would write it out again, which
#: costs what the bias's own pass saves, so a bias that only such an op reads stays in its layer
_PASS_THROUGH = frozenset({"add", "sub"})


def _readers(graph: Graph) -> Dict[int, List[int]]:
    """Each value's readers (by id): the positions of the nodes that read it, in order, each once."""
    readers: Dict[int, List[int]] = {}
    for i, n in enumerate(graph.nodes):
        for v in {v.id: v for v in n.values_read()}.values():
            readers.setdefault(v.id, []).append(i)
    return readers


def split_biases(graph: Graph, fusible: Callable[[Node], bool], add: type) -> int:
    """Make each linear layer whose bias lies along the output's last dim and whose output one
    ``fusible`` node alone reads (not returned, not an add) compute without its bias, followed by a node
    of ``add`` (the elementwise add's Op class) adding it, which fusion then joins to that reader.
    Returns how many."""
    readers = _readers(graph)
    returned = {v.id for v in graph.outputs if isinstance(v, Value)}
    out: List[Node] = []
    count = 0
    for n in graph.nodes:
        if not n.outputs:  # a step
            out.append(n)
            continue
        y = n.outputs[0]
        reads = [graph.nodes[i] for i in readers.get(y.id, [])]
        if (n.op.name == "linear" and len(n.args) == 3 and isinstance(n.args[2], Value) and not n.params["t"]
                and n.params["ax"] == len(y.shape) - 1 and y.id not in returned and len(reads) == 1
                and fusible(reads[0]) and reads[0].op.name not in _PASS_THROUGH):
            plain = graph.new_value(y.names, y.shape, y.dtype, "op")
            layer = Node(n.op, n.args[:2], n.params, (plain,), n.names)
            plain.source = layer
            bias = Node(add, (plain, n.args[2]), {}, (y,), n.names)
            y.source = bias
            out += [layer, bias]
            count += 1
        else:
            out.append(n)
    graph.nodes = out
    return count


def fuse_elementwise(graph: Graph, fusible: Callable[[Node], bool], kernels_for: Callable,
                     alone: Callable[[Node], bool] = lambda n: False,
                     absorbs: Callable[[Node], bool] = lambda n: False, math_calls: Optional[int] = None) -> int:
    """Replace each run of two or more ``fusible`` nodes (or one for which ``alone`` is true) by one node
    of a fused op; a node between them that reads none of the run's values (a matrix product of other
    operands) does not end the run, and runs before the fused node (unless it draws random numbers,
    whose order stays); ``kernels_for(chain, inputs, outputs)`` gives its generated kernels,
    forward and backward (two dicts by backend name).  The run's nodes have one shape, or one that
    broadcasts to it (a bias's ``w.abs() + 1`` among the batch's ops): such a small node is computed for
    each element of the run's shape where only the run reads it, and stays a node of its own, before
    the fused one, where a later node reads it too (its values must keep their shape).  A run whose
    only result is its last value, read by nothing but the next node, takes that node in too when
    ``absorbs`` it (a sum or mean, a softmax): the intermediate is then never stored.
    ``math_calls``: the most members of a run whose formulas call numba_math (formulas.calls_math), after
    which a new run starts (a kernel's compile time grows faster than its chain).  Returns the number of
    groups made."""
    positions = _readers(graph)
    readers = {k: p[-1] for k, p in positions.items()}  # each value's last reader
    counts = {k: len(p) for k, p in positions.items()}
    returned = {v.id for v in graph.outputs if isinstance(v, Value)}
    out: List[Node] = []
    groups = 0
    run: List[Node] = []
    deferred: List[Node] = []
    run_end = 0

    def close(reduced: bool = False) -> None:
        nonlocal groups
        out.extend(deferred)  # nodes between the run's that read none of its values: before it
        deferred.clear()
        if not run:
            return
        elementwise = run[:-1] if reduced else run
        full = _run_shape(elementwise)
        # small nodes read after the run keep their own nodes, with the small nodes they read (they read
        # no node of the run's shape: elementwise ops only broadcast, so theirs would be that shape too)
        needed = {m.outputs[0].id for m in elementwise if m.outputs[0].shape != full and (
            m.outputs[0].id in returned or readers.get(m.outputs[0].id, -1) > run_end)}
        hoisted = []
        for m in reversed(elementwise):
            if m.outputs[0].id in needed:
                hoisted.insert(0, m)
                needed.update(a.id for a in m.args if isinstance(a, Value))
        out.extend(hoisted)
        rest = [m for m in run if m not in hoisted]
        node = None
        if reduced or len(rest) >= 2 or (rest and alone(rest[0])):
            node = _fused_node(rest, run_end, readers, returned, kernels_for)
        if node is None:
            out.extend(rest)
        else:
            out.append(node)
            groups += 1
        run.clear()

    def ends_run(n: Node) -> bool:
        """Whether ``n`` reduces the run's last value, which nothing else reads, nor any value of the run
        after it."""
        last = run[-1].outputs[0]
        return (absorbs(n) and len(n.args) == 1 and n.args[0] is last and counts.get(last.id) == 1
                and last.id not in returned
                and not any(m.outputs[0].id in returned or readers.get(m.outputs[0].id, -1) > run_end
                            for m in run[:-1]))

    def full(n: Node) -> bool:
        """Whether ``n`` would take the run past ``math_calls``."""
        heavy = lambda m: calls_math(m.op.__name__, m.args)
        return math_calls is not None and heavy(n) and sum(map(heavy, run)) >= math_calls

    for i, n in enumerate(graph.nodes):
        if fusible(n) and (not run or (_joins(n, run) and not full(n))):
            run.append(n)
            run_end = i
            continue
        if run and ends_run(n) and run[-1].outputs[0].shape == _run_shape(run):
            run.append(n)
            run_end = i
            close(reduced=True)
            continue
        if run and not fusible(n) and not n.draws() and not n.effect() and not _reads(n, run):
            deferred.append(n)  # it can run before the fused node: the run goes on after it
            continue
        close()
        if fusible(n):
            run.append(n)
            run_end = i
        else:
            out.append(n)
    close()
    graph.nodes = out
    return groups


def _reads(n: Node, run: List[Node]) -> bool:
    made = {m.outputs[0].id for m in run}
    return any(v.id in made for v in n.values_read())


def _run_shape(run: List[Node]) -> tuple:
    return broadcast_shape([m.outputs[0].shape for m in run])


def _joins(n: Node, run: List[Node]) -> bool:
    """Whether ``n``'s shape and the run's are one, or one broadcasts to the other; a composite node
    (GELU...) is computed once per element of the run's shape, so it joins only at that shape."""
    mine, theirs = n.outputs[0].shape, _run_shape(run)
    if any(a != b and 1 not in (a, b) for a, b in zip(mine[::-1], theirs[::-1])):
        return False
    both = broadcast_shape([mine, theirs])
    if both not in (mine, theirs):
        return False
    small = [m for m in (*run, n) if m.outputs[0].shape != both]
    return not any(m.op.__name__ in COMPOSITE for m in small)


def _fused_node(run: List[Node], end: int, readers: Dict[int, int], returned: set,
                kernels_for: Callable) -> Optional[Node]:
    """The node of the fused op running ``run``, or None where no kernel could be made for it (a float32
    formula among float64 values on the CPU): its nodes then stay as they are."""
    made = {n.outputs[0].id: j for j, n in enumerate(run)}
    inputs: List[Value] = []
    position: Dict[int, int] = {}
    members = []
    for n in run:
        args = []
        for a in n.args:
            if isinstance(a, Value):
                if a.id in made:
                    args.append(("tmp", made[a.id]))
                else:
                    if a.id not in position:
                        position[a.id] = len(inputs)
                        inputs.append(a)
                    args.append(("in", position[a.id]))
            else:
                args.append(a)
        members.append(Member(n.op, tuple(args), n.params, n.names, n.outputs[0].dtype))
    leaving = [j for j, n in enumerate(run) if n.outputs[0].id in returned or readers.get(n.outputs[0].id, -1) > end]
    if not leaving:
        leaving = [len(run) - 1]
    # a float output first: autograd gives a multi-output node's first output a gradient whatever its dtype
    leaving.sort(key=lambda j: run[j].outputs[0].dtype == "bool")
    chain = Chain(tuple(members), tuple(leaving))
    outputs = [run[j].outputs[0] for j in leaving]
    forward, backward = kernels_for(chain, inputs, outputs)
    if not forward:
        return None
    op = fused(chain, forward, backward, saves_output=split_reduction(chain)[1] in SOFTMAXES.values())
    names = outputs[0].names if len(outputs) == 1 else tuple(v.names for v in outputs)
    node = Node(op, tuple(inputs), {}, tuple(outputs), names)
    for v in outputs:
        v.source = node
    return node


def use_row_kernels(graph: Graph, rows: Any, dtypes=("float32", "float64")) -> int:
    """Hand ``rows`` (an object with the backend's row hooks) to the nodes of ops that take it, on inputs
    of ``dtypes``; returns how many."""
    count = 0
    for n in graph.nodes:
        x = n.args[0] if n.args else None
        if not (isinstance(x, Value) and x.dtype in dtypes):
            continue
        if n.op.row_kernels:
            n.params = dict(n.params, rows=rows)
            count += 1
    return count


def fuse_residual_norms(graph: Graph, add: type, after_add: Dict[type, type], in_rows: Callable[[Node], bool]) -> int:
    """Join each add of two values with the sum's names and shape (a residual add: no alignment, no
    broadcast) to a norm reading the sum that runs in row kernels (normalised dims last; ``in_rows``
    says whether the norm's node runs the kernels that do both: on the CPU, the nodes given Numba's),
    one node of ``after_add[the norm's op]`` in the add's place, returning the sum and its norm.  The
    norm's other arguments (weight, bias) must exist before the add.  Returns how many."""
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    readers = _readers(graph)

    def before(v: Any, i: int) -> bool:
        return not isinstance(v, Value) or v.kind != "op" or position[id(v.source)] < i

    joined: Dict[int, Node] = {}  # the add's position -> the node replacing it
    dropped = set()
    for i, n in enumerate(graph.nodes):
        if n.op is not add or len(n.args) != 2:
            continue
        h = n.outputs[0]
        if not all(isinstance(a, Value) and (a.names, a.shape, a.dtype) == (h.names, h.shape, h.dtype)
                   for a in n.args):
            continue
        norm = next((j for j in readers.get(h.id, []) if (m := graph.nodes[j]).op in after_add and m.args[0] is h
                     and m.params["plan"].rows is not None and in_rows(m)
                     and all(before(a, i) for a in m.args[1:])), None)
        if norm is None:
            continue
        m = graph.nodes[norm]
        y = m.outputs[0]
        node = Node(after_add[m.op], n.args + m.args[1:], m.params, (h, y), (h.names, y.names))
        h.source = y.source = node
        joined[i] = node
        dropped.add(norm)
    graph.nodes = [joined.get(i, n) for i, n in enumerate(graph.nodes) if i not in dropped]
    return len(joined)


def write_in_place(graph: Graph) -> int:
    """Make each setitem whose old value is an op's result that nothing else reads (nor returns) write into
    that result's array instead of a copy of it; returns how many.  The trace lets a write into an op's
    result through only where no other tensor may see its data (not a view's result, nor viewed), and an
    op's result is an array of its own; the op must not keep it for its backward either (``saves_output``,
    ``stashes``).  So a tensor built by writes into its parts costs one copy, not one per write, and a
    write into an op's fresh result (``y = x * 2; y[0] = 0``) none."""
    readers = _readers(graph)
    returned = {v.id for v in graph.outputs if isinstance(v, Value)}
    count = 0
    for n in graph.nodes:
        old = n.args[0] if n.op.name == "setitem" else None
        if (isinstance(old, Value) and old.kind == "op" and old.id not in returned and len(readers[old.id]) == 1
                and not (old.source.op.saves_output or old.source.op.stashes or old.source.op.view
                         or getattr(old.source.op, "may_view", False))):
            n.params = {**n.params, "in_place": True}
            count += 1
    return count


def optimize(graph: Graph, fuse: Optional[Callable[[Graph], int]] = None, rows: Any = None,
             split: Optional[Callable[[Graph], int]] = None,
             residual: Optional[Callable[[Graph], int]] = None) -> Dict[str, int]:
    """The passes in order; returns what each did (for ``explain()``).  ``split``: :func:`split_biases`
    with its arguments bound, where fusion makes kernels; ``residual``: :func:`fuse_residual_norms` with
    its arguments bound, where a backend's or the row kernels join an add to its norm."""
    report = {"nodes traced": len(graph.nodes)}
    report["constants folded"] = fold_constants(graph)
    report["subexpressions merged"] = eliminate_common_subexpressions(graph)
    report["dead nodes dropped"] = eliminate_dead_code(graph)
    if split is not None:
        report["biases split"] = split(graph)
    if rows is not None:
        report["row kernels"] = use_row_kernels(graph, rows)
    if residual is not None:  # before fusion: an add that a norm reads joins the norm, not a chain
        report["residual norms joined"] = residual(graph)
    if fuse is not None:
        report["fused groups"] = fuse(graph)
    report["writes in place"] = write_in_place(graph)
    report["nodes run"] = len(graph.nodes)
    return report
