"""Per-op overhead of namedtensor against raw NumPy (and PyTorch eager where installed).

Each row times one op, side by side in this process: raw NumPy, namedtensor on
unnamed tensors, on named tensors, on named tensors that require grad (the
forward with graph recording), the Array API namespace (``t.__array_namespace__()``,
the calls a library written for the standard makes) on named tensors, and PyTorch
eager; every library on one thread.  The columns
take turns in 25 rounds, in a shuffled order; figures are medians, in microseconds per call, and
ratios are medians of the per-round ratios to NumPy.  Goal: named
small ops within 2.5x NumPy, the large op within 1.05x; the namespace within a few percent of
"nt named".

    python bench/overhead.py            # PyTorch column if `pip install torch==2.13.0` was done

OpenBLAS tuning variables that this workplace sets for old CPUs slow NumPy
down; they are removed here, in this script's own environment only.
"""

from __future__ import annotations

from own_env import run_in_own_environment

run_in_own_environment(1)

import random  # noqa: E402
import statistics  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

import namedtensor as nt  # noqa: E402
import namedtensor.array_api as xp  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def calibrate(fn, min_time: float = 0.02) -> int:
    """How many calls make one timing of about ``min_time`` seconds."""
    number, took = timeit.Timer(fn).autorange()
    return max(1, int(number * min_time / max(took, 1e-9)))


def interleaved(fns, rounds: int = 15):
    """Median microseconds per call of each function, and the median of each one's per-round ratio
    to the first.  The functions take turns, in a shuffled order, within every round, so a machine
    that speeds up or slows down mid-run moves all of them together."""
    timers = [(timeit.Timer(f), calibrate(f)) for f in fns]
    per_round = [[] for _ in fns]
    order = list(range(len(fns)))
    shuffle = random.Random(0).shuffle
    for _ in range(rounds):
        shuffle(order)  # no function always runs right after the same other one
        for k in order:
            timer, number = timers[k]
            per_round[k].append(timer.timeit(number) / number * 1e6)
    medians = [statistics.median(times) for times in per_round]
    ratios = [statistics.median(t / b for t, b in zip(times, per_round[0])) for times in per_round]
    return medians, ratios


def cases():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 64), dtype=np.float32)
    b = rng.standard_normal((64,), dtype=np.float32)
    w = rng.standard_normal((64, 128), dtype=np.float32)
    big = [rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(3)]

    def np_softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def xp_softmax(x, axis):  # the standard has no softmax: a library composes it
        e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
        return e / xp.sum(e, axis=axis, keepdims=True)

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

    # (label, numpy, namedtensor given a variant, the namespace on the named variant, torch given its tensors)
    rows = [
        ("add 32x64 + 64 (broadcast)", lambda: a + b, lambda v, k: (lambda: v["a"] + v["b"]),
         lambda v: (lambda: xp.add(v["a"], v["b"])), lambda T: (lambda: T["a"] + T["b"])),
        ("sum over a dim, 32x64", lambda: a.sum(axis=1), lambda v, k: (lambda: v["a"].sum(dim[k])),
         lambda v: (lambda: xp.sum(v["a"], axis="feat")), lambda T: (lambda: T["a"].sum(1))),
        ("matmul 32x64 @ 64x128", lambda: a @ w, lambda v, k: (lambda: v["a"] @ v["w"]),
         lambda v: (lambda: xp.matmul(v["a"], v["w"])), lambda T: (lambda: T["a"] @ T["w"])),
        ("softmax over a dim, 32x64", lambda: np_softmax(a), lambda v, k: (lambda: v["a"].softmax(dim[k])),
         lambda v: (lambda: xp_softmax(v["a"], "feat")), lambda T: (lambda: torch.softmax(T["a"], 1))),
        ("index by name [:, 2:5]", lambda: a[:, 2:5],
         lambda v, k: ((lambda: v["a"][{"feat": slice(2, 5)}]) if k != "unnamed" else (lambda: v["a"][:, 2:5])),
         lambda v: (lambda: v["a"][:, 2:5]), lambda T: (lambda: T["a"][:, 2:5])),  # the standard indexes by position
        ("a*b+c 1024x1024 (large)", lambda: big[0] * big[1] + big[2],
         lambda v, k: (lambda: v["big"][0] * v["big"][1] + v["big"][2]),
         lambda v: (lambda: xp.add(xp.multiply(v["big"][0], v["big"][1]), v["big"][2])),
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
    cols = ["numpy", "nt unnamed", "nt named", "nt named+grad", "xp named"] + (["torch eager"] if torch_set else [])
    print(f"namedtensor {nt.__version__}, numpy {np.__version__}" + (f", torch {torch.__version__}" if torch else
                                                                      ", torch not installed"))
    print("median microseconds per call (median of per-round ratios to numpy; the columns take turns)\n")
    header = f"| {'op':30s} | " + " | ".join(f"{c:>16s}" for c in cols) + " |"
    print(header)
    print("|" + "-" * 32 + "|" + "|".join("-" * 18 for _ in cols) + "|")
    for label, np_fn, nt_fn, xp_fn, torch_fn in rows:
        fns = [np_fn] + [nt_fn(variants[key], key) for key in ("unnamed", "named", "named+grad")]
        fns.append(xp_fn(variants["named"]))
        if torch_set:
            fns.append(torch_fn(torch_set))
        medians, ratios = interleaved(fns, rounds=25)
        cells = [f"{medians[0]:9.2f}        "]
        cells += [f"{us:9.2f} ({r:4.2f}x)" for us, r in zip(medians[1:], ratios[1:])]
        print(f"| {label:30s} | " + " | ".join(f"{c:>16s}" for c in cells) + " |")


if __name__ == "__main__":
    main()
