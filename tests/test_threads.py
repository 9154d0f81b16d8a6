"""Autograd state is per thread: grad mode, the backward's callback queue and the shape tracer.

Threads that train independent models at once must get exactly what they get one after the other.
The first tests pin each piece of per-thread state with events that force the interleaving that
broke it (one thread inside a ``backward()`` or a ``no_grad`` block or a trace while another runs);
the last runs whole training loops in several threads, many times over, against sequential runs.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Callable, List, Sequence

import numpy as np
import pytest

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor import backends
from namedtensor.autograd import mode, queue_callback
from namedtensor.backends.numpy_backend import NumpyBackend

WAIT = 30  # seconds: only a broken test ever waits this long


def run_threads(fns: Sequence[Callable[[], object]]) -> List[object]:
    """Run each function in a thread of its own, all at once; their results, or the first error raised."""
    results: List[object] = [None] * len(fns)
    errors: List[BaseException] = []

    def body(i: int) -> None:
        try:
            results[i] = fns[i]()
        except BaseException as e:  # handed to the test's thread, which raises it
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]
    return results


def wait(event: threading.Event) -> None:
    assert event.wait(WAIT), "the other thread never got there"


@contextmanager
def inside_backward():
    """Run a backward in another thread and hold it inside (in a gradient hook) for the block."""
    entered, leave = threading.Event(), threading.Event()
    w = nt.tensor(np.ones(3, np.float32), names=("x",), requires_grad=True)
    y = w * 2

    def hook(g):
        entered.set()
        wait(leave)

    y.register_hook(hook)
    worker = threading.Thread(target=lambda: y.sum().backward())
    worker.start()
    try:
        wait(entered)
        yield
    finally:
        leave.set()
        worker.join(WAIT)
    assert w.grad is not None


def test_a_backward_in_another_thread_leaves_this_threads_grad_mode_on():
    w = nt.tensor(np.ones(3, np.float32), names=("x",), requires_grad=True)
    with inside_backward():
        assert nt.is_grad_enabled()
        assert (w * 3).requires_grad


def test_a_new_thread_starts_with_grad_mode_on():
    w = nt.tensor(np.ones(3, np.float32), names=("x",), requires_grad=True)
    with nt.no_grad():
        seen = run_threads([lambda: (nt.is_grad_enabled(), (w * 3).requires_grad)])[0]
        assert not (w * 3).requires_grad
    assert seen == (True, True)


def test_set_grad_enabled_as_a_call_changes_only_its_thread():
    def turn_off():
        nt.set_grad_enabled(False)
        return nt.is_grad_enabled()

    assert run_threads([turn_off]) == [False]
    assert nt.is_grad_enabled()


def test_interleaved_no_grad_blocks_each_restore_their_own_threads_mode():
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    w = nt.tensor(np.ones(3, np.float32), names=("x",), requires_grad=True)

    def other():
        with nt.no_grad():
            a_in.set()
            wait(b_in)
        a_out.set()
        return nt.is_grad_enabled()

    def this():
        wait(a_in)
        with nt.no_grad():
            b_in.set()
            wait(a_out)  # the other block has ended: this one must still be in force
            inside = (nt.is_grad_enabled(), (w * 3).requires_grad)
        return inside, nt.is_grad_enabled()

    other_after, (inside, after) = run_threads([other, this])
    assert inside == (False, False)
    assert after and other_after
    assert nt.is_grad_enabled()


def test_queue_callback_outside_this_threads_backward_raises_while_another_thread_runs_one():
    with inside_backward():
        with pytest.raises(RuntimeError, match="queue_callback: no backward pass is running"):
            queue_callback(lambda: None)


def test_a_trace_records_only_its_own_threads_ops():
    traced, done = threading.Event(), threading.Event()
    x = nt.tensor(np.ones((2, 3), np.float32), names=("batch", "feat"))

    def fn(x):
        y = x * 2
        traced.set()
        wait(done)  # the other thread runs its ops now
        return y.sum("feat")

    def other():
        wait(traced)
        try:
            nt.exp(x).sum().neg()
            return mode.current_tracer()
        finally:
            done.set()

    trace, other_tracer = run_threads([lambda: nt.trace_shapes(fn, x), other])
    assert trace.ops == ["mul", "sum"]
    assert other_tracer is None


def test_threads_that_make_the_cpu_backend_at_once_get_the_same_one(monkeypatch):
    both_inside = threading.Barrier(2)
    make = NumpyBackend.__init__

    def slow_init(self):
        both_inside.wait(WAIT)  # both threads are making a backend before either has kept it
        make(self)

    monkeypatch.setattr(backends, "_cpu", None)
    monkeypatch.setattr(backends, "_by_name", {})
    monkeypatch.setattr(NumpyBackend, "__init__", slow_init)
    first, second = run_threads([backends.cpu, backends.cpu])
    assert first is second is backends.cpu()


def test_threads_that_make_a_device_backend_at_once_get_the_same_one(monkeypatch):
    both_inside = threading.Barrier(2)

    def make_cuda(device, index):
        both_inside.wait(WAIT)
        return NumpyBackend()

    monkeypatch.setattr(backends, "_devices", {})
    monkeypatch.setattr(backends, "_make_cuda", make_cuda)
    first, second = run_threads([lambda: backends.get("cuda:3"), lambda: backends.get("cuda:3")])
    assert first is second is backends.get("cuda:3")


# ----------------------------------------------------------------------------- whole training loops

BATCH, HIDDEN = 256, 256  # hidden activations of 65536 elements: large enough for elision
STEPS = 3
THREADS = 4
REPEATS = 25


def model(seed: int) -> dict:
    """A two-layer classifier's parameters and one batch, as NumPy arrays."""
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((4, HIDDEN)) * 0.5).astype(np.float32),
        "b1": (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((HIDDEN, 4)) * 0.06).astype(np.float32),
        "x": rng.standard_normal((BATCH, 4)).astype(np.float32),
        "target": rng.integers(0, 4, BATCH),
    }


def train(arrays: dict) -> tuple:
    """Train a fresh copy of the model: the final parameters, the ops of a traced forward, and how
    many callbacks its post-accumulate hooks queued (each must run in its own thread's backward)."""
    w1 = nt.tensor(arrays["w1"].copy(), names=("in", "hidden"), requires_grad=True)
    b1 = nt.tensor(arrays["b1"].copy(), names=("hidden",), requires_grad=True)
    w2 = nt.tensor(arrays["w2"].copy(), names=("hidden", "class"), requires_grad=True)
    x = nt.tensor(arrays["x"], names=("batch", "in"))
    target = nt.tensor(arrays["target"], names=("batch",))
    params = [w1, b1, w2]
    callbacks = []
    for p in params:
        p.register_post_accumulate_grad_hook(lambda p: queue_callback(lambda: callbacks.append(p.names)))

    def loss_fn(x):
        h = nt.tanh((x @ w1) * 0.5 + b1)  # the add writes into the buffer of the temporary product
        with nt.no_grad():
            scale = (h * h + 1.0).mean()  # elided too: no graph is recorded here
        return F.cross_entropy(h @ w2 / scale, target, dim="class")

    ops = nt.trace_shapes(loss_fn, x).ops
    opt = nt.optim.AdamW(params, lr=1e-2)
    for _ in range(STEPS):
        opt.zero_grad()
        loss_fn(x).backward()
        opt.step()
    assert nt.is_grad_enabled()
    return [p.detach().numpy().copy() for p in params], ops, len(callbacks)


def assert_same_training(got: tuple, expected: tuple) -> None:
    params, ops, n_callbacks = got
    assert ops == expected[1]
    assert n_callbacks == expected[2] == len(params) * STEPS
    for p, e in zip(params, expected[0]):
        np.testing.assert_array_equal(p, e)


def test_threads_training_independent_models_give_exactly_the_sequential_results():
    models = [model(seed) for seed in range(THREADS)]
    expected = [train(m) for m in models]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # hand the GIL over often, so that the threads' ops interleave finely
    try:
        for _ in range(REPEATS):
            start = threading.Barrier(THREADS)

            def job(m):
                def run():
                    start.wait(WAIT)
                    return train(m)

                return run

            got = run_threads([job(m) for m in models])
            for g, e in zip(got, expected):
                assert_same_training(g, e)
    finally:
        sys.setswitchinterval(interval)
    assert nt.is_grad_enabled()
