"""The autograd engine: backward, nt.grad, higher-order gradients, hooks, grad modes, version counters,
freeing saved arrays, no reference cycles, and multi-output nodes.  Every gradient has its tensor's names."""

import gc
import re
import tracemalloc
import weakref

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import namedtensor as nt
from namedtensor.autograd import Op, apply
from namedtensor.testing import assert_close, gradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def _leaf(a, names):
    return nt.tensor(np.asarray(a, dtype=np.float64), names=names, requires_grad=True)


# ----------------------------------------------------------------------------- backward


def test_backward_on_a_scalar():
    x = _leaf([1.0, 2.0, 3.0], ("x",))
    y = (x * x).sum()
    assert y.names == () and y.requires_grad and not y.is_leaf
    y.backward()
    assert x.grad.names == ("x",)
    assert_close(x.grad, np.array([2.0, 4.0, 6.0]))
    assert not x.grad.requires_grad and x.grad.grad_fn is None


def test_backward_of_a_leaf_itself():
    x = _leaf(3.0, ())
    x.backward()
    assert x.grad.item() == 1.0


def test_non_scalar_needs_gradient():
    x = _leaf([[1.0, 2.0]], ("a", "b"))
    y = x * 2
    with pytest.raises(RuntimeError, match=re.escape(
            "backward: a gradient can only be created implicitly for a scalar (0-dim) output; this one has names "
            "('a', 'b') and shape (1, 2). Reduce it (e.g. .sum()) or pass gradient=.")):
        y.backward()
    with pytest.raises(RuntimeError, match="scalar"):
        (x.sum("b")).backward()  # one element but not 0-dim


def test_backward_with_gradient():
    x = _leaf([[1.0, 2.0]], ("a", "b"))
    (x * 3).backward(nt.tensor([[1.0, 10.0]], names=("a", "b"), dtype=nt.float64))
    assert_close(x.grad, np.array([[3.0, 30.0]]))
    x.grad = None
    (x * 3).backward(nt.tensor([[1.0, 1.0]], dtype=nt.float64))  # unnamed gradient: takes the output's names
    assert x.grad.names == ("a", "b")
    x.grad = None
    (x * 3).backward(np.array([[2.0, 2.0]]))  # an array works too
    assert_close(x.grad, np.array([[6.0, 6.0]]))


def test_gradient_with_wrong_names_or_shape():
    x = _leaf([[1.0, 2.0]], ("a", "b"))
    with pytest.raises(nt.NamesError, match=re.escape(
            "backward: the gradient's names ('b', 'a') differ from the output's names ('a', 'b')")):
        (x * 3).backward(nt.ones(1, 2, names=("b", "a"), dtype=nt.float64))
    with pytest.raises(nt.NamesError, match="rename or align_as it first"):
        (x * 3).backward(nt.ones(1, 2, names=("a", None), dtype=nt.float64))
    with pytest.raises(ValueError, match=re.escape("backward: the gradient has shape (2,) but the output has shape "
                                                   "(1, 2)")):
        (x * 3).backward(nt.ones(2, dtype=nt.float64))


def test_backward_without_graph():
    x = nt.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="backward: the tensor does not require grad and has no graph"):
        x.sum().backward()
    y = _leaf([1.0], ("x",))
    with nt.no_grad():
        z = (y * 2).sum()
    with pytest.raises(RuntimeError, match="outside no_grad"):
        z.backward()


@fixture_ok
@given(nts.broadcastable_names())
def test_grad_names_equal_tensor_names_with_broadcasting(pair):
    (sa, na), (sb, nb) = pair
    rng = np.random.default_rng(0)
    a = _leaf(rng.normal(size=sa), na)
    b = _leaf(rng.normal(size=sb), nb)
    ((a * b).exp() + a - b).sum().backward()
    for t in (a, b):
        assert t.grad.names == t.names
        assert t.grad.shape == t.shape


def test_grad_names_through_many_ops():
    x = _leaf(np.ones((2, 3)), ("batch", "feat"))
    w = _leaf(np.ones(3), ("feat",))
    b = _leaf(np.ones((1, 1)), (None, None))
    y = ((x * w).tanh() + b).align_to("feat", "batch").rename(batch="B") / 3
    y.sum().backward()
    for t in (x, w, b):
        assert t.grad.names == t.names and t.grad.shape == t.shape
    assert_close(b.grad, np.array([[6.0 / 3]]))


def test_gradients_accumulate():
    x = _leaf([1.0, 2.0], ("x",))
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert_close(x.grad, np.array([2.0 + 3.0, 4.0 + 3.0]))
    assert x.grad.names == ("x",)


def test_diamond_sums_both_paths():
    x = _leaf(2.0, ())
    a = x * 3
    y = a * a + a.exp() + x  # a feeds three consumers
    y.backward()
    assert_close(x.grad, np.array(2 * 3 * 6.0 + 3 * np.exp(6.0) + 1))


def test_retain_graph():
    x = _leaf([1.0, 2.0], ("x",))
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_close(x.grad, np.array([4.0, 8.0]))
    with pytest.raises(RuntimeError, match="trying to backward through the graph a second time .* "
                                           "Pass retain_graph=True"):
        y.backward()


def test_saved_arrays_are_freed_after_backward():
    x = _leaf([1.0, 2.0], ("x",))
    y = x * x
    node = y.grad_fn
    assert node.saved is not None and len(node.saved) == 2
    z = y.exp().sum()
    exp_node = z.grad_fn
    z.backward()
    assert node.saved is None and node.freed
    assert exp_node.saved is None
    w = x * x
    w.sum().backward(retain_graph=True)
    assert w.grad_fn.saved is not None


def test_backward_with_inputs_only_fills_those():
    x = _leaf([1.0], ("x",))
    w = _leaf([2.0], ("x",))
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None
    assert_close(w.grad, np.array([1.0]))


# ----------------------------------------------------------------------------- nt.grad


def test_nt_grad_leaf_and_non_leaf():
    x = _leaf([1.0, 2.0], ("x",))
    h = x * 3  # non-leaf
    y = (h * h).sum()
    gx, gh = nt.grad(y, [x, h])
    assert_close(gh, 2 * np.array([3.0, 6.0]))
    assert_close(gx, 18 * np.array([1.0, 2.0]))
    assert gx.names == gh.names == ("x",)
    assert x.grad is None and h.grad is None  # nt.grad leaves .grad alone
    (g,) = nt.grad((x * x).sum(), x)  # a single input gives a 1-tuple
    assert_close(g, np.array([2.0, 4.0]))
    g2 = nt.grad([(x * 2).sum(), (x * x).sum()], x)[0]  # several outputs: gradients add
    assert_close(g2, np.array([4.0, 6.0]))
    ga, gb = nt.grad((x * x).sum(), [x, x])  # the same input twice
    assert_close(ga, np.array([2.0, 4.0]))
    assert_close(gb, np.array([2.0, 4.0]))


def test_nt_grad_allow_unused():
    x = _leaf([1.0], ("x",))
    u = _leaf([1.0], ("x",))
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match=re.escape("grad: input 1 was not used to compute the outputs; pass "
                                                     "allow_unused=True")):
        nt.grad(y, [x, u], retain_graph=True)
    gx, gu = nt.grad(y, [x, u], allow_unused=True)
    assert gu is None
    assert_close(gx, np.array([2.0]))


def test_nt_grad_errors():
    x = _leaf([1.0], ("x",))
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match=re.escape("grad: input 0 (names ('x',)) does not require grad")):
        nt.grad(y, nt.tensor([1.0], names=("x",)))
    with pytest.raises(TypeError, match="grad: inputs must be tensors, got list"):
        nt.grad(y, [[1.0]])


def test_create_graph_higher_derivatives():
    x = _leaf(2.0, ())
    y = x**3
    (g1,) = nt.grad(y, x, create_graph=True)
    (g2,) = nt.grad(g1, x, create_graph=True)
    (g3,) = nt.grad(g2, x)
    assert (g1.item(), g2.item(), g3.item()) == (12.0, 12.0, 6.0)
    assert g1.requires_grad and not g3.requires_grad


def test_create_graph_keeps_names_and_backward_into_grad():
    x = _leaf([0.5, 1.0], ("x",))
    (g,) = nt.grad(x.sin().sum(), x, create_graph=True)
    assert g.names == ("x",)
    g.sum().backward()
    assert x.grad.names == ("x",)
    assert_close(x.grad, -np.sin([0.5, 1.0]))
    y = _leaf([1.0, 2.0], ("y",))
    (y * y * y).sum().backward(create_graph=True)  # .grad itself has a graph
    assert y.grad.requires_grad
    (gg,) = nt.grad(y.grad.sum(), y)
    assert_close(gg, 6 * np.array([1.0, 2.0]))


# ----------------------------------------------------------------------------- hooks


def test_hooks_on_leaves():
    x = _leaf([1.0, 2.0], ("x",))
    seen = []
    remove = x.register_hook(lambda g: seen.append(g.names))
    x.register_hook(lambda g: g * 10)
    (x * 2).sum().backward()
    assert seen == [("x",)]
    assert_close(x.grad, np.array([20.0, 20.0]))
    remove()
    x.grad = None
    (x * 2).sum().backward()
    assert seen == [("x",)]  # removed
    assert_close(x.grad, np.array([20.0, 20.0]))
    remove()  # removing twice is harmless


def test_hooks_on_non_leaves():
    x = _leaf([1.0, 2.0], ("x",))
    y = x * 2
    remove = y.register_hook(lambda g: g + 1)
    (y * y).sum().backward()  # dL/dy = 2y = [4, 8] -> hook -> [5, 9] -> dL/dx = 2 * that
    assert_close(x.grad, np.array([10.0, 18.0]))
    x.grad = None
    y = x * 2
    remove = y.register_hook(lambda g: g * 0)
    remove()
    (y * y).sum().backward()
    assert_close(x.grad, np.array([8.0, 16.0]))


def test_hook_results_keep_names_and_shape():
    x = _leaf([1.0, 2.0], ("x",))
    y = x * 2
    y.register_hook(lambda g: g.rename(None))
    with pytest.raises(nt.NamesError, match=re.escape("hook: the gradient's names (None,) differ from the tensor's "
                                                      "names ('x',)")):
        (y * y).sum().backward()
    x.register_hook(lambda g: g.sum())
    with pytest.raises(ValueError, match=re.escape("hook: the hook returned a gradient of shape () for a tensor of "
                                                   "shape (2,)")):
        (x * 3).sum().backward()
    z = _leaf([1.0], ("z",))
    z.register_hook(lambda g: 1.0)
    with pytest.raises(TypeError, match="hook: a gradient hook must return a Tensor or None, got float"):
        (z * 3).sum().backward()


def test_register_hook_needs_grad():
    with pytest.raises(RuntimeError, match="register_hook: the tensor does not require grad"):
        nt.tensor([1.0]).register_hook(lambda g: g)


def test_post_accumulate_grad_hook():
    x = _leaf([1.0], ("x",))
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.item()))
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert seen == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="only leaf tensors that require grad"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_retain_grad():
    x = _leaf([1.0, 2.0], ("x",))
    y = x * 2
    y.retain_grad()
    y.retain_grad()  # twice is the same as once
    z = (y * y).sum()
    z.backward()
    assert y.grad.names == ("x",)
    assert_close(y.grad, np.array([4.0, 8.0]))
    x.retain_grad()  # a leaf keeps its gradient anyway
    assert x.grad is not None
    plain = x * 3
    plain.sum().backward()
    assert plain.grad is None
    with pytest.raises(RuntimeError, match="retain_grad: the tensor does not require grad"):
        nt.tensor([1.0]).retain_grad()


# ----------------------------------------------------------------------------- grad modes


def test_no_grad_context_and_decorator():
    x = _leaf([1.0], ("x",))
    with nt.no_grad():
        assert not nt.is_grad_enabled()
        y = x * 2
        with nt.enable_grad():
            assert nt.is_grad_enabled()
            z = x * 2
        assert not nt.is_grad_enabled()
    assert nt.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad

    @nt.no_grad()
    def f(t):
        return t * 2

    @nt.enable_grad()
    def g(t):
        return t * 2

    assert not f(x).requires_grad
    with nt.no_grad():
        assert g(x).requires_grad
    assert f.__name__ == "f"


def test_set_grad_enabled():
    x = _leaf([1.0], ("x",))
    with nt.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert nt.is_grad_enabled()
    with nt.set_grad_enabled(True):
        assert (x * 2).requires_grad
    try:
        nt.set_grad_enabled(False)  # a plain call sets the mode, as in PyTorch
        assert not nt.is_grad_enabled() and not (x * 2).requires_grad
        nt.set_grad_enabled(True)
        assert nt.is_grad_enabled() and (x * 2).requires_grad
    finally:
        nt.set_grad_enabled(True)

    @nt.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    assert nt.is_grad_enabled()


def test_grad_mode_restored_after_exception():
    with pytest.raises(KeyError):
        with nt.no_grad():
            raise KeyError("x")
    assert nt.is_grad_enabled()


def test_detach_shares_data():
    x = _leaf([1.0, 2.0], ("x",))
    d = x.detach()
    assert d.names == ("x",) and not d.requires_grad and d.is_leaf
    assert np.shares_memory(d.numpy(), x.detach().numpy())
    d._bump()
    assert x._version == d._version == 1  # a view: one version counter
    y = (x * 2).detach()
    assert y.grad_fn is None and not y.requires_grad


# ----------------------------------------------------------------------------- version counter


def test_in_place_edit_of_saved_tensor_raises_bump():
    x = _leaf([1.0, 2.0], ("x",))
    c = nt.tensor([3.0, 4.0], names=("x",), dtype=nt.float64)
    y = (x * c).sum()  # mul saves c
    c._bump()
    with pytest.raises(RuntimeError, match=re.escape("mul: a tensor saved for its gradient (names ('x',), shape (2,)) "
                                                     "was modified in place after it was saved (version 1, "
                                                     "expected 0)")):
        y.backward()


def test_in_place_edit_of_saved_tensor_raises_add_():
    x = _leaf([1.0, 2.0], ("x",))
    c = nt.tensor([3.0, 4.0], names=("x",), dtype=nt.float64)
    y = (x * c).sum()
    c.add_(1.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_in_place_edit_of_saved_output_raises():
    x = _leaf([1.0, 2.0], ("x",))
    e = x.exp()  # exp saves its output
    y = e.sum()
    e._bump()
    with pytest.raises(RuntimeError, match="exp: a tensor saved for its gradient .* was modified in place"):
        y.backward()


def test_edit_of_a_view_is_caught():
    x = _leaf([1.0, 2.0], ("x",))
    c = nt.tensor([3.0, 4.0], names=("x",), dtype=nt.float64)
    y = (x * c).sum()
    c.rename("y")._bump()  # rename is a view of c: same version counter
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_unsaved_edit_is_fine():
    x = _leaf([1.0, 2.0], ("x",))
    c = nt.tensor([3.0, 4.0], names=("x",), dtype=nt.float64)
    y = (x + c).sum()  # add saves nothing
    c._bump()
    y.backward()
    assert_close(x.grad, np.ones(2))


# ----------------------------------------------------------------------------- memory


def _step(x, w):
    y = ((x * w).tanh() + x.exp() / 2).sum()
    y.backward()
    return y


def test_no_reference_cycles():
    x = _leaf(np.ones((3, 4)), ("a", "b"))
    w = _leaf(np.ones(4), ("b",))
    was = gc.isenabled()
    gc.disable()
    try:
        nodes, tensors = [], []
        for _ in range(20):
            y = x * w
            z = y.tanh()
            loss = (z + y.exp()).sum()
            nodes += [weakref.ref(t.grad_fn) for t in (y, z, loss)]
            tensors += [weakref.ref(t) for t in (y, z, loss)]
            loss.backward()
            del y, z, loss
        assert all(r() is None for r in nodes)
        assert all(r() is None for r in tensors)
        # graphs dropped without backward go too
        y = (x * w).exp()
        node = weakref.ref(y.grad_fn)
        del y
        assert node() is None
        # retain_grad's hook does not keep its tensor alive
        y = x * w
        y.retain_grad()
        ref = weakref.ref(y)
        del y
        assert ref() is None
    finally:
        if was:
            gc.enable()


def _growth(step, x, w, steps: int = 200) -> int:
    """Bytes of live memory (traced, after a collection) that ``steps`` calls of ``step`` added.

    Measured after 10 calls untraced and 10 traced: the interpreter's free lists and caches fill during
    the first calls after tracing starts, once; a leak keeps adding, in proportion to the steps.
    """
    for _ in range(10):
        step(x, w)
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(10):
            step(x, w)
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(steps):
            step(x, w)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return after - before


def test_memory_stays_flat_over_many_steps():
    x = _leaf(np.ones((4, 5)), ("a", "b"))
    w = _leaf(np.ones(5), ("b",))
    kept = []

    def leaking_step(x, w):  # the smallest leak worth catching: one small tensor kept per step
        kept.append(_step(x, w).detach())

    leaked = _growth(leaking_step, x, w)
    kept.clear()
    grown = _growth(_step, x, w)
    # the same measure, relative: no fixed byte count that depends on the interpreter or the platform
    assert grown * 10 < leaked, f"grew by {grown} bytes over 200 steps; keeping one tensor per step: {leaked}"
    assert x.grad.names == ("a", "b")


# ----------------------------------------------------------------------------- multi-output nodes


class _TwoWays(Op):
    """Test op with two outputs: (2x, x**2)."""

    name = "two_ways"
    n_outputs = 2
    saves = (0,)

    @staticmethod
    def forward(B, x):
        return 2 * x, x * x

    @staticmethod
    def backward(node, g_double, g_square):
        (x,) = node.saved_tensors()
        return (g_double * 2 + g_square * 2 * x,)


def _two_ways(x):
    return apply(_TwoWays, (x,), (x.names, x.names))


def test_multi_output_only_one_gets_a_gradient():
    x = _leaf([1.0, 3.0], ("x",))
    double, square = _two_ways(x)
    assert double.grad_fn is square.grad_fn
    square.sum().backward(retain_graph=True)
    assert_close(x.grad, np.array([2.0, 6.0]))
    x.grad = None
    double.sum().backward(retain_graph=True)
    assert_close(x.grad, np.array([2.0, 2.0]))
    x.grad = None
    (double * square).sum().backward()  # both: d(2x^3)/dx = 6x^2
    assert_close(x.grad, 6 * np.array([1.0, 9.0]))
    assert gradcheck(lambda t: _two_ways(t)[1], x)


def test_hook_on_one_output_of_a_multi_output_node():
    x = _leaf([1.0, 3.0], ("x",))
    double, square = _two_ways(x)
    square.register_hook(lambda g: g * 0)
    (double + square).sum().backward()
    assert_close(x.grad, np.array([2.0, 2.0]))


def test_leaf_gradients_own_their_buffers():
    # optimizers and clipping edit .grad in place: one leaf's edit must not reach another's, or the caller's
    x = nt.tensor(np.ones(3), names=("a",), requires_grad=True)
    y = nt.tensor(np.ones(3), names=("a",), requires_grad=True)
    (x + y).sum().backward()
    with nt.no_grad():
        x.grad.mul_(10.0)
    np.testing.assert_array_equal(y.grad.numpy(), np.ones(3))
    given = nt.tensor(np.full(3, 2.0), names=("a",))
    x.grad = None
    x.backward(given)
    with nt.no_grad():
        x.grad.add_(1.0)
    np.testing.assert_array_equal(given.numpy(), np.full(3, 2.0))
    assert x.grad.names == ("a",)
