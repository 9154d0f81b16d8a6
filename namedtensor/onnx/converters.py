"""Each op's ONNX form: one converter per Op class (by class name), ``convert(ctx, node, twin)``.

A converter writes the ONNX nodes computing ``node``'s outputs into the names ``ctx.value(output)``,
from ``ctx.value`` of its inputs (:class:`~namedtensor.onnx.context.Context`).  ``twin`` is
the node in the second trace, where the dynamic dims have other sizes: a converter whose params hold
sizes (a reshape's target, an embedding's index shape) reads them through ``ctx.size``/``ctx.sizes``, and
every other op's params must be the same in both traces (:func:`convert` checks), or the export says
which op depends on the dynamic sizes.

The name rules need no ONNX counterpart: names only decide which axis an op works on, and the traced
params already hold those axes; the model's inputs and outputs carry the names (export.py).  Python
numbers in an op take the dtype of its tensor operand, as NumPy 2's weak scalars do.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..compiler.ir import ArrayOf, Derived, Node, Value
from .context import Context, UnsupportedExport, onnx_dtype

__all__ = ["convert", "CONVERTERS"]

Converter = Callable[[Context, Node, Node], None]


# ----------------------------------------------------------------------------- helpers


def _out(ctx: Context, node: Node, k: int = 0) -> str:
    return ctx.value(node.outputs[k])


def _operand(ctx: Context, a: Any, dtype: str) -> str:
    """A tensor operand cast to ``dtype`` where it has another, or a Python number as a ``dtype`` constant."""
    if isinstance(a, Value):
        name = ctx.value(a)
        return name if a.dtype == dtype else ctx.emit("Cast", [name], to=onnx_dtype(ctx.onnx, dtype))
    return ctx.scalar(a, dtype)


def _compute_dtype(node: Node) -> str:
    """The dtype an elementwise op computes in: its result's, or for a comparison its tensor operands'
    common one (the float one where they mix)."""
    out = node.outputs[0].dtype
    if out != "bool":
        return out
    dtypes = [a.dtype for a in node.args if isinstance(a, Value)]
    floats = [d for d in dtypes if d.startswith(("float", "bfloat"))]
    return floats[0] if floats else dtypes[0]


def _same(a: Any, b: Any) -> bool:
    """Whether two params of the twin nodes are the same (values compared by id: the traces number them alike)."""
    if isinstance(a, Value) and isinstance(b, Value):
        return a.id == b.id
    if isinstance(a, ArrayOf) and isinstance(b, ArrayOf):
        return a.value.id == b.value.id
    if isinstance(a, Derived) and isinstance(b, Derived):
        return a.fn == b.fn and _same(a.args, b.args) and _same(a.kwargs, b.kwargs)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _transpose(ctx: Context, x: str, perm: Sequence[int]) -> str:
    perm = list(perm)
    return x if perm == sorted(perm) else ctx.emit("Transpose", [x], perm=perm)


def _work(ctx: Context, x: str, src: Sequence[int]) -> str:
    """Attention's working layout of ``x``: its axes in ``src``'s order, a size-1 axis where ``src`` has -1."""
    x = _transpose(ctx, x, [s for s in src if s >= 0])
    missing = [j for j, s in enumerate(src) if s < 0]
    return ctx.emit("Unsqueeze", [x, ctx.ints(missing)]) if missing else x


def _inverse(perm: Sequence[int]) -> List[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


# ----------------------------------------------------------------------------- elementwise

_BINARY = {"_Add": "Add", "_Sub": "Sub", "_Mul": "Mul", "_Div": "Div", "_Maximum": "Max", "_Minimum": "Min",
           "_Pow": "Pow", "_Eq": "Equal", "_Lt": "Less", "_Le": "LessOrEqual", "_Gt": "Greater",
           "_Ge": "GreaterOrEqual"}
_UNARY = {"_Neg": "Neg", "_Exp": "Exp", "_Log": "Log", "_Tanh": "Tanh", "_Sigmoid": "Sigmoid", "_Relu": "Relu",
          "_Sqrt": "Sqrt", "_Abs": "Abs", "_Erf": "Erf", "_Reciprocal": "Reciprocal", "_Sin": "Sin", "_Cos": "Cos",
          "_Softplus": "Softplus", "_Sign": "Sign", "_Floor": "Floor", "_Ceil": "Ceil", "_Round": "Round"}


def _binary(op_type: str) -> Converter:
    def convert(ctx: Context, node: Node, twin: Node) -> None:
        dtype = _compute_dtype(node)
        ctx.emit(op_type, [_operand(ctx, a, dtype) for a in node.args], [_out(ctx, node)])

    return convert


def _unary(op_type: str) -> Converter:
    def convert(ctx: Context, node: Node, twin: Node) -> None:
        ctx.emit(op_type, [_operand(ctx, node.args[0], node.outputs[0].dtype)], [_out(ctx, node)])

    return convert


def _composite(build: Callable[[Context, str, str], List[str]]) -> Converter:
    """An op written as a few ONNX nodes: ``build(ctx, x, dtype)`` returns the op type and inputs of the last."""

    def convert(ctx: Context, node: Node, twin: Node) -> None:
        dtype = node.outputs[0].dtype
        op_type, *inputs = build(ctx, _operand(ctx, node.args[0], dtype), dtype)
        ctx.emit(op_type, inputs, [_out(ctx, node)])

    return convert


def _bitwise(bool_op: str, int_op: str) -> Converter:
    """``&``, ``|``, ``^``, ``~``: the logical op on bools, the bitwise one on integers."""

    def convert(ctx: Context, node: Node, twin: Node) -> None:
        dtype = node.outputs[0].dtype
        ctx.emit(bool_op if dtype == "bool" else int_op, [_operand(ctx, a, dtype) for a in node.args],
                 [_out(ctx, node)])

    return convert


def _logical(op_type: str) -> Converter:
    def convert(ctx: Context, node: Node, twin: Node) -> None:
        ctx.emit(op_type, [_operand(ctx, a, "bool") for a in node.args], [_out(ctx, node)])

    return convert


def _isfinite(ctx: Context, node: Node, twin: Node) -> None:
    x = ctx.value(node.args[0])
    if not node.args[0].dtype.startswith(("float", "bfloat")):  # integers and bools are finite
        ctx.emit("Not", [ctx.emit("IsNaN", [ctx.emit("Cast", [x], to=ctx.onnx.TensorProto.FLOAT)])], [_out(ctx, node)])
        return
    bad = ctx.emit("Or", [ctx.emit("IsNaN", [x]), ctx.emit("IsInf", [x])])
    ctx.emit("Not", [bad], [_out(ctx, node)])


def _test(op_type: str) -> Converter:
    """isnan, isinf: on a float operand (bools and integers are neither)."""

    def convert(ctx: Context, node: Node, twin: Node) -> None:
        x = node.args[0]
        dtype = x.dtype if x.dtype.startswith(("float", "bfloat")) else "float32"
        ctx.emit(op_type, [_operand(ctx, x, dtype)], [_out(ctx, node)])

    return convert


def _not_equal(ctx: Context, node: Node, twin: Node) -> None:
    dtype = _compute_dtype(node)
    eq = ctx.emit("Equal", [_operand(ctx, a, dtype) for a in node.args])
    ctx.emit("Not", [eq], [_out(ctx, node)])


def _where(ctx: Context, node: Node, twin: Node) -> None:
    cond, a, b = node.args
    dtype = node.outputs[0].dtype
    ctx.emit("Where", [_operand(ctx, cond, "bool"), _operand(ctx, a, dtype), _operand(ctx, b, dtype)],
             [_out(ctx, node)])


def _clip(ctx: Context, node: Node, twin: Node) -> None:
    dtype = node.outputs[0].dtype
    bounds = [("" if node.params.get(k) is None else ctx.scalar(node.params[k], dtype)) for k in ("min", "max")]
    ctx.emit("Clip", [_operand(ctx, node.args[0], dtype), *bounds], [_out(ctx, node)])


def _gelu(approximate: str) -> Converter:
    def convert(ctx: Context, node: Node, twin: Node) -> None:
        ctx.emit("Gelu", [_operand(ctx, node.args[0], node.outputs[0].dtype)], [_out(ctx, node)],
                 approximate=approximate)

    return convert


_COMPOSITE = {
    "_Silu": lambda ctx, x, dt: ["Mul", x, ctx.emit("Sigmoid", [x])],
    "_Rsqrt": lambda ctx, x, dt: ["Reciprocal", ctx.emit("Sqrt", [x])],
    "_Square": lambda ctx, x, dt: ["Mul", x, x],
    "_Expm1": lambda ctx, x, dt: ["Sub", ctx.emit("Exp", [x]), ctx.scalar(1.0, dt)],
    "_Log1P": lambda ctx, x, dt: ["Log", ctx.emit("Add", [x, ctx.scalar(1.0, dt)])],
}


# ----------------------------------------------------------------------------- names, shapes, dtypes


def _identity(ctx: Context, node: Node, twin: Node) -> None:
    ctx.emit("Identity", [ctx.value(node.args[0])], [_out(ctx, node)])


def _reshape(ctx: Context, node: Node, twin: Node) -> None:
    # the target from the output's sizes, which follow the dynamic dims where the traced shape does
    ctx.emit("Reshape", [ctx.value(node.args[0]), ctx.shape(ctx.sizes(node.outputs[0]))], [_out(ctx, node)])


def _align(ctx: Context, node: Node, twin: Node) -> None:
    ctx.emit("Identity", [_work(ctx, ctx.value(node.args[0]), node.params["source"])], [_out(ctx, node)])


def _permute(ctx: Context, node: Node, twin: Node) -> None:
    ctx.emit("Transpose", [ctx.value(node.args[0])], [_out(ctx, node)], perm=list(node.params["perm"]))


def _cast(ctx: Context, node: Node, twin: Node) -> None:
    x, dtype = node.args[0], node.outputs[0].dtype
    if x.dtype.startswith("complex"):
        raise UnsupportedExport("nt.onnx.export: casts of complex tensors have no ONNX form.")
    ctx.emit("Cast", [ctx.value(x)], [_out(ctx, node)], to=onnx_dtype(ctx.onnx, dtype))


# ----------------------------------------------------------------------------- reductions, products, layers


def _reduce(op_type: Union[str, Tuple[str, str]]) -> Converter:
    """A reduction over the ``axes`` param (None: all); a pair of op types is (largest, smallest), chosen by
    the ``largest`` param (amax, amin)."""

    def convert(ctx: Context, node: Node, twin: Node) -> None:
        x = node.args[0]
        axes = node.params["axes"]
        kind = op_type if isinstance(op_type, str) else op_type[0 if node.params["largest"] else 1]
        inputs = [_operand(ctx, x, node.outputs[0].dtype)]
        if axes is not None:
            inputs.append(ctx.ints(list(axes)))
        ctx.emit(kind, inputs, [_out(ctx, node)], keepdims=int(bool(node.params["keepdim"])))

    return convert


def _softmax(op_type: str) -> Converter:
    def convert(ctx: Context, node: Node, twin: Node) -> None:
        ctx.emit(op_type, [_operand(ctx, node.args[0], node.outputs[0].dtype)], [_out(ctx, node)],
                 axis=node.params["axis"])

    return convert


def _arg_extreme(ctx: Context, node: Node, twin: Node) -> None:
    """argmax, argmin: the first index of the extreme, as NumPy gives."""
    prm = node.params
    ctx.emit("ArgMax" if prm["largest"] else "ArgMin", [ctx.value(node.args[0])], [_out(ctx, node)],
             axis=prm["axis"], keepdims=int(bool(prm["keepdim"])), select_last_index=0)


def _cumsum(ctx: Context, node: Node, twin: Node) -> None:
    prm = node.params
    ctx.emit("CumSum", [_operand(ctx, node.args[0], node.outputs[0].dtype), ctx.int_scalar(prm["axis"])],
             [_out(ctx, node)], exclusive=int(bool(prm["exclusive"])), reverse=int(bool(prm["reverse"])))


def _var(ctx: Context, node: Node, twin: Node) -> None:
    """``sum((x - mean)^2) / (n - correction)`` over the axes, ``n`` their sizes' product read at run time."""
    prm = node.params
    dtype = node.outputs[0].dtype
    x = _operand(ctx, node.args[0], dtype)
    axes = list(prm["axes"]) if prm["axes"] is not None else list(range(len(node.args[0].shape)))
    axis = ctx.ints(axes)
    centered = ctx.emit("Sub", [x, ctx.emit("ReduceMean", [x, axis], keepdims=1)])
    total = ctx.emit("ReduceSumSquare", [centered, axis], keepdims=int(bool(prm["keepdim"])))
    count = ctx.emit("ReduceProd", [ctx.emit("Gather", [ctx.emit("Shape", [x]), axis], axis=0)], keepdims=0)
    count = ctx.emit("Cast", [count], to=onnx_dtype(ctx.onnx, dtype))
    ctx.emit("Div", [total, ctx.emit("Sub", [count, ctx.scalar(float(prm["correction"]), dtype)])], [_out(ctx, node)])


def _cat(ctx: Context, node: Node, twin: Node) -> None:
    dtype = node.outputs[0].dtype
    parts = [_operand(ctx, a, dtype) for a in node.args]
    if node.op.__name__ == "_Stack":
        parts = [ctx.emit("Unsqueeze", [p, ctx.ints([node.params["axis"]])]) for p in parts]
    ctx.emit("Concat", parts, [_out(ctx, node)], axis=node.params["axis"])


def _flip(ctx: Context, node: Node, twin: Node) -> None:
    axes = list(node.params["axes"])
    n = len(axes)
    ctx.emit("Slice", [ctx.value(node.args[0]), ctx.ints([-1] * n), ctx.ints([-(2 ** 63)] * n), ctx.ints(axes),
                       ctx.ints([-1] * n)], [_out(ctx, node)])


def _basic_key(ctx: Context, node: Node, x: str, ndim: int) -> None:
    """``x[key]`` for a key of ints, slices and one ``...``: a Slice of the sliced dims, then a Squeeze of
    those an int took."""
    key = list(node.params["key"])
    if any(k is None or not isinstance(k, (int, slice, type(Ellipsis))) or isinstance(k, bool) for k in key):
        raise UnsupportedExport(f"nt.onnx.export: the index {tuple(key)} has no ONNX form here (ints, slices and "
                                "... export; new dims and index arrays do not).")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key[at:at + 1] = [slice(None)] * (ndim - len(key) + 1)
    starts, ends, axes, steps, squeeze = [], [], [], [], []
    for d, k in enumerate(key):
        if isinstance(k, int):
            starts.append(k)
            ends.append(k + 1 if k != -1 else 2 ** 63 - 1)
            steps.append(1)
            squeeze.append(d)
        elif k != slice(None):
            step = 1 if k.step is None else k.step
            starts.append(k.start if k.start is not None else (0 if step > 0 else -1))
            ends.append(k.stop if k.stop is not None else (2 ** 63 - 1 if step > 0 else -(2 ** 63)))
            steps.append(step)
        else:
            continue
        axes.append(d)
    y = x
    if axes:
        y = ctx.emit("Slice", [x, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes), ctx.ints(steps)])
    if squeeze:
        y = ctx.emit("Squeeze", [y, ctx.ints(squeeze)])
    ctx.emit("Identity", [y], [_out(ctx, node)])


def _getitem(ctx: Context, node: Node, twin: Node) -> None:
    _basic_key(ctx, node, ctx.value(node.args[0]), len(node.args[0].shape))


def _index_select(ctx: Context, node: Node, twin: Node) -> None:
    """``x[..., index, ...]`` with one 1-D index array among full slices: a Gather along its axis."""
    key = node.params["key"]
    arrays = [d for d, k in enumerate(key) if isinstance(k, ArrayOf)]
    if len(arrays) != 1 or any(k != slice(None) for d, k in enumerate(key) if d != arrays[0]):
        raise UnsupportedExport(f"nt.onnx.export: the index {key} has no ONNX form here (one index array along a dim "
                                "exports).")
    ctx.emit("Gather", [ctx.value(node.args[0]), ctx.value(key[arrays[0]].value)], [_out(ctx, node)], axis=arrays[0])


def _gather(ctx: Context, node: Node, twin: Node) -> None:
    prm = node.params
    if prm["crop"] is not None or not isinstance(prm["index"], ArrayOf):
        raise UnsupportedExport("nt.onnx.export: a gather whose index is cropped or computed has no ONNX form here.")
    ctx.emit("GatherElements", [ctx.value(node.args[0]), ctx.value(prm["index"].value)], [_out(ctx, node)],
             axis=prm["ax"])


def _matmul(ctx: Context, node: Node, twin: Node) -> None:
    dtype = node.outputs[0].dtype
    ctx.emit("MatMul", [_operand(ctx, a, dtype) for a in node.args], [_out(ctx, node)])


def _linear(ctx: Context, node: Node, twin: Node) -> None:
    x, w = node.args[0], node.args[1]
    ax, ndim = node.params["ax"], len(x.shape)
    weight = ctx.value(w)
    # y = x W^T along axis ax (W^T itself where t: the input's gradient), with the axis moved last and back
    weight_t = weight if node.params["t"] else ctx.emit("Transpose", [weight], perm=[1, 0])
    order = [d for d in range(ndim) if d != ax] + [ax]
    y = ctx.emit("MatMul", [_transpose(ctx, ctx.value(x), order), weight_t])
    if len(node.args) == 3 and node.args[2] is not None:
        y = ctx.emit("Add", [y, ctx.value(node.args[2])])
    ctx.emit("Identity", [_transpose(ctx, y, _inverse(order))], [_out(ctx, node)])


def _recipe(ctx: Context, p: Any, q: Any, what: str) -> Any:
    """An index param that the op's function derived from traced arrays (``Derived``: reshape, arange,
    cast...) as an ONNX tensor, its numbers matched to sizes by the twin ``q``; other params as they are."""
    if isinstance(p, ArrayOf):
        return ctx.value(p.value)
    if not isinstance(p, Derived):
        return p
    if p.fn == "reshape":
        x = _recipe(ctx, p.args[0], q.args[0], what)
        sizes = [ctx.size(a, b, lambda: f"the shape of {what}") for a, b in zip(p.args[1], q.args[1])]
        return ctx.emit("Reshape", [x, ctx.shape(sizes)])
    if p.fn == "arange" and all(isinstance(a, int) for a in p.args) and set(p.kwargs) <= {"dtype"}:
        start, stop, step = (0, *p.args, 1) if len(p.args) == 1 else (*p.args, 1) if len(p.args) == 2 else p.args
        other = (0, *q.args, 1) if len(q.args) == 1 else (*q.args, 1) if len(q.args) == 2 else q.args
        bounds = [ctx.scalar_size(ctx.size(a, b, lambda: f"the arange of {what}"))
                  for a, b in zip((start, stop, step), other)]
        out = ctx.emit("Range", bounds)
        dtype = str(p.kwargs.get("dtype", "int64"))
        return out if dtype == "int64" else ctx.emit("Cast", [out], to=onnx_dtype(ctx.onnx, dtype))
    if p.fn == "astype":
        x = _recipe(ctx, p.args[0], q.args[0], what)
        return ctx.emit("Cast", [x], to=onnx_dtype(ctx.onnx, str(p.args[1])))
    raise UnsupportedExport(f"nt.onnx.export: {what} is computed by the backend function {p.fn!r}, which has no "
                            "ONNX form here.")


def _embedding(ctx: Context, node: Node, twin: Node) -> None:
    prm, other = node.params, twin.params
    index = _recipe(ctx, prm["index"], other["index"], "an embedding's index")
    rows = ctx.emit("Gather", [ctx.value(node.args[0]), index], axis=prm["wax"])
    if prm["wax"] == 1:
        rows = ctx.emit("Transpose", [rows], perm=[1, 0])
    ctx.emit("Reshape", [rows, ctx.shape(ctx.sizes(node.outputs[0]))], [_out(ctx, node)])


def _aligned_param(ctx: Context, w: Value, perm: Optional[Sequence[int]]) -> str:
    """A norm's weight or bias laid out along the normalised axes, in the input's order."""
    name = ctx.value(w)
    return name if perm is None else ctx.emit("Transpose", [name], perm=list(perm))


def _norm(centered: bool) -> Converter:
    def convert(ctx: Context, node: Node, twin: Node) -> None:
        plan, eps = node.params["plan"], node.params["eps"]
        x = node.args[0]
        dtype, ndim = node.outputs[0].dtype, len(x.shape)
        # the normalised axes moved last (they usually are), and back after
        order = list(plan.others) + list(plan.axes)
        h = _transpose(ctx, ctx.value(x), order)
        axes = list(range(len(plan.others), ndim))
        w = node.args[1] if len(node.args) > 1 else None
        b = node.args[2] if centered and len(node.args) > 2 else None
        weight = None if not isinstance(w, Value) else _aligned_param(ctx, w, plan.wperm)
        bias = None if not isinstance(b, Value) else _aligned_param(ctx, b, plan.bperm)
        if centered:
            if weight is None:  # LayerNormalization wants a scale: ones of the normalised shape
                shape = ctx.shape([ctx.sizes(x)[a] for a in plan.axes])
                weight = ctx.emit("ConstantOfShape", [shape], value=ctx.onnx.helper.make_tensor(
                    "one", onnx_dtype(ctx.onnx, dtype), [1], [1.0]))
            y = ctx.emit("LayerNormalization", [h, weight] + ([bias] if bias is not None else []),
                         axis=len(plan.others), epsilon=eps)
        else:
            mean = ctx.emit("ReduceMean", [ctx.emit("Mul", [h, h]), ctx.ints(axes)], keepdims=1)
            y = ctx.emit("Div", [h, ctx.emit("Sqrt", [ctx.emit("Add", [mean, ctx.scalar(eps, dtype)])])])
            if weight is not None:
                y = ctx.emit("Mul", [y, weight])
        ctx.emit("Identity", [_transpose(ctx, y, _inverse(order))], [_out(ctx, node)])

    return convert


def _attention(ctx: Context, node: Node, twin: Node) -> None:
    prm = node.params
    if prm["dropout_p"]:
        raise UnsupportedExport("nt.onnx.export: attention with dropout has no deterministic ONNX form: export the "
                                "module in eval mode (the default), or with dropout_p=0.")
    q, k, v, mask = node.args[:4]
    dtype = node.outputs[0].dtype
    qw = _work(ctx, ctx.value(q), prm["q_src"])
    kw = _work(ctx, ctx.value(k), prm["k_src"])
    vw = _work(ctx, ctx.value(v), prm["v_src"])
    n = len(prm["q_src"])
    k_t = ctx.emit("Transpose", [kw], perm=list(range(n - 2)) + [n - 1, n - 2])
    scores = ctx.emit("Mul", [ctx.emit("MatMul", [qw, k_t]), ctx.scalar(prm["scale"], dtype)])
    masked = isinstance(mask, Value)
    if masked:
        m = _work(ctx, ctx.value(mask), prm["m_src"])
        if mask.dtype == "bool":
            scores = ctx.emit("Where", [m, scores, ctx.scalar(-math.inf, dtype)])
        else:
            scores = ctx.emit("Add", [scores, m])
    if prm["is_causal"]:
        # key j may be attended by query i when j <= i (top-left aligned): the lower triangle of ones
        sizes = ctx.sizes(q)
        n_query = sizes[prm["q_src"][-2]]
        n_key = ctx.sizes(k)[prm["k_src"][-2]]
        ones = ctx.emit("ConstantOfShape", [ctx.shape([n_query, n_key])],
                        value=ctx.onnx.helper.make_tensor("one", ctx.onnx.TensorProto.INT64, [1], [1]))
        allowed = ctx.emit("Cast", [ctx.emit("Trilu", [ones], upper=0)], to=ctx.onnx.TensorProto.BOOL)
        scores = ctx.emit("Where", [allowed, scores, ctx.scalar(-math.inf, dtype)])
    weights = ctx.emit("Softmax", [scores], axis=-1)
    if masked:
        # a query with no key to attend gets zero weights (Softmax would give NaN)
        top = ctx.emit("ReduceMax", [scores, ctx.ints([-1])], keepdims=1)
        none = ctx.emit("IsInf", [top], detect_positive=0)
        weights = ctx.emit("Where", [none, ctx.scalar(0.0, dtype), weights])
    out = ctx.emit("MatMul", [weights, vw])
    ctx.emit("Identity", [_transpose(ctx, out, _inverse(prm["q_src"]))], [_out(ctx, node)])


def _loss_out(ctx: Context, node: Node, loss: str, out_perm: Optional[Sequence[int]] = None,
              count: Optional[str] = None) -> None:
    """A loss's per-element values reduced as the ``reduction`` param says into the node's output: "none"
    (laid out by ``out_perm``), "sum", or "mean" (divided by ``count`` where given, else by their number)."""
    reduction = node.params["reduction"]
    if reduction == "none":
        ctx.emit("Identity", [_transpose(ctx, loss, out_perm) if out_perm is not None else loss], [_out(ctx, node)])
    elif reduction == "mean" and count is not None:
        ctx.emit("Div", [ctx.emit("ReduceSum", [loss], keepdims=0), count], [_out(ctx, node)])
    else:
        ctx.emit("ReduceSum" if reduction == "sum" else "ReduceMean", [loss], [_out(ctx, node)], keepdims=0)


def _merged(ctx: Context, x: Value, perm: Sequence[int], keep: int) -> tuple:
    """``x`` with its dims in ``perm``'s order and all but the last ``keep`` merged into one, and the shape of
    the dims merged (an int64 tensor, to split the result again).  The sizes are read off the tensors when
    the model runs: a convolution's output sizes are no products of the input's."""
    h = _transpose(ctx, ctx.value(x), perm)
    n = len(perm) - keep
    if n == 1:
        return h, None
    lead = ctx.emit("Shape", [h], start=0, end=n)
    merged = ctx.emit("ReduceProd", [lead], keepdims=1)
    return ctx.emit("Reshape", [h, ctx.emit("Concat", [merged, ctx.emit("Shape", [h], start=n)], axis=0)]), lead


def _unmerged(ctx: Context, y: str, lead: Optional[str], perm: Sequence[int], node: Node) -> None:
    """:func:`_merged`'s inverse for a result ``y`` whose first dim holds the merged ones: split, then
    permuted back, into the node's output."""
    if lead is not None:
        y = ctx.emit("Reshape", [y, ctx.emit("Concat", [lead, ctx.emit("Shape", [y], start=1)], axis=0)])
    ctx.emit("Identity", [_transpose(ctx, y, _inverse(perm))], [_out(ctx, node)])


def _pads(padding: Sequence[Sequence[int]]) -> List[int]:
    """ONNX's pads: every dim's padding before, then every dim's after."""
    return [p[0] for p in padding] + [p[1] for p in padding]


def _conv(ctx: Context, node: Node, twin: Node) -> None:
    prm = node.params
    x, w = node.args[0], node.args[1]
    perm, nb = prm["perm"], prm["nb"]
    # (batch..., channels, *spatial) with the batch dims merged: ONNX's (N, C, *S)
    h, lead = _merged(ctx, x, perm, len(perm) - nb)
    inputs = [h, ctx.value(w)] + ([ctx.value(node.args[2])] if len(node.args) > 2 and node.args[2] is not None else [])
    attrs = dict(strides=list(prm["stride"]), pads=_pads(prm["padding"]), dilations=list(prm["dilation"]),
                 group=prm["groups"])
    if node.op.__name__ == "_ConvTranspose":
        # the output size that PyTorch's output_padding (or output_size) chose past the formula's: the same
        # in both traces, or the output's size is no function of the input's that ONNX has
        extra = [_output_padding(n.params, n.args[0].shape, w.shape) for n in (node, twin)]
        if extra[0] != extra[1]:
            raise UnsupportedExport("nt.onnx.export: a transposed convolution whose output_size is given has an "
                                    "output padding that follows the dynamic dims; make them static with dynamic=.")
        attrs["output_padding"] = extra[0]
        y = ctx.emit("ConvTranspose", inputs, **attrs)
    else:
        y = ctx.emit("Conv", inputs, **attrs)
    _unmerged(ctx, y, lead, perm, node)


def _output_padding(prm: Dict[str, Any], shape: Sequence[int], wshape: Sequence[int]) -> List[int]:
    spatial = prm["perm"][prm["nb"] + 1:]
    return [prm["shape"][a] - ((shape[a] - 1) * s - p[0] - p[1] + d * (k - 1) + 1) for a, s, p, d, k in zip(
        spatial, prm["stride"], prm["padding"], prm["dilation"], wshape[2:])]


def _pool(ctx: Context, node: Node, twin: Node) -> None:
    prm = node.params
    if prm["at"] is not None:
        raise UnsupportedExport("nt.onnx.export: max pooling at given offsets (a gradient's) has no ONNX form.")
    n = len(prm["kernel"])
    x, perm = node.args[0], prm["perm"]
    # every dim but the pooled ones merged into ONNX's N, with one channel: (N, 1, *S)
    h, lead = _merged(ctx, x, perm, n)
    h = ctx.emit("Unsqueeze", [h, ctx.ints([1])])
    attrs = dict(kernel_shape=list(prm["kernel"]), strides=list(prm["stride"]), pads=_pads(prm["padding"]),
                 dilations=list(prm["dilation"]))
    if prm["mode"] == "max":
        y = ctx.emit("MaxPool", [h], **attrs)
    else:  # the padding counts, as in the backend's pool
        y = ctx.emit("AveragePool", [h], count_include_pad=1, **attrs)
    _unmerged(ctx, ctx.emit("Squeeze", [y, ctx.ints([1])]), lead, perm, node)


def _p_norm(ctx: Context, node: Node, twin: Node) -> None:
    prm = node.params
    x, p = node.args[0], float(prm["p"])
    dtype = node.outputs[0].dtype
    inputs = [_operand(ctx, x, dtype)] + ([ctx.ints(list(prm["axes"]))] if prm["axes"] is not None else [])
    keep = int(bool(prm["keepdim"]))
    if p in (1.0, 2.0):
        ctx.emit("ReduceL1" if p == 1.0 else "ReduceL2", inputs, [_out(ctx, node)], keepdims=keep)
    elif p == math.inf:
        ctx.emit("ReduceMax", [ctx.emit("Abs", [inputs[0]]), *inputs[1:]], [_out(ctx, node)], keepdims=keep)
    elif p == 0.0:
        nonzero = ctx.emit("Cast", [ctx.emit("Not", [ctx.emit("Equal", [inputs[0], ctx.scalar(0.0, dtype)])])],
                           to=onnx_dtype(ctx.onnx, dtype))
        ctx.emit("ReduceSum", [nonzero, *inputs[1:]], [_out(ctx, node)], keepdims=keep)
    else:
        powered = ctx.emit("Pow", [ctx.emit("Abs", [inputs[0]]), ctx.scalar(p, dtype)])
        total = ctx.emit("ReduceSum", [powered, *inputs[1:]], keepdims=keep)
        ctx.emit("Pow", [total, ctx.scalar(1.0 / p, dtype)], [_out(ctx, node)])


def _class_target(p: Any):
    """The class-index target and the ignored index (or None) that cross-entropy's ``valid`` param was
    derived from: ``reshape(not_equal(target, ignore), ...)``."""
    found = {}

    def walk(q: Any) -> None:
        if isinstance(q, ArrayOf):
            found.setdefault("target", q.value)
        elif isinstance(q, Derived):
            if q.fn == "not_equal" and isinstance(q.args[1], int):
                found.setdefault("ignore", q.args[1])
            for a in q.args:
                walk(a)

    walk(p)
    return found.get("target"), found.get("ignore")


def _nll(ctx: Context, node: Node, twin: Node) -> None:
    _class_loss(ctx, node, log_softmax=False)


def _cross_entropy(ctx: Context, node: Node, twin: Node) -> None:
    _class_loss(ctx, node, log_softmax=True)


def _class_loss(ctx: Context, node: Node, log_softmax: bool) -> None:
    """Cross-entropy of logits (``log_softmax``) or the negative log-likelihood of log-probabilities, at
    class indices."""
    prm = node.params
    x, ax = node.args[0], prm["ax"]
    target, ignore = _class_target(prm["valid"] if prm["valid"] is not None else prm["idx"])
    wanted = x.names[:ax] + x.names[ax + 1:]
    if prm["count"] is not None or target is None or tuple(target.names) != tuple(wanted):
        raise UnsupportedExport(
            f"nt.onnx.export: {node.op.name} exports with class indices whose dims are the input's {x.names} "
            f"without the class dim, in their order (got {None if target is None else target.names}).")
    dtype = node.outputs[0].dtype
    logp = ctx.emit("LogSoftmax", [ctx.value(x)], axis=ax) if log_softmax else ctx.value(x)
    t = _operand(ctx, target, "int64")
    valid = None if ignore is None else ctx.emit("Not", [ctx.emit("Equal", [t, ctx.int_scalar(ignore)])])
    safe = t if valid is None else ctx.emit("Where", [valid, t, ctx.int_scalar(0)])
    axis = ctx.ints([ax])
    picked = ctx.emit("GatherElements", [logp, ctx.emit("Unsqueeze", [safe, axis])], axis=ax)
    loss = ctx.emit("Neg", [ctx.emit("Squeeze", [picked, axis])])
    if prm.get("eps"):  # label smoothing: (1 - eps) nll + eps mean(-log p) over the classes
        smooth = ctx.emit("Neg", [ctx.emit("ReduceMean", [logp, axis], keepdims=0)])
        loss = ctx.emit("Add", [ctx.emit("Mul", [loss, ctx.scalar(1.0 - prm["eps"], dtype)]),
                                ctx.emit("Mul", [smooth, ctx.scalar(prm["eps"], dtype)])])
    count = None
    if valid is not None:
        loss = ctx.emit("Where", [valid, loss, ctx.scalar(0.0, dtype)])
        # a mean is over the targets that count; all ignored: 0 / 0, NaN, as in PyTorch
        count = ctx.emit("ReduceSum", [ctx.emit("Cast", [valid], to=onnx_dtype(ctx.onnx, dtype))], keepdims=0)
    _loss_out(ctx, node, loss, prm["out_perm"], count)


def _soft_cross_entropy(ctx: Context, node: Node, twin: Node) -> None:
    """Cross-entropy of class probabilities: ``lse(x) * sum(q) - sum(q * x)`` over the classes (with label
    smoothing, ``q`` mixed with the uniform distribution), averaged over every other element for "mean"."""
    prm = node.params
    x, q = node.args
    ax, eps, dtype = prm["ax"], prm["eps"], node.outputs[0].dtype
    xv = ctx.value(x)
    qv = ctx.value(q) if prm["perm"] is None else ctx.emit("Transpose", [ctx.value(q)], perm=list(prm["perm"]))
    axis = ctx.ints([ax])
    lse = ctx.emit("ReduceLogSumExp", [xv, axis], keepdims=1)
    qx = ctx.emit("ReduceSum", [ctx.emit("Mul", [qv, xv]), axis], keepdims=1)
    mass = ctx.emit("ReduceSum", [qv, axis], keepdims=1)
    if eps:
        mean = ctx.emit("ReduceMean", [xv, axis], keepdims=1)
        qx = ctx.emit("Add", [ctx.emit("Mul", [qx, ctx.scalar(1.0 - eps, dtype)]),
                              ctx.emit("Mul", [mean, ctx.scalar(eps, dtype)])])
        mass = ctx.emit("Add", [ctx.emit("Mul", [mass, ctx.scalar(1.0 - eps, dtype)]), ctx.scalar(eps, dtype)])
    _loss_out(ctx, node, ctx.emit("Squeeze", [ctx.emit("Sub", [ctx.emit("Mul", [lse, mass]), qx]), axis]),
              prm["out_perm"])


# ----------------------------------------------------------------------------- quantization

#: the ONNX type of the integers of a quantized range, which QuantizeLinear saturates to
_RANGES = {(-128, 127): "int8", (0, 255): "uint8"}


def _qparam(ctx: Context, p: Any, dtype: str) -> str:
    """A scale (``dtype`` float32) or zero point (``dtype`` int8/uint8): a number or a traced 1-D tensor."""
    if isinstance(p, Value):
        return ctx.emit("Cast", [ctx.value(p)], to=onnx_dtype(ctx.onnx, dtype))
    return ctx.scalar(int(p) if dtype != "float32" else float(p), dtype)


def _storage(node: Node, qmin: int, qmax: int) -> str:
    kind = _RANGES.get((qmin, qmax))
    if kind is None:
        raise UnsupportedExport(f"nt.onnx.export: {node.op.name} to the range [{qmin}, {qmax}] has no ONNX form: "
                                "QuantizeLinear saturates to the full int8 or uint8 range.")
    return kind


def _quantize(ctx: Context, node: Node, twin: Node) -> None:
    prm = node.params
    x, scale, zero = node.args
    kind = _storage(node, prm["qmin"], prm["qmax"])
    axis = {} if prm["axis"] is None else {"axis": prm["axis"]}
    q = ctx.emit("QuantizeLinear", [_operand(ctx, x, "float32"), _qparam(ctx, scale, "float32"),
                                    _qparam(ctx, zero, kind)], **axis)
    if node.op.__name__ == "_FakeQuantize":
        d = ctx.emit("DequantizeLinear", [q, _qparam(ctx, scale, "float32"), _qparam(ctx, zero, kind)], **axis)
        q = d if x.dtype == "float32" else ctx.emit("Cast", [d], to=onnx_dtype(ctx.onnx, x.dtype))
    ctx.emit("Identity", [q], [_out(ctx, node)])


def _dequantize(ctx: Context, node: Node, twin: Node) -> None:
    q, scale, zero = node.args
    axis = {} if node.params["axis"] is None else {"axis": node.params["axis"]}
    ctx.emit("DequantizeLinear", [ctx.value(q), _qparam(ctx, scale, "float32"), _qparam(ctx, zero, q.dtype)],
             [_out(ctx, node)], **axis)


def _quantized_linear(ctx: Context, node: Node, twin: Node) -> None:
    """The QDQ form, which ONNX Runtime runs as an int8 product: the input quantized and dequantized again
    (by DynamicQuantizeLinear for a dynamic layer, by QuantizeLinear with the layer's scale and zero point
    for a static one) and the int8 weight dequantized (per output channel where it is quantized so),
    before a MatMul."""
    prm = node.params
    x, w, w_scale, w_zero = node.args[:4]
    bias = node.args[4] if len(node.args) > 4 else None
    ax, ndim = prm["ax"], len(x.shape)
    order = [d for d in range(ndim) if d != ax] + [ax]
    rows = _transpose(ctx, _operand(ctx, x, "float32"), order)
    if prm["x_scale"] is None:
        xq, xs, xz = (ctx.fresh("dql") for _ in range(3))
        ctx.emit("DynamicQuantizeLinear", [rows], [xq, xs, xz])
    else:
        xs, xz = ctx.scalar(float(prm["x_scale"]), "float32"), ctx.scalar(int(prm["x_zero"]), "uint8")
        xq = ctx.emit("QuantizeLinear", [rows, xs, xz])
    w_t = ctx.emit("Transpose", [ctx.value(w)], perm=[1, 0])  # (in, out): folded into the initializer by ORT
    wd = ctx.emit("DequantizeLinear", [w_t, _qparam(ctx, w_scale, "float32"), _qparam(ctx, w_zero, "int8")],
                  **({"axis": 1} if isinstance(w_scale, Value) else {}))
    y = ctx.emit("MatMul", [ctx.emit("DequantizeLinear", [xq, xs, xz]), wd])
    if bias is not None:
        y = ctx.emit("Add", [y, _operand(ctx, bias, "float32")])
    ctx.emit("Identity", [_transpose(ctx, y, _inverse(order))], [_out(ctx, node)])


# ----------------------------------------------------------------------------- the table

CONVERTERS: Dict[str, Converter] = {
    **{name: _binary(op) for name, op in _BINARY.items()},
    **{name: _unary(op) for name, op in _UNARY.items()},
    **{name: _composite(build) for name, build in _COMPOSITE.items()},
    "_BitwiseAnd": _bitwise("And", "BitwiseAnd"), "_BitwiseOr": _bitwise("Or", "BitwiseOr"),
    "_BitwiseXor": _bitwise("Xor", "BitwiseXor"), "_BitwiseNot": _bitwise("Not", "BitwiseNot"),
    "_LogicalAnd": _logical("And"), "_LogicalOr": _logical("Or"), "_LogicalXor": _logical("Xor"),
    "_LogicalNot": _logical("Not"), "_Isnan": _test("IsNaN"), "_Isinf": _test("IsInf"), "_Isfinite": _isfinite,
    "_Ne": _not_equal, "_Where": _where, "_Clip": _clip, "_Gelu": _gelu("none"), "_GeluTanh": _gelu("tanh"),
    "_Rename": _identity, "_Reshape": _reshape, "_Permute": _permute, "_Align": _align, "_Cast": _cast, "_CastNoGrad": _cast,
    "_Sum": _reduce("ReduceSum"), "_Mean": _reduce("ReduceMean"), "_Prod": _reduce("ReduceProd"),
    "_LogSumExp": _reduce("ReduceLogSumExp"), "_Amax": _reduce(("ReduceMax", "ReduceMin")),
    "_Amin": _reduce(("ReduceMax", "ReduceMin")),
    "_Argmax": _arg_extreme, "_Cumsum": _cumsum, "_Var": _var, "_Cat": _cat, "_Stack": _cat, "_Flip": _flip,
    "_GetItem": _getitem, "_IndexSelect": _index_select, "_Gather": _gather,
    "_Softmax": _softmax("Softmax"), "_LogSoftmax": _softmax("LogSoftmax"),
    "_Matmul": _matmul, "_Linear": _linear, "_Embedding": _embedding,
    "_LayerNorm": _norm(True), "_RMSNorm": _norm(False), "_Attention": _attention, "_FusedAttention": _attention,
    "_CrossEntropy": _cross_entropy, "_CrossEntropyRows": _cross_entropy, "_NLLLoss": _nll,
    "_Conv": _conv, "_ConvTranspose": _conv, "_Pool": _pool, "_Norm": _p_norm,
    "_SoftCrossEntropy": _soft_cross_entropy, "_Quantize": _quantize, "_FakeQuantize": _quantize, "_Dequantize": _dequantize,
    "_QuantizedLinear": _quantized_linear,
}

def _norm_params(p: Dict[str, Any]) -> tuple:
    plan = p["plan"]  # its sizes (n, keep, bshape) are not read: the ONNX ops take them from the input
    return plan.axes, plan.others, plan.wperm, plan.bperm, p["eps"]


def _loss_params(p: Dict[str, Any]) -> tuple:
    # the index params are recipes on the target, shaped as the call was: the converter reads the target
    return p["ax"], p.get("eps"), p["count"], p["reduction"], p["out_perm"], _class_target(p["valid"])[1]


def _conv_params(p: Dict[str, Any]) -> tuple:
    # a transposed convolution's output shape follows the input's: the converter reads the output's sizes
    return tuple(v for k, v in p.items() if k != "shape")


#: the part of an op's params that must be the same in both traces, where that is not all of them: the
#: rest holds sizes, which the converter reads through the twin node (``ctx.size``) or off the tensors
_READS: Dict[str, Callable[[Dict[str, Any]], Any]] = {"_LayerNorm": _norm_params, "_RMSNorm": _norm_params,
                                                      "_Reshape": lambda p: (),
                                                      "_Embedding": lambda p: (p["wax"], p["padding"]),
                                                      "_CrossEntropy": _loss_params, "_CrossEntropyRows": _loss_params,
                                                      "_NLLLoss": _loss_params, "_ConvTranspose": _conv_params,
                                                      # its count is the elements a mean divides by: ReduceMean's
                                                      "_SoftCrossEntropy": lambda p: (p["ax"], p["perm"], p["eps"],
                                                                                      p["reduction"], p["out_perm"])}


def convert(ctx: Context, node: Node, twin: Node) -> None:
    """Write ``node`` (and check that its params do not follow the dynamic dims, unless its converter
    reads them so)."""
    name = node.op.__name__
    converter = CONVERTERS.get(name) if node.op.__module__.startswith("namedtensor.ops.") else None
    if converter is None:
        shapes = ", ".join(f"{a.describe()}" for a in node.args if isinstance(a, Value))
        raise UnsupportedExport(f"nt.onnx.export: the op {node.op.name!r} (on {shapes or 'no tensors'}) has no ONNX "
                                "conversion yet; the ops that export are listed in nt.onnx.converters.CONVERTERS.")
    reads = _READS.get(name, lambda p: p)
    if not (_same(reads(node.params), reads(twin.params)) and _same(node.args, twin.args)):
        raise UnsupportedExport(
            f"nt.onnx.export: the op {node.op.name!r} has params that change with the sizes of the dynamic dims "
            f"({node.params} with the given sizes); make those dims static with dynamic=.")
    converter(ctx, node, twin)
