"""NumPy's protocols on tensors (ufuncs, array functions) and ``nt.lift``: values against NumPy,
names per each op's rule, gradients, ``axis=``/``keepdims=`` translation, and the errors for what
is not mapped."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import numpy_protocols
from namedtensor.numpy_protocols import lift
from namedtensor.tensor import install_methods
from namedtensor.testing import gradcheck, gradgradcheck

install_methods(numpy_protocols.METHODS)

pytestmark = pytest.mark.usefixtures("backend")

WAYS_OUT = r"not supported on namedtensor tensors; convert with t\.numpy\(\) \(names are dropped\).*nt\.lift"


def pos(shape=(2, 3), names=("a", "b"), requires_grad=False, seed=0):
    a = np.random.default_rng(seed).uniform(0.5, 2.0, shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad), a


# ----------------------------------------------------------------------------- ufuncs

UNARY = ["negative", "absolute", "fabs", "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh",
         "sign", "floor", "ceil", "square", "reciprocal", "isnan", "isinf", "isfinite"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_ufunc_keeps_names_and_matches_numpy(name):
    t, a = pos()
    out = getattr(np, name)(t)
    assert isinstance(out, nt.Tensor) and out.names == ("a", "b")
    np.testing.assert_allclose(out.numpy(), getattr(np, name)(a), rtol=1e-12)


BINARY = ["add", "subtract", "multiply", "divide", "true_divide", "power", "float_power", "maximum", "minimum",
          "remainder", "floor_divide", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_ufunc_with_an_ndarray_in_either_order_keeps_names(name):
    t, a = pos()
    c = np.random.default_rng(1).uniform(0.5, 2.0, (3,))
    f = getattr(np, name)
    for out, expected in ((f(t, c), f(a, c)), (f(c, t), f(c, a))):
        assert isinstance(out, nt.Tensor) and out.names == ("a", "b")
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ufuncs(name):
    a = np.array([[True, False, True], [False, False, True]])
    c = np.array([True, False, False])
    t = nt.tensor(a, names=("a", "b"))
    f = getattr(np, name)
    for out, expected in ((f(t, c), f(a, c)), (f(c, t), f(c, a))):
        assert out.names == ("a", "b")
        np.testing.assert_array_equal(out.numpy(), expected)
    bitwise = {"logical_and": np.bitwise_and, "logical_or": np.bitwise_or, "logical_xor": np.bitwise_xor}[name]
    assert bitwise(c, t).names == ("a", "b")
    np.testing.assert_array_equal(bitwise(c, t).numpy(), f(c, a))
    np.testing.assert_array_equal((c & t).numpy(), c & a)
    np.testing.assert_array_equal(np.invert(t).numpy(), ~a)
    with pytest.raises(TypeError, match=r"np\.bitwise_and on non-boolean values is " + WAYS_OUT):
        np.bitwise_and(np.array([1, 2, 3]), nt.tensor(np.array([1, 0, 1]), names=("b",)))
    assert np.logical_not(t).names == ("a", "b")
    np.testing.assert_array_equal(np.logical_not(t).numpy(), ~a)


def test_binary_ufunc_of_two_tensors_unifies_names():
    x, a = pos(names=("a", None))
    y, b = pos(names=(None, "b"), seed=1)
    out = np.add(x, y)
    assert out.names == ("a", "b")
    np.testing.assert_allclose(out.numpy(), a + b)
    with pytest.raises(nt.NamesError, match="add"):
        np.add(x, pos(names=("b", "a"))[0])


def test_ndarray_operators_return_named_tensors():
    t, a = pos()
    c = np.arange(1.0, 4.0)
    for out, expected in ((c + t, c + a), (t + c, a + c), (c * t, c * a), (c - t, c - a), (c / t, c / a),
                          (c ** t, c ** a), (t ** c, a ** c), (c < t, c < a), (t >= c, a >= c), (c == t, c == a),
                          (np.float64(2.0) * t, 2.0 * a)):
        assert isinstance(out, nt.Tensor) and out.names == ("a", "b")
        np.testing.assert_allclose(out.numpy(), expected)


def test_matmul_ufunc_and_operator():
    t, a = pos()
    m = np.ones((3, 4))
    for out in (np.matmul(t, m), t @ m):
        assert out.names == ("a", None)
        np.testing.assert_allclose(out.numpy(), a @ m)
    out = m.T @ t.align_to("b", "a")
    assert out.names == (None, "a")


def test_ufunc_gradients_flow():
    t, _ = pos(requires_grad=True)
    c = np.arange(1.0, 4.0)
    assert gradcheck(np.exp, t)
    assert gradcheck(lambda x: np.multiply(c, x), t)
    assert gradcheck(lambda x: np.power(x, 3) + np.sqrt(x), t)
    assert gradgradcheck(lambda x: np.tanh(x) * c, t)
    y = np.sin(t)
    assert y.requires_grad and y.names == ("a", "b")
    y.sum().backward()
    assert t.grad.names == ("a", "b")
    np.testing.assert_allclose(t.grad.numpy(), np.cos(t.detach().numpy()))


def test_ufunc_out_tensor_is_written_in_place():
    t, a = pos()
    out = nt.zeros(2, 3, names=("a", "b"), dtype=nt.float64)
    assert np.exp(t, out=out) is out
    np.testing.assert_allclose(out.numpy(), np.exp(a))
    with pytest.raises(nt.NamesError):
        np.exp(t, out=nt.zeros(2, 3, names=("x", "y"), dtype=nt.float64))
    with pytest.raises(TypeError, match=r"np\.exp on a ndarray with a tensor out= is " + WAYS_OUT):
        np.exp(a, out=out)
    total = nt.zeros(3, names=("b",), dtype=nt.float64)
    assert np.add.reduce(t, axis=0, out=total) is total
    np.testing.assert_allclose(total.numpy(), a.sum(axis=0))


@pytest.mark.parametrize("make", [
    lambda t, a: np.add(t, 1.0, out=np.zeros((2, 3))),
    lambda t, a: np.add(a, t, out=a),
    lambda t, a: np.exp(t, out=(np.zeros((2, 3)),)),
])
def test_ufunc_ndarray_out_is_refused(make):
    t, a = pos()
    with pytest.raises(TypeError, match=r"out= must be one namedtensor tensor.*drop the names"):
        make(t, a)


def test_inplace_operator_on_ndarray_is_refused():
    t, _ = pos()
    a = np.zeros((2, 3))
    with pytest.raises(TypeError, match="np.add: out= must be one namedtensor tensor"):
        a += t


def test_ufunc_options_are_refused():
    t, _ = pos()
    with pytest.raises(TypeError, match=r"np\.exp: the option dtype= is not supported"):
        np.exp(t, dtype=np.float32)
    with pytest.raises(TypeError, match=r"np\.add: the option where= is not supported"):
        np.add(t, 1.0, where=np.ones((2, 3), dtype=bool))


@pytest.mark.parametrize("call, fragment", [
    (lambda t: np.arctan(t), r"np\.arctan is "),
    (lambda t: np.add.outer(t, t), r"np\.add\.outer is "),
    (lambda t: np.subtract.reduce(t), r"np\.subtract\.reduce is "),
    (lambda t: np.add.reduceat(t, [0, 1]), r"np\.add\.reduceat is "),
    (lambda t: np.maximum.accumulate(t), r"np\.maximum\.accumulate is "),
])
def test_unmapped_ufuncs_and_methods_raise(call, fragment):
    t, _ = pos()
    with pytest.raises(TypeError, match=fragment + WAYS_OUT):
        call(t)


@pytest.mark.parametrize("ufunc, np_fn, names", [
    (np.add, np.sum, ("b",)), (np.multiply, np.prod, ("b",)), (np.maximum, np.max, ("b",)),
    (np.minimum, np.min, ("b",)),
])
def test_ufunc_reduce_defaults_to_axis_0(ufunc, np_fn, names):
    t, a = pos()
    out = ufunc.reduce(t)
    assert out.names == names
    np.testing.assert_allclose(out.numpy(), np_fn(a, axis=0))
    kept = ufunc.reduce(t, axis=1, keepdims=True)
    assert kept.names == ("a", "b") and kept.shape == (2, 1)
    np.testing.assert_allclose(kept.numpy(), np_fn(a, axis=1, keepdims=True))
    assert ufunc.reduce(t, axis=None).names == ()


def test_logical_reduce_and_accumulate():
    b = np.array([[True, False, True], [True, True, False]])
    t = nt.tensor(b, names=("a", "b"))
    np.testing.assert_array_equal(np.logical_and.reduce(t, axis=1).numpy(), b.all(axis=1))
    np.testing.assert_array_equal(np.logical_or.reduce(t).numpy(), b.any(axis=0))
    x, a = pos()
    for ufunc, scan in ((np.add, np.cumsum), (np.multiply, np.cumprod)):
        out = ufunc.accumulate(x, axis=1)
        assert out.names == ("a", "b")
        np.testing.assert_allclose(out.numpy(), scan(a, axis=1))


# ----------------------------------------------------------------------------- array functions

REDUCTIONS = [(np.sum, {}), (np.mean, {}), (np.prod, {}), (np.max, {}), (np.min, {}), (np.amax, {}),
              (np.amin, {}), (np.std, {}), (np.var, {}), (np.std, {"ddof": 1}), (np.var, {"ddof": 1})]


@pytest.mark.parametrize("fn, extra", REDUCTIONS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_reductions_translate_axis_and_keepdims(fn, extra):
    t, a = pos((2, 3, 4), ("a", "b", "c"))
    cases = [(None, False, ()), (1, False, ("a", "c")), (-1, True, ("a", "b", "c")), ((0, 2), False, ("b",)),
             ("b", False, ("a", "c"))]
    for axis, keepdims, names in cases:
        out = fn(t, axis=axis, keepdims=keepdims, **extra)
        assert out.names == names, (axis, keepdims)
        np_axis = 1 if axis == "b" else axis
        np.testing.assert_allclose(out.numpy(), fn(a, axis=np_axis, keepdims=keepdims, **extra), rtol=1e-12)
    np.testing.assert_allclose(fn(t, 0, **extra).numpy(), fn(a, 0, **extra))  # axis given by position


@given(axis=st.integers(-3, 2), keepdims=st.booleans())
def test_sum_and_mean_axis_parity(axis, keepdims):
    t, a = pos((2, 3, 4), ("a", None, "c"))
    for fn in (np.sum, np.mean):
        out = fn(t, axis=axis, keepdims=keepdims)
        expected_names = list(t.names)
        if keepdims:
            assert out.names == t.names
        else:
            del expected_names[axis]
            assert out.names == tuple(expected_names)
        np.testing.assert_allclose(out.numpy(), fn(a, axis=axis, keepdims=keepdims))


def test_any_all_argmax_argmin():
    t, a = pos((2, 3), ("a", "b"))
    for fn in (np.argmax, np.argmin):
        assert fn(t).names == ()
        assert int(fn(t).item()) == fn(a)
        out = fn(t, axis=1)
        assert out.names == ("a",)
        np.testing.assert_array_equal(out.numpy(), fn(a, axis=1))
        assert fn(t, axis=0, keepdims=True).names == ("a", "b")
    m = t > 1.0
    for fn in (np.any, np.all):
        assert fn(m, axis=0).names == ("b",)
        np.testing.assert_array_equal(fn(m, axis=0).numpy(), fn(a > 1.0, axis=0))


def test_reduction_gradients():
    t, _ = pos((2, 3), ("a", "b"), requires_grad=True)
    assert gradcheck(lambda x: np.sum(x, axis=1), t)
    assert gradcheck(lambda x: np.mean(x, axis=0, keepdims=True), t)
    assert gradcheck(lambda x: np.std(x, axis=1), t)
    assert gradcheck(lambda x: np.cumsum(x, axis=1), t)


def test_reduction_options_are_refused():
    t, _ = pos()
    with pytest.raises(TypeError, match=r"np\.sum: the option dtype= is not supported"):
        np.sum(t, dtype=np.float32)
    with pytest.raises(TypeError, match=r"np\.mean: the option out= is not supported"):
        np.mean(t, out=np.zeros(()))


def test_concatenate_stack_where():
    x, a = pos()
    y, b = pos(seed=1)
    out = np.concatenate([x, y], axis=1)
    assert out.names == ("a", "b")
    np.testing.assert_allclose(out.numpy(), np.concatenate([a, b], axis=1))
    out = np.concatenate([x, b], axis="a")  # an ndarray joins as an unnamed constant
    assert out.names == ("a", "b")
    np.testing.assert_allclose(out.numpy(), np.concatenate([a, b]))
    out = np.stack([x, y], axis=1)
    assert out.names == ("a", None, "b")
    np.testing.assert_allclose(out.numpy(), np.stack([a, b], axis=1))
    out = np.where(x > 1.0, x, b)
    assert out.names == ("a", "b")
    np.testing.assert_allclose(out.numpy(), np.where(a > 1.0, a, b))
    with pytest.raises(nt.NamesError, match="cat"):
        np.concatenate([x, x.rename("b", "a")])
    with pytest.raises(TypeError, match=r"np\.where with one argument .*" + WAYS_OUT):
        np.where(x > 1.0)
    with pytest.raises(TypeError, match=r"np\.concatenate: axis=None flattens"):
        np.concatenate([x, y], axis=None)


def test_joining_gradients():
    x, _ = pos(requires_grad=True)
    y, _ = pos(seed=1, requires_grad=True)
    assert gradcheck(lambda p, q: np.concatenate([p, q], axis=1), x, y)
    assert gradcheck(lambda p, q: np.stack([p, q]), x, y)
    assert gradcheck(lambda p, q: np.where(p > 1.0, p, q), x, y)


def test_einsum_letters_are_positions_and_take_the_dims_names():
    x, a = pos((2, 3), ("batch", "d"))
    w, b = pos((3, 4), ("d", "out"), seed=1)
    for spec in ("ij,jk->ik", "ij,jk"):
        out = np.einsum(spec, x, w)
        assert out.names == ("batch", "out")
        np.testing.assert_allclose(out.numpy(), np.einsum(spec, a, b))
    out = np.einsum("ij,jk->ki", x, b, optimize=True)  # an ndarray operand: its dims take the letters' names
    assert out.names == (None, "batch")
    assert np.einsum("ij->", x).names == ()
    xg, _ = pos((2, 3), ("batch", "d"), requires_grad=True)
    wg, _ = pos((3, 4), ("d", "out"), seed=1, requires_grad=True)
    assert gradcheck(lambda p, q: np.einsum("ij,jk->ik", p, q), xg, wg)
    with pytest.raises(nt.NamesError, match="the letter 'j' labels dims named 'd' and 'out'"):
        np.einsum("ij,kj->ik", x, w)
    with pytest.raises(TypeError, match=r"np\.einsum with a letter repeated in one operand"):
        np.einsum("ii", nt.tensor(np.eye(3)))
    with pytest.raises(ValueError, match="does not match the operands' ranks"):
        np.einsum("ijk,jk->i", x, w)


def test_matmul_function():
    x, a = pos((2, 3), ("batch", "d"))
    out = np.matmul(x, np.ones((3, 4)))
    assert out.names == ("batch", None)
    np.testing.assert_allclose(out.numpy(), a @ np.ones((3, 4)))


def test_transpose_moveaxis_swapaxes():
    t, a = pos((2, 3, 4), ("a", "b", "c"))
    cases = [(np.transpose(t), np.transpose(a), ("c", "b", "a")),
             (np.transpose(t, (1, 0, 2)), np.transpose(a, (1, 0, 2)), ("b", "a", "c")),
             (np.moveaxis(t, 0, -1), np.moveaxis(a, 0, -1), ("b", "c", "a")),
             (np.moveaxis(t, [0, 1], [2, 0]), np.moveaxis(a, [0, 1], [2, 0]), ("b", "c", "a")),
             (np.moveaxis(t, "c", 0), np.moveaxis(a, 2, 0), ("c", "a", "b")),
             (np.swapaxes(t, 0, 2), np.swapaxes(a, 0, 2), ("c", "b", "a"))]
    for out, expected, names in cases:
        assert out.names == names
        np.testing.assert_array_equal(out.numpy(), expected)
    tg, _ = pos((2, 3), requires_grad=True)
    assert gradcheck(np.transpose, tg)


def test_reshape_follows_the_names_rule():
    t, a = pos((2, 3), ("a", "b"))
    assert np.reshape(t, (6,)).names == (None,)  # the merged dims' names cannot be kept
    assert np.reshape(t, (2, 3, 1)).names == ("a", "b", None)
    u = t.rename(None)
    for out in (np.reshape(u, (3, 2)), np.reshape(u, -1), np.reshape(u, shape=(3, 2))):
        assert set(out.names) == {None}
        np.testing.assert_array_equal(out.numpy(), np.reshape(a, out.shape))
    with pytest.raises(TypeError, match="only reshape.*in C order"):
        np.reshape(u, (3, 2), order="F")


def test_clip_squeeze_expand_dims():
    t, a = pos((2, 1, 3), ("a", "b", "c"))
    for out in (np.clip(t, 0.8, 1.5), np.clip(t, a_min=None, a_max=1.5)):
        assert out.names == ("a", "b", "c")
    np.testing.assert_allclose(np.clip(t, 0.8, 1.5).numpy(), np.clip(a, 0.8, 1.5))
    for fn in (np.round, np.around):
        assert fn(t).names == ("a", "b", "c")
        np.testing.assert_array_equal(fn(t).numpy(), np.round(a))
    with pytest.raises(TypeError, match=r"np\.round with decimals other than 0 is " + WAYS_OUT):
        np.round(t, 2)
    assert np.squeeze(t).names == ("a", "c")
    assert np.squeeze(t, axis=1).names == ("a", "c")
    assert np.squeeze(t, axis="b").shape == (2, 3)
    out = np.expand_dims(t, 0)
    assert out.names == (None, "a", "b", "c") and out.shape == (1, 2, 1, 3)
    out = np.expand_dims(t, (0, -1))
    assert out.shape == np.expand_dims(a, (0, -1)).shape and out.names == (None, "a", "b", "c", None)
    tg, _ = pos(requires_grad=True)
    assert gradcheck(lambda x: np.clip(x, 0.8, 1.5), tg)


def test_scans_and_sorting():
    t, a = pos((2, 3), ("a", "b"))
    for fn in (np.cumsum, np.cumprod):
        out = fn(t, axis=0)
        assert out.names == ("a", "b")
        np.testing.assert_allclose(out.numpy(), fn(a, axis=0))
        with pytest.raises(TypeError, match=rf"np\.{fn.__name__}: axis=None flattens"):
            fn(t)
    v, va = pos((4,), ("n",))
    np.testing.assert_allclose(np.cumsum(v).numpy(), np.cumsum(va))
    for kwargs in ({}, {"axis": 0}, {"kind": "stable"}):
        out = np.sort(t, **kwargs)
        assert out.names == ("a", "b")
        np.testing.assert_array_equal(out.numpy(), np.sort(a, **kwargs))
        idx = np.argsort(t, **kwargs)
        assert idx.names == ("a", "b")
        np.testing.assert_array_equal(idx.numpy(), np.argsort(a, **kwargs))


def test_functions_without_dims_run_on_the_values():
    t, a = pos()
    assert np.shape(t) == (2, 3) and np.ndim(t) == 2 and np.size(t) == 6
    assert np.allclose(t, a) and np.array_equal(t, t) and not np.array_equal(t, a + 1)


def test_asarray_still_converts_explicitly():
    t, a = pos()
    for arr in (np.asarray(t), np.array(t)):
        assert type(arr) is np.ndarray
        np.testing.assert_array_equal(arr, a)


@pytest.mark.parametrize("call, fragment", [
    (lambda t: np.diff(t), r"np\.diff is "),
    (lambda t: np.tensordot(t, t), r"np\.tensordot is "),
    (lambda t: np.dot(t, t.T), r"np\.dot is "),
    (lambda t: np.linalg.norm(t), r"numpy\.linalg\.norm is "),
    (lambda t: np.mean(t, where=np.ones((2, 3), dtype=bool)), r"np\.mean: the option where= is "),
    (lambda t: np.sort(t, axis=None), r"np\.sort: axis=None flattens"),
])
def test_unmapped_functions_raise_with_the_ways_out(call, fragment):
    t, _ = pos()
    with pytest.raises(TypeError, match=fragment):
        call(t)


def test_unmapped_function_message_pins_the_ways_out():
    t, _ = pos()
    with pytest.raises(TypeError, match=r"np\.diff is " + WAYS_OUT):
        np.diff(t)


# ----------------------------------------------------------------------------- lift


def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_lift_aligns_inputs_and_names_outputs():
    x, a = pos((2, 3, 4), ("seq", "batch", "embed"))
    pool = lift(lambda arr: arr.mean(axis=1), in_dims=("batch", "seq", "embed"), out_dims=("batch", "embed"))
    out = pool(x)
    assert out.names == ("batch", "embed")
    np.testing.assert_allclose(out.numpy(), a.transpose(1, 0, 2).mean(axis=1))
    assert pool.__name__ == "lifted_<lambda>"


def test_lift_several_inputs_outputs_and_keyword_arguments():
    q, qa = pos((2, 3), ("q", "d"))
    k, ka = pos((4, 3), ("k", "d"), seed=1)

    def attend(q, k, scale=1.0):
        s = q @ k.T * scale
        return s, _np_softmax(s)

    f = lift(attend, in_dims=[("q", "d"), ("k", "d")], out_dims=[("q", "k"), ("q", "k")])
    scores, probs = f(q, k.align_to("d", "k"), scale=0.5)
    assert scores.names == probs.names == ("q", "k")
    np.testing.assert_allclose(scores.numpy(), qa @ ka.T * 0.5)
    np.testing.assert_allclose(probs.numpy(), _np_softmax(qa @ ka.T * 0.5))


def test_lift_errors():
    x, _ = pos((2, 3), ("batch", "embed"))
    f = lift(lambda a: a.sum(0), in_dims=("batch", "embed"), out_dims=("embed",))
    with pytest.raises(nt.NamesError, match=r"lift\(<lambda>\): input 0 has names \('batch', 'seq'\), but the "
                                            r"function expects exactly \('batch', 'embed'\) \(in any order\)"):
        f(x.rename(embed="seq"))
    with pytest.raises(nt.NamesError, match="expects exactly"):
        f(x.rename("batch", None))
    with pytest.raises(TypeError, match=r"expected 1 tensor\(s\) for in_dims"):
        f(x, x)
    with pytest.raises(TypeError, match="input 0 must be a Tensor, got ndarray"):
        f(np.ones((2, 3)))
    bad_rank = lift(lambda a: a, in_dims=("batch", "embed"), out_dims=("embed",))
    with pytest.raises(ValueError, match=r"output 0 has 2 dim\(s\) \(shape \(2, 3\)\), but out_dims gives 1 names"):
        bad_rank(x)
    two = lift(lambda a: (a,), in_dims=("batch", "embed"), out_dims=[("batch", "embed"), ("batch", "embed")])
    with pytest.raises(ValueError, match=r"returned 1 output\(s\), out_dims names 2"):
        two(x)
    with pytest.raises(TypeError, match="in_dims must be a tuple of dim names"):
        lift(lambda a: a, in_dims="batch", out_dims=("batch",))


def test_lift_refuses_inputs_that_require_grad():
    x, a = pos((2, 3), ("batch", "embed"), requires_grad=True)
    f = lift(lambda arr: arr * 2, in_dims=("batch", "embed"), out_dims=("batch", "embed"))
    with pytest.raises(RuntimeError, match=r"input 0 requires grad, but no gradient passes through a lifted "
                                           r"function .*detach\(\)"):
        f(x)
    out = f(x.detach())
    assert not out.requires_grad
    np.testing.assert_allclose(out.numpy(), a * 2)
    with nt.no_grad():
        assert f(x).names == ("batch", "embed")
