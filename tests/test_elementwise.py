"""Elementwise ops: values against NumPy, names (unary keeps, binary and ``where`` unify by rule 2),
scalars and arrays as unnamed constants, gradients (gradcheck / gradgradcheck) and backend mixing."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import erf as sp_erf

import namedtensor as nt
from namedtensor import _names, backends
from namedtensor.ops import elementwise as ew
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")

# the backend fixture is set once per test, not per example: that is what we want
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
# per-op parametrized properties: fewer examples each, the ops share one implementation pattern
per_op = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=10)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


#: NumPy reference and input range for every op of the UNARY table.
UNARY_REF = {
    "neg": (np.negative, (-3, 3)),
    "abs": (np.abs, (-3, 3)),
    "exp": (np.exp, (-3, 3)),
    "log": (np.log, (0.1, 3)),
    "log1p": (np.log1p, (-0.9, 3)),
    "expm1": (np.expm1, (-3, 3)),
    "sqrt": (np.sqrt, (0.1, 3)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 3)),
    "sin": (np.sin, (-3, 3)),
    "cos": (np.cos, (-3, 3)),
    "tan": (np.tan, (-1.2, 1.2)),
    "tanh": (np.tanh, (-3, 3)),
    "sigmoid": (_sigmoid, (-30, 30)),
    "relu": (lambda x: np.maximum(x, 0), (-3, 3)),
    "gelu": (lambda x: 0.5 * x * (1 + sp_erf(x / np.sqrt(2))), (-3, 3)),
    "silu": (lambda x: x * _sigmoid(x), (-3, 3)),
    "softplus": (lambda x: np.logaddexp(0, x), (-30, 30)),
    "erf": (sp_erf, (-4, 4)),
    "sign": (np.sign, (-3, 3)),
    "floor": (np.floor, (-3, 3)),
    "ceil": (np.ceil, (-3, 3)),
    "round": (np.round, (-3, 3)),
    "reciprocal": (lambda x: 1 / x, (0.1, 3)),
    "square": (np.square, (-3, 3)),
}


def test_every_unary_op_has_a_reference():
    assert set(UNARY_REF) == set(ew.UNARY) | {"gelu"}  # exact gelu is a fused op outside the table


def test_float32_gelu_and_its_fast_gradient_match_float64():
    # float32 erf is a rational approximation (a few ulps); the fused backward reuses the forward's CDF
    a = np.linspace(-9, 9, 70001)
    x32 = _t(a.astype(np.float32), ("x",), requires_grad=True)
    x64 = _t(a, ("x",), requires_grad=True)
    y32, y64 = ew.gelu(x32), ew.gelu(x64)
    assert_close(y32, y64.detach().numpy(), rtol=2e-6, atol=2e-6)
    assert_close(ew.erf(x32.detach()), ew.erf(x64.detach()).numpy(), rtol=0, atol=5e-7)
    y32.sum().backward()
    y64.sum().backward()
    assert x32.grad.dtype == nt.float32 and x32.grad.names == ("x",)
    assert_close(x32.grad, x64.grad.numpy(), rtol=2e-6, atol=2e-6)


def _t(a, names, requires_grad=False):
    return nt.tensor(a, names=names, requires_grad=requires_grad)


# ----------------------------------------------------------------------------- unary values and names


@pytest.mark.parametrize("name", sorted(UNARY_REF))
@per_op
@given(data=st.data())
def test_unary_matches_numpy(name, data):
    ref, (lo, hi) = UNARY_REF[name]
    shape, names = data.draw(nts.named_shapes(max_dims=3))
    a = data.draw(nts.arrays(shape, low=lo, high=hi))
    t = _t(a, names)
    fn = getattr(ew, name)
    for out in (fn(t), getattr(t, name)()):
        assert out.names == names
        assert out.dtype == nt.float64
        assert_close(out, ref(a), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["exp", "sigmoid", "gelu", "erf", "sqrt"])
def test_unary_keeps_float32(name):
    a = np.linspace(0.1, 2, 6, dtype=np.float32).reshape(2, 3)
    out = getattr(ew, name)(_t(a, ("x", None)))
    assert out.dtype == nt.float32
    assert out.names == ("x", None)
    assert_close(out, UNARY_REF[name][0](a.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_neg_and_abs_operators():
    a = np.array([[-1.5, 2.0]])
    t = _t(a, ("r", "c"))
    assert_close(-t, -a)
    assert_close(abs(t), np.abs(a))
    assert (-t).names == ("r", "c")


@fixture_ok
@given(nts.tensors(max_dims=3))
def test_gelu_tanh(ta):
    t, a = ta
    c = np.sqrt(2 / np.pi)
    out = ew.gelu(t, approximate="tanh")
    assert out.names == t.names
    assert_close(out, 0.5 * a * (1 + np.tanh(c * (a + 0.044715 * a**3))), rtol=1e-12, atol=1e-14)
    assert_close(t.gelu(approximate="none"), UNARY_REF["gelu"][0](a), rtol=1e-12, atol=1e-14)


def test_gelu_bad_approximate():
    with pytest.raises(ValueError, match="gelu: approximate must be 'none' or 'tanh', got 'fast'"):
        ew.gelu(_t(np.zeros(2), ("x",)), approximate="fast")


def test_unary_refuses_non_tensors():
    with pytest.raises(TypeError, match="exp: expected a Tensor, got list"):
        ew.exp([1.0])
    for fn, label in ((lambda: nt.isnan(1.0), "isnan"), (lambda: nt.gelu(1.0, approximate="tanh"), "gelu"),
                      (lambda: nt.clip(1.0, 0, 1), "clip"), (lambda: nt.logical_not(True), "logical_not")):
        with pytest.raises(TypeError, match=f"{label}: expected a Tensor, got"):
            fn()


@fixture_ok
@given(nts.tensors(max_dims=3), st.floats(-2, 0), st.floats(0, 2))
def test_clip(ta, lo, hi):
    t, a = ta
    for out in (t.clip(lo, hi), t.clamp(lo, hi), ew.clip(t, min=lo, max=hi)):
        assert out.names == t.names
        assert_close(out, np.clip(a, lo, hi))
    assert_close(t.clip(min=lo), np.maximum(a, lo))
    assert_close(t.clip(max=hi), np.minimum(a, hi))


def test_clip_with_tensor_bounds_unifies_names():
    a = np.array([[-2.0, 0.5, 3.0], [1.0, -1.0, 0.0]])
    t = _t(a, ("b", "c"))
    lo = _t(np.array([-1.0, 0.0, 1.0]), (None,))
    hi = _t(np.array([[2.0], [0.5]]), ("b", None))
    out = t.clip(lo, hi)
    assert out.names == ("b", "c")
    assert_close(out, np.minimum(np.maximum(a, [-1.0, 0.0, 1.0]), [[2.0], [0.5]]))
    with pytest.raises(nt.NamesError, match=re.escape("maximum: dims ('b', 'c') and ('c', 'b') do not match")):
        t.clip(_t(a.T.copy(), ("c", "b")))
    with pytest.raises(ValueError, match="clip: give min, max or both"):
        t.clip()


#: unary ops whose result is a float whatever the input: NumPy gives float64 for integer input
FLOAT_VALUED = ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "gelu",
                "silu", "softplus", "erf", "reciprocal")


@pytest.mark.parametrize("name", FLOAT_VALUED)
def test_float_valued_unary_ops_of_integers_give_float64(name):
    """Every backend follows NumPy (array-api-strict alone refuses integer input)."""
    a = np.array([[1, 2], [3, 1]])
    out = getattr(ew, name)(_t(a, ("x", None)))
    assert out.dtype == nt.float64 and out.names == ("x", None)
    assert_close(out, UNARY_REF[name][0](a.astype(np.float64)), rtol=1e-12)
    if name == "gelu":
        tanh_form = ew.gelu(_t(a, ("x", None)), approximate="tanh")
        assert tanh_form.dtype == nt.float64
        assert_close(tanh_form, ew.gelu(_t(a.astype(np.float64), ("x", None)), approximate="tanh"))


def test_integer_unary_ops_keep_integers():
    a = np.array([-2, 0, 3])
    for name in ("neg", "abs", "relu", "square", "sign", "floor", "ceil", "round"):
        out = getattr(ew, name)(_t(a, ("x",)))
        assert out.dtype == nt.int64, name
        np.testing.assert_array_equal(out.numpy(), UNARY_REF[name][0](a))


def test_logical_not_and_predicates():
    a = np.array([[0.0, np.nan], [np.inf, -np.inf]])
    t = _t(a, ("x", "y"))
    for name, ref in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)):
        out = getattr(t, name)()
        assert out.names == ("x", "y")
        assert out.dtype == nt.bool
        np.testing.assert_array_equal(out.numpy(), ref(a))
        np.testing.assert_array_equal(getattr(nt, name)(t).numpy(), ref(a))
    m = _t(np.array([True, False]), ("k",))
    for out in (m.logical_not(), ~m, nt.logical_not(m)):
        assert out.names == ("k",)
        np.testing.assert_array_equal(out.numpy(), [False, True])
    # numbers count as true when nonzero, as in NumPy
    np.testing.assert_array_equal(nt.logical_not(_t(np.array([0.0, 2.5]), ("k",))).numpy(), [True, False])


# ----------------------------------------------------------------------------- binary values and names

BINARY_REF = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "remainder": np.remainder, "floor_divide": np.floor_divide,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}
LOGICAL = ("logical_and", "logical_or", "logical_xor")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")

OPERATORS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a**b, "remainder": lambda a, b: a % b,
    "floor_divide": lambda a, b: a // b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "logical_and": lambda a, b: a & b, "logical_or": lambda a, b: a | b, "logical_xor": lambda a, b: a ^ b,
}


def test_every_binary_op_has_a_reference():
    assert set(BINARY_REF) == set(ew.BINARY) | set(ew.COMPARE)


def _operands(name, a_shape, b_shape, data):
    if name in LOGICAL:
        return data.draw(nts.arrays(a_shape, "bool")), data.draw(nts.arrays(b_shape, "bool"))
    if name in COMPARE:  # small integers in float64, so that ties happen
        return (data.draw(nts.arrays(a_shape, "int64", -2, 2)).astype(np.float64),
                data.draw(nts.arrays(b_shape, "int64", -2, 2)).astype(np.float64))
    lo = 0.5 if name in ("pow", "div", "remainder", "floor_divide") else -3.0
    return data.draw(nts.arrays(a_shape, low=lo, high=3.0)), data.draw(nts.arrays(b_shape, low=lo, high=3.0))


@pytest.mark.parametrize("name", sorted(BINARY_REF))
@per_op
@given(data=st.data())
def test_binary_matches_numpy_and_unifies(name, data):
    (sa, na), (sb, nb) = data.draw(nts.broadcastable_names())
    a, b = _operands(name, sa, sb, data)
    x, y = _t(a, na), _t(b, nb)
    expected = BINARY_REF[name](a, b)
    outs = [getattr(ew, name)(x, y), getattr(x, name)(y)]
    if name in OPERATORS:
        outs.append(OPERATORS[name](x, y))
    for out in outs:
        assert out.names == _names.unify(na, nb)
        assert out.shape == expected.shape
        if expected.dtype == bool:
            assert out.dtype == nt.bool
            np.testing.assert_array_equal(out.numpy(), expected)
        else:
            assert_close(out, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["add", "gt"])
@fixture_ok
@given(data=st.data())
def test_binary_names_follow_unify_or_raise(name, data):
    """Any two names tuples on broadcastable shapes: the result's names are unify's, or NamesError."""
    (sa, _), (sb, _) = data.draw(nts.broadcastable_names())
    na, nb = data.draw(nts.names(len(sa))), data.draw(nts.names(len(sb)))
    a, b = _operands(name, sa, sb, data)
    x, y = _t(a, na), _t(b, nb)
    try:
        expected = _names.unify(na, nb, name)
    except nt.NamesError as e:
        with pytest.raises(nt.NamesError, match=re.escape(str(e))):
            getattr(ew, name)(x, y)
        return
    assert getattr(ew, name)(x, y).names == expected


def test_binary_mismatch_message():
    x = _t(np.ones((2, 3)), ("batch", "feat"))
    y = _t(np.ones(3), ("batch",))
    with pytest.raises(nt.NamesError) as info:
        x + y
    msg = str(info.value)
    for fragment in ("add:", "('batch', 'feat')", "('batch',)", "do not match at position -1 from the right",
                     "'feat' vs 'batch'", "b.align_as(a)"):
        assert fragment in msg
    with pytest.raises(nt.NamesError, match=re.escape("mul: dims ('batch', 'feat') and ('batch',)")):
        x * y
    with pytest.raises(nt.NamesError, match=re.escape("lt: dims")):
        x < y


def test_binary_misaligned_message():
    # sizes would broadcast, names are still checked (rule 2)
    x = _t(np.ones((3, 3)), ("a", None))
    y = _t(np.ones(3), ("a",))
    with pytest.raises(nt.NamesError, match=re.escape("sub: dims ('a', None) and ('a',) are misaligned: 'a'")):
        x - y
    with pytest.raises(nt.NamesError, match="align_as"):
        y - x
    assert (x - y.align_as(x)).names == ("a", None)


def test_size_mismatch_is_a_clear_error():
    x = _t(np.ones((2, 3)), ("a", "b"))
    y = _t(np.ones((2, 4)), ("a", "b"))
    with pytest.raises(ValueError):
        x + y


DTYPE_VALUES = {"float32": np.array([1.5, -2.0], np.float32), "float64": np.array([0.5, 3.0]),
                "int64": np.array([2, -3]), "int32": np.array([4, 1], np.int32), "bool": np.array([True, False])}


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "lt", "logical_and",
                                  "logical_xor", "where"])
def test_mixed_dtypes_follow_numpy(name):
    """Both backends promote as NumPy 2 does (array-api-strict alone would refuse mixed kinds)."""
    c = np.array([True, False])
    for ka, a in DTYPE_VALUES.items():
        for kb, b in DTYPE_VALUES.items():
            if ka == kb == "bool" and name not in ("eq", "logical_and", "logical_xor", "where"):
                continue  # arithmetic on two bool arrays is NumPy-only
            if name == "sub" and "bool" in (ka, kb):
                continue  # NumPy refuses it too
            with np.errstate(divide="ignore"):  # x / False
                if name == "where":
                    out, expected = nt.where(_t(c, None), _t(a, None), _t(b, None)), np.where(c, a, b)
                else:
                    out, expected = getattr(ew, name)(_t(a, None), _t(b, None)), BINARY_REF[name](a, b)
            assert out.numpy().dtype == expected.dtype, (ka, kb)
            np.testing.assert_allclose(out.numpy().astype(float), expected.astype(float), rtol=1e-6)


# ----------------------------------------------------------------------------- scalars and arrays


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "remainder", "floor_divide", "maximum",
                                  "minimum", "eq", "lt", "ge"])
@pytest.mark.parametrize("scalar", [2, 1.5])
def test_python_scalars_are_unnamed_constants(name, scalar):
    a = np.array([[0.5, 1.0, 2.5], [3.0, 1.5, 0.75]])
    t = _t(a, ("r", "c"))
    fn = getattr(ew, name)
    for out, expected in ((fn(t, scalar), BINARY_REF[name](a, scalar)), (fn(scalar, t), BINARY_REF[name](scalar, a))):
        assert out.names == ("r", "c")
        if expected.dtype == bool:
            np.testing.assert_array_equal(out.numpy(), expected)
        else:
            assert out.dtype == nt.float64
            assert_close(out, expected, rtol=1e-12)


def test_aliases():
    a, b = np.array([3.0, 4.5]), np.array([2.0, 1.5])
    x, y = _t(a, ("x",)), _t(b, ("x",))
    for out, expected in ((nt.subtract(x, y), a - b), (nt.multiply(x, y), a * b), (nt.divide(x, y), a / b),
                          (nt.true_divide(x, y), a / b), (nt.mod(x, y), np.remainder(a, b)),
                          (x.subtract(y), a - b), (x.multiply(y), a * b), (x.divide(y), a / b),
                          (x.true_divide(y), a / b)):
        assert out.names == ("x",)
        assert_close(out, expected)
    assert_close(nt.clamp(x, 3.5, 4.0), np.clip(a, 3.5, 4.0))


def test_operands_need_a_tensor():
    for fn in (ew.add, ew.mul, ew.eq, ew.logical_and):
        with pytest.raises(TypeError, match=f"{fn.__name__}: at least one operand must be a Tensor, got int and "
                                            "ndarray"):
            fn(1, np.ones(2))


def test_reversed_logical_operators():
    m = _t(np.array([True, False]), ("k",))
    for out, expected in ((True & m, [True, False]), (False | m, [True, False]), (True ^ m, [False, True]),
                          (np.array([False, True]) & m, [False, False])):
        assert isinstance(out, nt.Tensor) and out.names == ("k",)
        np.testing.assert_array_equal(out.numpy(), expected)


def test_reversed_operators():
    a = np.array([0.5, 1.0, 2.0])
    t = _t(a, ("x",))
    cases = {
        "2 - t": (2 - t, 2 - a), "2 / t": (2 / t, 2 / a), "2 ** t": (2**t, 2**a), "2 + t": (2 + t, 2 + a),
        "2 * t": (2 * t, 2 * a), "7 % t": (7 % t, 7 % a), "7 // t": (7 // t, 7 // a), "2 < t": (2 < t, 2 < a),
    }
    for label, (out, expected) in cases.items():
        assert out.names == ("x",), label
        if expected.dtype == bool:
            np.testing.assert_array_equal(out.numpy(), expected)
        else:
            assert_close(out, expected, rtol=1e-12)


def test_scalars_keep_the_tensor_dtype():
    t32 = nt.tensor([1.0, 2.0], names=("x",))
    assert t32.dtype == nt.float32
    assert (t32 + 1.5).dtype == nt.float32
    assert (2.5 * t32).dtype == nt.float32
    ti = nt.tensor([1, 2], names=("x",))
    assert (ti + 1).dtype == nt.int64
    assert (ti + 0.5).dtype == nt.float64
    assert_close(ti + 0.5, np.array([1.5, 2.5]))
    assert (ti / 2).dtype == nt.float64  # true division of integers gives floats (as NumPy)
    assert_close(ti / 2, np.array([0.5, 1.0]))
    assert_close(ti // 2, np.array([0, 1]))


def test_numpy_arrays_and_lists_are_unnamed_constants():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    c = np.array([10.0, 20.0])
    t = _t(a, ("r", "c"))
    for out, expected in ((t + c, a + c), (c + t, c + a), (c - t, c - a), (t * [1.0, 2.0], a * [1.0, 2.0]),
                          (ew.mul(c, t), c * a), (np.float64(3.0) * t, 3.0 * a)):
        assert isinstance(out, nt.Tensor)
        assert out.names == ("r", "c")
        assert_close(out, expected)
    # an unnamed constant still follows rule 2: it is right-aligned, and its None takes any name
    assert (t + np.ones((3, 1, 1))).names == (None, "r", "c")
    with pytest.raises(TypeError, match="add: unsupported operand of type str"):
        t + "x"


# ----------------------------------------------------------------------------- where


@st.composite
def broadcastable_triples(draw):
    n = draw(st.integers(0, 3))
    shape = [draw(st.integers(1, 3)) for _ in range(n)]
    full = draw(nts.names(n))
    out = []
    for _ in range(3):
        k = draw(st.integers(0, n))
        out.append((tuple(s if draw(st.booleans()) else 1 for s in shape[n - k:]),
                    tuple(nm if draw(st.booleans()) else None for nm in full[n - k:])))
    return out


@fixture_ok
@given(broadcastable_triples(), st.data())
def test_where_matches_numpy_and_unifies_three_ways(triple, data):
    (sc, nc), (sa, na), (sb, nb) = triple
    c = data.draw(nts.arrays(sc, "bool"))
    a, b = data.draw(nts.arrays(sa)), data.draw(nts.arrays(sb))
    out = nt.where(_t(c, nc), _t(a, na), _t(b, nb))
    assert out.names == _names.unify(_names.unify(nc, na), nb)
    assert_close(out, np.where(c, a, b))


def test_where_with_scalars_and_errors():
    c = np.array([[True, False], [False, True]])
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    cond, t = _t(c, ("r", None)), _t(a, (None, "c"))
    out = nt.where(cond, t, 0.0)
    assert out.names == ("r", "c")
    assert_close(out, np.where(c, a, 0.0))
    assert_close(nt.where(cond, -1.0, t), np.where(c, -1.0, a))
    with pytest.raises(nt.NamesError, match=re.escape("where: dims ('r', None) and ('c', 'r')")):
        nt.where(cond, _t(a, ("c", "r")), 0.0)
    with pytest.raises(TypeError, match="where: cond must be a bool tensor"):
        nt.where(t, t, 0.0)
    with pytest.raises(TypeError, match="where: give at least one of a, b as a tensor"):
        nt.where(cond, 1.0, 0.0)


# ----------------------------------------------------------------------------- gradients

GRAD_RANGE = {  # inputs kept away from kinks, poles and domain edges
    "log": (0.3, 2), "log1p": (0.3, 2), "sqrt": (0.3, 2), "rsqrt": (0.3, 2), "reciprocal": (0.3, 2),
    "tan": (-1, 1),
}


def _grad_input(name, shape, names, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = GRAD_RANGE.get(name, (0.2, 1.5))
    a = rng.uniform(lo, hi, size=shape)
    if name not in GRAD_RANGE:
        a *= rng.choice([-1.0, 1.0], size=shape)
    return _t(a, names, requires_grad=True)


@pytest.mark.parametrize("name", sorted(UNARY_REF))
def test_unary_gradcheck_and_gradgradcheck(name):
    x = _grad_input(name, (2, 3), ("batch", None))
    fn = getattr(ew, name)
    assert gradcheck(fn, x)
    assert gradgradcheck(fn, x)
    (g,) = nt.grad(fn(x).sum(), x)
    assert g.names == x.names


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradients(approximate):
    x = _grad_input("gelu", (2, 3), ("a", "b"))
    assert gradcheck(lambda t: t.gelu(approximate=approximate), x)
    assert gradgradcheck(lambda t: t.gelu(approximate=approximate), x)


def test_clip_gradients():
    x = _grad_input("clip", (2, 3), ("a", "b"))
    assert gradcheck(lambda t: t.clip(-1.0, 0.8), x)
    assert gradgradcheck(lambda t: t.clip(-1.0, 0.8), x)
    lo = _t(np.full(3, -0.5), ("b",), requires_grad=True)
    assert gradcheck(lambda t, m: t.clip(m, 1.0), x, lo)


BINARY_GRAD = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "floor_divide")


def _binary_grad_inputs(name):
    rng = np.random.default_rng(1)
    # b broadcasts: one missing leading dim and one size-1 dim, named and unnamed dims mixed
    a = rng.uniform(0.5, 1.5, size=(2, 3, 2))
    b = rng.uniform(0.5, 1.5, size=(3, 1)) + 0.05  # no ties with a (maximum/minimum)
    if name in ("add", "sub", "mul", "maximum", "minimum"):
        a *= rng.choice([-1.0, 1.0], size=a.shape)
        b *= rng.choice([-1.0, 1.0], size=b.shape)
    if name in ("remainder", "floor_divide"):
        a = a * 3
    return _t(a, ("batch", "seq", None), True), _t(b, ("seq", None), True)


@pytest.mark.parametrize("name", BINARY_GRAD)
def test_binary_gradcheck_with_broadcasting(name):
    x, y = _binary_grad_inputs(name)
    fn = getattr(ew, name)
    assert gradcheck(fn, x, y)
    gx, gy = nt.grad(fn(x, y).sum(), [x, y], allow_unused=True)
    assert gx.names == x.names and gx.shape == x.shape
    if gy is not None:
        assert gy.names == y.names and gy.shape == y.shape


@pytest.mark.parametrize("name", BINARY_GRAD)
def test_binary_gradgradcheck(name):
    x, y = _binary_grad_inputs(name)
    assert gradgradcheck(getattr(ew, name), x, y)


def test_where_gradients():
    rng = np.random.default_rng(2)
    c = _t(rng.random((2, 3)) < 0.5, ("a", None))
    x = _t(rng.normal(size=(3,)), ("b",), True)
    y = _t(rng.normal(size=(2, 1)), ("a", None), True)
    assert gradcheck(lambda p, q: nt.where(c, p, q), x, y)
    assert gradgradcheck(lambda p, q: nt.where(c, p * p, q), x, y)
    assert gradcheck(lambda p: nt.where(c, p, 0.0), x)


@pytest.mark.parametrize("fn", [lambda t: 2 - t, lambda t: 2 / t, lambda t: 2**t, lambda t: t**3,
                                lambda t: t**0.5, lambda t: 7 % t, lambda t: t * 2.5, lambda t: 1 + t])
def test_gradients_with_scalar_operands(fn):
    x = _grad_input("sqrt", (2, 2), ("a", None))
    assert gradcheck(fn, x)
    assert gradgradcheck(fn, x)


def test_pow_gradient_of_zero_exponent_and_negative_base():
    x = _t(np.array([0.0, 2.0, -1.0]), ("x",), True)
    (g,) = nt.grad((x**0).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0])  # not nan at 0
    t = _t(np.array([1.0, 2.0]), ("x",), True)
    (g,) = nt.grad(((-2.0) ** t).sum(), t)  # d/dt of (-2)**t is taken as 0 (log of a negative base)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])
    (g,) = nt.grad((2.0**t).sum(), t)
    assert_close(g, np.log(2.0) * 2.0 ** np.array([1.0, 2.0]))


def test_comparisons_carry_no_gradient():
    x = _t(np.array([1.0, 2.0]), ("x",), True)
    for out in (x > 1.5, x == x, x.isnan(), (x > 0).logical_not()):
        assert not out.requires_grad
        assert out.grad_fn is None


# ----------------------------------------------------------------------------- backends


def test_mixing_backends_raises(backend):
    other = "array_api_strict" if backend.name == "numpy" else "numpy"
    x = _t(np.ones(2), ("x",))
    backends.use_cpu_backend(other)
    try:
        y = _t(np.ones(2), ("x",))
    finally:
        backends.use_cpu_backend(backend.name)
    for fn in (lambda: x + y, lambda: y * x, lambda: nt.where(x > 0, x, y), lambda: nt.maximum(y, x)):
        with pytest.raises(ValueError) as info:
            fn()
        msg = str(info.value)
        assert "numpy" in msg and "array_api_strict" in msg
        assert "different devices or backends" in msg
        assert ".to(device)" in msg


def test_positive_is_the_tensor_itself_as_in_pytorch():
    t = nt.randn(2, 3, names=("a", "b"))
    assert (+t) is t and nt.positive(t) is t and t.positive() is t
    with pytest.raises(TypeError, match="positive: not defined for bool tensors"):
        +nt.tensor([True, False])


@pytest.mark.parametrize("op", ["pow", "floor_divide", "remainder", "fmod"])
@pytest.mark.parametrize("shape", [(2,), (0, 3)])
def test_arithmetic_of_two_bools_is_refused_as_in_pytorch_where_numpy_makes_int8(op, shape):
    fn = getattr(nt, op)
    a = nt.ones(*shape, dtype="bool", names=("i",) + (None,) * (len(shape) - 1))
    for x, y in ((a, a), (a, True), (True, a)):
        with pytest.raises(TypeError, match=f"{op}: not defined for two bool operands .NumPy's result is int8"):
            fn(x, y)
    one = fn(a, nt.ones(*shape, dtype="int64"))  # one bool operand: NumPy's promotion, a number
    assert one.dtype == nt.int64 and one.names == a.names
    np.testing.assert_array_equal(one.numpy(), getattr(np, op if op != "pow" else "power")(a.numpy(), np.ones(shape, np.int64)))
