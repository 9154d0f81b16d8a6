"""Post-accumulate gradient hooks and backward callbacks: a leaf is finished as soon as every use of it
has run in the backward (what data-parallel training needs to start all-reducing early), once per
backward, after its ``.grad`` is set; ``queue_callback`` runs when the pass ends."""

import gc

import numpy as np
import pytest

import namedtensor as nt
from namedtensor.autograd import Op, apply, engine, queue_callback
from namedtensor.testing import assert_close

pytestmark = pytest.mark.usefixtures("backend")


def _leaf(a, names):
    return nt.tensor(np.asarray(a, dtype=np.float64), names=names, requires_grad=True)


def _record(log, *leaves):
    """Hook every leaf (by label) to log ``(label, its .grad as a list, which other leaves have a grad)``."""
    removers = []
    for label, t in leaves:
        def hook(t, label=label):
            assert t.grad is not None and t.grad.names == t.names
            others = tuple(other for other, u in leaves if u is not t and u.grad is not None)
            log.append((label, t.grad.detach().numpy().tolist(), others))
        removers.append(t.register_post_accumulate_grad_hook(hook))
    return removers


def test_fires_once_per_backward_after_grad_is_set_in_reverse_order_of_use():
    x = nt.tensor(np.array([1.0, 2.0]), names=("x",))
    w0, w1, w2 = _leaf([2.0, 3.0], ("x",)), _leaf([0.5, 1.0], ("x",)), _leaf(4.0, ())
    log = []
    _record(log, ("w0", w0), ("w1", w1), ("w2", w2))
    h = (x * w0).tanh()
    h.register_hook(lambda g: log.append(("h", None, ())))  # h's gradient: the backward is half-way
    loss = (((h * w1).tanh()) * w2).sum()
    loss.backward(retain_graph=True)
    # each fires as soon as its last use ran: w2 (last layer) first, before w1 and w0 have a gradient,
    # and w1 before the backward reached h
    assert [(label, others) for label, _, others in log] == [("w2", ()), ("w1", ("w2",)), ("h", ()),
                                                             ("w0", ("w1", "w2"))]
    del log[2]
    grads = {label: g for label, g, _ in log}
    assert grads["w0"] == w0.grad.numpy().tolist()
    loss.backward()  # a second backward fires each again, with the accumulated gradient
    assert [label for label, _, _ in log] == ["w2", "w1", "w0", "w2", "w1", "h", "w0"]
    assert_close(w0.grad, 2 * np.asarray(grads["w0"]))
    assert log[-1][1] == w0.grad.numpy().tolist()


def test_a_leaf_used_several_times_fires_once_with_every_contribution_in():
    x = nt.tensor(np.array([1.0, -2.0]), names=("x",))
    w, v = _leaf([2.0, 3.0], ("x",)), _leaf([0.5, 1.5], ("x",))
    log = []
    _record(log, ("w", w), ("v", v))
    a = x * w
    a.register_hook(lambda g: log.append(("a", None, ())))
    (a * v * w * w).sum().backward()  # w used at three depths, v between them
    assert [label for label, _, _ in log] == ["v", "a", "w"]
    del log[1]
    assert_close(w.grad, 3 * x.numpy() * v.detach().numpy() * w.detach().numpy() ** 2)
    assert log[1][1] == w.grad.numpy().tolist()


def test_a_leaf_used_twice_by_one_node_and_as_a_root():
    w = _leaf([1.0, 2.0], ("x",))
    log = []
    _record(log, ("w", w))
    (w * w).sum().backward()
    assert [g for _, g, _ in log] == [[2.0, 4.0]]
    w.backward(nt.tensor(np.array([1.0, 1.0]), names=("x",)))  # a leaf as the root of its own backward
    assert [g for _, g, _ in log] == [[2.0, 4.0], [3.0, 5.0]]


def test_leaf_gradient_hooks_run_first_and_removal():
    w = _leaf([1.0, 2.0], ("x",))
    seen = []
    w.register_hook(lambda g: g * 10)
    remove = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().tolist()))
    (w * 3).sum().backward()
    assert seen == [[30.0, 30.0]]
    remove()
    remove()  # removing twice is harmless
    (w * 3).sum().backward()
    assert seen == [[30.0, 30.0]]


def test_with_create_graph_the_hook_sees_a_differentiable_grad():
    w = _leaf([1.0, 2.0], ("x",))
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.requires_grad))
    (w * w * w).sum().backward(create_graph=True)
    assert seen == [True]
    (gg,) = nt.grad(w.grad.sum(), w)  # no hook: nt.grad leaves .grad alone
    assert seen == [True]
    assert_close(gg, 6 * np.array([1.0, 2.0]))


def test_backward_with_inputs_fires_the_hooks_of_those_inputs_only():
    a, b = _leaf([1.0], ("x",)), _leaf([2.0], ("x",))
    log = []
    _record(log, ("a", a), ("b", b))
    a.register_post_accumulate_grad_hook(lambda t: queue_callback(lambda: log.append(("end", None, ()))))
    (a * b).sum().backward(inputs=[a])
    assert [(label, g) for label, g, _ in log] == [("a", [2.0]), ("end", None)] and b.grad is None


class _NoGradThrough(Op):
    """The identity forward, no gradient back: the node before it never runs in backward."""

    name = "no_grad_through"

    @staticmethod
    def forward(B, x):
        return x

    @staticmethod
    def backward(node, g):
        return (None,)


def test_a_leaf_fed_by_a_node_that_gets_no_gradient_still_fires_once_at_the_end():
    w = _leaf([1.0, 2.0], ("x",))
    log = []
    _record(log, ("w", w))
    blocked = apply(_NoGradThrough, (w * 5,), ("x",))
    (blocked * 7 + w * 2).sum().backward()
    assert [g for _, g, _ in log] == [[2.0, 2.0]]


def test_queue_callback_runs_once_when_the_pass_ends():
    x = nt.tensor(np.array([1.0, 2.0]), names=("x",))
    w0, w1 = _leaf([2.0, 3.0], ("x",)), _leaf([0.5, 1.0], ("x",))
    events = []

    def hook(t):
        events.append("w1 hook")
        if len(events) == 1:
            queue_callback(lambda: events.append(("end", w0.grad is not None, w1.grad is not None)))

    w1.register_post_accumulate_grad_hook(hook)
    ((x * w0).tanh() * w1).sum().backward()
    assert events == ["w1 hook", ("end", True, True)]
    ((x * w0).tanh() * w1).sum().backward()  # callbacks do not carry over to the next pass
    assert events == ["w1 hook", ("end", True, True), "w1 hook"]
    with pytest.raises(RuntimeError, match="queue_callback: no backward pass is running"):
        queue_callback(lambda: None)


def test_hooks_on_dead_leaves_are_forgotten():
    w = _leaf([1.0], ("x",))
    w.register_post_accumulate_grad_hook(lambda t: None)
    key = id(w)
    assert key in engine._post_hooked
    del w
    gc.collect()
    assert key not in engine._post_hooked


def test_only_leaves_that_require_grad_take_one():
    x = _leaf([1.0], ("x",))
    with pytest.raises(RuntimeError, match="only leaf tensors that require grad"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="only leaf tensors that require grad"):
        nt.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
