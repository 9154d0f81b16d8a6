"""Statistics and counting (issue 15): quantile, nanquantile, nansum, nanmean, count_nonzero, bincount, histc,
histogram, bucketize, trapezoid, dist, cosine_similarity (and nn.CosineSimilarity): values against PyTorch,
names (Hypothesis), gradients (gradcheck, gradgradcheck), errors with their op's name, and dry runs on the
meta backend."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")
few = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=15)

INTERPOLATIONS = ["linear", "lower", "higher", "midpoint", "nearest"]


def _t(a, names=None, requires_grad=False):
    return nt.tensor(a, names=names, requires_grad=requires_grad)


def _torch(a):
    return torch.from_numpy(np.array(a))


def _with_nans(a, seed=0):
    a = np.array(a, dtype=np.float64)
    mask = np.random.default_rng(seed).random(a.shape) < 0.3
    a[mask] = np.nan
    return a


@st.composite
def reduce_case(draw, min_dims=1):
    """A named array and one of its dims: a name, an int or a negative int."""
    shape, names = draw(nts.named_shapes(min_dims=min_dims, max_dims=3))
    a = draw(nts.arrays(shape))
    ax = draw(st.integers(0, len(shape) - 1))
    choice = draw(st.sampled_from(["name", "int", "neg"]))
    dim = names[ax] if choice == "name" and names[ax] is not None else ax - len(shape) if choice == "neg" else ax
    return a, names, dim, ax


# ----------------------------------------------------------------------------- quantile


@few
@given(case=reduce_case(), interpolation=st.sampled_from(INTERPOLATIONS), keepdim=st.booleans(),
       q=st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0]))
def test_quantile_matches_pytorch_and_reduces_names(case, interpolation, keepdim, q):
    a, names, dim, ax = case
    t = _t(a, names)
    out = t.quantile(q, dim, keepdim, interpolation=interpolation)
    expected = torch.quantile(_torch(a), q, ax, keepdim, interpolation=interpolation)
    assert out.names == (names if keepdim else names[:ax] + names[ax + 1:])
    assert_close(out, expected.numpy(), rtol=1e-13, atol=1e-13)


@few
@given(case=reduce_case(), interpolation=st.sampled_from(INTERPOLATIONS), keepdim=st.booleans())
def test_nanquantile_with_a_named_q_tensor_leads_with_qs_dim(case, interpolation, keepdim):
    a, names, dim, ax = case
    a = _with_nans(a)
    qs = np.array([0.1, 0.5, 0.75])
    q = _t(qs, ("quant",))
    out = nt.nanquantile(_t(a, names), q, dim, keepdim, interpolation=interpolation)
    expected = torch.nanquantile(_torch(a), _torch(qs), ax, keepdim, interpolation=interpolation)
    rest = names if keepdim else names[:ax] + names[ax + 1:]
    assert out.names == ("quant",) + rest
    assert_close(out, expected.numpy(), rtol=1e-13, atol=1e-13)
    # quantile (not nan-) of a slice holding NaN is NaN, as in PyTorch
    plain = nt.quantile(_t(a, names), q.rename(None), dim, keepdim, interpolation=interpolation)
    assert plain.names == (None,) + rest
    assert_close(plain, torch.quantile(_torch(a), _torch(qs), ax, keepdim, interpolation=interpolation).numpy(),
                 rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("keepdim", [False, True])
def test_quantile_of_every_entry(keepdim):
    a = np.random.default_rng(0).normal(size=(3, 4))
    t = _t(a, ("batch", "feat"))
    out = t.quantile(0.3, keepdim=keepdim)
    assert out.names == (("batch", "feat") if keepdim else ())
    assert out.shape == ((1, 1) if keepdim else ())
    assert_close(out, torch.quantile(_torch(a), 0.3, keepdim=keepdim).numpy(), rtol=1e-14)
    q = nt.tensor([0.2, 0.8], dtype=nt.float64)
    both = nt.quantile(t, q, keepdim=keepdim)
    assert both.shape == ((2, 1, 1) if keepdim else (2,)) and both.names[0] is None
    assert_close(both, torch.quantile(_torch(a), torch.tensor([0.2, 0.8], dtype=torch.float64),
                                      keepdim=keepdim).numpy(), rtol=1e-14)
    # NumPy's spelling
    assert_close(nt.quantile(t, 0.3, axis="feat", keepdims=True), np.quantile(a, 0.3, axis=1, keepdims=True),
                 rtol=1e-14)
    # a 0-dim q is a number
    assert nt.quantile(t, nt.tensor(0.5, dtype=nt.float64), "feat").names == ("batch",)


def test_quantile_gradients():
    a = np.random.default_rng(1).permutation(12).reshape(3, 4) + 0.5  # distinct values: no ties
    x = _t(a, ("batch", "feat"), requires_grad=True)
    q = nt.tensor([0.3, 0.5], names=("q",), dtype=nt.float64)
    for interpolation in ("linear", "midpoint", "lower"):
        def fn(t, interpolation=interpolation):
            return t.quantile(q, "feat", interpolation=interpolation)

        assert gradcheck(fn, x)
        assert gradgradcheck(fn, x)
    assert gradcheck(lambda t: nt.nanquantile(t, 0.4), x)
    nt.quantile(x, q, "batch").sum().backward()
    assert x.grad.names == ("batch", "feat")
    expected = torch.tensor(a, requires_grad=True)
    torch.quantile(expected, torch.tensor([0.3, 0.5], dtype=torch.float64), 0).sum().backward()
    assert_close(x.grad, expected.grad.numpy(), rtol=1e-14)


def test_quantile_errors():
    t = nt.tensor([[1.0, 2.0], [3.0, 4.0]], names=("batch", "feat"))
    with pytest.raises(ValueError, match=r"quantile: q must be in \[0, 1\]"):
        t.quantile(1.5)
    with pytest.raises(ValueError, match=r"nanquantile: q values must be in \[0, 1\]"):
        t.nanquantile(nt.tensor([0.5, -0.1]))
    with pytest.raises(TypeError, match="quantile: q must have the input's dtype"):
        t.quantile(nt.tensor([0.5], dtype=nt.float64))
    with pytest.raises(ValueError, match="quantile: q must be a number or a 0-dim or 1-D tensor"):
        t.quantile(nt.tensor([[0.5]]))
    with pytest.raises(TypeError, match="quantile: dim must be a single dim"):
        t.quantile(0.5, ("batch", "feat"))
    with pytest.raises(ValueError, match="quantile: interpolation must be one of"):
        t.quantile(0.5, interpolation="cubic")
    with pytest.raises(TypeError, match="quantile: the input must be floating point"):
        nt.tensor([1, 2]).quantile(0.5)
    with pytest.raises(nt.NamesError, match="quantile: no dim named 'seq'"):
        t.quantile(0.5, "seq")
    with pytest.raises(nt.NamesError, match="quantile: q's dim 'batch' would lead the result.*rename q"):
        t.quantile(nt.tensor([0.5], names=("batch",)), "feat")
    with pytest.raises(ValueError, match="quantile: cannot reduce over dim 1 of size 0"):
        nt.zeros(2, 0).quantile(0.5, 1)


# ----------------------------------------------------------------------------- nansum, nanmean, count_nonzero


@few
@given(case=reduce_case(), keepdim=st.booleans())
def test_nan_reductions_match_pytorch(case, keepdim):
    a, names, dim, ax = case
    a = _with_nans(a)
    t = _t(a, names)
    kept = names if keepdim else names[:ax] + names[ax + 1:]
    for name in ("nansum", "nanmean"):
        out = getattr(t, name)(dim, keepdim)
        assert out.names == kept
        assert_close(out, getattr(torch, name)(_torch(a), ax, keepdim).numpy(), rtol=1e-13, atol=1e-13)

    assert_close(t.nansum(), torch.nansum(_torch(a)).numpy(), rtol=1e-13, atol=1e-13)
    counted = nt.count_nonzero(t.nan_to_num(), dim)
    assert counted.names == names[:ax] + names[ax + 1:] and counted.dtype == nt.int64
    assert_close(counted, torch.count_nonzero(_torch(np.nan_to_num(a)), ax).numpy())


def test_nan_reductions_spellings_and_dtypes():
    a = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 0.0]])
    t = _t(a, ("batch", "feat"))
    assert t.nansum(("batch", "feat")).tolist() == 4.0
    assert t.nansum(dim="feat", dtype=nt.float32).dtype == nt.float32
    assert_close(nt.nansum(t, axis=1, keepdims=True), np.nansum(a, axis=1, keepdims=True))
    assert_close(nt.nanmean(t, axis="feat"), np.array([2.0, 0.0]))
    assert math.isnan(_t([np.nan, np.nan]).nanmean().item())
    ints = nt.tensor([[0, 2, 0], [1, 1, 0]], names=("batch", "feat"))
    assert ints.nansum("feat").tolist() == [2, 2] and ints.nansum().dtype == nt.int64
    assert nt.nanmean(ints, dtype=nt.float64).item() == pytest.approx(4 / 6)
    assert ints.count_nonzero().item() == 3
    assert nt.count_nonzero(ints, axis="batch", keepdims=True).tolist() == [[1, 2, 0]]
    assert nt.count_nonzero(ints, ("batch", "feat")).names == ()


def test_nan_reductions_gradients_are_zero_at_nan():
    a = np.array([[1.0, np.nan, 3.0], [-2.0, 5.0, np.nan]])
    x = _t(a, ("batch", "feat"), requires_grad=True)
    (x.nansum("feat") * nt.tensor([1.0, 2.0], dtype=nt.float64, names=("batch",))).sum().backward()
    assert x.grad.names == ("batch", "feat")
    assert x.grad.tolist() == [[1.0, 0.0, 1.0], [2.0, 2.0, 0.0]]
    x.grad = None
    x.nanmean("feat").sum().backward()
    assert_close(x.grad, np.array([[0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]))
    y = _t(np.random.default_rng(2).normal(size=(3, 4)), ("batch", "feat"), requires_grad=True)
    for fn in (lambda t: t.nansum("feat"), lambda t: nt.nanmean(t, "batch", keepdim=True)):
        assert gradcheck(fn, y)
        assert gradgradcheck(fn, y)


def test_nan_reductions_errors():
    t = nt.zeros(2, 3, names=("batch", "feat"))
    with pytest.raises(nt.NamesError, match="nansum: no dim named 'seq'"):
        t.nansum("seq")
    with pytest.raises(nt.NamesError, match="nanmean: no dim named 'seq'"):
        t.nanmean("seq")
    with pytest.raises(nt.NamesError, match="count_nonzero: no dim named 'seq'"):
        t.count_nonzero("seq")
    with pytest.raises(TypeError, match="nanmean: the input must be floating point"):
        nt.tensor([1, 2]).nanmean()
    with pytest.raises(TypeError, match="nansum: keepdim must be a bool"):
        t.nansum("feat", "yes")
    with pytest.raises(TypeError, match="nansum: give dim= or its NumPy spelling axis=, not both"):
        t.nansum("feat", axis="feat")


# ----------------------------------------------------------------------------- bincount, histc, histogram, bucketize


def test_bincount_matches_pytorch():
    idx = np.array([0, 3, 3, 1, 7, 3])
    t = nt.tensor(idx, names=("sample",))
    out = nt.bincount(t)
    assert out.names == (None,) and out.dtype == nt.int64
    assert out.tolist() == torch.bincount(_torch(idx)).tolist()
    assert t.bincount(minlength=10).tolist() == torch.bincount(_torch(idx), minlength=10).tolist()
    for w, dtype in ((np.array([0.5, 1, 2, 3, 4, 5], np.float32), nt.float32),
                     (np.array([1, 2, 3, 4, 5, 6]), nt.float64)):
        weighted = nt.bincount(t, nt.tensor(w))
        assert weighted.dtype == dtype
        assert_close(weighted, torch.bincount(_torch(idx), _torch(w)).numpy())
    assert nt.bincount(nt.tensor(np.zeros(0, np.int64)), minlength=2).tolist() == [0, 0]


def test_bincount_errors():
    with pytest.raises(ValueError, match="bincount: input must be a 1-D tensor of integers"):
        nt.bincount(nt.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="bincount: input must hold non-negative integers"):
        nt.bincount(nt.tensor([1, -1]))
    with pytest.raises(ValueError, match="bincount: minlength must be >= 0"):
        nt.bincount(nt.tensor([1]), minlength=-1)
    with pytest.raises(ValueError, match="bincount: weights must have input's shape"):
        nt.bincount(nt.tensor([1, 2]), nt.tensor([1.0]))
    with pytest.raises(nt.DataDependentError):
        nt.trace_shapes(nt.bincount, nt.spec(("sample",), (5,), dtype=nt.int64))


@pytest.mark.parametrize("bins, lo, hi", [(4, 0.0, 3.0), (7, -1.0, 1.0), (5, 0.0, 0.0), (1, 0.0, 0.0)])
def test_histc_matches_pytorch(bins, lo, hi):
    a = np.random.default_rng(3).normal(size=(4, 5)).astype(np.float32)
    a[0, 0] = 1.0  # an edge of some of the bins
    t = nt.tensor(a, names=("batch", "feat"))
    out = t.histc(bins, lo, hi)
    assert out.names == (None,) and out.dtype == nt.float32 and out.shape == (bins,)
    assert out.tolist() == torch.histc(_torch(a), bins, lo, hi).tolist()
    same = nt.tensor([1.0, 1.0, 1.0])
    assert nt.histc(same, 4).tolist() == torch.histc(torch.tensor([1.0, 1.0, 1.0]), 4).tolist()


@pytest.mark.parametrize("density", [False, True])
def test_histogram_matches_pytorch(density):
    a = np.random.default_rng(4).normal(size=(3, 6))
    w = np.random.default_rng(5).random((3, 6))
    t = nt.tensor(a, names=("batch", "feat"))
    cases = [
        ((5,), {}), ((4,), {"range": (-1.0, 1.0)}), ((3,), {"weight": w}),
        ((np.array([-2.0, -0.5, 0.0, 0.3, 2.0]),), {}), ((np.array([-1.0, 1.0]),), {"weight": w}),
    ]
    for args, kwargs in cases:
        ours = {k: nt.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
        theirs = {k: _torch(v) if k == "weight" else v for k, v in kwargs.items()}
        bins = args[0]
        hist, edges = nt.histogram(t, nt.tensor(bins) if isinstance(bins, np.ndarray) else bins, density=density,
                                   **ours)
        expected = torch.histogram(_torch(a), _torch(bins) if isinstance(bins, np.ndarray) else bins,
                                   density=density, **theirs)
        assert hist.names == edges.names == (None,) and hist.dtype == edges.dtype == nt.float64
        assert_close(hist, expected.hist.numpy(), rtol=1e-13)
        assert_close(edges, expected.bin_edges.numpy(), rtol=1e-15)
    result = t.histogram(3)
    assert result.hist is result[0] and result.bin_edges is result[1]


def test_histograms_refuse_bad_input():
    t = nt.tensor([1.0, 2.0, float("nan")])
    with pytest.raises(ValueError, match=r"histc: the data's range \[nan, nan\] is not finite"):
        t.histc(3)
    with pytest.raises(ValueError, match="histogram: the data's range"):
        t.histogram(3)
    with pytest.raises(ValueError, match="histc: max must be larger than min"):
        t.histc(3, 2.0, 1.0)
    with pytest.raises(ValueError, match="histc: bins must be > 0"):
        t.histc(0)
    with pytest.raises(TypeError, match="histc: the input must be floating point"):
        nt.tensor([1, 2]).histc()
    with pytest.raises(ValueError, match="histogram: bin edges must be a 1-D tensor of at least 2 edges"):
        t.histogram(nt.tensor([1.0]))
    with pytest.raises(TypeError, match="histogram: range= goes with a number of bins"):
        t.histogram(nt.tensor([0.0, 1.0]), range=(0.0, 1.0))
    with pytest.raises(ValueError, match="histogram: weight must have input's shape"):
        t.histogram(2, weight=nt.tensor([1.0]))


@given(data=st.data(), right=st.booleans(), out_int32=st.booleans())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=10)
def test_bucketize_keeps_the_names(data, right, out_int32):
    shape, names = data.draw(nts.named_shapes(max_dims=3))
    a = np.round(data.draw(nts.arrays(shape, low=-4, high=4)))  # integers: hits the boundaries
    boundaries = np.array([-3.0, -1.0, 0.0, 2.0])
    out = nt.bucketize(_t(a, names), nt.tensor(boundaries, names=("edge",)), out_int32=out_int32, right=right)
    assert out.names == names and out.dtype == (nt.int32 if out_int32 else nt.int64)
    expected = torch.bucketize(_torch(a), _torch(boundaries), out_int32=out_int32, right=right)
    assert np.array_equal(out.numpy(), expected.numpy())
    ints = nt.bucketize(nt.tensor([1, 5, 9]), nt.tensor([1.5, 5.0]))
    assert ints.tolist() == torch.bucketize(torch.tensor([1, 5, 9]), torch.tensor([1.5, 5.0])).tolist()


def test_bucketize_errors():
    with pytest.raises(ValueError, match="bucketize: boundaries must be a 1-D tensor"):
        nt.bucketize(nt.tensor([1.0]), nt.tensor([[1.0]]))
    with pytest.raises(TypeError, match="bucketize: boundaries must be a Tensor"):
        nt.bucketize(nt.tensor([1.0]), [1.0, 2.0])


# ----------------------------------------------------------------------------- trapezoid, dist, cosine_similarity


@few
@given(case=reduce_case(), spacing=st.sampled_from(["none", "dx", "x1d", "xfull"]))
def test_trapezoid_matches_pytorch(case, spacing):
    a, names, dim, ax = case
    y = _t(a, names)
    reduced = names[:ax] + names[ax + 1:]
    if spacing == "none":
        out, expected = nt.trapezoid(y, dim=dim), torch.trapezoid(_torch(a), dim=ax)
    elif spacing == "dx":
        out, expected = nt.trapezoid(y, dx=0.5, dim=dim), torch.trapezoid(_torch(a), dx=0.5, dim=ax)
    elif spacing == "x1d":
        xs = np.cumsum(np.random.default_rng(6).random(a.shape[ax]))
        out = nt.trapezoid(y, _t(xs, (names[ax],)), dim=dim)
        expected = torch.trapezoid(_torch(a), _torch(xs), dim=ax)
    else:
        xs = np.cumsum(np.random.default_rng(7).random(a.shape), axis=ax)
        out, expected = nt.trapezoid(y, _t(xs, names), dim=dim), torch.trapezoid(_torch(a), _torch(xs), dim=ax)
    assert out.names == reduced
    assert_close(out, expected.numpy(), rtol=1e-12, atol=1e-12)


def test_trapezoid_names_gradients_and_errors():
    y = _t(np.random.default_rng(8).normal(size=(2, 5)), ("batch", "time"), requires_grad=True)
    x = _t(np.cumsum(np.random.default_rng(9).random(5)), ("time",), requires_grad=True)
    assert nt.trapezoid(y, x, dim="time").names == ("batch",)
    assert nt.trapezoid(y, x.rename(None), dim="time").names == ("batch",)
    for fn, inputs in ((lambda a, b: nt.trapezoid(a, b, dim="time"), (y, x)),
                       (lambda a: nt.trapezoid(a, dx=0.3, dim="batch"), (y,))):
        assert gradcheck(fn, *inputs)
        assert gradgradcheck(fn, *inputs)
    with pytest.raises(nt.NamesError, match="trapezoid: x's dim 'batch' gives the sample points along y's dim 1"):
        nt.trapezoid(y, x.rename("batch"), dim="time")
    with pytest.raises(nt.NamesError, match="trapezoid: x's dim 'batch' gives the sample points.*Pass dim='batch'"):
        nt.trapezoid(y.rename(None, None).refine_names("batch", None), x.rename("batch"), dim=1)
    with pytest.raises(nt.NamesError, match="trapezoid: dims .* do not match"):
        nt.trapezoid(y, y.rename("time", "batch"), dim="time")
    with pytest.raises(TypeError, match="trapezoid: give x or dx, not both"):
        nt.trapezoid(y, x, dx=1.0)
    with pytest.raises(ValueError, match="trapezoid: x has 4 points but y has 5"):
        nt.trapezoid(y, x[:4], dim="time")
    assert nt.trapezoid(nt.zeros(3, 0), dim=1).tolist() == [0.0, 0.0, 0.0]


@few
@given(pair=nts.broadcastable_names(max_dims=3), p=st.sampled_from([0, 1, 2, 3.5, math.inf]))
def test_dist_matches_pytorch_and_unifies_names(pair, p):
    (sa, na), (sb, nb) = pair
    a = np.random.default_rng(10).normal(size=sa)
    b = np.random.default_rng(11).normal(size=sb)
    out = nt.dist(_t(a, na), _t(b, nb), p)
    assert out.names == () and out.dtype == nt.float64
    assert_close(out, torch.dist(_torch(a), _torch(b), p).numpy(), rtol=1e-12)
    assert_close(_t(a, na).dist(_t(b, nb), p), out)


@few
@given(pair=nts.broadcastable_names(max_dims=3), data=st.data())
def test_cosine_similarity_matches_pytorch_and_names(pair, data):
    (sa, na), (sb, nb) = pair
    n = max(len(sa), len(sb))
    if n == 0:
        return
    ax = data.draw(st.integers(0, n - 1))
    a = np.random.default_rng(12).normal(size=sa)
    b = np.random.default_rng(13).normal(size=sb)
    names = nt.broadcast_to(_t(a, na), np.broadcast_shapes(sa, sb)).names
    unified = (None,) * (n - len(names)) + names
    for other in (nb, (None,) * len(nb)):
        full = tuple(x if x is not None else y for x, y in zip(unified, (None,) * (n - len(other)) + other))
        dim = full[ax] if full[ax] is not None else ax - n
        out = F.cosine_similarity(_t(a, na), _t(b, other), dim)
        assert out.names == full[:ax] + full[ax + 1:]
        expected = torch.nn.functional.cosine_similarity(_torch(a), _torch(b), ax)
        assert_close(out, expected.numpy(), rtol=1e-12, atol=1e-14)


def test_cosine_similarity_default_dim_layer_gradients_and_errors():
    a1, a2 = np.random.default_rng(14).normal(size=(3, 4)), np.random.default_rng(15).normal(size=(4,))
    x1 = _t(a1, ("batch", "feat"), requires_grad=True)
    x2 = _t(a2, ("feat",), requires_grad=True)
    out = nt.cosine_similarity(x1, x2)  # PyTorch's default dim=1, by position
    assert out.names == ("batch",)
    assert_close(out, torch.cosine_similarity(_torch(a1), _torch(a2)).detach().numpy(), rtol=1e-13)
    layer = nt.nn.CosineSimilarity(dim="feat")
    assert_close(layer(x1, x2), out)
    assert "dim='feat'" in repr(layer)
    assert gradcheck(lambda a, b: F.cosine_similarity(a, b, "feat"), x1, x2)
    assert gradgradcheck(lambda a, b: F.cosine_similarity(a, b, "feat"), x1, x2)
    zero = nt.zeros(2, 3, dtype=nt.float64)
    assert nt.cosine_similarity(zero, zero).tolist() == [0.0, 0.0]  # eps keeps 0/0 away, as in PyTorch
    with pytest.raises(nt.NamesError, match="cosine_similarity: dims .* do not match"):
        nt.cosine_similarity(x1, x2.rename("batch"))
    with pytest.raises(nt.NamesError, match="cosine_similarity: no dim named 'seq'"):
        nt.cosine_similarity(x1, x2, "seq")
    with pytest.raises(ValueError, match="cosine_similarity: shapes .* do not broadcast"):
        nt.cosine_similarity(x1, nt.zeros(5, dtype=nt.float64), 0)
    with pytest.raises(nt.NamesError, match="dist: dims .* do not match"):
        nt.dist(x1, x2.rename("batch"))
    with pytest.raises(TypeError, match="dist: p must be a number"):
        nt.dist(x1, x2, "fro")


# ----------------------------------------------------------------------------- dry run


def test_dry_run_through_the_meta_backend():
    def model(x, q):
        med = x.quantile(q, "feat")
        mean = x.nanmean("batch")
        counts = nt.count_nonzero(x, "feat")
        hist = x.histc(4)
        h, edges = x.histogram(3)
        buckets = nt.bucketize(x, nt.tensor([-1.0, 0.0, 1.0]))
        area = nt.trapezoid(x, dim="feat")
        cos = nt.cosine_similarity(x, x, "feat")
        return med, mean, counts, hist, h, edges, buckets, area, cos, nt.dist(x, x)

    trace = nt.trace_shapes(model, nt.spec({"batch": 4, "feat": 6}), nt.spec(("q",), (3,)))
    med, mean, counts, hist, h, edges, buckets, area, cos, d = trace.result
    assert med.names == ("q", "batch") and med.shape == (3, 4)
    assert mean.names == ("feat",) and counts.names == ("batch",) and counts.dtype == nt.int64
    assert hist.shape == (4,) and h.shape == (3,) and edges.shape == (4,)
    assert buckets.names == ("batch", "feat") and buckets.dtype == nt.int64
    assert area.names == ("batch",) and cos.names == ("batch",) and d.shape == ()
    assert {"quantile", "histc", "histogram", "searchsorted"} <= set(trace.ops)  # bucketize is a searchsorted
