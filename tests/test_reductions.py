"""Reductions, scans and softmax: values against NumPy, the name rule, gradients (first and second
order, with zeros and ties), numerical stability, and the error messages."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


def rand(shape, names=None, requires_grad=False, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


def leaf(a, names=None):
    return nt.tensor(np.asarray(a, dtype=np.float64), names=names, requires_grad=True)


def _np_logsumexp(a, axis, keepdims):
    m = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@st.composite
def reduction_case(draw, min_dims=1, single=False):
    """A named array, a dim spec for it (names, ints, negative ints, a tuple or a list) and its axes."""
    shape, names = draw(nts.named_shapes(min_dims=min_dims, max_dims=4))
    a = draw(nts.arrays(shape))
    ndim = len(shape)
    if single:
        axes = [draw(st.integers(0, ndim - 1))]
    else:
        axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))

    def spell(ax):
        choice = draw(st.sampled_from(["name", "int", "neg"]))
        if choice == "name" and names[ax] is not None:
            return names[ax]
        return ax - ndim if choice == "neg" else ax

    spelled = [spell(ax) for ax in axes]
    if single:
        dim = spelled[0]
    else:
        form = draw(st.sampled_from(["tuple", "list", "single"] if len(axes) == 1 else ["tuple", "list"]))
        dim = spelled[0] if form == "single" else tuple(spelled) if form == "tuple" else spelled
    keepdim = draw(st.booleans())
    out_names = names if keepdim else tuple(n for i, n in enumerate(names) if i not in axes)
    return a, names, dim, tuple(axes), keepdim, out_names


NUMPY_REDUCTIONS = {
    "sum": lambda a, ax, k: np.sum(a, axis=ax, keepdims=k),
    "mean": lambda a, ax, k: np.mean(a, axis=ax, keepdims=k),
    "prod": lambda a, ax, k: np.prod(a, axis=ax, keepdims=k),
    "amax": lambda a, ax, k: np.max(a, axis=ax, keepdims=k),
    "amin": lambda a, ax, k: np.min(a, axis=ax, keepdims=k),
    "var": lambda a, ax, k: np.var(a, axis=ax, keepdims=k, ddof=1),
    "std": lambda a, ax, k: np.std(a, axis=ax, keepdims=k, ddof=1),
    "logsumexp": _np_logsumexp,
    "norm": lambda a, ax, k: np.linalg.vector_norm(a, axis=ax, keepdims=k),
    "any": lambda a, ax, k: np.any(a > 0, axis=ax, keepdims=k),
    "all": lambda a, ax, k: np.all(a > 0, axis=ax, keepdims=k),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # var/std of one element: nan, as in NumPy
@pytest.mark.parametrize("op", sorted(NUMPY_REDUCTIONS))
@given(case=reduction_case())
def test_reductions_match_numpy(op, case):
    a, names, dim, axes, keepdim, out_names = case
    if op in ("any", "all"):
        t = nt.tensor(a, names=names) > 0
    else:
        t = nt.tensor(a, names=names)
    with np.errstate(all="ignore"):
        expected = NUMPY_REDUCTIONS[op](a, axes, keepdim)
    out = getattr(t, op)(dim=dim, keepdim=keepdim)
    assert out.names == out_names
    assert_close(out, np.asarray(expected), rtol=1e-9, atol=1e-12)
    assert_close(getattr(nt, op)(t, dim=dim, keepdim=keepdim), out)


@pytest.mark.filterwarnings("ignore:divide by zero")  # 0 ** p for p < 0, as in NumPy
@given(case=reduction_case(), p=st.sampled_from([2, 1, math.inf, -math.inf, 0, 3, 0.5, -1.5]))
def test_norm_orders_match_numpy(case, p):
    a, names, dim, axes, keepdim, out_names = case
    a = np.where(np.abs(a) < 0.5, 0.0, a)  # zeros matter for p = 0 and p < 1
    out = nt.tensor(a, names=names).norm(p, dim, keepdim=keepdim)
    assert out.names == out_names
    with np.errstate(divide="ignore"):
        assert_close(out, np.linalg.vector_norm(a, ord=p, axis=axes, keepdims=keepdim), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("op", ["max", "min"])
@given(case=reduction_case(single=True))
def test_max_min_along_a_dim(op, case):
    a, names, dim, (ax,), keepdim, out_names = case
    out = getattr(nt.tensor(a, names=names), op)(dim, keepdim=keepdim)
    values, indices = out
    assert out.values is values and out.indices is indices
    assert values.names == indices.names == out_names
    assert indices.dtype == nt.int64
    arg = np.argmax if op == "max" else np.argmin
    assert_close(values, getattr(np, op)(a, axis=ax, keepdims=keepdim))
    assert_close(indices, arg(a, axis=ax, keepdims=keepdim))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@given(case=reduction_case(single=True))
def test_argmax_argmin(op, case):
    a, names, dim, (ax,), keepdim, out_names = case
    t = nt.tensor(a, names=names)
    out = getattr(t, op)(dim, keepdim=keepdim)
    assert out.names == out_names and out.dtype == nt.int64
    assert_close(out, getattr(np, op)(a, axis=ax, keepdims=keepdim))
    flat = getattr(t, op)()
    assert flat.names == () and flat.item() == getattr(np, op)(a)
    kept = getattr(t, op)(keepdim=True)
    assert kept.names == names and kept.shape == (1,) * a.ndim


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "softmax", "log_softmax"])
@given(case=reduction_case(single=True))
def test_along_one_dim_keeps_names(op, case):
    a, names, dim, (ax,), _, _ = case
    expected = {
        "cumsum": lambda: np.cumsum(a, axis=ax),
        "cumprod": lambda: np.cumprod(a, axis=ax),
        "softmax": lambda: _np_softmax(a, ax),
        "log_softmax": lambda: np.log(_np_softmax(a, ax)),
    }[op]()
    t = nt.tensor(a, names=names)
    out = getattr(t, op)(dim)
    assert out.names == names
    assert_close(out, expected, rtol=1e-9, atol=1e-12)
    assert_close(getattr(nt, op)(t, dim), out)


def test_full_reductions_and_lists():
    t, a = rand((2, 3, 4), ("batch", "seq", None))
    assert t.sum().names == () and t.max().names == ()
    assert_close(t.prod(), np.prod(a), rtol=1e-9)
    assert_close(t.max(), np.max(a))
    assert_close(t.min(), np.min(a))
    assert_close(t.sum(["batch", -1]), a.sum(axis=(0, 2)))
    assert t.var(["seq"], keepdim=True).names == ("batch", "seq", None)
    assert t.std(("batch", "seq")).names == (None,)


def test_max_of_two_tensors_is_maximum():
    t, a = rand((3,), ("x",))
    u, b = rand((3,), ("x",), seed=1)
    assert_close(t.max(u), np.maximum(a, b))
    assert_close(nt.min(t, u), np.minimum(a, b))


def test_var_std_corrections():
    t, a = rand((3, 5), ("x", "y"))
    for c in (0, 1, 2):
        assert_close(t.var("y", correction=c), np.var(a, axis=1, ddof=c), rtol=1e-9)
        assert_close(t.std("y", correction=c), np.std(a, axis=1, ddof=c), rtol=1e-9)
    assert_close(t.var("y", unbiased=False), np.var(a, axis=1), rtol=1e-9)
    assert_close(t.std("y", True), np.std(a, axis=1, ddof=1), rtol=1e-9)


def test_integer_inputs():
    t = nt.tensor(np.array([[1, 2, 3], [4, 5, 7]], dtype=np.int32), names=("x", "y"))
    for op in ("mean", "var", "std", "logsumexp", "norm"):
        assert getattr(t, op)(dim="y").dtype == nt.float64, op
    assert t.softmax("y").dtype == nt.float64 and t.log_softmax("y").dtype == nt.float64
    assert_close(t.mean("y"), np.array([2.0, 16 / 3]), rtol=1e-6)
    assert t.argmax("y").dtype == nt.int64
    assert t.sum().item() == 22 and t.prod("y").tolist() == [6, 140]
    assert t.cumsum("y").tolist() == [[1, 3, 6], [4, 9, 16]]
    b = t > 3
    assert b.any("y").tolist() == [False, True] and b.all("x").tolist() == [False, False, False]
    assert b.any().dtype == nt.bool_


def test_bool_inputs_reduce_as_in_numpy():
    a = np.array([[True, False, True], [False, False, True]])
    t = nt.tensor(a, names=("x", "y"))
    assert t.sum("y").dtype == nt.int64 and t.sum("y").tolist() == [2, 1]
    assert t.prod("x").tolist() == [0, 0, 1]
    assert t.cumsum("y").tolist() == np.cumsum(a, axis=1).tolist()
    assert t.cumprod("y").tolist() == np.cumprod(a, axis=1).tolist()
    assert t.amax("y").dtype == nt.bool_ and t.amax("y").tolist() == [True, True]
    assert t.amin("x").tolist() == [False, False, True]
    assert t.argmax("y").tolist() == [0, 2] and t.argmin().item() == 1
    values, indices = t.max("y")
    assert values.dtype == nt.bool_ and values.tolist() == [True, True] and indices.tolist() == [0, 2]
    assert t.min("x").indices.names == ("y",)


# ----------------------------------------------------------------------------- gradients

NAMED = ("batch", None, "feat")


def _distinct(shape, seed=0):
    """Well-separated distinct values, so that max/min are differentiable under central differences."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape).astype(np.float64) * 0.37 - 2.0


GRADCHECKED = {
    "sum": lambda t: t.sum(("batch", -1)),
    "sum_keepdim": lambda t: t.sum("feat", keepdim=True),
    "mean": lambda t: t.mean(["batch", "feat"]),
    "prod": lambda t: t.prod("feat"),
    "prod_all": lambda t: t.prod(),
    "prod_two_dims": lambda t: t.prod(("batch", "feat"), keepdim=True),
    "amax": lambda t: t.amax(("batch", 1)),
    "amin": lambda t: t.amin("feat", keepdim=True),
    "max_all": lambda t: t.max(),
    "max_dim": lambda t: t.max("feat"),
    "min_dim_keepdim": lambda t: t.min(1, keepdim=True),
    "var": lambda t: t.var("feat"),
    "var_two_dims": lambda t: t.var(("batch", "feat"), correction=0, keepdim=True),
    "std": lambda t: t.std("batch"),
    "logsumexp": lambda t: t.logsumexp(("feat", 1)),
    "norm2": lambda t: t.norm(dim="feat"),
    "norm1": lambda t: t.norm(1, dim="batch"),
    "norm_inf": lambda t: t.norm(math.inf, dim="feat", keepdim=True),
    "norm_neg_inf": lambda t: t.norm(-math.inf, dim=1),
    "norm_3": lambda t: t.norm(3, dim=("batch", "feat")),
    "norm_half": lambda t: t.norm(0.5, dim="feat"),
    "cumsum": lambda t: t.cumsum("feat"),
    "cumprod": lambda t: t.cumprod("batch"),
    "softmax": lambda t: t.softmax("feat"),
    "log_softmax": lambda t: t.log_softmax(1),
}


@pytest.mark.parametrize("case", sorted(GRADCHECKED))
def test_gradcheck(case):
    x = leaf(_distinct((2, 3, 4)), NAMED)
    assert gradcheck(GRADCHECKED[case], x)


@pytest.mark.parametrize("case", ["sum", "mean", "prod", "prod_two_dims", "amax", "logsumexp", "softmax",
                                  "log_softmax", "std", "var", "norm2", "norm_3", "cumsum", "cumprod"])
def test_gradgradcheck(case):
    x = leaf(_distinct((2, 2, 3)), NAMED)
    assert gradgradcheck(GRADCHECKED[case], x)


@pytest.mark.parametrize("zeros", [[1], [0, 2], [0, 1, 2]])
def test_prod_and_cumprod_gradients_with_zeros(zeros):
    a = _distinct((2, 4), seed=3)
    a[0, zeros] = 0.0
    x = leaf(a, ("batch", "feat"))
    for fn in (lambda t: t.prod("feat"), lambda t: t.prod(), lambda t: t.cumprod("feat"),
               lambda t: t.prod(("feat", "batch"))):
        assert gradcheck(fn, x)
        assert gradgradcheck(fn, x)


def test_prod_gradient_values_with_zeros():
    x = leaf([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]], ("b", "n"))
    x.prod("n").sum().backward()
    assert_close(x.grad, np.array([[0.0, 6.0, 0.0], [0.0, 0.0, 0.0]]))
    assert x.grad.names == ("b", "n")
    y = leaf([2.0, 0.0, 3.0], ("n",))
    y.cumprod("n").sum().backward()
    # d/dx of [x0, x0 x1, x0 x1 x2] summed, at (2, 0, 3): (1, x0 + x0 x2, 0) = (1, 8, 0)
    assert_close(y.grad, np.array([1.0, 8.0, 0.0]))


def test_max_gradient_goes_to_the_selected_element_amax_splits_ties():
    x = leaf([[1.0, 3.0, 3.0], [5.0, 2.0, 5.0]], ("b", "n"))
    x.max("n").values.sum().backward()
    assert_close(x.grad, np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    x.grad = None
    x.amax("n").sum().backward()
    assert_close(x.grad, np.array([[0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]))
    x.grad = None
    x.max().backward()
    assert_close(x.grad, np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.5]]))
    x.grad = None
    x.min("b").values.sum().backward()
    assert_close(x.grad, np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))


def test_indices_carry_no_gradient():
    x = leaf([[1.0, 3.0], [4.0, 2.0]], ("b", "n"))
    values, indices = x.max("n")
    assert values.requires_grad and not indices.requires_grad
    assert not x.argmax("n").requires_grad and not (x > 2).any().requires_grad


def test_norm_gradient_at_zero_is_zero():
    x = leaf(np.zeros((2, 3)), ("b", "n"))
    x.norm(dim="n").sum().backward()
    assert_close(x.grad, np.zeros((2, 3)))
    x.grad = None
    x.norm().backward()
    assert_close(x.grad, np.zeros((2, 3)))


def test_norm_zero_order_has_zero_gradient():
    x = leaf([[1.0, 0.0, 2.0]], ("b", "n"))
    x.norm(0, dim="n").sum().backward()
    assert_close(x.grad, np.zeros((1, 3)))


@given(case=reduction_case())
def test_gradient_names_match_input(case):
    a, names, dim, _, keepdim, _ = case
    x = nt.tensor(a, names=names, requires_grad=True)
    for fn in (nt.sum, nt.prod, nt.amax, nt.logsumexp, nt.norm, lambda t, dim, keepdim: t.var(dim, False, keepdim)):
        (g,) = nt.grad(fn(x, dim=dim, keepdim=keepdim).sum(), [x])
        assert g.names == names and g.shape == a.shape


# ----------------------------------------------------------------------------- stability


def test_softmax_family_is_stable_for_large_inputs():
    a = np.array([[1e4, 0.0, -1e4], [1e4, 1e4, -1e4]])
    for dtype in ("float32", "float64"):
        x = nt.tensor(a.astype(dtype), names=("b", "n"))
        assert_close(x.softmax("n"), np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]))
        log2 = math.log(2)
        assert_close(x.log_softmax("n"), np.array([[0.0, -1e4, -2e4], [-log2, -log2, -2e4 - log2]]), rtol=1e-6)
        assert_close(x.logsumexp("n"), np.array([1e4, 1e4 + math.log(2)]), rtol=1e-6)
        assert_close((-x).logsumexp("n"), np.array([1e4, 1e4]), rtol=1e-6)
    x = leaf(a, ("b", "n"))
    for fn in (lambda t: t.softmax("n"), lambda t: t.log_softmax("n"), lambda t: t.logsumexp("n")):
        out = fn(x)
        weights = nt.tensor(np.arange(1.0, out.numel() + 1).reshape(out.shape), names=out.names)
        (g,) = nt.grad((out * weights).sum(), [x])
        assert np.isfinite(g.numpy()).all()


@pytest.mark.filterwarnings("ignore:divide by zero")  # NumPy warns on log(0) = -inf
def test_logsumexp_of_infinities():
    x = nt.tensor([[-math.inf, -math.inf], [math.inf, 0.0], [-math.inf, 1.0]], names=("b", "n"))
    assert_close(x.logsumexp("n"), np.array([-math.inf, math.inf, 1.0]))


def test_softmax_with_masked_entries():
    x = leaf([[0.0, -math.inf, 1.0]], ("b", "n"))
    y = x.softmax("n")
    e = math.exp(1.0)
    assert_close(y, np.array([[1 / (1 + e), 0.0, e / (1 + e)]]), rtol=1e-9)
    (g,) = nt.grad((y * nt.tensor([[1.0, 0.0, 0.0]], dtype="float64")).sum(), [x])
    assert np.isfinite(g.numpy()).all()


# ----------------------------------------------------------------------------- errors


def test_unknown_dim_name():
    t, _ = rand((2, 3), ("batch", "seq"))
    for fn in (lambda: t.sum("feat"), lambda: t.softmax("feat"), lambda: t.max("feat"),
               lambda: t.cumsum("feat"), lambda: t.norm(dim=("batch", "feat"))):
        with pytest.raises(nt.NamesError, match=r"no dim named 'feat' in a tensor with names \('batch', 'seq'\)"):
            fn()
    with pytest.raises(nt.NamesError, match="^logsumexp: no dim named 'feat'"):
        t.logsumexp("feat")


def test_duplicate_dims():
    t, _ = rand((2, 3), ("batch", "seq"))
    with pytest.raises(nt.NamesError, match="^sum: dims .* name the same dim twice"):
        t.sum(("batch", 0))
    with pytest.raises(nt.NamesError, match="^amax: dims .* name the same dim twice"):
        t.amax(["seq", "seq"])


def test_dim_out_of_range():
    t, _ = rand((2, 3), ("batch", "seq"))
    with pytest.raises(IndexError, match="^prod: dim 2 is out of range for a tensor with 2 dims"):
        t.prod(2)
    with pytest.raises(IndexError, match="^softmax: dim -3 is out of range"):
        t.softmax(-3)
    with pytest.raises(IndexError, match="^argmax: dim 5 is out of range"):
        t.argmax(5)


def test_max_min_argmax_take_one_dim():
    t, _ = rand((2, 3), ("batch", "seq"))
    with pytest.raises(TypeError, match=r"^max: dim must be a single dim .* use amax"):
        t.max(("batch", "seq"))
    with pytest.raises(TypeError, match=r"^argmin: dim must be a single dim"):
        t.argmin(["batch"])


def test_empty_dim_has_no_extreme():
    t = nt.zeros((2, 0), names=("b", "n"))
    for op in ("amax", "argmax", "max", "logsumexp"):
        with pytest.raises(ValueError, match=rf"^{op}: cannot reduce over dim 1 \('n'\) of size 0"):
            getattr(t, op)("n")
    assert t.sum("n").tolist() == [0.0, 0.0]


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_over_an_empty_dim_is_empty(op):
    """Nothing to normalise: an empty result with the input's names (as in PyTorch), and an empty gradient."""
    t = nt.zeros((2, 0), names=("b", "n"), requires_grad=True)
    y = getattr(t, op)("n")
    assert (y.shape, y.names, y.dtype) == ((2, 0), ("b", "n"), nt.float32)
    (g,) = nt.grad(y.sum(), [t])
    assert (g.shape, g.names) == ((2, 0), ("b", "n"))
    with nt.no_grad():
        assert getattr(t, op)("n").shape == (2, 0)


def test_bad_arguments():
    t, _ = rand((2, 3), ("batch", "seq"))
    with pytest.raises(TypeError, match="^var: give correction= or unbiased=, not both"):
        t.var("seq", unbiased=True, correction=0)
    with pytest.raises(ValueError, match="^norm: p must be a number"):
        t.norm("nuc")
    with pytest.raises(ValueError, match=r"To give the dim, write norm\(dim='seq'\)"):
        t.norm("seq")
    with pytest.raises(TypeError, match="a dim must be a name"):
        t.sum(1.5)
