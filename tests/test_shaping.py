"""PyTorch's shape helpers (ops/shaping.py): values against NumPy and PyTorch, names, gradients, errors, dry runs."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import _names
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


def leaf(a, names=None):
    return nt.tensor(np.asarray(a, dtype=np.float64), names=names, requires_grad=True)


def grads_ok(fn, *inputs):
    return gradcheck(fn, *inputs) and gradgradcheck(fn, *inputs)


@st.composite
def dim_case(draw, min_dims=1):
    """A named shape and one of its dims, given as a name, an int or a negative int; with its axis."""
    shape, names = draw(nts.named_shapes(min_dims=min_dims, max_dims=3))
    ax = draw(st.integers(0, len(shape) - 1))
    choice = draw(st.sampled_from(["name", "int", "neg"]))
    if choice == "name" and names[ax] is not None:
        dim = names[ax]
    else:
        dim = ax - len(shape) if choice == "neg" else ax
    return shape, names, dim, ax


# ----------------------------------------------------------------------------- repeat_interleave


@given(case=dim_case(), r=st.integers(0, 3), data=st.data())
def test_repeat_interleave_matches_numpy_and_keeps_names(case, r, data):
    shape, names, dim, ax = case
    a = data.draw(nts.arrays(shape))
    t = nt.tensor(a, names=names)
    out = t.repeat_interleave(r, dim)
    assert out.names == names
    assert_close(out, np.repeat(a, r, axis=ax))
    counts = data.draw(st.lists(st.integers(0, 3), min_size=shape[ax], max_size=shape[ax]))
    out = nt.repeat_interleave(t, nt.tensor(np.array(counts, dtype=np.int64)), dim)
    assert out.names == names
    assert_close(out, np.repeat(a, counts, axis=ax))


def test_repeat_interleave_forms_match_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(6.0).reshape(2, 3)
    t = nt.tensor(a, names=("row", "col"))
    ta = torch.tensor(a)
    counts = np.array([1, 0, 2])
    assert_close(t.repeat_interleave(nt.tensor(counts, names=("col",)), "col"),
                 torch.repeat_interleave(ta, torch.tensor(counts), dim=1).numpy())
    assert_close(t.repeat_interleave(nt.tensor(np.array([2])), 0), ta.repeat_interleave(torch.tensor([2]), 0).numpy())
    assert_close(t.repeat_interleave(nt.tensor(np.int64(3)), 1), ta.repeat_interleave(torch.tensor(3), 1).numpy())
    # dim=None flattens first, with reshape's rule: merged dims come out unnamed, one dim keeps its name
    flat = t.repeat_interleave(2)
    assert flat.names == (None,)
    assert_close(flat, torch.repeat_interleave(ta, 2).numpy())
    assert nt.repeat_interleave(nt.arange(3, names=("n",)), 2).names == ("n",)
    assert nt.repeat_interleave(nt.tensor(5.0), 3).tolist() == [5.0, 5.0, 5.0]
    # the one-argument form: each index repeated by its count
    assert nt.repeat_interleave(nt.tensor([1, 2, 3])).tolist() == torch.repeat_interleave(torch.tensor([1, 2, 3])).tolist()
    assert t.repeat_interleave(2, "row", output_size=4).shape == (4, 3)


def test_repeat_interleave_gradients():
    x = leaf(np.random.default_rng(0).normal(size=(2, 3)), ("a", "b"))
    assert grads_ok(lambda u: u.repeat_interleave(2, "b"), x)
    assert grads_ok(lambda u: u.repeat_interleave(nt.tensor(np.array([2, 0, 3])), "b"), x)
    assert grads_ok(lambda u: u.repeat_interleave(3), x)


def test_repeat_interleave_errors():
    t = nt.zeros(2, 3, names=("a", "b"))
    with pytest.raises(nt.NamesError, match="repeat_interleave: repeats is named \\('c',\\) but the repeated dim is"):
        t.repeat_interleave(nt.tensor(np.array([1, 2, 1]), names=("c",)), "b")
    u = nt.zeros(2, 3, names=("a", None))
    with pytest.raises(nt.NamesError, match="repeat_interleave: .* misaligned.*pass dim='a'"):
        u.repeat_interleave(nt.tensor(np.array([1, 2, 1]), names=("a",)), 1)
    with pytest.raises(ValueError, match="repeat_interleave: repeats has 2 counts but dim 1 \\('b'\\)"):
        t.repeat_interleave(nt.tensor(np.array([1, 2])), "b")
    with pytest.raises(ValueError, match="repeat_interleave: repeats must be non-negative"):
        t.repeat_interleave(nt.tensor(np.array([1, -2, 1])), "b")
    with pytest.raises(ValueError, match="repeat_interleave: repeats must be non-negative, got -1"):
        t.repeat_interleave(-1, "b")
    with pytest.raises(TypeError, match="repeat_interleave: repeats must hold integers"):
        t.repeat_interleave(nt.tensor([1.0, 2.0, 1.0]), "b")
    with pytest.raises(ValueError, match="repeat_interleave: repeats must be an int or a 0-D or 1-D tensor"):
        t.repeat_interleave(nt.zeros(3, 1, dtype=nt.int64), "b")
    with pytest.raises(TypeError, match="repeat_interleave: repeats must be an int or an integer tensor"):
        t.repeat_interleave(2.0, "b")
    with pytest.raises(ValueError, match="repeat_interleave: output_size is 5 but the repeats add up to 4"):
        t.repeat_interleave(nt.tensor(np.array([1, 2, 1])), "b", output_size=5)
    with pytest.raises(ValueError, match="repeat_interleave: output_size is 5 but 3 entries repeated 2 times are 6"):
        t.repeat_interleave(2, "b", output_size=5)
    with pytest.raises(nt.NamesError, match="repeat_interleave: no dim named 'c'"):
        t.repeat_interleave(2, "c")


# ----------------------------------------------------------------------------- unfold


def _windows(a, ax, size, step):
    return np.lib.stride_tricks.sliding_window_view(a, size, axis=ax)[(slice(None),) * ax + (slice(None, None, step),)]


@given(case=dim_case(), data=st.data())
def test_unfold_matches_numpy(case, data):
    shape, names, dim, ax = case
    a = data.draw(nts.arrays(shape))
    size = data.draw(st.integers(0, shape[ax]))
    step = data.draw(st.integers(1, 3))
    out = nt.tensor(a, names=names).unfold(dim, size, step)
    assert out.names == names + (None,)
    assert_close(out, _windows(a, ax, size, step))


def test_unfold_names_the_window_and_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(24.0).reshape(2, 6, 2)
    t = nt.tensor(a, names=("batch", "seq", "feat"))
    out = t.unfold("seq", 3, 2, name="window")
    assert out.names == ("batch", "seq", "feat", "window")
    assert_close(out.numpy(), torch.tensor(a).unfold(1, 3, 2).numpy())
    assert_close(t.unfold(-1, 1, 1).numpy(), torch.tensor(a).unfold(-1, 1, 1).numpy())
    assert t.unfold("seq", 0, 1).shape == (2, 7, 2, 0)


def test_unfold_gradients_add_up_overlaps():
    x = leaf(np.random.default_rng(1).normal(size=(2, 7)), ("a", "b"))
    assert grads_ok(lambda u: u.unfold("b", 3, 2), x)
    assert grads_ok(lambda u: u.unfold("b", 2, 3), x)  # a gap: the entry skipped gets no gradient
    assert grads_ok(lambda u: u.unfold("a", 2, 1, name="w"), x)
    y = leaf(np.ones(5), ("n",))
    y.unfold("n", 3, 1).sum().backward()
    assert y.grad.names == ("n",) and y.grad.tolist() == [1.0, 2.0, 3.0, 2.0, 1.0]


def test_unfold_is_read_only_since_it_is_no_view():
    t = nt.zeros(5, names=("n",))
    w = t.unfold("n", 2, 1)
    with pytest.raises(ValueError, match="the results of diagonal, unfold, .* are copies, unlike PyTorch's views"):
        w.fill_(1.0)
    assert t.sum().item() == 0.0


def test_unfold_errors():
    t = nt.zeros(2, 5, names=("a", "b"))
    with pytest.raises(nt.NamesError, match="unfold: the window dim's name 'a' is already a dim of"):
        t.unfold("b", 2, 1, name="a")
    with pytest.raises(ValueError, match=r"unfold: the window size 6 must be between 0 and the size 5 of dim 1 \('b'\)"):
        t.unfold("b", 6, 1)
    with pytest.raises(ValueError, match="unfold: step must be positive, got 0"):
        t.unfold("b", 2, 0)
    with pytest.raises(nt.NamesError, match="unfold: no dim named 'c'"):
        t.unfold("c", 2, 1)
    with pytest.raises(nt.NamesError, match="unfold: invalid dim name"):
        t.unfold("b", 2, 1, name="1x")
    with pytest.raises(IndexError, match="unfold: dim 0 is out of range for a tensor with 0 dims"):
        nt.tensor(1.0).unfold(0, 1, 1)


# ----------------------------------------------------------------------------- view_as / reshape_as


def test_view_as_takes_other_names_where_the_sizes_match():
    t = nt.zeros(2, 5, 8, names=("batch", "seq", "embed"))
    other = nt.zeros(2, 5, 2, 4, names=("batch", None, "head", "d"))
    for out in (t.view_as(other), t.reshape_as(other)):
        assert out.shape == (2, 5, 2, 4)
        assert out.names == ("batch", "seq", "head", "d")
    # an unnamed other: reshape's rule alone
    assert t.reshape_as(nt.zeros(10, 8)).names == (None, "embed")
    assert t.reshape_as(nt.zeros(2, 5, 2, 4)).names == ("batch", "seq", None, None)
    a = np.arange(12.0)
    assert_close(nt.tensor(a).view_as(nt.zeros(3, 4)), a.reshape(3, 4))


@settings(max_examples=50)
@given(pair=nts.named_shapes(min_dims=1, max_dims=4), data=st.data())
def test_reshape_as_an_unnamed_tensor_is_reshape(pair, data):
    shape, names = pair
    total = int(np.prod(shape))
    split = data.draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
    target = (split, total // split)
    t = nt.tensor(np.arange(float(total)).reshape(shape), names=names)
    out = t.reshape_as(nt.zeros(*target))
    assert out.names == t.reshape(*target).names
    assert_close(out.numpy(), np.arange(float(total)).reshape(target))


def test_view_as_gradients_and_errors():
    x = leaf(np.random.default_rng(2).normal(size=(2, 6)), ("a", "b"))
    other = nt.zeros(2, 2, 3, names=("a", "h", "d"))
    assert grads_ok(lambda u: u.view_as(other), x)
    with pytest.raises(nt.NamesError, match=r"view_as: reshaping \('a', 'b'\) \(2, 6\) to \(2, 6\) keeps the names"):
        x.view_as(nt.zeros(2, 6, names=("b", "a")))
    with pytest.raises(nt.NamesError, match="reshape_as: .*do not line up with other's names"):
        x.reshape_as(nt.zeros(2, 6, names=("c", None)))
    with pytest.raises(ValueError, match=r"reshape_as: cannot reshape \(2, 6\) \(12 elements\) to other's shape"):
        x.reshape_as(nt.zeros(5))
    with pytest.raises(TypeError, match="view_as: other must be a Tensor"):
        x.view_as((2, 6))


def test_view_as_reports_dropped_names_in_gradual_mode():
    t = nt.zeros(2, 6, names=("a", "b"))
    with nt.gradual():
        t.view_as(nt.zeros(2, 2, 3, names=(None, "h", "d")))
        t.reshape_as(nt.zeros(2, 6, names=(None, "b")))
    split, same = nt.conversion_report().rows
    assert split.dropped == (("view_as", ("b",)),)
    assert same.dropped == ()


# ----------------------------------------------------------------------------- diag / diag_embed


@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3])
def test_diag_matches_numpy(k):
    v = np.arange(1.0, 4.0)
    m = np.arange(12.0).reshape(3, 4)
    out = nt.diag(nt.tensor(v, names=("i",)), k)
    assert out.names == (None, None)
    assert_close(out, np.diag(v, k))
    assert_close(nt.tensor(m, names=("r", "c")).diag(k), np.diag(m, k))
    assert nt.diag(nt.tensor(v), k, names=("r", "c")).names == ("r", "c")
    assert nt.diag(nt.tensor(m), k, names=("d",)).names == ("d",)


def test_diag_of_a_matrix_is_a_writable_copy():
    t = nt.zeros(3, 3)
    d = t.diag()
    d.fill_(1.0)
    assert t.sum().item() == 0.0


@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (0, 1, -1)])
def test_diag_embed_matches_torch(offset, dim1, dim2):
    torch = pytest.importorskip("torch")
    a = np.arange(6.0).reshape(2, 3)
    out = nt.tensor(a, names=("batch", "i")).diag_embed(offset, dim1, dim2)
    expected = torch.diag_embed(torch.tensor(a), offset, dim1, dim2).numpy()
    assert_close(out.numpy(), expected)
    names = [None, None, None]
    names[[i for i in range(3) if i not in (dim1 % 3, dim2 % 3)][0]] = "batch"
    assert out.names == tuple(names)


def test_diag_embed_names_and_gradients():
    x = leaf(np.random.default_rng(3).normal(size=(2, 3)), ("batch", "i"))
    out = nt.diag_embed(x, 1, names=("row", "col"))
    assert out.names == ("batch", "row", "col") and out.shape == (2, 4, 4)
    assert grads_ok(lambda u: nt.diag_embed(u, -1, 0, 2), x)
    assert grads_ok(lambda u: nt.diag_embed(u, 2, names=("r", "c")), x)
    v = leaf(np.arange(1.0, 4.0), ("i",))
    assert grads_ok(lambda u: nt.diag(u, 1), v)
    m = leaf(np.random.default_rng(4).normal(size=(3, 4)), ("r", "c"))
    assert grads_ok(lambda u: nt.diag(u, -1), m)


def test_diag_errors():
    with pytest.raises(ValueError, match=r"diag: expects a 1-D or 2-D tensor, got 3 dims"):
        nt.diag(nt.zeros(2, 2, 2))
    with pytest.raises(nt.NamesError, match="diag: got 1 names"):
        nt.diag(nt.zeros(3), names=("r",))
    with pytest.raises(nt.NamesError, match="diag: names must be a sequence of names, not the str"):
        nt.diag(nt.zeros(3, 3), names="d")
    with pytest.raises(TypeError, match="diag: diagonal must be an int"):
        nt.diag(nt.zeros(3), 1.0)
    t = nt.zeros(2, 3, names=("batch", "i"))
    with pytest.raises(nt.NamesError, match=r"diag_embed: the new dims' names \('batch', None\)"):
        t.diag_embed(names=("batch", None))
    with pytest.raises(TypeError, match="diag_embed: dim1 and dim2 are positions of the new dims"):
        t.diag_embed(0, "i", -1)
    with pytest.raises(ValueError, match="diag_embed: dim1 and dim2 are the same position 2"):
        t.diag_embed(0, -1, 2)
    with pytest.raises(IndexError, match="diag_embed: dim 3 is out of range for a tensor with 3 dims"):
        t.diag_embed(0, 3, 0)
    with pytest.raises(ValueError, match="diag_embed: needs at least one dim"):
        nt.tensor(1.0).diag_embed()
    with pytest.raises(nt.NamesError, match="diag_embed: names= names the two new dims, got 3 names"):
        t.diag_embed(names=("r", "c", "x"))


# ----------------------------------------------------------------------------- diff


@given(case=dim_case(), n=st.integers(0, 4), data=st.data())
def test_diff_matches_numpy(case, n, data):
    shape, names, dim, ax = case
    a = data.draw(nts.arrays(shape))
    out = nt.tensor(a, names=names).diff(n, dim)
    assert out.names == names
    assert_close(out, np.diff(a, n, axis=ax))


def test_diff_prepend_append_and_bool_match_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 4.0, 9.0], [2.0, 3.0, 7.0]])
    pre, app = np.array([[0.0], [5.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])
    t = nt.tensor(a, names=("r", "c"))
    out = t.diff(2, "c", prepend=nt.tensor(pre, names=("r", None)), append=nt.tensor(app))
    assert out.names == ("r", "c")
    expected = torch.diff(torch.tensor(a), 2, 1, torch.tensor(pre), torch.tensor(app)).numpy()
    assert_close(out.numpy(), expected)
    b = np.array([True, False, False, True])
    assert nt.diff(nt.tensor(b)).tolist() == torch.diff(torch.tensor(b)).tolist()
    assert nt.diff(nt.tensor(np.arange(3)), 5).shape == (0,)


def test_diff_gradients():
    x = leaf(np.random.default_rng(5).normal(size=(3, 4)), ("a", "b"))
    pre = leaf(np.random.default_rng(6).normal(size=(1, 4)), (None, "b"))
    assert grads_ok(lambda u: u.diff(2, "b"), x)
    assert grads_ok(lambda u, p: nt.diff(u, 1, "a", prepend=p), x, pre)


def test_diff_errors():
    t = nt.zeros(2, 3, names=("r", "c"))
    with pytest.raises(nt.NamesError, match="diff: the tensors' names must match dim by dim"):
        t.diff(1, "c", prepend=nt.zeros(2, 1, names=("x", None)))
    with pytest.raises(ValueError, match="diff: append must have the input's 2 dims"):
        t.diff(1, "c", append=nt.zeros(2))
    with pytest.raises(ValueError, match=r"diff: prepend and append must have the input's shape \(2, 3\)"):
        t.diff(1, "c", append=nt.zeros(3, 1))
    promoted = t.diff(1, "c", append=nt.zeros(2, 1, dtype=nt.float64))  # dtypes promote, as in PyTorch
    assert promoted.dtype == nt.float64 and promoted.shape == (2, 3)
    with pytest.raises(ValueError, match="diff: n must be non-negative"):
        t.diff(-1)
    with pytest.raises(TypeError, match="diff: prepend must be a Tensor"):
        t.diff(1, "c", prepend=[[0.0], [0.0]])


# ----------------------------------------------------------------------------- rot90 / fliplr / flipud


@pytest.mark.parametrize("k", range(-3, 6))
@pytest.mark.parametrize("dims,axes", [((0, 1), (0, 1)), (("c", "a"), (2, 0)), ((-1, 1), (2, 1))])
def test_rot90_matches_numpy_and_swaps_names(k, dims, axes):
    a = np.arange(24.0).reshape(2, 3, 4)
    out = nt.tensor(a, names=("a", "b", "c")).rot90(k, dims)
    assert_close(out.numpy(), np.rot90(a, k, axes))
    names = ["a", "b", "c"]
    if k % 2:
        names[axes[0]], names[axes[1]] = names[axes[1]], names[axes[0]]
    assert out.names == tuple(names)


def test_rot90_fliplr_flipud_match_torch_and_have_gradients():
    torch = pytest.importorskip("torch")
    a = np.arange(6.0).reshape(2, 3)
    t = nt.tensor(a, names=("r", "c"))
    for k in (-1, 1, 2, 3):
        assert_close(nt.rot90(t, k).numpy(), torch.rot90(torch.tensor(a), k).numpy())
    assert_close(nt.fliplr(t), np.fliplr(a))
    assert_close(t.flipud(), np.flipud(a))
    assert t.fliplr().names == t.flipud().names == ("r", "c")
    assert_close(nt.fliplr(t).numpy(), torch.fliplr(torch.tensor(a)).numpy())
    x = leaf(np.random.default_rng(7).normal(size=(2, 3)), ("r", "c"))
    for k in (1, 2, 3):
        assert grads_ok(lambda u: u.rot90(k, ("c", "r")), x)
    assert grads_ok(nt.fliplr, x) and grads_ok(nt.flipud, x)


def test_rot90_flip_errors():
    t = nt.zeros(2, 3, names=("r", "c"))
    with pytest.raises(ValueError, match=r"rot90: the two dims \('r', 0\) are the same dim"):
        t.rot90(1, ("r", 0))
    with pytest.raises(ValueError, match="rot90: dims must be two dims"):
        t.rot90(1, (0, 1, 0))
    with pytest.raises(ValueError, match="rot90: needs at least 2 dims"):
        nt.zeros(3).rot90()
    with pytest.raises(TypeError, match="rot90: k must be an int"):
        t.rot90(1.0)
    with pytest.raises(TypeError, match="rot90: dims must be a pair of dims"):
        t.rot90(1, "r")
    with pytest.raises(ValueError, match="fliplr: needs at least 2 dims"):
        nt.zeros(3).fliplr()
    with pytest.raises(ValueError, match="flipud: needs at least 1 dim"):
        nt.flipud(nt.tensor(1.0))


# ----------------------------------------------------------------------------- meshgrid / cartesian_prod


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_numpy_and_names_each_dim(indexing):
    xs = [np.arange(2.0), np.arange(3.0) + 10, np.arange(4.0) + 20]
    ts = [nt.tensor(x, names=(n,)) for x, n in zip(xs, ("i", None, "k"))]
    grids = nt.meshgrid(*ts, indexing=indexing)
    expected = np.meshgrid(*xs, indexing=indexing)
    names = ("i", None, "k") if indexing == "ij" else (None, "i", "k")
    for g, e in zip(grids, expected):
        assert g.names == names
        assert_close(g.numpy(), e)
    assert [g.names for g in nt.meshgrid(ts[:2])] == [("i", None)] * 2
    assert nt.meshgrid(nt.tensor(1.0, dtype=nt.float64), ts[0])[0].shape == (1, 2)


def test_meshgrid_matches_torch_and_has_gradients():
    torch = pytest.importorskip("torch")
    a, b = np.arange(3.0), np.arange(2.0)
    for indexing in ("ij", "xy"):
        ours = nt.meshgrid(nt.tensor(a), nt.tensor(b), indexing=indexing)
        theirs = torch.meshgrid(torch.tensor(a), torch.tensor(b), indexing=indexing)
        for o, e in zip(ours, theirs):
            assert_close(o.numpy(), e.numpy())
    x, y = leaf(a, ("x",)), leaf(b, ("y",))
    assert grads_ok(lambda u, v: nt.meshgrid(u, v, indexing="xy")[0] * nt.meshgrid(u, v, indexing="xy")[1], x, y)
    s = leaf(2.0)
    assert grads_ok(lambda u, v: nt.meshgrid(u, v)[0] * 3.0, s, y)


def test_meshgrid_errors():
    with pytest.raises(nt.NamesError, match="meshgrid: the inputs' names .* repeat a name"):
        nt.meshgrid(nt.zeros(2, names=("i",)), nt.zeros(3, names=("i",)))
    with pytest.raises(ValueError, match="meshgrid: expects 0-D or 1-D tensors, got one with 2 dims"):
        nt.meshgrid(nt.zeros(2, 2))
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'ij' or 'xy'"):
        nt.meshgrid(nt.zeros(2), indexing="ji")
    with pytest.raises(ValueError, match="meshgrid: expects at least one tensor"):
        nt.meshgrid()
    with pytest.raises(TypeError, match="meshgrid: all tensors must have the same dtype"):
        nt.meshgrid(nt.zeros(2), nt.zeros(2, dtype=nt.int64))


def test_cartesian_prod_matches_itertools_and_torch():
    xs = [np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]), np.array([6.0])]
    out = nt.cartesian_prod(*(nt.tensor(x, names=(n,)) for x, n in zip(xs, "abc")))
    assert out.names == (None, None)
    assert_close(out.numpy(), np.array(list(itertools.product(*xs))))
    assert nt.cartesian_prod([nt.tensor(x) for x in xs[:2]], names=("pair", "which")).names == ("pair", "which")
    one = nt.tensor(xs[0], names=("a",))
    assert nt.cartesian_prod(one) is one and nt.cartesian_prod(one, names=("b",)).names == ("b",)
    torch = pytest.importorskip("torch")
    assert_close(out.numpy(), torch.cartesian_prod(*(torch.tensor(x) for x in xs)).numpy())
    u, v = leaf(xs[0], ("a",)), leaf(xs[1], ("a",))
    assert grads_ok(lambda p, q: nt.cartesian_prod(p, q), u, v)
    with pytest.raises(ValueError, match=r"cartesian_prod: expects 1-D tensors, got shape \(2, 2\)"):
        nt.cartesian_prod(nt.zeros(2, 2), nt.zeros(2))
    with pytest.raises(nt.NamesError, match="cartesian_prod: got 1 names"):
        nt.cartesian_prod(u, v, names=("p",))


# ----------------------------------------------------------------------------- tril_indices / triu_indices


@pytest.mark.parametrize("row,col,offset", [(3, 3, 0), (3, 4, 1), (4, 3, -1), (0, 3, 0), (3, 5, -4), (2, 6, 7), (5, 2, 2)])
def test_tri_indices_match_numpy_and_torch(row, col, offset):
    lower = nt.tril_indices(row, col, offset)
    upper = nt.triu_indices(row, col, offset)
    assert lower.names == upper.names == (None, None) and lower.dtype == upper.dtype == nt.int64
    assert_close(lower, np.stack(np.tril_indices(row, offset, col)).reshape(2, -1))
    assert_close(upper, np.stack(np.triu_indices(row, offset, col)).reshape(2, -1))
    torch = pytest.importorskip("torch")
    assert lower.tolist() == torch.tril_indices(row, col, offset).tolist()
    assert upper.tolist() == torch.triu_indices(row, col, offset).tolist()
    for fn in (nt.tril_indices, nt.triu_indices):
        assert fn(row, col, offset, device="meta").shape == fn(row, col, offset).shape


def test_tri_indices_dtype_and_errors():
    assert nt.tril_indices(3, 3, dtype=nt.int32).dtype == nt.int32
    with pytest.raises(TypeError, match="tril_indices: dtype must be an integer dtype"):
        nt.tril_indices(3, 3, dtype=nt.float32)
    with pytest.raises(ValueError, match="triu_indices: sizes must be >= 0, got -1"):
        nt.triu_indices(-1, 3)
    with pytest.raises(TypeError, match="triu_indices: offset must be an int"):
        nt.triu_indices(3, 3, 0.5)


# ----------------------------------------------------------------------------- name rules and dry runs


@given(case=dim_case(), name=st.sampled_from([None, "w", "batch"]))
def test_unfold_rule(case, name):
    shape, names, dim, ax = case
    if name is not None and name in names:
        with pytest.raises(nt.NamesError, match="unfold: the window dim's name"):
            _names.unfold(names, dim, name)
    else:
        assert _names.unfold(names, dim, name) == (ax, names + (name,))


@given(pair=nts.named_shapes(min_dims=2, max_dims=4), k=st.integers(-5, 5), data=st.data())
def test_rot90_rule_swaps_names_for_odd_turns(pair, k, data):
    shape, names = pair
    a, b = data.draw(st.permutations(range(len(names))))[:2]
    k4, a2, b2, out = _names.rot90(names, k, (a, b))
    assert (k4, a2, b2) == (k % 4, a, b)
    swapped = list(names)
    swapped[a], swapped[b] = names[b], names[a]
    assert out == (tuple(swapped) if k % 2 else names)


def test_dry_run_on_the_meta_backend():
    x = nt.spec(("batch", "seq", "feat"), (2, 7, 3), dtype=nt.float64, requires_grad=True)

    def fn(x):
        r = x.repeat_interleave(2, "feat")
        w = r.unfold("seq", 3, 2, name="win")
        d = w.diff(1, "win")
        e = nt.diag_embed(d.sum("feat"), 1, names=("i", "j"))
        e.sum().backward()
        return r, w, d, e

    trace = nt.trace_shapes(fn, x)
    r, w, d, e = trace.result
    assert r.names == ("batch", "seq", "feat") and r.shape == (2, 7, 6)
    assert w.names == ("batch", "seq", "feat", "win") and w.shape == (2, 3, 6, 3)
    assert d.shape == (2, 3, 6, 2) and e.names == ("batch", "seq", "i", "j") and e.shape == (2, 3, 3, 3)
    assert "repeat_interleave" in trace.ops and "unfold" in trace.ops
    counts = nt.spec(("feat",), (3,), dtype=nt.int64)
    out = nt.trace_shapes(lambda x, c: x.repeat_interleave(c, "feat", output_size=10), x, counts).result
    assert out.shape == (2, 7, 10) and out.names == ("batch", "seq", "feat")
    with pytest.raises(nt.DataDependentError):
        nt.trace_shapes(lambda x, c: x.repeat_interleave(c, "feat"), x, counts)


def test_arguments_are_checked_whatever_was_called_before():
    t = nt.zeros(2, 3, names=("a", "b"))
    assert t.unfold(1, 2, 1).shape == (2, 2, 2)
    with pytest.raises(TypeError, match="unfold: a dim must be a name"):
        t.unfold(True, 2, 1)
    assert t.rot90(1, (0, 1)).names == ("b", "a")
    with pytest.raises(TypeError, match="rot90: a dim must be a name"):
        t.rot90(1, (0.0, 1))
    assert t.diag_embed(0, 0, 1).shape == (3, 3, 2)
    with pytest.raises(TypeError, match="diag_embed: a dim must be a name"):
        t.diag_embed(0, False, 1)
    out = nt.diag(nt.zeros(3), names=(np.str_("r"), "c"))
    assert out.names == ("r", "c") and type(out.names[0]) is str
