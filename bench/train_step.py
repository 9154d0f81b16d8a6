"""One training step of a pre-norm Transformer block: namedtensor against PyTorch eager (CPU).

The step is forward, backward and an AdamW update of a block (batch 16, seq 128, model 256,
8 heads, MLP 1024) on the loss mean((block(x) - target)^2).  Both libraries start from the same
weights, the script checks that their first losses agree, then the two steps take turns in
shuffled rounds in this one process; figures are median milliseconds per step and the median
of the per-round ratios.  Peak memory is measured in a separate process per library: after one
warm-up step, the high-water mark of the resident set over three more steps minus the resident set
before them (Linux's VmHWM, restarted through /proc/self/clear_refs), so the libraries' code, the
weights, the optimizer's state and one-time buffers are not counted: what remains is the step's
activations, gradients and temporaries.

    pip install torch==2.13.0                       # the PyTorch column (a CPU build)
    python bench/train_step.py [--threads 2] [--rounds 15] [--causal]

Both libraries use the same number of threads: ``torch.set_num_threads`` and
``nt.set_num_threads`` (BLAS and namedtensor's fused kernels; ``OPENBLAS_NUM_THREADS`` is also set
before NumPy loads).  OpenBLAS tuning variables that this
workplace sets for old CPUs slow NumPy down; they are removed here, in this script's own
environment only.
"""

from __future__ import annotations

import argparse
import os
import sys

_OPENBLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--model", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--mlp", type=int, default=1024)
    p.add_argument("--causal", action="store_true", help="causal self-attention")
    p.add_argument("--memory-child", choices=("namedtensor", "torch"), help=argparse.SUPPRESS)
    return p.parse_args()


ARGS = _parse()
if not os.environ.get("_NT_BENCH_CHILD"):
    env = {k: v for k, v in os.environ.items() if k not in _OPENBLAS}
    env.update(_NT_BENCH_CHILD="1", OPENBLAS_NUM_THREADS=str(ARGS.threads), OMP_NUM_THREADS=str(ARGS.threads))
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import namedtensor as nt  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

LR = 1e-3
NAMES = ("batch", "seq", "embed")


def initial_weights(a: argparse.Namespace) -> dict:
    """The block's weights as NumPy arrays, PyTorch layout (out, in), shared by both libraries."""
    rng = np.random.default_rng(0)
    d, m = a.model, a.mlp

    def lin(n_out, n_in):
        bound = 1 / np.sqrt(n_in)
        return (rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                rng.uniform(-bound, bound, (n_out,)).astype(np.float32))

    w = {}
    for name, (n_out, n_in) in {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d), "fc1": (m, d),
                                "fc2": (d, m)}.items():
        w[name + ".weight"], w[name + ".bias"] = lin(n_out, n_in)
    for ln in ("ln1", "ln2"):
        w[ln + ".weight"] = np.ones(d, np.float32)
        w[ln + ".bias"] = np.zeros(d, np.float32)
    return w


def data(a: argparse.Namespace):
    rng = np.random.default_rng(1)
    shape = (a.batch, a.seq, a.model)
    return rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32)


# ----------------------------------------------------------------------------- namedtensor


def nt_step_fn(a: argparse.Namespace):
    block = nt.nn.TransformerBlock("embed", a.model, a.heads, a.mlp)
    w = initial_weights(a)
    sd = block.state_dict()
    ours = {
        "attn.q_proj": "q", "attn.k_proj": "k", "attn.v_proj": "v", "attn.out_proj": "o",
        "mlp.fc1": "fc1", "mlp.fc2": "fc2", "norm1": "ln1", "norm2": "ln2",
    }
    new = {}
    for key in sd:
        prefix, leaf = key.rsplit(".", 1)
        new[key] = nt.tensor(w[ours[prefix] + "." + leaf], names=sd[key].names)
    block.load_state_dict(new)
    opt = nt.optim.AdamW(block.parameters(), lr=LR)
    x_np, y_np = data(a)
    x, y = nt.tensor(x_np, names=NAMES), nt.tensor(y_np, names=NAMES)

    def step() -> float:
        out = block(x, is_causal=a.causal)
        loss = nt.nn.functional.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return step


# ----------------------------------------------------------------------------- PyTorch


def torch_step_fn(a: argparse.Namespace):
    F = torch.nn.functional
    d, h = a.model, a.heads

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = torch.nn.Linear(d, a.mlp), torch.nn.Linear(a.mlp, d)

        def forward(self, x):
            b, t, _ = x.shape
            z = self.ln1(x)
            heads = [f(z).view(b, t, h, d // h).transpose(1, 2) for f in (self.q, self.k, self.v)]
            att = F.scaled_dot_product_attention(*heads, is_causal=a.causal)
            x = x + self.o(att.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    block = Block()
    block.load_state_dict({k: torch.from_numpy(v) for k, v in initial_weights(a).items()})
    opt = torch.optim.AdamW(block.parameters(), lr=LR)
    x_np, y_np = data(a)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    def step() -> float:
        loss = F.mse_loss(block(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return step


# ----------------------------------------------------------------------------- measuring


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_child(which: str) -> None:
    """Print the peak growth of the resident set (MB) over three steps of one library, after one
    warm-up step (which allocates the optimizer's state and the libraries' one-time buffers)."""
    if which == "torch":
        torch.set_num_threads(ARGS.threads)
    else:
        nt.set_num_threads(ARGS.threads)
    step = (nt_step_fn if which == "namedtensor" else torch_step_fn)(ARGS)
    step()
    before = _status_mb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # restart the high-water mark (VmHWM) from the current resident set
    for _ in range(3):
        step()
    print(f"{max(_status_mb('VmHWM') - before, 0.0):.1f}")


def peak_memory(which: str) -> float:
    cmd = [sys.executable, __file__, *sys.argv[1:], "--memory-child", which]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ).stdout
    return float(out.strip().splitlines()[-1])


def interleaved(steps: dict, rounds: int) -> dict:
    names = list(steps)
    times = {n: [] for n in names}
    shuffle = random.Random(0).shuffle
    for fn in steps.values():  # warm-up: first-call allocations and caches
        fn()
        fn()
    for _ in range(rounds):
        shuffle(names)
        for n in names:
            t0 = time.perf_counter()
            steps[n]()
            times[n].append((time.perf_counter() - t0) * 1e3)
    return times


def main() -> None:
    if ARGS.memory_child:
        memory_child(ARGS.memory_child)
        return
    a = ARGS
    print(f"Transformer block train step: batch {a.batch}, seq {a.seq}, model {a.model}, heads {a.heads}, "
          f"MLP {a.mlp}, {'causal' if a.causal else 'full'} attention, float32, {a.threads} thread(s)")
    steps = {"namedtensor": nt_step_fn(a)}
    if torch is None:
        print("PyTorch is not installed (pip install torch==2.13.0): namedtensor column only.")
    else:
        torch.set_num_threads(a.threads)
        steps["torch"] = torch_step_fn(a)
        first = {n: fn() for n, fn in steps.items()}
        if abs(first["namedtensor"] - first["torch"]) > 1e-4 * abs(first["torch"]):
            raise SystemExit(f"the two blocks disagree: first losses {first}")
        print(f"first loss: namedtensor {first['namedtensor']:.6f}, torch {first['torch']:.6f} (same weights)")
    nt.set_num_threads(a.threads)
    times = interleaved(steps, a.rounds)
    memory = {n: peak_memory(n) for n in steps}
    print()
    print("| library | median ms/step | ratio to torch | peak memory growth (MB) |")
    print("|---|---|---|---|")
    for n in steps:
        med = statistics.median(times[n])
        if "torch" in times:
            ratio = statistics.median(t / b for t, b in zip(times[n], times["torch"]))
            ratio_s = f"{ratio:.2f}x"
        else:
            ratio_s = "-"
        print(f"| {n} | {med:.1f} | {ratio_s} | {memory[n]:.1f} |")


if __name__ == "__main__":
    main()
