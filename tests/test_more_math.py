"""More of PyTorch's math and helpers (issue 15): xlogy, sinc, i0, heaviside (and their in-place forms), addmv,
addbmm, chain_matmul, isclose, allclose, is_tensor, is_floating_point, numel, clone, from_numpy, t.where,
get_default_dtype/set_default_dtype and inference_mode: values against PyTorch and SciPy, names (Hypothesis),
gradients (gradcheck, gradgradcheck), errors with their op's name, and dry runs on the meta backend."""

import numpy as np
import pytest
import scipy.special as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.backends import host
from namedtensor.backends.base import Backend
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")
few = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=15)


def _t(a, names=None, requires_grad=False):
    return nt.tensor(a, names=names, requires_grad=requires_grad)


def _torch(a):
    return torch.from_numpy(np.array(a))


# ----------------------------------------------------------------------------- xlogy, sinc, i0, heaviside

UNARY = {"sinc": (torch.sinc, (-3, 3)), "i0": (torch.i0, (-25, 25))}


@pytest.mark.parametrize("name", sorted(UNARY))
@few
@given(data=st.data())
def test_unary_matches_pytorch_and_keeps_names(name, data):
    ref, (lo, hi) = UNARY[name]
    shape, names = data.draw(nts.named_shapes(max_dims=3))
    a = data.draw(nts.arrays(shape, low=lo, high=hi))
    if a.size:
        a.reshape(-1)[0] = 0.0
    t = _t(a, names)
    for out in (getattr(nt, name)(t), getattr(t, name)()):
        assert out.names == names and out.dtype == nt.float64
        assert_close(out, ref(_torch(a)).numpy(), rtol=1e-13, atol=1e-15)


def test_special_values_and_integer_input():
    a = np.array([0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 700.0])
    assert_close(nt.i0(_t(a)), torch.i0(_torch(a)).numpy(), rtol=1e-13)
    assert_close(nt.sinc(_t(a)), torch.sinc(_torch(a)).numpy(), rtol=1e-13, atol=1e-16)
    ints = nt.tensor([0, 1, 2], names=("x",))
    assert nt.i0(ints).dtype == nt.float64 and nt.sinc(ints).tolist()[0] == 1.0
    assert_close(nt.xlogy(ints, ints), np.array([0.0, 0.0, 2 * np.log(2)]))


def test_generic_bessel_functions_against_scipy():
    # the series every backend without SciPy runs (array-api-strict, CuPy without its own, the meta shapes)
    x = np.concatenate([np.linspace(-40, 40, 2001), [0.0, 1e-300, -1e-9, 20.0, 20.000001, 700.0]])
    B = host()
    for order, ref in ((0, sp.i0), (1, sp.i1)):
        got = Backend._bessel_i(B, x, order)
        assert_close(got, ref(x), rtol=1e-14, atol=0)
        x32 = x.astype(np.float32)[np.abs(x) < 80]
        got32 = Backend._bessel_i(B, x32, order)
        assert got32.dtype == np.float32
        assert_close(got32, ref(x32.astype(np.float64)), rtol=1e-6, atol=0)
    assert np.isnan(Backend.i0(B, np.array([np.inf, -np.inf, np.nan]))).all()


@few
@given(pair=nts.broadcastable_names(max_dims=3))
def test_binary_ops_match_pytorch_and_unify_names(pair):
    (sa, na), (sb, nb) = pair
    rng = np.random.default_rng(0)
    a = np.where(rng.random(sa) < 0.3, 0.0, rng.uniform(-2, 2, sa))
    b = np.where(rng.random(sb) < 0.3, 0.0, rng.uniform(0, 3, sb))
    expected_names = nt.broadcast_to(_t(a, na), np.broadcast_shapes(sa, sb)).names
    out = nt.xlogy(_t(a, na), _t(b, nb))
    assert out.names == tuple(x if x is not None else y for x, y in
                              zip(expected_names, (None,) * (len(expected_names) - len(nb)) + nb))
    assert_close(out, torch.xlogy(_torch(a), _torch(b)).numpy(), rtol=1e-14)
    step = nt.heaviside(_t(a, na), _t(b, nb))
    assert step.names == out.names
    assert_close(step, torch.heaviside(_torch(a), _torch(b)).numpy())
    assert_close(_t(a, na).xlogy(2.5), torch.xlogy(_torch(a), 2.5).numpy(), rtol=1e-14)
    assert_close(nt.xlogy(2.5, _t(b, nb)), torch.xlogy(2.5, _torch(b)).numpy(), rtol=1e-14)


def test_xlogy_edge_cases():
    x = _t([0.0, 0.0, 0.0, 1.0, 2.0])
    y = _t([0.0, np.inf, np.nan, 0.0, -1.0])
    assert_close(nt.xlogy(x, y), torch.xlogy(_torch(x.numpy()), _torch(y.numpy())).numpy())
    assert nt.xlogy(nt.tensor([1.0, 2.0]), 0).tolist() == [-np.inf, -np.inf]
    assert nt.xlogy(nt.tensor([1.0], dtype=nt.float32), 2.0).dtype == nt.float32


def test_gradients():
    rng = np.random.default_rng(1)
    x = _t(rng.uniform(0.2, 2, (3, 2)), ("batch", None), requires_grad=True)
    y = _t(rng.uniform(0.2, 2, (2,)), (None,), requires_grad=True)
    cases = [(nt.sinc, (x,)), (nt.i0, (x,)), (lambda t: nt.i0(-t), (x,)), (nt.xlogy, (x, y)),
             (lambda a: nt.xlogy(a, 3.0), (x,)), (lambda b: nt.xlogy(2.0, b), (y,)),
             (lambda a, b: nt.heaviside(a - 1, b), (x, y))]
    for fn, inputs in cases:
        assert gradcheck(fn, *inputs)
        assert gradgradcheck(fn, *inputs)
    nt.sinc(x).sum().backward()
    assert x.grad.names == ("batch", None)
    # against PyTorch, at 0 too (sinc's gradient there is 0, xlogy's for x is 0 where x == 0)
    a = np.array([0.0, 0.5, -1.3, 2.0])
    for name in ("sinc", "i0"):
        ours = _t(a, requires_grad=True)
        getattr(nt, name)(ours).sum().backward()
        theirs = torch.tensor(a, requires_grad=True)
        getattr(torch, name)(theirs).sum().backward()
        assert_close(ours.grad, theirs.grad.numpy(), rtol=1e-13, atol=1e-15)
    ours, other = _t(a, requires_grad=True), _t([1.0, 0.0, 2.0, 3.0], requires_grad=True)
    nt.xlogy(ours, other).sum().backward()
    theirs, their_other = torch.tensor(a, requires_grad=True), torch.tensor([1.0, 0.0, 2.0, 3.0], requires_grad=True)
    torch.xlogy(theirs, their_other).sum().backward()
    assert_close(ours.grad, theirs.grad.numpy())
    assert_close(other.grad, their_other.grad.numpy())
    # heaviside's values get the gradient where the input is 0, the input none
    h, v = _t([-1.0, 0.0, 2.0], requires_grad=True), _t([0.5, 0.5, 0.5], requires_grad=True)
    nt.heaviside(h, v).sum().backward()
    assert h.grad.tolist() == [0.0, 0.0, 0.0] and v.grad.tolist() == [0.0, 1.0, 0.0]


def test_in_place_forms():
    a = np.array([[0.0, 0.5], [1.5, -2.0]])
    for name, args, ref in (("sinc", (), torch.sinc(_torch(a))), ("i0", (), torch.i0(_torch(a))),
                            ("xlogy", (2.0,), torch.xlogy(_torch(a), 2.0)),
                            ("heaviside", (nt.tensor(0.5, dtype=nt.float64),),
                             torch.heaviside(_torch(a), torch.tensor(0.5, dtype=torch.float64)))):
        t = _t(a.copy(), ("batch", None))
        assert getattr(t, name + "_")(*args) is t
        assert t.names == ("batch", None)
        assert_close(t, ref.numpy(), rtol=1e-14)


def test_errors():
    t = nt.tensor([1.0, 2.0], names=("x",))
    with pytest.raises(TypeError, match="heaviside: input and values must have one dtype"):
        nt.heaviside(t, nt.tensor([0.5], dtype=nt.float64))
    with pytest.raises(TypeError, match="heaviside: values must be a Tensor"):
        nt.heaviside(t, 0.5)
    with pytest.raises(nt.NamesError, match="xlogy: dims .* do not match"):
        nt.xlogy(t, t.rename("y"))
    with pytest.raises(TypeError, match="xlogy: at least one operand must be a Tensor"):
        nt.xlogy(1.0, 2.0)
    with pytest.raises(TypeError, match="sinc: expected a Tensor"):
        nt.sinc([1.0])


# ----------------------------------------------------------------------------- addmv, addbmm, chain_matmul


def test_addmv_addbmm_chain_matmul_match_pytorch():
    rng = np.random.default_rng(2)
    inp, mat, vec = rng.normal(size=(3,)), rng.normal(size=(3, 4)), rng.normal(size=(4,))
    out = nt.addmv(_t(inp, ("out",)), _t(mat, ("out", "in")), _t(vec, ("in",)), beta=0.5, alpha=2.0)
    assert out.names == ("out",)
    assert_close(out, torch.addmv(_torch(inp), _torch(mat), _torch(vec), beta=0.5, alpha=2.0).numpy(), rtol=1e-14)
    assert _t(inp).addmv(_t(mat), _t(vec)).names == (None,)
    b1, b2, m = rng.normal(size=(5, 3, 4)), rng.normal(size=(5, 4, 2)), rng.normal(size=(3, 2))
    out = nt.addbmm(_t(m, ("row", "col")), _t(b1, ("batch", "row", "k")), _t(b2, ("batch", "k", "col")), beta=2.0)
    assert out.names == ("row", "col")
    assert_close(out, torch.addbmm(_torch(m), _torch(b1), _torch(b2), beta=2.0).numpy(), rtol=1e-13)
    assert_close(_t(m).addbmm(_t(b1), _t(b2), alpha=0.5),
                 torch.addbmm(_torch(m), _torch(b1), _torch(b2), alpha=0.5).numpy(), rtol=1e-13)
    mats = [rng.normal(size=s) for s in ((2, 3), (3, 4), (4, 5))]
    out = nt.chain_matmul(_t(mats[0], ("a", "b")), _t(mats[1], ("b", "c")), _t(mats[2], ("c", "d")))
    assert out.names == ("a", "d")
    assert_close(out, mats[0] @ mats[1] @ mats[2], rtol=1e-13)
    one = _t(mats[0], ("a", "b"))
    assert nt.chain_matmul(one) is one


def test_addmv_addbmm_names_gradients_and_errors():
    rng = np.random.default_rng(3)
    inp = _t(rng.normal(size=(3,)), ("out",), requires_grad=True)
    mat = _t(rng.normal(size=(3, 4)), ("out", "in"), requires_grad=True)
    vec = _t(rng.normal(size=(4,)), ("in",), requires_grad=True)
    assert gradcheck(lambda a, b, c: nt.addmv(a, b, c, beta=0.3, alpha=1.5), inp, mat, vec)
    assert gradgradcheck(lambda a, b, c: nt.addmv(a, b, c), inp, mat, vec)
    b1 = _t(rng.normal(size=(2, 3, 4)), ("batch", "row", "k"), requires_grad=True)
    b2 = _t(rng.normal(size=(2, 4, 2)), ("batch", "k", "col"), requires_grad=True)
    m = _t(rng.normal(size=(3, 2)), ("row", "col"), requires_grad=True)
    assert gradcheck(lambda a, b, c: nt.addbmm(a, b, c, alpha=0.5), m, b1, b2)
    assert gradgradcheck(lambda a, b, c: nt.addbmm(a, b, c), m, b1, b2)
    assert gradcheck(lambda a, b: nt.chain_matmul(a, b, b.mT.rename("out2", "z")), mat, mat.mT.rename("in", "out2"))
    with pytest.raises(ValueError, match="addmv: expected operands of 2 and 1 dims"):
        nt.addmv(inp, mat, mat)
    with pytest.raises(nt.NamesError, match="addmv: .*'in'"):
        nt.addmv(inp, mat, vec.rename("feat"))
    with pytest.raises(nt.NamesError, match="addmv"):
        nt.addmv(inp.rename("in"), mat, vec)
    with pytest.raises(ValueError, match="addbmm: expected operands of 3 and 3 dims"):
        nt.addbmm(m, m, m)
    with pytest.raises(ValueError, match="chain_matmul: expected operands of 2 and 2 dims"):
        nt.chain_matmul(mat, vec)
    with pytest.raises(TypeError, match="chain_matmul: expected at least one matrix"):
        nt.chain_matmul()
    with pytest.raises(ValueError, match="chain_matmul: expected 2-D matrices"):
        nt.chain_matmul(vec)


# ----------------------------------------------------------------------------- isclose, allclose


@few
@given(pair=nts.broadcastable_names(max_dims=3), equal_nan=st.booleans())
def test_isclose_matches_pytorch_and_unifies_names(pair, equal_nan):
    (sa, na), (sb, nb) = pair
    pool = np.array([0.0, 1e-9, 1.0, 1.0 + 1e-6, 1.1, np.nan, np.inf, -np.inf])
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = rng.choice(pool, size=sa), rng.choice(pool, size=sb)
    out = nt.isclose(_t(a, na), _t(b, nb), equal_nan=equal_nan)
    assert out.dtype == nt.bool_
    assert out.names == (nt.broadcast_to(_t(a, na), np.broadcast_shapes(sa, sb)) + _t(b, nb)).names
    expected = torch.isclose(_torch(a), _torch(b), equal_nan=equal_nan)
    assert np.array_equal(out.numpy(), expected.numpy())
    assert nt.allclose(_t(a, na), _t(b, nb), equal_nan=equal_nan) == torch.allclose(
        *torch.broadcast_tensors(_torch(a), _torch(b)), equal_nan=equal_nan)


def test_isclose_tolerances_and_allclose_names():
    a = nt.tensor([1.0, 2.0, np.inf, -np.inf, 0.0], names=("x",))
    b = nt.tensor([1.0 + 1e-6, 2.1, np.inf, np.inf, 1e-9], names=("x",))
    ta, tb = _torch(a.numpy()), _torch(b.numpy())
    for kwargs in ({}, {"rtol": 0.1}, {"atol": 0.0, "rtol": 0.0}, {"atol": 1e-8, "rtol": 0}):
        assert a.isclose(b, **kwargs).tolist() == torch.isclose(ta, tb, **kwargs).tolist()
    ints = nt.tensor([1, 2, 3])
    assert nt.isclose(ints, nt.tensor([1, 2, 4])).tolist() == [True, True, False]
    assert nt.isclose(a, 1.0).names == ("x",)
    assert a.allclose(a) is True and a.allclose(b) is False and a.allclose(b, rtol=0.1) is False
    assert nt.allclose(a, a.rename("y")) is False  # names that would not broadcast, as nt.equal
    assert nt.allclose(a, a.rename(None)) is True
    with pytest.raises(ValueError, match="allclose: "):
        nt.allclose(a, nt.zeros(3))
    with pytest.raises(nt.NamesError, match="isclose: dims .* do not match"):
        nt.isclose(a, a.rename("y"))
    with pytest.raises(ValueError, match="isclose: rtol must be >= 0"):
        nt.isclose(a, b, rtol=-1)
    with pytest.raises(TypeError, match="allclose: equal_nan must be a bool"):
        nt.allclose(a, b, equal_nan="yes")
    with pytest.raises(TypeError, match="isclose: input must be a Tensor"):
        nt.isclose(1.0, a)


# ----------------------------------------------------------------------------- small helpers


def test_small_helpers():
    t = nt.tensor([[1.0, 2.0], [3.0, 4.0]], names=("batch", "feat"))
    assert nt.is_tensor(t) and not nt.is_tensor(t.numpy()) and not nt.is_tensor(1.0)
    assert nt.is_floating_point(t) and not nt.is_floating_point(nt.tensor([1]))
    assert nt.numel(t) == 4 and nt.numel(nt.zeros(0, 3)) == 0
    c = nt.clone(t)
    assert c.names == t.names and c.tolist() == t.tolist()
    c.add_(1.0)
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(TypeError, match="numel: input must be a Tensor"):
        nt.numel([1, 2])
    with pytest.raises(TypeError, match="is_floating_point: input must be a Tensor"):
        nt.is_floating_point(1.0)


def test_where_method_is_pytorchs():
    x = nt.tensor([[1.0, -2.0], [3.0, -4.0]], names=("batch", "feat"), dtype=nt.float64, requires_grad=True)
    y = nt.zeros(2, names=("feat",), dtype=nt.float64)
    out = x.where(x > 0, y)
    assert out.names == ("batch", "feat") and out.tolist() == [[1.0, 0.0], [3.0, 0.0]]
    assert out.tolist() == torch.tensor([[1.0, -2.0], [3.0, -4.0]]).where(
        torch.tensor([[True, False], [True, False]]), torch.zeros(2)).tolist()
    assert x.where(x > 0, 0.5).tolist() == [[1.0, 0.5], [3.0, 0.5]]
    assert gradcheck(lambda t: t.where(t > 0, y), x)
    with pytest.raises(nt.NamesError, match="where: "):
        x.where(x > 0, y.rename("batch"))


def test_from_numpy_shares_memory_on_numpy():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = nt.from_numpy(a, names=("batch", "feat"))
    assert t.names == ("batch", "feat") and t.dtype == nt.float64 and t.device == "cpu"
    assert t.tolist() == a.tolist()
    a[0, 0] = 10.0
    if nt.backends.cpu().name == "numpy":  # array-api-strict is another namespace: there it is a copy
        assert t[0, 0].item() == 10.0
    assert nt.from_numpy(np.array([1, 2], dtype=np.int32)).dtype == nt.int32
    with pytest.raises(TypeError, match="from_numpy: expected a NumPy array, got list"):
        nt.from_numpy([1.0, 2.0])
    with pytest.raises(TypeError, match="from_numpy: expected a NumPy array, got float64"):
        nt.from_numpy(np.float64(1.0))  # a NumPy scalar, as PyTorch refuses it


def test_default_dtype():
    assert nt.get_default_dtype() is nt.float32 and torch.get_default_dtype() == torch.float32
    try:
        nt.set_default_dtype(nt.float64)
        assert nt.get_default_dtype() is nt.float64
        assert nt.tensor([1.5]).dtype == nt.float64 and nt.zeros(2).dtype == nt.float64
        assert nt.randn(2).dtype == nt.float64 and nt.arange(0.0, 1.0, 0.5).dtype == nt.float64
        torch.set_default_dtype(torch.float64)
        assert nt.tensor([1 + 2j]).dtype.name == str(torch.tensor([1 + 2j]).dtype).removeprefix("torch.")
        nt.set_default_dtype("float32")
        assert nt.tensor([1.5]).dtype == nt.float32 and nt.tensor([1j]).dtype == nt.complex64
        with pytest.raises(TypeError, match="set_default_dtype: only nt.float32 and nt.float64"):
            nt.set_default_dtype(nt.float16)
        with pytest.raises(TypeError, match="set_default_dtype: only nt.float32 and nt.float64"):
            nt.set_default_dtype(nt.int64)
    finally:
        nt.set_default_dtype(nt.float32)
        torch.set_default_dtype(torch.float32)
    assert nt.tensor([1.5]).dtype == nt.float32


def test_inference_mode():
    x = nt.ones(2, requires_grad=True)
    with nt.inference_mode():
        assert not nt.is_grad_enabled()
        assert (x * 2).grad_fn is None
        with nt.inference_mode(False):
            assert nt.is_grad_enabled()
    assert nt.is_grad_enabled()

    @nt.inference_mode
    def bare(t):
        return nt.is_grad_enabled(), t * 2

    @nt.inference_mode()
    def called(t):
        return nt.is_grad_enabled()

    enabled, y = bare(x)
    assert not enabled and not y.requires_grad and not called(x) and nt.is_grad_enabled()
    with pytest.raises(TypeError, match="inference_mode: mode must be a bool"):
        nt.inference_mode("yes")


# ----------------------------------------------------------------------------- dry run


def test_dry_run_through_the_meta_backend():
    def model(x, w, v, batches):
        h = nt.xlogy(x, x.sinc().abs() + 1).i0().heaviside(x)
        y = nt.addmv(w.sum("in"), w, v)
        z = nt.addbmm(batches.sum(0).rename("in", "j"), batches, batches.rename(None, "k", "j"))
        return h, y, z, nt.chain_matmul(w, w.mT.rename("in", "in2")), nt.isclose(x, h)

    trace = nt.trace_shapes(model, nt.spec({"out": 3, "in": 4}), nt.spec({"out": 3, "in": 4}), nt.spec(("in",), (4,)),
                            nt.spec((None, "in", "k"), (2, 4, 4)))
    h, y, z, c, close = trace.result
    assert h.names == ("out", "in") and h.shape == (3, 4)
    assert y.names == ("out",) and z.shape == (4, 4) and c.names == ("out", "in2") and close.dtype == nt.bool_
    assert {"xlogy", "sinc", "i0", "heaviside", "isclose"} <= set(trace.ops)


def test_frombuffer_matches_torch_and_shares_a_writable_buffer():
    torch = pytest.importorskip("torch")
    raw = bytearray(np.arange(8, dtype=np.int32).tobytes())
    t = nt.frombuffer(raw, dtype=nt.int32, count=5, offset=8, names=("i",))
    assert t.names == ("i",) and t.dtype == nt.int32
    assert t.tolist() == torch.frombuffer(raw, dtype=torch.int32, count=5, offset=8).tolist() == [2, 3, 4, 5, 6]
    raw[8:12] = np.int32(40).tobytes()
    if nt.backends.cpu().name == "numpy":  # the other CPU backend copies
        assert t[0].item() == 40
    f = nt.frombuffer(np.arange(3.0).tobytes(), dtype=nt.float64, requires_grad=True)
    assert f.tolist() == [0.0, 1.0, 2.0] and f.requires_grad
    with pytest.raises(TypeError, match="frombuffer: dtype is required"):
        nt.frombuffer(raw, dtype=None)
    with pytest.raises(ValueError, match="frombuffer: "):
        nt.frombuffer(b"abc", dtype=nt.int32)  # 3 bytes hold no whole int32
