"""Indexing: t[key] (positional and by name), isel, select, narrow, index_select, gather, masked_fill."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.indexing import gather, index_select, masked_fill
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


def rand(shape, names=None, requires_grad=False, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


def idx(values, names=None):
    return nt.tensor(np.asarray(values, dtype=np.int64), names=names)


def _one_index(data, size):
    """An int, a slice (any bounds and step, in or out of range) for a dim of ``size``."""
    if data.draw(st.booleans()):
        return data.draw(st.integers(-size, size - 1))
    bound = st.none() | st.integers(-size - 2, size + 2)
    return slice(data.draw(bound), data.draw(bound), data.draw(st.sampled_from([None, 1, 2, -1, -3])))


# ----------------------------------------------------------------------------- basic keys


@given(data=st.data())
def test_by_name_equals_positional_and_numpy(data):
    shape, _ = data.draw(nts.named_shapes(min_dims=1, max_dims=4))
    names = data.draw(nts.names(len(shape), named_fraction=1.0))
    a = data.draw(nts.arrays(shape))
    t = nt.tensor(a, names=names)
    chosen = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True))
    by_name = {names[ax]: _one_index(data, shape[ax]) for ax in chosen}
    positional = tuple(by_name.get(n, slice(None)) for n in names)
    expected_names = tuple(n for n in names if not isinstance(by_name.get(n), int))
    for out in (t[by_name], t.isel(**by_name), t[positional]):
        assert_close(out, a[positional])
        assert out.names == expected_names


@given(data=st.data())
def test_positional_ints_slices_none_ellipsis(data):
    shape, names = data.draw(nts.named_shapes(min_dims=0, max_dims=4))
    a = data.draw(nts.arrays(shape))
    t = nt.tensor(a, names=names)
    n_index = data.draw(st.integers(0, len(shape)))
    items = [_one_index(data, shape[ax]) for ax in range(n_index)]
    for _ in range(data.draw(st.integers(0, 2))):
        items.insert(data.draw(st.integers(0, len(items))), None)
    if data.draw(st.booleans()):
        items.insert(data.draw(st.integers(0, len(items))), Ellipsis)
    key = tuple(items)
    # expected names, written independently of _names.index
    expected, src = [], 0
    for k in key:
        if k is None:
            expected.append(None)
        elif k is Ellipsis:
            skip = len(shape) - n_index
            expected.extend(names[src:src + skip])
            src += skip
        else:
            if isinstance(k, slice):
                expected.append(names[src])
            src += 1
    expected.extend(names[src:])
    out = t[key]
    assert_close(out, np.asarray(a[key]))
    assert out.names == tuple(expected)


def test_single_items_and_names():
    t, a = rand((2, 3, 4), ("a", "b", "c"))
    assert t[0].names == ("b", "c")
    assert t[-1, 1:].names == ("b", "c")
    assert t[..., 0].names == ("a", "b")
    assert t[:, None].names == ("a", None, "b", "c")
    assert t[None, ..., None].names == (None, "a", "b", "c", None)
    assert t[1, 2, 3].names == () and t[1, 2, 3].item() == a[1, 2, 3]
    assert t[()].names == t[...].names == ("a", "b", "c")
    assert t[np.int64(1)].names == ("b", "c")
    assert t[{}].names == ("a", "b", "c")
    assert t[{"c": 1, 0: 0}].names == ("b",)
    assert_close(t[{"c": 1, 0: 0}], a[0, :, 1])
    assert t.isel({"b": slice(0, 2)}, a=1).names == ("b", "c")


def test_basic_indexing_gives_views():
    t, a = rand((2, 3), ("a", "b"))
    assert t[0]._version == t._version
    row, elem, by_name = t[0], t[1, 2], t[{"b": 1}]
    with nt.no_grad():
        t.fill_(5.0)
    assert row.numpy().tolist() == [5.0] * 3
    assert elem.item() == 5.0 and by_name.numpy().tolist() == [5.0, 5.0]
    elem.fill_(-1.0)  # writing into a 0-dim view writes into t
    assert t.numpy()[1, 2] == -1.0
    t[:, [0, 0]].fill_(7.0)  # advanced indexing copies
    assert t.numpy()[0, 0] == 5.0


# ----------------------------------------------------------------------------- advanced keys


@given(data=st.data())
def test_integer_array_index_names_and_values(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = data.draw(nts.arrays(shape))
    ax = data.draw(st.integers(0, len(shape) - 1))
    idx_shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    idx_names = data.draw(nts.names(len(idx_shape), pool=("i", "j")))
    i = np.random.default_rng(data.draw(st.integers(0, 99))).integers(-shape[ax], shape[ax], idx_shape)
    key = (slice(None),) * ax + (i,)
    out = nt.tensor(a, names=names)[(slice(None),) * ax + (idx(i, idx_names),)]
    assert_close(out, a[key])
    if any(n is not None for n in idx_names) or len(idx_shape) != 1:
        middle = idx_names
    else:
        middle = (names[ax],)
    assert out.names == names[:ax] + middle + names[ax + 1:]


def test_advanced_placement_follows_numpy():
    t, a = rand((3, 4, 5), ("a", "b", "c"))
    i, j = idx([[0, 2], [1, 1]], ("k", "l")), idx([[3, 0], [1, 2]], ("k", "l"))
    out = t[:, i, j]  # adjacent: the result goes where they were
    assert out.names == ("a", "k", "l")
    assert_close(out, a[:, i.numpy(), j.numpy()])
    out = t[i, :, j]  # separated: the result goes in front
    assert out.names == ("k", "l", "b")
    assert_close(out, a[i.numpy(), :, j.numpy()])
    assert t[{"b": i}].names == ("a", "k", "l", "c")
    assert t[[0, 2]].names == ("a", "b", "c")  # a lone unnamed 1-D index selects from its dim
    assert t[[[0], [2]]].names == (None, None, "b", "c")
    assert t[idx([0, 1], ("k",)), idx([1, 2])].names == ("k", "c")  # index names unify
    assert t[idx(1)].names == ("b", "c")
    assert_close(t[[]], a[np.array([], dtype=np.int64)])


def test_boolean_masks():
    t, a = rand((3, 4, 2), ("a", "b", "c"))
    out = t[t > 0]
    assert out.names == (None,)
    assert_close(out, a[a > 0])
    m = nt.tensor(a[:, :, 0] > 0, names=("a", None))
    assert t[m].names == (None, "c")
    assert_close(t[m], a[a[:, :, 0] > 0])
    mb = nt.tensor(a[0, :, 0] > 0, names=("b",))
    assert t[:, mb].names == ("a", None, "c")
    assert_close(t[{"b": mb}], a[:, a[0, :, 0] > 0])
    assert_close(t[..., np.array([True, False])], a[..., np.array([True, False])])


def test_index_errors():
    t, _ = rand((2, 3), ("a", "b"))
    with pytest.raises(nt.NamesError, match="no dim named 'z'"):
        t[{"z": 0}]
    with pytest.raises(nt.NamesError, match="no dim named 'z'"):
        t.isel(z=slice(1))
    with pytest.raises(nt.NamesError, match="twice"):
        t[{"a": 0, 0: 1}]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, [0], 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., 0, ...]
    with pytest.raises(IndexError, match=r"out of bounds.*names \('a', 'b'\)"):
        t[5]
    with pytest.raises(IndexError, match="out of bounds"):
        t[:, [0, 7]]
    with pytest.raises(TypeError, match="integer or bool"):
        t[nt.tensor([0.0, 1.0])]
    with pytest.raises(TypeError, match="Python bool"):
        t[True]
    with pytest.raises(TypeError, match="an index must be"):
        t["a"]
    with pytest.raises(TypeError, match="positional key"):
        t[{"a": None}]
    with pytest.raises(IndexError, match="must be 1-D"):
        t[{"a": nt.tensor([[True] * 3] * 2)}]
    with pytest.raises(nt.NamesError, match=r"dims \('a', 'b'\) and \('x', 'b'\) do not match: a boolean mask's names"):
        t[nt.tensor([[True] * 3] * 2, names=("x", "b"))]
    with pytest.raises(IndexError, match="does not match the shape"):
        t[nt.tensor([True, False, True])]
    with pytest.raises(nt.NamesError, match="would repeat a name"):
        t[:, idx([0, 1], ("a",))]
    with pytest.raises(nt.NamesError, match="do not match"):
        t[idx([0], ("k",)), idx([0], ("m",))]


# ----------------------------------------------------------------------------- select, narrow, index_select, gather


@given(data=st.data())
def test_select_narrow_index_select(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = data.draw(nts.arrays(shape))
    t = nt.tensor(a, names=names)
    ax = data.draw(st.integers(0, len(shape) - 1))
    dim = names[ax] if names[ax] is not None else ax
    k = data.draw(st.integers(-shape[ax], shape[ax] - 1))
    out = t.select(dim, k)
    assert_close(out, np.take(a, k, axis=ax))
    assert out.names == names[:ax] + names[ax + 1:]
    start = data.draw(st.integers(0, shape[ax]))
    length = data.draw(st.integers(0, shape[ax] - start))
    out = t.narrow(dim, start, length)
    assert_close(out, np.take(a, np.arange(start, start + length), axis=ax))
    assert out.names == names
    i = data.draw(st.lists(st.integers(-shape[ax], shape[ax] - 1), max_size=5))
    out = index_select(t, dim, i)
    assert_close(out, np.take(a, np.asarray(i, dtype=np.int64), axis=ax))
    assert out.names == names
    out = t.index_select(dim, idx(i, ("picked",)))
    assert out.names == names[:ax] + ("picked",) + names[ax + 1:]


@given(data=st.data())
def test_gather_matches_take_along_axis(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = data.draw(nts.arrays(shape))
    ax = data.draw(st.integers(0, len(shape) - 1))
    # outside dim the index may be smaller (PyTorch's rule); along dim any size
    ishape = tuple(data.draw(st.integers(1, 3)) if d == ax else data.draw(st.integers(1, s))
                   for d, s in enumerate(shape))
    i = np.random.default_rng(data.draw(st.integers(0, 99))).integers(0, shape[ax], ishape)
    inames = tuple(None if d != ax or not data.draw(st.booleans()) else "k" for d in range(len(shape)))
    if "k" in names:
        inames = (None,) * len(shape)
    out = gather(nt.tensor(a, names=names), names[ax] if names[ax] else ax, idx(i, inames))
    crop = tuple(slice(None) if d == ax else slice(0, s) for d, s in enumerate(ishape))
    assert_close(out, np.take_along_axis(a[crop], i, axis=ax))
    assert out.names == tuple(inames[d] or names[d] for d in range(len(shape)))


def test_select_narrow_index_select_gather_errors():
    t, _ = rand((2, 3), ("a", "b"))
    with pytest.raises(IndexError, match="out of range"):
        t.select("b", 3)
    with pytest.raises(nt.NamesError, match="no dim named 'c'"):
        t.select("c", 0)
    with pytest.raises(IndexError, match="do not fit"):
        t.narrow("b", 2, 2)
    with pytest.raises(TypeError, match="narrow: start and length must be ints, got float 1.0"):
        t.narrow("b", 1.0, 1)
    with pytest.raises(IndexError, match="must be a 1-D integer"):
        t.index_select("b", [[0]])
    with pytest.raises(nt.NamesError, match="would repeat a name"):
        t.index_select("b", idx([0], ("a",)))
    with pytest.raises(IndexError, match="out of bounds"):
        t.index_select("b", [3])
    with pytest.raises(ValueError, match="same number of dims"):
        t.gather("b", idx([0, 1]))
    with pytest.raises(nt.NamesError, match="do not match the input's"):
        t.gather("b", idx([[0], [1]], ("x", None)))
    with pytest.raises(IndexError, match="larger than the input's"):
        t.gather("b", idx([[0], [1], [0]]))
    with pytest.raises(TypeError, match="must be an integer tensor"):
        t.gather("b", nt.tensor([[True], [False]]))
    with pytest.raises(TypeError, match="integer or bool"):
        t.gather("b", nt.tensor([[0.0], [1.0]]))


# ----------------------------------------------------------------------------- masked_fill


@given(data=st.data())
def test_masked_fill_matches_where(data):
    (shape, names), (mshape, mnames) = data.draw(nts.broadcastable_names(max_dims=3))
    mshape = tuple(m if m == 1 else s for m, s in zip(mshape, shape[len(shape) - len(mshape):]))
    a = data.draw(nts.arrays(shape))
    m = data.draw(nts.arrays(mshape, dtype="bool"))
    try:
        expected_names = nt.tensor(a, names=names).add(nt.tensor(m, names=mnames)).names
    except nt.NamesError:
        return
    out = masked_fill(nt.tensor(a, names=names), nt.tensor(m, names=mnames), -1.5)
    assert_close(out, np.where(m, -1.5, a))
    assert out.names == expected_names


def test_masked_fill_values_and_errors():
    t, a = rand((2, 3), (None, "b"))
    m = nt.tensor(a > 0, names=("a", None))
    out = t.masked_fill(m, nt.tensor(0.5, dtype="float64"))
    assert out.names == ("a", "b")
    assert_close(out.rename(None), np.where(a > 0, 0.5, a))
    f32 = nt.tensor(a, dtype="float32").masked_fill(m, nt.tensor(9.0, dtype="float64"))
    assert f32.dtype == nt.float32
    assert nt.tensor([1, 2, 3]).masked_fill(np.array([True, False, True]), 0).numpy().tolist() == [0, 2, 0]
    with pytest.raises(nt.NamesError, match="do not match"):
        t.masked_fill(nt.tensor(a > 0, names=(None, "x")), 0.0)
    with pytest.raises(ValueError, match="more dims"):
        t.masked_fill(nt.tensor(np.ones((1, 2, 3), bool)), 0.0)
    with pytest.raises(ValueError, match="does not broadcast onto"):
        t[:1].masked_fill(nt.tensor(a > 0), 0.0)
    with pytest.raises(TypeError, match="bool tensor"):
        t.masked_fill(nt.tensor(a), 0.0)
    with pytest.raises(ValueError, match="0-dim tensor"):
        t.masked_fill(m, nt.tensor([1.0]))
    with pytest.raises(TypeError, match="cannot write a float"):
        nt.tensor([1, 2]).masked_fill(nt.tensor([True, False]), 0.5)


# ----------------------------------------------------------------------------- gradients


def test_gradcheck_basic_getitem():
    x, _ = rand((3, 4, 2), ("a", "b", "c"), requires_grad=True)
    gradcheck(lambda x: x[1:, ::-2], x)
    gradcheck(lambda x: x[{"b": slice(1, 3), "a": 0}], x)
    gradcheck(lambda x: x[None, 1, ..., None, 0], x)
    gradcheck(lambda x: x[2, 3, 1], x)


def test_gradcheck_advanced_getitem_with_repeats():
    x, _ = rand((3, 4, 2), ("a", "b", "c"), requires_grad=True)
    i = idx([[0, 2], [2, 2]], ("k", "l"))
    gradcheck(lambda x: x[:, i], x)
    gradcheck(lambda x: x[i, :, idx([[0, 1], [1, 1]])], x)
    gradcheck(lambda x: x[x.detach() > 0], x)
    gradcheck(lambda x: x[{"a": [0, 0, 1]}], x)
    x1, _ = rand((3,), ("a",), requires_grad=True)
    x1[[0, 0, 2]].sum().backward()
    assert x1.grad.names == ("a",)
    assert x1.grad.numpy().tolist() == [2.0, 0.0, 1.0]


def test_gradcheck_select_narrow_index_select_gather_masked_fill():
    x, _ = rand((3, 4, 2), ("a", "b", "c"), requires_grad=True)
    gradcheck(lambda x: x.select("b", -1), x)
    gradcheck(lambda x: x.narrow("b", 1, 2), x)
    gradcheck(lambda x: x.index_select("b", idx([0, 0, 3], ("k",))), x)
    gradcheck(lambda x: x.gather("b", idx([[[0, 1]], [[3, 3]], [[0, 0]]], ("a", "k", "c"))), x)
    v = nt.tensor(2.0, dtype="float64", requires_grad=True)
    m = nt.tensor(np.random.default_rng(1).random((4, 1)) > 0.5, names=("b", None))
    gradcheck(lambda x, v: x.masked_fill(m, v), x, v)
    gradcheck(lambda v: x.detach().masked_fill(m, v), v)  # only the value needs a gradient
    y, _ = rand((4, 2), (None, None), requires_grad=True)
    gradcheck(lambda y: y.masked_fill(m, 0.0), y)  # gradient keeps y's names, not the unified ones


def test_gradgradcheck():
    x, _ = rand((3, 4), ("a", "b"), requires_grad=True)
    gradgradcheck(lambda x: x[0, 1:] ** 2, x)
    gradgradcheck(lambda x: x[:, idx([[0, 2], [2, 2]])] ** 2, x)
    gradgradcheck(lambda x: x.gather("b", idx([[0], [3], [3]])) ** 2, x)
    gradgradcheck(lambda x: x.index_select("a", [2, 2]) ** 2, x)
    gradgradcheck(lambda x: x.masked_fill(x.detach() > 0, 1.0) ** 2, x)
    v = nt.tensor(2.0, dtype="float64", requires_grad=True)
    gradgradcheck(lambda x, v: x.masked_fill(nt.tensor(np.array([True, False, True, False]), names=("b",)), v) ** 2,
                  x, v)
    gradgradcheck(lambda x: x.select("b", 2) ** 2, x)
    gradgradcheck(lambda x: x.narrow("b", 1, 2) ** 2, x)
    gradgradcheck(lambda x: x[{"a": [0, 0]}] ** 2, x)


def test_an_empty_ellipsis_still_separates_index_arrays():
    a = np.arange(60.0).reshape(3, 4, 5)
    t = nt.tensor(a, names=("a", "b", "c"))
    i = nt.tensor(np.array([0, 1]))
    out = t[:, i, ..., i]  # NumPy: the '...' covers no dim but makes the indices non-adjacent
    assert out.shape == a[:, [0, 1], ..., [0, 1]].shape == (2, 3)
    assert out.names == (None, "a")
    np.testing.assert_array_equal(out.numpy(), a[:, [0, 1], ..., [0, 1]])
    x = nt.tensor(a, names=("a", "b", "c"), dtype=nt.float64, requires_grad=True)
    assert gradcheck(lambda x: x[:, i, ..., i], x)
