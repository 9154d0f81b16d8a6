"""GPU kernels of fused chains: the statements of formulas.py as CUDA C, in CuPy ElementwiseKernels.

:func:`c_expression` turns a formula's Python text into C (``a if c else b`` into ``(c ? a : b)``, the
dtype conversions into casts, the functions into CUDA's overloads for float and double).  A kernel's
params are typed by NumPy's dtype names, as CuPy reads them (``float`` there would be float64); CuPy
broadcasts the inputs and loops.  A chain that ends in a sum or mean is a ReductionKernel whose map is
the chain as a device function, summed in double.  A chain that ends in a softmax or log-softmax is a kernel
of its own (through a RawModule): along its last dim one block per row (:func:`softmax_source`), along
another one block per 32 columns side by side (:func:`softmax_columns_source`), writes the chain's
values, then normalises them in place, so scale + mask + softmax is one launch; its backward is the
elementwise part's backward kernel with the softmax's gradient computed per element.
``tests/test_nvcc.py`` compiles the generated sources with nvcc, ``tests/test_cuda_emulated.py`` runs the
softmax kernels on the CPU; the kernels are built on first use, on the device.
"""

from __future__ import annotations

import ast
import hashlib
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..ops.fusion import Chain
from . import formulas
from .ir import Value

__all__ = ["C_FUNCTIONS", "c_expression", "forward_source", "backward_source", "forward_kernel",
           "backward_kernel", "reduction_source", "reduction_kernel", "reduction_backward", "softmax_source",
           "softmax_columns_source", "softmax_kernel", "softmax_backward"]

#: the CUDA C spelling of the functions the formulas call (float and double overloads both exist)
C_FUNCTIONS = {"fabs": "fabs", "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "sqrt": "sqrt",
               "sin": "sin", "cos": "cos", "tanh": "tanh", "erf": "erf", "pow": "pow", "floor": "floor",
               "ceil": "ceil", "trunc": "trunc", "rint": "rint", "log2": "log2", "exp2": "exp2", "copysign": "copysign"}
C_TYPES = {"float32": "float", "float64": "double", "bool": "bool"}
#: the formulas' ``np.inf`` and ``np.nan`` in C (a float: cast to double, each is the same value)
_NP_CONSTANTS = {"inf": "__int_as_float(0x7f800000)", "nan": "__int_as_float(0x7fc00000)"}
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
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "np":
            return _NP_CONSTANTS[node.attr]
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


def backward_source(chain: Chain, in_dtypes: Sequence[str],
                    seed: Optional[Tuple[List[Tuple[str, str]], formulas.Statement]] = None
                    ) -> Optional[Tuple[str, str, str, Dict[int, int]]]:
    """``(in_params, out_params, body, same)`` of the ElementwiseKernel computing the chain's backward:
    inputs ``x{k}`` and the outputs' gradients ``go{k}``; None if no input has a gradient.  ``same``
    maps each input with a gradient to the input whose output ``gi{k}`` holds it: inputs whose
    gradients are one formula (an add's two operands) share one output, written once, as the add's
    eager backward hands both the same gradient.  ``seed``: the output's gradient ``go0`` computed per
    element by a statement from params of its own (each ``(dtype, name)``), which the kernel takes in
    the output gradients' place."""
    lines, grads = formulas.backward(chain, in_dtypes)
    formula = {var: (dtype, expr) for var, dtype, expr in lines}
    first: Dict[tuple, int] = {}
    same = {k: first.setdefault(formula[g], k) for k, g in enumerate(grads) if g is not None}
    wanted = [k for k in same if same[k] == k]
    if not wanted:
        return None
    dtypes = formulas.chain_dtypes(chain)
    ins = [f"{d} x{k}" for k, d in enumerate(in_dtypes)]
    if seed is None:
        ins += [f"{dtypes[j]} go{k}" for k, j in enumerate(chain.outputs)]
    else:
        ins += [f"{d} {name}" for d, name in seed[0]]
        lines = [seed[1], *lines]
    outs = ", ".join(f"{in_dtypes[k]} gi{k}" for k in wanted)
    return ", ".join(ins), outs, _body(lines, [(f"gi{k}", grads[k]) for k in wanted]), same


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
        return inner(B, arrays, [B.multiply(g, formulas.mean_scale(count)) if kind == "mean" else g])

    return kernel


#: the most threads of a softmax kernel's block (one block per row; a power of two for the tree sums)
SOFTMAX_THREADS = 256


def _read_strides(shape: Sequence[int], full: Sequence[int]) -> Tuple[int, ...]:
    """The element strides of a row-major array of ``shape`` read at each index of ``full``: 0 along the
    dims where it has size 1 (broadcast), as for the dims ``full`` lacks."""
    padded = (1,) * (len(full) - len(shape)) + tuple(shape)
    strides, step = [], 1
    for n in reversed(padded):
        strides.append(step if n != 1 else 0)
        step *= n
    return tuple(reversed(strides))


def softmax_source(chain: Chain, in_dtypes: Sequence[str], in_shapes: Sequence[Sequence[int]],
                   full: Sequence[int]) -> Tuple[str, str, int]:
    """``(name, source, threads)`` of the kernel computing a chain that ends in a softmax or log-softmax
    along its last dim (formulas.split_reduction) for an output of shape ``full``: ``name(inputs...,
    out)``, launched with one block of ``threads`` per row.  Each thread writes the chain's values of
    its columns into ``out`` and keeps their max (a NaN wins, as NumPy's max), the block combines the
    maxima, then the exponentials' sum, and the row is normalised in place: ``e / sum(e)``, or
    ``z - (max + log(sum))`` for log-softmax, in the output's dtype.  The inputs are row-major in their
    own shapes; the shapes are constants of the source (a graph's shapes are fixed)."""
    part, kind, _ = formulas.split_reduction(chain)
    lines, (result,) = formulas.forward(part, in_dtypes)
    out_type = C_TYPES[chain.members[-1].dtype]
    cols = full[-1]
    threads = min(SOFTMAX_THREADS, max(32, 1 << max(cols - 1, 0).bit_length()))
    strides = [_read_strides(shape, full) for shape in in_shapes]
    params = [f"const {C_TYPES[d]}* __restrict__ nt_in{k}" for k, d in enumerate(in_dtypes)]
    params.append(f"{out_type}* __restrict__ nt_out")
    body = [f"    __shared__ {out_type} nt_red[{threads}];", "    const long long nt_row = blockIdx.x;",
            "    const int nt_lane = threadIdx.x;", "    long long nt_r = nt_row;"]
    body += [f"    long long nt_at{k} = 0;" for k in range(len(in_dtypes))]
    for d in range(len(full) - 2, -1, -1):  # the row's index along each dim before the last
        moved = [f" nt_at{k} += nt_i * {s[d]}LL;" for k, s in enumerate(strides) if s[d]]
        if moved:
            body.append(f"    {{ const long long nt_i = nt_r % {full[d]}LL;{''.join(moved)} }}")
        if d:
            body.append(f"    nt_r /= {full[d]}LL;")
    body.append(f"    {out_type}* nt_y = nt_out + nt_row * {cols}LL;")
    body += _softmax_passes(kind, out_type, in_dtypes, strides, len(full) - 1, lines, result,
                            f"    for (long long nt_c = nt_lane; nt_c < {cols}LL; nt_c += {threads})", "nt_y[nt_c]",
                            threads)
    signature, code = ", ".join(params), "\n".join(body)
    name = "nt_fused_softmax_" + hashlib.sha1((signature + code).encode()).hexdigest()[:16]
    return name, f'extern "C" __global__ void {name}({signature}) {{\n{code}\n}}\n', threads


#: a column softmax kernel's block: 32 columns side by side (a warp reads 32 consecutive elements) by 8
#: threads along the softmax's dim
COLUMN_BLOCK = (32, 8)


def softmax_columns_source(chain: Chain, in_dtypes: Sequence[str], in_shapes: Sequence[Sequence[int]],
                           full: Sequence[int], axis: int) -> Tuple[str, str, int]:
    """``(name, source, tiles)`` of the kernel computing a chain that ends in a softmax or log-softmax along
    dim ``axis``, not the last, for an output of shape ``full``: ``name(inputs..., out)``, launched with
    ``COLUMN_BLOCK`` threads per block and a block per ``tiles`` of 32 columns (consecutive indices of the
    dims after ``axis``) of each index of the dims before it.  A column is a softmax's row, strided by
    those dims' size; the block's 32 columns are read and written side by side, so that each step of a
    warp touches consecutive elements (one block per column would read one element per row of memory).
    Each thread takes every 8th element of its column: :func:`_softmax_passes`, each column's max and sum
    combined over its 8 threads through shared memory."""
    part, kind, _ = formulas.split_reduction(chain)
    lines, (result,) = formulas.forward(part, in_dtypes)
    out_type = C_TYPES[chain.members[-1].dtype]
    width, depth = COLUMN_BLOCK
    size, inner = full[axis], math.prod(full[axis + 1:])
    tiles = -(-inner // width)
    strides = [_read_strides(shape, full) for shape in in_shapes]
    out_strides = _read_strides(full, full)  # row-major (0 along a size-1 dim, whose index is 0)
    params = [f"const {C_TYPES[d]}* __restrict__ nt_in{k}" for k, d in enumerate(in_dtypes)]
    params.append(f"{out_type}* __restrict__ nt_out")
    body = [f"    __shared__ {out_type} nt_red[{depth}][{width}];", "    const int nt_x = threadIdx.x;",
            "    const int nt_lane = threadIdx.y;",
            f"    const long long nt_col = (long long)(blockIdx.x % {tiles}) * {width} + nt_x;",
            f"    const bool nt_live = nt_col < {inner}LL;", f"    long long nt_r = blockIdx.x / {tiles};",
            "    long long nt_q = nt_col;", "    long long nt_base = 0;"]
    body += [f"    long long nt_at{k} = 0;" for k in range(len(in_dtypes))]
    for d in [*range(len(full) - 1, axis, -1), *range(axis - 1, -1, -1)]:  # the column's index along each dim
        index = "nt_q" if d > axis else "nt_r"
        moved = [f" nt_at{k} += nt_i * {st[d]}LL;" for k, st in enumerate(strides) if st[d]]
        body.append(f"    {{ const long long nt_i = {index} % {full[d]}LL; nt_base += nt_i * {out_strides[d]}LL;"
                    f"{''.join(moved)} {index} /= {full[d]}LL; }}")
    body += _softmax_passes(kind, out_type, in_dtypes, strides, axis, lines, result,
                            f"    if (nt_live) for (long long nt_c = nt_lane; nt_c < {size}LL; nt_c += {depth})",
                            f"nt_out[nt_base + nt_c * {inner}LL]", depth, "[nt_x]")
    signature, code = ", ".join(params), "\n".join(body)
    name = "nt_fused_softmax_columns_" + hashlib.sha1((signature + code).encode()).hexdigest()[:16]
    return name, f'extern "C" __global__ void {name}({signature}) {{\n{code}\n}}\n', tiles


def _softmax_passes(kind: str, out_type: str, in_dtypes: Sequence[str], strides: Sequence[Tuple[int, ...]], axis: int,
                    lines: List[formulas.Statement], result: str, loop: str, at: str, threads: int,
                    column: str = "") -> List[str]:
    """A softmax kernel's three passes over its row (or column), ``loop`` the ``for`` line walking a
    thread's elements ``nt_c`` of it and ``at`` the output element there: the chain's values written with
    their max (a NaN wins, as NumPy's max), the exponentials and their sum, then the division (or the
    log-softmax's shift) in place; each max and sum combined over the ``threads`` threads of the row
    (:func:`_block_combine`, ``column`` as there).  An input's element is read ``nt_c`` times its stride
    along ``axis`` past ``nt_at<k>``."""
    body = [f"    {out_type} nt_top = ({out_type})(-__int_as_float(0x7f800000));", loop + " {"]
    body += [f"        const {C_TYPES[d]} x{k} = nt_in{k}[nt_at{k}{f' + nt_c * {st[axis]}LL' if st[axis] else ''}];"
             for k, (d, st) in enumerate(zip(in_dtypes, strides))]
    body += [f"        {C_TYPES[dt]} {var} = (({C_TYPES[dt]})({c_expression(expr)}));" for var, dt, expr in lines]
    body += [f"        const {out_type} nt_v = ({out_type})({result});", f"        {at} = nt_v;",
             "        nt_top = (nt_top > nt_v || nt_top != nt_top) ? nt_top : nt_v;", "    }"]
    body += _block_combine(out_type, threads, "nt_top", "(nt_a > nt_b || nt_a != nt_a) ? nt_a : nt_b", column)
    body += [f"    {out_type} nt_total = 0;", loop + " {", f"        const {out_type} nt_e = exp({at} - nt_top);",
             *([] if kind == "log_softmax" else [f"        {at} = nt_e;"]), "        nt_total += nt_e;", "    }"]
    body += _block_combine(out_type, threads, "nt_total", "nt_a + nt_b", column)
    if kind == "log_softmax":
        return body + [f"    const {out_type} nt_shift = nt_top + log(nt_total);", loop + f" {at} -= nt_shift;"]
    return body + [loop + f" {at} /= nt_total;"]


def _block_combine(c_type: str, threads: int, var: str, combine: str, column: str = "") -> List[str]:
    """The lines combining each thread's ``var`` over the block by ``combine`` (an expression of ``nt_a``
    and ``nt_b``), a tree through shared memory; every thread then holds the result.  ``column``
    (``"[nt_x]"``): each column of a 2-D block apart, over its ``threads`` threads along ``nt_lane``."""
    def slot(at: str) -> str:
        return f"nt_red[{at}]{column}"

    return [f"    {slot('nt_lane')} = {var};", "    __syncthreads();",
            f"    for (int nt_s = {threads // 2}; nt_s > 0; nt_s >>= 1) {{",
            f"        if (nt_lane < nt_s) {{ const {c_type} nt_a = {slot('nt_lane')}, nt_b = {slot('nt_lane + nt_s')}; "
            f"{slot('nt_lane')} = {combine}; }}",
            "        __syncthreads();", "    }", f"    {var} = {slot('0')};",
            "    __syncthreads();"]  # before nt_red is written again


def softmax_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Callable:
    """``kernel(B, arrays) -> (output,)`` for the CuPy backend: :func:`softmax_source`'s kernel along the
    last dim, :func:`softmax_columns_source`'s along another."""
    full = tuple(outputs[0].shape)
    dtype = outputs[0].dtype
    axis = formulas.split_reduction(chain)[2][0] % len(full)
    dtypes, shapes = [v.dtype for v in inputs], [tuple(v.shape) for v in inputs]
    blocks, empty = math.prod(full[:axis]), 0 in full
    if axis == len(full) - 1:
        name, source, threads = softmax_source(chain, dtypes, shapes, full)
        block = (threads,)
    else:
        name, source, tiles = softmax_columns_source(chain, dtypes, shapes, full, axis)
        blocks, block = blocks * tiles, COLUMN_BLOCK
    built: Dict[int, Any] = {}  # by device: a module is loaded on each

    def kernel(B, arrays):
        xp = B.xp
        out = xp.empty(full, dtype=dtype)
        if empty:
            return (out,)
        device = xp.cuda.runtime.getDevice()
        fn = built.get(device)
        if fn is None:
            fn = built[device] = xp.RawModule(code=source).get_function(name)
        fn((blocks,), block, (*(xp.ascontiguousarray(a) for a in arrays), out))
        return (out,)

    return kernel


def softmax_backward(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """The backward of :func:`softmax_kernel`, from the inputs and the saved output ``y``: the elementwise
    part's backward kernel seeded per element with the softmax's gradient (formulas.softmax_seed)."""
    part, kind, _ = formulas.split_reduction(chain)
    out = outputs[0].dtype
    source = backward_source(part, [v.dtype for v in inputs],
                             seed=([(out, "y"), (out, "g"), (out, "d")], formulas.softmax_seed(kind, out)))
    if source is None:
        return None
    *params, same = source
    run = _elementwise(*params)

    axis = formulas.split_reduction(chain)[2][0] % len(outputs[0].shape)

    def kernel(B, arrays, out_grads):
        y, g = arrays[-1], out_grads[0]
        return _shared(same, run(B, [*arrays[:-1], y, g, formulas.softmax_row_term(B, kind, g, y, axis)]),
                       len(arrays) - 1)

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


def _reduced(chain: Chain, inputs: Sequence[Value]) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """``(full, axes)`` of a chain that ends in a sum or mean: the shape its inputs broadcast to, and the
    axes reduced."""
    full = formulas.broadcast_shape([v.shape for v in inputs])
    return full, formulas.reduced_axes(formulas.split_reduction(chain)[2], len(full))


def forward_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Callable:
    """``kernel(B, arrays) -> outputs`` for the CuPy backend: an elementwise kernel, or, for a chain that
    ends in a reduction or a softmax, :func:`reduction_kernel` or :func:`softmax_kernel`."""
    kind = formulas.split_reduction(chain)[1]
    if kind in formulas.SOFTMAXES.values():
        return softmax_kernel(chain, inputs, outputs)
    if kind is not None:
        return reduction_kernel(chain, inputs, outputs, *_reduced(chain, inputs))
    return _elementwise(*forward_source(chain, [v.dtype for v in inputs]))


def backward_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """``kernel(B, input arrays, output gradients) -> one gradient per input`` (None for an input without
    one) for the CuPy backend, the backward of :func:`forward_kernel`'s; None if no input has a gradient."""
    kind = formulas.split_reduction(chain)[1]
    if kind in formulas.SOFTMAXES.values():
        return softmax_backward(chain, inputs, outputs)
    if kind is not None:
        return reduction_backward(chain, inputs, outputs, *_reduced(chain, inputs))
    source = backward_source(chain, [v.dtype for v in inputs])
    if source is None:
        return None
    *params, same = source
    run = _elementwise(*params)

    def kernel(B, arrays, out_grads):
        return _shared(same, run(B, [*arrays, *out_grads]), len(arrays))

    return kernel


def _shared(same: Dict[int, int], outputs, n_inputs: int) -> list:
    """One gradient per input from a backward kernel's outputs (:func:`backward_source`'s ``same``)."""
    computed = dict(zip([k for k in same if same[k] == k], outputs))
    return [computed[same[k]] if k in same else None for k in range(n_inputs)]
