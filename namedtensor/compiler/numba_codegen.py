"""CPU kernels of fused chains: the statements of formulas.py as Numba functions, cached on disk.

A kernel loops over the output's rows, each split in chunks, so that long rows are shared among threads
too; a chunk is a slice indexed from 0, the form LLVM vectorizes.  An input smaller than the output (a
bias, a scale) comes as a row-major view with size-1 dims, and the kernel is written for its broadcast:
index 0 along those dims, and one scalar per row where its last dim is 1.  (A view broadcast with zero
strides would type as a strided array, whose loops Numba leaves scalar: about fifteen times slower.)
Inputs that are not row-major are copied first, for the same reason.  A backward kernel sums the
gradient of such an input as it goes (one row of the input's shape per part of the work, in its
dtype), so that it is never stored at the output's size.  The kernel
takes a range of those tasks and releases the GIL: calls with less work than ``_PARALLEL_FROM`` (the
output's elements times the chain's weight) run on the calling thread (handing work to threads costs
more), larger ones are split among
``nt.get_num_threads()`` threads of the NumPy backend's pool (Numba's own parallel loops would double
the compile time).

A chain may end in a sum or mean over any dims, or in a softmax or log-softmax along any dim (along the
last, one task per row; along another, one task per chunk of columns, which fits in L2): the chain's
values are then never stored, or stored once in the output that the softmax normalises in place.

Every formula compiles to vector instructions (formulas.SCALAR; exp, expm1, exp2, tanh, erf, log, log1p,
log2, pow, sin and cos come from backends/numba_math.py, the roundings from NumPy): a call of the C library
per element would be several times slower than NumPy's vectorized loops.
sin32, cos32, sin64 and cos64 are exact below numba_math.TRIG_LIMIT: a kernel that calls them counts the
larger arguments and does such a chunk (a reduction's row, a softmax's first pass over a row) again with
the C library's functions (:func:`_exact_pass`); so does a float64 integer power (numba_math.powi64) with
an argument whose power might overflow, or lose bits to the subnormals, and any other float64 power
(numba_math.pow64) where numba_math.pow64_safe fails.

The source goes to a file under :func:`cache_dir` named by its hash, and Numba caches its machine code
beside it (``cache=True``), so a second process loads the kernels compiled by the first.  Without Numba
(the ``jit`` extra) there are no CPU kernels: :func:`numba_available` says so once, and graphs fuse
nothing on the CPU.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import math
import os
import re
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import _dtypes
from ..backends import get_num_threads
from ..backends.thread_pool import split, split_by_part
from ..ops.fusion import Chain
from . import formulas
from .ir import Value

__all__ = ["numba_available", "cache_dir", "MATH_CALLS", "forward_kernel", "backward_kernel"]

_NUMBA: Dict[str, Any] = {}
_CHUNK = 2048  # elements of a row per task
#: how much work (elements times the chain's weight, formulas.work) a kernel call needs before it is split
#: among threads: handing parts to a pool costs tens of microseconds, a vectorized add of an element
#: about a hundredth of a nanosecond
_PARALLEL_FROM = 1 << 24
#: the most formulas calling numba_math in one kernel (passes.fuse_elementwise's ``math_calls``): Numba inlines
#: each call, and a kernel's compile time grows faster than its chain (tanh, exp, sin and erf in turn,
#: forward and backward with an empty cache: 4 of them 2.1 s, 8 4.2 s, 16 10.2 s, 32 30.2 s); a longer
#: chain is cut into kernels of this many, each pass after the first reading its input from memory
MATH_CALLS = 8
_MATH = Path(__file__).parent.parent / "backends" / "numba_math.py"
_HEAD = ["import numpy as np", "from math import sqrt, fabs, pow, copysign",
         "from namedtensor.backends.numba_math import exp, expm1, tanh, log, log1p, exp32, expm1_32, tanh32, erf32, "
         "log32, log1p32, pow32, erf64, sin32, cos32, sin32_exact, cos32_exact, sin64, cos64, sin64_exact, cos64_exact, "
         "TRIG_LIMIT, powi32, powi64, powi64_exact, pow64, pow64_safe, pow64_exact, log2, exp2, log2_32, exp2_32",
         "from numpy import float32, float64", "from numba import njit",
         # the kernel's file name changes with numba_math.py, so Numba's cache never serves old machine code
         f"# numba_math {hashlib.sha1(_MATH.read_bytes()).hexdigest()[:16]}", ""]


def _jit(reassoc: bool) -> str:
    """A kernel's decorator.  Every kernel may contract a product and a sum into one fused multiply-add
    (one rounding instead of two, as C compilers do by default): the formulas' polynomials (erf, exp)
    then take about a third less time (GELU's backward over 2M float32 elements, 1.40 against 0.99 ms).
    ``reassoc``: a sum along the row may be reassociated too, which lets LLVM vectorize it."""
    return f"@njit(cache=True, nogil=True, error_model='numpy', fastmath={{'contract'{', ' + repr('reassoc') if reassoc else ''}}})"


def numba_available() -> bool:
    """Whether Numba can be imported; without it, says once (a warning) that fused kernels need it."""
    if "module" not in _NUMBA:
        try:
            import numba
        except ImportError:
            _NUMBA["module"] = None
            warnings.warn("nt.compile: fused CPU kernels need Numba (pip install 'named-tensors[jit]'); the "
                          "compiled graphs fuse nothing on the CPU meanwhile.", stacklevel=4)
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


#: a float literal of a formula's text that is not yet typed
_LITERAL = re.compile(r"(?<!float32\()(?<!float64\()(?<!float32\(-)(?<!float64\(-)(?<![\w.])"
                      r"(\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+)")
_FLOAT32_MATH = re.compile(r"\b(expm1|exp2|exp|tanh|erf|log1p|log2|log|pow|sin|cos)\(")
#: a statement's rounding, NumPy's in Numba (math's floor and ceil give ints): one instruction, vectorized
_ROUNDING = re.compile(r"\b(floor|ceil|trunc|rint)\(")
#: a float64 statement's sin, cos and erf, numba_math's vectorized ones there
_FLOAT64_MATH = re.compile(r"\b(sin|cos|erf)\(")
#: a statement's power by an integer (formulas.INTEGER_POWERS), numba_math's powi64 or powi32 there
_POWI = re.compile(r"\bpow\((\w+), float(32|64)\((-?\d+)\.0\)\)")
#: an operand of a formula's call: a name, a typed number, or a name less a number (pow's gradient)
_OPERAND = r"(?:\w+|float64\([^()]*\))(?: - \d+\.\d*)?"
#: a float64 statement's other powers, numba_math.pow64 there
_FLOAT64_POW = re.compile(rf"\bpow\(({_OPERAND}), ({_OPERAND})\)")
#: a statement's call of a function exact for some arguments only: sin32, cos32, sin64 or cos64 (an argument
#: below TRIG_LIMIT), powi64 (a power within 2^-POWI_SAFE and 2^POWI_SAFE) or pow64 (numba_math.pow64_safe),
#: with its argument and powi64's exponent or pow64's
_CHECKED = re.compile(rf"\b(sin32|cos32|sin64|cos64|powi64|pow64)\(({_OPERAND})(?:, (-?\d+(?=\))|{_OPERAND}))?\)")


def _float32_function(call: "re.Match") -> str:
    name = call.group(1)
    return f"{name}_32(" if name[-1].isdigit() else f"{name}32("  # expm1_32, log1p32


def _statement(var: str, dtype: str, expr: str) -> str:
    """``var = expr`` converted to ``dtype``.  A float32 statement computes in float32, as NumPy's float32
    loops do: its literals become float32 (Numba types a bare ``0.5`` as float64, which would widen the
    whole expression) and it calls numba_math's float32 functions (powi32 for a power by an integer); a
    float64 one calls numba_math's sin64, cos64, erf64, powi64 and pow64 (math's would call the C library per
    element)."""
    if dtype == "bool":
        return f"{var} = {expr}"
    expr = _ROUNDING.sub(r"np.\1(", expr)
    if dtype == "float32":
        expr = _FLOAT32_MATH.sub(_float32_function, _POWI.sub(_powi, _LITERAL.sub(r"float32(\1)", expr)))
    elif dtype == "float64":
        expr = _FLOAT64_POW.sub(r"pow64(\1, \2)", _POWI.sub(_powi, _FLOAT64_MATH.sub(r"\g<1>64(", expr)))
    return f"{var} = {dtype}({expr})"


def _chunk_tasks(shape: str, ndim: int, rows: List[str], chunk: str = str(_CHUNK)) -> List[str]:
    """The lines walking the tasks ``first`` to ``last`` over the rows of an array of shape ``shape`` (an
    expression) cut in chunks of ``chunk`` elements (a task is a chunk of a row; :func:`tasks` counts them):
    the chunk is ``c0:c0 + n`` of the row at ``rows``."""
    body = [f"    cols = {shape}[{ndim - 1}]",
            f"    chunks = (cols + {chunk} - 1) // {chunk}",
            "    for task in range(first, last):",
            "        r = task // chunks",
            f"        c0 = (task % chunks) * {chunk}",
            f"        n = min({chunk}, cols - c0)"]
    for d in range(ndim - 2, -1, -1):
        body += [f"        {rows[d]} = r % {shape}[{d}]", f"        r //= {shape}[{d}]"]
    return body


def _loops(names: List[str], bounds: List[str], depth: int) -> Tuple[List[str], str]:
    """Nested ``for`` lines over ``names`` in ``range(bounds)``, from indent ``depth``; and the indent
    inside them."""
    lines = [" " * (depth + 4 * d) + f"for {n} in range({b}):" for d, (n, b) in enumerate(zip(names, bounds))]
    return lines, " " * (depth + 4 * len(names))


#: an input's broadcast: for each of the output's dims, whether the input has size 1 there
Ones = Tuple[bool, ...]


def ones_of(shape: Sequence[int], ndim: int) -> Ones:
    """The broadcast of an input of ``shape`` into an output of ``ndim`` dims (at least 1)."""
    padded = (1,) * (ndim - len(shape)) + tuple(shape)
    return tuple(size == 1 for size in padded)


def _slices(pad: str, ins: List[str], ones: Sequence[Ones], index: List[str], last: str) -> List[str]:
    """The lines taking each input's part of the current row: the slice ``s_<name>`` at ``index`` (the
    variables of the dims before the last) and ``last`` (the last dim's slice), with 0 along the dims
    where the input has size 1, or, where its last dim has size 1, its one element ``<name>``."""
    lines = []
    for name, one in zip(ins, ones):
        at = [("0" if o else i) for o, i in zip(one, index)]
        if one[-1]:
            lines.append(f"{pad}{name} = a_{name}[{', '.join(at + ['0'])}]")
        else:
            lines.append(f"{pad}s_{name} = a_{name}[{', '.join(at + [last])}]")
    return lines


def _per_element(pad: str, ins: List[str], ones: Sequence[Ones], lines: List[formulas.Statement],
                 count: str) -> List[str]:
    """The innermost loop over ``count`` elements of the slices ``s_<name>``: each input's element (the
    inputs constant along the row were read by :func:`_slices`), then the statements."""
    return [f"{pad}for c in range({count}):", *(f"{pad}    {name} = s_{name}[c]" for name, one in zip(ins, ones)
                                                 if not one[-1]),
            *(f"{pad}    {_statement(*line)}" for line in lines)]


#: a formula's call of a numba_math function, a long dependent chain of instructions (an integer power's
#: few multiplications, powi, is not one)
_LONG_CALL = _FLOAT32_MATH
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _long_calls(expr: str) -> int:
    return len(_LONG_CALL.findall(expr)) - len(_POWI.findall(expr))


def _hoisted(lines: List[formulas.Statement]) -> List[formulas.Statement]:
    """``lines`` with every long call inside another's arguments (softplus's ``log1p(exp(-|x|))``) made a
    statement of its own before it, ``<var>_h<k>``, so that :func:`_stages` may put the two apart."""
    out = []
    for var, dtype, expr in lines:
        k = 0
        while dtype != "bool":
            inner = next((call for outer, _ in _long_call_nodes(expr)
                          for call, inside in _long_call_nodes(expr, outer.args) if not inside), None)
            if inner is None:
                break
            name, lo, hi = f"{var}_h{k}", inner.col_offset, inner.end_col_offset
            out.append((name, dtype, expr[lo:hi]))
            expr, k = expr[:lo] + name + expr[hi:], k + 1
        out.append((var, dtype, expr))
    return out


def _long_call_nodes(expr: str, within: Optional[list] = None) -> List[Tuple[ast.Call, bool]]:
    """The long calls of ``expr`` (of its nodes ``within`` where given), each with whether its own arguments
    hold another."""
    def long(node) -> bool:
        return (isinstance(node, ast.Call) and _LONG_CALL.match(expr, node.col_offset) is not None
                and _long_calls(expr[node.col_offset:node.end_col_offset]) > 0)

    roots = within if within is not None else [ast.parse(expr, mode="eval")]
    calls = [node for root in roots for node in ast.walk(root) if long(node)]
    return [(call, any(long(n) for a in call.args for n in ast.walk(a))) for call in calls]


def _stages(lines: List[formulas.Statement]) -> List[List[formulas.Statement]]:
    """``lines`` (no long call inside another's arguments: :func:`_hoisted`) cut into stages, in order, so
    that no long call of a stage takes an argument that depends on another long call of that stage.  One
    loop per element would otherwise make one long chain of dependent instructions per vector, more than
    the processor's reordering window holds, so that iterations no longer overlap: softplus over 2M
    float64 elements took 5.75 ms in one loop, 3.42 ms in two over each chunk (tanh of exp 6.62 against
    3.74; float32 softplus 2.74 against 1.47).  Independent calls share a stage (GELU's erf and exp: two
    loops were 8% slower)."""
    stage: Dict[str, int] = {}
    chained: Dict[str, bool] = {}  # depends on a long call within its own stage
    for var, _, expr in lines:
        deps = [n for n in _NAME.findall(expr) if n in stage]
        at = max((stage[d] for d in deps), default=0)
        calls = [call for call, _ in _long_call_nodes(expr)]
        args = {n.id for call in calls for a in call.args for n in ast.walk(a) if isinstance(n, ast.Name) and n.id in stage}
        if any(chained[d] and stage[d] == at for d in args):
            at += 1
        stage[var] = at
        chained[var] = bool(calls) or any(chained[d] and stage[d] == at for d in deps)
    count = max(stage.values(), default=0) + 1
    return [[line for line in lines if stage[line[0]] == k] for k in range(count)]


def _live(lines: List[formulas.Statement], wanted: Sequence[str]) -> List[formulas.Statement]:
    """The statements that ``wanted`` (texts) read, directly or not.  In one loop LLVM drops the others (a
    backward's recomputed result that no gradient reads); across stages a buffer's store would keep them."""
    needed = {n for text in wanted for n in _NAME.findall(text)}
    kept = []
    for var, dtype, expr in reversed(lines):
        if var in needed:
            kept.append((var, dtype, expr))
            needed.update(_NAME.findall(expr))
    return kept[::-1]


def _staged(pad: str, ins: List[str], ones: Sequence[Ones], lines: List[formulas.Statement],
            wanted: Sequence[str]) -> Tuple[List[str], List[str]]:
    """:func:`_per_element` over a chunk of ``n`` elements cut by :func:`_stages`: a loop per stage, the
    values a later stage (or ``wanted``, what the caller's lines read after the last) takes from an
    earlier one passing through chunk buffers ``w_<var>``; and the lines allocating those buffers (none
    for one stage: a later stage always reads an earlier one's value)."""
    stages = _stages(_live(_hoisted(lines), wanted))
    if len(stages) == 1:
        return _per_element(pad, ins, ones, lines, "n"), []
    where = {var: k for k, stage in enumerate(stages) for var, _, _ in stage}
    dtype = {var: d for stage in stages for var, d, _ in stage}
    readers = [[n for _, _, expr in stage for n in _NAME.findall(expr)] for stage in stages]
    readers[-1] += [n for text in wanted for n in _NAME.findall(text)]
    passed = [var for var in where if any(var in readers[k] for k in range(where[var] + 1, len(stages)))]
    loops = []
    for k, stage in enumerate(stages):
        loop = _per_element(pad, ins, ones, stage, "n")
        takes = [var for var in passed if where[var] < k and var in readers[k]]
        loop[1:1] = [f"{pad}    {var} = w_{var}[c]" for var in takes]
        loops += loop + [f"{pad}    w_{var}[c] = {var}" for var in passed if where[var] == k]
    buffers = [f"    w_{var} = np.empty({_CHUNK}, np.{'bool_' if dtype[var] == 'bool' else dtype[var]})" for var in passed]
    return loops, buffers


def _source(ins: List[str], ones: Sequence[Ones], outs: List[str], lines: List[formulas.Statement],
            results: List[str], ndim: int, sums: Sequence[Tuple[str, str, Ones, str]] = ()) -> str:
    """A Numba function ``kernel(first, last, *arrays)`` of the arrays ``a_<name>`` of ``ins`` (broadcast
    as ``ones`` says) then ``outs`` (of the output's shape), computing ``lines`` per element (an input's
    element is its name) and writing ``results[k]`` into the array of ``outs[k]``, for the tasks ``first``
    to ``last``.

    ``sums``: ``(name, result, ones, dtype)`` of results summed into a smaller array ``a_<name>`` instead
    (the gradient of a broadcast input, shaped as ``ones`` says, with a leading dim of one row per part of
    the work): the kernel then takes ``kernel(first, last, part, *arrays, *sum arrays)`` and adds into row
    ``part``, so that the parts run at once without sharing a row.  The sums are in the input's
    ``dtype``, as NumPy sums a gradient over rows: float64 sums would cut a float32 chain's vector lanes
    by half."""
    lead = [f"i{d}" for d in range(ndim - 1)]
    body = _chunk_tasks(f"a_{outs[0]}.shape" if outs else "shape", ndim, lead)
    body += _slices("        ", ins, ones, lead, "c0:c0 + n")
    body += [f"        s_{name} = a_{name}[{', '.join(lead + ['c0:c0 + n'])}]" for name in outs]
    after = []  # the row totals of the sums along a last dim of size 1, added once the row is done
    for name, _, one, dtype in sums:
        at = ", ".join(["part"] + [("0" if o else i) for o, i in zip(one, lead)])
        if one[-1]:
            body.append(f"        t_{name} = {dtype}(0.0)")
            after.append(f"        a_{name}[{at}, 0] += t_{name}")
        else:
            body.append(f"        s_{name} = a_{name}[{at}, c0:c0 + n]")
    loop = _per_element("        ", ins, ones, lines, "n")
    checked = _checked_lines(loop)
    if not checked:  # an exact pass does the chunk again in one loop
        loop, buffers = _staged("        ", ins, ones, lines, list(results) + [r for _, r, _, _ in sums])
        body = buffers + body
    loop += [f"            s_{o}[c] = {r}" for o, r in zip(outs, results)]
    adds = [f"t_{name} += " if one[-1] else f"s_{name}[c] += " for name, _, one, _ in sums]
    if checked:
        # the chunk's terms of the sums go to buffers of its own first, which a second pass writes again
        loop += [f"            q_{name}[c] = {r}" for name, r, _, _ in sums]
        body = [f"    q_{name} = np.empty({_CHUNK}, {dtype})" for name, _, _, dtype in sums] + body
    else:
        loop += [f"            {add}{r}" for add, (_, r, _, _) in zip(adds, sums)]
    body += _exact_pass(loop)
    if checked and sums:
        body += ["        for c in range(n):"] + [f"            {add}q_{name}[c]" for add, (name, _, _, _) in zip(adds, sums)]
    body += after
    args = ", ".join(["first", "last"] + (["part"] if sums else []) + [f"a_{name}" for name in ins + outs]
                     + [f"a_{name}" for name, _, _, _ in sums] + ([] if outs else ["shape"]))
    # a row's sum vectorizes only if it may be reassociated, as the reduction kernels' sums
    return "\n".join(_HEAD + [_jit(reassoc=any(one[-1] for _, _, one, _ in sums)), f"def kernel({args}):", *body, ""])


def _powi(call: "re.Match") -> str:
    n = int(call.group(3))
    return f"powi{call.group(2)}({call.group(1)}, {n})" if formulas.integer_power(float(n)) else call.group(0)


def _checked_lines(lines: List[str]) -> bool:
    return any(_CHECKED.search(line) for line in lines)


def _outside(function: str, arg: str, n: str) -> str:
    """The test that ``function`` (a match of _CHECKED, ``n`` its exponent or '') is not exact at ``arg``: a
    NaN is outside a power's range (and sin's NaN is exact), 0 inside a positive power's."""
    if function == "pow64":
        return f"not pow64_safe({arg}, {n})"
    if not n:
        return f"abs({arg}) >= TRIG_LIMIT"
    from ..backends.numba_math import POWI_SAFE  # with Numba, which kernels need

    reach = POWI_SAFE / abs(int(n))
    zero = f" or {arg} == 0.0" if int(n) > 0 else ""  # powi64's own case
    return f"not ({2.0 ** -reach!r} <= abs({arg}) <= {2.0 ** reach!r}{zero})"


def _exact_pass(loop: List[str], pad: str = "        ", reset: Sequence[str] = ()) -> List[str]:
    """``loop`` (a loop at indent ``pad`` over a chunk's elements, writing its outputs or adding into
    totals), and where it calls functions exact for some arguments only (_CHECKED: sin and cos below
    TRIG_LIMIT, a float64 integer power that stays within 2^-POWI_SAFE and 2^POWI_SAFE), a count of the
    other arguments, and the loop done again with the C library's functions when there is one (rare: a sin
    of a million, a power that overflows), after the ``reset`` statements (a total back to 0)."""
    tests = sorted({_outside(*call) for line in loop for call in _CHECKED.findall(line)})
    if not tests:
        return loop
    again = [_CHECKED.sub(lambda call: f"{call.group(1)}_exact({', '.join(a for a in call.groups()[1:] if a)})", line)
             for line in loop]
    return ([f"{pad}far = 0"] + loop + [f"{pad}    far += {test}" for test in tests]
            + [f"{pad}if far:"] + [f"{pad}    {r}" for r in reset] + ["    " + line for line in again])


def _reduce_source(ins: List[str], ones: Sequence[Ones], lines: List[formulas.Statement], result: str, dtype: str,
                   ndim: int, axes: Tuple[int, ...], mean: bool) -> str:
    """``kernel(first, last, *input arrays, out, shape)``: for each output element ``first`` to ``last``
    (the flat index over the kept dims), the sum (or mean) of ``result`` over ``axes``, the last dim among
    them, accumulated in float64; the last dim is the innermost loop.  Reassociating the sum lets LLVM
    vectorize it."""
    kept = [d for d in range(ndim) if d not in axes]
    index = [f"i{d}" if d in kept else f"j{d}" for d in range(ndim - 1)]
    body = ["    for task in range(first, last):", "        r = task"]
    for d in reversed(kept):
        body += [f"        i{d} = r % shape[{d}]", f"        r //= shape[{d}]"]
    body.append("        acc = 0.0")
    loops, pad = _loops([f"j{d}" for d in axes[:-1]], [f"shape[{d}]" for d in axes[:-1]], 8)
    body += loops
    last = f"shape[{ndim - 1}]"
    loop = _per_element(pad, ins, ones, lines, last)
    checked = _checked_lines(loop)
    staged, buffers = ([], []) if checked else _staged(pad + "    ", ins, ones, lines, [result])
    if checked:  # the row's total apart, which a second pass makes again
        body += _slices(pad, ins, ones, index, ":")
        body += [f"{pad}row = 0.0", *_exact_pass(loop + [f"{pad}    row += {result}"], pad, ["row = 0.0"]),
                 f"{pad}acc += row"]
    elif buffers:  # stages: the row in chunks, each a loop per stage
        body += [f"{pad}for c0 in range(0, {last}, {_CHUNK}):", f"{pad}    n = min({_CHUNK}, {last} - c0)",
                 *_slices(pad + "    ", ins, ones, index, "c0:c0 + n")]
        body = buffers + body + staged + [f"{pad}        acc += {result}"]
    else:
        body += _slices(pad, ins, ones, index, ":")
        body += loop + [f"{pad}    acc += {result}"]
    if mean:
        count = " * ".join(f"shape[{d}]" for d in axes)
        body.append(f"        acc = acc / ({count})")
    body.append(f"        a_out[task] = {dtype}(acc)")
    args = ", ".join(["first", "last"] + [f"a_{name}" for name in ins] + ["a_out", "shape"])
    return "\n".join(_HEAD + [_jit(reassoc=True), f"def kernel({args}):", *body, ""])


def _columns_source(ins: List[str], ones: Sequence[Ones], lines: List[formulas.Statement], result: str, ndim: int,
                    axes: Tuple[int, ...]) -> str:
    """``kernel(first, last, *input arrays, acc, shape)``: adds ``result`` over ``axes`` (the last dim kept)
    into the float64 array ``acc`` of the kept dims' shape, for the tasks ``first`` to ``last`` (chunks of
    ``acc``'s rows, as :func:`_source` walks an output); each task adds the chunk of every index of the
    reduced dims in turn into its chunk of ``acc``, which stays in the cache."""
    kept = [d for d in range(ndim) if d not in axes]
    rows = [f"i{d}" for d in kept[:-1]]
    body = _chunk_tasks("a_acc.shape", len(kept), rows)
    body.append(f"        s_acc = a_acc[{', '.join(rows + ['c0:c0 + n'])}]")
    loops, pad = _loops([f"j{d}" for d in axes], [f"shape[{d}]" for d in axes], 8)
    body += loops
    body += _slices(pad, ins, ones, [f"i{d}" if d in kept else f"j{d}" for d in range(ndim - 1)], "c0:c0 + n")
    loop = _per_element(pad, ins, ones, lines, "n")
    if _checked_lines(loop):  # the chunk's terms to a buffer first, which a second pass writes again
        body = [f"    q = np.empty({_CHUNK}, np.float64)"] + body
        body += _exact_pass(loop + [f"{pad}    q[c] = {result}"], pad)
        body += [f"{pad}for c in range(n):", f"{pad}    s_acc[c] += q[c]"]
    else:
        loop, buffers = _staged(pad, ins, ones, lines, [result])
        body = buffers + body + loop + [f"{pad}    s_acc[c] += {result}"]
    args = ", ".join(["first", "last"] + [f"a_{name}" for name in ins] + ["a_acc", "shape"])
    return "\n".join(_HEAD + [_jit(reassoc=False), f"def kernel({args}):", *body, ""])


def _reducing_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """The forward kernel of a chain that ends in a sum or mean: over dims that include the last one, one
    output element per task (:func:`_reduce_source`); otherwise chunks of the kept dims' rows per task
    (:func:`_columns_source`)."""
    part, kind, axes = formulas.split_reduction(chain)
    in_dtypes = [v.dtype for v in inputs]
    lines, (result,) = formulas.forward(part, in_dtypes)
    full = formulas.broadcast_shape([v.shape for v in inputs]) or (1,)
    axes = formulas.reduced_axes(axes, len(full))
    ins = [f"x{n}" for n in range(len(inputs))]
    ones = [ones_of(v.shape, len(full)) for v in inputs]
    out_dtype = _dtypes.as_dtype(outputs[0].dtype)
    shape = tuple(outputs[0].shape)
    size = math.prod(full[a] for a in axes)
    work = math.prod(full) * formulas.work(part)
    kept = tuple(n for d, n in enumerate(full) if d not in axes)
    if len(full) - 1 not in axes:
        module = _load(_columns_source(ins, ones, lines, result, len(full), axes))
        count = tasks(kept)
        big = work >= _PARALLEL_FROM and count > 1

        def kernel(B, arrays):
            acc = B.zeros(kept, dtype=B.native(_dtypes.float64))
            split(min(get_num_threads(), count) if big else 1, count, module.kernel, *_operands(B, arrays, full),
                  acc, full)
            if kind == "mean":
                acc = B.divide(acc, float(size), out=acc)
            return (B.reshape(B.astype(acc, B.native(out_dtype)), shape),)

        return kernel
    if math.prod(kept) == 1 and len(axes) > 1:
        return _reduce_in_rows(ins, ones, lines, result, full, axes, kind, size, out_dtype, shape, work)
    module = _load(_reduce_source(ins, ones, lines, result, outputs[0].dtype, len(full), axes, kind == "mean"))
    count = math.prod(kept)
    big = work >= _PARALLEL_FROM and count > 1

    def kernel(B, arrays):
        out = B.empty((count,), dtype=B.native(out_dtype))
        split(min(get_num_threads(), count) if big else 1, count, module.kernel, *_operands(B, arrays, full), out,
              full)
        return (B.reshape(out, shape),)

    return kernel


def _reduce_in_rows(ins, ones, lines, result, full, axes, kind: str, size: int, out_dtype, shape, work: int) -> Callable:
    """The kernel of a chain reduced to one number (a loss) over two dims or more: each task reduces one
    index of the first reduced dim into a float64 partial, so that the tasks are shared among threads
    (one task would run on one), and the partials are added up after."""
    rows = full[axes[0]]
    module = _load(_reduce_source(ins, ones, lines, result, "float64", len(full), axes[1:], False))
    big = work >= _PARALLEL_FROM and rows > 1

    def kernel(B, arrays):
        partial = B.empty((rows,), dtype=B.native(_dtypes.float64))
        split(min(get_num_threads(), rows) if big else 1, rows, module.kernel, *_operands(B, arrays, full), partial, full)
        total = B.sum(partial)
        if kind == "mean":
            total = B.divide(total, float(size))
        return (B.reshape(B.astype(total, B.native(out_dtype)), shape),)

    return kernel


def _reducing_backward(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """The backward kernel of a chain that ends in a reduction: the output's gradient spread back over the
    reduced dims (divided by their size for a mean), then the elementwise part's backward."""
    part, kind, axes = formulas.split_reduction(chain)
    full = formulas.broadcast_shape([v.shape for v in inputs]) or (1,)
    axes = formulas.reduced_axes(axes, len(full))
    spread = tuple(1 if d in axes else n for d, n in enumerate(full))
    scale = formulas.mean_scale(math.prod(full[a] for a in axes)) if kind == "mean" else None
    inner = backward_kernel(part, inputs, [Value(-1, (None,) * len(full), full, outputs[0].dtype, "op")], spread)
    if inner is None:
        return None

    def kernel(B, arrays, out_grads):
        g = B.reshape(out_grads[0], spread)
        return inner(B, arrays, [g if scale is None else B.multiply(g, scale)])

    return kernel


def _softmax_source(ins: List[str], ones: Sequence[Ones], lines: List[formulas.Statement], result: str, dtype: str,
                    ndim: int, log: bool) -> str:
    """``kernel(first, last, *input arrays, out)``: for the rows ``first`` to ``last`` of the output (the
    flat index over the dims before the last), ``result`` along the row written into ``out``, then its
    softmax (``log``: log-softmax) over the row in place, in the row's dtype as NumPy computes it: shifted
    by the row's max (a NaN wins), ``e / sum(e)`` or ``z - log(sum(exp(z)))``."""
    lead = [f"i{d}" for d in range(ndim - 1)]
    typed = (lambda text: f"float32({text})") if dtype == "float32" else (lambda text: f"float64({text})")
    exp, log_ = ("exp32", "log32") if dtype == "float32" else ("exp", "log")
    body = [f"    cols = a_out.shape[{ndim - 1}]", "    for task in range(first, last):", "        r = task"]
    for d in range(ndim - 2, -1, -1):
        body += [f"        i{d} = r % a_out.shape[{d}]", f"        r //= a_out.shape[{d}]"]
    body += _slices("        ", ins, ones, lead, ":")
    body.append(f"        s_out = a_out[{', '.join(lead + [':'])}]")
    start = [f"top = {typed('-np.inf')}", "nan = False"]
    body += ["        " + line for line in start]
    # NumPy's max: a NaN wins (a flag beside max() keeps the loop vectorized, a select would not)
    loop = _per_element("        ", ins, ones, lines, "cols") + [
        f"            v = {result}", "            s_out[c] = v", "            top = max(top, v)", "            nan |= v != v"]
    body += _exact_pass(loop, "        ", start)  # the row's values, its max and its NaN flag made again
    body += ["        if nan:", f"            top = {typed('np.nan')}"]
    body += [f"        total = {typed('0.0')}", "        for c in range(cols):",
             f"            e = {exp}(s_out[c] - top)", *([] if log else ["            s_out[c] = e"]),
             "            total += e"]
    if log:
        body += [f"        shift = top + {log_}(total)", "        for c in range(cols):",
                 "            s_out[c] = s_out[c] - shift"]
    else:
        body += ["        for c in range(cols):", "            s_out[c] = s_out[c] / total"]
    args = ", ".join(["first", "last"] + [f"a_{name}" for name in ins] + ["a_out"])
    # the row's sum vectorizes only if it may be reassociated, as the reduction kernels' sums
    return "\n".join(_HEAD + [_jit(reassoc=True), f"def kernel({args}):", *body, ""])


def _softmax_columns_source(ins: List[str], ones: Sequence[Ones], lines: List[formulas.Statement], result: str,
                            dtype: str, ndim: int, axis: int, log: bool) -> str:
    """``kernel(first, last, *input arrays, out, kept, chunk)``: a softmax (``log``: log-softmax) along dim
    ``axis``, not the last, for the tasks ``first`` to ``last`` over ``kept`` (the output's shape without
    that dim) cut in chunks of ``chunk`` along the last dim, each a column per element of the chunk:
    ``result`` of every index along ``axis`` written into ``out``, with each column's max (a NaN wins), then
    the exponentials and their sums, then the division (or the shift) in place, in the output's dtype, all
    while the task's ``size x chunk`` values are in the cache.  The steps are :func:`_softmax_source`'s
    over columns instead of a row, vectorized across the chunk."""
    kept = [d for d in range(ndim) if d != axis]
    index = ["j" if d == axis else f"i{d}" for d in range(ndim - 1)]
    typed = (lambda text: f"float32({text})") if dtype == "float32" else (lambda text: f"float64({text})")
    exp, log_ = ("exp32", "log32") if dtype == "float32" else ("exp", "log")
    body = [f"    top = np.empty(chunk, np.{dtype})", f"    total = np.empty(chunk, np.{dtype})",
            "    nan = np.empty(chunk, np.bool_)", f"    size = a_out.shape[{axis}]"]
    body += _chunk_tasks("kept", len(kept), [f"i{d}" for d in kept[:-1]], "chunk")
    body += ["        for c in range(n):", f"            top[c] = {typed('-np.inf')}", "            nan[c] = False",
             f"            total[c] = {typed('0.0')}"]
    column = f"        s_out = a_out[{', '.join(index + ['c0:c0 + n'])}]"
    pad = "            "
    body += ["        for j in range(size):", "    " + column]
    body += _slices(pad, ins, ones, index, "c0:c0 + n")
    body += _exact_pass(_per_element(pad, ins, ones, lines, "n") + [f"{pad}    s_out[c] = {result}"], pad)
    # the max apart, once the values are exact: a NaN flag beside max() keeps the loop vectorized
    body += [f"{pad}for c in range(n):", f"{pad}    v = s_out[c]", f"{pad}    top[c] = max(top[c], v)",
             f"{pad}    nan[c] |= v != v"]
    body += ["        for c in range(n):", f"            top[c] = {typed('np.nan')} if nan[c] else top[c]"]
    body += ["        for j in range(size):", "    " + column, f"{pad}for c in range(n):",
             f"{pad}    e = {exp}(s_out[c] - top[c])", *([] if log else [f"{pad}    s_out[c] = e"]), f"{pad}    total[c] += e"]
    if log:
        body += ["        for c in range(n):", f"            top[c] = top[c] + {log_}(total[c])"]
    body += ["        for j in range(size):", "    " + column, f"{pad}for c in range(n):",
             f"{pad}    s_out[c] = s_out[c] - top[c]" if log else f"{pad}    s_out[c] = s_out[c] / total[c]"]
    args = ", ".join(["first", "last"] + [f"a_{name}" for name in ins] + ["a_out", "kept", "chunk"])
    return "\n".join(_HEAD + [_jit(reassoc=False), f"def kernel({args}):", *body, ""])


#: bytes of a column softmax's task (its ``size x chunk`` values): three passes over them stay in L2
_COLUMNS_BYTES = 1 << 19


def _softmax_forward(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Callable:
    """The forward kernel of a chain that ends in a softmax or log-softmax: along the last dim one pass over
    the inputs per row (:func:`_softmax_source`), along another per chunk of columns
    (:func:`_softmax_columns_source`), the rows or chunks shared among threads for enough work."""
    part, kind, (axis,) = formulas.split_reduction(chain)
    lines, (result,) = formulas.forward(part, [v.dtype for v in inputs])
    shape = tuple(outputs[0].shape)
    axis %= len(shape)
    dtype = outputs[0].dtype
    ins, ones = [f"x{n}" for n in range(len(inputs))], [ones_of(v.shape, len(shape)) for v in inputs]
    big = math.prod(shape) * (formulas.work(part) + 20) >= _PARALLEL_FROM  # + the exponential's 20
    native = _dtypes.as_dtype(dtype)
    if axis == len(shape) - 1:
        kernel = _load(_softmax_source(ins, ones, lines, result, dtype, len(shape), kind == "log_softmax")).kernel
        extra, count = (), math.prod(shape[:-1])
    else:
        kernel = _load(_softmax_columns_source(ins, ones, lines, result, dtype, len(shape), axis,
                                               kind == "log_softmax")).kernel
        kept = tuple(n for d, n in enumerate(shape) if d != axis)
        chunk = max(16, min(_CHUNK, _COLUMNS_BYTES // (max(shape[axis], 1) * native.itemsize)))
        extra, count = (kept, chunk), math.prod(kept[:-1]) * -(-kept[-1] // chunk)

    def run(B, arrays):
        out = B.empty(shape, dtype=B.native(native))
        split(min(get_num_threads(), count) if big else 1, count, kernel, *_operands(B, arrays, shape), out, *extra)
        return (out,)

    return run


def _softmax_backward(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """The backward kernel of a chain that ends in a softmax, from the inputs and the saved output ``y``
    (the fused op saves it, as the eager softmax does): the elementwise part's backward kernel with the
    gradient of its result computed per element (formulas.softmax_seed) from the output's gradient and
    one number per row."""
    part, kind, (axis,) = formulas.split_reduction(chain)
    out = outputs[0]
    ndim = len(out.shape)
    axis %= ndim
    whole, row = (False,) * ndim, tuple(d == axis for d in range(ndim))
    inner = backward_kernel(part, inputs, [out], seed=(["y", "g", "d"], [whole, whole, row],
                                                        formulas.softmax_seed(kind, out.dtype)))
    if inner is None:
        return None

    def kernel(B, arrays, out_grads):
        y, g = arrays[-1], out_grads[0]
        return inner(B, arrays[:-1], [y, g, formulas.softmax_row_term(B, kind, g, y, axis)])

    return kernel


def tasks(shape) -> int:
    """How many tasks (chunks of rows) a kernel's loop has for an output of ``shape`` (at least 1-D)."""
    return math.prod(shape[:-1]) * -(-shape[-1] // _CHUNK)


#: one thread at a time writes and imports a kernel's module: threads compiling the same function (or
#: two functions with a chain in common) would otherwise write one file side by side and import it twice
_loading = threading.Lock()


def _load(source: str):
    digest = hashlib.sha1(source.encode()).hexdigest()[:20]
    name = f"nt_kernel_{digest}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    with _loading:
        module = sys.modules.get(name)
        if module is not None:
            return module
        path = cache_dir() / f"{name}.py"
        if not path.exists() or path.read_text() != source:  # a file cut short (a process killed) is written again
            tmp = path.with_suffix(f".{os.getpid()}.tmp")  # each process its own; the lock serves its threads
            tmp.write_text(source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
        return module


def _operands(B, arrays, full) -> list:
    """``arrays`` as a kernel takes them: row-major, with size-1 dims in front up to ``full``'s rank."""
    xs = []
    for a in arrays:
        a = B.as_row_major(a)
        if len(a.shape) != len(full):
            a = B.reshape(a, (1,) * (len(full) - len(a.shape)) + tuple(a.shape))
        xs.append(a)
    return xs


def _runner(module, shape, out_dtypes: List[str], work: int) -> Callable:
    """``run(B, arrays) -> outputs`` calling the module's kernel on ``arrays`` (see :func:`_operands`)
    for an output of ``shape``: on one thread for little work, else on ``nt.get_num_threads()`` (the
    kernel releases the GIL)."""
    kernel = module.kernel
    full = shape if shape else (1,)
    dtypes = [_dtypes.as_dtype(d) for d in out_dtypes]
    count = tasks(full)
    big = math.prod(full) * work >= _PARALLEL_FROM

    natives: Dict[Any, list] = {}  # by backend: the output dtypes as its arrays spell them

    def output_dtypes(B) -> list:
        native = natives[B] = [B.native(d) for d in dtypes]
        return native

    if len(dtypes) == 1 and full == shape and not big:
        # the call of a small chain, in the fewest Python steps (a compiled call of one costs a few
        # microseconds in all: nt.compile's loop benchmark)
        def run_one(B, arrays):
            out = B.empty(full, dtype=(natives.get(B) or output_dtypes(B))[0])
            kernel(0, count, *_operands(B, arrays, full), out)
            return (out,)

        return run_one

    def run(B, arrays):
        xs = _operands(B, arrays, full)
        outs = [B.empty(full, dtype=d) for d in natives.get(B) or output_dtypes(B)]
        if big:
            split(min(get_num_threads(), count), count, kernel, *xs, *outs)
        else:
            kernel(0, count, *xs, *outs)
        return tuple(outs) if full == shape else tuple([B.reshape(o, shape) for o in outs])

    return run


def forward_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value]) -> Optional[Callable]:
    """``kernel(B, arrays) -> outputs`` computing ``chain`` on the NumPy backend; None without Numba."""
    if not numba_available():
        return None
    kind = formulas.split_reduction(chain)[1]
    if kind in formulas.SOFTMAXES.values():
        return _softmax_forward(chain, inputs, outputs)
    if kind is not None:
        return _reducing_kernel(chain, inputs, outputs)
    in_dtypes = [v.dtype for v in inputs]
    lines, results = formulas.forward(chain, in_dtypes)
    shape = tuple(outputs[0].shape)
    ndim = max(len(shape), 1)
    ins, outs = [f"x{k}" for k in range(len(inputs))], [f"o{k}" for k in range(len(outputs))]
    module = _load(_source(ins, [ones_of(v.shape, ndim) for v in inputs], outs, lines, results, ndim))
    return _runner(module, shape, [v.dtype for v in outputs], formulas.work(chain))


def backward_kernel(chain: Chain, inputs: Sequence[Value], outputs: Sequence[Value],
                    grad_shape: Optional[Sequence[int]] = None,
                    seed: Optional[Tuple[List[str], List[Ones], formulas.Statement]] = None) -> Optional[Callable]:
    """``kernel(B, input arrays, output gradients) -> one gradient per input`` (at the outputs' shape;
    None for an input without one) on the NumPy backend, or None as for :func:`forward_kernel`.
    ``grad_shape``: the output gradients' shape where they broadcast (by default the outputs').  ``seed``:
    the output's gradient ``go0`` computed per element by a statement from arrays of its own (their names
    and broadcasts), which the kernel then takes in the output gradients' place."""
    if not numba_available():
        return None
    kind = formulas.split_reduction(chain)[1]
    if kind in formulas.SOFTMAXES.values():
        return _softmax_backward(chain, inputs, outputs)
    if kind is not None:
        return _reducing_backward(chain, inputs, outputs)
    in_dtypes = [v.dtype for v in inputs]
    lines, grads = formulas.backward(chain, in_dtypes)
    wanted = [k for k, g in enumerate(grads) if g is not None]
    if not wanted:
        return None
    shape = tuple(outputs[0].shape)
    ndim = max(len(shape), 1)
    full = shape or (1,)
    ins = [f"x{k}" for k in range(len(inputs))]
    ones = [ones_of(v.shape, ndim) for v in inputs]
    if seed is None:
        ins += [f"go{k}" for k in range(len(outputs))]
        ones += [ones_of(grad_shape or shape, ndim)] * len(outputs)
    else:
        ins += seed[0]
        ones += seed[1]
        lines = [seed[2], *lines]
    # inputs whose gradients are one formula (an add's two operands, as the residual stream and the
    # block's output before a loss) get one array, written once, as the add's eager backward hands
    # both the same gradient (the engine copies a buffer it has already handed out before keeping it)
    formula = {var: (dtype, expr) for var, dtype, expr in lines}
    first: Dict[tuple, int] = {}
    same = {k: first.setdefault((formula[grads[k]], tuple(ones[k]), tuple(inputs[k].shape)), k) for k in wanted}
    wanted = [k for k in wanted if same[k] == k]
    # a broadcast input's gradient is summed in the kernel, never stored at the output's shape
    summed = [k for k in wanted if any(o and n > 1 for o, n in zip(ones[k], full))]
    whole = [k for k in wanted if k not in summed]
    module = _load(_source(ins, ones, [f"o{k}" for k in whole], lines, [grads[k] for k in whole], ndim,
                           [(f"r{k}", grads[k], ones[k], in_dtypes[k]) for k in summed]))
    if not summed:
        run = _runner(module, shape, [in_dtypes[k] for k in whole], 2 * formulas.work(chain))

        def kernel(B, arrays, out_grads):
            made = dict(zip(whole, run(B, [*arrays, *out_grads])))
            return [made[same[k]] if k in same else None for k in range(len(grads))]

        return kernel
    run = _summing_runner(module, full, [in_dtypes[k] for k in whole],
                          [(tuple(1 if o else n for o, n in zip(ones[k], full)), tuple(inputs[k].shape), in_dtypes[k])
                           for k in summed], 2 * formulas.work(chain))

    def kernel(B, arrays, out_grads):
        outs, sums = run(B, [*arrays, *out_grads])
        made = dict(zip(whole, [o if full == shape else B.reshape(o, shape) for o in outs]))
        made.update(zip(summed, sums))
        return [made[same[k]] if k in same else None for k in range(len(grads))]

    return kernel


def _summing_runner(module, full, out_dtypes: List[str], sums: List[Tuple[tuple, tuple, str]], work: int) -> Callable:
    """``run(B, arrays) -> (outputs, sums)`` for a kernel with summed results (:func:`_source`'s ``sums``,
    each given as its shape among the output's dims, its own shape and its dtype): the tasks are cut in
    parts, each adding into its own row of every sum, and the rows are added up after."""
    kernel = module.kernel
    dtypes = [_dtypes.as_dtype(d) for d in out_dtypes]
    count = tasks(full)
    parts = (lambda: min(get_num_threads(), count)) if math.prod(full) * work >= _PARALLEL_FROM else (lambda: 1)

    def run(B, arrays):
        xs = _operands(B, arrays, full)
        outs = [B.empty(full, dtype=B.native(d)) for d in dtypes]
        n = parts()
        accs = [B.zeros((n,) + padded, dtype=B.native(_dtypes.as_dtype(dtype))) for padded, _, dtype in sums]
        tail = [] if outs else [full]
        split_by_part(n, count, lambda p, first, last: kernel(first, last, p, *xs, *outs, *accs, *tail))
        totals = [B.reshape(acc[0] if n == 1 else B.sum(acc, axis=0), shape) for acc, (_, shape, _) in zip(accs, sums)]
        return outs, totals

    return run
