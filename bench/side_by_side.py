"""Timing functions side by side in one process: :func:`interleaved`, shared by bench/compile.py and
bench/train_step.py.

The columns take turns in shuffled rounds, so that the machine's drifts (its clock, other load) fall on
all of them alike.  Each sample follows an untimed call of the same function, as a training loop's
step follows the previous step: the sample then does not pay for the column before it, whose caches
hold that library's data and whose idle worker threads (PyTorch's OpenMP threads, XLA's Eigen pool,
OpenBLAS's) still spin for a while after its call, on the cores the sample needs.
"""

from __future__ import annotations

import random
import time


def interleaved(fns: dict, rounds: int, number: int = 1) -> dict:
    """Each function's times in ms, a sample per round (the columns in a shuffled order each round, each
    sample after an untimed call); a sample is the mean of ``number`` calls in a row, so that calls of a
    few microseconds are not mostly the timer's own cost.  Each function runs twice first (first-call
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
            fn()
            t0 = time.perf_counter()
            for _ in calls:
                fn()
            times[n].append((time.perf_counter() - t0) * 1e3 / number)
    return times
