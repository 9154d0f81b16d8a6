"""Shape dry runs: ``nt.spec``, ``nt.trace_shapes`` and ``nt.show``.

``trace_shapes(fn, *inputs)`` calls ``fn`` once and records every op it runs:
the names and shapes of the op's inputs and outputs, the output dtype, and the
multiply-add count (FLOPs) of contractions.  Given ``nt.spec`` tensors (device
``"meta"``, no data), the call is a dry run through the real op code: the same
name rules, the same shape checks and the same ``NamesError`` a real run would
raise, without allocating or computing any element (see
``backends/meta_backend.py``).  Given real tensors, the call really runs and is
recorded the same way.  A trace records the ops of the thread that calls
``trace_shapes`` only: other threads run and record their own.

``show(t, label)`` prints a tensor's names, shape and dtype where it stands in
user code, in a dry run or a real one, and adds a row to a trace being recorded.

The FLOP formulas live here, in one place: :data:`FLOPS` for contractions (what a
trace shows) and :func:`flops` for any op (what ``nt.profile`` counts).
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _dtypes, _names
from ._internal import int_sizes, raw, swap_tracer, wrap
from .backends.meta_backend import META, MetaArray
from .tensor import Tensor

Shape = Tuple[int, ...]


class Operand(NamedTuple):
    """One input or output of a recorded op: its names, shape and dtype."""

    names: Tuple[Optional[str], ...]
    shape: Shape
    dtype: str

    def __str__(self) -> str:
        dims = ", ".join(str(s) if n is None else f"{n}={s}" for n, s in zip(self.names, self.shape))
        return f"({dims})"


class TraceRow(NamedTuple):
    """One recorded op: its name, its tensor inputs and outputs, and FLOPs for contractions (else None)."""

    op: str
    inputs: Tuple[Operand, ...]
    outputs: Tuple[Operand, ...]
    flops: Optional[int]


def operand_of(t: Tensor) -> Operand:
    """``t``'s names, shape and dtype, as a trace or a profile records them."""
    a = raw(t)
    return Operand(t.names, tuple(a.shape), str(a.dtype))


def _numel(shape: Shape) -> int:
    return math.prod(shape)


def _matmul_flops(ins, outs, params) -> int:
    return 2 * _numel(outs[0].shape) * ins[0].shape[-1]


def _linear_flops(ins, outs, params) -> int:
    return 2 * _numel(outs[0].shape) * ins[0].shape[params["ax"]]


def _weight_grad_flops(ins, outs, params) -> int:
    # (p, q) outputs, each a sum over every element of the output gradient's other axes
    return 2 * _numel(ins[0].shape) * ins[1].shape[params["ax"]]


def _einsum_flops(ins, outs, params) -> int:
    size = {}
    for ids, operand in zip(params["ids"], ins):
        size.update(zip(ids, operand.shape))
    return 2 * _numel(tuple(size.values()))


def _attention_flops(ins, outs, params) -> int:
    q, k, v = ins[0].shape, ins[1].shape, ins[2].shape
    n_feature, n_query = q[params["q_src"][-1]], q[params["q_src"][-2]]
    n_key, n_value = k[params["k_src"][-2]], v[params["v_src"][-1]]
    batch = _numel(q) // max(n_query * n_feature, 1)
    return 2 * batch * n_query * n_key * (n_feature + n_value)  # scores, then weights times values


#: multiply-adds of a direct evaluation (2 per multiply-add), by op name
FLOPS: Dict[str, Callable] = {
    "matmul": _matmul_flops,
    "linear": _linear_flops,
    "linear_weight_grad": _weight_grad_flops,
    "einsum": _einsum_flops,
    "scaled_dot_product_attention": _attention_flops,
}


def _linear_grads_flops(ins, outs, params) -> int:
    # the input's gradient and the weight's, each the output gradient's size times the input's width
    return 4 * _numel(ins[0].shape) * outs[0].shape[-1]


#: FLOPs of a backward that computes its gradients on raw arrays, running no ops of its own (the
#: profiler's ``"<op>_backward"`` rows), by op name
BACKWARD_FLOPS: Dict[str, Callable] = {
    "linear": _linear_grads_flops,
}


#: op families (the modules of ``namedtensor.ops`` that define the op) counted per element by :func:`flops`:
#: an elementwise op does one FLOP per output element, an op that reduces (a sum, a softmax, a norm, a loss)
#: one per element of its first input.  By module, so that a new op of a family is counted without a table
_PER_OUTPUT = frozenset({"namedtensor.ops.elementwise"})
_PER_INPUT = frozenset({"namedtensor.ops.reductions", "namedtensor.ops.scans", "namedtensor.ops.normalization",
                        "namedtensor.ops.losses"})


def flops(op, ins: Sequence[Operand], outs: Sequence[Operand], params: Mapping[str, Any]) -> Optional[int]:
    """The FLOPs of one run of ``op`` (an ``Op`` class) on operands ``ins`` giving ``outs``: a contraction's
    by its rule in :data:`FLOPS`, an elementwise op's one per output element, a reduction's one per input
    element, and None for ops that compute nothing (copies, views, indexing) or whose count is not known."""
    rule = FLOPS.get(op.name)
    if rule is not None:
        return int(rule(ins, outs, params))
    family = op.__module__
    if family in _PER_OUTPUT:
        return _numel(outs[0].shape)
    if family in _PER_INPUT and ins:
        return _numel(ins[0].shape)
    return None


class ShapeTrace:
    """The ops one call ran, in order (``rows``), and what the call returned (``result``)."""

    def __init__(self, rows: List[TraceRow], result: Any) -> None:
        self.rows = rows
        self.result = result

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    @property
    def ops(self) -> List[str]:
        """The op names, in the order they ran."""
        return [r.op for r in self.rows]

    @property
    def total_flops(self) -> int:
        """The FLOPs of every contraction together."""
        return sum(r.flops or 0 for r in self.rows)

    def table(self) -> List[Tuple[str, ...]]:
        """The rows as strings: ``(#, op, inputs, output, dtype, FLOPs)``."""
        out = []
        for i, r in enumerate(self.rows, 1):
            out.append((str(i), r.op, " ".join(map(str, r.inputs)), " ".join(map(str, r.outputs)),
                        " ".join(dict.fromkeys(o.dtype for o in r.outputs)), _fmt_flops(r.flops)))
        return out

    def __str__(self) -> str:
        header = ("#", "op", "inputs", "output", "dtype", "FLOPs")
        rows = [header] + self.table()
        widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"{len(self.rows)} ops, {_fmt_flops(self.total_flops) or 0} FLOPs in contractions")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        from html import escape

        header = "".join(f"<th>{h}</th>" for h in ("#", "op", "inputs", "output", "dtype", "FLOPs"))
        body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in self.table())
        return (f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"
                f"<p>{len(self.rows)} ops, {_fmt_flops(self.total_flops) or 0} FLOPs in contractions</p>")


def _fmt_flops(n: Optional[int]) -> str:
    if not n:
        return ""
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


class _Recording(threading.local):
    """The rows of the trace this thread records (the tracer hook is per thread too, so another
    thread's ops never land in it)."""

    rows: Optional[List[TraceRow]] = None


_recording = _Recording()


def _record(op, inputs, outputs, params) -> None:
    ins = tuple(operand_of(x) for x in inputs if isinstance(x, Tensor))
    outs = tuple(operand_of(o) for o in outputs)
    rule = FLOPS.get(op.name)
    _recording.rows.append(TraceRow(op.name, ins, outs, None if rule is None else int(rule(ins, outs, params))))


def spec(names: Union[Sequence[Optional[str]], Mapping[str, int]], shape: Optional[Sequence[int]] = None,
         dtype: Optional[_dtypes.DType] = None, requires_grad: bool = False) -> Tensor:
    """A tensor with names, a shape and a dtype but no data, for :func:`trace_shapes`.

    ``nt.spec(("batch", "seq"), (8, 128))`` or ``nt.spec({"batch": 8, "seq": 128})``; ``dtype``
    defaults to float32.  Its device is ``"meta"``: ops on it compute only names, shapes and
    dtypes, and reading its values raises ``DataDependentError``.
    """
    if isinstance(names, Mapping):
        if shape is not None:
            raise TypeError("spec: give the sizes either in the names dict or as shape=, not both.")
        names, shape = tuple(names.keys()), tuple(names.values())
    if shape is None:
        raise TypeError("spec: shape= is required (or give names as a dict of name: size).")
    shape = int_sizes(tuple(shape), "spec", nonnegative=True)
    names = _names.validate(names, len(shape), "spec")
    dtype = _dtypes.float32 if dtype is None else _dtypes.as_dtype(dtype)
    t = wrap(MetaArray(shape, META.native(dtype)), names, META)
    if requires_grad:
        t.requires_grad_(True)
    return t


def trace_shapes(fn: Callable, *inputs, **kwargs) -> ShapeTrace:
    """Call ``fn(*inputs, **kwargs)`` and return the :class:`ShapeTrace` of every op it ran.

    With :func:`spec` tensors among the inputs this is a dry run: names and shapes flow through the
    real op code, errors are the ones a real run raises, and no data is allocated (tensors made
    inside ``fn`` and a module's parameters take part by their shapes).  With only real tensors,
    ``fn`` really runs and is recorded the same way.  ``print(trace)`` shows the table; in Jupyter it
    renders as HTML.  When ``fn`` raises, the error gets a note listing the last ops that ran.
    """
    outer, rows = _recording.rows, []
    _recording.rows = rows
    previous = swap_tracer(_record)
    try:
        result = fn(*inputs, **kwargs)
    except Exception as e:
        if hasattr(e, "add_note") and rows:
            last = ShapeTrace(rows[-5:], None).table()
            e.add_note(f"trace_shapes: {len(rows)} ops ran before this error; the last:\n"
                       + "\n".join(f"  {r[1]}: {r[2]} -> {r[3]}" for r in last))
        raise
    finally:
        _recording.rows = outer
        swap_tracer(previous)
    return ShapeTrace(rows, result)


def show(t: Tensor, label: Optional[str] = None, file=None) -> Tensor:
    """Print ``t``'s names, shape and dtype (prefixed by ``label``) and return ``t`` unchanged.

    A "shape hole": put it anywhere in code to see what flows there, in a dry run (``trace_shapes``
    on ``nt.spec`` tensors) or a real run.  In a recorded trace it also adds a row ``show: label``.
    """
    if not isinstance(t, Tensor):
        raise TypeError(f"show: expected a Tensor, got {type(t).__name__}.")
    operand = operand_of(t)
    where = "" if t.device == "cpu" else f" on {t.device}"
    print(f"{label or 'tensor'}: {operand} {t.dtype.name}{where}", file=file or sys.stdout)
    rows = _recording.rows
    if rows is not None:
        rows.append(TraceRow("show" if label is None else f"show: {label}", (operand,), (operand,), None))
    return t
