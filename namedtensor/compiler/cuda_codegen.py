"""GPU kernels of fused chains: the statements of formulas.py as CUDA C, in CuPy ElementwiseKernels.

:func:`c_expression` turns a formula's Python text into C (``a if c else b`` into ``(c ? a : b)``, the
dtype conversions into casts, the functions into CUDA's overloads for float and double).  A kernel's
params are typed by NumPy's dtype names, as CuPy reads them (``float`` there would be float64); CuPy
broadcasts the inputs and loops.  A chain that ends in a sum or mean is a ReductionKernel whose map is
the chain as a device function, summed in double.  ``tests/test_nvcc.py`` compiles the generated sources
with nvcc; the kernels are built on first use, on the device.
"""

from __future__ import annotations

import ast
import hashlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..ops.fusion import Chain
from . import formulas
from .ir import Value

__all__ = ["C_FUNCTIONS", "c_expression", "forward_source", "backward_source", "forward_kernel",
           "backward_kernel", "reduction_source", "reduction_kernel", "reduction_backward"]

#: the CUDA C spelling of the functions the formulas call (float and double overloads both exist)
C_FUNCTIONS = {"fabs": "fabs", "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "sqrt": "sqrt",
               "sin": "sin", "cos": "cos", "tanh": "tanh", "erf": "erf", "pow": "pow"}
C_TYPES = {"float32": "float", "float64": "double", "bool": "bool"}
_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<",
              ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Not: "!", ast.USub: "-", ast.UAdd: "+"}


def c_expression(text: str) -> str:
    """A formula's Python text in C."""

    def emit(node) -> str:
        if isinstance(node, ast.IfExp):
            return f"({emit(node.test)} ? {emit(node.body)} : {emit(node.orelse)})"
        if isinstance(node, ast.BoolOp):
            op = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + op.join(emit(v) for v in node.values) + ")"
        if isinstance(node, ast.UnaryOp):
            return f"({_OPERATORS[type(node.op)]}{emit(node.operand)})"
        if isinstance(node, ast.BinOp):
            return f"({emit(node.left)} {_OPERATORS[type(node.op)]} {emit(node.right)})"
        if isinstance(node, ast.Compare):
            return f"({emit(node.left)} {_OPERATORS[type(node.ops[0])]} {emit(node.comparators[0])})"
        if isinstance(node, ast.Call):
            args = ", ".join(emit(a) for a in node.args)
            fn = node.func.id
            return f"(({C_TYPES[fn]})({args}))" if fn in C_TYPES else f"{C_FUNCTIONS[fn]}({args})"
        if isinstance(node, ast.Name):
            return {"True": "true", "False": "false"}.get(node.id, node.id)
        if isinstance(node, ast.Constant):
            return "true" if node.value is True else "false" if node.value is False else repr(float(node.value))
        raise NotImplementedError(f"nt.compile: no CUDA C for {ast.dump(node)}")

    return emit(ast.parse(text, mode="eval").body)


def _body(lines: List[formulas.Statement], results: List[Tuple[str, str]]) -> str:
    body = [f"{C_TYPES[dtype]} {var} = (({C_TYPES[dtype]})({c_expression(expr)}));" for var, dtype, expr in lines]
    body += [f"{out} = {var};" for out, var in results]
    return "\n".join(body)


def forward_source(chain: Chain, in_dtypes: Sequence[str]) -> Tuple[str, str, str]:
    """``(in_params, out_params, body)`` of the ElementwiseKernel computing ``chain``."""
    lines, results = formulas.forward(chain, in_dtypes)
    dtypes = formulas.chain_dtypes(chain)
    ins = ", ".join(f"{d} x{k}" for k, d in enumerate(in_dtypes))
    outs = ", ".join(f"{dtypes[j]} o{k}" for k, j in enumerate(chain.outputs))
    return ins, outs, _body(lines, [(f"o{k}", r) for k, r in enumerate(results)])


def backward_source(chain: Chain, in_dtypes: Sequence[str]) -> Optional[Tuple[str, str, str, List[int]]]:
    """``(in_params, out_params, body, inputs with a gradient)`` of the ElementwiseKernel computing the
    chain's backward: inputs ``x{k}`` and the outputs' gradients ``go{k}``; None if no input has one."""
    lines, grads = formulas.backward(chain, in_dtypes)
    wanted = [k for k, g in enumerate(grads) if g is not None]
    if not wanted:
        return None
    dtypes = formulas.chain_dtypes(chain)
    ins = [f"{d} x{k}" for k, d in enumerate(in_dtypes)] + [f"{dtypes[j]} go{k}" for k, j in enumerate(chain.outputs)]
    outs = ", ".join(f"{in_dtypes[k]} gi{k}" for k in wanted)
    return ", ".join(ins), outs, _body(lines, [(f"gi{k}", grads[k]) for k in wanted]), wanted


def reduction_source(chain: Chain, in_dtypes: Sequence[str], out_dtype: str, count: int
                     ) -> Tuple[str, str, str, str, str]:
    """``(in_params, out_params, map_expr, post_map_expr, preamble)`` of the ReductionKernel computing a
    chain that ends in a sum or mean (formulas.split_reduction): the elementwise part as a device
    function of one element, summed in double; a mean divides by ``count``, the elements per output."""
    part, kind, _ = formulas.split_reduction(chain)
    lines, (result,) = formulas.forward(part, in_dtypes)
    args = ", ".join(f"{C_TYPES[d]} x{k}" for k, d in enumerate(in_dtypes))
    body = "\n".join(f"    {C_TYPES[dt]} {var} = (({C_TYPES[dt]})({c_expression(expr)}));" for var, dt, expr in lines)
    preamble = f"__device__ double nt_chain({args}) {{\n{body}\n    return (double){result};\n}}\n"
    ins = ", ".join(f"{d} x{k}" for k, d in enumerate(in_dtypes))
    mapped = "nt_chain(" + ", ".join(f"x{k}" for k in range(len(in_dtypes))) + ")"
    post = f"y = ({C_TYPES[out_dtype]})(a{f' / {float(count)!r}' if kind == 'mean' else ''})"
    return ins, f"{out_dtype} y", mapped, post, preamble


def reduction_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value], full: Tuple[int, ...],
                     axes: Tuple[int, ...]) -> Callable:
    """``kernel(B, arrays) -> (output,)`` for the CuPy backend: the chain over the broadcast shape ``full``,
    reduced over ``axes``."""
    count = 1
    for a in axes:
        count *= full[a]
    ins, outs, mapped, post, preamble = reduction_source(chain, [v.dtype for v in inputs], outputs[0].dtype, count)
    name = "nt_fused_sum_" + hashlib.sha1((ins + mapped + post + preamble).encode()).hexdigest()[:16]
    shape = tuple(outputs[0].shape)
    built: Dict[str, Any] = {}

    def kernel(B, arrays):
        k = built.get("kernel")
        if k is None:
            k = built["kernel"] = B.xp.ReductionKernel(ins, outs, mapped, "a + b", post, "0", name,
                                                        reduce_type="double", preamble=preamble)
        xs = [a if a.shape == full else B.broadcast_to(a, full) for a in arrays]
        return (B.reshape(k(*xs, axis=axes), shape),)

    return kernel


def reduction_backward(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value], full: Tuple[int, ...],
                       axes: Tuple[int, ...]) -> Optional[Callable]:
    """The backward of :func:`reduction_kernel`: the output's gradient spread over the reduced dims
    (divided by their size for a mean), then the elementwise part's backward kernel."""
    part, kind, _ = formulas.split_reduction(chain)
    inner = backward_kernel(part, inputs, [Value(-1, (None,) * len(full), full, outputs[0].dtype, "op")])
    if inner is None:
        return None
    spread = tuple(1 if d in axes else n for d, n in enumerate(full))
    count = 1
    for a in axes:
        count *= full[a]

    def kernel(B, arrays, out_grads):
        g = B.reshape(out_grads[0], spread)
        return inner(B, arrays, [B.multiply(g, 1.0 / count) if kind == "mean" else g])

    return kernel


def _elementwise(in_params: str, out_params: str, body: str) -> Callable:
    """``run(B, arrays) -> tuple of outputs``, the kernel built on first use."""
    name = "nt_fused_" + hashlib.sha1((in_params + out_params + body).encode()).hexdigest()[:16]
    built: Dict[str, Any] = {}

    def run(B, arrays):
        k = built.get("kernel")
        if k is None:
            k = built["kernel"] = B.xp.ElementwiseKernel(in_params, out_params, body, name)
        out = k(*arrays)
        return out if isinstance(out, tuple) else (out,)

    return run


def forward_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Callable:
    """``kernel(B, arrays) -> outputs`` for the CuPy backend."""
    return _elementwise(*forward_source(chain, [v.dtype for v in inputs]))


def backward_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """``kernel(B, input arrays, output gradients) -> one gradient per input`` (None for an input without
    one) for the CuPy backend; None if no input has a gradient."""
    source = backward_source(chain, [v.dtype for v in inputs])
    if source is None:
        return None
    *params, wanted = source
    run = _elementwise(*params)

    def kernel(B, arrays, out_grads):
        computed = dict(zip(wanted, run(B, [*arrays, *out_grads])))
        return [computed.get(k) for k in range(len(arrays))]

    return kernel
