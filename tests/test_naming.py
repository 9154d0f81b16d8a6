"""Naming and reordering: rename, refine_names, align_to/align_as/nt.align, permute, transpose, .mT, .T:
names, values against NumPy, views, errors and gradients."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def _t(a, names, requires_grad=False):
    return nt.tensor(a, names=names, requires_grad=requires_grad)


def _nchw():
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    return _t(a, ("N", "C", "H", "W")), a


def _shares(x, y):
    return np.shares_memory(x.numpy(), y.numpy())


# ----------------------------------------------------------------------------- rename


def test_rename_positional_and_ellipsis():
    t, a = _nchw()
    assert t.rename("batch", "C", "H", "W").names == ("batch", "C", "H", "W")
    assert t.rename(..., "height", "width").names == ("N", "C", "height", "width")
    assert t.rename("batch", "...", "width").names == ("batch", "C", "H", "width")
    assert t.rename("N", "C", "H", ..., "W").names == t.names
    assert t.rename(["a", "b", "c", "d"]).names == ("a", "b", "c", "d")  # one sequence works too
    out = t.rename("a", None, "c", None)
    assert out.names == ("a", None, "c", None)
    assert_close(out, a)


def test_rename_mapping_and_none():
    t, a = _nchw()
    assert t.rename(N="batch", C="chan").names == ("batch", "chan", "H", "W")
    assert t.rename(N="C", C="N").names == ("C", "N", "H", "W")
    assert t.rename(H=None).names == ("N", "C", None, "W")
    out = t.rename(None)
    assert out.names == (None,) * 4
    assert not out.is_named
    assert_close(out, a)


def test_rename_is_a_view(backend):
    t, _ = _nchw()
    out = t.rename(N="batch")
    if backend.name == "numpy":
        assert out.array is t.array
    assert _shares(out, t)


def test_rename_errors():
    t, _ = _nchw()
    with pytest.raises(nt.NamesError, match="rename: give either positional names .* or a mapping"):
        t.rename("a", ..., N="b")
    with pytest.raises(nt.NamesError, match=re.escape("rename: cannot rename 'B' to 'batch': no dim named 'B' in "
                                                      "('N', 'C', 'H', 'W')")):
        t.rename(B="batch")
    with pytest.raises(nt.NamesError, match=re.escape("rename: got 2 names ('a', 'b') for a tensor with 4 dims")):
        t.rename("a", "b")
    with pytest.raises(nt.NamesError, match="rename: at most one '...'"):
        t.rename(..., "x", ...)
    with pytest.raises(nt.NamesError, match="rename: duplicate dim name 'C'"):
        t.rename(N="C")
    with pytest.raises(nt.NamesError, match="rename: invalid dim name '2d'"):
        t.rename(N="2d")


# ----------------------------------------------------------------------------- refine_names


def test_refine_names():
    a = np.zeros((2, 3, 5, 7, 11))
    t = _t(a, None)
    assert t.refine_names("A", ..., "B", "C").names == ("A", None, None, "B", "C")
    assert t.refine_names(("A", ...)).names == ("A", None, None, None, None)
    p = _t(np.zeros((2, 3)), ("N", None))
    assert p.refine_names("N", "C").names == ("N", "C")
    assert p.refine_names(..., "C").names == ("N", "C")
    assert p.refine_names("N", None).names == ("N", None)


def test_refine_names_errors():
    p = _t(np.zeros((2, 3)), ("N", None))
    with pytest.raises(nt.NamesError, match=re.escape("refine_names: cannot refine ('N', None) to ('D', 'C'): "
                                                      "'N' is different from 'D' at dim 0")):
        p.refine_names("D", "C")
    with pytest.raises(nt.NamesError, match=re.escape("'N' is more specific than None at dim 0")):
        p.refine_names(None, "C")
    with pytest.raises(nt.NamesError, match=re.escape("2 dims but 3 names")):
        p.refine_names("N", "C", "H")
    with pytest.raises(nt.NamesError, match="refine_names: duplicate dim name 'N'"):
        p.refine_names("N", "N")


# ----------------------------------------------------------------------------- align_to / align_as / align


def test_align_to_permutes_and_inserts():
    a = np.random.default_rng(0).normal(size=(7, 3, 5, 2))
    t = _t(a, ("N", "H", "W", "C"))
    out = t.align_to("...", "W", "N")
    assert out.names == ("H", "C", "W", "N")
    assert out.shape == (3, 2, 5, 7)
    assert_close(out, a.transpose(1, 3, 2, 0))
    out = t.align_to("N", ..., "C", "D", "H", "W")
    assert out.names == ("N", "C", "D", "H", "W")
    assert out.shape == (7, 2, 1, 3, 5)
    assert_close(out, a.transpose(0, 3, 1, 2)[:, :, None])
    out = t.align_to("x", "N", "H", "W", "C", "y")
    assert out.shape == (1, 7, 3, 5, 2, 1)
    assert_close(out, a[None, ..., None])
    assert t.align_to(["C", ...]).names == ("C", "N", "H", "W")


def test_align_to_partially_named_with_ellipsis():
    a = np.random.default_rng(0).normal(size=(2, 3, 4))
    t = _t(a, (None, None, "C"))
    out = t.align_to("C", ...)
    assert out.names == ("C", None, None)
    assert_close(out, a.transpose(2, 0, 1))


def test_align_to_errors():
    t = _t(np.zeros((2, 3)), (None, "C"))
    with pytest.raises(nt.NamesError, match=re.escape("align_to: dim 0 of (None, 'C') is unnamed")):
        t.align_to("C", "N")
    n = _t(np.zeros((2, 3)), ("N", "C"))
    with pytest.raises(nt.NamesError, match=re.escape("align_to: dim 'N' of ('N', 'C') is not in the order ('C',)")):
        n.align_to("C")
    with pytest.raises(nt.NamesError, match="contains None"):
        n.align_to("C", None, ...)
    with pytest.raises(nt.NamesError, match="lists a name twice"):
        n.align_to("C", "C", "N")


@fixture_ok
@given(st.data())
def test_align_to_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(max_dims=4))
    a = data.draw(nts.arrays(shape))
    named = [n for n in names if n is not None]
    front = tuple(data.draw(st.lists(st.sampled_from(named), unique=True))) if named else ()
    extra = data.draw(st.sampled_from(["new1", None]))
    order = (extra,) + front + (...,) if extra else front + (...,)
    out = _t(a, names).align_to(*order)
    perm = [names.index(n) for n in front] + [i for i, n in enumerate(names) if n not in front]
    expected = a.transpose(perm) if perm else a
    if extra:
        expected = expected[None]
    assert out.names == ((extra,) if extra else ()) + tuple(names[p] for p in perm)
    assert_close(out, expected)


def test_align_as():
    scale = _t(np.array([1.0, 2.0, 3.0]), ("C",))
    for names, shape in ((("N", "C", "H", "W"), (2, 3, 4, 5)), (("N", "H", "W", "C"), (2, 4, 5, 3))):
        x = _t(np.ones(shape), names)
        s = scale.align_as(x)
        assert s.names == names
        assert s.shape == tuple(3 if n == "C" else 1 for n in names)
        assert (x * s).names == names
    with pytest.raises(TypeError, match="align_as: expected a Tensor"):
        scale.align_as(("C",))
    with pytest.raises(nt.NamesError, match=re.escape("align_as: dim 'C' of ('C',) is not a dim of ('N',); rename it, "
                                                      "or use align_to with '...'")):
        scale.align_as(_t(np.ones(2), ("N",)))


def test_align_as_partially_named_other():
    """The fix a misalignment error suggests (b.align_as(a)) works when a has unnamed dims too."""
    x = _t(np.ones((3, 4, 2)), ("a", None, "b"))
    y = _t(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), ("a", "b"))
    with pytest.raises(nt.NamesError, match="align_as"):
        x + y
    aligned = y.align_as(x)
    assert aligned.names == ("a", None, "b")
    assert aligned.shape == (3, 1, 2)
    assert_close(x + aligned, np.ones((3, 4, 2)) + y.numpy()[:, None, :])
    with pytest.raises(nt.NamesError, match=re.escape("align_as: dim 0 of (None, 'b') is unnamed")):
        _t(np.ones((3, 2)), (None, "b")).align_as(x)
    with pytest.raises(nt.NamesError, match=re.escape("align_as: dim 'z' of ('z',) is not a dim of ('a', None, 'b')")):
        _t(np.ones(3), ("z",)).align_as(x)


def test_nt_align():
    x = _t(np.ones((2, 3)), ("batch", "feat"))
    y = _t(np.arange(3.0), ("feat",))
    z = _t(np.arange(4.0), ("head",))
    ax, ay, az = nt.align(x, y, z)
    for t in (ax, ay, az):
        assert t.names == ("batch", "feat", "head")
    assert (ax.shape, ay.shape, az.shape) == ((2, 3, 1), (1, 3, 1), (1, 1, 4))
    assert_close(ay, np.arange(3.0)[None, :, None])
    assert [t.names for t in nt.align([y, x])] == [("batch", "feat")] * 2
    with pytest.raises(nt.NamesError, match="align: the tensors order their shared dims differently"):
        nt.align(x, _t(np.ones((3, 2)), ("feat", "batch")))
    with pytest.raises(nt.NamesError, match=re.escape("align: aligns by name, but dim 0 of (None,) is unnamed")):
        nt.align(x, _t(np.ones(3), (None,)))
    with pytest.raises(TypeError, match="align: expected Tensors, got ndarray"):
        nt.align(x, np.ones(3))


# ----------------------------------------------------------------------------- permute / transpose / mT / T


@fixture_ok
@given(st.data())
def test_permute_matches_numpy(data):
    shape, names = data.draw(nts.named_shapes(max_dims=4))
    a = data.draw(nts.arrays(shape))
    perm = data.draw(st.permutations(range(len(shape))))
    t = _t(a, names)
    by_int = t.permute(*perm)
    keys = [names[p] if names[p] is not None else p for p in perm]
    by_name = t.permute(keys)
    for out in (by_int, by_name):
        assert out.names == tuple(names[p] for p in perm)
        assert_close(out, a.transpose(perm) if perm else a)


def test_permute_with_ellipsis_and_errors():
    t, a = _nchw()
    out = t.permute("W", ...)
    assert out.names == ("W", "N", "C", "H")
    assert_close(out, a.transpose(3, 0, 1, 2))
    assert t.permute(..., "N").names == ("C", "H", "W", "N")
    with pytest.raises(nt.NamesError, match=re.escape("permute: got 2 dims ('W', 'N') for a tensor with 4 dims")):
        t.permute("W", "N")
    with pytest.raises(nt.NamesError, match="permute: '...' can only be combined with names"):
        t.permute(0, ...)
    with pytest.raises(nt.NamesError, match=re.escape("permute: no dims named ['Z']")):
        t.permute("Z", ...)
    with pytest.raises(nt.NamesError, match="name the same dim twice"):
        t.permute("N", "N", "C", "H")


def test_transpose_mT_T():
    a = np.random.default_rng(0).normal(size=(2, 3, 4))
    t = _t(a, ("b", None, "k"))
    out = t.transpose("b", "k")
    assert out.names == ("k", None, "b")
    assert_close(out, a.transpose(2, 1, 0))
    assert_close(t.transpose(0, -2), a.transpose(1, 0, 2))
    assert t.transpose(0, -2).names == (None, "b", "k")
    assert t.mT.names == ("b", "k", None)
    assert_close(t.mT, np.swapaxes(a, -1, -2))
    assert t.T.names == ("k", None, "b")
    assert_close(t.T, a.transpose(2, 1, 0))
    v = _t(np.arange(3.0), ("x",))
    assert v.T.names == ("x",)
    with pytest.raises(ValueError, match="mT: needs at least 2 dims, got 1"):
        v.mT
    with pytest.raises(nt.NamesError, match="transpose: no dim named 'z'"):
        t.transpose("z", "b")


def test_permute_is_a_view(backend):
    t, _ = _nchw()
    for out in (t.permute("W", ...), t.transpose("N", "C"), t.mT, t.T, t.align_to("W", ...)):
        assert _shares(out, t)


# ----------------------------------------------------------------------------- gradients


def _x(names=("a", None, "c"), shape=(2, 3, 4)):
    return _t(np.random.default_rng(3).normal(size=shape), names, requires_grad=True)


@pytest.mark.parametrize("fn", [
    lambda t: t.rename("p", "q", "r"),
    lambda t: t.rename(a="z"),
    lambda t: t.rename(None),
    lambda t: t.refine_names("a", "b", "c"),
    lambda t: t.align_to("c", ...),
    lambda t: t.align_to("new", "c", ..., "other"),
    lambda t: t.permute(2, 0, 1),
    lambda t: t.permute("c", ...),
    lambda t: t.transpose("a", "c"),
    lambda t: t.mT,
    lambda t: t.T,
])
def test_gradients(fn):
    x = _x()
    assert gradcheck(fn, x)
    assert gradgradcheck(lambda t: fn(t) * fn(t), x)
    (g,) = nt.grad(fn(x).sum(), x)
    assert g.names == x.names


def test_align_as_and_align_gradients():
    x = _t(np.random.default_rng(4).normal(size=(3, 2)), ("c", "a"), requires_grad=True)
    other = _t(np.ones((2, 5, 3)), ("a", None, "c"))
    assert gradcheck(lambda t: t.align_as(other) * other, x)
    y = _t(np.random.default_rng(5).normal(size=(4,)), ("b",), requires_grad=True)
    assert gradcheck(lambda p, q: nt.align(p, q)[0] * nt.align(p, q)[1], x, y)
