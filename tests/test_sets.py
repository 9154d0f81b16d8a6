"""Sets and search (namedtensor/ops/sets.py): ``unique unique_consecutive nonzero argwhere searchsorted``
against PyTorch and NumPy (Hypothesis over random data), their names, errors, the standard's spellings
and the dry run that must refuse data-dependent shapes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.array_api as xp

pytestmark = pytest.mark.usefixtures("backend")

torch = pytest.importorskip("torch")


def _same(ours, theirs):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy() if hasattr(theirs, "numpy") else theirs)


@settings(deadline=None, max_examples=40)
@given(st.lists(st.integers(-3, 3), min_size=3, max_size=12), st.integers(1, 3))
def test_unique_matches_torch_flat_and_along_a_dim(values, cols):
    rows = len(values) // cols
    a = np.array(values[: rows * cols], dtype=np.int64).reshape(rows, cols)
    t = nt.tensor(a, names=("row", "col"))
    v, inv, cnt = nt.unique(t, return_inverse=True, return_counts=True)
    tv, tinv, tcnt = torch.unique(torch.tensor(a), return_inverse=True, return_counts=True)
    _same(v, tv), _same(inv, tinv), _same(cnt, tcnt)
    assert v.names == (None,) and inv.names == ("row", "col") and cnt.names == (None,)
    v, inv, cnt = nt.unique(t, dim="row", return_inverse=True, return_counts=True)
    tv, tinv, tcnt = torch.unique(torch.tensor(a), dim=0, return_inverse=True, return_counts=True)
    _same(v, tv), _same(inv, tinv), _same(cnt, tcnt)
    assert v.names == ("row", "col") and inv.names == ("row",) and cnt.names == ("row",)
    c = nt.unique_consecutive(t, return_counts=True, dim="col")
    tc = torch.unique_consecutive(torch.tensor(a), return_counts=True, dim=1)
    _same(c[0], tc[0]), _same(c[1], tc[1])


def test_unique_keeps_a_1d_name_and_returns_what_is_asked():
    t = nt.tensor([3, 1, 3, 2], names=("tok",))
    assert nt.unique(t).names == ("tok",) and nt.unique(t).tolist() == [1, 2, 3]
    values, counts = t.unique(return_counts=True)
    assert values.tolist() == [1, 2, 3] and counts.tolist() == [1, 1, 2] and counts.names == ("tok",)
    assert len(nt.unique(t, return_inverse=True)) == 2
    assert nt.unique_consecutive(nt.tensor([1, 1, 2, 1])).tolist() == [1, 2, 1]
    f = nt.tensor([1.0, float("nan"), 1.0, float("nan")])
    assert nt.unique(f).numel() == 3  # each NaN is its own value (NaN != NaN)
    empty, inverse = nt.unique(nt.zeros(0, 3, dtype=nt.int64), return_inverse=True)
    assert empty.shape == (0,) and inverse.shape == (0, 3)


def test_unique_of_complex_values_in_numpys_order():
    z = np.array([2 + 1j, 1 - 1j, 2 + 1j, 1 + 3j, 1 - 1j])
    values, inverse, counts = nt.unique(nt.tensor(z, names=("i",)), return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), np.unique(z))
    np.testing.assert_array_equal(inverse.numpy(), np.unique(z, return_inverse=True)[1])
    assert counts.tolist() == [2, 1, 2] and values.names == ("i",)


def test_nonzero_and_argwhere_match_torch():
    a = np.array([[0, 2, 0], [3, 0, 4]])
    t = nt.tensor(a, names=("r", "c"))
    for ours, theirs in ((nt.nonzero(t), torch.nonzero(torch.tensor(a))), (t.argwhere(), torch.argwhere(torch.tensor(a))),
                         (t.nonzero(), torch.tensor(a).nonzero())):
        _same(ours, theirs)
        assert ours.names == (None, None) and ours.dtype == nt.int64
    for ours, theirs in zip(nt.nonzero(t, as_tuple=True), torch.nonzero(torch.tensor(a), as_tuple=True)):
        _same(ours, theirs)
    assert nt.nonzero(nt.tensor(2.0)).shape == (1, 0) and nt.nonzero(nt.tensor(0.0)).shape == (0, 0)
    (only,) = nt.nonzero(nt.tensor(2.0), as_tuple=True)
    assert only.tolist() == [0]


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_matches_torch(right):
    seq = np.array([1.0, 3.0, 3.0, 5.0, 7.0])
    vals = np.array([[0.0, 3.0], [6.0, 9.0]])
    out = nt.searchsorted(nt.tensor(seq), nt.tensor(vals, names=("a", "b")), right=right)
    assert out.names == ("a", "b") and out.dtype == nt.int64
    _same(out, torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right))
    side = nt.searchsorted(nt.tensor(seq), nt.tensor(vals), side="right" if right else "left", out_int32=True)
    assert side.dtype == nt.int32
    _same(side, torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right))
    batch = np.array([[1, 3, 5], [2, 4, 6]])
    q = np.array([[3, 6], [1, 4]])
    out = nt.searchsorted(nt.tensor(batch, names=("row", None)), nt.tensor(q, names=("row", "k")), right=right)
    assert out.names == ("row", "k")
    _same(out, torch.searchsorted(torch.tensor(batch), torch.tensor(q), right=right))
    unsorted = np.array([5.0, 1.0, 3.0])
    sorter = np.argsort(unsorted)
    _same(nt.searchsorted(nt.tensor(unsorted), nt.tensor([2.0, 4.0]), sorter=nt.tensor(sorter)),
          torch.searchsorted(torch.tensor(unsorted), torch.tensor([2.0, 4.0]), sorter=torch.tensor(sorter)))
    assert nt.searchsorted(nt.tensor(seq), 4.0).tolist() == 3  # a number searches as a 0-dim tensor
    ints = [1, 2, 3]
    for number in (2.5, 2, 0.5, 3.5):  # a float among integers is not truncated
        assert nt.searchsorted(nt.tensor(ints), number).item() == torch.searchsorted(torch.tensor(ints), number).item()


def test_errors():
    with pytest.raises(nt.NamesError, match="unique: no dim named 'x'"):
        nt.unique(nt.tensor([[1, 2]], names=("r", "c")), dim="x")
    with pytest.raises(ValueError, match="searchsorted: side must be 'left' or 'right'"):
        nt.searchsorted(nt.tensor([1, 2]), nt.tensor([1]), side="middle")
    with pytest.raises(ValueError, match="searchsorted: side='left' and right=True contradict"):
        nt.searchsorted(nt.tensor([1, 2]), nt.tensor([1]), side="left", right=True)
    with pytest.raises(ValueError, match="searchsorted: an N-dim sorted_sequence's leading dims must equal"):
        nt.searchsorted(nt.tensor([[1, 2], [3, 4]]), nt.tensor([[1], [2], [3]]))
    with pytest.raises(nt.NamesError, match="searchsorted: dims"):
        nt.searchsorted(nt.tensor([[1, 2]], names=("a", None)), nt.tensor([[1]], names=("b", None)))
    with pytest.raises(ValueError, match="searchsorted: an N-dim sorted_sequence"):
        nt.searchsorted(nt.tensor([[1, 2]]), nt.tensor([1]))
    with pytest.raises(TypeError, match="nonzero: as_tuple must be a bool"):
        nt.nonzero(nt.tensor([1]), as_tuple="yes")


def test_the_standards_spellings():
    a = np.array([[3.0, 1.0], [np.nan, 3.0]])
    t = nt.tensor(a, names=("a", "b"))
    ours = xp.unique_all(t)
    theirs = np.unique_all(a)
    for field in ("values", "indices", "inverse_indices", "counts"):
        np.testing.assert_array_equal(getattr(ours, field).numpy(), getattr(theirs, field))
    assert ours.inverse_indices.names == ("a", "b")
    np.testing.assert_array_equal(xp.unique_counts(t).counts.numpy(), np.unique_counts(a).counts)
    np.testing.assert_array_equal(xp.unique_inverse(t).inverse_indices.numpy(), np.unique_inverse(a).inverse_indices)
    np.testing.assert_array_equal(xp.unique_values(t).numpy(), np.unique_values(a))
    for ours, theirs in zip(xp.nonzero(t > 1), np.nonzero(a > 1)):
        np.testing.assert_array_equal(ours.numpy(), theirs)
    np.testing.assert_array_equal(xp.searchsorted(nt.tensor([1.0, 2.0]), t, side="right").numpy(),
                                  np.searchsorted([1.0, 2.0], a, side="right"))


def test_dry_runs_refuse_data_dependent_shapes():
    x = nt.spec(("a",), (5,), dtype=nt.int64)
    with pytest.raises(nt.DataDependentError):
        nt.unique(x)
    with pytest.raises(nt.DataDependentError):
        nt.nonzero(x)
    out = nt.searchsorted(nt.spec(("e",), (4,)), nt.spec(("a", "b"), (2, 3)))
    assert out.shape == (2, 3) and out.names == ("a", "b") and out.dtype == nt.int64
