"""The CUDA sources compile: every kernel of ``namedtensor/backends/cuda/*.cu`` and every CuPy
ElementwiseKernel body of :mod:`namedtensor.backends.cuda_kernels`, with ``nvcc`` for sm_80 (A100)
and sm_90 (H100), and with NVRTC (what CuPy compiles them with) where CuPy's NVRTC can be loaded.

The instantiations compiled are exactly the launchers' name expressions
(:func:`~namedtensor.backends.cuda_kernels.name_expressions`), for float and __half.  ptxas's
report (``-Xptxas -v``) gives each kernel's registers, spills and shared memory; the table is
printed (``pytest -s``) and no kernel may spill.  Skipped, saying why, where ``nvcc`` is not on the
PATH.  Nothing is written into the repository (objects go to a temporary folder).
"""

import importlib.util
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from namedtensor.backends import cuda_kernels as ck

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH: the CUDA sources cannot be compiled here")

ARCHS = ("sm_80", "sm_90")
CTYPES = ("float", "__half")


def _keep(names):
    # taking each instantiation's address makes nvcc compile it
    return "static void* const nt_keep[] = {\n" + ",\n".join(f"    (void*)&{n}" for n in names) + "\n};\n"


def _elementwise_source(header="#include <cuda_fp16.h>\n", types=CTYPES):
    """Each ElementwiseKernel body in a __global__ template (inputs const T, outputs T), as CuPy wraps it."""
    parts, names = [header], []
    for name, (ins, outs, body) in ck.ELEMENTWISE.items():
        ins_, outs_ = [p.split() for p in ins.split(",")], [p.split() for p in outs.split(",")]
        params = [f"const {t}* __restrict__ in_{v}" for t, v in ins_] + [f"{t}* __restrict__ out_{v}" for t, v in outs_]
        lines = [f"template <typename T>\n__global__ void nt_ew_{name}({', '.join(params)}, long long n) {{",
                 "    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
                 "    if (i >= n) return;"]
        lines += [f"    const {t} {v} = in_{v}[i];" for t, v in ins_]
        lines += [f"    {t} {v};" for t, v in outs_]
        lines += ["    { " + body + " }"]
        lines += [f"    out_{v}[i] = {v};" for t, v in outs_]
        parts.append("\n".join(lines) + "\n}\n")
        names += [f"nt_ew_{name}<{c}>" for c in types]
    return "".join(parts) + _keep(names), names


def _cupy_include():
    """CuPy's header folder (its float16 class is T in float16 ElementwiseKernels), or None."""
    spec = importlib.util.find_spec("cupy")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "_core" / "include"
    return path if (path / "cupy" / "float16.cuh").exists() else None


def _units():
    """(label, translation unit, expected kernels, extra flags), longest first: the attention kernels
    per element type, the other sources together (nvcc's start-up costs about a second per unit), the
    elementwise bodies (with __half, and with CuPy's float16 where CuPy is installed)."""
    units = [(f"attention.cu [{c}]", f'#include "{ck._DIR / "attention.cu"}"\n' + _keep(n), n, [])
             for c in CTYPES for n in [ck.name_expressions("attention.cu", c)]]
    others = [src for src in ck.TEMPLATES if src != "attention.cu"]
    names = [n for src in others for c in CTYPES for n in ck.name_expressions(src, c)]
    units.append((", ".join(others), "".join(f'#include "{ck._DIR / src}"\n' for src in others) + _keep(names),
                  names, []))
    units.append(("elementwise bodies", *_elementwise_source(), []))
    include = _cupy_include()
    if include is not None:
        units.append(("elementwise bodies [CuPy float16]",
                      *_elementwise_source("#include <cupy/float16.cuh>\n", ("float16",)), [f"-I{include}"]))
    return units


def _nvcc(args):
    label, text, flags, workdir = args
    tu = workdir / (re.sub(r"\W+", "_", label) + ".cu")
    tu.write_text(text)
    cmd = [NVCC, "--fatbin", "-std=c++17", "-ftz=true", "-Xptxas", "-v", "-diag-suppress", "177", *flags,
           *(f"-gencode=arch=compute_{a[3:]},code={a}" for a in ARCHS), "-o", str(tu.with_suffix(".fatbin")), str(tu)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("nvcc")
    units = _units()
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = list(pool.map(_nvcc, [(label, text, flags, workdir) for label, text, _, flags in units]))
    return [(label, names, rc, out) for (label, _, names, _), (rc, out) in zip(units, results)]


_ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(sm_\d+)'")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def _parse(out: str):
    """{(mangled name, arch): (registers, spill stores, spill loads, static smem bytes)} from ptxas -v."""
    found, key, spill = {}, None, (0, 0)
    for line in out.splitlines():
        if m := _ENTRY.search(line):
            key = (m.group(1), m.group(2))
        elif (m := _SPILL.search(line)) and key:
            spill = (int(m.group(2)), int(m.group(3)))
        elif (m := _USED.search(line)) and key:
            found[key] = (int(m.group(1)), *spill, int(m.group(2) or 0))
            key, spill = None, (0, 0)
    return found


def _demangle(names):
    """Mangled -> readable kernel names (``kernel<args>``), by c++filt where it exists."""
    filt = shutil.which("c++filt")
    if filt is None:
        return {n: n for n in names}
    out = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return {n: re.sub(r"^void ", "", d.split("(")[0]) for n, d in zip(names, out)}


def test_every_source_compiles(compiled):
    for label, _, rc, out in compiled:
        assert rc == 0, f"nvcc failed on {label}:\n{out[-4000:]}"


def test_every_kernel_is_built_without_spills(compiled):
    rows = []
    for label, names, rc, out in compiled:
        assert rc == 0, label
        found = _parse(out)
        readable = _demangle(sorted({n for n, _ in found}))
        for arch in ARCHS:
            built = {readable[n] for n, a in found if a == arch}
            # every launcher name expression, and nothing else, was compiled for this arch
            assert len(built) == len(names), (label, arch, sorted(built))
            if shutil.which("c++filt"):
                assert built == set(names), (label, arch, sorted(built ^ set(names)))
        for (n, arch), (regs, stores, loads, smem) in sorted(found.items(), key=lambda kv: (readable[kv[0][0]], kv[0][1])):
            rows.append(f"{readable[n]:<40} {arch}  {regs:>3} regs  {smem:>5} B static smem  "
                        f"spill stores {stores} loads {loads}")
    print("\nptxas resource use (dynamic shared memory of the attention kernels not included):")
    print("\n".join(rows))
    spilled = [r for r in rows if "spill stores 0 loads 0" not in r]
    assert not spilled, "kernels spill registers:\n" + "\n".join(spilled)


def _nvrtc():
    """CuPy's NVRTC binding and the folder holding cuda_fp16.h, or a reason why they are missing."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # CuPy missing, or its NVRTC library not found
        return None, None, f"CuPy's NVRTC cannot be loaded ({type(e).__name__}: {e})"
    candidates = [os.environ.get("CUDA_PATH", ""), "/usr/local/cuda", str(Path(os.path.realpath(NVCC)).parents[1])]
    for c in candidates:
        if c and (Path(c) / "include" / "cuda_fp16.h").exists():
            return nvrtc, str(Path(c) / "include"), None
    return None, None, "cuda_fp16.h not found for NVRTC"


def test_sources_compile_with_nvrtc():
    # what cupy.RawModule does: the source with common.cuh pasted in, the name expressions, their
    # lowered (mangled) names; PTX for compute_80 (nvcc above builds the machine code per arch)
    nvrtc, include, why = _nvrtc()
    if nvrtc is None:
        pytest.skip(why)
    for src in ck.TEMPLATES:
        for ctype in CTYPES:
            prog = nvrtc.createProgram(ck.source_text(src), src, [], [])
            names = ck.name_expressions(src, ctype)
            for n in names:
                nvrtc.addNameExpression(prog, n)
            try:
                nvrtc.compileProgram(prog, ["-arch=compute_80", "-std=c++17", "-ftz=true", f"-I{include}"])
            except nvrtc.NVRTCError as e:
                pytest.fail(f"NVRTC failed on {src} [{ctype}]: {e}\n{nvrtc.getProgramLog(prog)}")
            lowered = [nvrtc.getLoweredName(prog, n) for n in names]
            assert all(lowered) and len(set(lowered)) == len(names)
            assert len(nvrtc.getPTX(prog)) > 0
            nvrtc.destroyProgram(prog)


def _fused_chains():
    """The chains that nt.compile fuses from a function using every formula of the code generators' tables,
    in float32 and float64 (traced on the CPU; only their CUDA C, forward and backward, is used here)."""
    import numpy as np

    import namedtensor as nt
    from namedtensor.nn import functional as F

    def every_formula(x, y):
        a = (x + y) * x - y / (x.abs() + 1) + (-x).square() + x.reciprocal() + x.exp() + x.expm1()
        b = x.abs().log() + x.abs().log1p() + x.abs().sqrt() + x.abs().rsqrt() + x.sin() * x.cos() + x.tanh()
        c = x.erf() + x.sigmoid() + x.relu() + F.silu(x) + x.softplus() + F.gelu(x) + F.gelu(y, approximate="tanh")
        d = (nt.maximum(x, y) + nt.minimum(x, 0.5) + x.abs() ** 1.5 + x.clip(-1, 1) + x ** 2 + x ** 3 + x ** 0.5
             + x ** -1 + x ** 1 + x ** 0 + x.abs() ** -np.inf)
        e = (nt.where(x == y, a, b) + nt.where(x != y, a, 0.0) + nt.where(x < y, 1.0, b) + nt.where(x <= y, a, b)
             + nt.where(x > 0, a, b) + nt.where(x >= 0, a, b) + nt.where(x > y, a, -np.inf) + nt.where(x < y, np.nan, b))
        f = (x.floor() + x.ceil() + x.round() + nt.trunc(x) + nt.frac(y) + x.sign() + nt.where(nt.isnan(x), a, b)
             + nt.where(nt.isinf(y), a, b) + nt.where(nt.isfinite(x), a, b) + nt.nan_to_num(x, 1.0, 2.0, -np.inf)
             + nt.logaddexp(x, y) + x.abs().log2() + nt.exp2(y))
        g = nt.where((nt.logical_and(x, y) & (x < y) | ~nt.logical_or(x, y > 0)) ^ nt.logical_xor(x > 0, nt.logical_not(y)),
                     nt.copysign(x, y), b)
        return a + b + c + d + e + f + g

    from test_compile import cuda_chains

    chains = []
    for dtype in ("float32", "float64"):
        x = nt.tensor(np.ones((2, 3), dtype), names=("a", "b"))
        chains += cuda_chains(every_formula, x, x)
        chains += cuda_chains(lambda x, y: ((x - y).relu() * x).mean("b"), x, x)  # a chain ending in a mean
        for how in ("softmax", "log_softmax"):  # and in a softmax (along the last dim, and by columns along the first), the mask broadcast
            chains += cuda_chains(lambda x, y: getattr(x * 0.5 + y, how)("b"), x, x[0])
    return chains


def test_generated_fused_kernels_compile(tmp_path):
    from namedtensor.compiler import cuda_codegen, formulas

    chains = _fused_chains()
    assert {d[0] for _, d in chains} >= {"float32", "float64"}
    used = {m.op.__name__ for c, _ in chains for m in c.members}
    assert used == set(formulas.SCALAR) | {"_Mean", "_Softmax", "_LogSoftmax"} and set(formulas.GRAD) <= used
    sources, reductions, kernels = [], [], []
    for chain, in_dtypes in chains:
        part, kind, _ = formulas.split_reduction(chain)
        seed = None
        if kind in formulas.SOFTMAXES.values():
            kernels.append(cuda_codegen.softmax_source(chain, in_dtypes, [(2, 3), (3,)], (2, 3))[1])
            # and along the first dim, by columns (the mask's (3,) then broadcast along it)
            kernels.append(cuda_codegen.softmax_columns_source(chain, in_dtypes, [(2, 3), (3,)], (2, 3), 0)[1])
            out = chain.members[-1].dtype
            seed = [(out, "y"), (out, "g"), (out, "d")], formulas.softmax_seed(kind, out)
        elif kind is not None:
            reductions.append(cuda_codegen.reduction_source(chain, in_dtypes, in_dtypes[0], 3))
        else:
            sources.append(cuda_codegen.forward_source(chain, in_dtypes))
        backward = cuda_codegen.backward_source(part, in_dtypes, seed=seed)  # a reduction's: its elementwise part's
        if backward is not None:
            sources.append(backward[:3])
    parts = []
    for k, (ins, outs, body) in enumerate(sources):
        c_type = {"float32": "float", "float64": "double", "bool": "bool"}  # CuPy's typedefs of the param types
        ins_ = [(c_type[t], v) for t, v in (p.split() for p in ins.split(", "))]
        outs_ = [(c_type[t], v) for t, v in (p.split() for p in outs.split(", "))]
        params = [f"const {t}* in_{v}" for t, v in ins_] + [f"{t}* out_{v}" for t, v in outs_]
        lines = [f"__global__ void nt_fused_{k}({', '.join(params)}, long long n) {{",
                 "    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;", "    if (i >= n) return;"]
        lines += [f"    const {t} {v} = in_{v}[i];" for t, v in ins_]
        lines += [f"    {t} {v};" for t, v in outs_]
        lines += ["    { " + body.replace("\n", "\n      ") + " }"]
        lines += [f"    out_{v}[i] = {v};" for t, v in outs_]
        parts.append("\n".join(lines) + "\n}\n")
    c_type = {"float32": "float", "float64": "double"}
    for k, (ins, out, mapped, post, preamble) in enumerate(reductions):  # as CuPy wraps a ReductionKernel
        ins_ = [(c_type[t], v) for t, v in (p.split() for p in ins.split(", "))]
        out_type = c_type[out.split()[0]]
        params = ", ".join([f"const {t}* in_{v}" for t, v in ins_] + [f"{out_type}* out_y"])
        loads = "".join(f"    const {t} {v} = in_{v}[i];\n" for t, v in ins_)
        parts.append(f"namespace r{k} {{\n{preamble}__global__ void nt_reduce_{k}({params}, long long n) {{\n"
                     "    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= n) return;\n"
                     f"{loads}    double a = {mapped};\n    {out_type} y;\n    {post};\n    out_y[i] = y;\n}}\n}}\n")
    assert len(reductions) == 2 and len(kernels) == 8
    rc, out = _nvcc(("fused", "".join(parts + kernels), [], tmp_path))
    assert rc == 0, out
