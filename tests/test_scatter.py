"""The scatter family and indexed writes: values against PyTorch (every reduction, negative dims, the
in-place forms), the name rules, gradients (first and second order), the in-place rules in the graph,
error messages, and a dry run."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import _names
from namedtensor.backends.base import Backend
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")

REDUCTIONS = ["sum", "prod", "mean", "amax", "amin"]


def _unique_index(rng, shape, ax, size):
    """An index of ``shape`` whose values along ``ax`` are distinct positions in ``[0, size)``."""
    moved = list(shape)
    k = moved.pop(ax)
    rows = [rng.permutation(size)[:k] for _ in range(int(np.prod(moved, dtype=int)))]
    return np.moveaxis(np.array(rows, dtype=np.int64).reshape(tuple(moved) + (k,)), -1, ax)


def _t(a):
    return torch.tensor(np.asarray(a))


# ----------------------------------------------------------------------------- values against PyTorch


@pytest.mark.parametrize("dim", [1, -2, "b"])
@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
def test_scatter_matches_torch(rng, dim, reduce):
    x = rng.standard_normal((2, 5, 3))
    idx = _unique_index(rng, (2, 3, 2), 1, 5)  # smaller than x outside dim 1
    src = rng.standard_normal((2, 4, 3))  # larger than the index: read at its corner
    t = nt.tensor(x, names=("a", "b", "c"))
    got = t.scatter(dim, nt.tensor(idx), nt.tensor(src), reduce=reduce)
    d = 1 if dim == "b" else dim
    want = _t(x).scatter(d, _t(idx), _t(src), **({} if reduce is None else {"reduce": reduce}))
    assert got.names == ("a", "b", "c")
    assert_close(got, want.numpy(), check_names=False)
    value = t.scatter(dim, nt.tensor(idx), 2.5, reduce=reduce)
    want = _t(x).scatter(d, _t(idx), 2.5, **({} if reduce is None else {"reduce": reduce}))
    assert_close(value, want.numpy(), check_names=False)
    assert_close(nt.scatter(t, dim, nt.tensor(idx), value=2.5, reduce=reduce), value)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_matches_torch(rng, reduce, include_self):
    x = rng.standard_normal((4, 3))
    idx = rng.integers(0, 4, (6, 3))  # repeated positions combine
    src = rng.standard_normal((6, 3))
    got = nt.tensor(x, names=("n", "f")).scatter_reduce("n", idx, nt.tensor(src), reduce, include_self=include_self)
    want = _t(x).scatter_reduce(0, _t(idx), _t(src), reduce, include_self=include_self)
    assert got.names == ("n", "f")
    assert_close(got, want.numpy(), check_names=False)
    # integers, with floor division for the mean
    xi, si = rng.integers(-9, 9, (4, 3)), rng.integers(-9, 9, (6, 3))
    got = nt.tensor(xi).scatter_reduce(-2, idx, nt.tensor(si), reduce, include_self=include_self)
    want = _t(xi).scatter_reduce(0, _t(idx), _t(si), reduce, include_self=include_self)
    assert got.dtype == nt.int64
    assert got.tolist() == want.tolist()
    # scatter's reduce= takes scatter_reduce's names too, with include_self=True
    if include_self:
        assert_close(nt.tensor(x).scatter(0, idx, nt.tensor(src), reduce=reduce),
                     _t(x).scatter_reduce(0, _t(idx), _t(src), reduce).numpy())


def test_scatter_add_matches_torch(rng):
    x = rng.standard_normal((3, 4))
    idx = rng.integers(0, 4, (2, 5))
    src = rng.standard_normal((3, 6))
    t = nt.tensor(x, names=("r", "c"))
    want = _t(x).scatter_add(1, _t(idx), _t(src)).numpy()
    assert_close(nt.scatter_add(t, "c", idx, nt.tensor(src)), want, check_names=False)
    assert_close(t.scatter_add(-1, nt.tensor(idx), nt.tensor(src)), want, check_names=False)
    assert_close(t.scatter(1, idx, nt.tensor(src), reduce="add"), want, check_names=False)
    t.scatter_add_("c", idx, nt.tensor(src))
    assert_close(t, want, check_names=False)


def test_index_ops_match_torch(rng):
    x = rng.standard_normal((3, 5))
    idx = np.array([4, 0, 4, 2])
    source = rng.standard_normal((3, 4))
    t = nt.tensor(x, names=("r", "c"))
    assert_close(t.index_add("c", idx, nt.tensor(source), alpha=2.0),
                 _t(x).index_add(1, _t(idx), _t(source), alpha=2.0).numpy(), check_names=False)
    assert_close(nt.index_add(t, -1, nt.tensor(idx), nt.tensor(source)),
                 _t(x).index_add(1, _t(idx), _t(source)).numpy(), check_names=False)
    unique = np.array([4, 0, 1])
    assert_close(t.index_copy(1, unique, nt.tensor(source[:, :3])),
                 _t(x).index_copy(1, _t(unique), _t(source[:, :3])).numpy(), check_names=False)
    assert_close(t.index_fill("c", [1, -1], -3.0), _t(x).index_fill(1, _t([1, -1]), -3.0).numpy(), check_names=False)
    assert_close(t.index_fill(0, nt.tensor(2), nt.tensor(7.0)),
                 _t(x).index_fill(0, torch.tensor(2), torch.tensor(7.0, dtype=torch.float64)).numpy(),
                 check_names=False)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_torch(rng, accumulate):
    x = rng.standard_normal((3, 4))
    rows, cols = np.array([0, 2, 0]), np.array([1, 3, 1] if accumulate else [1, 3, 2])
    v = rng.standard_normal(3)
    t = nt.tensor(x, names=("r", "c"))
    want = _t(x).index_put((_t(rows), _t(cols)), _t(v), accumulate=accumulate).numpy()
    assert_close(t.index_put((nt.tensor(rows), nt.tensor(cols)), nt.tensor(v), accumulate=accumulate), want,
                 check_names=False)
    # one index tensor picks rows; a number broadcasts; a mask selects; negative positions count from the end
    want = _t(x).index_put((_t([-1, 0]),), torch.tensor(2.0, dtype=torch.float64), accumulate=accumulate).numpy()
    assert_close(nt.index_put(t, [nt.tensor([-1, 0])], 2.0, accumulate), want, check_names=False)
    mask = x > 0
    want = _t(x).index_put((_t(mask),), torch.tensor(-1.0, dtype=torch.float64), accumulate=accumulate).numpy()
    assert_close(t.index_put((mask,), -1.0, accumulate=accumulate), want, check_names=False)
    t.index_put_((nt.tensor(rows), nt.tensor(cols)), nt.tensor(v), accumulate)
    assert_close(t, _t(x).index_put((_t(rows), _t(cols)), _t(v), accumulate=accumulate).numpy(), check_names=False)


def test_masked_scatter_and_take_match_torch(rng):
    x = rng.standard_normal((2, 3))
    mask = np.array([True, False, True])
    source = rng.standard_normal((2, 5))
    t = nt.tensor(x, names=("r", "c"))
    want = _t(x).masked_scatter(_t(mask), _t(source)).numpy()
    got = t.masked_scatter(nt.tensor(mask, names=("c",)), nt.tensor(source))
    assert got.names == ("r", "c")
    assert_close(got, want, check_names=False)
    # the out-of-place form broadcasts the input and the mask together, as in PyTorch
    wide = nt.masked_scatter(nt.tensor(x[0]), np.array([[True], [False]]), nt.tensor(source))
    assert_close(wide, _t(x[0]).masked_scatter(_t(np.array([[True], [False]])), _t(source)).numpy())
    t.masked_scatter_(mask, nt.tensor(source))
    assert_close(t, want, check_names=False)
    idx = np.array([[0, -1, 3], [5, 2, -6]])
    out = nt.take(nt.tensor(x, names=("r", "c")), nt.tensor(idx, names=("i", "j")))
    assert out.names == ("i", "j")
    assert_close(out, torch.take(_t(x), _t(idx)).numpy(), check_names=False)


def test_in_place_forms_write_into_self_and_its_views(rng):
    x = rng.standard_normal((3, 4))
    idx = _unique_index(rng, (2, 4), 0, 3)
    src = rng.standard_normal((2, 4))
    t = nt.tensor(x, names=("r", "c"))
    view = t[1:]
    assert t.scatter_("r", idx, nt.tensor(src)) is t
    want = _t(x).scatter_(0, _t(idx), _t(src)).numpy()
    assert_close(t, want, check_names=False)
    assert_close(view, want[1:], check_names=False)
    u = nt.tensor(x)
    u.scatter_(0, idx, value=1.5, reduce="multiply")
    assert_close(u, _t(x).scatter_(0, _t(idx), 1.5, reduce="multiply").numpy())
    u = nt.tensor(x)
    u.scatter_reduce_(0, idx, nt.tensor(src), "amax", include_self=False)
    assert_close(u, _t(x).scatter_reduce_(0, _t(idx), _t(src), "amax", include_self=False).numpy())
    ones = np.ones((3, 2))
    for name, args in (("index_add_", (1, [0, 0], ones)), ("index_copy_", (1, [3, 1], ones)),
                       ("index_fill_", (0, [2], 4.0))):
        u = nt.tensor(x)
        assert getattr(u, name)(*[nt.tensor(a) if a is ones else a for a in args]) is u
        want = getattr(_t(x), name)(*[_t(a) if isinstance(a, (list, np.ndarray)) else a for a in args])
        assert_close(u, want.numpy())


def test_in_place_name_filling_and_no_growing():
    t = nt.zeros(2, 3, names=(None, "c"))
    t.scatter_add_(1, nt.zeros(2, 3, dtype=nt.int64, names=("r", None)), nt.ones(2, 3, names=("r", "c")))
    assert t.names == ("r", "c")
    with pytest.raises(ValueError, match="masked_scatter_: the result has shape"):
        nt.zeros(3).masked_scatter_(np.ones((2, 3), dtype=bool), nt.ones(6))


def test_dtypes_follow_same_kind_casting():
    t = nt.zeros(3, dtype=nt.float32)
    out = t.scatter(0, [0, 1], nt.tensor([1.0, 2.0], dtype=nt.float64))
    assert out.dtype == nt.float32 and out.tolist() == [1.0, 2.0, 0.0]
    assert nt.zeros(3, dtype=nt.float64).index_add(0, [1], nt.tensor([2], dtype=nt.int64)).tolist() == [0, 2, 0]
    with pytest.raises(TypeError, match="scatter: cannot write a float value into a tensor of dtype"):
        nt.zeros(3, dtype=nt.int64).scatter(0, [0], nt.tensor([1.5]))
    with pytest.raises(TypeError, match="index_fill: cannot write a float value"):
        nt.zeros(3, dtype=nt.int64).index_fill(0, [0], 1.5)


# ----------------------------------------------------------------------------- name rules


@st.composite
def scatter_names(draw):
    """Input names, a dim, and index/src names that agree with them (a name of their own at dim)."""
    shape, names = draw(nts.named_shapes(min_dims=1, max_dims=4))
    ax = draw(st.integers(0, len(shape) - 1))
    index = []
    for d, n in enumerate(names):
        if d == ax:
            index.append(draw(st.sampled_from([None, n, "k"])))  # "k" is no name of the pool
        elif n is None:
            free = [m for m in ("u", "v", "w") if m not in names and m not in index]
            index.append(draw(st.sampled_from([None] + free)))
        else:
            index.append(draw(st.sampled_from([None, n])))
    src = tuple(n if draw(st.booleans()) else None for n in index)
    return names, ax, tuple(index), src


@given(case=scatter_names())
def test_scatter_names_fill_the_inputs_unnamed_dims(case):
    names, ax, index, src = case
    out = _names.scatter(names, ax, index, src, "scatter")
    assert len(out) == len(names) and out[ax] == names[ax]
    for d, (n, i) in enumerate(zip(names, index)):
        if d != ax:
            assert out[d] == (n if n is not None else i)
    shape = tuple(2 + d for d in range(len(names)))
    t = nt.zeros(*shape, names=names, dtype=nt.float64)
    idx = nt.zeros(*shape, names=index, dtype=nt.int64)
    assert t.scatter(ax, idx, nt.ones(*shape, names=src, dtype=nt.float64)).names == out
    assert t.scatter_reduce(ax, idx, nt.ones(*shape, names=src, dtype=nt.float64), "amax").names == out


def test_scatter_name_errors():
    t = nt.zeros(2, 3, names=("batch", "seq"))
    idx = nt.zeros(2, 3, dtype=nt.int64, names=("batch", "batch_"))
    with pytest.raises(nt.NamesError, match=r"scatter: the index's names \('feat', None\) do not match the input's"):
        t.scatter("seq", idx.rename("feat", None), 1.0)
    with pytest.raises(nt.NamesError, match="scatter_add: the index's dim 1 is named 'batch', which is another dim"):
        t.scatter_add("seq", nt.zeros(1, 3, dtype=nt.int64, names=(None, "batch")), nt.ones(1, 3))
    with pytest.raises(nt.NamesError, match="misaligned"):
        nt.zeros(2, 3, names=(None, "seq")).scatter(1, nt.zeros(2, 3, dtype=nt.int64, names=("seq", None)), 0.0)
    with pytest.raises(nt.NamesError, match="scatter: the index's names .* and src's .* do not match"):
        t.scatter("seq", idx, nt.ones(2, 3, names=("x", None)))
    with pytest.raises(nt.NamesError, match="index_add: the index is named 'k' but source's dim 1 is named 'j'"):
        t.index_add("seq", nt.tensor([0], names=("k",)), nt.ones(2, 1, names=("batch", "j")))
    with pytest.raises(nt.NamesError, match="index_copy: the source's names .* do not match the input's"):
        t.index_copy("seq", [0], nt.ones(2, 1, names=("b", None)))
    with pytest.raises(nt.NamesError, match="masked_scatter"):
        t.masked_scatter(nt.ones(3, dtype=nt.bool_, names=("feat",)), nt.ones(6))


def test_names_of_index_ops():
    t = nt.zeros(2, 4, names=(None, "seq"))
    assert t.index_add("seq", nt.tensor([0, 1], names=("k",)), nt.ones(2, 2, names=("batch", "k"))).names == \
        ("batch", "seq")
    assert t.index_copy(1, [3], nt.ones(2, 1, names=("batch", None))).names == ("batch", "seq")
    assert t.index_fill("seq", nt.tensor([1], names=("k",)), 1.0).names == (None, "seq")
    assert t.index_put((nt.tensor([0, 1], names=("k",)),), nt.ones(2, 4, names=(None, "seq"))).names == (None, "seq")
    assert t.index_put((np.array([0, 1]),), nt.ones(4, names=("seq",)), accumulate=True).names == (None, "seq")
    with pytest.raises(nt.NamesError, match="index_put: dims"):
        t.index_put((np.array([0, 1]),), nt.ones(4, names=("feat",)))
    assert t.masked_scatter(nt.ones(2, 1, dtype=nt.bool_, names=("batch", None)), nt.ones(9, names=("z",))).names == \
        ("batch", "seq")


# ----------------------------------------------------------------------------- gradients


def _leaf(rng, shape, names=None, low=0.5):
    """float64 values away from 0 and from each other (no ties for amax/amin)."""
    a = rng.uniform(low, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return nt.tensor(a, names=names, requires_grad=True)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_gradients(rng, reduce, include_self):
    x = _leaf(rng, (4, 3), ("n", "f"))
    src = _leaf(rng, (5, 3), ("k", "f"))
    idx = nt.tensor(rng.integers(0, 3, (5, 3)), names=("k", None))  # row 3 is never reached

    def fn(x, src):
        return x.scatter_reduce("n", idx, src, reduce, include_self=include_self)

    assert gradcheck(fn, x, src)
    assert gradgradcheck(fn, x, src)


@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
def test_scatter_gradients(rng, reduce):
    x = _leaf(rng, (3, 4), ("r", "c"))
    src = _leaf(rng, (2, 5))  # larger than the index: the rest gets no gradient
    idx = nt.tensor(_unique_index(rng, (2, 4), 0, 3))

    def fn(x, src):
        return nt.scatter(x, "r", idx, src, reduce=reduce)

    assert gradcheck(fn, x, src)
    assert gradgradcheck(fn, x, src)
    assert gradcheck(lambda x: x.scatter(-2, idx, value=2.0, reduce=reduce), x)


def test_gradients_match_torch(rng):
    """PyTorch's gradients, including ties (amax) and zeros (prod)."""
    x = np.array([[3.0, 0.0, 1.0], [2.0, 5.0, 0.0]])
    src = np.array([[3.0, 0.0, 2.0], [0.0, 5.0, 0.0], [3.0, 1.0, 4.0]])
    idx = np.array([[0, 1, 1], [0, 1, 1], [0, 0, 1]])
    g = rng.standard_normal((2, 3))
    for reduce in REDUCTIONS:
        a, s = nt.tensor(x, requires_grad=True), nt.tensor(src, requires_grad=True)
        a.scatter_reduce(0, idx, s, reduce).backward(nt.tensor(g))
        ta, ts = _t(x).requires_grad_(), _t(src).requires_grad_()
        ta.scatter_reduce(0, _t(idx), ts, reduce).backward(_t(g))
        assert_close(a.grad, ta.grad.numpy())
        assert_close(s.grad, ts.grad.numpy())


def test_index_op_gradients(rng):
    x = _leaf(rng, (3, 4), ("r", "c"))
    source = _leaf(rng, (3, 3), ("r", "k"))
    value = _leaf(rng, ())
    idx = nt.tensor([3, 0, 3], names=("k",))
    cases = {
        "index_add": (lambda x, s, v: x.index_add("c", idx, s, alpha=2.0)),
        "index_copy": (lambda x, s, v: x.index_copy("c", nt.tensor([3, 0, 1]), s)),
        "index_fill": (lambda x, s, v: x.index_fill("c", [0, -1], v) * s.sum()),
        "index_put": (lambda x, s, v: x.index_put((nt.tensor([0, 2]),), s.rename(None)[:2, :1] * v)),
        "index_put_accumulate": (lambda x, s, v: x.index_put((nt.tensor([0, 2, 0]), nt.tensor([1, 1, 1])),
                                                             s[0] * v, accumulate=True)),
        "masked_scatter": (lambda x, s, v: x.masked_scatter(nt.tensor([True, False, True, True]), s * v)),
        "take": (lambda x, s, v: nt.take(x, nt.tensor([[0, 11], [5, 5]])) * v),
    }
    for name, fn in cases.items():
        assert gradcheck(fn, x, source, value), name
        assert gradgradcheck(fn, x, source, value), name


# ----------------------------------------------------------------------------- in place in the graph


def test_in_place_edits_are_recorded(rng):
    a = _leaf(rng, (3, 4), ("r", "c"))
    src = _leaf(rng, (2, 4))
    idx = nt.tensor(_unique_index(rng, (2, 4), 0, 3))
    g = nt.tensor(rng.standard_normal((3, 4)), names=("r", "c"))

    def out_of_place():
        return (a * 2).scatter("r", idx, src * 3)

    expected = nt.grad(out_of_place(), (a, src), g)

    y = a * 2
    y.scatter_("r", idx, src * 3)
    got = nt.grad(y, (a, src), g)
    for e, h in zip(expected, got):
        assert_close(h, e)

    assert gradcheck(lambda a, s: (a * 2).index_add_("c", [1, 1], s.rename(None).transpose(0, 1)[:3]), a, src)


def test_in_place_refuses_leaves_that_require_grad(rng):
    a = _leaf(rng, (3, 4))
    with pytest.raises(RuntimeError, match="scatter_: in-place edit of a tensor that requires grad"):
        a.scatter_(0, [[0, 1, 2, 0]], value=1.0)
    with pytest.raises(RuntimeError, match="index_put_: in-place edit"):
        a.index_put_((nt.tensor([0]),), 1.0)
    with nt.no_grad():
        a.index_fill_(1, [0], 0.0)
    assert a.detach().numpy()[:, 0].tolist() == [0.0, 0.0, 0.0]


# ----------------------------------------------------------------------------- errors


def test_scatter_errors():
    t = nt.zeros(2, 3, names=("batch", "seq"))
    with pytest.raises(ValueError, match="scatter: the index must have the same number of dims as the input"):
        t.scatter("seq", [0, 1], 1.0)
    with pytest.raises(IndexError, match=r"scatter: index 3 is out of bounds for dim 1 \('seq'\) of size 3"):
        t.scatter("seq", [[0, 3]], 1.0)
    with pytest.raises(IndexError, match=r"scatter_add: index -1 is out of bounds .* \[0, 3\)"):
        t.scatter_add(1, [[-1]], nt.ones(1, 1))
    with pytest.raises(TypeError, match="scatter: the index must be an integer tensor"):
        t.scatter(1, nt.zeros(1, 1, dtype=nt.bool_), 1.0)
    with pytest.raises(TypeError, match="scatter: index tensors must be integer or bool"):
        t.scatter(1, nt.zeros(1, 1), 1.0)
    with pytest.raises(ValueError, match=r"scatter: the index \(shape \(1, 2\)\) is larger than src \(shape \(1, 1\)\)"):
        t.scatter(1, [[0, 1]], nt.ones(1, 1))
    with pytest.raises(ValueError, match=r"scatter_reduce: the index \(shape \(3, 1\)\) is larger than the input"):
        t.scatter_reduce(1, [[0], [0], [0]], nt.ones(3, 1), "sum")
    with pytest.raises(ValueError, match="scatter: src must have the same number of dims as the index"):
        t.scatter(1, [[0]], nt.ones(1))
    with pytest.raises(ValueError, match="scatter: reduce must be 'add' or 'multiply'"):
        t.scatter(1, [[0]], 1.0, reduce="max")
    with pytest.raises(ValueError, match="scatter_reduce: reduce must be one of 'sum', 'prod'"):
        t.scatter_reduce(1, [[0]], nt.ones(1, 1), "add")
    with pytest.raises(TypeError, match="scatter_reduce: include_self must be a bool"):
        t.scatter_reduce(1, [[0]], nt.ones(1, 1), "sum", include_self=1)
    with pytest.raises(TypeError, match="scatter: give src or value, not both"):
        t.scatter(1, [[0]], nt.ones(1, 1), value=1.0)
    with pytest.raises(TypeError, match="scatter_add: src must be a tensor"):
        t.scatter_add(1, [[0]], 1.0)
    with pytest.raises(nt.NamesError, match="scatter: .*'feat'"):
        t.scatter("feat", [[0]], 1.0)
    with pytest.raises(ValueError, match="scatter_: the index must have the same number of dims"):
        t.scatter_(1, [0], 1.0)


def test_index_op_errors():
    t = nt.zeros(2, 3, names=("batch", "seq"))
    with pytest.raises(IndexError, match="index_add: the index must be a 1-D integer tensor"):
        t.index_add(1, [[0]], nt.ones(2, 1))
    with pytest.raises(ValueError, match=r"index_copy: source has shape \(2, 2\), but .* is \(2, 1\)"):
        t.index_copy(1, [0], nt.ones(2, 2))
    with pytest.raises(IndexError, match="index_add: index 3 is out of bounds"):
        t.index_add("seq", [3], nt.ones(2, 1))
    with pytest.raises(IndexError, match=r"index_fill: index -4 is out of bounds .* \[-3, 3\)"):
        t.index_fill("seq", [-4], 0.0)
    with pytest.raises(ValueError, match="index_fill: the value must be a number or a 0-dim tensor"):
        t.index_fill("seq", [0], nt.ones(2))
    with pytest.raises(TypeError, match="index_add: alpha must be a number"):
        t.index_add("seq", [0], nt.ones(2, 1), alpha="2")
    with pytest.raises(TypeError, match="index_put: indices must be a tuple of integer or boolean tensors"):
        t.index_put((0, slice(None)), 1.0)
    with pytest.raises(TypeError, match="index_put: accumulate must be a bool"):
        t.index_put((nt.tensor([0]),), 1.0, "yes")
    with pytest.raises(IndexError, match="index_put: .*out of bounds"):
        t.index_put((nt.tensor([2]),), 1.0)
    with pytest.raises(ValueError, match=r"index_put: values of shape \(2,\) do not broadcast"):
        t.index_put((nt.tensor([0]),), nt.ones(2))
    with pytest.raises(ValueError, match="masked_scatter: source has 2 elements .* fewer than the 4 true entries"):
        t.masked_scatter(np.array([True, False, True]), nt.ones(2))
    with pytest.raises(TypeError, match="masked_scatter: the mask must be a bool tensor"):
        t.masked_scatter(nt.ones(3), nt.ones(6))
    with pytest.raises(IndexError, match=r"take: index 6 is out of bounds for the input read flat \(6 elements\)"):
        nt.take(t, [6])


# ----------------------------------------------------------------------------- backends and dry runs


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
def test_generic_backend_scatter_reduce_matches_numpys(rng, reduce, include_self):
    x = rng.standard_normal((4, 3))
    idx = rng.integers(0, 4, (6, 3))
    src = rng.standard_normal((6, 3))
    B = nt.tensor(x)._B
    key = (B.asarray(idx), B.reshape(B.arange(3), (1, 3)))
    got = Backend.scatter_reduce(B, B.asarray(x), key, B.asarray(src), reduce, include_self)
    want = _t(x).scatter_reduce(0, _t(idx), _t(src), reduce, include_self=include_self).numpy()
    assert_close(nt.tensor(got), want)
    empty = Backend.scatter_reduce(B, B.asarray(x), (B.asarray(idx[:0]), key[1]), B.asarray(src[:0]), reduce, False)
    assert_close(nt.tensor(empty), x)


def test_dry_run():
    x = nt.spec(("batch", "seq"), (4, 6), dtype=nt.float64, requires_grad=True)
    idx = nt.spec(("batch", "k"), (4, 2), dtype=nt.int64)
    src = nt.spec(("batch", "k"), (4, 2), dtype=nt.float64, requires_grad=True)

    def fn(x, idx, src):
        y = x.scatter_reduce("seq", idx, src, "amax") + x.scatter("seq", idx, src)
        y = y.index_add("seq", nt.spec(("k",), (2,), dtype=nt.int64), src) + y.index_fill("seq", [0], 1.0)
        y.sum().backward()
        return nt.take(y, idx)

    trace = nt.trace_shapes(fn, x, idx, src)
    assert trace.result.names == ("batch", "k") and trace.result.shape == (4, 2)
    assert x.grad.shape == (4, 6) and src.grad.names == ("batch", "k")
    assert "scatter_reduce" in trace.ops
    with pytest.raises(nt.DataDependentError):
        nt.trace_shapes(lambda x: x.masked_scatter(nt.spec(("seq",), (6,), dtype=nt.bool_), src), x)
