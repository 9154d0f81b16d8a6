"""Sorting: sort, argsort, topk against NumPy, names kept, gradients scattered back, errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.sorting import argsort, sort
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


@st.composite
def sort_case(draw):
    """A named array with ties (small integers as floats) and a dim along it: a name, an int or a negative int."""
    shape, names = draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = draw(nts.arrays(shape, "int64", low=-3, high=3)).astype(np.float64)
    ax = draw(st.integers(0, len(shape) - 1))
    choice = draw(st.sampled_from(["name", "int", "neg"]))
    if choice == "name" and names[ax] is not None:
        dim = names[ax]
    else:
        dim = ax - len(shape) if choice == "neg" else ax
    return a, names, dim, ax


def _stable_order(a, ax, descending):
    # negating keeps equal values equal, so a stable ascending sort of -a is the stable descending order
    return np.argsort(-a if descending else a, axis=ax, kind="stable")


@given(case=sort_case(), descending=st.booleans())
def test_sort_matches_numpy(case, descending):
    a, names, dim, ax = case
    t = nt.tensor(a, names=names)
    out = t.sort(dim, descending=descending, stable=True)
    values, indices = out
    assert out.values is values and out.indices is indices
    assert values.names == indices.names == names
    assert indices.dtype == nt.int64
    order = _stable_order(a, ax, descending)
    assert_close(indices, order)
    assert_close(values, np.take_along_axis(a, order, axis=ax))
    assert_close(t.argsort(dim, descending=descending, stable=True), order)
    assert_close(sort(t, dim, descending).values, values)  # unstable: same values


@given(case=sort_case(), largest=st.booleans(), data=st.data())
def test_topk_matches_numpy(case, largest, data):
    a, names, dim, ax = case
    k = data.draw(st.integers(0, a.shape[ax]))
    values, indices = nt.tensor(a, names=names).topk(k, dim, largest=largest)
    assert values.names == indices.names == names
    order = np.take(_stable_order(a, ax, largest), np.arange(k), axis=ax)
    assert_close(indices, order)
    assert_close(values, np.take_along_axis(a, order, axis=ax))


def test_sort_defaults_to_last_dim_and_ints():
    t = nt.tensor(np.array([[3, 1, 2], [0, 5, 4]], dtype=np.int32), names=("b", "n"))
    values, indices = t.sort()
    assert values.tolist() == [[1, 2, 3], [0, 4, 5]] and values.dtype == nt.int32
    assert indices.tolist() == [[1, 2, 0], [0, 2, 1]]
    assert t.topk(1).values.tolist() == [[3], [5]]
    assert argsort(t, "b", descending=True).tolist() == [[0, 1, 1], [1, 0, 0]]


def test_bool_and_numpy_int_arguments():
    b = nt.tensor(np.array([True, False, True]), names=("n",))
    values, indices = b.sort(stable=True)
    assert values.dtype == nt.bool_ and values.tolist() == [False, True, True]
    assert indices.tolist() == [1, 0, 2] and values.names == ("n",)
    top = b.topk(np.int64(2))
    assert top.values.tolist() == [True, True] and top.indices.tolist() == [0, 2]


def test_nan_sorts_as_largest():
    t = nt.tensor([1.0, float("nan"), 0.0], names=("n",))
    assert t.argsort().tolist() == [2, 0, 1]
    assert t.argsort(descending=True).tolist() == [1, 0, 2]


def _leaf(shape, names, seed=0):
    n = int(np.prod(shape))
    a = np.random.default_rng(seed).permutation(n).reshape(shape) * 0.5 - 1.0
    return nt.tensor(a, names=names, requires_grad=True)


@pytest.mark.parametrize("fn", [
    lambda t: t.sort("seq").values,
    lambda t: t.sort(0, descending=True),
    lambda t: t.topk(2, "seq").values,
    lambda t: t.topk(1, -1, largest=False),
])
def test_gradients_scatter_back(fn):
    x = _leaf((2, 3, 4), ("batch", "seq", None))
    assert gradcheck(fn, x)
    assert gradgradcheck(fn, x)


def test_topk_gradient_values():
    x = nt.tensor([[1.0, 4.0, 2.0, 3.0]], names=("b", "n"), requires_grad=True)
    values, _ = x.topk(2, "n")
    (values * nt.tensor([[10.0, 1.0]], names=("b", "n"))).sum().backward()
    assert x.grad.names == ("b", "n")
    assert_close(x.grad, np.array([[0.0, 10.0, 0.0, 1.0]], dtype=np.float32))


def test_indices_carry_no_gradient():
    x = _leaf((3,), ("n",))
    values, indices = x.sort()
    assert values.requires_grad and not indices.requires_grad
    assert not x.argsort().requires_grad


def test_errors():
    t = nt.tensor(np.zeros((2, 3)), names=("batch", "seq"))
    with pytest.raises(nt.NamesError, match=r"^sort: no dim named 'feat' in a tensor with names \('batch', 'seq'\)"):
        t.sort("feat")
    with pytest.raises(nt.NamesError, match="^argsort: no dim named 'feat'"):
        t.argsort("feat")
    with pytest.raises(IndexError, match="^topk: dim 2 is out of range"):
        t.topk(1, 2)
    with pytest.raises(ValueError, match=r"^topk: k=4 is out of range for dim 1 of size 3 .* k must be in \[0, 3\]"):
        t.topk(4, "seq")
    with pytest.raises(ValueError, match="^topk: k=-1 is out of range"):
        t.topk(-1)
    with pytest.raises(TypeError, match="^topk: k must be an int"):
        t.topk(1.0)
