"""In-place ops inside the graph: rebased histories, views (CopySlices), the version counter, the
in-place variant of every elementwise op, the samplers, and ``edit`` (the machinery behind them).

Gradients of in-place programs are checked against the same programs written out of place; PyTorch,
where installed, is a second reference."""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops import elementwise, inplace
from namedtensor.testing import assert_close, gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")


def rand(shape, names=None, seed=0, requires_grad=True):
    a = np.random.default_rng(seed).standard_normal(shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


def grads(program, a, names=("r", "c")):
    x = nt.tensor(a, names=names, requires_grad=True)
    y = program(x)
    y.sum().backward()
    return y.detach(), x.grad


# ----------------------------------------------------------------------------- random chains against out of place

# (in-place step, the same step out of place): each takes and returns the tensor h, and may read x
STEPS = {
    "mul_": (lambda h, x: h.mul_(x), lambda h, x: h * x),
    "add_": (lambda h, x: h.add_(1.5), lambda h, x: h + 1.5),
    "div_": (lambda h, x: h.div_(x * x + 1), lambda h, x: h / (x * x + 1)),
    "sin_": (lambda h, x: h.sin_(), lambda h, x: h.sin()),
    "exp_": (lambda h, x: h.tanh_().exp_(), lambda h, x: h.tanh().exp()),
    "pow_": (lambda h, x: h.pow_(2), lambda h, x: h ** 2),
    "sigmoid_": (lambda h, x: h.sigmoid_(), lambda h, x: h.sigmoid()),
    "clamp_": (lambda h, x: h.clamp_(-0.5, 0.7), lambda h, x: h.clip(-0.5, 0.7)),
    "masked_fill_": (lambda h, x: h.masked_fill_(x > 0.5, 0.25), lambda h, x: h.masked_fill(x > 0.5, 0.25)),
    "row_mul_": (lambda h, x: (h[{"r": 0}].mul_(3.0), h)[1],
                 lambda h, x: nt.cat([h[{"r": slice(0, 1)}] * 3.0, h[{"r": slice(1, None)}]], "r")),
    "transpose_add_": (lambda h, x: (h.T.add_(x.T), h)[1], lambda h, x: h + x),
    "setitem": (lambda h, x: (h.__setitem__((slice(None), 1), x[:, 0] * 2), h)[1],
                lambda h, x: nt.where(nt.tensor(np.arange(3) == 1, names=("c",)), (x[:, 0] * 2).align_to("r", "c"),
                                      h)),
    "iadd": (lambda h, x: _iadd(h, x), lambda h, x: h + x * 0.5),
}


def _iadd(h, x):
    h += x * 0.5
    return h


@settings(max_examples=40, deadline=None)
@given(chain=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=5), seed=st.integers(0, 2 ** 16))
def test_inplace_chains_match_out_of_place(chain, seed):
    a = np.random.default_rng(seed).uniform(-1, 1, (2, 3))

    def program(k):
        def run(x):
            h = x * 1.0
            for name in chain:
                h = STEPS[name][k](h, x)
            return h * x
        return run

    y_in, g_in = grads(program(0), a)
    y_out, g_out = grads(program(1), a)
    assert_close(y_in, y_out.numpy())
    assert g_in.names == g_out.names == ("r", "c")
    assert_close(g_in, g_out.numpy())


def test_rebased_history_gradcheck_and_gradgradcheck():
    x, _ = rand((2, 3), ("r", "c"))
    w, _ = rand((3,), ("c",), seed=1)

    def f(x, w):
        h = x * 1.0
        h.mul_(w).sin_()
        h[{"r": 0}].add_(w)
        return h.exp_()

    assert gradcheck(f, x, w)
    assert gradgradcheck(f, x, w)


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((3, 4))

    def program(m, x):
        h = x * 2
        q = h.T
        q.div_(2.0)
        q[0, 1:] = 0.0
        v = h[1:]
        h.relu_()
        return v.exp() * 3

    x = nt.tensor(a, requires_grad=True)
    program(nt, x).sum().backward()
    xt = torch.tensor(a, requires_grad=True)
    program(torch, xt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())


# ----------------------------------------------------------------------------- rebasing, views, versions


def test_non_leaf_is_rebased():
    x, a = rand((2, 3), ("r", "c"))
    h = x * 2
    first = h.grad_fn
    assert h.sin_() is h and h.grad_fn is not first and h.grad_fn.edges[0][0] is first
    h.sum().backward()
    assert_close(x.grad, 2 * np.cos(2 * a))


def test_view_edit_updates_the_base_and_other_views():
    x, a = rand((2, 3), ("r", "c"))
    h = x * 1.0
    row, col = h[{"r": 1}], h[{"c": 0}]  # col overlaps row at (1, 0)
    row.mul_(3.0)
    assert h.grad_fn.op.name == "copy_slices"
    (h.sum() + col.sum()).backward()
    expected = np.ones((2, 3))
    expected[1] = 3.0
    expected[:, 0] += [1.0, 3.0]
    assert_close(x.grad, expected)


def test_base_edit_rebuilds_views_made_before():
    x, a = rand((4,), ("n",))
    h = x * 1.0
    view = h.rename("m")
    pieces = h.split(2, "n")
    h.mul_(x)
    (view.sum() + pieces[1].sum()).backward()
    assert_close(x.grad, 2 * a * np.array([1.0, 1.0, 2.0, 2.0]))


def test_reshape_edit_where_it_is_a_view():
    x, a = rand((2, 2), ("p", "q"))
    h = x * 1.0
    flat = h.reshape(4, names=("n",))
    flat.mul_(3.0)
    shared = h._B.is_view_of(flat.array, h.array)
    h.sum().backward()
    assert_close(x.grad, np.full((2, 2), 3.0 if shared else 1.0))


def test_write_into_a_tensor_that_needs_no_grad_joins_the_graph():
    x, a = rand((3,), ("n",))
    out = nt.zeros(2, 3, names=("k", "n"), dtype=nt.float64)
    for i in range(2):
        out[{"k": i}] = x * (i + 1)
    assert out.requires_grad
    out.sin().sum().backward()
    assert_close(x.grad, np.cos(a) + 2 * np.cos(2 * a))
    buf = nt.zeros(4, dtype=nt.float64)
    y, b = rand((2,), seed=1)
    buf[1:3].copy_(y)
    (buf * nt.tensor([1.0, 2.0, 3.0, 4.0], dtype=nt.float64)).sum().backward()
    assert_close(y.grad, np.array([2.0, 3.0]))


def test_fill_and_samplers_keep_self_in_the_graph_with_zero_gradient():
    x, _ = rand((2, 3), ("r", "c"))
    for edit in (lambda h: h.zero_(), lambda h: h.fill_(2.0), lambda h: h.normal_(), lambda h: h.bernoulli_(0.5)):
        h = x * 1.0
        edit(h)
        assert h.requires_grad
        h.sum().backward()
        assert_close(x.grad, np.zeros((2, 3)))
        x.grad = None


def test_overwritten_value_is_refused_with_the_op_named():
    x, _ = rand((2, 3), ("r", "c"))
    h = x * 1.0
    z = h.sin()  # saves h
    h.mul_(2.0)
    with pytest.raises(RuntimeError, match=r"sin: a tensor saved for its gradient .* was modified in place"):
        z.sum().backward()
    e = (x * 1.0).exp_()  # exp saves its output: e itself
    e.add_(1.0)
    y = e * 1.0
    y.sum().backward()  # the result of exp_ is kept with its node; later edits of e do not reach it
    h = x * 1.0
    v = h[{"r": 0}]
    z = v.cos()
    h.add_(1.0)  # through the base
    with pytest.raises(RuntimeError, match="cos: a tensor saved for its gradient"):
        z.sum().backward()


def test_original_value_is_kept_where_the_backward_needs_it():
    x, a = rand((3,), ("n",))
    h = x * 1.0
    h.sin_()  # sin's backward needs the value before the write: a copy is saved, as PyTorch does
    h.sum().backward()
    assert_close(x.grad, np.cos(a))


def test_leaves_and_views_of_leaves_are_refused():
    w, _ = rand((2, 3), ("r", "c"))
    with pytest.raises(RuntimeError, match=r"exp_: in-place edit of a tensor that requires grad \(a leaf"):
        w.exp_()
    with pytest.raises(RuntimeError, match=r"mul_: in-place edit of a view of a tensor that requires grad"):
        w[0].mul_(2.0)
    with nt.no_grad():
        view = w[0]
    with pytest.raises(RuntimeError, match="setitem: in-place edit of a view of a tensor that requires grad"):
        view[0] = 1.0
    with nt.no_grad():
        w.relu_()
        w[{"r": 0}].uniform_()
    assert w.requires_grad and w.is_leaf


def test_fast_path_records_nothing():
    x = nt.tensor(np.ones((2, 3)))
    x.exp_()
    x[0].mul_(2.0)
    assert x.grad_fn is None and not x.requires_grad
    w, _ = rand((3,))
    with nt.no_grad():
        h = w * 1.0
        h.add_(w)
    assert h.grad_fn is None


# ----------------------------------------------------------------------------- the elementwise family's variants

VARIANTS = sorted(n for n in elementwise.__all__ if n in elementwise.METHODS and n not in inplace._NO_VARIANT)


def test_every_elementwise_op_has_a_variant():
    for name in VARIANTS:
        assert callable(getattr(nt.Tensor, name + "_")), name
    assert not hasattr(nt.Tensor, "where_")


# arguments for the variants whose op takes more than self
ARGS = {"pow": (2.0,), "clamp": (-0.5, 0.5), "clip": (-0.5, 0.5), "floor_divide": (0.7,), "remainder": (0.7,),
        "mod": (0.7,), "maximum": (0.1,), "minimum": (0.1,), "logical_and": (True,), "logical_or": (False,),
        "logical_xor": (True,), "polygamma": (1,)}


# inputs inside the domain of the ops whose domain does not hold (0.2, 1.5)
DOMAINS = {"acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.1, 3.0),
           "erfinv": (-0.9, 0.9)}


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_matches_the_out_of_place_op(name):
    fn = elementwise.METHODS[name]
    # a number for each argument the method requires, unless the op needs particular ones
    required = [p for p in list(inspect.signature(fn).parameters.values())[1:]
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    args = ARGS.get(name, (0.3,) * len(required))
    if name in ("addcmul", "addcdiv"):  # one of the two factors must be a tensor
        args = (nt.tensor(np.full(3, 0.5)), 0.3)
    low, high = DOMAINS.get(name, (0.2, 1.5))
    a = np.random.default_rng(1).uniform(low, high, (2, 3))
    t = nt.tensor(a, names=("r", None))
    expected = fn(nt.tensor(a, names=("r", None)), *args)
    assert np.isfinite(expected.numpy()).all(), "inputs outside the op's domain would compare NaN with NaN"
    before = t._version
    assert getattr(t, name + "_")(*args) is t
    assert t._version == before + 1 and t.names == ("r", None) and t.dtype == nt.float64
    assert_close(t, expected.to(nt.float64).numpy())


@pytest.mark.parametrize("name", ["exp", "sqrt", "tanh", "relu", "gelu", "square", "sigmoid", "softplus", "pow"])
def test_variant_gradients(name):
    args = ARGS.get(name, ())
    x = nt.tensor(np.random.default_rng(2).uniform(0.2, 1.5, (2, 3)), names=("r", "c"), requires_grad=True)

    def inplace_form(x):
        return getattr(x * 1.0, name + "_")(*args)

    assert gradcheck(inplace_form, x)
    assert gradgradcheck(inplace_form, x)
    assert_close(nt.grad(inplace_form(x).sum(), x)[0], nt.grad(getattr(x, name)(*args).sum(), x)[0].numpy())


def test_variant_names_fill_and_errors():
    t = nt.tensor(np.ones((2, 3)), names=(None, "c"))
    t.maximum_(nt.tensor(np.zeros((2, 1)), names=("r", None)))
    assert t.names == ("r", "c")
    with pytest.raises(nt.NamesError, match=r"^pow_: dims"):
        t.pow_(nt.tensor(np.ones(3), names=("other",)))
    with pytest.raises(ValueError, match=r"maximum_: the result has shape \(2, 2, 3\), but an in-place op cannot"):
        t.maximum_(nt.zeros(2, 2, 3, dtype=nt.float64))
    i = nt.tensor([1, 4, 9])
    with pytest.raises(TypeError, match="sqrt_: cannot write a float value into a tensor of dtype nt.int64"):
        i.sqrt_()
    i.neg_()
    assert i.tolist() == [-1, -4, -9] and i.dtype == nt.int64
    b = nt.tensor([True, False])
    b.logical_not_()
    assert b.tolist() == [False, True]
    f = nt.tensor([0.5, -1.0])
    f.gt_(0)  # a comparison written back in self's dtype, as PyTorch does
    assert f.tolist() == [1.0, 0.0] and f.dtype == nt.float32


def test_edit_is_the_machinery_for_any_op():
    x, a = rand((2, 3), ("r", "c"))
    h = x * 1.0
    assert inplace.edit(h, nt.softmax, "softmax", "c") is h
    h.sum().backward()
    assert_close(x.grad, np.zeros((2, 3)), atol=1e-12)
    with pytest.raises(nt.NamesError, match="^softmax: no dim named"):
        inplace.edit(h, nt.softmax, "softmax", "nope")


# ----------------------------------------------------------------------------- samplers


def test_samplers_values_and_ranges():
    nt.manual_seed(0)
    t = nt.zeros(4000, names=("n",), dtype=nt.float64)
    checks = {
        "uniform_": ((-2.0, 3.0), lambda v: v.min() >= -2 and v.max() < 3 and abs(v.mean() - 0.5) < 0.1),
        "normal_": ((1.0, 2.0), lambda v: abs(v.mean() - 1) < 0.15 and abs(v.std() - 2) < 0.15),
        "log_normal_": ((0.0, 0.5), lambda v: v.min() > 0 and abs(np.log(v).std() - 0.5) < 0.05),
        "exponential_": ((2.0,), lambda v: v.min() >= 0 and abs(v.mean() - 0.5) < 0.05),
        "cauchy_": ((1.0, 0.1), lambda v: abs(np.median(v) - 1) < 0.02),
        "geometric_": ((0.25,), lambda v: v.min() >= 1 and np.all(v == np.round(v)) and abs(v.mean() - 4) < 0.3),
        "bernoulli_": ((0.3,), lambda v: set(np.unique(v)) <= {0.0, 1.0} and abs(v.mean() - 0.3) < 0.05),
        "random_": ((2, 5), lambda v: set(np.unique(v)) == {2.0, 3.0, 4.0}),
    }
    for name, (args, ok) in checks.items():
        before = t._version
        assert getattr(t, name)(*args) is t and t.names == ("n",) and t._version == before + 1
        assert ok(t.numpy()), name
    i = nt.zeros(1000, dtype=nt.int64)
    i.random_(7)
    assert set(np.unique(i.numpy())) == set(range(7))
    p = nt.tensor(np.array([0.0, 1.0] * 50), names=("n",))
    i = nt.zeros(100, names=("n",), dtype=nt.int64).bernoulli_(p)
    assert_close(i, p.numpy().astype(np.int64))


def test_sampler_errors():
    t = nt.zeros(3, dtype=nt.float32)
    with pytest.raises(ValueError, match="uniform_: expects from <= to"):
        t.uniform_(1.0, 0.0)
    with pytest.raises(ValueError, match="normal_: expects std >= 0"):
        t.normal_(0.0, -1.0)
    with pytest.raises(ValueError, match="bernoulli_: expects 0 <= p <= 1"):
        t.bernoulli_(1.5)
    with pytest.raises(ValueError, match="exponential_: expects lambd > 0"):
        t.exponential_(0.0)
    with pytest.raises(ValueError, match="geometric_: expects 0 < p < 1"):
        t.geometric_(1.0)
    with pytest.raises(ValueError, match="random_: expects from < to"):
        t.random_(3, 3)
    with pytest.raises(TypeError, match="normal_: draws floats"):
        nt.zeros(3, dtype=nt.int64).normal_()
    with pytest.raises(TypeError, match="random_: to must be an int"):
        t.random_(0, 2.5)


# ----------------------------------------------------------------------------- dry runs


def test_dry_run_through_inplace_ops():
    w = nt.spec({"r": 2, "c": 3}, requires_grad=True)

    def f(w):
        h = w * 2
        h.relu_()
        h[{"r": 0}].mul_(w[{"r": 1}])
        h.masked_fill_(h > 1, 0.0)
        return h.sum("c")

    shapes = nt.trace_shapes(f, w)
    assert shapes is not None
    out = f(w)
    assert out.names == ("r",) and out.device == "meta"
    out.sum().backward()
    assert w.grad.names == ("r", "c")
