"""The reductions, scans, indexing and naming that PyTorch code uses, and NumPy's spellings of them:
median nanmedian mode kthvalue std_mean var_mean, cummax cummin logcumsumexp, diagonal, cdist,
equal, masked_select, ``t.names = ...``/``rename_``, ``axis=``/``keepdims=``, astype swapaxes copy
ravel and ``transpose(*axes)``.  Values against NumPy references (and PyTorch where installed),
the name rules, gradients, the errors and shape dry runs."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


def leaf(a, names=None):
    return nt.tensor(np.asarray(a, dtype=np.float64), names=names, requires_grad=True)


@st.composite
def along_case(draw, with_nan=False):
    """A named array with ties (and NaN if asked), a dim along it (a name, an int or a negative int), its axis."""
    shape, names = draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = draw(nts.arrays(shape, "int64", low=-2, high=2)).astype(np.float64)
    if with_nan:
        a = np.where(draw(nts.arrays(shape, "int64", low=0, high=3)) == 0, np.nan, a)
    ax = draw(st.integers(0, len(shape) - 1))
    choice = draw(st.sampled_from(["name", "int", "neg"]))
    dim = names[ax] if choice == "name" and names[ax] is not None else ax - len(shape) if choice == "neg" else ax
    return a, names, dim, ax, draw(st.booleans())


# ----------------------------------------------------------------------------- NumPy references


def _stable(a, ax):
    return np.argsort(a, axis=ax, kind="stable")  # NaN sorts last, as the library's order


def _pick_ref(a, ax, positions):
    """The entries of the stable ascending order at ``positions`` (keepdim shape), and their indices."""
    idx = np.take_along_axis(_stable(a, ax), positions, axis=ax)
    return np.take_along_axis(a, idx, axis=ax), idx


def _median_ref(a, ax, skip_nan):
    n = a.shape[ax]
    nans = np.isnan(a).sum(axis=ax, keepdims=True)
    if skip_nan:
        pos = np.maximum(n - nans - 1, 0) // 2
    else:
        pos = np.where(nans > 0, n - nans, (n - 1) // 2)
    return _pick_ref(a, ax, pos)


def _mode_ref(a, ax):
    """By counting: the smallest most frequent value (NaNs equal to each other), at its last occurrence."""
    moved = np.moveaxis(a, ax, -1)
    values = np.empty(moved.shape[:-1])
    indices = np.empty(moved.shape[:-1], dtype=np.int64)
    for at in np.ndindex(moved.shape[:-1]):
        row = moved[at]
        same = (row[:, None] == row[None, :]) | (np.isnan(row)[:, None] & np.isnan(row)[None, :])
        counts = same.sum(axis=1)
        best = counts == counts.max()
        value = np.sort(row[best])[0]
        hits = np.flatnonzero(np.isnan(row) if np.isnan(value) else row == value)
        values[at], indices[at] = value, hits[-1]
    return np.expand_dims(values, ax), np.expand_dims(indices, ax)


def _running_ref(a, ax, largest):
    """PyTorch's cummax/cummin loop: ties and NaN take the later index, NaN propagates."""
    moved = np.moveaxis(a, ax, -1)
    values, indices = np.empty_like(moved), np.empty(moved.shape, dtype=np.int64)
    for at in np.ndindex(moved.shape[:-1]):
        best, where = None, 0
        for j, x in enumerate(moved[at]):
            if best is None or np.isnan(x) or (not np.isnan(best) and (x >= best if largest else x <= best)):
                best, where = x, j
            values[at + (j,)], indices[at + (j,)] = best, where
    return np.moveaxis(values, -1, ax), np.moveaxis(indices, -1, ax)


def _squeeze(pair, ax, keepdim):
    return pair if keepdim else tuple(np.squeeze(x, axis=ax) for x in pair)


# ----------------------------------------------------------------------------- order statistics


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("op", ["median", "nanmedian", "mode", "kthvalue"])
@given(case=along_case(with_nan=True), data=st.data())
def test_order_statistics_match_numpy(op, case, data):
    a, names, dim, ax, keepdim = case
    t = nt.tensor(a, names=names)
    if op == "kthvalue":
        k = data.draw(st.integers(1, a.shape[ax]))
        out = t.kthvalue(k, dim, keepdim)
        expected = _pick_ref(a, ax, np.full(np.expand_dims(a, ax).take(0, axis=ax + 1).shape, k - 1))
    elif op == "mode":
        out = t.mode(dim, keepdim)
        expected = _mode_ref(a, ax)
    else:
        out = getattr(t, op)(dim, keepdim)
        expected = _median_ref(a, ax, op == "nanmedian")
    values, indices = out
    assert out.values is values and isinstance(out, nt.ValuesIndices)
    out_names = names if keepdim else names[:ax] + names[ax + 1:]
    assert values.names == indices.names == out_names and indices.dtype == nt.int64
    exp_values, exp_indices = _squeeze(expected, ax, keepdim)
    assert_close(values, exp_values)
    assert_close(indices, exp_indices)
    assert_close(getattr(nt, op)(*((t, k) if op == "kthvalue" else (t,)), dim=dim, keepdim=keepdim).values, values)


def test_order_statistics_match_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([[3.0, 1, 3, 1, 2], [1, 2, 2, 1, np.nan], [5, 5, 0, 0, 7]])
    t, ref = nt.tensor(a, names=("row", "col")), torch.tensor(a)
    for ours, theirs in [(t.median("col"), ref.median(1)), (t.nanmedian("col"), ref.nanmedian(1)),
                         (t.mode("col"), ref.mode(1))]:
        assert_close(ours.values, theirs.values.numpy(), check_names=False)
        assert_close(ours.indices, theirs.indices.numpy(), check_names=False)
    # PyTorch's kthvalue picks any of equal values (a quickselect): only the values are comparable
    assert_close(t.kthvalue(2, "col").values, ref.kthvalue(2, 1).values.numpy(), check_names=False)
    assert_close(t.median(), ref.median().numpy(), check_names=False)
    assert_close(t[:, :4].median(), ref[:, :4].median().numpy(), check_names=False)


def test_whole_tensor_median_and_zero_dim():
    a = np.array([[4.0, 1, 3], [2, 6, 5]])
    t = nt.tensor(a, names=("row", "col"))
    assert t.median().names == () and t.median().item() == 3.0  # the lower of 3 and 4, not NumPy's 3.5
    assert t.nanmedian().item() == 3.0
    assert nt.tensor([1, 5, 2]).median().dtype == nt.int64
    scalar = nt.tensor(2.5)
    for dim in (0, -1):
        values, indices = scalar.median(dim, keepdim=True)
        assert values.shape == () and values.item() == 2.5 and indices.item() == 0
    assert scalar.kthvalue(1).values.item() == 2.5


def test_order_statistics_gradients_go_to_the_selected_entry():
    x = leaf(np.random.default_rng(0).standard_normal((3, 5)), ("row", "col"))
    for fn in (lambda t: t.median("col").values, lambda t: t.kthvalue(3, "row").values,
               lambda t: t.nanmedian(0, keepdim=True).values, lambda t: t.median()):
        assert gradcheck(fn, x) and gradgradcheck(fn, x)
    ties = leaf([[2.0, 1.0, 2.0, 1.0, 2.0]], ("row", "col"))
    ties.mode("col").values.sum().backward()
    assert_close(ties.grad, np.array([[0.0, 0, 0, 0, 1]]), check_names=False)
    assert ties.grad.names == ("row", "col")


def test_order_statistics_errors():
    t = nt.zeros(2, 3, names=("row", "col"))
    with pytest.raises(IndexError, match=r"kthvalue: k=4 is out of range for dim 1 \('col'\) of size 3"):
        t.kthvalue(4, "col")
    with pytest.raises(IndexError, match="kthvalue: k=0"):
        t.kthvalue(0)
    with pytest.raises(TypeError, match="kthvalue: k must be an int"):
        t.kthvalue(1.0)
    with pytest.raises(TypeError, match="median: dim must be a single dim"):
        t.median(("row", "col"))
    with pytest.raises(TypeError, match="median: keepdim needs a dim"):
        t.median(keepdim=True)
    with pytest.raises(ValueError, match="mode: cannot reduce over dim 1 \\('col'\\) of size 0"):
        nt.zeros(2, 0, names=("row", "col")).mode("col")
    with pytest.raises(ValueError, match="nanmedian: the tensor .* is empty"):
        nt.zeros(0).nanmedian()
    with pytest.raises(nt.NamesError, match="median: no dim named 'seq'"):
        t.median("seq")
    with pytest.raises(TypeError, match="mode: keepdim must be a bool"):
        t.mode("col", keepdim=1)


def test_order_statistics_dry_run():
    def fn(x):
        return x.median("col").values + x.mode("col").values + x.kthvalue(2, "col").values + x.nanmedian("col")[0]

    trace = nt.trace_shapes(fn, nt.spec({"row": 3, "col": 5}))
    assert trace.result.names == ("row",) and trace.result.shape == (3,)


# ----------------------------------------------------------------------------- scans


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@given(case=along_case(with_nan=True))
def test_cummax_cummin_match_reference(op, case):
    a, names, dim, ax, _ = case
    values, indices = getattr(nt.tensor(a, names=names), op)(dim)
    assert values.names == indices.names == names and indices.dtype == nt.int64
    exp_values, exp_indices = _running_ref(a, ax, op == "cummax")
    assert_close(values, exp_values)
    assert_close(indices, exp_indices)
    if not np.isnan(a).any():
        accumulate = np.maximum.accumulate if op == "cummax" else np.minimum.accumulate
        assert_close(values, accumulate(a, axis=ax))


@given(case=along_case())
def test_logcumsumexp_matches_numpy(case):
    a, names, dim, ax, _ = case
    a = a * 300.0  # far apart: a naive log(cumsum(exp)) would overflow or underflow
    out = nt.tensor(a, names=names).logcumsumexp(dim)
    assert out.names == names
    assert_close(out, np.logaddexp.accumulate(a, axis=ax), rtol=1e-12, atol=1e-9)


def test_scans_match_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 3, 3, 2, np.nan, 5, np.nan], [5, 4, 4, 6, 1, 1, 0]])
    t, ref = nt.tensor(a, names=("row", "col")), torch.tensor(a)
    for ours, theirs in [(t.cummax("col"), ref.cummax(1)), (t.cummin(axis=-1), ref.cummin(-1))]:
        assert_close(ours.values, theirs.values.numpy(), check_names=False)
        assert_close(ours.indices, theirs.indices.numpy(), check_names=False)
    b = np.array([-1000.0, 0, 3, -5, 1e3])
    assert_close(nt.tensor(b).logcumsumexp(0), ref.new_tensor(b).logcumsumexp(0).numpy(), rtol=1e-12)


def test_scan_gradients():
    x = leaf(np.random.default_rng(1).standard_normal((3, 5)), ("row", "col"))
    for fn in (lambda t: t.cummax("col").values, lambda t: t.cummin(0).values, lambda t: t.logcumsumexp("col")):
        assert gradcheck(fn, x) and gradgradcheck(fn, x)
    starts = leaf([-math.inf, -math.inf, 1.0, 2.0])
    starts.logcumsumexp(0).sum().backward()
    assert_close(starts.grad, np.array([0.0, 0.0, 1 + 1 / (1 + math.e), math.e / (1 + math.e)]))


def test_scan_errors_and_dry_run():
    t = nt.zeros(2, 3, names=("row", "col"))
    with pytest.raises(TypeError, match="cummax: missing the dim"):
        t.cummax()
    with pytest.raises(TypeError, match="logcumsumexp: give dim= or its NumPy spelling axis=, not both"):
        t.logcumsumexp("col", axis=0)
    with pytest.raises(nt.NamesError, match="cummin: no dim named 'seq'"):
        t.cummin("seq")
    assert nt.tensor([1, 2]).logcumsumexp(0).dtype == nt.float64
    trace = nt.trace_shapes(lambda x: x.cummax("col").values + x.logcumsumexp("col"), nt.spec({"row": 3, "col": 5}))
    assert trace.result.names == ("row", "col")


# ----------------------------------------------------------------------------- std_mean, var_mean


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("correction", [None, 0, 2])
@given(case=along_case())
def test_std_mean_var_mean_match_numpy(correction, case):
    a, names, dim, ax, keepdim = case
    t = nt.tensor(a, names=names)
    ddof = 1 if correction is None else correction
    with np.errstate(all="ignore"):
        var, mean = np.var(a, axis=ax, ddof=ddof, keepdims=keepdim), np.mean(a, axis=ax, keepdims=keepdim)
    v, m = nt.var_mean(t, dim, keepdim=keepdim, correction=correction)
    s, m2 = nt.std_mean(t, axis=dim, keepdims=keepdim, correction=correction)
    out_names = names if keepdim else names[:ax] + names[ax + 1:]
    assert v.names == m.names == s.names == out_names
    assert_close(v, var, rtol=1e-9)
    assert_close(s, np.sqrt(var), rtol=1e-9)
    assert_close(m, mean, rtol=1e-9)
    assert_close(m2, mean, rtol=1e-9)


def test_std_mean_gradients_and_errors():
    x = leaf(np.random.default_rng(2).standard_normal((3, 4)), ("row", "col"))
    assert gradcheck(lambda t: nt.std_mean(t, "col")[0] * nt.std_mean(t, "col")[1], x)
    assert gradgradcheck(lambda t: nt.var_mean(t, "row", unbiased=False)[0], x)
    with pytest.raises(TypeError, match="std_mean: give correction= or unbiased=, not both"):
        nt.std_mean(x, "col", unbiased=True, correction=1)
    assert isinstance(nt.var_mean(x), tuple) and nt.var_mean(x)[0].names == ()


# ----------------------------------------------------------------------------- cdist


def _cdist_ref(a, b, p):
    diff = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == math.inf:
        return diff.max(axis=-1)
    if p == 0:
        return (diff != 0).sum(axis=-1).astype(a.dtype)
    return (diff ** p).sum(axis=-1) ** (1 / p)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, math.inf, 0.5, 3.0])
def test_cdist_matches_numpy(p):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4))
    out = nt.cdist(nt.tensor(a, names=("group", "query", "feat")), nt.tensor(b, names=("key", None)), p)
    assert out.names == ("group", "query", "key")
    assert_close(out, _cdist_ref(a, b, p), rtol=1e-9, atol=1e-12)
    assert nt.cdist(nt.tensor(a), nt.tensor(b), p).names == (None, None, None)


def test_cdist_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 6, 4))
    for p in (2.0, 1.0, math.inf):
        assert_close(nt.cdist(nt.tensor(a), nt.tensor(b), p), torch.cdist(torch.tensor(a), torch.tensor(b), p).numpy(),
                     rtol=1e-9, atol=1e-12, check_names=False)


def test_cdist_gradients():
    rng = np.random.default_rng(5)
    x1 = leaf(rng.standard_normal((3, 4)), ("query", "feat"))
    x2 = leaf(rng.standard_normal((2, 4)), ("key", "feat"))
    for p in (2.0, 1.0, 3.0):
        fn = lambda a, b: nt.cdist(a, b, p)
        assert gradcheck(fn, x1, x2) and gradgradcheck(fn, x1, x2)
    same = leaf([[1.0, 2.0]], ("query", "feat"))
    nt.cdist(same, nt.tensor([[1.0, 2.0]], dtype=nt.float64, names=("key", "feat"))).sum().backward()
    assert_close(same.grad, np.zeros((1, 2)), check_names=False)  # 0 at a distance of 0, as PyTorch


def test_cdist_errors_and_dry_run():
    q, k = nt.zeros(3, 4, names=("query", "feat")), nt.zeros(2, 4, names=("key", "feat"))
    with pytest.raises(nt.NamesError, match="cdist: the feature dims differ: 'feat' .* vs 'embed'"):
        nt.cdist(q, k.rename(feat="embed"))
    with pytest.raises(nt.NamesError, match="cdist: both row dims are named 'query'"):
        nt.cdist(q, k.rename(key="query"))
    with pytest.raises(nt.NamesError, match="cdist: .* are misaligned: 'feat'"):
        nt.cdist(q, nt.zeros(4, 4, names=("feat", None)))
    with pytest.raises(nt.NamesError, match="cdist: dims"):
        nt.cdist(nt.zeros(2, 3, 4, names=("a", "query", "feat")), nt.zeros(2, 2, 4, names=("b", "key", "feat")))
    with pytest.raises(ValueError, match="cdist: both operands need at least 2 dims"):
        nt.cdist(nt.zeros(4), k)
    with pytest.raises(ValueError, match="cdist: shapes .* do not fit"):
        nt.cdist(q, nt.zeros(2, 5))
    with pytest.raises(ValueError, match="cdist: p must be a number >= 0"):
        nt.cdist(q, k, -1.0)
    with pytest.raises(ValueError, match="cdist: compute_mode must be one of"):
        nt.cdist(q, k, compute_mode="fast")
    with pytest.raises(TypeError, match="cdist: x1 and x2 must be floating-point tensors of one dtype"):
        nt.cdist(q.long(), k.long())
    with pytest.raises(TypeError, match="cdist: x2 must be a Tensor"):
        nt.cdist(q, [[1.0]])
    trace = nt.trace_shapes(nt.cdist, nt.spec({"query": 30, "feat": 8}), nt.spec({"key": 20, "feat": 8}))
    assert trace.result.names == ("query", "key") and trace.result.shape == (30, 20)


# ----------------------------------------------------------------------------- equal


def test_equal():
    a = nt.tensor([[1.0, 2.0], [3.0, 4.0]], names=("row", "col"))
    assert a.equal(a.clone()) is True and nt.equal(a, a.rename(None)) is True
    assert nt.equal(a, nt.tensor([[1, 2], [3, 4]])) is True  # dtypes may differ, as in PyTorch
    assert nt.equal(a, a + 1) is False
    assert nt.equal(a, a[:1]) is False  # shapes differ, even where they would broadcast
    assert nt.equal(a, a.rename(col="feat")) is False  # the names do not line up (rule 2)
    assert nt.equal(a, a.rename(None).refine_names(None, "row")) is False  # misaligned
    nan = nt.tensor([math.nan])
    assert nt.equal(nan, nan) is False
    with pytest.raises(TypeError, match="equal: b must be a Tensor"):
        nt.equal(a, [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(nt.DataDependentError):
        nt.trace_shapes(nt.equal, nt.spec({"row": 2}), nt.spec({"row": 2}))


def test_equal_matches_pytorch():
    torch = pytest.importorskip("torch")
    cases = [([1.0, 2.0], [1.0, 2.0]), ([1.0, 2.0], [1, 2]), ([1.0], [1.0, 1.0]), ([math.nan], [math.nan])]
    for x, y in cases:
        assert nt.equal(nt.tensor(x), nt.tensor(y)) == torch.equal(torch.tensor(x), torch.tensor(y))


# ----------------------------------------------------------------------------- masked_select, diagonal


def test_masked_select_broadcasts_by_rule_2():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = nt.tensor(a, names=("batch", "seq", "feat"))
    mask = a[0] % 3 == 0
    out = t.masked_select(nt.tensor(mask, names=("seq", "feat")))
    assert out.names == (None,)
    assert_close(out, np.broadcast_to(a, a.shape)[np.broadcast_to(mask, a.shape)])
    column = nt.tensor(np.array([[True], [False]]))  # (2, 1) against (3,): the result is (2, 3)
    small = nt.tensor([1.0, 2.0, 3.0], names=("feat",))
    assert_close(nt.masked_select(small, column), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(nt.NamesError, match="masked_select: dims .* do not match"):
        t.masked_select(nt.tensor(mask, names=("seq", "time")))
    with pytest.raises(ValueError, match="masked_select: the tensor's shape .* and the mask's .* do not broadcast"):
        t.masked_select(nt.ones(2, dtype=nt.bool_))
    with pytest.raises(TypeError, match="masked_select: the mask must be a bool tensor"):
        t.masked_select(nt.ones(4))
    with pytest.raises(TypeError, match="masked_select: the mask must be a boolean tensor or array"):
        t.masked_select(True)
    with pytest.raises(nt.DataDependentError):
        nt.trace_shapes(lambda x: x.masked_select(x > 0), nt.spec({"batch": 2}))


def test_masked_select_gradient():
    x = leaf(np.random.default_rng(6).standard_normal((3, 4)), ("row", "col"))
    mask = nt.tensor(np.array([True, False, True, True]), names=("col",))
    assert gradcheck(lambda t: t.masked_select(mask), x) and gradgradcheck(lambda t: t.masked_select(mask), x)
    x.masked_select(mask).sum().backward()
    assert x.grad.names == ("row", "col")
    assert_close(x.grad, np.tile(np.array([1.0, 0, 1, 1]), (3, 1)), check_names=False)


@pytest.mark.parametrize("offset", [0, 1, -1, 2, -3, 9])
def test_diagonal_matches_numpy(offset):
    a = np.random.default_rng(7).standard_normal((2, 3, 4))
    t = nt.tensor(a, names=("i", "j", "k"))
    out = t.diagonal(offset, "i", "k", out_name="d")
    assert out.names == ("j", "d")
    assert_close(out, np.diagonal(a, offset, 0, 2))
    assert_close(nt.diagonal(t, offset, dim1=-1, dim2=1), np.diagonal(a, offset, 2, 1), check_names=False)
    assert t.diagonal(offset, "k", "j").names == ("i", None)
    assert t.diagonal(offset, "k", "j", out_name="k").names == ("i", "k")  # the name of a dim that went


def test_diagonal_matches_pytorch_defaults():
    torch = pytest.importorskip("torch")
    a = np.arange(12.0).reshape(3, 4)
    for offset in (0, 1, -2):
        assert_close(nt.tensor(a).diagonal(offset), torch.tensor(a).diagonal(offset).numpy())


def test_diagonal_gradient_errors_and_dry_run():
    x = leaf(np.random.default_rng(8).standard_normal((3, 4, 2)), ("i", "j", "b"))
    fn = lambda t: t.diagonal(1, "i", "j", out_name="d")
    assert gradcheck(fn, x) and gradgradcheck(fn, x)
    with pytest.raises(ValueError, match=r"diagonal: dim1 and dim2 are the same dim, dim 0 \('i'\)"):
        x.diagonal(0, "i", 0)
    with pytest.raises(nt.NamesError, match="diagonal: out_name 'b' is already a dim of the result"):
        x.diagonal(0, "i", "j", out_name="b")
    with pytest.raises(nt.NamesError, match="diagonal: invalid dim name"):
        x.diagonal(0, "i", "j", out_name="1d")
    with pytest.raises(TypeError, match="diagonal: offset must be an int"):
        x.diagonal(0.5)
    trace = nt.trace_shapes(fn, nt.spec({"i": 5, "j": 7, "b": 2}))
    assert trace.result.names == ("b", "d") and trace.result.shape == (2, 5)


# ----------------------------------------------------------------------------- names setter, rename_


def test_names_setter_and_rename_in_place():
    t = nt.zeros(2, 3)
    view = t[:]
    t.names = ("batch", "feat")
    assert t.names == ("batch", "feat") and view.names == (None, None)
    assert t.rename_(feat="embed") is t and t.names == ("batch", "embed")
    t.rename_("x", ...)
    assert t.names == ("x", "embed")
    t.names = None
    assert t.names == (None, None) and not t.is_named
    with pytest.raises(nt.NamesError, match="names: names must be a sequence of names, not the str"):
        t.names = "batch"
    with pytest.raises(TypeError, match="names: names must be a sequence"):
        t.names = 3
    with pytest.raises(nt.NamesError, match="rename_: got 1 names"):
        t.names = ("batch",)
    with pytest.raises(nt.NamesError, match="rename_: duplicate dim name 'a'"):
        t.rename_("a", "a")
    assert t.names == (None, None)


def test_rename_in_place_and_autograd():
    w = nt.zeros(2, 3, dtype=nt.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="rename_: in-place edit of a tensor that requires grad"):
        w.names = ("out", "in")
    (w * 2).sum().backward()
    with nt.no_grad():
        w.names = ("out", "in")
    assert w.grad.names == ("out", "in")  # a gradient has its tensor's names
    y = w * 2
    with pytest.raises(RuntimeError, match="rename_: the tensor .* was computed in a graph"):
        y.rename_("a", "b")
    y.rename_("out", "in")  # no change: nothing to refuse
    x = nt.ones(3, dtype=nt.float64, requires_grad=True)
    saved = x.exp()
    with nt.no_grad():
        x.rename_("feat")
    with pytest.raises(nt.NamesError, match="grad: the gradient's names"):
        saved.sum().backward()  # the graph knew x by its old names


# ----------------------------------------------------------------------------- NumPy's spellings


REDUCTIONS = ["sum", "mean", "prod", "amax", "amin", "std", "var", "logsumexp", "norm", "any", "all", "argmax",
              "argmin", "max", "min", "median", "nanmedian", "mode", "kthvalue"]


def _call(t, op, **kwargs):
    if op == "kthvalue":
        return t.kthvalue(1, **kwargs)
    return getattr(t, op)(**kwargs)


@pytest.mark.parametrize("op", REDUCTIONS)
def test_axis_and_keepdims_are_dim_and_keepdim(op):
    a = np.random.default_rng(9).standard_normal((2, 3))
    t = nt.tensor(a, names=("row", "col")) if op not in ("any", "all") else nt.tensor(a > 0, names=("row", "col"))
    for axis in ("col", 1):
        for keepdims in (True, False):
            expected = _call(t, op, dim=axis, keepdim=keepdims)
            got = _call(t, op, axis=axis, keepdims=keepdims)
            for e, g in zip(expected if isinstance(expected, tuple) else (expected,),
                            got if isinstance(got, tuple) else (got,)):
                assert_close(g, e)
    with pytest.raises(TypeError, match=f"{op}: give dim= or its NumPy spelling axis=, not both"):
        _call(t, op, dim=0, axis=1)
    with pytest.raises(TypeError, match=f"{op}: give keepdim= or its NumPy spelling keepdims=, not both"):
        _call(t, op, dim=0, keepdim=True, keepdims=True)


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "softmax", "log_softmax", "cummax", "cummin", "logcumsumexp"])
def test_axis_along_one_dim(op):
    t = nt.tensor(np.random.default_rng(10).standard_normal((2, 3)), names=("row", "col"))
    for got, expected in [(getattr(t, op)(axis="col"), getattr(t, op)("col")),
                          (getattr(nt, op)(t, axis=0), getattr(t, op)(0))]:
        for e, g in zip(expected if isinstance(expected, tuple) else (expected,),
                        got if isinstance(got, tuple) else (got,)):
            assert_close(g, e)
    with pytest.raises(TypeError, match=f"{op}: give dim= or its NumPy spelling axis=, not both"):
        getattr(t, op)(0, axis=1)
    with pytest.raises(TypeError, match=f"{op}: missing the dim"):
        getattr(t, op)()


def test_numpy_reductions_with_axis_match_numpy():
    a = np.random.default_rng(11).standard_normal((2, 3, 4))
    t = nt.tensor(a, names=("batch", "seq", "feat"))
    assert_close(t.sum(axis=(0, 2), keepdims=True), a.sum(axis=(0, 2), keepdims=True), check_names=False)
    assert t.mean(axis=("batch", "feat")).names == ("seq",)
    assert_close(t.mean(axis=1), a.mean(axis=1), check_names=False)
    assert_close(t.amax(axis=-1, keepdims=True), a.max(axis=-1, keepdims=True), check_names=False)
    assert_close(t.std(axis=1, correction=0), a.std(axis=1), check_names=False)
    assert_close(t.max(axis=1).values, a.max(axis=1), check_names=False)  # PyTorch's meaning: (values, indices)


def test_astype_copy_swapaxes_ravel():
    a = np.arange(6).reshape(2, 3)
    t = nt.tensor(a, names=("row", "col"))
    f = t.astype(nt.float32)
    assert f.dtype == nt.float32 and f.names == ("row", "col")
    assert_close(f, a.astype(np.float32))
    same = t.astype(nt.int64)
    assert same is not t and nt.equal(same, t)  # NumPy's astype copies
    assert t.astype(nt.int64, copy=False) is t
    with pytest.raises(TypeError, match="astype: copy must be a bool"):
        t.astype(nt.int64, copy=None)
    c = t.copy()
    c[0, 0] = 100
    assert t[0, 0].item() == 0 and c.names == t.names
    assert t.swapaxes("row", "col").names == ("col", "row")
    assert_close(t.swapaxes(0, 1), a.swapaxes(0, 1), check_names=False)
    r = t.ravel(out_name="item")
    assert r.names == ("item",)
    assert_close(r, a.ravel(), check_names=False)
    assert t.rename(None).ravel().names == (None,)
    assert nt.tensor([1, 2], names=("x",)).ravel().names == ("x",)
    assert nt.tensor(5).ravel().shape == (1,)
    with pytest.raises(nt.NamesError, match="ravel: flattening dims .* would drop the names"):
        t.ravel()
    x = leaf(np.ones((2, 3)), ("row", "col"))
    assert gradcheck(lambda u: u.astype(nt.float64) * u.copy().swapaxes(0, 1).ravel(out_name="n").sum(), x)


def test_transpose_numpy_and_pytorch_forms():
    a = np.arange(24).reshape(2, 3, 4)
    t = nt.tensor(a, names=("batch", "seq", "feat"))
    assert t.transpose(0, 2).names == ("feat", "seq", "batch")  # PyTorch: swap two
    assert_close(t.transpose(0, 2), a.swapaxes(0, 2), check_names=False)
    assert_close(t.transpose(), a.transpose(), check_names=False)  # NumPy: reverse
    assert t.transpose().names == ("feat", "seq", "batch")
    assert_close(t.transpose(2, 0, 1), a.transpose(2, 0, 1), check_names=False)  # NumPy: a permutation
    assert t.transpose((1, 2, 0)).names == ("seq", "feat", "batch")
    assert t.transpose(dim0="batch", dim1="seq").names == ("seq", "batch", "feat")
    assert nt.transpose(t, "feat", ...).names == ("feat", "batch", "seq")
    with pytest.raises(nt.NamesError, match="transpose: got 2 dims"):
        t.transpose((1, 0))
    with pytest.raises(TypeError, match="transpose: dim0= and dim1= name the two dims to swap"):
        t.transpose(0, 1, dim0=2)
    x = leaf(np.ones((2, 3, 4)), ("a", "b", "c"))
    assert gradcheck(lambda u: u.transpose(1, 2, 0), x)


def test_diagonal_is_read_only_since_it_is_no_view():
    """PyTorch's diagonal is a view, so a write into it changes the input; this one is a copy, and a
    write must raise instead of silently changing nothing."""
    t = nt.zeros(3, 3, names=("a", "b"))
    d = t.diagonal(dim1="a", dim2="b")
    for write in (lambda: d.fill_(1.0), lambda: d.mul_(2.0), lambda: d.__setitem__(0, 5.0)):
        with pytest.raises(ValueError, match="the results of diagonal, unfold, real, imag and view_as_real are copies, unlike PyTorch's views"):
            write()
    assert t.sum().item() == 0.0
    assert d.clone().fill_(1.0).tolist() == [1.0, 1.0, 1.0]
