"""Runs the CUDA kernels of ``namedtensor/backends/cuda`` on the CPU, for machines without a GPU.

The kernel sources (exactly the text :func:`namedtensor.backends.cuda_kernels.source_text` hands
to NVRTC, each in a namespace of its own) are compiled as C++20 by ``g++`` behind a prelude that
plays the CUDA runtime.  A block's threads are fibers (``ucontext``) on one OS thread, each run
until it waits at a barrier or leaves the kernel: ``__syncthreads``/``__syncwarp`` are barriers,
``__shfl_xor_sync`` exchanges through a per-warp slot array between two warp barriers, a thread
that returns stops counting for later barriers (as on the GPU), and a block whose live threads all
wait at barriers that cannot open is reported as a deadlock.  The scheduler varies by block: the
first (or last) runnable thread always goes next, so warps run as far ahead of one another as the
barriers allow (a missing barrier between warps shows as wrong results), or round robin in a
shuffled order.  ``__half`` is ``_Float16`` (round to nearest even, as ``__float2half_rn``).  Blocks
run one after another, so ``__shared__`` arrays can be function statics.  Dynamic shared memory is
a fresh allocation of exactly the launch's size per block, filled with NaN and fenced by guard
zones checked after each block (a write outside fails the launch; a read outside gives NaN).
Each launch's arguments are checked against the kernel's parameters (an array for each pointer,
a scalar of the parameter's size for the rest), which CuPy does not check.  ElementwiseKernel
bodies run in a plain loop.

Sources generated at run time (``nt.compile``'s kernels: a RawModule of ``extern "C"`` kernels, an
ElementwiseKernel whose body is not one of :data:`namedtensor.backends.cuda_kernels.ELEMENTWISE`) are
built the same way, each into a library of its own (:func:`build_generated`).

:class:`FakeCupy` stands in for the few CuPy calls :mod:`namedtensor.backends.cuda_kernels`
makes (``empty`` fills with NaN, so an unwritten output shows; ``RawModule``, ``ElementwiseKernel``,
device attributes) on host memory, so its launchers run unchanged: grids, blocks, tables and all.

Out-of-bounds reads of global memory: build with AddressSanitizer and preload its runtime, e.g.
``NT_CUDA_EMULATOR_ASAN=1 ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD=$(g++ -print-file-name=libasan.so)
python -m pytest tests/test_cuda_emulated.py`` (about 50 s; clean when this was written).

What this cannot show: timing, occupancy, register or shared-memory limits, lanes of a warp
running apart between barriers in other orders than the scheduler's, and NVRTC's own front end
(``tests/test_nvcc.py`` compiles the same sources with nvcc and NVRTC).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from namedtensor.backends import cuda_kernels as ck

PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include <ucontext.h>

typedef _Float16 __half;
static inline float __half2float(__half h) { return (float)h; }
static inline __half __float2half_rn(float f) { return (__half)f; }

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 { unsigned x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };

namespace nt_emu {
// A block's threads are fibers on one OS thread, each run until it waits at a barrier or leaves
// the kernel; the scheduler resumes, in a fixed shuffled order, every fiber whose barrier opened.
struct Barrier {
    int expected = 0, arrived = 0;
    unsigned gen = 0;
};
struct Fiber {
    ucontext_t ctx;
    dim3 tid;
    int linear = 0;
    bool done = false;
    Barrier* waiting = nullptr;
    unsigned wait_gen = 0;
};
inline ucontext_t scheduler;
inline Fiber* current;
inline dim3 grid_dim, block_dim, block_idx;
inline Barrier block_barrier;
inline std::vector<Barrier> warp_barrier;
inline std::vector<float> warp_slot;  // 32 per warp, for shuffles
inline char* dyn_smem;
inline void (*body)(void*);
inline void* body_arg;
inline unsigned launches;  // counts launches, to vary the schedule
constexpr size_t GUARD = 256, STACK = 64 * 1024;

inline void arrive(Barrier& b) {
    if (++b.arrived == b.expected) {  // the last one opens it and goes on
        b.arrived = 0;
        ++b.gen;
        return;
    }
    current->waiting = &b;
    current->wait_gen = b.gen;
    swapcontext(&current->ctx, &scheduler);
}

// a thread that left the kernel no longer holds back the barrier (as on the GPU)
inline void drop(Barrier& b) {
    if (--b.expected > 0 && b.arrived == b.expected) {
        b.arrived = 0;
        ++b.gen;
    }
}

inline void fiber_main() {
    body(body_arg);
    drop(warp_barrier[current->linear / 32]);
    drop(block_barrier);
    current->done = true;  // returning resumes the scheduler (uc_link)
}

using Launcher = int (*)(unsigned, unsigned, unsigned, size_t, void**, int, const int*);
inline std::map<std::string, Launcher>& registry() {
    static std::map<std::string, Launcher> r;
    return r;
}

template <class... Args, size_t... I>
void invoke(void (*k)(Args...), void** a, std::index_sequence<I...>) {
    k(*static_cast<std::remove_cv_t<std::remove_reference_t<Args>>*>(a[I])...);
}

template <class... Args>
struct Call {
    void (*k)(Args...);
    void** a;
    static void run(void* self) {
        Call* c = static_cast<Call*>(self);
        invoke(c->k, c->a, std::index_sequence_for<Args...>{});
    }
};

// Runs k over the grid, one block after another.  0: done; 1: a block wrote outside its dynamic
// shared memory; 3: a block's threads all wait at barriers that cannot open (a deadlock); 4: the
// arguments do not match the kernel's parameters (`kinds`: 0 for an array, else a scalar's bytes;
// CuPy would pass them unchecked).
template <class... Args>
int launch(void (*k)(Args...), unsigned gx, unsigned bx, unsigned by, size_t smem, void** a, int n_args,
           const int* kinds) {
    const int expected[] = {0, (std::is_pointer_v<Args> ? 0 : (int)sizeof(Args))...};
    if (n_args != (int)sizeof...(Args)) return 4;
    for (int i = 0; i < n_args; ++i)
        if (kinds[i] != expected[i + 1]) return 4;
    const int n = (int)(bx * by);
    Call<Args...> call{k, a};
    body = &Call<Args...>::run;
    body_arg = &call;
    std::vector<Fiber> fibers(n);
    std::unique_ptr<char[]> stacks(new char[(size_t)n * STACK]);  // not zeroed: untouched pages cost nothing
    std::vector<int> order(n);
    int rc = 0;
    ++launches;
    for (unsigned b = 0; b < gx && rc == 0; ++b) {
        grid_dim = {gx, 1, 1};
        block_dim = {bx, by, 1};
        block_idx = {b, 0, 0};
        block_barrier = Barrier{n};
        warp_barrier.assign(n / 32, Barrier{32});
        warp_slot.assign(n, 0.f);
        char* raw = static_cast<char*>(::operator new[](smem + 2 * GUARD, std::align_val_t(16)));
        std::memset(raw, 0xff, smem + 2 * GUARD);  // NaN everywhere: unwritten reads show
        dyn_smem = raw + GUARD;
        for (int t = 0; t < n; ++t) {
            Fiber& f = fibers[t];
            f.tid = {(unsigned)t % bx, (unsigned)t / bx, 0};
            f.linear = t;
            f.done = false;
            f.waiting = nullptr;
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = stacks.get() + (size_t)t * STACK;
            f.ctx.uc_stack.ss_size = STACK;
            f.ctx.uc_link = &scheduler;
            makecontext(&f.ctx, fiber_main, 0);
        }
        // schedules, by block and launch: 0, 1: always the first (last) runnable thread in index
        // order, so that warps run ahead of one another as far as barriers let them (races between
        // warps show); 2: round robin in a shuffled order
        const unsigned mode = (b + launches) % 3;
        for (int t = 0; t < n; ++t) order[t] = mode == 0 ? t : mode == 1 ? n - 1 - t : (int)((t * 37u + b * 11u) % (unsigned)n);
        for (int left = n; left > 0;) {
            bool ran = false;
            for (int i : order) {
                Fiber& f = fibers[i];
                if (f.done || (f.waiting && f.waiting->gen == f.wait_gen)) continue;
                f.waiting = nullptr;
                current = &f;
                swapcontext(&scheduler, &f.ctx);
                ran = true;
                if (f.done) --left;
                if (mode < 2) break;  // rescan from the first
            }
            if (!ran) {
                rc = 3;
                break;
            }
        }
        for (size_t i = 0; i < GUARD; ++i)
            if ((unsigned char)raw[i] != 0xff || (unsigned char)raw[GUARD + smem + i] != 0xff) rc = rc ? rc : 1;
        ::operator delete[](raw, std::align_val_t(16));
    }
    return rc;
}
}  // namespace nt_emu

#define threadIdx (nt_emu::current->tid)
#define blockIdx nt_emu::block_idx
#define blockDim nt_emu::block_dim
#define gridDim nt_emu::grid_dim

static inline void __syncthreads() { nt_emu::arrive(nt_emu::block_barrier); }
static inline void __syncwarp(unsigned = 0xffffffffu) { nt_emu::arrive(nt_emu::warp_barrier[nt_emu::current->linear / 32]); }
static inline float __shfl_xor_sync(unsigned, float v, int o) {
    const int t = nt_emu::current->linear, w = t / 32;
    float* slot = nt_emu::warp_slot.data() + 32 * w;
    slot[t % 32] = v;
    nt_emu::arrive(nt_emu::warp_barrier[w]);
    const float r = slot[(t % 32) ^ o];
    nt_emu::arrive(nt_emu::warp_barrier[w]);
    return r;
}
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline float atomicAdd(float* p, float v) { const float old = *p; *p = old + v; return old; }  // one OS thread
template <class A, class B> static inline std::common_type_t<A, B> min(A a, B b) { return a < b ? a : b; }
"""

LAUNCH = r"""
extern "C" int nt_emu_launch(const char* name, unsigned g, unsigned bx, unsigned by, size_t smem, void** a,
                             int n_args, const int* kinds) {
    auto it = nt_emu::registry().find(name);
    if (it == nt_emu::registry().end()) return 2;
    return it->second(g, bx, by, smem, a, n_args, kinds);
}
"""

_CTYPE_TAG = {"float": "f32", "__half": "f16"}


def _kernel_part(source: str) -> str:
    """``source`` (as NVRTC gets it) in a namespace of its own, so that every source shares one
    translation unit (common.cuh's text, repeated in each, is then no redefinition), and the
    registration of its instantiations."""
    ns = "nt_src_" + Path(source).stem
    text = ck.source_text(source)
    # dynamic shared memory: the block's buffer
    text = re.sub(r"extern __shared__ (\w+) (\w+)\[\];", r"\1* \2 = reinterpret_cast<\1*>(nt_emu::dyn_smem);", text)
    text = text.replace("#pragma once", "")
    reg = []
    for ctype in _CTYPE_TAG:
        for name in ck.name_expressions(source, ctype):
            reg.append(f'    nt_emu::registry()["{name}"] = +[](unsigned g, unsigned bx, unsigned by, size_t s, void** a, int na, '
                       f"const int* kinds) {{ return nt_emu::launch(&{ns}::{name}, g, bx, by, s, a, na, kinds); }};")
    return (f"namespace {ns} {{\n#line 1 \"{source}\"\n{text}\n}}  // namespace {ns}\n"
            f"static bool {ns}_registered = [] {{\n" + "\n".join(reg) + "\n    return true;\n}();\n")


def _params(spec: str):
    return [p.split() for p in spec.split(",")]


def _elementwise_part() -> str:
    """Each ElementwiseKernel body, for float and __half, in a loop over the elements."""
    out = []
    for name, (ins, outs, body) in ck.ELEMENTWISE.items():
        for ctype, tag in _CTYPE_TAG.items():
            lines = [f'extern "C" void {name}_{tag}(void** a, long long n) {{',
                     "    typedef " + ctype + " T;",
                     "    for (long long i = 0; i < n; ++i) {"]
            for k, (typ, var) in enumerate(_params(ins)):
                lines.append(f"        const {typ} {var} = static_cast<const {typ}*>(a[{k}])[i];")
            for typ, var in _params(outs):
                lines.append(f"        {typ} {var};")
            lines.append("        { " + body + " }")
            for k, (typ, var) in enumerate(_params(outs), start=len(_params(ins))):
                lines.append(f"        static_cast<{typ}*>(a[{k}])[i] = {var};")
            lines += ["    }", "}"]
            out.append("\n".join(lines))
    return "\n".join(out) + "\n"


def build(workdir: Path) -> ctypes.CDLL:
    """Compile every kernel source and the elementwise bodies into one shared library under ``workdir``
    (kept there, named by a hash of its source, for the next runs)."""
    return _compile(workdir, PRELUDE + "".join(_kernel_part(src) for src in ck.TEMPLATES) + _elementwise_part() + LAUNCH)


_C_TYPES = {"float32": "float", "float64": "double", "bool": "bool"}  # CuPy's param types as C types


def _generated_kernels_part(code: str, names) -> str:
    """A RawModule's ``extern "C"`` kernels ``names`` and their registration."""
    reg = [f'    nt_emu::registry()["{n}"] = +[](unsigned g, unsigned bx, unsigned by, size_t s, void** a, int na, '
           f"const int* kinds) {{ return nt_emu::launch(&{n}, g, bx, by, s, a, na, kinds); }};" for n in names]
    return f"{code}\nstatic bool nt_generated_registered = [] {{\n" + "\n".join(reg) + "\n    return true;\n}();\n"


def _generated_elementwise_part(in_params: str, out_params: str, body: str) -> str:
    """An ElementwiseKernel's body in a loop over the elements, as ``extern "C" nt_elementwise``."""
    lines = ['extern "C" void nt_elementwise(void** a, long long n) {', "    for (long long i = 0; i < n; ++i) {"]
    params = _params(in_params) + _params(out_params)
    for k, (typ, var) in enumerate(_params(in_params)):
        lines.append(f"        const {_C_TYPES[typ]} {var} = static_cast<const {_C_TYPES[typ]}*>(a[{k}])[i];")
    lines += [f"        {_C_TYPES[typ]} {var};" for typ, var in _params(out_params)]
    lines.append("        { " + body.replace("\n", "\n          ") + " }")
    lines += [f"        static_cast<{_C_TYPES[typ]}*>(a[{k}])[i] = {var};"
              for k, (typ, var) in enumerate(params) if k >= len(_params(in_params))]
    return "\n".join(lines + ["    }", "}"]) + "\n"


def build_generated(workdir: Path, code: str = "", names=(), elementwise=None) -> ctypes.CDLL:
    """A library of generated kernels: ``code``'s ``extern "C"`` kernels ``names`` (launched through
    ``nt_emu_launch``), or an ElementwiseKernel's ``(in_params, out_params, body)`` as ``nt_elementwise``."""
    part = _generated_kernels_part(code, names) if elementwise is None else _generated_elementwise_part(*elementwise)
    return _compile(workdir, PRELUDE + part + LAUNCH)


def _compile(workdir: Path, unit: str) -> ctypes.CDLL:
    """``unit`` compiled into a shared library under ``workdir`` (kept there, named by a hash of its source)."""
    gxx = shutil.which("g++")
    if gxx is None:
        raise RuntimeError("g++ not found")
    asan = ["-fsanitize=address", "-fno-omit-frame-pointer"] if os.environ.get("NT_CUDA_EMULATOR_ASAN") else []
    lib = workdir / f"nt_emu_{hashlib.sha256((unit + ' '.join(asan)).encode()).hexdigest()[:16]}.so"
    if not lib.exists():
        (workdir / "cuda_fp16.h").write_text("// the prelude defines __half\n")
        src = workdir / f"nt_emu_{os.getpid()}.cpp"
        src.write_text(unit)
        tmp = src.with_suffix(".so")
        r = subprocess.run([gxx, "-std=c++20", "-O1", *asan, "-shared", "-fPIC", "-pthread", "-Wno-unknown-pragmas",
                            f"-I{workdir}", str(src), "-o", str(tmp)], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"g++ failed:\n{r.stderr[-6000:]}")
        tmp.replace(lib)  # atomic: a concurrent build of the same source is harmless
        src.unlink()
    dll = ctypes.CDLL(str(lib))
    dll.nt_emu_launch.restype = ctypes.c_int
    return dll


# ----------------------------------------------------------------------------- the fake CuPy


class _Ptr:
    def __init__(self, a):
        self.ptr = a.ctypes.data


class EmuArray(np.ndarray):
    """A NumPy array with CuPy's ``.data.ptr`` and ``.get()``."""

    @property
    def data(self):  # CuPy: a MemoryPointer
        return _Ptr(self)

    def get(self):
        return np.array(self)


def _emu(a) -> EmuArray:
    return np.asarray(a).view(EmuArray)


_SCALARS = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
            np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.float32): ctypes.c_float}


class _Kernel:
    def __init__(self, dll, name: str):
        self.dll, self.name = dll, name
        self.max_dynamic_shared_size_bytes = 48 * 1024

    def __call__(self, grid, block, args, shared_mem: int = 0):
        if shared_mem > self.max_dynamic_shared_size_bytes:
            raise RuntimeError(f"{self.name}: {shared_mem} bytes of dynamic shared memory without the opt-in")
        block = tuple(block) + (1,) * (3 - len(block))
        assert len(grid) == 1 and block[2] == 1, "the launchers use 1-D grids and 2-D blocks"
        assert block[0] * block[1] % 32 == 0 and block[0] * block[1] <= 1024
        keep, ptrs, kinds = [], [], []
        for a in args:
            if isinstance(a, np.ndarray):
                assert a.flags.c_contiguous, f"{self.name}: a non-contiguous array argument"
                c = ctypes.c_void_p(a.ctypes.data)
                kinds.append(0)
            else:
                # a null pointer is passed as a uint64 0: check it as a pointer
                c = _SCALARS[np.asarray(a).dtype](a)
                kinds.append(0 if isinstance(a, np.uint64) else ctypes.sizeof(c))
            keep.append(c)
            ptrs.append(ctypes.addressof(c))
        argv = (ctypes.c_void_p * max(1, len(ptrs)))(*ptrs)
        rc = self.dll.nt_emu_launch(self.name.encode(), ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]),
                                    ctypes.c_uint(block[1]), ctypes.c_size_t(shared_mem), argv,
                                    ctypes.c_int(len(kinds)), (ctypes.c_int * max(1, len(kinds)))(*kinds))
        if rc == 4:
            raise TypeError(f"{self.name}: the arguments (kinds {kinds}) do not match the kernel's parameters")
        if rc == 2:
            raise KeyError(f"no kernel {self.name!r}")
        if rc == 3:
            raise RuntimeError(f"{self.name}: deadlock, every thread of a block waits at a barrier that cannot open")
        if rc:
            raise RuntimeError(f"{self.name}: a block wrote outside its dynamic shared memory")


class _RawModule:
    def __init__(self, dll, code: str, name_expressions):
        self.dll, self.names = dll, set(name_expressions)

    def get_function(self, name: str):
        assert name in self.names, name
        return _Kernel(self.dll, name)


class _Elementwise:
    def __init__(self, dll, in_params, out_params, body, name):
        self.dll, self.name = dll, name
        self.n_in, self.n_out = len(_params(in_params)), len(_params(out_params))

    def __call__(self, *inputs):
        assert len(inputs) == self.n_in
        arrays = np.broadcast_arrays(*[np.asarray(a) for a in inputs])
        dtype = arrays[0].dtype
        assert all(a.dtype == dtype for a in arrays), "T: one dtype"
        arrays = [np.ascontiguousarray(a) for a in arrays]
        outs = [_emu(np.empty(arrays[0].shape, dtype)) for _ in range(self.n_out)]
        tag = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}[dtype]
        ptrs = (ctypes.c_void_p * (self.n_in + self.n_out))(*[a.ctypes.data for a in arrays + outs])
        getattr(self.dll, f"{self.name}_{tag}")(ptrs, ctypes.c_longlong(arrays[0].size))
        return outs[0] if self.n_out == 1 else tuple(outs)


class _GeneratedElementwise:
    """An ElementwiseKernel of a generated body: the inputs broadcast and converted to their params' types."""

    def __init__(self, dll, in_params, out_params):
        self.fn = dll.nt_elementwise
        self.ins = [np.dtype(t) for t, _ in _params(in_params)]
        self.outs = [np.dtype(t) for t, _ in _params(out_params)]

    def __call__(self, *inputs):
        assert len(inputs) == len(self.ins)
        arrays = [np.ascontiguousarray(a, dtype=d) for a, d in zip(np.broadcast_arrays(*map(np.asarray, inputs)), self.ins)]
        outs = [_emu(np.empty(arrays[0].shape, d)) for d in self.outs]
        ptrs = (ctypes.c_void_p * len(arrays + outs))(*[a.ctypes.data for a in arrays + outs])
        self.fn(ptrs, ctypes.c_longlong(arrays[0].size))
        return outs[0] if len(outs) == 1 else tuple(outs)


class _Device:
    def __init__(self, dev=0):
        # small on purpose: the launchers size some grids by it
        self.attributes = {"MultiProcessorCount": 3, "MaxSharedMemoryPerBlockOptin": 227 * 1024}


class FakeCupy:
    """The CuPy calls :mod:`namedtensor.backends.cuda_kernels` makes, on host memory and the emulator."""

    def __init__(self, dll, workdir: Path = None):
        self._dll = dll
        self._workdir = workdir or default_workdir()

        class runtime:
            @staticmethod
            def getDevice():
                return 0

        class cuda:
            Device = _Device

        cuda.runtime = runtime
        self.cuda = cuda

    # arrays
    def asarray(self, a, dtype=None):
        return _emu(np.array(a, dtype=dtype, copy=True))

    def ascontiguousarray(self, a, dtype=None):
        return _emu(np.ascontiguousarray(a, dtype=dtype))

    def empty(self, shape, dtype):
        out = np.empty(shape, dtype)
        if out.dtype.kind == "f":
            out.fill(np.nan)  # an unwritten output shows
        return _emu(out)

    def empty_like(self, a):
        return self.empty(a.shape, a.dtype)

    def zeros(self, shape, dtype):
        return _emu(np.zeros(shape, dtype))

    def RawModule(self, code: str, name_expressions=(), options=()):
        if name_expressions:  # a template of cuda_kernels: built into the library already
            return _RawModule(self._dll, code, name_expressions)
        names = re.findall(r'extern "C" __global__ void (\w+)\(', code)
        return _RawModule(build_generated(self._workdir, code, names), code, names)

    def ElementwiseKernel(self, in_params, out_params, body, name):
        if name in ck.ELEMENTWISE:
            return _Elementwise(self._dll, in_params, out_params, body, name)
        return _GeneratedElementwise(build_generated(self._workdir, elementwise=(in_params, out_params, body)),
                                     in_params, out_params)


def default_workdir() -> Path:
    """A per-user build folder outside the repository (reused while the sources are unchanged)."""
    d = Path(tempfile.gettempdir()) / f"nt_cuda_emulator_{os.getuid() if hasattr(os, 'getuid') else 0}"
    d.mkdir(exist_ok=True)
    return d
