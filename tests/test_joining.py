"""Joining and splitting: cat, stack, split, chunk, unbind, pad."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.joining import cat, chunk, concat, pad, split, stack, unbind
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


def rand(shape, names=None, requires_grad=False, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


def _some_none(data, names):
    """``names`` with some entries dropped to None (still unifies with ``names``)."""
    return tuple(n if data.draw(st.booleans()) else None for n in names)


# ----------------------------------------------------------------------------- cat


@given(data=st.data())
def test_cat_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    ax = data.draw(st.integers(0, len(shape) - 1))
    k = data.draw(st.integers(1, 3))
    arrays, tensors, all_names = [], [], []
    for _ in range(k):
        s = shape[:ax] + (data.draw(st.integers(0, 3)),) + shape[ax + 1:]
        a = data.draw(nts.arrays(s))
        own = _some_none(data, names)
        arrays.append(a)
        all_names.append(own)
        tensors.append(nt.tensor(a, names=own))
    expected_names = tuple(
        next((n[i] for n in all_names if n[i] is not None), None) for i in range(len(shape))
    )
    dim = expected_names[ax] if expected_names[ax] is not None else ax - len(shape)
    out = cat(tensors, dim)
    assert_close(out, np.concatenate(arrays, axis=ax))
    assert out.names == expected_names


def test_cat_by_name_and_alias():
    a, x = rand((2, 3), ("b", "f"))
    b, y = rand((2, 4), (None, "f"), seed=1)
    out = concat([a, b], "f")
    assert out.names == ("b", "f")
    assert_close(out, np.concatenate([x, y], axis=1))
    assert nt.ops.joining.cat((a,), "b").names == ("b", "f")


def test_cat_errors():
    a, _ = rand((2, 3), ("b", "f"))
    with pytest.raises(nt.NamesError, match=r"cat: the tensors' names must match dim by dim .*\('f', 'b'\)"):
        cat([a, nt.zeros(2, 3, names=("f", "b"))], 0)
    with pytest.raises(nt.NamesError, match="must match dim by dim"):
        cat([a, nt.zeros(2, 3, names=(None, "b"))], 0)
    with pytest.raises(ValueError, match="same number of dims"):
        cat([a, nt.zeros(3)], 0)
    with pytest.raises(ValueError, match="zero-dimensional tensors cannot be concatenated"):
        cat([nt.tensor(1.0), nt.tensor(2.0)])
    with pytest.raises(ValueError, match=r"sizes must match except along dim 1 \('f'\)"):
        cat([a, nt.zeros(3, 3, names=("b", "f"), dtype=nt.float64)], "f")
    with pytest.raises(ValueError, match="non-empty sequence"):
        cat([])
    with pytest.raises(TypeError, match="not a Tensor"):
        cat([a, np.zeros((2, 3))])
    with pytest.raises(TypeError, match="a single Tensor"):
        cat(a)
    with pytest.raises(nt.NamesError, match="no dim named 'q'"):
        cat([a, a], "q")


# ----------------------------------------------------------------------------- stack / unbind


@given(data=st.data())
def test_stack_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(max_dims=3))
    k = data.draw(st.integers(1, 3))
    arrays = [data.draw(nts.arrays(shape)) for _ in range(k)]
    tensors = [nt.tensor(a, names=_some_none(data, names) if i else names) for i, a in enumerate(arrays)]
    pos = data.draw(st.integers(-len(shape) - 1, len(shape)))
    out = stack(tensors, pos)
    assert_close(out, np.stack(arrays, axis=pos))
    p = pos % (len(shape) + 1)
    assert out.names == names[:p] + (None,) + names[p:]
    named = stack(tensors, "new")
    assert_close(named, np.stack(arrays))
    assert named.names == ("new",) + names
    # unbind undoes stack
    back = unbind(named, "new")
    assert len(back) == k
    for b, a in zip(back, arrays):
        assert_close(b, a)
        assert b.names == names


@given(data=st.data())
def test_unbind_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = data.draw(nts.arrays(shape))
    ax = data.draw(st.integers(0, len(shape) - 1))
    t = nt.tensor(a, names=names)
    pieces = t.unbind(names[ax] if names[ax] is not None else ax)
    assert len(pieces) == shape[ax]
    for i, p in enumerate(pieces):
        assert_close(p, np.take(a, i, axis=ax))
        assert p.names == names[:ax] + names[ax + 1:]
    assert_close(stack(pieces, ax).rename(*names), t)


def test_stack_errors():
    a, _ = rand((2, 3), ("b", "f"))
    with pytest.raises(nt.NamesError, match="the new dim name 'b' is already a dim"):
        stack([a, a], "b")
    with pytest.raises(nt.NamesError, match="must match dim by dim"):
        stack([a, a.rename("f", "b")])
    with pytest.raises(ValueError, match="same shape"):
        stack([a, nt.zeros(2, 4, names=("b", "f"), dtype=nt.float64)])
    with pytest.raises(IndexError, match="out of range"):
        stack([a, a], 4)
    with pytest.raises(nt.NamesError, match="invalid dim name"):
        stack([a, a], "1x")
    with pytest.raises(nt.NamesError, match="no dim named 'q'"):
        a.unbind("q")


def test_iteration_unbinds_first_dim():
    t, a = rand((3, 2), ("b", "f"))
    rows = list(t)
    assert len(rows) == 3 and rows[1].names == ("f",)
    assert_close(rows[1], a[1])


# ----------------------------------------------------------------------------- split / chunk


@given(data=st.data())
def test_split_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3, max_side=6))
    a = data.draw(nts.arrays(shape))
    ax = data.draw(st.integers(0, len(shape) - 1))
    n = shape[ax]
    t = nt.tensor(a, names=names)
    dim = names[ax] if names[ax] is not None else ax
    size = data.draw(st.integers(1, n + 1))
    pieces = t.split(size, dim)
    cuts = list(range(size, n, size))
    expected = np.split(a, cuts, axis=ax)
    assert len(pieces) == len(expected)
    for p, e in zip(pieces, expected):
        assert_close(p, e)
        assert p.names == names
    assert_close(cat(pieces, dim), t)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    sections = [hi - lo for lo, hi in zip([0] + cuts, cuts + [n])]
    pieces = split(t, sections, dim)
    expected = np.split(a, cuts, axis=ax)
    assert len(pieces) == len(expected)
    for p, e in zip(pieces, expected):
        assert_close(p, e)


def test_chunk_sizes_like_pytorch():
    t, a = rand((5, 6), ("r", "c"))
    assert [p.shape[0] for p in t.chunk(3, "r")] == [2, 2, 1]
    assert [p.shape[1] for p in chunk(t, 4, "c")] == [2, 2, 2]  # fewer pieces, as in PyTorch
    assert [p.shape[1] for p in t.chunk(6, 1)] == [1] * 6
    pieces = t.chunk(2, "c")
    assert all(p.names == ("r", "c") for p in pieces)
    assert_close(pieces[1], a[:, 3:])
    empty = nt.zeros(0, 2, names=("r", "c"))
    assert [p.shape for p in empty.chunk(3)] == [(0, 2)] * 3
    assert [p.shape for p in empty.split(2)] == [(0, 2)]


def test_split_is_one_node_of_views(backend):
    t, _ = rand((6, 2), ("r", "c"), requires_grad=True)
    pieces = t.split(2, "r")
    assert len({id(p.grad_fn) for p in pieces}) == 1
    if backend.name == "numpy":
        base = t.detach().numpy()
        assert all(np.shares_memory(p.detach().numpy(), base) for p in pieces)
    x = nt.zeros(4, 2)
    v = x._version
    x.split(2)[1].add_(1)  # an edit through a view is an edit of the base
    assert x._version == v + 1
    row = x.unbind(0)[3]
    row.fill_(2.0)
    assert x._version == v + 2 and x.numpy()[3].tolist() == [2.0, 2.0]


def test_split_errors():
    t, _ = rand((5, 3), ("r", "c"))
    with pytest.raises(ValueError, match=r"sections \(2, 2\) must be non-negative and add up to the size of dim 0 \('r'\)"):
        t.split([2, 2], "r")
    with pytest.raises(ValueError, match="split_size must be positive"):
        t.split(0, "r")
    with pytest.raises(TypeError, match="must be an int or a sequence"):
        t.split(1.5)
    with pytest.raises(TypeError, match="split: sizes must be ints, got float 2.5"):
        t.split([2.5, 2.5], "r")
    with pytest.raises(ValueError, match="chunks must be a positive int"):
        t.chunk(0)
    with pytest.raises(nt.NamesError, match="no dim named 'q'"):
        t.chunk(2, "q")


# ----------------------------------------------------------------------------- pad


@given(data=st.data())
def test_pad_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = data.draw(nts.arrays(shape))
    t = nt.tensor(a, names=names)
    widths = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape]
    keys = [n if n is not None else i for i, n in enumerate(names)]
    value = data.draw(st.sampled_from([0, 1.5, -2.0]))
    out = pad(t, dict(zip(keys, widths)), value=value)
    assert_close(out, np.pad(a, widths, constant_values=value))
    assert out.names == names
    flat = [w for pair in reversed(widths) for w in pair]
    assert_close(t.pad(flat, value), out)


def test_pad_forms_and_crop():
    t, a = rand((3, 4), ("seq", "feat"))
    assert_close(t.pad({"seq": (0, 2), "feat": 1}), np.pad(a, ((0, 2), (1, 1))))
    assert_close(t.pad((1, 2)), np.pad(a, ((0, 0), (1, 2))))  # PyTorch's flat form: the last dim first
    assert_close(t.pad({"feat": (-1, 2)}), np.pad(a[:, 1:], ((0, 0), (0, 2))))
    assert_close(t.pad({-2: (1, -2)}), np.pad(a[:1], ((1, 0), (0, 0))))
    same = t.pad({})  # a new tensor, as PyTorch's F.pad(x, ()) gives
    assert same is not t and not np.shares_memory(same.numpy(), t.numpy())
    assert_close(same, a)


def test_a_crop_or_a_pad_by_nothing_is_an_array_of_its_own():
    # PyTorch's pad returns a new tensor: a write into the result leaves the input alone
    for widths in ({"w": (0, 0)}, {"w": (-1, 0)}, {"h": (-1, -1), "w": (0, 0)}):
        x = nt.tensor(np.arange(12.0).reshape(3, 4), names=("h", "w"))
        y = nt.pad(x, widths)
        y[0] = -1.0
        assert (x.numpy() == np.arange(12.0).reshape(3, 4)).all(), widths
        assert (y.numpy()[0] == -1.0).all()


def test_pad_errors():
    t, _ = rand((3, 4), ("seq", "feat"))
    with pytest.raises(nt.NamesError, match="no dim named 'time'"):
        t.pad({"time": (1, 1)})
    with pytest.raises(nt.NamesError, match="name the same dim twice"):
        t.pad({"seq": 1, 0: 1})
    with pytest.raises(ValueError, match=r"crop more than the 4 entries of dim 1 \('feat'\)"):
        t.pad({"feat": (-3, -2)})
    with pytest.raises(ValueError, match="needs an even number of widths"):
        t.pad((1, 2, 3))
    with pytest.raises(ValueError, match="must be \\(before, after\\) or one int"):
        t.pad({"seq": (1, 2, 3)})
    with pytest.raises(TypeError, match="pad widths must be ints"):
        t.pad({"seq": (1.5, 0)})
    with pytest.raises(TypeError, match="value must be a number"):
        t.pad({"seq": 1}, value="x")
    with pytest.raises(TypeError, match=r"pad: cannot pad a tensor of dtype nt.int64 with the float value 1.5"):
        nt.tensor([1, 2]).pad((1, 1), value=1.5)
    assert nt.tensor([1, 2]).pad((1, 0), value=7).numpy().tolist() == [7, 1, 2]
    with pytest.raises(TypeError, match="pad must be a dict"):
        t.pad(3)


# ----------------------------------------------------------------------------- gradients


def test_cat_and_stack_gradients():
    a, _ = rand((2, 3), ("b", "f"), requires_grad=True)
    b, _ = rand((2, 2), (None, "f"), requires_grad=True, seed=1)
    gradcheck(lambda x, y: cat([x, y, x], "f"), a, b)
    gradgradcheck(lambda x, y: cat([x, y], "f") ** 2, a, b)
    c, _ = rand((2, 3), (None, None), requires_grad=True, seed=2)
    gradcheck(lambda x, y: stack([x, y], "new"), a, c)
    gradgradcheck(lambda x, y: stack([x, y], 1) ** 2, a, c)
    # each input's gradient carries its own names, not the unified ones
    out = cat([a, b], "f")
    out.sum().backward()
    assert a.grad.names == ("b", "f") and b.grad.names == (None, "f")


def test_split_chunk_unbind_gradients():
    t, _ = rand((5, 3), ("r", "c"), requires_grad=True)
    gradcheck(lambda x: x.split([2, 3], "r"), t)
    gradcheck(lambda x: x.chunk(2, "c"), t)
    gradcheck(lambda x: x.unbind("c"), t)
    gradgradcheck(lambda x: tuple(p ** 2 for p in x.split(2, "r")), t)
    gradgradcheck(lambda x: tuple(p ** 2 for p in x.unbind("r")), t)
    # a piece that is not used gets a zero gradient
    x = t.detach().requires_grad_()
    first, _ = x.split([2, 3], "r")
    (first * 2).sum().backward()
    assert x.grad.names == ("r", "c")
    assert_close(x.grad, np.concatenate([np.full((2, 3), 2.0), np.zeros((3, 3))]))


def test_pad_gradients():
    t, _ = rand((3, 4), ("seq", None), requires_grad=True)
    gradcheck(lambda x: x.pad({"seq": (1, 2), 1: (-1, 1)}, value=3.0), t)
    gradgradcheck(lambda x: x.pad({"seq": (2, -1)}) ** 2, t)


@pytest.mark.parametrize("join", [cat, stack])
def test_cat_and_stack_promote_dtypes_as_arithmetic_does(join):
    np_join = np.concatenate if join is cat else np.stack
    pairs = [(nt.int64, nt.float32), (nt.uint8, nt.int8), (nt.float32, nt.float64), (nt.bool_, nt.int32),
             (nt.float32, nt.complex64), (nt.int16, nt.uint16)]
    for da, db in pairs:
        a = nt.ones(2, 3, names=("b", "f"), dtype=da)
        b = nt.zeros(2, 3, names=("b", "f"), dtype=db)
        out = join([a, b], 0)
        expected = np_join([np.ones((2, 3), dtype=da.name), np.zeros((2, 3), dtype=db.name)], 0)
        assert out.dtype.name == expected.dtype.name == (a + b).dtype.name  # NumPy 2's rules, as a + b
        np.testing.assert_array_equal(out.numpy(), expected)
    x = nt.randn(2, 3, names=("b", "f"), dtype=nt.float32, requires_grad=True)
    y = nt.randn(2, 3, names=("b", "f"), dtype=nt.float64, requires_grad=True)
    join([x, y], 0).sum().backward()
    assert x.grad.dtype == nt.float32 and y.grad.dtype == nt.float64  # each gradient in its own dtype
