"""Optimizer steps: namedtensor.optim against torch.optim on the CPU, same parameters and gradients.

The parameters are those of the pre-norm Transformer block of bench/train_step.py (model 256,
MLP 1024, float32).  First each optimizer takes a few steps on both libraries from the same values
and gradients, and the largest difference of the parameters is printed (float32 rounding only);
then the two step functions take turns in shuffled rounds and the table gives the median and the
10th percentile of the milliseconds per step, and the ratio of the medians.

    python bench/optim_step.py [--threads 2] [--rounds 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np
import torch

import namedtensor as nt
from namedtensor import optim

SHAPES = ([(256, 256)] * 4 + [(256,)] * 4 + [(1024, 256), (1024,), (256, 1024), (256,)] + [(256,)] * 4)

CONFIGS = {
    "AdamW": (lambda ps: optim.AdamW(ps, lr=1e-3), lambda ps: torch.optim.AdamW(ps, lr=1e-3)),
    "Adam amsgrad": (lambda ps: optim.Adam(ps, lr=1e-3, amsgrad=True),
                     lambda ps: torch.optim.Adam(ps, lr=1e-3, amsgrad=True)),
    "SGD momentum": (lambda ps: optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=1e-4),
                     lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=1e-4)),
}


def setup(make_nt, make_torch, seed=0):
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    ps = [nt.tensor(v.copy(), names=("out", "in")[-len(v.shape):], requires_grad=True) for v in values]
    ts = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    for p, t, g in zip(ps, ts, grads):
        p.grad = nt.tensor(g, names=p.names)
        t.grad = torch.tensor(g)
    return make_nt(ps), make_torch(ts), ps, ts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{len(SHAPES)} parameters, {sum(int(np.prod(s)) for s in SHAPES):,} float32 values, "
          f"torch {torch.__version__} with {args.threads} thread(s)")
    print(f"{'optimizer':<14} {'max |diff|':>10} {'nt ms':>8} {'torch ms':>9} {'nt p10':>7} {'torch p10':>9} "
          f"{'ratio':>6}")
    for name, (make_nt, make_torch) in CONFIGS.items():
        o, ot, ps, ts = setup(make_nt, make_torch)
        for _ in range(5):
            o.step()
            ot.step()
        diff = max(float(np.abs(p.detach().numpy() - t.detach().numpy()).max()) for p, t in zip(ps, ts))
        times = {"nt": [], "torch": []}
        steps = {"nt": o.step, "torch": ot.step}
        for _ in range(args.rounds):
            for k in random.sample(list(steps), 2):
                t0 = time.perf_counter()
                steps[k]()
                times[k].append((time.perf_counter() - t0) * 1e3)
        med = {k: statistics.median(v) for k, v in times.items()}
        p10 = {k: float(np.percentile(v, 10)) for k, v in times.items()}
        print(f"{name:<14} {diff:>10.2e} {med['nt']:>8.3f} {med['torch']:>9.3f} {p10['nt']:>7.3f} "
              f"{p10['torch']:>9.3f} {med['nt'] / med['torch']:>6.2f}")


if __name__ == "__main__":
    main()
