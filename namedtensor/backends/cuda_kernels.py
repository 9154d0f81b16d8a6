"""CuPy launchers of the fused CUDA kernels: what :class:`~namedtensor.backends.cupy_backend.CupyBackend`
calls for float16 and float32 arrays.

Each public function has the signature of the backend hook of the same name
(:class:`~namedtensor.backends.base.Backend`, minus ``self``) and takes and returns CuPy arrays:
``softmax``/``softmax_backward``, ``cross_entropy``/``cross_entropy_backward``,
``norm_rows``/``norm_rows_backward`` (LayerNorm and RMSNorm) and ``add_norm_rows``/``add_norm_rows_backward``
(a residual add joined to the norm), ``gelu``/``gelu_backward``,
``adamw_`` (in place, one launch per call) and ``attention``/``attention_backward``.  Their numerics
follow :mod:`namedtensor.backends.kernel_reference` (the same algorithms in NumPy): float32
accumulation, float16 storage.

The CUDA C sources are the ``.cu`` files in ``backends/cuda/`` (their comments give the algorithms,
tile sizes and thread layouts); GELU is two CuPy ``ElementwiseKernel`` bodies (:data:`ELEMENTWISE`).
Kernels are C++ templates on the element type (and flags, and the attention head dim), compiled by
NVRTC through ``cupy.RawModule`` with ``name_expressions`` (:func:`name_expressions` lists them):
one module per source file, device and element type, made on first use and kept; CuPy caches the
binaries on disk.  ``common.cuh`` is pasted into each source before compiling, so the source text
(CuPy's cache key) covers it.

CuPy is imported lazily (this module imports without it).  An array these kernels do not take
(dtype other than float16/float32, a head dim above 128, too little shared memory) raises
:class:`KernelUnsupported`, a ``TypeError``: the backend then runs the generic code.  Inputs that are
not C-contiguous are copied to contiguous ones; ``adamw_`` updates in place, so it needs contiguous
arrays of one dtype.

Differences from the generic hooks, by design: ``norm_rows`` returns its statistics (``mean``,
``rstd``) as float32 for float16 input too (``norm_rows_backward`` takes any float dtype);
``attention``'s ``lse`` is float32 (as specified); ``attention_backward`` accumulates ``dq`` with
float32 atomics, so its float32 result may differ in the last bits from run to run.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

_DIR = Path(__file__).with_name("cuda")
_CTYPES = {"float32": "float", "float16": "__half"}

#: template kernels of each source, ``{T}`` the element type; ``{B}``/``{B2}`` run over false/true and
#: ``{HD}`` over the attention head dims (every combination is instantiated)
TEMPLATES: Dict[str, Tuple[str, ...]] = {
    "softmax.cu": (
        "softmax_rows<{T}, {B}, {B2}>",
        "softmax_rows_bwd<{T}, {B}, {B2}>",
        "softmax_cols<{T}, {B}>",
        "softmax_cols_bwd<{T}, {B}>",
    ),
    "cross_entropy.cu": ("ce_fwd<{T}, {B}>", "ce_bwd<{T}>"),
    "norm.cu": ("norm_fwd<{T}, {B}, {B2}>", "norm_bwd<{T}, {B}, {B2}>", "norm_param_partial<{T}, {B}>"),
    "adam.cu": ("adam_multi<{T}>",),
    "attention.cu": ("attn_fwd<{T}, {HD}>", "attn_bwd<{T}, {HD}>", "attn_bwd_dot<{T}>"),
}

#: the attention kernels' padded head dims: D and Dv are padded up to the first that holds both
HEAD_DIMS = (32, 64, 128)

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

#: CuPy ElementwiseKernels: name -> (in_params, out_params, body); math in float, T float16/float32.
#: GELU is exact: x * Phi(x), Phi(x) = normcdff(x) = (1 + erf(x / sqrt 2)) / 2.
ELEMENTWISE: Dict[str, Tuple[str, str, str]] = {
    "nt_gelu_fwd": (
        "T x",
        "T y, T cdf",
        "const float v = (float)x; const float c = normcdff(v); y = (T)(v * c); cdf = (T)c;",
    ),
    "nt_gelu_bwd": (
        "T x, T cdf, T g",
        "T gx",
        "const float v = (float)x; "
        f"gx = (T)((float)g * ((float)cdf + v * expf(-0.5f * v * v) * {_INV_SQRT_2PI!r}f));",
    ),
}

# rows of at most this many elements go to a warp each; longer ones to a whole block
_WARP_ROW_MAX = 1024
_ROWS_PER_BLOCK = 4
_ADAM_CHUNK = 16384
_ADAM_THREADS = 256
_ATT_THREADS = 128
_ATT_BLOCK_M = 32  # queries per forward block (attention.cu FWD_BM)
_ATT_BLOCK_N = 32  # keys per backward block (attention.cu BWD_BN)
_INT32_MAX = 2**31 - 1


class KernelUnsupported(TypeError):
    """The CUDA kernels do not take these arrays (dtype, shape or device limits): use the generic code."""


# ----------------------------------------------------------------------------- loading


@functools.lru_cache(maxsize=None)
def _cupy():
    import cupy

    return cupy


def name_expressions(source: str, ctype: str) -> List[str]:
    """The template instantiations of ``source`` (a file in ``backends/cuda/``) for the C type ``ctype``."""
    out = []
    for pattern in TEMPLATES[source]:
        names = [pattern.replace("{T}", ctype)]
        for key, values in (("{B}", ("false", "true")), ("{B2}", ("false", "true")),
                            ("{HD}", tuple(str(h) for h in HEAD_DIMS))):
            names = [n.replace(key, val) for n in names for val in values] if key in pattern else names
        out.extend(names)
    return out


@functools.lru_cache(maxsize=None)
def source_text(source: str) -> str:
    """``source``'s CUDA C text with ``#include "common.cuh"`` replaced by that header's text."""
    common = (_DIR / "common.cuh").read_text()
    return (_DIR / source).read_text().replace('#include "common.cuh"', common, 1)


_modules: dict = {}
_functions: dict = {}


def _kernel(source: str, name: str, ctype: str):
    """The compiled kernel ``name`` (a name expression) of ``source`` on the current device."""
    cp = _cupy()
    dev = cp.cuda.runtime.getDevice()
    key = (dev, name)
    fn = _functions.get(key)
    if fn is None:
        mkey = (dev, source, ctype)
        mod = _modules.get(mkey)
        if mod is None:
            mod = _modules[mkey] = cp.RawModule(code=source_text(source),
                                                name_expressions=name_expressions(source, ctype))
        fn = _functions[key] = mod.get_function(name)
    return fn


def _ctype(x, op: str) -> str:
    ctype = _CTYPES.get(x.dtype.name)
    if ctype is None:
        raise KernelUnsupported(f"{op}: the CUDA kernels take float16 or float32 arrays, not {x.dtype.name}.")
    return ctype


def _c(x):
    """``x`` C-contiguous (copied when it is not)."""
    return x if x.flags.c_contiguous else _cupy().ascontiguousarray(x)


def _as(x, dtype):
    """``x`` C-contiguous with ``dtype``."""
    return _cupy().ascontiguousarray(x, dtype=dtype)


def _bool(b: bool) -> str:
    return "true" if b else "false"


_NULL = np.uint64(0)  # a null pointer argument


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _row_launch(rows: int, n: int):
    """(grid, block, warp mode) for a row kernel over ``rows`` rows of ``n`` elements: a warp per row
    (4 rows a block) up to 1024 elements, else a block of 256 to 1024 threads per row."""
    if n <= _WARP_ROW_MAX:
        grid, block, warp = _cdiv(rows, _ROWS_PER_BLOCK), (32, _ROWS_PER_BLOCK), True
    else:
        grid, block, warp = rows, (256 if n <= 4096 else 512 if n <= 16384 else 1024, 1), False
    _check_grid(grid, "a row kernel")
    return (grid,), block, warp


def _check_grid(blocks: int, op: str) -> None:
    if blocks > _INT32_MAX:
        raise KernelUnsupported(f"{op}: {blocks} blocks exceed the CUDA grid limit.")


def _i32(n: int, op: str) -> np.int32:
    if n > _INT32_MAX:
        raise KernelUnsupported(f"{op}: a length of {n} exceeds the kernels' 32-bit limit.")
    return np.int32(n)


# ----------------------------------------------------------------------------- softmax


def _split(shape, axis: int):
    outer = math.prod(shape[:axis])
    return outer, shape[axis], math.prod(shape[axis + 1:])


def softmax(x, axis: int, log: bool):
    """Softmax (log-softmax when ``log``) of ``x`` along ``axis``."""
    ctype = _ctype(x, "softmax")
    x = _c(x)
    axis = axis % x.ndim
    y = _cupy().empty_like(x)
    if x.size == 0:
        return y
    outer, n, inner = _split(x.shape, axis)
    _launch_softmax("softmax_rows", "softmax_cols", ctype, (x, y), outer, n, inner, log)
    return y


def softmax_backward(y, g, axis: int, log: bool):
    """The input's gradient of :func:`softmax` from its output ``y`` and the output's gradient ``g``."""
    ctype = _ctype(y, "softmax_backward")
    y, g = _c(y), _as(g, y.dtype)
    axis = axis % y.ndim
    gx = _cupy().empty_like(y)
    if y.size == 0:
        return gx
    outer, n, inner = _split(y.shape, axis)
    _launch_softmax("softmax_rows_bwd", "softmax_cols_bwd", ctype, (y, g, gx), outer, n, inner, log)
    return gx


def _launch_softmax(rows_kernel: str, cols_kernel: str, ctype: str, arrays, outer, n, inner, log) -> None:
    n32 = _i32(n, "softmax")
    if inner == 1:
        grid, block, warp = _row_launch(outer, n)
        fn = _kernel("softmax.cu", f"{rows_kernel}<{ctype}, {_bool(log)}, {_bool(warp)}>", ctype)
        fn(grid, block, (*arrays, np.int64(outer), n32))
    else:
        ncb = _cdiv(inner, 32)
        _check_grid(outer * ncb, "softmax")
        fn = _kernel("softmax.cu", f"{cols_kernel}<{ctype}, {_bool(log)}>", ctype)
        fn((outer * ncb,), (32, 8), (*arrays, n32, np.int64(inner), np.int64(ncb)))


# ----------------------------------------------------------------------------- cross-entropy


def cross_entropy(logits, target, ignore_index: int):
    """``(loss, lse)`` per row of ``logits`` (rows, C) for int64 ``target`` (rows,); loss 0 where ignored."""
    cp = _cupy()
    ctype = _ctype(logits, "cross_entropy")
    logits, target = _c(logits), _as(target, np.int64)
    rows, C = logits.shape
    loss = cp.empty((rows,), logits.dtype)
    lse = cp.empty((rows,), logits.dtype)
    if rows == 0:
        return loss, lse
    grid, block, warp = _row_launch(rows, C)
    fn = _kernel("cross_entropy.cu", f"ce_fwd<{ctype}, {_bool(warp)}>", ctype)
    fn(grid, block, (logits, target, loss, lse, np.int64(rows), _i32(C, "cross_entropy"), np.int64(ignore_index)))
    return loss, lse


def cross_entropy_backward(logits, lse, target, g, ignore_index: int):
    """``(softmax(logits) - onehot(target)) * g[:, None]``, zero rows where ``target == ignore_index``."""
    cp = _cupy()
    ctype = _ctype(logits, "cross_entropy_backward")
    logits, target = _c(logits), _as(target, np.int64)
    lse, g = _as(lse, np.float32), _as(g, np.float32)  # (rows,): float keeps lse's rounding out of exp
    rows, C = logits.shape
    out = cp.empty_like(logits)
    if out.size == 0:
        return out
    fn = _kernel("cross_entropy.cu", f"ce_bwd<{ctype}>", ctype)
    blocks = min(_cdiv(out.size, 256), 65536)  # grid-stride beyond
    fn((blocks,), (256,), (logits, lse, target, g, out, np.int64(rows), _i32(C, "cross_entropy_backward"),
                           np.int64(ignore_index)))
    return out


# ----------------------------------------------------------------------------- LayerNorm / RMSNorm


def norm_rows(x, n: int, w, b, eps: float, centered: bool):
    """LayerNorm (``centered``) or RMSNorm of the rows of ``n`` elements of ``x``: ``(y, mean, rstd)``,
    the statistics float32 of shape (rows,) (``mean`` None for RMSNorm)."""
    return _norm_forward(x, None, n, w, b, eps, centered)[1:]


def add_norm_rows(x, r, n: int, w, b, eps: float, centered: bool):
    """The sum ``h = x + r`` and :func:`norm_rows` of it, in one pass over each row: ``(h, y, mean, rstd)``."""
    if r.dtype != x.dtype or r.shape != x.shape:
        raise KernelUnsupported("add_norm_rows: the residual differs from the input in dtype or shape.")
    return _norm_forward(x, r, n, w, b, eps, centered)


def _norm_forward(x, r, n: int, w, b, eps: float, centered: bool):
    """``(h, y, mean, rstd)`` of norm_fwd: ``h`` the sum ``x + r`` (None where ``r`` is None)."""
    cp = _cupy()
    ctype = _ctype(x, "norm_rows")
    if n <= 0:
        raise KernelUnsupported("norm_rows: rows of no element.")
    x = _c(x)
    rows = x.size // n
    r = None if r is None else _c(r)
    h = None if r is None else cp.empty_like(x)
    w = None if w is None else _as(w, x.dtype)
    b = None if b is None else _as(b, x.dtype)
    y = cp.empty_like(x)
    mean = cp.empty((rows,), np.float32) if centered else None
    rstd = cp.empty((rows,), np.float32)
    if rows:
        grid, block, warp = _row_launch(rows, n)
        fn = _kernel("norm.cu", f"norm_fwd<{ctype}, {_bool(centered)}, {_bool(warp)}>", ctype)
        fn(grid, block, (x, *(_NULL if a is None else a for a in (r, h, w, b)), y,
                         _NULL if mean is None else mean, rstd, np.int64(rows), _i32(n, "norm_rows"),
                         np.float32(eps)))
    return h, y, mean, rstd


def norm_rows_backward(x, n: int, mean, rstd, w, g, want_x: bool, want_w: bool, want_b: bool, g_add=None):
    """``(gx, gw, gb)`` of :func:`norm_rows` for the output's gradient ``g``; None where not wanted.
    ``g_add`` (None, or of ``x``'s shape) is added to ``gx``."""
    cp = _cupy()
    ctype = _ctype(x, "norm_rows_backward")
    if n <= 0:
        raise KernelUnsupported("norm_rows_backward: rows of no element.")
    x, g = _c(x), _as(g, x.dtype)
    g_add = None if g_add is None else _as(g_add, x.dtype)
    rows = x.size // n
    centered = mean is not None
    mean = None if mean is None else _as(mean, np.float32)
    rstd = _as(rstd, np.float32)
    n32 = _i32(n, "norm_rows_backward")
    gx = gw = gb = None
    if want_x:
        gx = cp.empty_like(x)
        if rows:
            wc = None if w is None else _as(w, x.dtype)
            grid, block, warp = _row_launch(rows, n)
            fn = _kernel("norm.cu", f"norm_bwd<{ctype}, {_bool(centered)}, {_bool(warp)}>", ctype)
            fn(grid, block, (x, _NULL if wc is None else wc, g, _NULL if mean is None else mean, rstd,
                             _NULL if g_add is None else g_add, gx, np.int64(rows), n32))
    if want_w or want_b:
        pdtype = x.dtype if w is None else w.dtype
        if rows == 0:
            gw = cp.zeros((n,), pdtype) if want_w else None
            gb = cp.zeros((n,), pdtype) if want_b else None
        else:
            ncb = _cdiv(n, 32)
            # enough blocks to fill the device, at least 16 rows each
            chunks = max(1, min(_cdiv(rows, 16), _cdiv(8 * _sm_count(), ncb)))
            per_chunk = _cdiv(rows, chunks)
            chunks = _cdiv(rows, per_chunk)
            _check_grid(chunks * ncb, "norm_rows_backward")
            pw = cp.empty((chunks, n), np.float32) if want_w else None
            pb = cp.empty((chunks, n), np.float32) if want_b else None
            fn = _kernel("norm.cu", f"norm_param_partial<{ctype}, {_bool(centered)}>", ctype)
            fn((chunks * ncb,), (32, 8), (x, g, _NULL if mean is None else mean, rstd,
                                          _NULL if pw is None else pw, _NULL if pb is None else pb,
                                          np.int64(rows), n32, np.int64(per_chunk), np.int32(ncb)))
            gw = None if pw is None else pw.sum(axis=0).astype(pdtype, copy=False)
            gb = None if pb is None else pb.sum(axis=0).astype(pdtype, copy=False)
    return gx, gw, gb


def add_norm_rows_backward(x, n: int, mean, rstd, w, g, g_add, want_w: bool, want_b: bool):
    """:func:`norm_rows_backward` of the sum ``x`` with the input's gradient always computed and ``g_add``
    added to it, in the same pass: ``(gx, gw, gb)``."""
    if g_add.shape != x.shape:
        raise KernelUnsupported("add_norm_rows_backward: the added gradient differs from the input in shape.")
    return norm_rows_backward(x, n, mean, rstd, w, g, True, want_w, want_b, g_add=g_add)


@functools.lru_cache(maxsize=None)
def _sm_count_of(dev: int) -> int:
    return _cupy().cuda.Device(dev).attributes["MultiProcessorCount"]


def _sm_count() -> int:
    return _sm_count_of(_cupy().cuda.runtime.getDevice())


# ----------------------------------------------------------------------------- GELU


def _elementwise(name: str):
    key = ("elementwise", name)
    fn = _functions.get(key)
    if fn is None:
        in_params, out_params, body = ELEMENTWISE[name]
        fn = _functions[key] = _cupy().ElementwiseKernel(in_params, out_params, body, name)
    return fn


def gelu(x):
    """Exact GELU and the normal CDF it multiplies by: ``(x * Phi(x), Phi(x))``."""
    _ctype(x, "gelu")
    return _elementwise("nt_gelu_fwd")(x)


def gelu_backward(x, cdf, g):
    """GELU's input gradient ``g * (Phi(x) + x * phi(x))``, from the CDF :func:`gelu` returned."""
    _ctype(x, "gelu_backward")
    return _elementwise("nt_gelu_bwd")(x, cdf.astype(x.dtype, copy=False), g.astype(x.dtype, copy=False))


# ----------------------------------------------------------------------------- Adam / AdamW

_tables: Dict[tuple, object] = {}
_TABLES_KEPT = 16


def adamw_(params: Sequence, grads: Sequence, exp_avgs: Sequence, exp_avg_sqs: Sequence, *, lr: float,
           beta1: float, beta2: float, eps: float, weight_decay: float, step: int, decoupled: bool) -> None:
    """One Adam (``decoupled`` False: L2 weight decay) or AdamW step on every parameter, in place, in
    one launch.  All arrays have one float dtype, are C-contiguous, and ``grads[i]``, ``exp_avgs[i]``,
    ``exp_avg_sqs[i]`` have ``params[i]``'s size."""
    if not params:
        return
    ctype = _ctype(params[0], "adamw_")
    dtype = params[0].dtype
    sizes = []
    ptrs = []
    for group in zip(params, grads, exp_avgs, exp_avg_sqs):
        for a in group:
            if a.dtype != dtype or not a.flags.c_contiguous or a.size != group[0].size:
                raise KernelUnsupported("adamw_: the fused update takes C-contiguous arrays of one dtype and "
                                        "matching sizes.")
        if group[0].size:
            ptrs.append(tuple(a.data.ptr for a in group))
            sizes.append(group[0].size)
    if not sizes:
        return
    table, n_chunks = _adam_table(tuple(ptrs), tuple(sizes))
    _check_grid(n_chunks, "adamw_")
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    fn = _kernel("adam.cu", f"adam_multi<{ctype}>", ctype)
    fn((n_chunks,), (_ADAM_THREADS,), (
        table, np.int32(len(sizes)), np.int32(_ADAM_CHUNK), np.float32(beta1), np.float32(beta2),
        np.float32(eps), np.float32(weight_decay), np.float32(1.0 - lr * weight_decay), np.float32(lr / bc1),
        np.float32(bc2_sqrt), np.int32(bool(decoupled))))


def _adam_table(ptrs: tuple, sizes: tuple):
    """The device table of :func:`adamw_` (see adam.cu) and its number of chunks, kept for the next
    steps (the same parameters give the same table)."""
    dev = _cupy().cuda.runtime.getDevice()
    key = (dev, ptrs, sizes)
    hit = _tables.get(key)
    if hit is not None:
        return hit
    sizes_np = np.asarray(sizes, np.int64)
    per = -(-sizes_np // _ADAM_CHUNK)
    tensor = np.repeat(np.arange(len(sizes), dtype=np.int64), per)
    first = np.cumsum(per) - per  # each tensor's first chunk
    start = (np.arange(int(per.sum()), dtype=np.int64) - np.repeat(first, per)) * _ADAM_CHUNK
    head = np.concatenate([np.asarray(ptrs, np.uint64).view(np.int64), sizes_np[:, None]], axis=1)
    host = np.concatenate([head.ravel(), np.stack([tensor, start], axis=1).ravel()])
    if len(_tables) >= _TABLES_KEPT:
        _tables.pop(next(iter(_tables)))
    hit = _tables[key] = (_cupy().asarray(host), len(tensor))
    return hit


# ----------------------------------------------------------------------------- attention


def _head_dim(D: int, Dv: int) -> int:
    for hd in HEAD_DIMS:
        if max(D, Dv) <= hd:
            return hd
    raise KernelUnsupported(f"attention: the fused kernel takes head dims up to {HEAD_DIMS[-1]}, not {max(D, Dv)}.")


def _fwd_smem(hd: int) -> int:
    return 4 * (32 * hd + 32 * (hd + 4) + 32 * hd + 32 * 32)


def _bwd_smem(hd: int) -> int:
    return 4 * (2 * 32 * hd + 2 * 32 * (hd + 4) + 2 * 32 * 32 + 64)


@functools.lru_cache(maxsize=None)
def _smem_optin(dev: int) -> int:
    return _cupy().cuda.Device(dev).attributes["MaxSharedMemoryPerBlockOptin"]


def _smem_kernel(source: str, name: str, ctype: str, smem: int):
    """The kernel, allowed ``smem`` bytes of dynamic shared memory (an opt-in above 48 KB)."""
    fn = _kernel(source, name, ctype)
    if smem > 48 * 1024:
        dev = _cupy().cuda.runtime.getDevice()
        if smem > _smem_optin(dev):
            raise KernelUnsupported(f"attention: the device has less than the {smem} bytes of shared memory "
                                    "per block the fused kernel needs.")
        if fn.max_dynamic_shared_size_bytes < smem:
            fn.max_dynamic_shared_size_bytes = smem
    return fn


def _attention_args(q, k, v, key_keep, op: str):
    ctype = _ctype(q, op)
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise KernelUnsupported(f"{op}: q, k and v must share one dtype.")
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(f"{op}: q, k and v must be (N, L, D) arrays.")
    N, Lq, D = q.shape
    Lk, Dv = v.shape[1], v.shape[2]
    if k.shape != (N, Lk, D) or v.shape[0] != N:
        raise ValueError(f"{op}: shapes q {q.shape}, k {k.shape}, v {v.shape} do not match.")
    keep = _NULL
    if key_keep is not None:
        if tuple(key_keep.shape) != (N, Lk):
            raise ValueError(f"{op}: key_keep must have shape {(N, Lk)}, not {tuple(key_keep.shape)}.")
        keep = _as(key_keep, np.bool_)
    return ctype, N, Lq, Lk, D, Dv, _head_dim(D, Dv), keep


def attention(q, k, v, *, scale: float, causal: bool, key_keep):
    """Fused attention forward: ``(out, lse)``, out (N, Lq, Dv) in q's dtype, lse (N, Lq) float32
    (-inf, with out 0, for a query that may attend no key)."""
    cp = _cupy()
    ctype, N, Lq, Lk, D, Dv, hd, keep = _attention_args(q, k, v, key_keep, "attention")
    q, k, v = _c(q), _c(k), _c(v)
    out = cp.empty((N, Lq, Dv), q.dtype)
    lse = cp.empty((N, Lq), np.float32)
    if N * Lq == 0:
        return out, lse
    n_qtiles = _cdiv(Lq, _ATT_BLOCK_M)
    _check_grid(N * n_qtiles, "attention")
    smem = _fwd_smem(hd)
    fn = _smem_kernel("attention.cu", f"attn_fwd<{ctype}, {hd}>", ctype, smem)
    fn((N * n_qtiles,), (_ATT_THREADS,), (q, k, v, keep, out, lse, _i32(Lq, "attention"), _i32(Lk, "attention"),
                                          np.int32(D), np.int32(Dv), np.float32(scale * math.log2(math.e)),
                                          np.int32(bool(causal)), np.int32(n_qtiles)), shared_mem=smem)
    return out, lse


def attention_backward(q, k, v, out, lse, g, *, scale: float, causal: bool, key_keep):
    """``(dq, dk, dv)`` of :func:`attention` for the output's gradient ``g``, from its ``out`` and ``lse``."""
    cp = _cupy()
    ctype, N, Lq, Lk, D, Dv, hd, keep = _attention_args(q, k, v, key_keep, "attention_backward")
    q, k, v = _c(q), _c(k), _c(v)
    out, g = _as(out, q.dtype), _as(g, q.dtype)
    lse = _as(lse, np.float32)
    dq = cp.zeros((N, Lq, D), np.float32)  # atomics add into it
    dk = cp.empty_like(k)
    dv = cp.empty_like(v)
    rows = N * Lq
    if N * Lk and rows:
        dvec = cp.empty((N, Lq), np.float32)
        fn = _kernel("attention.cu", f"attn_bwd_dot<{ctype}>", ctype)
        fn((_cdiv(rows, _ROWS_PER_BLOCK),), (32, _ROWS_PER_BLOCK), (g, out, dvec, np.int64(rows), np.int32(Dv)))
    else:
        dvec = cp.zeros((N, Lq), np.float32)
    if N * Lk:
        n_kblocks = _cdiv(Lk, _ATT_BLOCK_N)
        _check_grid(N * n_kblocks, "attention_backward")
        smem = _bwd_smem(hd)
        fn = _smem_kernel("attention.cu", f"attn_bwd<{ctype}, {hd}>", ctype, smem)
        fn((N * n_kblocks,), (_ATT_THREADS,), (q, k, v, g, lse, dvec, keep, dq, dk, dv, _i32(Lq, "attention"),
                                               _i32(Lk, "attention"), np.int32(D), np.int32(Dv), np.float32(scale), np.int32(bool(causal)),
                                               np.int32(n_kblocks)), shared_mem=smem)
    return (dq if q.dtype == np.float32 else dq.astype(q.dtype)), dk, dv
