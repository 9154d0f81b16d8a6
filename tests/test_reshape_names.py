"""The name rule of ``reshape``/``view``: the longest common prefix and suffix of equal sizes keep their
names, the dims split or merged between them come out unnamed, ``names=`` wins."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import _names as N
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")

BSE = ("batch", "seq", "embed")


def rand(shape, names=None, requires_grad=False):
    a = np.random.default_rng(0).standard_normal(shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


@pytest.mark.parametrize("method", ["reshape", "view"])
@pytest.mark.parametrize("sizes, names", [
    ((2, 5, 2, 4), ("batch", "seq", None, None)),  # the (B, T, H, D)
    ((2, 5, 2, -1), ("batch", "seq", None, None)),
    ((2, -1, 8), BSE),  # -1 is resolved before sizes are compared
    ((10, 8), (None, "embed")),
    ((2, 40), ("batch", None)),
    ((80,), (None,)),
    ((-1,), (None,)),
    ((2, 5, 8, 1), BSE + (None,)),
    ((1, 2, 5, 8), (None,) + BSE),
    ((2, 1, 5, 8), ("batch", None, "seq", "embed")),
    ((5, 2, 8), (None, None, "embed")),  # same sizes in another order: (2, 5) -> (5, 2) is a refactoring
])
def test_reshape_keeps_unchanged_dims(method, sizes, names):
    t, a = rand((2, 5, 8), BSE)
    out = getattr(t, method)(*sizes)
    assert out.names == names
    assert_close(out, a.reshape(sizes))


@pytest.mark.parametrize("shape, names, sizes, expected", [
    ((2, 1, 3), ("a", "b", "c"), (2, 3), ("a", "c")),  # a size-1 dim removed in the middle
    ((4, 1, 4), ("a", "b", "c"), (4, 4), ("a", "c")),
    ((1, 1), ("a", "b"), (1,), ("a",)),  # the prefix wins where prefix and suffix compete
    ((1, 4), ("a", "b"), (4, 1), (None, None)),  # no size matches at its end: nothing is kept
    ((6, 1), ("a", "b"), (6, 1, 1), ("a", "b", None)),
    ((5,), ("x",), (1, 5), (None, "x")),
    ((0, 3), ("a", "b"), (0, 5), ("a", None)),
    ((), (), (1, 1), (None, None)),
    ((1, 1), ("a", "b"), (), ()),
])
def test_size_one_and_empty_dims(shape, names, sizes, expected):
    t, a = rand(shape, names)
    out = t.reshape(*sizes) if sizes else t.reshape(())
    assert out.names == expected
    assert out.shape == a.reshape(sizes).shape


def test_explicit_names_win_and_are_checked():
    t, a = rand((2, 5, 8), BSE)
    assert t.reshape(2, 5, 2, 4, names=("b", "s", "h", "d")).names == ("b", "s", "h", "d")
    assert t.view(10, 8, names=("item", None)).names == ("item", None)  # may replace a name that was kept
    with pytest.raises(nt.NamesError, match=r"reshape: got 1 names \('x',\) for a tensor with 2 dims"):
        t.reshape(10, 8, names=("x",))
    with pytest.raises(nt.NamesError, match="reshape: duplicate dim name 'x'"):
        t.reshape(10, 8, names=("x", "x"))
    with pytest.raises(nt.NamesError, match="reshape: invalid dim name '1x'"):
        t.reshape(80, names=("1x",))
    with pytest.raises(ValueError, match=r"reshape: cannot reshape \(2, 5, 8\) \(80 elements\) to \(3, -1\)"):
        t.reshape(3, -1)


def test_unnamed_stays_unnamed():
    t, a = rand((2, 6))
    out = t.reshape(3, 4)
    assert out.names is N.unnamed(2)  # the shared tuple: unnamed code stays on its fast path
    assert N.reshape(N.unnamed(2), None, (2, 6), (3, 4)) == (N.unnamed(2), ())


def test_rule_reports_dropped_names():
    assert N.reshape(BSE, None, (2, 5, 8), (10, 8)) == ((None, "embed"), ("batch", "seq"))
    assert N.reshape(BSE, None, (2, 5, 8), (2, 5, 8)) == (BSE, ())
    assert N.reshape(BSE, ("x", None), (2, 5, 8), (10, 8)) == (("x", None), ())


@st.composite
def reshapes(draw):
    shape, names = draw(nts.named_shapes(max_dims=5))
    total = math.prod(shape)
    out = []
    rest = total
    while rest > 1 and len(out) < 5:  # a random factoring of the size
        f = draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        out.append(f)
        rest //= f
    if rest > 1:
        out.append(rest)
    out = draw(st.permutations(out))
    ones = draw(st.integers(0, 2))
    for _ in range(ones):
        out.insert(draw(st.integers(0, len(out))), 1)
    return shape, names, tuple(out)


@settings(max_examples=150, deadline=None)
@given(reshapes())
def test_rule_is_sound_and_values_match(case):
    shape, names, sizes = case
    out_names, dropped = N.reshape(names, None, shape, sizes)
    assert len(out_names) == len(sizes)
    kept = [n for n in out_names if n is not None]
    assert len(kept) == len(set(kept))
    n_in, n_out = len(shape), len(sizes)
    for j, n in enumerate(out_names):
        if n is None:
            continue
        i = names.index(n)
        from_front = i == j and shape[: i + 1] == sizes[: j + 1]
        from_back = n_in - i == n_out - j and shape[i:] == sizes[j:]
        assert from_front or from_back, (names, shape, sizes, out_names)
    assert set(dropped) == {n for n in names if n is not None} - set(kept)
    t, a = rand(shape, names)
    out = t.reshape(*sizes) if sizes else t.reshape(())
    assert out.names == out_names
    assert_close(out, a.reshape(sizes))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_untouched_ends_keep_their_names(data):
    head = data.draw(st.lists(st.integers(2, 4), max_size=2))
    tail = data.draw(st.lists(st.integers(2, 4), max_size=2))
    middle = data.draw(st.sampled_from([((6,), (2, 3)), ((2, 3), (6,)), ((2, 3), (3, 2)), ((4,), (2, 2))]))
    shape, sizes = tuple(head) + middle[0] + tuple(tail), tuple(head) + middle[1] + tuple(tail)
    names = data.draw(nts.names(len(shape)))
    out, _ = N.reshape(names, None, shape, sizes)
    assert out[: len(head)] == names[: len(head)]
    assert out[len(sizes) - len(tail):] == names[len(shape) - len(tail):]
    assert set(out[len(head): len(sizes) - len(tail)]) == {None}


def test_gradients_keep_names():
    t, _ = rand((2, 3, 4), ("a", "b", "c"), requires_grad=True)
    assert gradcheck(lambda x: x.reshape(2, 12), t)
    assert gradgradcheck(lambda x: x.view(6, 4) ** 2, t)
    t.reshape(2, 2, 6).sum().backward()
    assert t.grad.names == ("a", "b", "c")


def test_view_shares_data():
    t, _ = rand((2, 6), ("a", "b"))
    v = t.view(2, 2, 3)
    assert v.names == ("a", None, None)
    t.fill_(1.0)
    assert v.numpy().tolist() == np.ones((2, 2, 3)).tolist()


def test_dry_run():
    trace = nt.trace_shapes(lambda x: x.reshape(2, 5, 2, 4), nt.spec({"batch": 2, "seq": 5, "embed": 8}))
    assert trace.result.names == ("batch", "seq", None, None)
    assert trace.result.shape == (2, 5, 2, 4)
