"""Data-parallel training on this machine: steps per second of 1 vs 2 ranks, and how much of the
all-reduce time ``DistributedDataParallel`` hides behind backward.

The model is an MLP of ``--layers`` Linear layers ``--width`` wide with GELU (float32; 6 x 1024 is
6.3 M parameters, 25 MB of gradients per step to all-reduce), trained with SGD on ``--batch``
samples per rank (weak scaling: 2 ranks train on twice the samples per step).  One launch of
``mpiexec -n 2`` times three variants of the same model in turns, within each round:

* ``overlap``: DDP as shipped, each bucket's all-reduce starting during backward;
* ``after backward``: DDP with ``overlap=False``, the same buckets all-reduced once backward ends;
* ``no communication``: the same step inside ``no_sync()`` (what the step costs without DDP's
  all-reduce: the compute both others contain).

The all-reduce time is ``after - no communication``; the share of it hidden behind backward is
``(after - overlap) / (after - no communication)``, both taken in each round (the variants run back
to back) and then the median over rounds.  The 1-rank rows are the same step (DDP over
one rank) with one BLAS thread, as each of the 2 ranks has, and with two threads (the whole
machine for one process).  Figures are medians over rounds of ``--steps`` steps each; the
launches (1 rank, 2 ranks...) take turns ``--repeats`` times, so that a machine whose load changes
during the run weighs on all of them alike.

    pip install mpi4py mpich
    python bench/ddp.py [--layers 6] [--width 1024] [--batch 16] [--repeats 3] [--rounds 5] [--steps 3]
                        [--bucket-mb 5] [--async-progress]

The script starts its ranks itself (``mpiexec`` from this Python's environment, else PATH), each
with ``OPENBLAS_NUM_THREADS`` set.  MPICH progresses a non-blocking all-reduce only inside MPI
calls, so DDP calls ``Testall`` from each gradient hook; ``--async-progress`` adds a run with
MPICH's progress thread (``MPIR_CVAR_ASYNC_PROGRESS=1``) instead.  OpenBLAS tuning variables that
this workplace sets for old CPUs slow NumPy down; they are removed for the ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from own_env import OPENBLAS_TUNING


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16, help="samples per rank per step")
    p.add_argument("--repeats", type=int, default=3, help="launches of each configuration, in turns")
    p.add_argument("--rounds", type=int, default=5, help="rounds per launch")
    p.add_argument("--steps", type=int, default=3, help="steps per variant per round")
    p.add_argument("--bucket-mb", type=float, default=5.0,
                   help="DDP's bucket_cap_mb (default 5: one 4 MiB layer per bucket; 25 would make one bucket)")
    p.add_argument("--async-progress", action="store_true", help="also run with MPICH's progress thread")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args()


# ----------------------------------------------------------------------------- one rank's side


def child(a: argparse.Namespace) -> None:
    import numpy as np

    import namedtensor as nt
    import namedtensor.distributed as dist
    from namedtensor import nn

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()

    def model():
        nt.manual_seed(0)
        layers = []
        for _ in range(a.layers):
            layers += [nn.Linear("feat", "feat", a.width, a.width), nn.GELU()]
        return nn.Sequential(*layers)

    rng = np.random.default_rng(rank)
    x = nt.tensor(rng.standard_normal((a.batch, a.width), dtype=np.float32), names=("batch", "feat"))
    y = nt.tensor(rng.standard_normal((a.batch, a.width), dtype=np.float32), names=("batch", "feat"))
    variants = {}
    for name, overlap, local in (("overlap", True, False), ("after backward", False, False),
                                 ("no communication", True, True)):
        ddp = dist.DistributedDataParallel(model(), bucket_cap_mb=a.bucket_mb, overlap=overlap)
        opt = nt.optim.SGD(ddp.parameters(), lr=1e-3)
        variants[name] = (ddp, opt, local)

    def steps(ddp, opt, local) -> None:
        for _ in range(a.steps):
            loss = ((ddp(x) - y) ** 2).mean()
            opt.zero_grad()
            if local:
                with ddp.no_sync():
                    loss.backward()
            else:
                loss.backward()
            opt.step()

    for v in variants.values():  # warm-up: first-call allocations
        steps(*v)
    times = {name: [] for name in variants}
    order = list(variants)
    for r in range(a.rounds):
        order = order[1:] + order[:1]  # each variant in each position in turn
        for name in order:
            dist.barrier()
            t0 = time.perf_counter()
            steps(*variants[name])
            dist.barrier()
            times[name].append((time.perf_counter() - t0) * 1e3 / a.steps)
    n_params = sum(p.numel() for p in variants["overlap"][0].parameters())
    buckets = len(variants["overlap"][0]._buckets)
    if rank == 0:
        print("RESULT " + json.dumps({"world": world, "times": times, "params": n_params, "buckets": buckets}))
    dist.destroy_process_group()


# ----------------------------------------------------------------------------- the driver


def launch(a: argparse.Namespace, ranks: int, threads: int, extra_env=None) -> dict:
    here = Path(sys.executable).parent / "mpiexec"
    mpiexec = str(here) if here.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit("no mpiexec: pip install mpi4py mpich")
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_TUNING}
    env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env.update(extra_env or {})
    cmd = [mpiexec, "-n", str(ranks), sys.executable, __file__, "--child", "--layers", str(a.layers),
           "--width", str(a.width), "--batch", str(a.batch), "--rounds", str(a.rounds), "--steps", str(a.steps),
           "--bucket-mb", str(a.bucket_mb)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main() -> None:
    a = _parse()
    if a.child:
        child(a)
        return
    configs = [("1 rank, 1 thread", 1, 1, None), ("1 rank, 2 threads", 1, 2, None),
               ("2 ranks, 1 thread each", 2, 1, None)]
    if a.async_progress:
        configs.append(("2 ranks, MPICH progress thread", 2, 1, {"MPIR_CVAR_ASYNC_PROGRESS": "1"}))
    merged = {}
    for _ in range(a.repeats):
        for label, ranks, threads, env in configs:
            run = launch(a, ranks, threads, env)
            if label not in merged:
                merged[label] = run
            else:
                for name, times in run["times"].items():
                    merged[label]["times"][name] += times
    runs = list(merged.items())
    first = runs[0][1]
    print(f"MLP {a.layers} x Linear({a.width}) + GELU, float32, {first['params']:,} parameters "
          f"({first['params'] * 4 / 2 ** 20:.1f} MiB of gradients, {first['buckets']} buckets of "
          f"<= {a.bucket_mb:g} MiB); batch {a.batch} per rank; SGD; median of {a.repeats} launches x {a.rounds} "
          f"rounds x {a.steps} steps")
    print()
    print("| run | variant | ms/step | steps/s | samples/s | samples/s vs 1 rank, 1 thread |")
    print("|---|---|---|---|---|---|")
    base = statistics.median(first["times"]["overlap"])
    base_rate = a.batch * 1e3 / base
    for label, run in runs:
        names = ["overlap", "after backward", "no communication"] if run["world"] > 1 else ["overlap"]
        for name in names:
            ms = statistics.median(run["times"][name])
            rate = run["world"] * a.batch * 1e3 / ms
            variant = name if run["world"] > 1 else "DDP over 1 rank"
            print(f"| {label} | {variant} | {ms:.1f} | {1e3 / ms:.1f} | {rate:.0f} | {rate / base_rate:.2f}x |")
    print()
    print("| run | all-reduce time (after - no communication) | exposed with overlap | hidden by overlap |")
    print("|---|---|---|---|")
    for label, run in runs:
        if run["world"] == 1:
            continue
        # per round (the three variants ran back to back), then the median over rounds
        rounds = list(zip(run["times"]["overlap"], run["times"]["after backward"], run["times"]["no communication"]))
        comm = statistics.median(after - local for _, after, local in rounds)
        exposed = statistics.median(over - local for over, _, local in rounds)
        hidden = statistics.median((after - over) / (after - local) for over, after, local in rounds
                                   if after > local)
        print(f"| {label} | {comm:.1f} ms | {exposed:.1f} ms | {hidden:.0%} |")


if __name__ == "__main__":
    main()
