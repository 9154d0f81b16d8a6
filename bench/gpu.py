"""namedtensor on a CUDA GPU (CuPy backend, fused kernels) against PyTorch eager on the same GPU.

Per kernel (the op as a user calls it, Python included), forward and forward+backward: softmax and
log-softmax over the last dim, cross-entropy from logits, layer norm, RMS norm and GELU on rows of a
(rows, n) float tensor; the AdamW step over all the parameters of a Transformer (one multi-tensor
launch per dtype here; PyTorch's default foreach and its fused=True); causal attention forward and
backward (FlashAttention-style tiles here, PyTorch's scaled_dot_product_attention).  Then a whole
training step of a pre-norm Transformer block at bench/train_step.py's shapes (batch 16, seq 128,
model 256, 8 heads, MLP 1024) and at larger ones, from the same weights (the first losses are
checked to agree).

Times are medians over ``--repeat`` runs, each timed with CUDA events on the library's current
stream after warm-up runs.  Achieved bandwidth counts the bytes a kernel must move at least (reading
its inputs, writing its outputs once: 2 elements per element of x for a forward, 3 for a backward;
AdamW reads parameter, grad and two moments and writes three of them); TFLOP/s of attention counts
4 * batch * heads * seq^2 * head_dim (halved by the causal mask) for the forward and 2.5 times that
for the backward, FlashAttention's convention.  PyTorch runs with TF32 off, so both sides compute in
full float32.

    pip install cupy-cuda12x torch          # torch with CUDA for the PyTorch column (optional)
    python bench/gpu.py [--repeat 30] [--dtype float32|float16|both] [--quick]

On a machine without a usable CUDA device it says so and exits (status 0).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Callable, Dict, List, Optional

import numpy as np

import namedtensor as nt
from namedtensor import optim


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=30, help="timed runs per measurement (median)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", choices=("float32", "float16", "both"), default="both")
    p.add_argument("--quick", action="store_true", help="smaller shapes (a smoke run)")
    return p.parse_args()


# ----------------------------------------------------------------------------- timing


class Timer:
    """Median milliseconds of a function's GPU work, with events on the current stream."""

    def __init__(self, events: Callable[[], tuple], elapsed: Callable, sync: Callable[[], None],
                 repeat: int, warmup: int) -> None:
        self.events, self.elapsed, self.sync = events, elapsed, sync
        self.repeat, self.warmup = repeat, warmup

    def __call__(self, fn: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            fn()
        self.sync()
        times = []
        for _ in range(self.repeat):
            start, end = self.events()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(self.elapsed(start, end))
        return statistics.median(times)


def cupy_timer(a: argparse.Namespace) -> Timer:
    import cupy

    return Timer(lambda: (cupy.cuda.Event(), cupy.cuda.Event()), cupy.cuda.get_elapsed_time,
                 cupy.cuda.Device().synchronize, a.repeat, a.warmup)


def torch_timer(a: argparse.Namespace, torch) -> Timer:
    def events():
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    return Timer(events, lambda s, e: s.elapsed_time(e), torch.cuda.synchronize, a.repeat, a.warmup)


def find_torch():
    """PyTorch with CUDA, or None (with the reason printed)."""
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: namedtensor columns only.")
        return None
    if not torch.cuda.is_available():
        print(f"PyTorch {torch.__version__} has no CUDA device here (a CPU build?): namedtensor columns only.")
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


# ----------------------------------------------------------------------------- tables


def table(title: str, header: List[str], rows: List[List[str]]) -> None:
    print()
    print(f"### {title}")
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


def ms(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"


def rate(amount: float, t: Optional[float], unit: float) -> str:
    """``amount`` per second in ``unit`` (1e9: GB/s, whole numbers; 1e12: TFLOP/s, one decimal)."""
    if t is None:
        return "-"
    return f"{amount / (t * 1e-3) / unit:.{0 if unit == 1e9 else 1}f}"


def ratio(ours: float, theirs: Optional[float]) -> str:
    return "-" if theirs is None else f"{ours / theirs:.2f}x"


# ----------------------------------------------------------------------------- row kernels


def row_kernels(a: argparse.Namespace, dtype: str, ours: Timer, torch, theirs: Optional[Timer]) -> None:
    rows, n = (1024, 1024) if a.quick else (16384, 4096)
    vocab_rows, vocab = (1024, 8192) if a.quick else (8192, 32768)
    item = np.dtype(dtype).itemsize
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((rows, n)).astype(dtype)
    g_np = rng.standard_normal((rows, n)).astype(dtype)
    w_np = (1 + 0.1 * rng.standard_normal(n)).astype(dtype)
    b_np = (0.1 * rng.standard_normal(n)).astype(dtype)
    logits_np = rng.standard_normal((vocab_rows, vocab)).astype(dtype)
    target_np = rng.integers(0, vocab, vocab_rows)
    F = nt.nn.functional
    names = ("row", "col")

    def ntx(arr, grad=False, nm=names):
        return nt.tensor(arr, names=nm, device="cuda").requires_grad_(grad)

    x, g, w, b = ntx(x_np, True), ntx(g_np), ntx(w_np, True, ("col",)), ntx(b_np, True, ("col",))
    z, tgt = ntx(logits_np, True, ("row", "vocab")), nt.tensor(target_np, names=("row",), device="cuda")
    cases = {
        "softmax": (lambda: x.softmax("col"), 2, 3, n * rows),
        "log_softmax": (lambda: x.log_softmax("col"), 2, 3, n * rows),
        "cross_entropy": (lambda: F.cross_entropy(z, tgt, "vocab", reduction="none"), 1, 2, vocab * vocab_rows),
        "layer_norm": (lambda: F.layer_norm(x, "col", w, b), 2, 3, n * rows),
        "rms_norm": (lambda: F.rms_norm(x, "col", w), 2, 3, n * rows),
        "gelu": (lambda: F.gelu(x), 2, 3, n * rows),
    }
    if torch is not None:
        dev = "cuda"
        tx = torch.tensor(x_np, device=dev, requires_grad=True)
        tg = torch.tensor(g_np, device=dev)
        tw = torch.tensor(w_np, device=dev, requires_grad=True)
        tb = torch.tensor(b_np, device=dev, requires_grad=True)
        tz = torch.tensor(logits_np, device=dev, requires_grad=True)
        tt_ = torch.tensor(target_np, device=dev)
        tF = torch.nn.functional
        rms = getattr(tF, "rms_norm", None)
        theirs_fn = {
            "softmax": lambda: torch.softmax(tx, -1),
            "log_softmax": lambda: torch.log_softmax(tx, -1),
            "cross_entropy": lambda: tF.cross_entropy(tz, tt_, reduction="none"),
            "layer_norm": lambda: tF.layer_norm(tx, (n,), tw, tb),
            "rms_norm": (lambda: rms(tx, (n,), tw)) if rms is not None else None,
            "gelu": lambda: tF.gelu(tx),
        }
    out = []
    for name, (fwd, fwd_elems, bwd_elems, numel) in cases.items():
        grad_out = g if name != "cross_entropy" else ntx(rng.standard_normal(vocab_rows).astype(dtype), nm=("row",))

        def both(fwd=fwd, grad_out=grad_out):
            fwd().backward(grad_out)

        t_f, t_fb = ours(fwd), ours(both)
        o_f = o_fb = None
        if torch is not None and theirs_fn[name] is not None:
            tfn = theirs_fn[name]
            tgrad = tg if name != "cross_entropy" else torch.tensor(grad_out.cpu().numpy(), device="cuda")
            o_f = theirs(tfn)
            o_fb = theirs(lambda tfn=tfn, tgrad=tgrad: tfn().backward(tgrad))
        fb_bytes = (fwd_elems + bwd_elems) * numel * item
        out.append([name, ms(t_f), rate(fwd_elems * numel * item, t_f, 1e9), ms(o_f), ratio(t_f, o_f),
                    ms(t_fb), rate(fb_bytes, t_fb, 1e9), ms(o_fb), ratio(t_fb, o_fb)])
    table(f"row kernels, {dtype}: x ({rows}, {n}), logits ({vocab_rows}, {vocab})",
          ["op", "fwd ms", "fwd GB/s", "torch fwd ms", "ratio", "fwd+bwd ms", "fwd+bwd GB/s", "torch fwd+bwd ms",
           "ratio"], out)


# ----------------------------------------------------------------------------- attention


def attention(a: argparse.Namespace, dtype: str, ours: Timer, torch, theirs: Optional[Timer]) -> None:
    shapes = [(2, 8, 512, 64)] if a.quick else [(8, 16, 1024, 64), (4, 16, 2048, 64), (2, 16, 4096, 128)]
    F = nt.nn.functional
    rows = []
    for batch, heads, seq, d in shapes:
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal((batch, heads, seq, d)).astype(dtype) for _ in range(4)]
        q, k, v = (nt.tensor(arr, names=("batch", "head", nm, "d"), device="cuda").requires_grad_()
                   for arr, nm in zip(arrays[:3], ("seq", "key", "key")))
        g = nt.tensor(arrays[3], names=("batch", "head", "seq", "d"), device="cuda")

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", is_causal=True)

        t_f = ours(fwd)
        t_fb = ours(lambda: fwd().backward(g))
        flops = 4 * batch * heads * seq * seq * d / 2
        o_f = o_fb = None
        if torch is not None:
            tq, tk, tv = (torch.tensor(arr, device="cuda", requires_grad=True) for arr in arrays[:3])
            tg = torch.tensor(arrays[3], device="cuda")

            def tfwd():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)

            o_f = theirs(tfwd)
            o_fb = theirs(lambda: tfwd().backward(tg))
        rows.append([f"({batch}, {heads}, {seq}, {d})", ms(t_f), rate(flops, t_f, 1e12), ms(o_f),
                     rate(flops, o_f, 1e12), ms(t_fb), rate(3.5 * flops, t_fb, 1e12), ms(o_fb), rate(3.5 * flops, o_fb, 1e12),
                     ratio(t_fb, o_fb)])
    table(f"causal attention, {dtype} (batch, heads, seq, head_dim)",
          ["shape", "fwd ms", "fwd TFLOP/s", "torch fwd ms", "torch TFLOP/s", "fwd+bwd ms", "fwd+bwd TFLOP/s",
           "torch fwd+bwd ms", "torch TFLOP/s", "ratio"], rows)


# ----------------------------------------------------------------------------- AdamW and the training step


def block_weights(d: int, m: int, seed: int = 0) -> Dict[str, np.ndarray]:
    """A pre-norm block's weights, PyTorch layout (out, in), as in bench/train_step.py."""
    rng = np.random.default_rng(seed)
    w = {}
    for name, (n_out, n_in) in {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d), "fc1": (m, d),
                                "fc2": (d, m)}.items():
        bound = 1 / np.sqrt(n_in)
        w[name + ".weight"] = rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32)
        w[name + ".bias"] = rng.uniform(-bound, bound, (n_out,)).astype(np.float32)
    for ln in ("ln1", "ln2"):
        w[ln + ".weight"] = np.ones(d, np.float32)
        w[ln + ".bias"] = np.zeros(d, np.float32)
    return w


_OURS = {"attn.q_proj": "q", "attn.k_proj": "k", "attn.v_proj": "v", "attn.out_proj": "o", "mlp.fc1": "fc1",
         "mlp.fc2": "fc2", "norm1": "ln1", "norm2": "ln2"}


def nt_block(d: int, heads: int, m: int, weights: Dict[str, np.ndarray]):
    block = nt.nn.TransformerBlock("embed", d, heads, m)
    sd = block.state_dict()
    block.load_state_dict({k: nt.tensor(weights[_OURS[k.rsplit(".", 1)[0]] + "." + k.rsplit(".", 1)[1]],
                                        names=sd[k].names) for k in sd})
    return block.to("cuda")


def torch_block(torch, d: int, heads: int, m: int, weights: Dict[str, np.ndarray]):
    F = torch.nn.functional

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = torch.nn.Linear(d, m), torch.nn.Linear(m, d)

        def forward(self, x, causal):
            b, t, _ = x.shape
            z = self.ln1(x)
            hs = [f(z).view(b, t, heads, d // heads).transpose(1, 2) for f in (self.q, self.k, self.v)]
            att = F.scaled_dot_product_attention(*hs, is_causal=causal)
            x = x + self.o(att.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    block = Block()
    block.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    return block.to("cuda")


def adamw(a: argparse.Namespace, ours: Timer, torch, theirs: Optional[Timer]) -> None:
    d, m, layers = (256, 1024, 2) if a.quick else (768, 3072, 12)
    weights = block_weights(d, m)
    blocks = [nt_block(d, 12 if d % 12 == 0 else 8, m, weights) for _ in range(layers)]
    params = [p for blk in blocks for p in blk.parameters()]
    rng = np.random.default_rng(1)
    for p in params:
        p.grad = nt.tensor(rng.standard_normal(p.shape).astype(np.float32), names=p.names, device="cuda")
    opt = optim.AdamW(params, lr=1e-3)
    n = sum(p.numel() for p in params)
    t_ours = ours(opt.step)
    rows_ = [["namedtensor AdamW", ms(t_ours), rate(7 * 4 * n, t_ours, 1e9), "-"]]
    if torch is not None:
        tparams = [torch.tensor(p.detach().cpu().numpy(), device="cuda", requires_grad=True) for p in params]
        for tp, p in zip(tparams, params):
            tp.grad = torch.tensor(p.grad.cpu().numpy(), device="cuda")
        for label, kw in (("torch AdamW (foreach)", {"foreach": True}), ("torch AdamW (fused)", {"fused": True})):
            topt = torch.optim.AdamW(tparams, lr=1e-3, **kw)
            t = theirs(topt.step)
            rows_.append([label, ms(t), rate(7 * 4 * n, t, 1e9), ratio(t_ours, t)])
    table(f"AdamW step over {len(params)} parameters ({n / 1e6:.1f} M floats, {layers} blocks of model {d})",
          ["optimizer", "ms/step", "GB/s", "namedtensor / this"], rows_)


def train_steps(a: argparse.Namespace, ours: Timer, torch, theirs: Optional[Timer]) -> None:
    configs = [(16, 128, 256, 8, 1024)] if a.quick else [(16, 128, 256, 8, 1024), (16, 512, 768, 12, 3072),
                                                          (8, 1024, 1024, 16, 4096)]
    rows_ = []
    for batch, seq, d, heads, m in configs:
        weights = block_weights(d, m)
        rng = np.random.default_rng(1)
        x_np = rng.standard_normal((batch, seq, d)).astype(np.float32)
        y_np = rng.standard_normal((batch, seq, d)).astype(np.float32)
        names = ("batch", "seq", "embed")
        block = nt_block(d, heads, m, weights)
        opt = optim.AdamW(block.parameters(), lr=1e-3)
        x, y = nt.tensor(x_np, names=names, device="cuda"), nt.tensor(y_np, names=names, device="cuda")

        def step():
            loss = nt.nn.functional.mse_loss(block(x, is_causal=True), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        first = step().item()
        t_ours = ours(step)
        t_theirs = None
        if torch is not None:
            tblock = torch_block(torch, d, heads, m, weights)
            topt = torch.optim.AdamW(tblock.parameters(), lr=1e-3)
            tx, ty = torch.tensor(x_np, device="cuda"), torch.tensor(y_np, device="cuda")

            def tstep():
                loss = torch.nn.functional.mse_loss(tblock(tx, True), ty)
                topt.zero_grad()
                loss.backward()
                topt.step()
                return loss

            tfirst = tstep().item()
            if abs(first - tfirst) > 1e-3 * abs(tfirst):
                raise SystemExit(f"the two blocks disagree at ({batch}, {seq}, {d}): first losses {first} vs {tfirst}")
            t_theirs = theirs(tstep)
        rows_.append([f"({batch}, {seq}, {d}, {heads}, {m})", f"{first:.5f}", ms(t_ours), ms(t_theirs),
                      ratio(t_ours, t_theirs)])
    table("Transformer block training step (forward, backward, AdamW), float32, causal "
          "(batch, seq, model, heads, MLP)", ["shape", "first loss", "ms/step", "torch ms/step", "ratio"], rows_)


# ----------------------------------------------------------------------------- main


def gpu_or_exit() -> str:
    """The GPU's name, or print why there is none and exit with status 0."""
    try:
        nt.zeros(1, device="cuda")
    except RuntimeError as e:
        print(f"bench/gpu.py needs a CUDA GPU: {e}")
        raise SystemExit(0)
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def main() -> None:
    a = parse()
    gpu = gpu_or_exit()
    import cupy

    print(f"namedtensor on {gpu} (CuPy {cupy.__version__}); medians of {a.repeat} runs timed with CUDA events")
    torch = find_torch()
    ours = cupy_timer(a)
    theirs = torch_timer(a, torch) if torch is not None else None
    dtypes = ["float32", "float16"] if a.dtype == "both" else [a.dtype]
    for dtype in dtypes:
        row_kernels(a, dtype, ours, torch, theirs)
        attention(a, dtype, ours, torch, theirs)
    adamw(a, ours, torch, theirs)
    train_steps(a, ours, torch, theirs)


if __name__ == "__main__":
    sys.exit(main())
