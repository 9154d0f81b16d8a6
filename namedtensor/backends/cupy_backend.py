"""The CuPy backend: arrays on one NVIDIA GPU (device ``"cuda:N"``), one backend object per device.

Made by :func:`namedtensor.backends.get` on first use of its device (CuPy is imported then, not
before).  It binds CuPy's NumPy-like functions the way the NumPy backend binds NumPy's (CuPy 13+ has
every Array-API name the ops call; ``var``/``std`` take ``correction=`` through ``ddof``), adds what
the ops need beyond them (``erf`` and the special functions from ``cupyx.scipy.special``, ``einsum``,
scatter-add, ``pad``, random numbers from a seedable ``cupy.random.Generator``), and sends the fused ops (softmax,
cross-entropy, norms, GELU, AdamW, attention) to the CUDA kernels of
:mod:`namedtensor.backends.cuda_kernels` for the float16/float32 arrays those take; float64, and
whatever a kernel refuses (``KernelUnsupported``: a head dim above its largest, too little shared
memory), goes through the generic code of :class:`~namedtensor.backends.base.Backend`.

Memory comes from CuPy's default memory pool (``nt.cuda.memory_allocated()``, ``nt.cuda.empty_cache()``).
Device-side extras for :mod:`namedtensor.cuda` and the DataLoader: ``synchronize``, the pool's
counters, page-locked host copies (``pin``) and host-to-device copies that do not block the host
(``upload`` with ``non_blocking``), on the current stream or a side stream with events.

CuPy runs kernels on its *current* device.  On a machine with several GPUs every call of this
backend first makes its own device current (and leaves it so), which keeps the raw-array arithmetic
of the op that follows on the right device; with one GPU there is nothing to switch and no wrapper.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from .base import STANDARD, Backend
from .. import _dtypes

#: float dtypes the CUDA kernels take; others (float64) use the generic code of the base class
_KERNEL_FLOATS = (np.dtype(np.float16), np.dtype(np.float32))

#: methods that launch work on the device: on a multi-GPU machine each first makes this device current
_DEVICE_METHODS = STANDARD + (
    "logaddexp", "asarray", "erf", "erfc", "erfinv", "lgamma", "digamma", "polygamma", "igamma", "igammac", "exp2",
    "fmod", "einsum", "scatter_add", "scatter_reduce", "getitem", "setitem", "pad", "tril", "triu",
    "sort_indices", "rand", "randn", "randint", "randperm", "gelu", "gelu_backward", "norm_rows",
    "norm_rows_backward", "add_norm_rows", "add_norm_rows_backward", "real", "imag", "conj", "angle", "complex",
    "view_as_real", "view_as_complex",
    "softmax", "softmax_backward", "cross_entropy", "cross_entropy_backward", "adamw_", "attention",
    "attention_backward", "upload", "empty_cache", "memory_allocated", "memory_reserved",
    "inv", "det", "slogdet", "solve", "cholesky", "eigh", "qr", "svd", "pinv",
)


class CupyBackend(Backend):
    """CuPy arrays on CUDA device ``index``."""

    name = "cupy"
    supports_out = True
    fused_attention = True

    def __init__(self, index: int) -> None:
        import cupy

        self.xp = cupy
        self.index = index
        self.device = f"cuda:{index}"
        self._dev = cupy.cuda.Device(index)
        super().__init__()
        self._to_native = {d: np.dtype(d.name) for d in _dtypes.ALL}
        self._from_native = {v: k for k, v in self._to_native.items()}
        self.getitem = operator.getitem
        self.var = _with_correction(cupy.var)
        self.std = _with_correction(cupy.std)
        self._rng = None
        self._draws = 0  # draws since the backend was made: its random_state()
        self._seed = None
        self._copy_stream = None
        self._kernels = None
        if cupy.cuda.runtime.getDeviceCount() > 1:
            for name in _DEVICE_METHODS:
                setattr(self, name, _on_device(getattr(self, name), index))

    # conversion ----------------------------------------------------------------------
    def is_array(self, x) -> bool:
        return isinstance(x, self.xp.ndarray) and x.device.id == self.index

    def asarray(self, data, dtype=None, copy=None):
        cp = self.xp
        native = None if dtype is None else self._to_native[dtype]
        if isinstance(data, cp.ndarray) and data.device.id != self.index:
            out = self.upload(data)  # another GPU's array: a copy on this one
            return out if native is None else out.astype(native, copy=False)
        with self._dev:
            return cp.asarray(data, dtype=native, copy=copy)

    def to_numpy(self, x):
        return self.xp.asnumpy(x) if isinstance(x, self.xp.ndarray) else np.asarray(x)

    def download(self, x):
        """``x`` copied into a new NumPy array (waits for the copy)."""
        return self.xp.asnumpy(x)

    def item(self, x):
        return x.item()

    def tolist(self, x):
        return x.tolist()

    def is_view_of(self, out, x) -> bool:
        base = getattr(out, "base", None)  # as NumPy's: every view points at the array owning the memory
        return base is not None and (base is x or base is getattr(x, "base", None))

    def owns_writable(self, x) -> bool:
        return x.__class__ is self.xp.ndarray and x.base is None

    def row_major(self, x) -> bool:
        return x.flags.c_contiguous

    def as_row_major(self, x):
        return self.xp.ascontiguousarray(x)

    # what the namespace lacks --------------------------------------------------------
    def erf(self, x):
        from cupyx.scipy.special import erf

        if x.dtype == np.float16:  # computed in float32, as CUDA's erff
            return erf(x.astype(np.float32)).astype(np.float16)
        return erf(x)

    def _special(self, name: str, *xs):
        """``cupyx.scipy.special``'s function ``name`` of float arrays ``xs`` (in their promoted dtype), float16
        computed in float32."""
        import cupyx.scipy.special as special

        fn = getattr(special, name)
        if self.xp.result_type(*xs) == np.float16:
            return fn(*(x.astype(np.float32) for x in xs)).astype(np.float16)
        return fn(*xs)

    def erfc(self, x):
        return self._special("erfc", x)

    def erfinv(self, x):
        return self._special("erfinv", x)

    def lgamma(self, x):
        return self.xp.where(x == -np.inf, np.inf, self._special("gammaln", x))  # SciPy's gammaln(-inf) is -inf

    def digamma(self, x):
        return self._special("digamma", x)

    def polygamma(self, n, x):
        # SciPy's polygamma (zeta-based) loses digits for x < 0 and differs from PyTorch at the poles:
        # the generic version for n >= 1, as on the CPU
        return self.digamma(x) if n == 0 else super().polygamma(n, x)

    def igamma(self, a, x):
        # SciPy's nan where PyTorch's edges give a value to a nan operand (at x = 0, x = inf, a = inf)
        return self._incomplete_gamma_edges(a, x, self._special("gammainc", a, x), upper=False)

    def igammac(self, a, x):
        return self._incomplete_gamma_edges(a, x, self._special("gammaincc", a, x), upper=True)

    def exp2(self, x):
        return self.xp.exp2(x)

    def fmod(self, a, b):
        return self.xp.fmod(a, b)

    def einsum(self, subscripts, *arrays):
        return self.xp.einsum(subscripts, *arrays)

    def scatter_add(self, shape, dtype, key, values):
        cp = self.xp
        dt = values.dtype if dtype is None else self._to_native[dtype]
        # atomics accumulate float16 poorly (and not on every GPU): add in float32
        work = np.float32 if dt == np.float16 else dt
        out = cp.zeros(shape, dtype=work)
        cp.add.at(out, key, values.astype(work, copy=False))
        return out if work == dt else out.astype(dt)

    def scatter_reduce(self, x, key, values, reduce, include_self):
        if reduce == "sum" and include_self:  # atomics, in one pass; the generic version goes in rounds
            return x + self.scatter_add(x.shape, None, key, values)
        return super().scatter_reduce(x, key, values, reduce, include_self)

    def setitem(self, x, key, value):
        x[key] = value

    def pad(self, x, widths, value):
        return self.xp.pad(x, widths, mode="constant", constant_values=value)

    def tril(self, x, k):
        return self.xp.tril(x, k)

    def triu(self, x, k):
        return self.xp.triu(x, k)

    def logaddexp(self, a, b):
        return self.xp.logaddexp(a, b)

    def sort_indices(self, x, axis: int, descending: bool, stable: bool):
        cp = self.xp
        # CuPy's argsort is always stable; descending order as in the NumPy backend (ties keep their order)
        if not descending:
            return cp.argsort(x, axis=axis)
        n = x.shape[axis]
        rev = cp.argsort(cp.flip(x, axis=axis), axis=axis)
        return (n - 1) - cp.flip(rev, axis=axis)

    # random numbers ------------------------------------------------------------------
    def _generator(self):
        self._draws += 1
        if self._rng is None:
            with self._dev:
                self._rng = self.xp.random.default_rng(self._seed)
        return self._rng

    def seed(self, n: int) -> None:
        self._seed = n
        self._rng = None  # made again from the seed on the next draw, on this device

    def random_state(self):
        return (self._seed, self._draws)

    def rand(self, shape, dtype):
        d = self._to_native[dtype]
        if d == np.float16:
            return self._generator().random(shape, dtype=np.float32).astype(d)
        return self._generator().random(shape, dtype=d)

    def randn(self, shape, dtype):
        d = self._to_native[dtype]
        if d == np.float16:
            return self._generator().standard_normal(shape, dtype=np.float32).astype(d)
        return self._generator().standard_normal(shape, dtype=d)

    def randint(self, low, high, shape, dtype):
        return self._generator().integers(low, high, size=shape, dtype=self._to_native[dtype])

    # fused kernels: CUDA for float16/float32, the generic code for the rest ------------
    @property
    def kernels(self):
        """:mod:`namedtensor.backends.cuda_kernels` (imported on first use)."""
        if self._kernels is None:
            from . import cuda_kernels

            self._kernels = cuda_kernels
        return self._kernels

    def _fused(self, name: str, *args, **kwargs):
        """The CUDA kernel ``name`` on the arguments, or the generic code where it does not take them
        (``KernelUnsupported``: a head dim, a size or a shared-memory need beyond the kernels)."""
        kernels = self.kernels
        try:
            return getattr(kernels, name)(*args, **kwargs)
        except kernels.KernelUnsupported:
            return getattr(super(), name)(*args, **kwargs)

    def gelu(self, x):
        if x.dtype in _KERNEL_FLOATS:
            return self._fused("gelu", x)
        return super().gelu(x)

    def gelu_backward(self, x, cdf, g):
        if _same_float(x, cdf, g):
            return self._fused("gelu_backward", x, cdf, g)
        return super().gelu_backward(x, cdf, g)

    def norm_rows(self, x, n, w, b, eps, centered):
        if _same_float(x, w, b):
            return self._fused("norm_rows", x, n, w, b, eps, centered)
        return super().norm_rows(x, n, w, b, eps, centered)

    def norm_rows_backward(self, x, n, mean, rstd, w, g, want_x, want_w, want_b):
        if _same_float(x, w, g):  # the statistics may be float32 for float16 x (the kernels' forward)
            return self._fused("norm_rows_backward", x, n, mean, rstd, w, g, want_x, want_w, want_b)
        return super().norm_rows_backward(x, n, mean, rstd, w, g, want_x, want_w, want_b)

    def add_norm_rows(self, x, r, n, w, b, eps, centered):
        if _same_float(x, r, w, b):
            return self._fused("add_norm_rows", x, r, n, w, b, eps, centered)
        return super().add_norm_rows(x, r, n, w, b, eps, centered)

    def add_norm_rows_backward(self, x, n, mean, rstd, w, g, g_add, want_w, want_b):
        if _same_float(x, w, g, g_add):
            return self._fused("add_norm_rows_backward", x, n, mean, rstd, w, g, g_add, want_w, want_b)
        return super().add_norm_rows_backward(x, n, mean, rstd, w, g, g_add, want_w, want_b)

    def softmax(self, x, axis, log):
        if x.dtype in _KERNEL_FLOATS and x.size:
            return self._fused("softmax", x, axis, log)
        return super().softmax(x, axis, log)

    def softmax_backward(self, y, g, axis, log):
        if _same_float(y, g) and y.size:
            return self._fused("softmax_backward", y, g, axis, log)
        return super().softmax_backward(y, g, axis, log)

    def cross_entropy(self, logits, target, ignore_index):
        if logits.dtype in _KERNEL_FLOATS and logits.size:
            return self._fused("cross_entropy", logits, target, ignore_index)
        return super().cross_entropy(logits, target, ignore_index)

    def cross_entropy_backward(self, logits, lse, target, g, ignore_index):
        if _same_float(logits, lse, g) and logits.size:
            return self._fused("cross_entropy_backward", logits, lse, target, g, ignore_index)
        return super().cross_entropy_backward(logits, lse, target, g, ignore_index)

    def adamw_(self, params, grads, exp_avgs, exp_avg_sqs, *, lr, beta1, beta2, eps, weight_decay, step,
               decoupled):
        if params and params[0].dtype in _KERNEL_FLOATS:
            return self._fused("adamw_", params, grads, exp_avgs, exp_avg_sqs, lr=lr, beta1=beta1, beta2=beta2,
                               eps=eps, weight_decay=weight_decay, step=step, decoupled=decoupled)
        return super().adamw_(params, grads, exp_avgs, exp_avg_sqs, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                              weight_decay=weight_decay, step=step, decoupled=decoupled)

    def attention(self, q, k, v, *, scale, causal, key_keep):
        if _same_float(q, k, v):
            return self._attention_3d(functools.partial(self._fused, "attention"), q, k, v, scale=scale,
                                      causal=causal, key_keep=key_keep)
        return super().attention(q, k, v, scale=scale, causal=causal, key_keep=key_keep)

    def attention_backward(self, q, k, v, out, lse, g, *, scale, causal, key_keep):
        if _same_float(q, k, v, out, g):
            return self._attention_backward_3d(functools.partial(self._fused, "attention_backward"), q, k, v, out,
                                               lse, g, scale=scale, causal=causal, key_keep=key_keep)
        return super().attention_backward(q, k, v, out, lse, g, scale=scale, causal=causal, key_keep=key_keep)

    # the device: synchronisation, memory, host transfers ------------------------------
    def synchronize(self) -> None:
        """Wait until all work queued on this device is done."""
        self._dev.synchronize()

    def memory_allocated(self) -> int:
        """Bytes of this device's memory held by live arrays (CuPy's default memory pool)."""
        return self.xp.get_default_memory_pool().used_bytes()

    def memory_reserved(self) -> int:
        """Bytes the pool holds on this device: in use, plus cached for reuse."""
        return self.xp.get_default_memory_pool().total_bytes()

    def empty_cache(self) -> None:
        """Give the pool's cached, unused blocks (and the pinned host pool's) back to the driver."""
        self.xp.get_default_memory_pool().free_all_blocks()
        self.xp.get_default_pinned_memory_pool().free_all_blocks()

    def pin(self, a):
        """A copy of host array ``a`` in page-locked memory (which the GPU copies from asynchronously)."""
        a = np.asarray(a)
        if a.nbytes == 0:
            return a.copy()
        mem = self.xp.cuda.alloc_pinned_memory(a.nbytes)
        out = np.frombuffer(mem, a.dtype, a.size).reshape(a.shape)
        out[...] = a
        return out

    def is_pinned(self, a) -> bool:
        """Whether host array ``a`` lies in page-locked memory (made by :meth:`pin`, or registered with CUDA).

        Asked of the driver: which Python object owns the buffer (NumPy may keep a ``memoryview`` of
        CuPy's pinned block as the array's base) says nothing reliable.
        """
        a = np.asarray(a)
        if a.size == 0:
            return False
        runtime = self.xp.cuda.runtime
        return runtime.pointerGetAttributes(a.ctypes.data).type == runtime.memoryTypeHost

    def upload(self, x, non_blocking: bool = False, stream=None):
        """A new array on this device holding host array ``x`` (or another GPU's array).

        With ``non_blocking`` (or a ``stream``) the copy is queued on ``stream`` (default: the current
        one) and the host goes on at once; ``x`` is kept alive until the copy is done.  It overlaps other
        work only when ``x`` is page-locked (:meth:`pin`).
        """
        cp = self.xp
        if isinstance(x, cp.ndarray):
            with x.device:
                src = cp.ascontiguousarray(x)
            with self._dev:
                out = cp.empty(src.shape, src.dtype)
                if src.nbytes:
                    out.data.copy_from_device(src.data, src.nbytes)
            return out
        x = np.asarray(x)
        with self._dev:
            if not (non_blocking or stream is not None) or x.nbytes == 0:
                return cp.array(x, copy=True)
            x = np.ascontiguousarray(x)
            s = stream if stream is not None else cp.cuda.get_current_stream()
            out = cp.empty(x.shape, x.dtype)
            out.set(x, stream=s)
            _keep_until(s, x, cp)
            return out

    def copy_stream(self):
        """This device's side stream for host-to-device copies (made on first use)."""
        if self._copy_stream is None:
            with self._dev:
                self._copy_stream = self.xp.cuda.Stream(non_blocking=True)
        return self._copy_stream

    def record(self, stream=None):
        """An event marking the work queued so far on ``stream`` (default: the current stream)."""
        with self._dev:
            s = stream if stream is not None else self.xp.cuda.get_current_stream()
            return s.record()

    def wait(self, event, stream=None) -> None:
        """Make ``stream`` (default: the current one) wait for ``event`` before its later work."""
        with self._dev:
            s = stream if stream is not None else self.xp.cuda.get_current_stream()
            s.wait_event(event)


def _keep_until(stream, obj, cp) -> None:
    """Keep ``obj`` (a host buffer an async copy reads) alive until the work queued on ``stream`` is done."""
    watch = getattr(cp.cuda.pinned_memory, "_add_to_watch_list", None)
    if watch is not None:
        watch(stream.record(), obj)
    else:  # no way to hold it: wait for the copy instead
        stream.synchronize()


def _same_float(x, *others) -> bool:
    """Whether ``x`` has a dtype the kernels take and ``others`` (None allowed) have ``x``'s."""
    return x.dtype in _KERNEL_FLOATS and all(o is None or o.dtype == x.dtype for o in others)


def _with_correction(fn):
    """CuPy's ``var``/``std`` (``ddof=``) taking the Array API's ``correction=``."""

    def call(x, axis=None, keepdims=False, correction=0.0):
        return fn(x, axis=axis, ddof=correction, keepdims=keepdims)

    call.__name__ = fn.__name__
    return call


def _on_device(fn, index: int):
    """``fn`` run with device ``index`` current (made current if another is; left current)."""
    from cupy.cuda import runtime

    get, set_ = runtime.getDevice, runtime.setDevice

    def call(*args, **kwargs):
        if get() != index:
            set_(index)
        return fn(*args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "fn")
    return call
