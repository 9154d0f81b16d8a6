"""One training step of a pre-norm Transformer block or a GPT: namedtensor against PyTorch eager (CPU).

The step is forward, backward and an AdamW update of a block (batch 16, seq 128, model 256,
8 heads, MLP 1024) on the loss mean((block(x) - target)^2).  Both libraries start from the same
weights, the script checks that their first losses agree, then the two steps take turns in
shuffled rounds in this one process, each timed step after an untimed one of its own
(bench/side_by_side.py); figures are median milliseconds per step and the median of the per-round
ratios.  Peak memory is measured in a separate process per library: after one
warm-up step, the high-water mark of the resident set over three more steps minus the resident set
before them (Linux's VmHWM, restarted through /proc/self/clear_refs), so the libraries' code, the
weights, the optimizer's state and one-time buffers are not counted: what remains is the step's
activations, gradients and temporaries.

    pip install torch==2.13.0                       # the PyTorch column (a CPU build)
    python bench/train_step.py [--threads 2] [--rounds 15] [--causal]
    python bench/train_step.py --gpt [--threads 2] [--rounds 15]

With ``--gpt`` the step is that of a GPT language model (token and position embeddings, 2 pre-norm
blocks of causal self-attention and a 4x GELU MLP, 4 heads, width 128, block 64, the head tied to
the token embedding, vocabulary 64, batch 16) on the next-token cross-entropy of random tokens.
namedtensor runs it twice: written with named dims (``nn.Linear("embed", "qkv", ...)``,
``nt.rearrange``, attention and loss by name) and written as PyTorch code on unnamed tensors
(``nn.Linear(128, 384)``, ``view``/``transpose``, ``F.cross_entropy(logits.view(-1, V), ...)``).

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

from gpt_model import gpt_class
from own_env import run_in_own_environment
from side_by_side import interleaved


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
    p.add_argument("--gpt", action="store_true", help="a GPT's step (2 layers, 4 heads, width 128, block 64)")
    p.add_argument("--memory-child", choices=("namedtensor", "namedtensor unnamed", "torch"), help=argparse.SUPPRESS)
    return p.parse_args()


ARGS = _parse()
run_in_own_environment(ARGS.threads)

import statistics  # noqa: E402
import subprocess  # noqa: E402

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


def nt_step_fn(a: argparse.Namespace, compiled: bool = False, fused: bool = False, whole: bool = False):
    """namedtensor's step; with ``compiled`` the block and its loss run through ``nt.compile`` (as one
    function: the loss fuses with the block's last ops), with ``whole`` too the whole step (the backward and
    the update are steps of the compiled graph), with ``fused`` the update is ``AdamW(fused=True)``
    (bench/compile.py)."""
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
    opt = nt.optim.AdamW(block.parameters(), lr=LR, fused=fused or None)
    x_np, y_np = data(a)
    x, y = nt.tensor(x_np, names=NAMES), nt.tensor(y_np, names=NAMES)

    def loss_of(x, y):
        return nt.nn.functional.mse_loss(block(x, is_causal=a.causal), y)

    if compiled and not whole:
        loss_of = nt.compile(loss_of)

    def train(x, y):
        loss = loss_of(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    if whole:
        train = nt.compile(train)

    def step() -> float:
        return train(x, y).item()

    return step


# ----------------------------------------------------------------------------- PyTorch


def torch_step_fn(a: argparse.Namespace, fused: bool = False):
    """PyTorch's step; with ``fused`` the update is ``AdamW(fused=True)`` (bench/compile.py)."""
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
    opt = torch.optim.AdamW(block.parameters(), lr=LR, fused=fused or None)
    x_np, y_np = data(a)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    def step() -> float:
        loss = F.mse_loss(block(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return step


# ----------------------------------------------------------------------------- GPT

GPT_VOCAB, GPT_WIDTH, GPT_HEADS, GPT_LAYERS, GPT_BLOCK, GPT_BATCH = 64, 128, 4, 2, 64, 16


def gpt_weights() -> dict:
    """The GPT's weights as NumPy arrays under PyTorch's keys and layout, shared by all three models
    (``lm_head.weight`` is ``wte.weight``: the same array)."""
    rng = np.random.default_rng(0)
    c = GPT_WIDTH

    def normal(*shape):
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)

    w = {"wte.weight": normal(GPT_VOCAB, c), "wpe.weight": normal(GPT_BLOCK, c),
         "ln_f.weight": np.ones(c, np.float32), "ln_f.bias": np.zeros(c, np.float32)}
    for i in range(GPT_LAYERS):
        for name, (n_out, n_in) in {"attn.c_attn": (3 * c, c), "attn.c_proj": (c, c), "mlp.c_fc": (4 * c, c),
                                    "mlp.c_proj": (c, 4 * c)}.items():
            w[f"h.{i}.{name}.weight"], w[f"h.{i}.{name}.bias"] = normal(n_out, n_in), np.zeros(n_out, np.float32)
        for ln in ("ln_1", "ln_2"):
            w[f"h.{i}.{ln}.weight"], w[f"h.{i}.{ln}.bias"] = np.ones(c, np.float32), np.zeros(c, np.float32)
    w["lm_head.weight"] = w["wte.weight"]
    return w


def gpt_tokens():
    tokens = np.random.default_rng(1).integers(0, GPT_VOCAB, (GPT_BATCH, GPT_BLOCK + 1))
    return np.ascontiguousarray(tokens[:, :-1]), np.ascontiguousarray(tokens[:, 1:])  # torch's view needs it


def gpt_modules(nn, F, rearrange=None):
    """bench/gpt_model.py's GPT at this benchmark's sizes."""
    return gpt_class(nn, F, rearrange, vocab=GPT_VOCAB, width=GPT_WIDTH, heads=GPT_HEADS, layers=GPT_LAYERS,
                     block=GPT_BLOCK)


def nt_gpt_step_fn(named: bool):
    model = gpt_modules(nt.nn, nt.nn.functional, nt.rearrange if named else None)()
    sd = model.state_dict()
    model.load_state_dict({k: nt.tensor(v, names=sd[k].names) for k, v in gpt_weights().items()})
    opt = nt.optim.AdamW(model.parameters(), lr=LR)
    names = ("batch", "seq") if named else None
    x, y = (nt.tensor(t, names=names) for t in gpt_tokens())
    pos = nt.arange(GPT_BLOCK, names=("seq",) if named else None)
    return _gpt_step(model, opt, x, y, pos)


def _gpt_step(model, opt, x, y, pos):
    """One training step of the GPT, the same code for both libraries."""

    def step() -> float:
        loss = model(x, y, pos)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return step


def torch_gpt_step_fn():
    model = gpt_modules(torch.nn, torch.nn.functional)()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in gpt_weights().items()})
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    x, y = (torch.from_numpy(t) for t in gpt_tokens())
    pos = torch.arange(GPT_BLOCK)
    return _gpt_step(model, opt, x, y, pos)


def step_fns(a: argparse.Namespace) -> dict:
    """The step of each library (namedtensor's named and unnamed GPTs with ``--gpt``), by column name."""
    if a.gpt:
        return {"namedtensor": lambda: nt_gpt_step_fn(True), "namedtensor unnamed": lambda: nt_gpt_step_fn(False),
                "torch": torch_gpt_step_fn}
    return {"namedtensor": lambda: nt_step_fn(a), "torch": lambda: torch_step_fn(a)}


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
    step = step_fns(ARGS)[which]()
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


def main() -> None:
    if ARGS.memory_child:
        memory_child(ARGS.memory_child)
        return
    a = ARGS
    if a.gpt:
        print(f"GPT train step: {GPT_LAYERS} layers, {GPT_HEADS} heads, width {GPT_WIDTH}, block {GPT_BLOCK}, "
              f"batch {GPT_BATCH}, vocabulary {GPT_VOCAB}, tied head, float32, {a.threads} thread(s)")
    else:
        print(f"Transformer block train step: batch {a.batch}, seq {a.seq}, model {a.model}, heads {a.heads}, "
              f"MLP {a.mlp}, {'causal' if a.causal else 'full'} attention, float32, {a.threads} thread(s)")
    makers = step_fns(a)
    if torch is None:
        print("PyTorch is not installed (pip install torch==2.13.0): namedtensor columns only.")
        del makers["torch"]
    else:
        torch.set_num_threads(a.threads)
    steps = {n: make() for n, make in makers.items()}
    if torch is not None:
        first = {n: fn() for n, fn in steps.items()}
        if any(abs(loss - first["torch"]) > 1e-4 * abs(first["torch"]) for loss in first.values()):
            raise SystemExit(f"the models disagree: first losses {first}")
        print("first loss: " + ", ".join(f"{n} {loss:.6f}" for n, loss in first.items()) + " (same weights)")
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
