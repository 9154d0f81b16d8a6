"""Timing functions side by side in one process: :func:`interleaved`, shared by bench/compile.py and
bench/train_step.py.

The columns take turns in shuffled rounds, so that the machine's drifts (its clock, other load) fall on
all of them alike.  Before each sample the process sleeps ``PAUSE`` seconds: the libraries' idle worker
threads (PyTorch's OpenMP threads, XLA's Eigen pool, OpenBLAS's) spin for a while after a call, and a
sample taken while another library's workers still spin shares the cores with them.  Measured on this
2-core machine at 2 threads, the block's training step right after the other columns and after a 20 ms
pause (bench/compile.py): namedtensor compiled 39.7 and 35.5 ms, eager 47.6 and 44.6, PyTorch 67.0 and
60.8, JAX 55.6 and 55.2.
"""

from __future__ import annotations

import random
import time

PAUSE = 0.02


def interleaved(fns: dict, rounds: int, number: int = 1) -> dict:
    """Each function's times in ms, a sample per round (the columns in a shuffled order each round, each
    sample after a pause); a sample is the mean of ``number`` calls in a row, so that calls of a few
    microseconds are not mostly the timer's own cost.  Each function runs twice first (first-call
    allocations and caches)."""
    names = list(fns)
    times = {n: [] for n in names}
    for fn in fns.values():
        fn()
        fn()
    shuffle = random.Random(0).shuffle
    calls = range(number)
    for _ in range(rounds):
        shuffle(names)
        for n in names:
            fn = fns[n]
            time.sleep(PAUSE)
            t0 = time.perf_counter()
            for _ in calls:
                fn()
            times[n].append((time.perf_counter() - t0) * 1e3 / number)
    return times
