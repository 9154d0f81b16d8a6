"""The public testing tools: gradcheck / gradgradcheck catch wrong gradients and say where, assert_close,
and the Hypothesis strategies produce what they promise."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import namedtensor as nt
from namedtensor import _names
from namedtensor.autograd import Op, apply
from namedtensor.ops._common import with_names
from namedtensor.testing import GradcheckError, assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


class _BadSquare(Op):
    """x**2 with the gradient wrong along the first dim's second row."""

    name = "bad_square"
    saves = (0,)

    @staticmethod
    def forward(B, x):
        return x * x

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        wrong = nt.tensor(np.array([[1.0], [1.5]]), names=x.names, dtype=nt.float64)
        return (g * 2 * x * wrong,)


class _WrongNames(Op):
    name = "wrong_names"

    @staticmethod
    def forward(B, x):
        return x * 2

    @staticmethod
    def backward(node, g):
        return (with_names(g * 2, ("p", "q")),)


class _FirstOrderOnly(Op):
    """x**3 whose backward is right but not differentiable (it leaves the graph)."""

    name = "first_order_only"
    saves = (0,)

    @staticmethod
    def forward(B, x):
        return x * x * x

    @staticmethod
    def backward(node, g):
        (x,) = node.saved_tensors()
        return ((g * 3 * x * x).detach(),)


def _x():
    return nt.tensor(np.arange(1.0, 7.0).reshape(2, 3), names=("row", "col"), requires_grad=True)


def test_gradcheck_passes_and_fails_with_the_dim():
    x = _x()
    assert gradcheck(lambda t: t * t, x) is True
    with pytest.raises(GradcheckError) as info:
        gradcheck(lambda t: apply(_BadSquare, (t,), t.names), x)
    msg = str(info.value)
    assert "gradcheck: input 0 (names ('row', 'col'), shape (2, 3)): autograd and central differences disagree " \
           "at 3 of 6 elements" in msg
    assert "along 'row': at indices [1]" in msg
    assert "along 'col': at indices [0, 1, 2]" in msg
    assert "first bad element (1, 0)" in msg


def test_gradcheck_reports_a_0_dim_input():
    def wrong_square(t):
        y = t * t
        if y.requires_grad:  # not in the numeric probes, which run under no_grad
            y.register_hook(lambda g: g * 1.5)  # autograd's gradient comes out 1.5 times too large
        return y

    x = nt.tensor(2.0, dtype=nt.float64, requires_grad=True)
    with pytest.raises(GradcheckError) as info:
        gradcheck(wrong_square, x)
    msg = str(info.value)
    assert "gradcheck: input 0 (names (), shape ()): autograd and central differences disagree at 1 of 1" in msg
    got, numeric = re.search(r"first bad element \(\): autograd (\S+) vs numeric (\S+)$", msg).groups()
    assert float(got) / float(numeric) == pytest.approx(1.5)


def test_gradcheck_checks_gradient_names():
    x = _x()
    with pytest.raises(GradcheckError, match=re.escape("gradcheck: the gradient of input 0 has names ('p', 'q'), "
                                                       "but the input has ('row', 'col')")):
        gradcheck(lambda t: apply(_WrongNames, (t,), t.names), x)


def test_gradcheck_several_inputs_and_outputs():
    x = _x()
    y = nt.tensor(np.array([0.5, 2.0, 3.0]), names=("col",), requires_grad=True)
    c = nt.tensor(np.array([1.0, 2.0, 3.0]), names=("col",))  # a constant input is not checked
    assert gradcheck(lambda a, b, k: (a * b * k, (a + b).exp(), a > 2), x, y, c)


def test_gradcheck_argument_errors():
    with pytest.raises(ValueError, match="gradcheck: no input requires grad"):
        gradcheck(lambda t: t, nt.tensor([1.0]))
    with pytest.raises(TypeError, match="gradcheck: fn must return a Tensor or a tuple of tensors, got float"):
        gradcheck(lambda t: 1.0, _x())


def test_gradgradcheck_catches_a_non_differentiable_backward():
    x = _x()
    assert gradcheck(lambda t: apply(_FirstOrderOnly, (t,), t.names), x)
    with pytest.raises(GradcheckError, match="disagree"):
        gradgradcheck(lambda t: apply(_FirstOrderOnly, (t,), t.names), x)
    assert gradgradcheck(lambda t: t * t * t, x)


def test_gradgradcheck_of_linear_functions():
    x = _x()
    assert gradgradcheck(lambda t: t * 3 - 1, x)  # second derivative 0: the gradient does not depend on x


def test_assert_close():
    a = nt.tensor([1.0, 2.0], names=("x",))
    assert_close(a, nt.tensor([1.0, 2.0 + 1e-9], names=("x",)))
    assert_close(a, np.array([1.0, 2.0]))
    assert_close(nt.tensor([np.nan]), np.array([np.nan]))  # NaN equals NaN
    assert_close(a, nt.tensor([1.0, 2.0], names=("y",)), check_names=False)
    with pytest.raises(AssertionError, match=re.escape("names differ: ('x',) vs ('y',)")):
        assert_close(a, nt.tensor([1.0, 2.0], names=("y",)))
    with pytest.raises(AssertionError, match=re.escape("shapes differ: (2,) vs (3,)")):
        assert_close(a, np.zeros(3))
    with pytest.raises(AssertionError, match=re.escape("values differ at flat index 1: 2.0 vs 2.5")):
        assert_close(a, np.array([1.0, 2.5]))
    with pytest.raises(AssertionError, match="values differ at flat index 0"):
        assert_close(nt.tensor([True]), np.array([False]))
    g = nt.tensor([1.0], requires_grad=True)
    assert_close(g * 1, np.array([1.0]))  # tensors in a graph are compared too


@pytest.mark.parametrize("fraction", [0.0, 1.0])
def test_names_strategy_named_fraction(fraction):
    @fixture_ok
    @given(nts.names(4, named_fraction=fraction))
    def check(names):
        assert len(names) == 4
        assert all((n is not None) == (fraction == 1.0) for n in names)

    check()


def test_names_strategy_needs_enough_names():
    @given(nts.names(11))
    def check(names):
        pass

    with pytest.raises(ValueError, match="names: 11 dims need at least 11 distinct names, the pool has 10"):
        check()

    @fixture_ok
    @given(nts.names(3, pool=("a", "b", "c")))
    def small_pool(names):
        assert len(names) == 3

    small_pool()


@fixture_ok
@given(nts.named_shapes())
def test_named_shapes_strategy(shape_names):
    shape, names = shape_names
    assert len(shape) == len(names) and 0 <= len(shape) <= 4
    assert all(1 <= s <= 4 for s in shape)
    assert _names.validate(names, len(names)) == names


@fixture_ok
@given(nts.tensors(dtype="float32"))
def test_tensors_strategy(ta):
    t, a = ta
    assert t.dtype == nt.float32 and a.dtype == np.float32
    assert t.shape == a.shape
    assert_close(t, a)
    assert np.all((a >= -3) & (a <= 3))


@fixture_ok
@given(nts.broadcastable_names())
def test_broadcastable_names_strategy(pair):
    (sa, na), (sb, nb) = pair
    np.broadcast_shapes(sa, sb)  # sizes broadcast
    _names.unify(na, nb)  # names unify
    assert len(sb) <= len(sa)


@pytest.mark.parametrize("dtype", ["float64", "int64", "bool"])
def test_arrays_strategy_dtypes(dtype):
    @fixture_ok
    @given(nts.arrays((2, 3), dtype))
    def check(a):
        assert a.shape == (2, 3) and a.dtype == np.dtype(dtype)

    check()
