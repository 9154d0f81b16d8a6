"""What a converter writes with: the :class:`Context` of the model being written, the :class:`Size` of a dim
(a constant times a product of dynamic dims, matched across the two traces by :class:`Sizes`), and
:class:`UnsupportedExport`.

The context names each traced value in the ONNX graph, gives each value's dims as sizes, builds int64
shape tensors from the inputs' shapes when a size follows a dynamic dim, writes constants, and adds
nodes (:meth:`Context.emit`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..compiler.ir import Graph, Value

__all__ = ["UnsupportedExport", "Size", "Sizes", "Context", "onnx_dtype"]


class UnsupportedExport(NotImplementedError):
    """What :func:`export` cannot write as ONNX (an op, a size, a program); the message says which and why."""


class Size(NamedTuple):
    """A dim's size: ``factor`` times the product of the dynamic dims ``symbols`` (names, sorted)."""

    factor: int
    symbols: Tuple[str, ...] = ()

    def label(self) -> str:
        """The symbolic dim's name in the model: the dim's name, a product ``batch*seq``, or ``2*seq``."""
        return "*".join(([str(self.factor)] if self.factor != 1 else []) + list(self.symbols))


class Sizes:
    """Sizes of the first trace matched to :class:`Size` by the second.  ``group`` maps each dynamic dim's
    name to the name standing for its size (dims that the program needs equal, a self-attention's ``seq``
    and ``key``, share one); ``first`` and ``second`` give each such name's size in the two traces."""

    def __init__(self, first: Dict[str, int], second: Dict[str, int], group: Dict[str, str]) -> None:
        self.first, self.second, self.group = first, second, group
        names = sorted(first)
        self.products = [(c, math.prod(first[n] for n in c), math.prod(second[n] for n in c))
                         for r in range(1, len(names) + 1) for c in itertools.combinations(names, r)]

    def of(self, a: int, b: int, what: Callable[[], str]) -> Size:
        if a == b:
            return Size(a)
        fits = [Size(a // p, c) for c, p, q in self.products if a % p == 0 and b % q == 0 and a // p == b // q]
        if len(fits) != 1:
            dims = ", ".join(f"{n}={self.first[n]} (then {self.second[n]})" for n in sorted(self.first))
            raise UnsupportedExport(
                f"nt.onnx.export: {what()} is {a} in the trace with the given sizes and {b} in a trace with other "
                f"sizes of the dynamic dims ({dims}): it is not a constant times a product of them"
                + (f" (it could be {' or '.join(s.label() for s in fits)})" if fits else "")
                + ". Give the dims other sizes in the specs, or make them static with dynamic=.")
        return fits[0]


# ----------------------------------------------------------------------------- the context converters use


class Context:
    """The model being written; see the module docstring."""

    def __init__(self, onnx, first: Graph, second: Graph, sizes: Sizes, input_names: List[str],
                 initializer_names: Dict[int, str]) -> None:
        self.onnx = onnx
        self.first, self.second = first, second
        self.sizes_of = sizes
        self.nodes: list = []
        self.initializers: list = []
        self._names: Dict[int, str] = {}
        self._twins = {v.id: w for v, w in zip(first.values, second.values)}
        self._symbols: Dict[str, str] = {}
        self._constants: Dict[Any, str] = {}
        self._counter = itertools.count()
        for v, name in zip(first.inputs, input_names):
            self._names[v.id] = name
        self._initializer_names = initializer_names

    # ---- names

    def fresh(self, hint: str) -> str:
        return f"{hint}_{next(self._counter)}"

    def value(self, v: Value) -> str:
        """The ONNX name of the traced value ``v`` (an initializer is written when first asked for)."""
        name = self._names.get(v.id)
        if name is None:
            if v.kind in ("external", "constant"):
                name = self._initializer(v)
            else:
                name = f"v{v.id}"
            self._names[v.id] = name
        return name

    def twin(self, v: Value) -> Value:
        """``v``'s value in the second trace."""
        return self._twins[v.id]

    # ---- sizes

    def size(self, a: int, b: int, what: Callable[[], str]) -> Size:
        """The :class:`Size` of a number that is ``a`` in the first trace and ``b`` in the second."""
        return self.sizes_of.of(a, b, what)

    def sizes(self, v: Value) -> Tuple[Size, ...]:
        """Each dim of ``v`` as a :class:`Size`."""
        w = self.twin(v)
        return tuple(self.size(a, b, lambda d=d: f"dim {d} ({v.names[d]!r}) of %{v.id}")
                     for d, (a, b) in enumerate(zip(v.shape, w.shape)))

    def labels(self, v: Value) -> Tuple[Optional[Size], ...]:
        """:meth:`sizes`, with None for a size that is no product of dynamic dims (the model's inputs and
        outputs show such a dim as unknown)."""
        out = []
        for a, b in zip(v.shape, self.twin(v).shape):
            try:
                out.append(self.size(a, b, lambda: ""))
            except UnsupportedExport:
                out.append(None)
        return tuple(out)

    def shape(self, sizes: Sequence[Size]) -> str:
        """An int64 1-D tensor of ``sizes``: a constant where all are static, else made from the inputs'
        shapes when the model runs."""
        if all(not s.symbols for s in sizes):
            return self.ints([s.factor for s in sizes])
        return self.emit("Concat", [self.scalar_size(s, one_d=True) for s in sizes], axis=0)

    def scalar_size(self, s: Size, one_d: bool = False) -> str:
        """An int64 tensor holding size ``s``: 0-d, or 1-D of one element with ``one_d``."""
        if not s.symbols:
            return self.ints([s.factor]) if one_d else self.int_scalar(s.factor)
        parts = [self._symbol(n) for n in s.symbols]
        if s.factor != 1:
            parts.append(self.ints([s.factor]))
        out = parts[0]
        for p in parts[1:]:
            out = self.emit("Mul", [out, p])
        return out if one_d else self.emit("Squeeze", [out, self.ints([0])])

    def _symbol(self, name: str) -> str:
        """A 1-D int64 tensor of one element: the size that ``name`` stands for, read off the first input
        with a dim of that size."""
        out = self._symbols.get(name)
        if out is None:
            group = self.sizes_of.group
            v, d = next((v, d) for v in self.first.inputs for d, n in enumerate(v.names) if group.get(n) == name)
            out = self._symbols[name] = self.emit("Shape", [self.value(v)], start=d, end=d + 1)
        return out

    # ---- constants

    def ints(self, values: Sequence[int]) -> str:
        """An int64 1-D constant."""
        key = ("ints", tuple(values))
        if key not in self._constants:
            name = self.fresh("ints")
            self.initializers.append(self.onnx.helper.make_tensor(name, self.onnx.TensorProto.INT64, [len(values)],
                                                                  list(values)))
            self._constants[key] = name
        return self._constants[key]

    def int_scalar(self, value: int) -> str:
        key = ("int", value)
        if key not in self._constants:
            name = self.fresh("int")
            self.initializers.append(self.onnx.helper.make_tensor(name, self.onnx.TensorProto.INT64, [], [value]))
            self._constants[key] = name
        return self._constants[key]

    def scalar(self, value: Union[bool, int, float], dtype: str) -> str:
        """A 0-d constant of ``dtype`` (a Python number in an op takes its tensor operand's dtype)."""
        key = ("scalar", dtype, repr(value))
        if key not in self._constants:
            name = self.fresh("scalar")
            self.initializers.append(self.onnx.helper.make_tensor(name, onnx_dtype(self.onnx, dtype), [], [value]))
            self._constants[key] = name
        return self._constants[key]

    def _initializer(self, v: Value) -> str:
        t = v.source
        w = self.twin(v)
        if tuple(w.shape) != tuple(v.shape):
            raise UnsupportedExport(
                f"nt.onnx.export: a constant {_describe(v)} made inside the function has a shape that follows the "
                f"dynamic dims ({tuple(v.shape)}, then {tuple(w.shape)} in a trace with other sizes); make it from "
                "the inputs with tensor ops, or make those dims static with dynamic=.")
        array = t.detach().numpy()
        if v.kind == "constant" and not (array == w.source.detach().numpy()).all():
            raise UnsupportedExport(
                f"nt.onnx.export: a constant {_describe(v)} made inside the function has values that follow the "
                "sizes of the dynamic dims; make those dims static with dynamic=.")
        name = self._initializer_names.get(id(t)) or f"const_{v.id}"
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    # ---- nodes

    def emit(self, op_type: str, inputs: Sequence[str], outputs: Optional[Sequence[str]] = None, **attrs) -> str:
        """Add an ONNX node; returns its (first) output's name (a fresh one unless given)."""
        outputs = list(outputs) if outputs is not None else [self.fresh(op_type.lower())]
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), outputs, **attrs))
        return outputs[0]


def onnx_dtype(onnx, dtype: str) -> int:
    """The ONNX element type of a namedtensor dtype's name."""
    table = {"float32": "FLOAT", "float64": "DOUBLE", "float16": "FLOAT16", "bfloat16": "BFLOAT16",
             "int64": "INT64", "int32": "INT32", "int16": "INT16", "int8": "INT8", "uint8": "UINT8",
             "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "bool": "BOOL",
             "complex64": "COMPLEX64", "complex128": "COMPLEX128"}
    if dtype not in table:
        raise UnsupportedExport(f"nt.onnx.export: no ONNX type for the dtype {dtype}.")
    return getattr(onnx.TensorProto, table[dtype])


def _describe(v: Value) -> str:
    return f"%{v.id} {v.describe()}"
