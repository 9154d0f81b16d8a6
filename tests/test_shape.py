"""Shape ops: reshape, flatten/unflatten, squeeze/unsqueeze, expand/broadcast_to/expand_as."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.shape import broadcast_to, flatten, squeeze, unflatten, unsqueeze
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


def rand(shape, names=None, requires_grad=False, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


# ----------------------------------------------------------------------------- reshape


def test_reshape_named_infers_or_takes_names():
    t, a = rand((2, 3), ("x", "y"))
    merged = t.reshape(6)
    assert merged.names == (None,)  # both dims merged: no name can be kept
    assert_close(merged, a.reshape(6))
    assert t.reshape(2, 3, 1).names == ("x", "y", None)
    out = t.reshape(3, 2, names=("p", None))
    assert out.names == ("p", None)
    assert_close(out, a.reshape(3, 2))
    v = t.view((6,), names=("flat",))
    assert v.names == ("flat",)
    assert_close(v, a.reshape(6))
    t.fill_(1.0)  # a view: the write shows in it
    assert v.numpy().tolist() == [1.0] * 6


def test_reshape_bad_sizes():
    t, _ = rand((2, 3))
    with pytest.raises(ValueError, match="only one size may be -1"):
        t.reshape(-1, -1)
    with pytest.raises(ValueError, match="cannot reshape"):
        t.reshape(4, -1)
    with pytest.raises(ValueError, match=r"sizes must be non-negative \(or -1 once, inferred\), got \(-2, -3\)"):
        t.reshape(-2, -3)


# ----------------------------------------------------------------------------- flatten


@given(data=st.data())
def test_flatten_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=4))
    a = data.draw(nts.arrays(shape))
    start = data.draw(st.integers(0, len(shape) - 1))
    end = data.draw(st.integers(start, len(shape) - 1))
    t = nt.tensor(a, names=names)
    out = t.flatten(start, end, out_name="merged")
    expected = a.reshape(shape[:start] + (-1,) + shape[end + 1:])
    assert_close(out, expected)
    assert out.names == names[:start] + ("merged",) + names[end + 1:]
    # the dims form, by name where the dims have one
    dims = [names[i] if names[i] is not None else i for i in range(start, end + 1)]
    assert_close(t.flatten(dims, "merged"), out)


@given(data=st.data())
def test_flatten_unflatten_round_trip(data):
    shape, names = data.draw(nts.named_shapes(min_dims=2, max_dims=4))
    a = data.draw(nts.arrays(shape))
    start = data.draw(st.integers(0, len(shape) - 2))
    t = nt.tensor(a, names=names)
    merged = t.flatten((start, start + 1), "merged")
    pairs = ((names[start], shape[start]), (names[start + 1], -1))
    back = merged.unflatten("merged", pairs)
    assert_close(back, t)
    assert back.names == names


def test_flatten_forms():
    t, a = rand((2, 3, 4, 5), ("n", "c", "h", "w"))
    assert flatten(t, ["c", "h", "w"], "features").names == ("n", "features")
    assert t.flatten("c", "w", "features").names == ("n", "features")
    assert t.flatten(("h", "w"), out_name="hw").names == ("n", "c", "hw")
    assert t.flatten(1, -1, "f").shape == (2, 60)
    # a single dim keeps its name; a new name renames it
    assert t.flatten(-1).names == ("n", "c", "h", "w")
    assert t.flatten(2, 2).names == ("n", "c", "h", "w")
    assert t.flatten(("h",), "height").names == ("n", "c", "height", "w")
    assert_close(t.flatten(0, -1, "all"), a.reshape(-1))


def test_flatten_unnamed_and_zero_dim():
    t, a = rand((2, 3, 4))
    assert t.flatten().names == (None,)
    assert_close(t.flatten(), a.reshape(-1))
    u, _ = rand((3, 4, 5), (None, None, "z"))
    assert u.flatten(0, 1).names == (None, "z")
    s = nt.tensor(np.float64(3.0))
    assert s.flatten().shape == (1,)
    assert s.flatten(out_name="one").names == ("one",)
    assert s.flatten(-1, 0).shape == (1,)
    with pytest.raises(nt.NamesError, match=r"no dim named 'x' in a tensor with names \(\)"):
        s.flatten("x")
    with pytest.raises(IndexError, match="out of range"):
        s.flatten(1)


def test_flatten_errors():
    t, _ = rand((2, 3, 4, 5), ("n", "c", "h", "w"))
    with pytest.raises(nt.NamesError, match=r"must be consecutive and in order in \('n', 'c', 'h', 'w'\)"):
        t.flatten(["c", "w"], "cw")
    with pytest.raises(nt.NamesError, match="must be consecutive and in order"):
        t.flatten(["h", "c"], "hc")
    with pytest.raises(nt.NamesError, match="dims cannot be empty"):
        t.flatten([], "e")
    with pytest.raises(nt.NamesError, match=r"without out_name would drop the names \('c', 'h'\)"):
        t.flatten(["c", "h"])
    with pytest.raises(nt.NamesError, match="without out_name would drop the names"):
        t.flatten()
    with pytest.raises(nt.NamesError, match="the new name 'n' is already a dim"):
        t.flatten(["c", "h"], "n")
    with pytest.raises(nt.NamesError, match="no dim named 'q'"):
        t.flatten(["c", "q"], "cq")
    with pytest.raises(ValueError, match="comes after end_dim"):
        t.flatten(2, 1, "x")
    with pytest.raises(TypeError, match="out_name was given twice"):
        t.flatten(["c", "h"], "a", out_name="b")


def test_flatten_is_a_view(backend):
    t, _ = rand((2, 3, 4), ("a", "b", "c"))
    out = t.flatten(["a", "b"], "ab")
    if backend.name == "numpy":
        assert np.shares_memory(out.numpy(), t.numpy())
        v = t._version
        out.mul_(2)  # an edit through a view is an edit of the base
        assert t._version == v + 1


# ----------------------------------------------------------------------------- unflatten


def test_unflatten_forms():
    t, a = rand((2, 12), ("n", "f"))
    out = t.unflatten("f", (("h", 3), ("d", -1)))
    assert out.names == ("n", "h", "d") and out.shape == (2, 3, 4)
    assert_close(out, a.reshape(2, 3, 4))
    assert unflatten(t, 1, {"h": 2, "d": 6}).names == ("n", "h", "d")
    assert t.unflatten("f", [["f", 4], ["g", 3]]).names == ("n", "f", "g")
    assert t.unflatten(-1, (6, 2), names=("p", None)).names == ("n", "p", None)
    u, b = rand((2, 6), ("n", None))
    out = u.unflatten(1, (2, 3))
    assert out.names == ("n", None, None)
    assert_close(out, b.reshape(2, 2, 3))


def test_unflatten_errors():
    t, _ = rand((2, 12), ("n", "f"))
    with pytest.raises(nt.NamesError, match="input is named but no names were given for the new dims"):
        t.unflatten("f", (3, 4))
    with pytest.raises(nt.NamesError, match="input is named but no names were given"):
        t.unflatten(1, (3, -1))
    with pytest.raises(ValueError, match=r"sizes \(5, -1\) don't multiply up to the size of dim 1 \('f'\) of size 12"):
        t.unflatten("f", (("a", 5), ("b", -1)))
    with pytest.raises(ValueError, match="don't multiply up to the size"):
        t.unflatten("f", (("a", 5), ("b", 3)))
    with pytest.raises(ValueError, match="only one size may be -1"):
        t.unflatten("f", (("a", -1), ("b", -1)))
    with pytest.raises(nt.NamesError, match="the new sizes must be non-empty"):
        t.unflatten("f", ())
    with pytest.raises(nt.NamesError, match="the new name 'n' is already a dim"):
        t.unflatten("f", (("n", 3), ("b", 4)))
    with pytest.raises(TypeError, match="all ints or all"):
        t.unflatten("f", (("a", 3), 4))
    with pytest.raises(TypeError, match="names= cannot be combined"):
        t.unflatten("f", (("a", 3), ("b", 4)), names=("a", "b"))
    with pytest.raises(nt.NamesError, match="got 1 names"):
        t.unflatten("f", (3, 4), names=("a",))
    z, _ = rand((2, 0))
    with pytest.raises(ValueError, match="ambiguous"):
        z.unflatten(1, (0, -1))


# ----------------------------------------------------------------------------- squeeze / unsqueeze


@given(data=st.data())
def test_squeeze_matches_numpy(data):
    ndim = data.draw(st.integers(0, 4))
    shape = tuple(data.draw(st.sampled_from([1, 1, 2, 3])) for _ in range(ndim))
    names = data.draw(nts.names(ndim))
    a = data.draw(nts.arrays(shape))
    t = nt.tensor(a, names=names)
    out = t.squeeze()
    assert_close(out, np.squeeze(a))
    assert out.names == tuple(n for n, s in zip(names, shape) if s != 1)
    ones = [i for i, s in enumerate(shape) if s == 1]
    if ones:
        i = data.draw(st.sampled_from(ones))
        dim = names[i] if names[i] is not None else i
        one = squeeze(t, dim)
        assert_close(one, np.squeeze(a, axis=i))
        assert one.names == names[:i] + names[i + 1:]


@given(data=st.data())
def test_unsqueeze_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(max_dims=3))
    a = data.draw(nts.arrays(shape))
    pos = data.draw(st.integers(-len(shape) - 1, len(shape)))
    t = nt.tensor(a, names=names)
    out = t.unsqueeze(pos, name="new")
    assert_close(out, np.expand_dims(a, pos))
    p = pos % (len(shape) + 1)
    assert out.names == names[:p] + ("new",) + names[p:]
    assert_close(out.squeeze("new"), t)
    assert unsqueeze(t, pos).names == names[:p] + (None,) + names[p:]


def test_squeeze_by_tuple_and_errors():
    t, a = rand((1, 3, 1, 2), ("a", "b", "c", None))
    assert t.squeeze(("a", 2)).names == ("b", None)
    assert t.squeeze(()) is t
    with pytest.raises(ValueError, match=r"squeeze: dim 1 \('b'\) has size 3, not 1"):
        t.squeeze("b")
    with pytest.raises(nt.NamesError, match="no dim named 'q'"):
        t.squeeze("q")
    with pytest.raises(nt.NamesError, match="name the same dim twice"):
        t.squeeze(("a", 0))


def test_unsqueeze_errors():
    t, _ = rand((2, 3), ("a", "b"))
    with pytest.raises(nt.NamesError, match="the new dim name 'a' is already a dim"):
        t.unsqueeze(0, name="a")
    with pytest.raises(TypeError, match="give its name with name="):
        t.unsqueeze("c")
    with pytest.raises(IndexError, match="out of range"):
        t.unsqueeze(4)
    with pytest.raises(nt.NamesError, match="invalid dim name"):
        t.unsqueeze(0, name="1x")


# ----------------------------------------------------------------------------- expand / broadcast_to


@given(data=st.data())
def test_expand_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(max_dims=3))
    shape = tuple(s if data.draw(st.booleans()) else 1 for s in shape)
    a = data.draw(nts.arrays(shape))
    lead = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    target = lead + tuple(data.draw(st.integers(1, 3)) if s == 1 else s for s in shape)
    t = nt.tensor(a, names=names)
    out = t.expand(*target)
    assert_close(out, np.broadcast_to(a, target))
    assert out.names == (None,) * len(lead) + names
    keep = lead + tuple(-1 if s != 1 else ts for s, ts in zip(shape, target[len(lead):]))
    assert_close(t.expand(keep), out)
    assert_close(broadcast_to(t, target), out)


def test_expand_names():
    t, a = rand((3, 1), ("x", None))
    out = t.expand(2, 3, 4, names=("b", None, "y"))
    assert out.names == ("b", "x", "y") and out.shape == (2, 3, 4)
    assert_close(out, np.broadcast_to(a, (2, 3, 4)))
    assert t.broadcast_to((2, 3, 4), names=("b", "x", None)).names == ("b", "x", None)
    other = nt.zeros(5, 3, 4, names=("b", None, "y"))
    assert t.expand_as(other).names == ("b", "x", "y")


def test_expand_errors():
    t, _ = rand((3, 1), ("x", None))
    with pytest.raises(ValueError, match=r"dim 0 has size 3, which cannot be expanded to 4"):
        t.expand(4, 5)
    with pytest.raises(ValueError, match="fewer dims than the tensor"):
        t.expand(3)
    with pytest.raises(ValueError, match="not allowed for the new leading dim 0"):
        t.expand(-1, 3, 2)
    with pytest.raises(nt.NamesError, match=r"expand: dims \('x', None\) and \('y', None\) do not match"):
        t.expand(3, 2, names=("y", None))
    with pytest.raises(nt.NamesError, match=r"expand_as: .*misaligned"):
        t.expand_as(nt.zeros(3, 2, names=(None, "x")))
    with pytest.raises(nt.NamesError, match="got 1 names"):
        t.broadcast_to((3, 2), names=("x",))
    with pytest.raises(TypeError, match="sizes must be ints"):
        t.expand(3, 2.5)


# ----------------------------------------------------------------------------- gradients


def test_gradients():
    t, _ = rand((2, 3, 4), ("a", "b", None), requires_grad=True)
    gradcheck(lambda x: x.flatten(("a", "b"), "ab"), t)
    gradcheck(lambda x: x.flatten(1, 2, "bc").unflatten("bc", (("p", 6), ("q", 2))), t)
    gradcheck(lambda x: x.unsqueeze(1, "new").squeeze("new"), t)
    gradcheck(lambda x: x.unflatten(-1, (2, 2)), t)
    gradcheck(lambda x: x.reshape(4, 6, names=("p", "q")), t)
    gradgradcheck(lambda x: x.flatten(("a", "b"), "ab") ** 2, t)
    gradgradcheck(lambda x: x.unflatten("b", (("p", 3), ("q", 1))).squeeze("q") ** 2, t)
    gradgradcheck(lambda x: x.reshape(-1, names=("all",)) ** 2, t)


def test_expand_gradients():
    t, _ = rand((3, 1), ("x", None), requires_grad=True)
    gradcheck(lambda x: x.expand(2, 3, 4, names=("b", None, "y")), t)
    gradcheck(lambda x: x.broadcast_to((3, 5)), t)
    gradgradcheck(lambda x: x.expand(2, -1, 3) ** 2, t)
    gradgradcheck(lambda x: x.expand_as(nt.zeros(4, 3, 2, names=("b", "x", None))) ** 2, t)
    x = t.detach().requires_grad_()
    x.expand(2, 3, 4, names=("b", None, "y")).sum().backward()
    assert x.grad.names == ("x", None)
    assert_close(x.grad, np.full((3, 1), 8.0))
