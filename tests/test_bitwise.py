"""Bitwise ops and ``nextafter`` (namedtensor/ops/bitwise.py): values against NumPy, the operators and
their in-place forms, the name rule (Hypothesis), the refusals, the standard's spellings and a dry run."""

import numpy as np
import pytest
from hypothesis import given, settings

import namedtensor as nt
import namedtensor.array_api as xp
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")

OPS = {
    "bitwise_and": (np.bitwise_and, lambda a, b: a & b),
    "bitwise_or": (np.bitwise_or, lambda a, b: a | b),
    "bitwise_xor": (np.bitwise_xor, lambda a, b: a ^ b),
    "bitwise_left_shift": (np.left_shift, lambda a, b: a << b),
    "bitwise_right_shift": (np.right_shift, lambda a, b: a >> b),
}


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_binary_ops_match_numpy_as_functions_methods_and_operators(name, dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(-50, 50, (3, 4)).astype(dtype)
    b = rng.integers(0, 5, (4,)).astype(dtype)
    ta, tb = nt.tensor(a, names=("r", "c")), nt.tensor(b, names=("c",))
    np_fn, operator = OPS[name]
    expected = np_fn(a, b)
    for out in (getattr(nt, name)(ta, tb), getattr(ta, name)(tb), operator(ta, tb)):
        assert out.names == ("r", "c") and out.dtype == getattr(nt, dtype)
        np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(operator(ta, 3).numpy(), np_fn(a, 3))
    np.testing.assert_array_equal(operator(3, tb).numpy(), np_fn(3, b))  # the reflected operator


def test_not_and_the_bool_meaning():
    a = np.array([0, 5, -7], dtype=np.int64)
    t = nt.tensor(a, names=("x",))
    for out in (nt.bitwise_not(t), t.bitwise_not(), ~t):
        assert out.names == ("x",)
        np.testing.assert_array_equal(out.numpy(), ~a)
    m = nt.tensor([True, False, True], names=("x",))
    n = nt.tensor([True, True, False], names=("x",))
    assert (m & n).tolist() == [True, False, False] and (m | n).tolist() == [True, True, True]
    assert (m ^ n).tolist() == [False, True, True] and (~m).tolist() == [False, True, False]
    assert (m & n).dtype == nt.bool_ and (True & m).tolist() == [True, False, True]


def test_in_place_forms():
    t = nt.tensor([12, 10, 7], names=("x",))
    same = t
    t &= nt.tensor([10, 6, 3], names=("x",))
    t |= 1
    t ^= 2
    t <<= 2
    t >>= 1
    assert t is same and t.tolist() == [((12 & 10 | 1) ^ 2) << 2 >> 1, ((10 & 6 | 1) ^ 2) << 2 >> 1,
                                        ((7 & 3 | 1) ^ 2) << 2 >> 1]
    t.bitwise_not_()
    assert t.tolist() == [~v for v in [((12 & 10 | 1) ^ 2) << 2 >> 1, ((10 & 6 | 1) ^ 2) << 2 >> 1,
                                       ((7 & 3 | 1) ^ 2) << 2 >> 1]]


@settings(deadline=None, max_examples=40)
@given(nts.broadcastable_names())
def test_names_unify_as_for_every_binary_op(pair):
    (shape_a, names_a), (shape_b, names_b) = pair
    padded = (None,) * (len(names_a) - len(names_b)) + names_b  # b lines up with a's last dims
    expected = tuple(x if x is not None else y for x, y in zip(names_a, padded))
    a = nt.ones(*shape_a, names=names_a, dtype=nt.int64)
    b = nt.ones(*shape_b, names=names_b, dtype=nt.int64)
    assert (a & b).names == expected == (a ^ b).names


def test_refusals():
    f = nt.randn(3, names=("x",))
    i = nt.tensor([1, 2, 3], names=("x",))
    with pytest.raises(TypeError, match=r"bitwise_and: needs integer or bool tensors, got nt.float32"):
        f & i
    with pytest.raises(TypeError, match="bitwise_not: needs integer or bool tensors"):
        ~f
    with pytest.raises(TypeError, match=r"bitwise_left_shift: needs integer tensors, got nt.bool"):
        nt.tensor([True]) << nt.tensor([True])
    with pytest.raises(nt.NamesError, match="bitwise_or: dims"):
        i | nt.tensor([1, 2, 3], names=("y",))
    with pytest.raises(TypeError, match="nextafter: needs floating-point tensors, got nt.int64"):
        nt.nextafter(i, i)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nextafter_matches_numpy(dtype):
    a = np.array([0.0, 1.0, -2.5, 1e30], dtype=dtype)
    b = np.array([1.0, 0.0, -3.0, np.inf], dtype=dtype)
    out = nt.nextafter(nt.tensor(a, names=("x",)), nt.tensor(b, names=("x",)))
    assert out.names == ("x",) and out.dtype == nt.tensor(a).dtype
    np.testing.assert_array_equal(out.numpy(), np.nextafter(a, b))
    grad_free = nt.tensor(a, requires_grad=True)
    assert not nt.nextafter(grad_free, 0.0).requires_grad  # no gradient, as in PyTorch


def test_the_standards_spellings_and_a_dry_run():
    a = nt.tensor([6, 3], names=("x",))
    assert xp.bitwise_and(a, 3).tolist() == [2, 3] and xp.bitwise_invert(a).tolist() == [-7, -4]
    assert xp.bitwise_left_shift(a, 1).tolist() == [12, 6] and xp.bitwise_right_shift(a, 1).tolist() == [3, 1]
    assert xp.bitwise_or(a, 1).tolist() == [7, 3] and xp.bitwise_xor(a, 1).tolist() == [7, 2]
    assert xp.nextafter(nt.tensor([1.0]), 2.0).tolist() == [np.nextafter(np.float32(1), np.float32(2))]
    out = nt.spec(("batch", "x"), (2, 3), dtype=nt.int64) & nt.spec(("x",), (3,), dtype=nt.int64)
    assert out.shape == (2, 3) and out.names == ("batch", "x") and out.dtype == nt.int64
