"""The CPU threads that namedtensor's kernels and pooled matrix products share their work out on.

:func:`set_num_threads` / :func:`get_num_threads` hold the count (by default ``OMP_NUM_THREADS``, else
``OPENBLAS_NUM_THREADS``, else the CPUs this process may use); :func:`split` and :func:`split_by_part`
run a function over consecutive runs of tasks on that many threads.  The functions release the GIL
for their real work (NumPy operations, BLAS calls, Numba kernels with ``nogil``).

**One CPU per worker.**  Linux decides on which CPU a thread runs each time it wakes.  Measured on a
2-core virtual machine: after the process had slept 0.1 s or more, the calling thread was placed on
the CPU of the worker it had woken and stayed there, so both halves of each split product ran on one
core for tens of milliseconds (a product of 2048 x 256 by 256 x 1024: 2.3 ms, after a pause 4.5 ms;
the benchmark block's training step on 2 threads: 34 ms, after a 0.3 s pause 56 ms).  OpenMP's and
OpenBLAS's workers spin between tasks and keep their CPUs; ours block.  So when the pool has a thread
for every CPU this process may use (the default), each worker pins itself to one of them and the
calling thread hands every part to the workers and waits, instead of computing the first part
itself: the parts always run on distinct CPUs, whatever CPU the caller wakes on (the same step after
a 0.3 s pause: 34 ms).  With fewer threads than CPUs nothing is pinned, since processes pinned to the
same first CPUs would share them while the others idle, and the caller takes the first part.

**fork.**  A child process has none of its parent's threads: the pool is dropped in the child and
made anew on first use (work handed to the parent's workers would wait forever).
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Tuple


def _default_threads() -> int:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return len(_cpus()) or os.cpu_count() or 1


def _cpus() -> List[int]:
    """The CPUs this process may run on, or ``[]`` where the system does not say (not Linux)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return []


_threads = _default_threads()
#: the executor and whether its workers are pinned (the caller then waits), made on first use
_pool: Optional[Tuple[ThreadPoolExecutor, bool]] = None
_pool_lock = threading.Lock()
_worker = threading.local()  # ``inside`` on the pool's own threads


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for the kernels' work (BLAS keeps the count it was started with)."""
    global _threads, _pool
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: the number of threads must be a positive int, got {n!r}.")
    with _pool_lock:
        if _pool is not None and n != _threads:
            _pool[0].shutdown(wait=True)
            _pool = None
        _threads = n


def get_num_threads() -> int:
    """How many threads the kernels use."""
    return _threads


def _start_worker(cpus: List[int], order: "itertools.count") -> None:
    """A new worker's first step: mark the thread as the pool's and, given ``cpus``, pin it to the next
    of them."""
    _worker.inside = True
    if cpus:
        try:
            os.sched_setaffinity(0, {cpus[next(order) % len(cpus)]})
        except OSError:  # a sandbox may forbid it: the worker then runs where the system puts it
            pass


def _executor() -> Tuple[ThreadPoolExecutor, bool]:
    global _pool
    with _pool_lock:
        if _pool is None:
            cpus = _cpus()
            pinned = 1 < len(cpus) <= _threads
            executor = ThreadPoolExecutor(_threads, thread_name_prefix="namedtensor-kernel",
                                          initializer=_start_worker,
                                          initargs=(cpus if pinned else [], itertools.count()))
            _pool = (executor, pinned)
        return _pool


def _forget_pool_in_child() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def split(parts: int, count: int, fn: Callable, *args) -> None:
    """``fn(first, last, *args)`` over ``count`` tasks, split into ``parts`` consecutive runs (at most
    :func:`get_num_threads`) on the pool's threads.  On one of the pool's own threads (``fn`` splitting
    again) the runs go one after another on that thread: its fellow workers may all be waiting."""
    if parts <= 1 or getattr(_worker, "inside", False):
        fn(0, count, *args)
        return
    bounds = [count * k // parts for k in range(parts + 1)]
    executor, pinned = _pool or _executor()
    first = 0 if pinned else 1
    running = [executor.submit(fn, bounds[k], bounds[k + 1], *args) for k in range(first, parts)]
    if not pinned:
        fn(bounds[0], bounds[1], *args)
    for r in running:
        r.result()


def split_by_part(parts: int, count: int, fn: Callable) -> None:
    """``fn(part, first, last)`` for each of ``parts`` consecutive runs of ``count`` tasks, on as many
    threads: for work that keeps one accumulator per part (a weight's gradient, a partial product)."""
    bounds = [count * p // parts for p in range(parts + 1)]

    def each(first: int, last: int) -> None:
        for p in range(first, last):
            fn(p, bounds[p], bounds[p + 1])

    split(parts, parts, each)
