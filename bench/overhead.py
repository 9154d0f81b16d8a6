"""Per-op overhead of namedtensor against raw NumPy (and PyTorch eager where installed).

Each row times one op, side by side in this process: raw NumPy, namedtensor on
unnamed tensors, on named tensors, on named tensors that require grad (the
forward with graph recording), and PyTorch eager.  Figures are medians of
several repeats, in microseconds per call, with ratios to NumPy.  Goal: named
small ops within 2.5x NumPy, the large op within 1.05x.

    python bench/overhead.py            # PyTorch column if `pip install torch==2.13.0` was done

OpenBLAS tuning variables that this workplace sets for old CPUs slow NumPy
down; they are removed here, in this script's own environment only.
"""

from __future__ import annotations

import os
import sys

_OPENBLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(v in os.environ for v in _OPENBLAS) and not os.environ.get("_NT_BENCH_CHILD"):
    env = {k: v for k, v in os.environ.items() if k not in _OPENBLAS}
    env["_NT_BENCH_CHILD"] = "1"
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

import statistics  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

import namedtensor as nt  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:
    torch = None


def per_call_us(fn, repeat: int = 7, min_time: float = 0.05) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(number, int(number * min_time / 0.2) or 1)
    times = timer.repeat(repeat=repeat, number=number)
    return statistics.median(times) / number * 1e6


def cases():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 64), dtype=np.float32)
    b = rng.standard_normal((64,), dtype=np.float32)
    w = rng.standard_normal((64, 128), dtype=np.float32)
    big = [rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(3)]

    def np_softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def wrap(arr, names, grad=False):
        t = nt.tensor(arr, names=names)
        return t.requires_grad_() if grad else t

    def nt_set(grad, named):
        n = (lambda *ns: ns) if named else (lambda *ns: None)
        return dict(
            a=wrap(a, n("batch", "feat"), grad), b=wrap(b, n("feat"), grad), w=wrap(w, n("feat", "out"), grad),
            big=[wrap(x, n("row", "col"), grad) for x in big],
        )

    variants = {"unnamed": nt_set(False, False), "named": nt_set(False, True), "named+grad": nt_set(True, True)}
    dim = {"unnamed": 1, "named": "feat", "named+grad": "feat"}

    rows = [
        ("add 32x64 + 64 (broadcast)", lambda: a + b, lambda v, k: (lambda: v["a"] + v["b"]),
         lambda T: (lambda: T["a"] + T["b"])),
        ("sum over a dim, 32x64", lambda: a.sum(axis=1), lambda v, k: (lambda: v["a"].sum(dim[k])),
         lambda T: (lambda: T["a"].sum(1))),
        ("matmul 32x64 @ 64x128", lambda: a @ w, lambda v, k: (lambda: v["a"] @ v["w"]),
         lambda T: (lambda: T["a"] @ T["w"])),
        ("softmax over a dim, 32x64", lambda: np_softmax(a), lambda v, k: (lambda: v["a"].softmax(dim[k])),
         lambda T: (lambda: torch.softmax(T["a"], 1))),
        ("index by name [:, 2:5]", lambda: a[:, 2:5],
         lambda v, k: ((lambda: v["a"][{"feat": slice(2, 5)}]) if k != "unnamed" else (lambda: v["a"][:, 2:5])),
         lambda T: (lambda: T["a"][:, 2:5])),
        ("a*b+c 1024x1024 (large)", lambda: big[0] * big[1] + big[2],
         lambda v, k: (lambda: v["big"][0] * v["big"][1] + v["big"][2]),
         lambda T: (lambda: T["big"][0] * T["big"][1] + T["big"][2])),
    ]
    torch_set = None
    if torch is not None:
        torch.set_num_threads(1)
        torch_set = dict(a=torch.from_numpy(a), b=torch.from_numpy(b), w=torch.from_numpy(w),
                         big=[torch.from_numpy(x) for x in big])
    return rows, variants, torch_set


def main() -> None:
    rows, variants, torch_set = cases()
    cols = ["numpy", "nt unnamed", "nt named", "nt named+grad"] + (["torch eager"] if torch_set else [])
    print(f"namedtensor {nt.__version__}, numpy {np.__version__}" + (f", torch {torch.__version__}" if torch else
                                                                      ", torch not installed"))
    print("median microseconds per call (ratio to numpy)\n")
    header = f"| {'op':30s} | " + " | ".join(f"{c:>16s}" for c in cols) + " |"
    print(header)
    print("|" + "-" * 32 + "|" + "|".join("-" * 18 for _ in cols) + "|")
    for label, np_fn, nt_fn, torch_fn in rows:
        base = per_call_us(np_fn)
        cells = [f"{base:9.2f}        "]
        for key in ("unnamed", "named", "named+grad"):
            us = per_call_us(nt_fn(variants[key], key))
            cells.append(f"{us:9.2f} ({us / base:4.2f}x)")
        if torch_set:
            us = per_call_us(torch_fn(torch_set))
            cells.append(f"{us:9.2f} ({us / base:4.2f}x)")
        print(f"| {label:30s} | " + " | ".join(f"{c:>16s}" for c in cells) + " |")


if __name__ == "__main__":
    main()
