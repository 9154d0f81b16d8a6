"""``export``: the two traces, which dims are dynamic, and the ONNX model around the converted nodes.

The first trace uses the specs' sizes, the second other sizes for the dynamic dims (:func:`_second_trace`
says how they are chosen and what happens when the function refuses them); converters.py then writes
each node of the first graph with its twin from the second, through a context.py
:class:`~namedtensor.onnx.context.Context`, and :func:`export` wraps the nodes into a checked model whose
inputs and outputs carry the dims' names.
"""

from __future__ import annotations

import inspect
import json
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..compiler.capture import Untraceable, capture, flatten
from ..compiler.ir import Graph, Value
from ..compiler.passes import eliminate_common_subexpressions, eliminate_dead_code, fold_constants
from ..nn import Module
from ..nn.module import compiled_target
from ..tensor import Tensor
from ..tracing import spec
from .context import Context, Size, Sizes, UnsupportedExport, onnx_dtype
from .converters import convert

__all__ = ["export"]

#: the opset the models declare: 20 has Gelu (both forms), ReduceMean with axes as an input, and
#: LayerNormalization
OPSET = 20
#: the ONNX IR version the models declare, the newest that ONNX Runtime 1.17 and later read
IR_VERSION = 10


def _onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError("nt.onnx.export needs the onnx package: pip install 'named-tensors[export]'") from None
    return onnx


# ----------------------------------------------------------------------------- tracing


def _trace(fn: Callable, args: Tuple[Any, ...]) -> Graph:
    leaves, tree = flatten((args, {}))
    try:
        graph = capture(fn, list(leaves), tree, constants_on="cpu")  # initializers need values
    except Untraceable as e:
        raise UnsupportedExport(f"nt.onnx.export: the function cannot be traced into a graph: {e}.") from None
    fold_constants(graph)
    eliminate_common_subexpressions(graph)
    eliminate_dead_code(graph)
    return graph


def _dynamic_dims(specs: Sequence[Any], graph: Graph, dynamic: Optional[Iterable[str]]) -> Dict[str, int]:
    """The dynamic dims and their sizes in the first trace: ``dynamic`` if given, else every named dim of
    a tensor argument that no parameter or constant of the graph has."""
    sizes: Dict[str, int] = {}
    for t in specs:
        if isinstance(t, Tensor):
            for name, n in zip(t.names, t.shape):
                if name is not None:
                    if sizes.setdefault(name, n) != n:
                        raise ValueError(f"nt.onnx.export: the inputs give the dim {name!r} two sizes, {sizes[name]} "
                                         f"and {n}.")
    if dynamic is not None:
        wanted = (dynamic,) if isinstance(dynamic, str) else tuple(dynamic)
        unknown = [n for n in wanted if n not in sizes]
        if unknown:
            raise ValueError(f"nt.onnx.export: dynamic= names {unknown}, which no input has (the inputs' dims: "
                             f"{sorted(sizes)}).")
        return {n: sizes[n] for n in wanted}
    fixed = {n for v in graph.values if v.kind in ("external", "constant") for n in v.names if n is not None}
    return {n: s for n, s in sizes.items() if n not in fixed}


def _other_sizes(first: Dict[str, int], group: Dict[str, str], graph: Graph) -> Dict[str, int]:
    """Sizes for the second trace, one per name of ``group``'s values: primes that divide no size of the
    first graph and differ per name, so that a size of the first trace matches one product only."""
    seen = {n for v in graph.values for n in v.shape if n > 1}
    out: Dict[str, int] = {}
    p = 10
    for name in sorted(set(group.values())):
        while True:
            p += 1
            if all(p % k for k in range(2, int(p ** 0.5) + 1)) and not any(s % p == 0 for s in seen):
                break
        out[name] = p
    return out


def _converted(onnx, fn: Callable, specs: Sequence[Any], first: Graph, dyn: Dict[str, int], group: Dict[str, str],
               names_in: List[str]) -> Context:
    """The nodes of ``first`` converted with a second trace where the dims of ``group`` (each standing for
    the size of its value's name) take other sizes; raises :class:`UnsupportedExport` where that fails."""
    second_sizes = _other_sizes(dyn, group, first)
    new = {n: second_sizes[r] for n, r in group.items()}
    try:
        second = _trace(fn, tuple(_respec(t, new) for t in specs))
    except UnsupportedExport:
        raise
    except Exception as e:
        raise UnsupportedExport(
            f"nt.onnx.export: the function does not run with other sizes of the dynamic dims "
            f"({', '.join(f'{n}={k}' for n, k in sorted(new.items()))}), which a model that takes them from its "
            f"inputs needs: {type(e).__name__}: {e}. Make dims static with dynamic=.") from None
    _same_structure(first, second)
    sizes = Sizes({r: dyn[r] for r in second_sizes}, second_sizes, group)
    ctx = Context(onnx, first, second, sizes, names_in, _parameter_names(fn))
    for n1, n2 in zip(first.nodes, second.nodes):
        convert(ctx, n1, n2)
    for v in first.values:  # constants no node reads first (an output): checked as the others
        if v.kind in ("external", "constant") and any(v is o for o in first.outputs):
            ctx.value(v)
    return ctx


def _convert(onnx, fn: Callable, specs: Sequence[Any], first: Graph, dyn: Dict[str, int], explicit: bool,
             names_in: List[str]):
    """``(context, group)``: the graph converted with the dynamic dims as dynamic as the function allows.
    Each dim gets its own size first; where that fails, the dims of equal sizes in the specs share one (a
    mask's ``key`` and a self-attention's ``seq``); where that fails too and ``dynamic`` was not given,
    the dims with which it fails (a shape computed by a division, a constant made from a size) stay
    static, with a warning naming them and why."""
    def attempt(group: Dict[str, str]):
        try:
            return _converted(onnx, fn, specs, first, dyn, group, names_in), None
        except UnsupportedExport as e:
            return None, e

    alone = {n: n for n in dyn}
    tied = {n: min(m for m in dyn if dyn[m] == dyn[n]) for n in dyn}
    ctx, error = attempt(alone)
    if ctx is not None:
        return ctx, alone
    if tied != alone:
        ctx, _ = attempt(tied)
        if ctx is not None:
            return ctx, tied
    if explicit:
        raise error
    kept = {r for r in set(tied.values()) if attempt({n: g for n, g in tied.items() if g == r})[0] is not None}
    group = {n: g for n, g in tied.items() if g in kept}
    ctx, _ = attempt(group)
    if ctx is None:
        raise error
    warnings.warn(f"nt.onnx.export: the dims {sorted(n for n in dyn if n not in group)} stay static: {error}",
                  stacklevel=3)
    return ctx, group


def _respec(t: Any, sizes: Dict[str, int]) -> Any:
    if not isinstance(t, Tensor):
        return t
    return spec(t.names, tuple(sizes.get(n, s) if n is not None else s for n, s in zip(t.names, t.shape)), t.dtype)


def _same_structure(a: Graph, b: Graph) -> None:
    ops_a, ops_b = [n.op for n in a.nodes], [n.op for n in b.nodes]
    if ops_a != ops_b or len(a.values) != len(b.values):
        first = next((x.name for x, y in zip(ops_a, ops_b) if x is not y), "the end of the graph")
        raise UnsupportedExport(
            "nt.onnx.export: the function runs other ops when the dynamic dims take other sizes (first difference at "
            f"{first}): Python code branches on them. Make those dims static with dynamic=.")


def _parameter_names(fn: Any) -> Dict[int, str]:
    """A module's parameters and buffers by tensor id: their state-dict keys, the initializers' names."""
    if not isinstance(fn, Module):
        return {}
    names = {id(t): name for name, t in fn.named_buffers()}
    names.update({id(t): name for name, t in fn.named_parameters()})
    return names


def _argument_names(fn: Any, specs: Sequence[Any], given: Optional[Sequence[str]]) -> List[str]:
    """The model's input names: ``given``, else the names of the function's parameters that the tensor
    arguments take (``input0``, ``input1``... where the signature does not say)."""
    at = [k for k, t in enumerate(specs) if isinstance(t, Tensor)]
    if given is not None:
        if len(given) != len(at):
            raise ValueError(f"nt.onnx.export: input_names has {len(given)} names for {len(at)} tensor inputs.")
        return list(given)
    target = fn.forward if isinstance(fn, Module) else fn
    try:
        params = [p.name for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[k] for k in at] if len(params) >= len(specs) else [f"input{n}" for n in range(len(at))]


# ----------------------------------------------------------------------------- the model


def _value_info(onnx, name: str, v: Value, sizes: Sequence[Optional[Size]], group: Dict[str, str]):
    # a dim of a dynamic size keeps its own name (a mask's key, where key and seq share a size); a size that
    # is no product of them (a convolution's output) is left unknown
    dims = [None if s is None else s.factor if not s.symbols else n if s == Size(1, (group.get(n),)) else s.label()
            for n, s in zip(v.names, sizes)]
    info = onnx.helper.make_tensor_value_info(name, onnx_dtype(onnx, v.dtype), dims)
    info.doc_string = "dims: (" + ", ".join("-" if n is None else n for n in v.names) + ")"
    return info


def export(fn_or_module: Callable, *specs: Any, path: Optional[str] = None, dynamic: Optional[Iterable[str]] = None,
           input_names: Optional[Sequence[str]] = None, output_names: Optional[Sequence[str]] = None):
    """``fn_or_module`` as an ONNX model (an ``onnx.ModelProto``, also written to ``path`` when given).

    ``specs`` are the arguments to trace it with: tensors (``nt.spec(("batch", "seq"), (2, 16),
    dtype=nt.int64)`` or real ones) and other values, which are fixed in the graph.  A module is traced in
    eval mode (dropout off), its flags restored after; its parameters and buffers become initializers
    named by their state-dict keys.  The inputs are named after the function's parameters (or
    ``input_names``), the outputs ``output`` (``output0``, ``output1``... for several, or ``output_names``).

    ``dynamic``: the dims (by name) whose sizes the model takes from its inputs when it runs; by default
    every named dim of the tensor arguments that no parameter or constant has, as far as the function
    allows (a dim with which it does not run or export at other sizes stays static, with a warning that
    says why; given explicitly, such a dim is an error).  They appear in the model as symbolic dims of
    those names, and the metadata ``namedtensor.dims`` lists every input's and output's dim names.  Ops
    without an ONNX form raise :class:`UnsupportedExport` naming the op.
    """
    onnx = _onnx()
    fn = compiled_target(fn_or_module)  # a compiled function or module exports as what it compiled
    modes = None
    if isinstance(fn, Module):
        modes = [(m, m.training) for m in fn.modules()]
        fn.eval()
    try:
        first = _trace(fn, specs)
        names_in = _argument_names(fn, specs, input_names)
        dyn = _dynamic_dims(specs, first, dynamic)
        ctx, group = _convert(onnx, fn, specs, first, dyn, dynamic is not None, names_in)
    finally:
        for m, mode in modes or ():
            m.training = mode
    outs = [v for v in first.outputs]
    if not outs or not all(isinstance(v, Value) for v in outs):
        raise UnsupportedExport("nt.onnx.export: the function must return a tensor or a tuple of tensors, got "
                                + ", ".join(type(v).__name__ for v in outs if not isinstance(v, Value)) + ".")
    if output_names is None:
        output_names = ["output"] if len(outs) == 1 else [f"output{k}" for k in range(len(outs))]
    elif len(output_names) != len(outs):
        raise ValueError(f"nt.onnx.export: output_names has {len(output_names)} names for {len(outs)} outputs.")
    for v, name in zip(outs, output_names):
        ctx.emit("Identity", [ctx.value(v)], [name])
    inputs = [_value_info(onnx, name, v, ctx.labels(v), group) for v, name in zip(first.inputs, names_in)]
    outputs = [_value_info(onnx, name, v, ctx.labels(v), group) for v, name in zip(outs, output_names)]
    graph = onnx.helper.make_graph(ctx.nodes, getattr(fn, "__name__", type(fn).__name__), inputs, outputs,
                                   ctx.initializers)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)],
                                   producer_name="namedtensor")
    model.ir_version = IR_VERSION
    dims = {name: list(v.names) for v, name in zip(first.inputs, names_in)}
    dims.update({name: list(v.names) for v, name in zip(outs, output_names)})
    onnx.helper.set_model_props(model, {"namedtensor.dims": json.dumps(dims)})
    onnx.checker.check_model(model)
    if path is not None:
        onnx.save(model, path)
    return model

