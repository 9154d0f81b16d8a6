"""In-place ops: add_ sub_ mul_ div_ clamp_ masked_fill_ fill_ zero_ copy_, t[key] = v, += -= *= /=."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.testing import assert_close
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")


def rand(shape, names=None, requires_grad=False, seed=0, dtype="float64"):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


OPS = {"add_": np.add, "sub_": np.subtract, "mul_": np.multiply, "div_": np.divide}


@given(data=st.data(), op=st.sampled_from(sorted(OPS)))
def test_binary_inplace_matches_numpy_and_fills_names(data, op):
    (shape, names), (oshape, onames) = data.draw(nts.broadcastable_names(max_dims=3))
    # other must broadcast onto self without growing it
    shape = tuple(max(s, o) for s, o in zip(shape, (1,) * (len(shape) - len(oshape)) + oshape))
    a = data.draw(nts.arrays(shape))
    b = data.draw(nts.arrays(oshape, low=0.5, high=2.0))
    t = nt.tensor(a, names=names)
    try:
        expected_names = (t + nt.tensor(b, names=onames)).names
    except nt.NamesError:
        return
    before = t._version
    out = getattr(t, op)(nt.tensor(b, names=onames))
    assert out is t
    assert_close(t, OPS[op](a, b))
    assert t.names == expected_names
    assert t._version == before + 1
    t2 = nt.tensor(a, names=names)
    getattr(t2, op)(1.5)
    assert_close(t2, OPS[op](a, 1.5))
    assert t2.names == names


def test_names_are_filled_not_changed():
    t, _ = rand((2, 3))
    t.add_(nt.zeros(3, names=("feat",), dtype="float64"))
    assert t.names == (None, "feat")
    t.mul_(nt.ones(2, 1, names=("batch", None), dtype="float64"))
    assert t.names == ("batch", "feat")
    with pytest.raises(nt.NamesError, match=r"add_: dims \('batch', 'feat'\) and \('other',\) do not match"):
        t.add_(nt.ones(3, names=("other",), dtype="float64"))
    assert t.names == ("batch", "feat")


def test_augmented_operators_return_self():
    t, a = rand((2, 3), ("a", "b"))
    u = t
    t += 1
    t -= nt.tensor(np.ones(3), names=("b",))
    t *= 2
    t /= 4
    assert t is u
    assert_close(t, (a + 1 - 1) * 2 / 4)
    assert t._version == 4


def test_shape_and_dtype_rules():
    t, _ = rand((1, 3), ("a", "b"))
    with pytest.raises(ValueError, match=r"does not broadcast onto the tensor's shape \(1, 3\)"):
        t.add_(nt.ones(2, 3, dtype="float64"))
    with pytest.raises(ValueError, match="cannot grow self"):
        t.add_(nt.ones(1, 1, 3, dtype="float64"))
    i = nt.tensor([1, 2, 3], names=("x",))
    with pytest.raises(TypeError, match="add_: cannot write a float value into a tensor of dtype nt.int64"):
        i.add_(1.5)
    with pytest.raises(TypeError, match="cannot write a float"):
        i.add_(nt.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="true division"):
        i.div_(2)
    i.mul_(nt.tensor(np.array([2, 2, 2], dtype=np.int32)))
    i.add_(True)
    assert i.numpy().tolist() == [3, 5, 7] and i.dtype == nt.int64
    f, a = rand((3,), dtype="float32")
    f.add_(nt.tensor(np.ones(3)))  # float64 into float32: same kind, stays float32
    f.add_(nt.tensor([1, 1, 1]))  # int into float
    assert f.dtype == nt.float32
    assert_close(f, a + 2, rtol=1e-6)
    b = nt.tensor([True, False])
    with pytest.raises(TypeError, match="cannot write an int value"):
        b.fill_(1)
    b.fill_(True)
    assert b.numpy().tolist() == [True, True]


def test_refused_on_tensors_that_require_grad_but_allowed_under_no_grad():
    w, a = rand((3,), ("x",), requires_grad=True)
    with pytest.raises(RuntimeError, match="add_: in-place edit of a tensor that requires grad"):
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="setitem: in-place edit of a tensor that requires grad"):
        w[0] = 1.0
    with pytest.raises(RuntimeError, match="requires grad"):
        w += 1
    plain = nt.zeros(3, dtype="float64")
    plain.copy_(w)  # as in PyTorch, the copy joins the graph instead of losing w's gradient
    assert plain.requires_grad and not plain.is_leaf
    (plain * 2).sum().backward()
    assert_close(w.grad, np.full(3, 2.0))
    w.grad = None
    with nt.no_grad():
        w.sub_(0.5)  # an optimizer step
        w[{"x": 0}] = 0.0
    assert w.requires_grad
    assert_close(w.detach(), np.concatenate([[0.0], a[1:] - 0.5]))


def test_version_counter_catches_edits_of_saved_tensors():
    w, _ = rand((3,), ("x",), requires_grad=True)
    a, _ = rand((3,), ("x",), seed=1)
    y = (a * w).sum()
    a.add_(1.0)
    with pytest.raises(RuntimeError, match=r"mul: a tensor saved for its gradient .* was modified in place"):
        y.backward()
    # through a view: the view shares the version counter of its base
    base, _ = rand((2, 3), ("r", "x"), seed=2)
    view = base[0]
    y = (view * w).sum()
    base[1, 0] = 5.0
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()
    # editing after backward is fine
    view2 = base[{"r": 1}]
    y = (view2 * w).sum()
    y.backward()
    base.zero_()
    assert w.grad.names == ("x",)


def test_views_see_writes():
    t, _ = rand((2, 3), ("a", "b"))
    row, col, d = t[1], t[{"b": 2}], t.detach()
    t.fill_(2.0)
    assert row.numpy().tolist() == [2.0] * 3 and col.numpy().tolist() == [2.0] * 2
    row.zero_()
    assert t.numpy()[1].tolist() == [0.0] * 3
    col.masked_fill_(nt.tensor([True, False], names=("a",)), 9.0)
    assert t.numpy()[0, 2] == 9.0 and d.numpy()[0, 2] == 9.0
    assert row._version == t._version == d._version


def test_read_only_broadcast_view_refuses_writes():
    t = nt.tensor(np.ones(3)).broadcast_to((2, 3))
    with pytest.raises(ValueError, match="read-only view"):
        t.fill_(0.0)
    with pytest.raises(ValueError, match="read-only view"):
        t[0] = 1.0
    with pytest.raises(ValueError, match="read-only view"):
        t.add_(1.0)


# ----------------------------------------------------------------------------- setitem


@given(data=st.data())
def test_setitem_by_name_equals_positional(data):
    shape, _ = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    names = data.draw(nts.names(len(shape), named_fraction=1.0))
    a = data.draw(nts.arrays(shape))
    by_name = {}
    for ax in data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True)):
        s = shape[ax]
        by_name[names[ax]] = (data.draw(st.integers(-s, s - 1)) if data.draw(st.booleans())
                              else slice(data.draw(st.integers(0, s)), None, data.draw(st.sampled_from([1, 2]))))
    positional = tuple(by_name.get(n, slice(None)) for n in names)
    t = nt.tensor(a, names=names)
    t[by_name] = 7.0
    expected = a.copy()
    expected[positional] = 7.0
    assert_close(t, expected)
    region = a[positional]
    value = np.arange(region.size, dtype=np.float64).reshape(region.shape)
    t[positional] = nt.tensor(value, names=nt.tensor(a, names=names)[positional].names)
    expected[positional] = value
    assert_close(t, expected)


@given(data=st.data())
def test_setitem_fills_the_sliced_dims_with_the_values_names(data):
    shape, _ = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    key = tuple(data.draw(st.integers(0, s - 1)) if s and data.draw(st.booleans()) else slice(None) for s in shape)
    t = nt.tensor(data.draw(nts.arrays(shape)))
    region = tuple(s for s, k in zip(shape, key) if isinstance(k, slice))
    fresh = tuple(f"v{i}" for i in range(len(region)))
    t[key] = nt.tensor(np.zeros(region), names=fresh)
    filled = iter(fresh)
    assert t.names == tuple(next(filled) if isinstance(k, slice) else None for k in key)
    assert not t.numpy()[key].any()


def test_setitem_values_and_keys():
    t, a = rand((3, 4), ("a", "b"))
    t[0] = 1.0
    t[{"b": slice(1, 3)}] = nt.tensor(np.full(2, 2.0), names=("b",))
    t[:, [0, 0]] = np.array([[3.0, 3.0]] * 3)
    t[t > 2.5] = -1.0
    t[nt.tensor([True, False, True], names=("a",))] = nt.tensor(5.0, dtype="float64")
    expected = a.copy()
    expected[0] = 1.0
    expected[:, 1:3] = 2.0
    expected[:, [0, 0]] = 3.0
    expected[expected > 2.5] = -1.0
    expected[[0, 2]] = 5.0
    assert_close(t, expected)
    assert t.names == ("a", "b")
    i = nt.tensor(np.zeros((2, 2), dtype=np.int64))
    i[1, 1] = 3
    i[{0: 0}] = nt.tensor([7, 8])
    assert i.numpy().tolist() == [[7, 8], [0, 3]]


def test_setitem_fills_none_dims_like_the_other_inplace_ops():
    t, a = rand((2, 3), (None, "b"))
    t[:, 0:2] = nt.tensor(np.ones((2, 2)), names=("a", "b"))
    assert t.names == ("a", "b")
    expected = a.copy()
    expected[:, 0:2] = 1.0
    assert_close(t, expected)
    u, _ = rand((2, 3))
    u[0] = nt.tensor(np.ones(3), names=("c",))  # an int key drops dim 0: the value's dim is dim 1
    assert u.names == (None, "c")
    u[{"c": 1}] = nt.tensor(np.zeros(2), names=("r",))
    assert u.names == ("r", "c")
    w, _ = rand((2, 3))
    w[:, [0, 2]] = nt.tensor(np.ones((2, 2)), names=(None, "k"))  # a lone unnamed index picks from dim 1
    assert w.names == (None, "k")
    # a mask's dim and a None insertion are not dims of self: the value's names there fill nothing
    m, _ = rand((2, 3), (None, "b"))
    m[nt.tensor(np.array([[True, False, True], [False, False, True]]))] = nt.tensor(np.ones(3), names=("k",))
    m[None, 0] = nt.tensor(np.ones((1, 3)), names=("new", "b"))
    assert m.names == (None, "b")


def test_setitem_name_errors_leave_self_unchanged():
    t, a = rand((2, 3), ("a", None))
    with pytest.raises(nt.NamesError, match=r"setitem: a value with names \('a',\) would name dims of \('a', None\) "
                                            r"so that a name repeats"):
        t[0] = nt.tensor(np.ones(3), names=("a",))
    with pytest.raises(ValueError, match=r"setitem: the value has more dims \(None, None\) than the indexed part "
                                         r"\(None,\)"):
        t[0] = nt.tensor(np.ones((1, 3)))
    with pytest.raises(ValueError, match="cannot write a value of shape"):
        t[:, 0:2] = nt.tensor(np.ones((2, 3)), names=("a", "b"))
    assert t.names == ("a", None)
    assert_close(t, a)


def test_setitem_errors():
    t, _ = rand((3, 4), ("a", "b"))
    with pytest.raises(nt.NamesError, match=r"setitem: dims \('b',\) and \('a',\) do not match"):
        t[0] = nt.tensor(np.ones(4), names=("a",))
    with pytest.raises(nt.NamesError, match="no dim named 'c'"):
        t[{"c": 0}] = 1.0
    with pytest.raises(ValueError, match=r"cannot write a value of shape \(3,\)"):
        t[0] = nt.tensor(np.ones(3))
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        t[:, [9]] = 1.0
    with pytest.raises(TypeError, match="cannot write a float"):
        nt.tensor([1, 2])[0] = 0.5


# ----------------------------------------------------------------------------- the other ops


def test_clamp_fill_zero_copy_masked_fill():
    t, a = rand((2, 3), (None, "b"))
    assert t.clamp_(-0.5, 0.5) is t
    assert_close(t, np.clip(a, -0.5, 0.5))
    t.clip_(max=nt.tensor(np.zeros(3), names=("b",)))
    assert_close(t, np.minimum(np.clip(a, -0.5, 0.5), 0.0))
    t.clamp_(min=nt.tensor(np.full((2, 1), -0.25), names=("a", None)))
    assert t.names == ("a", "b")
    assert_close(t, np.maximum(np.minimum(np.clip(a, -0.5, 0.5), 0.0), -0.25))
    with pytest.raises(ValueError, match="give min, max or both"):
        t.clamp_()
    t.fill_(nt.tensor(3.0))
    assert t.numpy().tolist() == [[3.0] * 3] * 2
    with pytest.raises(ValueError, match="use copy_"):
        t.fill_(nt.ones(3))
    t.zero_()
    assert t.numpy().tolist() == [[0.0] * 3] * 2
    u, _ = rand((2, 3))
    u.copy_(nt.tensor(np.arange(3), names=("c",)))
    assert u.names == (None, "c")
    assert u.numpy().tolist() == [[0.0, 1.0, 2.0]] * 2
    with pytest.raises(TypeError, match="use fill_"):
        u.copy_(1.0)
    with pytest.raises(TypeError, match="cannot write a float"):
        nt.tensor([1, 2]).copy_(nt.tensor([1.5, 2.5]))
    v, b = rand((2, 3))
    v.masked_fill_(nt.tensor(b > 0, names=("a", "b")), 0.0)
    assert v.names == ("a", "b")
    assert_close(v, np.where(b > 0, 0.0, b))
    with pytest.raises(nt.NamesError, match="masked_fill_"):
        v.masked_fill_(nt.tensor(b > 0, names=("b", "a")), 0.0)
