"""Code generation for fused elementwise chains: one table of scalar formulas, two targets.

:data:`SCALAR` gives, for each elementwise op the code generator knows (by its Op class), the formula
of one element in terms of its operands: the same text is valid Python for Numba (the CPU kernels) and,
with :data:`C_FUNCTIONS` spelling the functions, CUDA C (the GPU kernels, through CuPy).  Every member's
result is converted to the dtype the trace recorded, and Python numbers to the dtype NumPy gives them
next to a tensor (NumPy 2's weak scalars), so a kernel computes in the dtypes an eager run does.

CPU: :func:`numba_kernel` writes the chain as a Numba function over the output's rows (split in chunks
so that long rows are shared among threads too), in a file under the kernel cache directory, so that
Numba caches its machine code on disk and a second process starts warm.  The loop runs on
``nt.get_num_threads()`` threads; small outputs run on one.  Without Numba (the ``jit`` extra) there
is no CPU kernel and the fused op runs its members one by one on NumPy; :func:`numba_available` says
so once.

GPU: :func:`cuda_source` gives the body of a ``cupy.ElementwiseKernel`` (CuPy broadcasts and loops),
and :func:`cuda_kernel` builds it; ``tests/test_nvcc.py`` compiles the generated sources with nvcc.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..ops.fusion import Chain
from .ir import Value

__all__ = ["SCALAR", "scalar_op", "numba_available", "numba_kernel", "cuda_source", "cuda_kernel", "cache_dir"]

FLOATS = ("float32", "float64")
_SQRT1_2 = repr(1 / math.sqrt(2.0))
_GELU_C = repr(math.sqrt(2.0 / math.pi))


def _nan_max(a: str, b: str) -> str:
    # NumPy's maximum: a NaN on either side wins
    return f"({a} if ({a} >= {b} or {a} != {a}) else {b})"


def _nan_min(a: str, b: str) -> str:
    return f"({a} if ({a} <= {b} or {a} != {a}) else {b})"


def _sigmoid(x: str) -> str:
    return f"(1.0 / (1.0 + exp(-{x})) if {x} >= 0 else exp({x}) / (1.0 + exp({x})))"


def _clip(a, p) -> str:
    x = a[0]
    if p.get("min") is not None:
        x = _nan_max(x, "LO")
    if p.get("max") is not None:
        x = _nan_min(x, "HI")
    return x


#: Op class name -> (formula of the operands' texts and the params, the params that become constants)
SCALAR: Dict[str, Callable[[List[str], Dict[str, Any]], str]] = {
    "_Add": lambda a, p: f"({a[0]} + {a[1]})",
    "_Sub": lambda a, p: f"({a[0]} - {a[1]})",
    "_Mul": lambda a, p: f"({a[0]} * {a[1]})",
    "_Div": lambda a, p: f"({a[0]} / {a[1]})",
    "_Neg": lambda a, p: f"(-{a[0]})",
    "_Abs": lambda a, p: f"fabs({a[0]})",
    "_Square": lambda a, p: f"({a[0]} * {a[0]})",
    "_Reciprocal": lambda a, p: f"(1.0 / {a[0]})",
    "_Exp": lambda a, p: f"exp({a[0]})",
    "_Expm1": lambda a, p: f"expm1({a[0]})",
    "_Log": lambda a, p: f"log({a[0]})",
    "_Log1P": lambda a, p: f"log1p({a[0]})",
    "_Sqrt": lambda a, p: f"sqrt({a[0]})",
    "_Rsqrt": lambda a, p: f"(1.0 / sqrt({a[0]}))",
    "_Sin": lambda a, p: f"sin({a[0]})",
    "_Cos": lambda a, p: f"cos({a[0]})",
    "_Tanh": lambda a, p: f"tanh({a[0]})",
    "_Erf": lambda a, p: f"erf({a[0]})",
    "_Sigmoid": lambda a, p: _sigmoid(a[0]),
    "_Relu": lambda a, p: f"({a[0]} if not ({a[0]} < 0) else 0.0)",
    "_Silu": lambda a, p: f"({a[0]} * {_sigmoid(a[0])})",
    "_Softplus": lambda a, p: f"(log1p(exp(-fabs({a[0]}))) + {_nan_max(a[0], '0.0')})",
    "_Gelu": lambda a, p: f"(0.5 * {a[0]} * (1.0 + erf({a[0]} * {_SQRT1_2})))",
    "_GeluTanh": lambda a, p: (f"(0.5 * {a[0]} * (1.0 + tanh({_GELU_C} * ({a[0]} + 0.044715 * {a[0]} * {a[0]} "
                               f"* {a[0]}))))"),
    "_Maximum": lambda a, p: _nan_max(a[0], a[1]),
    "_Minimum": lambda a, p: _nan_min(a[0], a[1]),
    "_Pow": lambda a, p: f"pow({a[0]}, {a[1]})",
    "_Where": lambda a, p: f"({a[1]} if {a[0]} else {a[2]})",
    "_Clip": _clip,
    "_Eq": lambda a, p: f"({a[0]} == {a[1]})",
    "_Ne": lambda a, p: f"({a[0]} != {a[1]})",
    "_Lt": lambda a, p: f"({a[0]} < {a[1]})",
    "_Le": lambda a, p: f"({a[0]} <= {a[1]})",
    "_Gt": lambda a, p: f"({a[0]} > {a[1]})",
    "_Ge": lambda a, p: f"({a[0]} >= {a[1]})",
}

#: the modules whose Op classes the table names (a class of the same name elsewhere is another op)
_MODULES = ("namedtensor.ops.elementwise",)

#: numbers in params that become typed constants of the kernel
_PARAM_CONSTANTS = {"_Clip": (("min", "LO"), ("max", "HI"))}


def scalar_op(op: type) -> bool:
    """Whether the code generator has a formula for ``op``."""
    return op.__name__ in SCALAR and op.__module__ in _MODULES


def fusible_dtypes(values: Sequence[Value]) -> bool:
    return all(v.dtype in FLOATS or v.dtype == "bool" for v in values)


# ----------------------------------------------------------------------------- the chain as scalar code


def _literal(v: Any, dtype: str) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    return f"{dtype}({float(v)!r})"


def _statements(chain: Chain, in_dtypes: List[str], out_dtypes: List[str], cast: Callable[[str, str], str]
                ) -> List[str]:
    """``t{j} = ...`` for each member: its formula on the inputs ``x{k}`` and earlier ``t{j}``, cast to its dtype."""
    lines = []
    for j, m in enumerate(chain.members):
        texts: List[str] = []
        operand_dtype = next((in_dtypes[a[1]] if a[0] == "in" else out_dtypes[a[1]] for a in m.args
                              if isinstance(a, tuple) and len(a) == 2
                              and (in_dtypes[a[1]] if a[0] == "in" else out_dtypes[a[1]]) != "bool"), out_dtypes[j])
        for a in m.args:
            if isinstance(a, tuple) and len(a) == 2 and a[0] in ("in", "tmp"):
                texts.append(f"x{a[1]}" if a[0] == "in" else f"t{a[1]}")
            else:
                texts.append(_literal(a, operand_dtype))
        expr = SCALAR[m.op.__name__](texts, m.params)
        for param, name in _PARAM_CONSTANTS.get(m.op.__name__, ()):
            value = m.params.get(param)
            if value is not None:
                expr = expr.replace(name, _literal(value, operand_dtype))
        lines.append(f"t{j} = {cast(expr, out_dtypes[j])}")
    return lines


# ----------------------------------------------------------------------------- Numba (CPU)

_NUMBA: Dict[str, Any] = {}


def numba_available() -> bool:
    """Whether Numba can be imported; without it, says once (a warning) that fused kernels need it."""
    if "module" not in _NUMBA:
        try:
            import numba
        except ImportError:
            _NUMBA["module"] = None
            warnings.warn("nt.compile: fused CPU kernels need Numba (pip install 'named-tensors[jit]'); the "
                          "compiled graphs run their fused groups op by op on NumPy meanwhile.", stacklevel=4)
            return False
        _NUMBA["module"] = numba
    return _NUMBA["module"] is not None


def cache_dir() -> Path:
    """Where generated kernels and Numba's cache of their machine code live (``NAMEDTENSOR_CACHE_DIR``,
    else ``~/.cache/namedtensor``)."""
    root = os.environ.get("NAMEDTENSOR_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "namedtensor")
    path = Path(root) / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


_CHUNK = 2048  # elements of a row per task: long rows are split among the threads
_PARALLEL_FROM = 1 << 15  # outputs smaller than this run on one thread (starting threads costs more)


def _numba_source(chain: Chain, in_dtypes: List[str], out_dtypes: List[str], ndim: int) -> str:
    xs = [f"a{k}" for k in range(len(in_dtypes))]
    os_ = [f"o{k}" for k in range(len(chain.outputs))]
    lead = [f"i{d}" for d in range(ndim - 1)]
    body = []
    body.append("    rows = 1")
    for d in range(ndim - 1):
        body.append(f"    rows *= o0.shape[{d}]")
    body.append(f"    cols = o0.shape[{ndim - 1}]")
    body.append(f"    chunks = (cols + {_CHUNK} - 1) // {_CHUNK}")
    body.append("    for task in prange(rows * chunks):")
    body.append("        r = task // chunks")
    body.append(f"        c0 = (task % chunks) * {_CHUNK}")
    body.append(f"        n = min({_CHUNK}, cols - c0)")
    for d in range(ndim - 2, -1, -1):
        body.append(f"        {lead[d]} = r % o0.shape[{d}]")
        body.append(f"        r //= o0.shape[{d}]")
    # a slice per row chunk, indexed from 0: the form LLVM vectorizes
    index = ", ".join(lead + ["c0:c0 + n"])
    for k, x in enumerate(xs + os_):
        body.append(f"        s{k} = {x}[{index}]")
    body.append("        for c in range(n):")
    for k in range(len(xs)):
        body.append(f"            x{k} = s{k}[c]")
    for line in _statements(chain, in_dtypes, out_dtypes, lambda e, d: e if d == "bool" else f"{d}({e})"):
        body.append("            " + line)
    for k, j in enumerate(chain.outputs):
        body.append(f"            s{len(xs) + k}[c] = t{j}")
    args = ", ".join(xs + os_)
    head = ["import numpy as np", "from math import exp, expm1, log, log1p, sqrt, sin, cos, tanh, erf, fabs, pow",
            "from numpy import float32, float64", "from numba import njit, prange", ""]
    kernels = []
    for name, parallel in (("parallel", True), ("serial", False)):
        kernels.append(f"@njit(parallel={parallel}, cache=True, nogil=True, error_model='numpy')")
        kernels.append(f"def {name}({args}):")
        kernels.extend(body if parallel else [line.replace("prange(", "range(") for line in body])
        kernels.append("")
    return "\n".join(head + kernels)


def _load(source: str):
    digest = hashlib.sha1(source.encode()).hexdigest()[:20]
    name = f"nt_kernel_{digest}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    path = cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def numba_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """``kernel(B, arrays) -> outputs`` for the NumPy backend, or None without Numba."""
    if not numba_available():
        return None
    from numba import config, get_num_threads as numba_threads, set_num_threads as set_numba_threads

    from .. import _dtypes
    from ..backends import get_num_threads

    shape = tuple(outputs[0].shape)
    ndim = max(len(shape), 1)
    in_dtypes = [v.dtype for v in inputs]
    module = _load(_numba_source(chain, in_dtypes, list(chain_dtypes(chain)), ndim))
    parallel, serial = module.parallel, module.serial
    full = shape if shape else (1,)
    out_dtypes = [_dtypes.as_dtype(v.dtype) for v in outputs]
    size = math.prod(full)

    def kernel(B, arrays):
        xs = [B.broadcast_to(a, full) for a in arrays]
        outs = [B.empty(full, dtype=B.native(d)) for d in out_dtypes]
        if size >= _PARALLEL_FROM:
            n = min(get_num_threads(), config.NUMBA_NUM_THREADS)
            if numba_threads() != n:
                set_numba_threads(n)
            parallel(*xs, *outs)
        else:
            serial(*xs, *outs)
        return tuple(B.reshape(o, shape) for o in outs)

    return kernel


def chain_dtypes(chain: Chain) -> Tuple[str, ...]:
    """Each member's result dtype."""
    return tuple(m.dtype for m in chain.members)


# ----------------------------------------------------------------------------- CUDA (through CuPy)

#: the CUDA C spelling of the functions the formulas call (float and double overloads both exist)
C_FUNCTIONS = {"fabs": "fabs", "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "sqrt": "sqrt",
               "sin": "sin", "cos": "cos", "tanh": "tanh", "erf": "erf", "pow": "pow"}
_C_TYPES = {"float32": "float", "float64": "double", "bool": "bool"}


def _c_expr(text: str) -> str:
    """A formula in C: ``a if c else b`` becomes ``(c ? a : b)``; ``and``/``not`` become ``&&``/``!``."""
    import ast

    tree = ast.parse(text, mode="eval")

    def emit(node) -> str:
        if isinstance(node, ast.IfExp):
            return f"({emit(node.test)} ? {emit(node.body)} : {emit(node.orelse)})"
        if isinstance(node, ast.BoolOp):
            op = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + op.join(emit(v) for v in node.values) + ")"
        if isinstance(node, ast.UnaryOp):
            sym = {ast.Not: "!", ast.USub: "-", ast.UAdd: "+"}[type(node.op)]
            return f"({sym}{emit(node.operand)})"
        if isinstance(node, ast.BinOp):
            sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}[type(node.op)]
            return f"({emit(node.left)} {sym} {emit(node.right)})"
        if isinstance(node, ast.Compare):
            sym = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
            return f"({emit(node.left)} {sym[type(node.ops[0])]} {emit(node.comparators[0])})"
        if isinstance(node, ast.Call):
            fn = node.func.id
            args = ", ".join(emit(a) for a in node.args)
            if fn in _C_TYPES:
                return f"(({_C_TYPES[fn]})({args}))"
            return f"{C_FUNCTIONS[fn]}({args})"
        if isinstance(node, ast.Name):
            return {"True": "true", "False": "false"}.get(node.id, node.id)
        if isinstance(node, ast.Constant):
            return "true" if node.value is True else "false" if node.value is False else repr(float(node.value))
        raise NotImplementedError(f"nt.compile: no CUDA C for {ast.dump(node)}")

    return emit(tree.body)


def cuda_source(chain: Chain, in_dtypes: List[str], member_dtypes: List[str]) -> Tuple[str, str, str]:
    """``(in_params, out_params, body)`` of the ``cupy.ElementwiseKernel`` computing ``chain``: the params
    typed by NumPy's dtype names, as CuPy reads them (``float`` there is float64), the body in C."""
    ins = ", ".join(f"{d} x{k}" for k, d in enumerate(in_dtypes))
    outs = ", ".join(f"{member_dtypes[j]} o{k}" for k, j in enumerate(chain.outputs))
    lines = []
    for j, line in enumerate(_statements(chain, in_dtypes, member_dtypes, lambda e, d: f"{d}({e})" if d != "bool" else e)):
        lhs, rhs = line.split(" = ", 1)
        lines.append(f"{_C_TYPES[member_dtypes[j]]} {lhs} = {_c_expr(rhs)};")
    lines.extend(f"o{k} = t{j};" for k, j in enumerate(chain.outputs))
    return ins, outs, "\n".join(lines)


def cuda_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """``kernel(B, arrays) -> outputs`` for the CuPy backend (built on first use, on the device)."""
    in_params, out_params, body = cuda_source(chain, [v.dtype for v in inputs], list(chain_dtypes(chain)))
    digest = hashlib.sha1((in_params + out_params + body).encode()).hexdigest()[:16]
    built: Dict[str, Any] = {}

    def kernel(B, arrays):
        k = built.get("kernel")
        if k is None:
            k = built["kernel"] = B.xp.ElementwiseKernel(in_params, out_params, body, f"nt_fused_{digest}")
        out = k(*arrays)
        return out if isinstance(out, tuple) else (out,)

    return kernel
