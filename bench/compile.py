"""nt.compile against eager execution: TorchScript's loop, the Transformer block's training step, compile time.

Three tables, each timed side by side in this process (columns take turns in shuffled rounds, each
sample after an untimed call of its own: bench/side_by_side.py; figures are medians in ms, ratios
medians of per-round ratios):

* ``loop``: PyTorch's TorchScript example ``for _ in range(10): x = x * x`` on float32 vectors of
  several sizes: NumPy, namedtensor eager, namedtensor compiled (one fused kernel), PyTorch eager (a
  sample is the mean of as many calls as eager makes in 2 ms: a single call of a few microseconds would
  time mostly the timer).
* ``softmax``: scale + mask + softmax of attention scores written by hand (``(s * 0.17 + mask).softmax``
  over the keys; batch 16, 8 heads, 128 queries and keys, a causal mask), forward and forward plus
  backward: namedtensor eager, compiled (one kernel each way), PyTorch eager.
* ``chains``: chains whose kernels the compiler's choices decide (2M elements, forward), eager against
  compiled: an ELU (``expm1``), softplus, mish, ``logaddexp`` and a binary cross-entropy with logits (dependent
  math calls, run stage by stage over each chunk), fake quantization (``round`` and ``clamp``), a mask of comparisons
  joined by ``&``, ``|`` and ``~`` in a ``where``, a softmax over a middle dim of
  attention scores ``(batch, key, head, query)`` (by columns), float32 ``x ** 4`` with negative bases
  (``powi32``; NumPy's pow does those one at a time) and float32 ``(x * w) ** 1.5 + x`` (left to NumPy's
  SIMD ``pow`` where it has one).
* ``step``: one training step (forward, backward, AdamW) of bench/train_step.py's block (batch 16, seq
  128, model 256, 8 heads, MLP 1024): eager (``AdamW()``), the block and its loss compiled (one function)
  with ``AdamW(fused=True)``, the whole step compiled (its backward and update steps of the graph),
  PyTorch eager with ``AdamW(fused=True)`` (its fastest CPU update), and JAX
  with the whole step (loss,
  ``jax.grad``, the AdamW update) under one ``jax.jit``; against the matmul floor, the step's 10.47 GFLOP
  of matrix products at the float32 matmul rate measured here on the same threads (the best of 30 calls
  of one of its products), and beside them the step's products alone, as the compiled step makes them
  but on arrays made beforehand (``products_alone``: what the step would take if nothing else took
  any time, at the rates these products sustain).  Peak memory as
  train_step.py measures it (the heap trimmed after the warm-up step), each column in a process of its
  own that made that column's step alone; then eager and compiled each alone in a process, as a training
  script runs them, compiled also with ``nt.retain_freed_memory(False)``.
* ``compile``: the compiled block's first call minus a later one (tracing, passes, kernel generation and
  Numba's compilation), in a new process with an empty kernel cache and in a second process that finds
  the cache (``NAMEDTENSOR_CACHE_DIR``), with the part of it that is Numba's own start there (importing
  Numba and loading a first cached kernel, in a process of its own, with the garbage collector paused
  as nt.compile pauses it); and the same for JAX's jitted step (XLA compiles in memory).

    pip install torch==2.13.0 numba jax      # the PyTorch and JAX columns; the fused CPU kernels
    python bench/compile.py [--threads 1] [--rounds 15] [--part loop|softmax|chains|step|compile]

A library that is not installed has no column.  JAX runs on as many threads as the others (XLA's
Eigen thread pool off for one thread).  OpenBLAS tuning variables that this workplace sets for old
CPUs slow NumPy down; they are removed here, in this script's own environment only.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from own_env import run_in_own_environment
from side_by_side import interleaved
HERE = Path(__file__).resolve().parent


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--part", choices=("loop", "softmax", "chains", "step", "compile", "all"), default="all")
    p.add_argument("--child", choices=("memory eager", "memory compiled", "memory compiled whole step", "memory torch",
                                       "memory jax", "compile time",
                                       "numba start", "jax compile time", "alone eager", "alone compiled", "alone compiled unretained"),
                   help=argparse.SUPPRESS)
    return p.parse_args()


ARGS = _parse()
# on 1 thread, XLA's CPU client would otherwise run its operations on a pool of every core
run_in_own_environment(ARGS.threads, {"XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
                                                    "intra_op_parallelism_threads=1").strip()} if ARGS.threads == 1 else None)

import numpy as np  # noqa: E402

import namedtensor as nt  # noqa: E402


def _train_step_module():
    """bench/train_step.py's models and steps (its argument parsing sees only the thread count)."""
    argv, sys.argv = sys.argv, [str(HERE / "train_step.py"), "--threads", str(ARGS.threads)]
    try:
        spec = importlib.util.spec_from_file_location("train_step", HERE / "train_step.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.argv = argv
    return module


TS = _train_step_module()
torch = TS.torch
try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None


def ratio(times: dict, a: str, b: str) -> float:
    return statistics.median(x / y for x, y in zip(times[a], times[b]))


# ----------------------------------------------------------------------------- the loop


def loop(x):
    for _ in range(10):
        x = x * x
    return x


def loop_table() -> None:
    print(f"\n`for _ in range(10): x = x * x` on float32 vectors, {ARGS.threads} thread(s), ms")
    print("| elements | NumPy | eager | compiled | PyTorch eager | eager / compiled | NumPy / compiled |")
    print("|---|---|---|---|---|---|---|")
    compiled = nt.compile(loop)
    for n in (4096, 262144, 4194304):
        a = np.random.default_rng(0).uniform(0.9999, 1.0001, n).astype(np.float32)  # no underflow in x**1024
        x = nt.tensor(a, names=("i",))
        fns = {"numpy": lambda: loop(a), "eager": lambda: loop(x), "compiled": lambda: compiled(x)}
        if torch is not None:
            ta = torch.from_numpy(a)
            fns["torch"] = lambda: loop(ta)
        np.testing.assert_allclose(compiled(x).numpy(), loop(a), rtol=1e-5)
        t0 = time.perf_counter()
        loop(x)
        times = interleaved(fns, ARGS.rounds * 2, number=max(1, round(2e-3 / (time.perf_counter() - t0))))
        med = {k: statistics.median(v) for k, v in times.items()}
        torch_s = f"{med['torch']:.4f}" if "torch" in med else "-"
        print(f"| {n} | {med['numpy']:.4f} | {med['eager']:.4f} | {med['compiled']:.4f} | {torch_s} | "
              f"{ratio(times, 'eager', 'compiled'):.2f}x | {ratio(times, 'numpy', 'compiled'):.2f}x |")


# ----------------------------------------------------------------------------- scale + mask + softmax


def attention_weights(s, mask):
    return (s * 0.17 + mask).softmax(-1)


def softmax_table() -> None:
    print(f"\nscale + mask + softmax of scores (16, 8, 128, 128) float32 over the keys, {ARGS.threads} thread(s), ms")
    print("| pass | eager | compiled | PyTorch eager | eager / compiled |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 8, 128, 128), dtype=np.float32)
    m = np.triu(np.full((128, 128), -np.inf, np.float32), 1)  # causal
    g_np = rng.standard_normal(a.shape, dtype=np.float32)
    names = ("batch", "head", "query", "key")
    s = nt.tensor(a, names=names).requires_grad_()
    mask, g = nt.tensor(m, names=("query", "key")), nt.tensor(g_np, names=names)
    compiled = nt.compile(attention_weights)
    np.testing.assert_allclose(compiled(s, mask).detach().numpy(), attention_weights(s, mask).detach().numpy(),
                               rtol=1e-5, atol=1e-6)

    def forward(fn, no_grad, x, mask, g):
        def run():
            with no_grad():
                fn(x, mask)
        return run

    def both(fn, grad, x, mask, g):
        return lambda: grad(fn(x, mask), [x], g)

    if torch is not None:
        ts, tm, tg = torch.from_numpy(a).requires_grad_(), torch.from_numpy(m), torch.from_numpy(g_np)
    for label, make in (("forward", forward), ("forward + backward", both)):
        way = nt.no_grad if make is forward else nt.grad
        fns = {"eager": make(attention_weights, way, s, mask, g), "compiled": make(compiled, way, s, mask, g)}
        if torch is not None:
            fns["torch"] = make(attention_weights, torch.no_grad if make is forward else torch.autograd.grad,
                                ts, tm, tg)
        times = interleaved(fns, ARGS.rounds * 2)
        med = {k: statistics.median(v) for k, v in times.items()}
        torch_s = f"{med['torch']:.2f}" if "torch" in med else "-"
        print(f"| {label} | {med['eager']:.2f} | {med['compiled']:.2f} | {torch_s} | "
              f"{ratio(times, 'eager', 'compiled'):.2f}x |")


# ----------------------------------------------------------------------------- chains the compiler chooses for


def _chain_cases() -> dict:
    rng = np.random.default_rng(0)
    x = nt.tensor(rng.standard_normal(2_000_000, dtype=np.float32), names=("i",))
    w = nt.tensor(rng.uniform(0.5, 2.0, 2_000_000).astype(np.float32), names=("i",))
    scores = nt.tensor(rng.standard_normal((16, 128, 8, 128), dtype=np.float32), names=("batch", "key", "head", "query"))
    logits = nt.tensor(rng.standard_normal((2000, 1000), dtype=np.float32) * 3, names=("batch", "label"))
    labels = nt.tensor((rng.uniform(size=(2000, 1000)) < 0.3).astype(np.float32), names=("batch", "label"))
    return {
        "ELU, float64": (lambda x: nt.where(x > 0, x, 1.5 * x.expm1()), (x.to("float64"),)),
        "softplus": (lambda x: x.softplus(), (x,)),
        "mish": (lambda x: x * x.softplus().tanh(), (x,)),
        "logaddexp": (lambda x, w: nt.logaddexp(x, w), (x, w)),
        "BCE with logits": (lambda z, y: nt.nn.functional.binary_cross_entropy_with_logits(z, y), (logits, labels)),
        "fake quantization": (lambda x: (x / 0.05).round().clamp(-128, 127) * 0.05, (x,)),
        "mask": (lambda x, w: nt.where((x > 0) & (x < 1) | ~(w > 1.5), x * w, 0.0), (x, w)),
        "softmax over a middle dim": (lambda s: (s * 0.17).softmax("key"), (scores,)),
        "x ** 4, negative bases": (lambda x, w: x ** 4 * w, (x, w)),
        "(x * w) ** 1.5 + x": (lambda x, w: (x.abs() * w) ** 1.5 + x, (x, w)),
    }


def chains_table() -> None:
    print(f"\nchains, 2M float32 elements (ELU: float64), forward, {ARGS.threads} thread(s), ms")
    print("| chain | eager | compiled | eager / compiled |")
    print("|---|---|---|---|")
    for label, (fn, args) in _chain_cases().items():
        compiled = nt.compile(fn)
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(compiled(*args).numpy(), fn(*args).numpy(), rtol=2e-6, atol=1e-6)
            times = interleaved({"eager": lambda: fn(*args), "compiled": lambda: compiled(*args)}, ARGS.rounds * 2)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"| {label} | {med['eager']:.2f} | {med['compiled']:.2f} | {ratio(times, 'eager', 'compiled'):.2f}x |")


# ----------------------------------------------------------------------------- the training step


def step_args() -> argparse.Namespace:
    return argparse.Namespace(batch=16, seq=128, model=256, heads=8, mlp=1024, causal=False)


def matmul_gflop(a: argparse.Namespace) -> float:
    """The step's matrix products: the forward's projections, MLP and attention scores and values; the
    backward does twice that (one product for the input's gradient, one for the weight's)."""
    rows = a.batch * a.seq
    dense = 2 * rows * (4 * a.model * a.model + 2 * a.model * a.mlp)
    attention = 2 * 2 * a.batch * a.seq * a.seq * a.model
    return 3 * (dense + attention) / 1e9


def matmul_rate() -> float:
    """The best float32 GFLOP/s of products shaped as the step's (2048 x 256 @ 256 x 1024), on these threads:
    OpenBLAS's own threads, or namedtensor's pool sharing the product among single-threaded BLAS calls
    (what nt.set_num_threads sets up), whichever is faster."""
    from namedtensor.backends import numpy_kernels

    x = np.random.default_rng(0).standard_normal((2048, 256), dtype=np.float32)
    w = np.random.default_rng(1).standard_normal((256, 1024), dtype=np.float32)
    best = float("inf")
    for product in (np.matmul, nt.backends.cpu().matmul):
        with numpy_kernels.blas_threads() if product is np.matmul else contextlib.nullcontext():
            for _ in range(30):
                t0 = time.perf_counter()
                product(x, w)
                best = min(best, time.perf_counter() - t0)
    return 2 * 2048 * 256 * 1024 / best / 1e9


def products_alone(a: argparse.Namespace):
    """The step's matrix products alone, as the compiled step makes them, on arrays made beforehand: each
    linear layer's forward product (the backend's ``matmul``, shared among the pool's threads) and its two
    gradients side by side (``matmuls``), and attention's seven products per block of 8 heads (scores and
    output; ``dP^T``, the scores again, and the three gradients), the blocks shared out as numpy_attention
    shares them, each operand laid out as the compiled blocks have it.  The step's time if all else took
    none: where it stands against the floor is the products' own rate."""
    from namedtensor.backends import numpy_attention

    B = nt.backends.cpu()
    rng = np.random.default_rng(0)
    rows, d, hd = a.batch * a.seq, a.model, a.model // a.heads

    def randn(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    dense = [(randn(rows, n_in), randn(n_out, n_in), randn(rows, n_out))
             for n_in, n_out in [(d, d)] * 4 + [(d, a.mlp), (a.mlp, d)]]  # q, k, v, out, fc1, fc2
    q, k, v, g = (randn(a.batch, a.seq, a.heads, hd).transpose(0, 2, 1, 3) for _ in range(4))  # head-major views
    copies = [(np.ascontiguousarray(np.swapaxes(q[b], -1, -2)), np.ascontiguousarray(q[b]),
               np.ascontiguousarray(np.swapaxes(g[b], -1, -2))) for b in range(a.batch)]

    def block(b: int) -> None:
        qt, qs, gt = copies[b]
        s = np.matmul(k[b], qt)
        np.matmul(np.swapaxes(s, -1, -2), v[b])
        ds = np.matmul(v[b], gt)
        p = np.matmul(k[b], qt)
        np.matmul(p, g[b])
        np.matmul(np.swapaxes(ds, -1, -2), k[b])
        np.matmul(ds, qs)

    def run() -> None:
        for x, w, gy in dense:
            B.matmul(x, w.T)
            B.matmuls([(gy, w), (gy.T, x)])
        numpy_attention._run(list(range(a.batch)), block)

    return run


def jax_step_fn(a: argparse.Namespace):
    """The block's step in JAX: the same weights, data, loss and AdamW (PyTorch's defaults, as the other
    columns), the whole step one jitted function whose old parameters and moments are donated."""
    d, h = a.model, a.heads

    def layer_norm(x, w, b):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * w + b

    def linear(p, name, x):
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def block(p, x):
        b, t, _ = x.shape
        z = layer_norm(x, p["ln1.weight"], p["ln1.bias"])
        q, k, v = (linear(p, n, z).reshape(b, t, h, d // h) for n in ("q", "k", "v"))
        att = jax.nn.dot_product_attention(q, k, v, is_causal=a.causal)  # (batch, seq, head, head_dim)
        x = x + linear(p, "o", att.reshape(b, t, d))
        return x + linear(p, "fc2", jax.nn.gelu(linear(p, "fc1", layer_norm(x, p["ln2.weight"], p["ln2.bias"])),
                                                 approximate=False))

    def loss_fn(p, x, y):
        return jnp.mean((block(p, x) - y) ** 2)

    beta1, beta2, eps, decay = 0.9, 0.999, 1e-8, 1e-2

    def train(p, m, v, t, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        m = jax.tree.map(lambda m, g: beta1 * m + (1 - beta1) * g, m, g)
        v = jax.tree.map(lambda v, g: beta2 * v + (1 - beta2) * g * g, v, g)
        step_size = TS.LR / (1 - beta1 ** t)
        root = jnp.sqrt(1 - beta2 ** t)
        p = jax.tree.map(lambda p, m, v: p * (1 - TS.LR * decay) - step_size * m / (jnp.sqrt(v) / root + eps),
                         p, m, v)
        return p, m, v, loss

    run = jax.jit(train, donate_argnums=(0, 1, 2))
    state = {"p": {k: jnp.asarray(w) for k, w in TS.initial_weights(a).items()}}
    state["m"] = jax.tree.map(jnp.zeros_like, state["p"])
    state["v"] = jax.tree.map(jnp.zeros_like, state["p"])
    state["t"] = 0
    x_np, y_np = TS.data(a)
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)

    def step() -> float:
        state["t"] += 1
        state["p"], state["m"], state["v"], loss = run(state["p"], state["m"], state["v"],
                                                       jnp.float32(state["t"]), x, y)
        return float(loss)

    return step


def step_makers() -> dict:
    """The columns' makers of a step function, by column name."""
    a = step_args()
    makers = {"eager": lambda: TS.nt_step_fn(a), "compiled": lambda: TS.nt_step_fn(a, compiled=True, fused=True),
              "compiled whole step": lambda: TS.nt_step_fn(a, compiled=True, fused=True, whole=True)}
    if torch is not None:
        makers["torch"] = lambda: TS.torch_step_fn(a, fused=True)
    if jax is not None:
        makers["jax"] = lambda: jax_step_fn(a)
    return makers


def steps() -> dict:
    return {name: make() for name, make in step_makers().items()}


def step_table() -> None:
    a = step_args()
    nt.set_num_threads(ARGS.threads)
    if torch is not None:
        torch.set_num_threads(ARGS.threads)
    fns = steps()
    first = {n: fn() for n, fn in fns.items()}
    if abs(first["compiled"] - first["eager"]) > 1e-5 * abs(first["eager"]):
        raise SystemExit(f"compiled and eager disagree: first losses {first}")
    if any(abs(loss - first["eager"]) > 1e-4 * abs(first["eager"]) for loss in first.values()):
        raise SystemExit(f"the libraries disagree: first losses {first}")
    floor = matmul_gflop(a) / matmul_rate() * 1e3
    times = interleaved({**fns, "products alone": products_alone(a)}, ARGS.rounds)
    memory = {n: _child_number(f"memory {n}") for n in fns}
    print(f"\nblock training step, {ARGS.threads} thread(s): matmul floor {floor:.1f} ms "
          f"({matmul_gflop(a):.2f} GFLOP at the measured float32 rate)")
    print("| run | median ms/step | / matmul floor | / PyTorch eager | peak memory growth (MB) |")
    print("|---|---|---|---|---|")
    for n in fns:
        med = statistics.median(times[n])
        vs_torch = f"{ratio(times, n, 'torch'):.2f}x" if "torch" in times else "-"
        print(f"| {n} | {med:.1f} | {med / floor:.2f}x | {vs_torch} | {memory[n]:.1f} |")
    products = statistics.median(times["products alone"])
    print(f"| the step's matrix products alone | {products:.1f} | {products / floor:.2f}x | - | - |")
    print(f"\ncompiled / its products alone: {ratio(times, 'compiled', 'products alone'):.2f}x")
    alone = {w: _child_number(f"alone {w}") for w in ("eager", "compiled", "compiled unretained")}
    print(f"\neach in a process of its own ({ARGS.rounds * 2} steps): eager {alone['eager']:.1f} ms, compiled "
          f"{alone['compiled']:.1f} ms ({alone['compiled'] / floor:.2f}x the floor), compiled with "
          f"nt.retain_freed_memory(False) {alone['compiled unretained']:.1f} ms")


def alone_child(which: str) -> None:
    """The median step of one column in a process of its own, as a training script runs it: the heap's
    state is then the step's alone (in the side-by-side process the other libraries' large allocations
    have already raised glibc's mmap threshold).  ``unretained``: with nt.retain_freed_memory(False)."""
    nt.set_num_threads(ARGS.threads)
    kind, _, unretained = which.partition(" ")
    if unretained:
        nt.retain_freed_memory(False)
    step = TS.nt_step_fn(step_args(), compiled=kind == "compiled", fused=kind == "compiled")
    for _ in range(5):
        step()
    times = []
    for _ in range(ARGS.rounds * 2):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    print(f"{statistics.median(times) * 1e3:.2f}")


def memory_child(which: str) -> None:
    """The peak memory growth of one column's steps, in a process that made that column's step alone, as a
    training script does (the other columns' large allocations would move glibc's thresholds)."""
    nt.set_num_threads(ARGS.threads)
    if torch is not None:
        torch.set_num_threads(ARGS.threads)
    step = step_makers()[which]()
    step()
    # a heap that keeps freed memory (nt.retain_freed_memory, which nt.compile turns on) would otherwise
    # count the warm-up step's arrays as the baseline: give them back first, so that every column's
    # growth is its step's whole working set
    ctypes.CDLL(None).malloc_trim(0)
    before = TS._status_mb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    for _ in range(3):
        step()
    print(f"{max(TS._status_mb('VmHWM') - before, 0.0):.1f}")


# ----------------------------------------------------------------------------- compile time


def compile_time_child() -> None:
    a = step_args()
    nt.set_num_threads(ARGS.threads)
    block = nt.nn.TransformerBlock("embed", a.model, a.heads, a.mlp)
    x = nt.randn(a.batch, a.seq, a.model, names=TS.NAMES)
    compiled = nt.compile(block)
    t0 = time.perf_counter()
    compiled(x).sum().backward()
    first = time.perf_counter() - t0
    later = []
    for _ in range(3):
        t0 = time.perf_counter()
        compiled(x).sum().backward()
        later.append(time.perf_counter() - t0)
    print(f"{first - min(later):.3f}")


def numba_start_child() -> None:
    """Importing Numba and running a first kernel that its cache holds: what a warm process pays before
    any of the compiler's own work (with the garbage collector paused, as nt.compile pauses it)."""
    import gc

    t0 = time.perf_counter()
    gc.disable()
    from namedtensor.backends import numba_kernels

    d = np.zeros((1, 1, 1), np.float32)
    numba_kernels.softmax_columns_backward(d, d, d)
    gc.enable()
    print(f"{time.perf_counter() - t0:.3f}")


def jax_compile_time_child() -> None:
    step = jax_step_fn(step_args())
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    later = []
    for _ in range(3):
        t0 = time.perf_counter()
        step()
        later.append(time.perf_counter() - t0)
    print(f"{first - min(later):.3f}")


def _child_number(which: str, env: dict = None) -> float:
    cmd = [sys.executable, __file__, "--threads", str(ARGS.threads), "--child", which]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env or os.environ).stdout
    return float(out.strip().splitlines()[-1])


def compile_table() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NAMEDTENSOR_CACHE_DIR=cache)
        cold = _child_number("compile time", env)
        warm = _child_number("compile time", env)
        numba_start = _child_number("numba start", env)
    print(f"\ncompiling the block (first call minus a later one, forward and backward), {ARGS.threads} thread(s)")
    print("| process | compile time (s) |")
    print("|---|---|")
    print(f"| new, empty kernel cache | {cold:.2f} |")
    print(f"| second, kernel cache on disk | {warm:.2f} |")
    print(f"| Numba's own start in such a process (import, a first cached kernel) | {numba_start:.2f} |")
    if jax is not None:
        print(f"| JAX `jit` of the whole step, new process | {_child_number('jax compile time'):.2f} |")


def main() -> None:
    if ARGS.child == "compile time":
        compile_time_child()
        return
    if ARGS.child == "numba start":
        numba_start_child()
        return
    if ARGS.child == "jax compile time":
        jax_compile_time_child()
        return
    if ARGS.child and ARGS.child.startswith("alone"):
        alone_child(ARGS.child.partition(" ")[2])
        return
    if ARGS.child:
        memory_child(ARGS.child.partition(" ")[2])
        return
    if torch is None:
        print("PyTorch is not installed (pip install torch==2.13.0): no PyTorch column.")
    if jax is None:
        print("JAX is not installed (pip install jax): no JAX column.")
    parts = ("loop", "softmax", "chains", "step", "compile") if ARGS.part == "all" else (ARGS.part,)
    nt.set_num_threads(ARGS.threads)
    if "loop" in parts:
        loop_table()
    if "softmax" in parts:
        softmax_table()
    if "chains" in parts:
        chains_table()
    if "step" in parts:
        step_table()
    if "compile" in parts:
        compile_table()


if __name__ == "__main__":
    main()
