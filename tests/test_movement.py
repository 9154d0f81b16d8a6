"""Movement ops: flip, roll, repeat, tile, tril, triu (all keep names)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.movement import flip, repeat, roll, tile, tril, triu
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


def rand(shape, names=None, requires_grad=False, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


def _dims(data, names):
    """A random subset of dims, each addressed by name when it has one, else by a (maybe negative) int."""
    axes = data.draw(st.lists(st.integers(0, len(names) - 1), unique=True, max_size=len(names)))
    dims = tuple(names[a] if names[a] is not None else a - len(names) * data.draw(st.booleans()) for a in axes)
    return tuple(axes), dims


@given(data=st.data())
def test_flip_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = data.draw(nts.arrays(shape))
    axes, dims = _dims(data, names)
    out = nt.tensor(a, names=names).flip(dims)
    assert_close(out, np.flip(a, axis=axes) if axes else a)
    assert out.names == names


@given(data=st.data())
def test_roll_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    a = data.draw(nts.arrays(shape))
    axes, dims = _dims(data, names)
    shifts = tuple(data.draw(st.integers(-5, 5)) for _ in axes)
    t = nt.tensor(a, names=names)
    out = roll(t, shifts, dims)
    assert_close(out, np.roll(a, shifts, axis=axes))
    assert out.names == names
    k = data.draw(st.integers(-5, 5))
    assert_close(t.roll(k), np.roll(a, k))


@given(data=st.data())
def test_repeat_and_tile_match_numpy(data):
    shape, names = data.draw(nts.named_shapes(max_dims=3, max_side=3))
    a = data.draw(nts.arrays(shape))
    t = nt.tensor(a, names=names)
    extra = data.draw(st.integers(0, 2))
    reps = tuple(data.draw(st.integers(0, 3)) for _ in range(len(shape) + extra))
    out = t.repeat(*reps)
    assert_close(out, np.tile(a, reps))
    assert out.names == (None,) * extra + names
    fewer = reps[data.draw(st.integers(0, len(reps))):]
    tiled = tile(t, fewer)
    assert_close(tiled, np.tile(a, fewer))
    assert tiled.names == (None,) * max(0, len(fewer) - len(shape)) + names


@given(data=st.data())
def test_tril_triu_match_numpy(data):
    shape, names = data.draw(nts.named_shapes(min_dims=2, max_dims=4))
    a = data.draw(nts.arrays(shape))
    k = data.draw(st.integers(-3, 3))
    t = nt.tensor(a, names=names)
    lower, upper = tril(t, k), triu(t, k)
    assert_close(lower, np.tril(a, k))
    assert_close(upper, np.triu(a, k))
    assert lower.names == names and upper.names == names


def test_forms():
    t, a = rand((2, 3, 4), ("b", "r", "c"))
    assert_close(t.flip("r", "c"), np.flip(a, (1, 2)))
    assert_close(flip(t, (0, -1)), np.flip(a, (0, 2)))
    assert_close(t.flip("c"), np.flip(a, 2))
    with pytest.raises(TypeError, match="flip: missing the dims to reverse"):
        t.flip()  # PyTorch's flip needs dims (NumPy's would reverse every dim)
    assert t.flip(()) is not t and t.flip(()).tolist() == t.tolist()  # a copy, as PyTorch's
    assert_close(t.roll(1, "c"), np.roll(a, 1, 2))
    assert_close(t.roll((1,)), np.roll(a, 1))
    assert_close(repeat(t, (1, 2, 1)), np.tile(a, (1, 2, 1)))
    assert_close(t.tile(2), np.tile(a, 2))
    assert_close(t.triu(), np.triu(a))
    assert t.tile((2, 1, 1, 1)).names == (None, "b", "r", "c")


def test_errors():
    t, _ = rand((2, 3), ("r", "c"))
    with pytest.raises(nt.NamesError, match="no dim named 'q'"):
        t.flip("q")
    with pytest.raises(nt.NamesError, match="name the same dim twice"):
        t.flip("r", 0)
    with pytest.raises(ValueError, match=r"got 1 shifts \(1,\) for 2 dims"):
        t.roll(1, ("r", "c"))
    with pytest.raises(ValueError, match="without dims, shifts must be one int"):
        t.roll((1, 2))
    with pytest.raises(ValueError, match=r"got 1 repetitions \(2,\) for a tensor with 2 dims"):
        t.repeat(2)
    with pytest.raises(ValueError, match="repetitions must be non-negative"):
        t.tile((-1, 2))
    with pytest.raises(ValueError, match="tril: needs at least 2 dims"):
        nt.zeros(3).tril()
    with pytest.raises(ValueError, match="triu: needs at least 2 dims"):
        nt.zeros(3).triu()
    with pytest.raises(TypeError, match="diagonal must be an int"):
        t.tril(0.5)
    with pytest.raises(TypeError, match="triu: diagonal must be an int"):
        t.triu(True)
    with pytest.raises(TypeError, match="sizes must be ints"):
        t.repeat(2, "c")


def test_gradients():
    t, _ = rand((3, 4), ("r", None), requires_grad=True)
    gradcheck(lambda x: x.flip("r", 1), t)
    gradcheck(lambda x: x.roll((1, -2), ("r", 1)), t)
    gradcheck(lambda x: x.roll(5), t)
    gradcheck(lambda x: x.repeat(2, 1, 3), t)
    gradcheck(lambda x: x.tile((2,)), t)
    gradcheck(lambda x: x.tril(-1), t)
    gradcheck(lambda x: x.triu(np.int64(1)), t)


def test_gradgradcheck_and_gradient_names():
    t, _ = rand((3, 4), ("r", None), requires_grad=True)
    for fn in (lambda x: x.flip("r"), lambda x: x.roll((1, -2), ("r", 1)), lambda x: x.repeat(2, 1, 3),
               lambda x: x.tril(), lambda x: x.triu(-1)):
        gradgradcheck(lambda x: fn(x) ** 2, t)
        (g,) = nt.grad(fn(t).sum(), t)
        assert g.names == ("r", None)
    gradcheck(lambda x: x.tile(2), t)
    gradcheck(lambda x: x.tril(-1), t)
    gradcheck(lambda x: x.triu(1), t)
    gradgradcheck(lambda x: x.flip("r").roll(1, 1) ** 2, t)
    gradgradcheck(lambda x: x.repeat(2, 2) ** 2, t)
    gradgradcheck(lambda x: x.tril() ** 2, t)
    x = t.detach().requires_grad_()
    x.repeat(2, 1, 3).sum().backward()
    assert x.grad.names == ("r", None)
    assert_close(x.grad, np.full((3, 4), 6.0))


def test_flip_and_rot90_copy_as_in_pytorch():
    x = nt.arange(6.0).reshape(2, 3, names=("a", "b"))
    for out in (x.flip("a"), x.flip(()), nt.rot90(x, 4, ("a", "b")), nt.rot90(x, 1, ("a", "b")), nt.fliplr(x)):
        out.mul_(0)  # PyTorch's flip and rot90 copy: the write must not reach x
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
