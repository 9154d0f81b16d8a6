"""The CPU thread pool (namedtensor/backends/thread_pool.py): a worker pinned to each CPU with the caller
waiting where the pool has a thread for every CPU, nothing pinned and the caller taking the first part
where it has fewer, nested splits run inline, and a forked child that makes its own pool."""

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from namedtensor.backends import thread_pool

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")

CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
TWO_CPUS = CPUS[:2] if len(CPUS) > 1 else CPUS * 2  # on one CPU, two workers pinned to it


@pytest.fixture
def pool_of(monkeypatch):
    """``pool_of(threads, cpus)``: a new pool of ``threads`` threads in a process that may use ``cpus``."""
    before = thread_pool.get_num_threads()

    def make(threads: int, cpus: list) -> None:
        monkeypatch.setattr(thread_pool, "_cpus", lambda: list(cpus))
        thread_pool.set_num_threads(threads + 1)  # a count change shuts the old pool down
        thread_pool.set_num_threads(threads)

    yield make
    thread_pool.set_num_threads(before + 1)
    thread_pool.set_num_threads(before)


def run_parts(parts: int) -> list:
    """Split ``parts`` tasks into as many runs, each waiting until all are running (so each is on a thread
    of its own); returns each run's (first, thread id, CPUs it may use)."""
    ready = threading.Barrier(parts, timeout=30)
    seen = []

    def fn(first: int, last: int) -> None:
        ready.wait()
        seen.append((first, threading.get_ident(), frozenset(os.sched_getaffinity(0))))

    thread_pool.split(parts, parts, fn)
    return sorted(seen)


def test_with_a_thread_for_every_cpu_each_worker_has_one_cpu_and_the_caller_waits(pool_of):
    cpus = CPUS if len(CPUS) > 1 else TWO_CPUS
    pool_of(len(cpus), cpus)
    seen = run_parts(len(cpus))
    assert threading.get_ident() not in {ident for _, ident, _ in seen}
    assert sorted(next(iter(allowed)) for _, _, allowed in seen) == sorted(cpus)
    assert all(len(allowed) == 1 for _, _, allowed in seen)
    assert os.sched_getaffinity(0) == set(CPUS)  # the caller is left alone


def test_more_threads_than_cpus_share_them_out_in_turn(pool_of):
    pool_of(3, TWO_CPUS)
    seen = run_parts(3)
    assert [len(allowed) for _, _, allowed in seen] == [1, 1, 1]


def test_with_fewer_threads_than_cpus_nothing_is_pinned_and_the_caller_takes_the_first_part(pool_of):
    pool_of(2, CPUS + [max(CPUS) + 1, max(CPUS) + 2])
    seen = run_parts(2)
    assert seen[0][1] == threading.get_ident()
    assert seen[1][1] != threading.get_ident() and seen[1][2] == set(CPUS)


def test_a_worker_the_system_will_not_pin_runs_unpinned(pool_of, monkeypatch):
    def refuse(pid, cpus):
        raise PermissionError("not here")

    monkeypatch.setattr(os, "sched_setaffinity", refuse)
    pool_of(2, TWO_CPUS)
    seen = run_parts(2)
    assert threading.get_ident() not in {ident for _, ident, _ in seen}
    assert all(allowed == set(CPUS) for _, _, allowed in seen)


def in_new_process(code: str) -> str:
    """Run ``code`` in a new Python process, which must end within two minutes; its output."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_split_inside_a_worker_runs_on_that_worker():
    # in a process of its own: without the rule the pinned workers would wait for each other forever
    out = in_new_process(f"""
        import threading
        from namedtensor.backends import thread_pool
        thread_pool._cpus = lambda: {TWO_CPUS!r}  # pinned: the caller waits, and the workers take every part
        thread_pool.set_num_threads(2)
        both = threading.Barrier(2, timeout=30)  # the outer parts run at once, on both workers
        inner = []

        def outer(first, last):
            both.wait()
            thread_pool.split(2, 4, lambda lo, hi: inner.append((lo, hi, threading.get_ident())))

        thread_pool.split(2, 2, outer)
        print(sorted((lo, hi) for lo, hi, _ in inner), len({{ident for _, _, ident in inner}}))
    """)
    assert out == "[(0, 4), (0, 4)] 2"  # each worker ran its whole inner split itself


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_forked_child_makes_its_own_pool():
    out = in_new_process("""
        import os
        import threading
        from namedtensor.backends import thread_pool
        thread_pool.set_num_threads(2)
        ran = []
        both = threading.Barrier(2, timeout=30)  # the parts run at once: every thread the split uses is made
        thread_pool.split(2, 2, lambda first, last: (both.wait(), ran.append(first)))  # now idle
        pid = os.fork()
        if pid == 0:
            thread_pool.split(2, 2, lambda first, last: ran.append(first))
            os._exit(0 if sorted(ran) == [0, 0, 1, 1] else 3)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """)
    assert out == "0"
