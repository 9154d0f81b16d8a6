"""The tensor API of PyTorch code (issue 15): unary and binary math beyond the core set, special
functions, ``lerp addcmul addcdiv nan_to_num threshold clamp_min clamp_max``, ``mm bmm mv addmm
baddbmm``, the random ones (``randperm randint_like bernoulli multinomial normal``), ``t.new_*`` and
``.data``: values against NumPy/SciPy, names (Hypothesis), gradients (gradcheck, gradgradcheck),
errors with their op's name, and dry runs on the meta backend."""

import numpy as np
import pytest
import scipy.special as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops import elementwise as ew
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")
per_op = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=8)

#: NumPy/SciPy reference and input range of every op of UNARY_EXTRA
UNARY_REF = {
    "acos": (np.arccos, (-0.95, 0.95)), "asin": (np.arcsin, (-0.95, 0.95)), "atan": (np.arctan, (-3, 3)),
    "sinh": (np.sinh, (-3, 3)), "cosh": (np.cosh, (-3, 3)), "asinh": (np.arcsinh, (-3, 3)),
    "acosh": (np.arccosh, (1.1, 4)), "atanh": (np.arctanh, (-0.95, 0.95)), "log2": (np.log2, (0.1, 4)),
    "log10": (np.log10, (0.1, 4)), "exp2": (np.exp2, (-3, 3)), "trunc": (np.trunc, (-3, 3)),
    "frac": (lambda a: a - np.trunc(a), (-3, 3)), "erfc": (sp.erfc, (-3, 3)), "erfinv": (sp.erfinv, (-0.95, 0.95)),
    "lgamma": (sp.gammaln, (0.1, 6)), "digamma": (sp.psi, (0.1, 6)),
}
#: the ops whose gradient is 0 almost everywhere: gradcheck away from the jumps
PIECEWISE = {"trunc", "frac"}
BINARY_REF = {
    "atan2": np.arctan2, "hypot": np.hypot, "logaddexp": np.logaddexp, "copysign": np.copysign, "fmod": np.fmod,
}


def _t(a, names, requires_grad=False):
    return nt.tensor(a, names=names, requires_grad=requires_grad)


def _away_from_integers(a):
    return np.where(np.abs(a - np.round(a)) < 0.1, a + 0.3, a)


def test_every_new_op_has_a_reference():
    assert set(UNARY_REF) == set(ew.UNARY_EXTRA)
    assert set(BINARY_REF) == set(ew.BINARY_EXTRA)


# ----------------------------------------------------------------------------- unary


@pytest.mark.parametrize("name", sorted(UNARY_REF))
@per_op
@given(data=st.data())
def test_unary_matches_numpy_and_keeps_names(name, data):
    ref, (lo, hi) = UNARY_REF[name]
    shape, names = data.draw(nts.named_shapes(max_dims=3))
    a = data.draw(nts.arrays(shape, low=lo, high=hi))
    t = _t(a, names)
    for out in (getattr(nt, name)(t), getattr(t, name)()):
        assert out.names == names and out.dtype == nt.float64
        assert_close(out, ref(a), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name", sorted(UNARY_REF))
def test_unary_gradients(name):
    lo, hi = UNARY_REF[name][1]
    a = np.random.default_rng(1).uniform(lo, hi, (3, 2))
    if name in PIECEWISE:
        a = _away_from_integers(a)
    x = _t(a, ("batch", None), requires_grad=True)
    fn = getattr(nt, name)
    assert gradcheck(fn, x)
    assert gradgradcheck(fn, x)
    fn(x).sum().backward()
    assert x.grad.names == ("batch", None)


@pytest.mark.parametrize("name", ["acos", "lgamma", "erfinv", "exp2", "log2"])
def test_unary_keeps_float32_and_computes_integers_in_float64(name):
    out = getattr(nt, name)(_t(np.array([0.25, 0.5], dtype=np.float32), ("x",)))
    assert out.dtype == nt.float32
    ints = np.array([0, 0]) if name in ("erfinv", "acos") else np.array([1, 2])  # inside the domain
    assert getattr(nt, name)(_t(ints, ("x",))).dtype == nt.float64


def test_polygamma_values_names_gradients_and_errors():
    a = np.array([[0.3, 1.7], [4.2, 9.0]])
    x = _t(a, ("r", "c"), requires_grad=True)
    for n in range(4):
        assert_close(nt.polygamma(n, x).detach(), sp.polygamma(n, a), rtol=1e-12)
        assert x.polygamma(n).names == ("r", "c")
    assert gradcheck(lambda t: nt.polygamma(2, t), x)
    assert gradgradcheck(lambda t: nt.polygamma(1, t), x)
    assert gradgradcheck(nt.lgamma, x)  # through digamma and trigamma
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="polygamma: n must be an int >= 0"):
            nt.polygamma(bad, x)
    with pytest.raises(TypeError, match="polygamma: expected a Tensor, got list"):
        nt.polygamma(1, [1.0])


def test_threshold_nan_to_num_clamp_min_clamp_max():
    a = np.array([[-2.0, 0.5], [1.0, 3.0]])
    x = _t(a, ("r", "c"), requires_grad=True)
    assert_close(nt.threshold(x, 0.75, -9.0).detach(), np.where(a > 0.75, a, -9.0))
    assert nt.threshold(x, 0.75, -9.0).names == ("r", "c")
    assert gradcheck(lambda t: nt.threshold(t, 0.75, -9.0), x)
    assert_close(x.clamp_min(0.6).detach(), np.maximum(a, 0.6))
    assert_close(nt.clamp_max(x, 0.6).detach(), np.minimum(a, 0.6))
    assert_close(x.clamp_min(_t(np.array([0.0, 1.0]), ("c",))).detach(), np.maximum(a, [0.0, 1.0]))
    with pytest.raises(TypeError, match="clamp_min: min must be a number or a tensor, got None"):
        nt.clamp_min(x, None)
    with pytest.raises(TypeError, match="threshold: value must be a number, got str"):
        nt.threshold(x, 0.5, "0")
    special = np.array([np.nan, np.inf, -np.inf, 1.5])
    y = _t(special, ("x",), requires_grad=True)
    assert_close(nt.nan_to_num(y).detach(), np.nan_to_num(special))
    assert_close(y.nan_to_num(1.0, 2.0, -3.0).detach(), np.nan_to_num(special, nan=1.0, posinf=2.0, neginf=-3.0))
    f32 = nt.nan_to_num(_t(special.astype(np.float32), ("x",)))
    assert f32.dtype == nt.float32 and f32.tolist()[1] == float(np.finfo(np.float32).max)
    assert nt.nan_to_num(_t(np.array([1, 2]), ("x",))).tolist() == [1, 2]
    nt.nan_to_num(y).sum().backward()
    assert y.grad.tolist() == [0.0, 0.0, 0.0, 1.0] and y.grad.names == ("x",)


# ----------------------------------------------------------------------------- binary


@pytest.mark.parametrize("name", sorted(BINARY_REF))
@per_op
@given(pair=nts.broadcastable_names(max_dims=3), data=st.data())
def test_binary_matches_numpy_and_unifies_names(name, pair, data):
    (sa, na), (sb, nb) = pair
    a = data.draw(nts.arrays(sa, low=0.2, high=3))
    b = data.draw(nts.arrays(sb, low=-3, high=-0.2))
    out = getattr(nt, name)(_t(a, na), _t(b, nb))
    assert out.names == nt.add(_t(a, na), _t(b, nb)).names  # rule 2, as every binary op
    assert_close(out, BINARY_REF[name](a, b), rtol=1e-13, atol=1e-14)
    assert_close(getattr(_t(a, na), name)(2.5), BINARY_REF[name](a, 2.5), rtol=1e-13, atol=1e-14)
    assert_close(getattr(nt, name)(2.5, _t(b, nb)), BINARY_REF[name](2.5, b), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name", sorted(BINARY_REF))
def test_binary_gradients(name):
    rng = np.random.default_rng(2)
    a = _t(rng.uniform(0.5, 2, (2, 3)), ("r", "c"), requires_grad=True)
    b = _t(rng.uniform(-2, -0.5, (3,)) if name != "fmod" else rng.uniform(0.7, 0.9, (3,)), ("c",),
           requires_grad=True)
    fn = getattr(nt, name)
    assert gradcheck(fn, a, b)
    assert gradgradcheck(fn, a, b)
    fn(a, b).sum().backward()
    assert a.grad.names == ("r", "c") and b.grad.names == ("c",)


def test_binary_names_mismatch_names_the_op():
    for name in BINARY_REF:
        with pytest.raises(nt.NamesError, match=f"^{name}: "):
            getattr(nt, name)(nt.ones(2, names=("a",)), nt.ones(2, names=("b",)))


def test_fmod_is_cs_remainder_and_copysign_gradient_is_pytorchs():
    a = np.array([-7.5, -2.0, 5.0, 7.25])
    assert_close(nt.fmod(_t(a, ("x",)), 2.0), np.array([-1.5, -0.0, 1.0, 1.25]))
    assert_close(nt.remainder(_t(a, ("x",)), 2.0), np.array([0.5, 0.0, 1.0, 1.25]))
    ints = nt.fmod(nt.tensor([-7, 7]), 3)
    assert ints.dtype == nt.int64 and ints.tolist() == [-1, 1]
    x = _t(np.array([-2.0, 0.0, 3.0]), ("x",), requires_grad=True)
    nt.copysign(x, -1.0).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, -1.0]


def test_lerp_addcmul_addcdiv():
    rng = np.random.default_rng(3)
    s, e, w = rng.normal(size=(2, 3)), rng.normal(size=(3,)), rng.uniform(0, 1, (2, 3))
    start, end = _t(s, ("r", "c"), True), _t(e, ("c",), True)
    weight = _t(w, (None, "c"), True)
    out = nt.lerp(start, end, weight)
    assert out.names == ("r", "c")
    assert_close(out.detach(), s + w * (e - s), rtol=1e-13, atol=1e-14)
    assert_close(start.lerp(end, 0.8).detach(), s + 0.8 * (e - s), rtol=1e-13, atol=1e-14)
    assert start.lerp(end, 1.0).detach().tolist() == np.broadcast_to(e, s.shape).tolist()  # exactly end
    assert gradcheck(nt.lerp, start, end, weight) and gradgradcheck(nt.lerp, start, end, weight)
    t1, t2 = _t(rng.normal(size=(2, 3)), ("r", None), True), _t(rng.uniform(1, 2, (3,)), ("c",), True)
    assert_close(nt.addcmul(start, t1, t2, value=0.5).detach(), s + 0.5 * t1.detach().numpy() * t2.detach().numpy())
    assert_close(start.addcdiv(t1, t2, value=-2).detach(), s - 2 * t1.detach().numpy() / t2.detach().numpy())
    assert nt.addcdiv(start, t1, t2).names == ("r", "c")
    assert gradcheck(lambda a, b, c: nt.addcdiv(a, b, c, value=0.3), start, t1, t2)
    with pytest.raises(nt.NamesError, match="^lerp: "):
        nt.lerp(start, nt.ones(3, names=("k",), dtype=nt.float64), 0.5)
    with pytest.raises(nt.NamesError, match="^addcmul: "):
        nt.addcmul(start, t1, nt.ones(3, names=("k",), dtype=nt.float64))
    with pytest.raises(TypeError, match="addcdiv: tensor1 and tensor2 are both integer"):
        nt.addcdiv(start, nt.tensor([1, 2, 3]), nt.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="addcmul: value must be a number"):
        nt.addcmul(start, t1, t2, value="2")


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a, b, w = rng.normal(size=(3, 4)), rng.normal(size=(4,)), rng.uniform(-1, 2, (3, 4))
    ta, tb, tw = (torch.from_numpy(v) for v in (a, b, w))
    x, y, z = _t(a, ("r", "c")), _t(b, ("c",)), _t(w, ("r", "c"))
    assert_close(nt.lerp(x, y, z), torch.lerp(ta, tb.expand(3, 4), tw).numpy(), rtol=1e-15, atol=1e-15)
    assert_close(nt.fmod(x, y), torch.fmod(ta, tb).numpy(), rtol=1e-15)
    assert_close(nt.atan2(x, y), torch.atan2(ta, tb).numpy(), rtol=1e-15)
    assert_close(nt.copysign(x, y), torch.copysign(ta, tb).numpy())
    assert_close(nt.addcdiv(x, y, z, value=0.5), torch.addcdiv(ta, tb.expand(3, 4), tw, value=0.5).numpy())
    assert_close(x.frac(), ta.frac().numpy())
    assert_close(nt.threshold(x, 0.1, 20.0), torch.nn.functional.threshold(ta, 0.1, 20.0).numpy())
    special = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
    assert_close(nt.nan_to_num(_t(special, ("x",))), torch.nan_to_num(torch.from_numpy(special)).numpy())


# ----------------------------------------------------------------------------- matrix products


def test_mm_bmm_mv_values_names_and_gradients():
    rng = np.random.default_rng(5)
    a, b, v = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(3,))
    x, y, u = _t(a, ("i", "j"), True), _t(b, ("j", "k"), True), _t(v, ("j",), True)
    assert nt.mm(x, y).names == ("i", "k") and x.mm(y).names == ("i", "k")
    assert_close(nt.mm(x, y).detach(), a @ b, rtol=1e-14)
    assert nt.mv(x, u).names == ("i",)
    assert_close(x.mv(u).detach(), a @ v, rtol=1e-14)
    p, q = rng.normal(size=(5, 2, 3)), rng.normal(size=(5, 3, 4))
    bp, bq = _t(p, ("batch", "i", "j"), True), _t(q, (None, "j", "k"), True)
    assert nt.bmm(bp, bq).names == ("batch", "i", "k")
    assert_close(bp.bmm(bq).detach(), p @ q, rtol=1e-14)
    for fn, args in ((nt.mm, (x, y)), (nt.mv, (x, u)), (nt.bmm, (bp, bq))):
        assert gradcheck(fn, *args) and gradgradcheck(fn, *args)


def test_matrix_products_refuse_other_shapes_and_names():
    x = nt.ones(2, 3, names=("i", "j"))
    with pytest.raises(ValueError, match=r"mm: expected operands of 2 and 2 dims, got shapes \(2, 3\) and \(3,\)"):
        nt.mm(x, nt.ones(3))
    with pytest.raises(ValueError, match="bmm: expected operands of 3 and 3 dims"):
        nt.bmm(x, x)
    with pytest.raises(ValueError, match="mv: expected operands of 2 and 1 dims"):
        nt.mv(x, x)
    with pytest.raises(ValueError, match=r"bmm: the batch sizes differ: 1 vs 5 \(bmm does not broadcast them\)"):
        nt.bmm(nt.ones(1, 2, 3), nt.ones(5, 3, 4))
    with pytest.raises(nt.NamesError, match="^mm: the contracted dims differ: 'j'"):
        nt.mm(x, nt.ones(3, 4, names=("k", None)))
    with pytest.raises(ValueError, match="mm: the contracted dims have different sizes"):
        nt.mm(x, nt.ones(4, 2))
    with pytest.raises(TypeError, match="mm: expected a Tensor, got list"):
        nt.mm([[1.0]], x)


def test_addmm_baddbmm():
    rng = np.random.default_rng(6)
    c, a, b = rng.normal(size=(4,)), rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
    inp, x, y = _t(c, ("k",), True), _t(a, ("i", "j"), True), _t(b, ("j", None), True)
    out = nt.addmm(inp, x, y, beta=0.5, alpha=2.0)
    assert out.names == ("i", "k")
    assert_close(out.detach(), 0.5 * c + 2.0 * (a @ b), rtol=1e-14)
    assert_close(inp.addmm(x, y).detach(), c + a @ b, rtol=1e-14)
    assert gradcheck(lambda i, m1, m2: nt.addmm(i, m1, m2, beta=0.5, alpha=2.0), inp, x, y)
    assert gradgradcheck(nt.addmm, inp, x, y)
    nan_input = _t(np.full(4, np.nan), ("k",))
    assert np.isfinite(nt.addmm(nan_input, x, y, beta=0).detach().numpy()).all()  # beta=0: input is not read
    assert nt.addmm(nan_input, x, y, beta=0).names == ("i", "k")
    p, q, r = rng.normal(size=(5, 2, 3)), rng.normal(size=(5, 3, 4)), rng.normal(size=(1, 2, 1))
    out = nt.baddbmm(_t(r, (None, "i", None)), _t(p, ("batch", None, "j")), _t(q, (None, "j", "k")), alpha=-1)
    assert out.names == ("batch", "i", "k")
    assert_close(out, r - p @ q, rtol=1e-14)
    with pytest.raises(ValueError, match=r"addmm: input of shape \(3,\) does not broadcast to the product's shape"):
        nt.addmm(nt.ones(3, dtype=nt.float64), x, y)
    with pytest.raises(nt.NamesError, match="^addmm: "):
        nt.addmm(nt.ones(2, 4, names=("k", None), dtype=nt.float64), x, y)
    with pytest.raises(TypeError, match="baddbmm: beta must be a number"):
        nt.baddbmm(_t(r, None), _t(p, None), _t(q, None), beta=None)


def test_matrix_products_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    c, p, q = rng.normal(size=(2, 4)), rng.normal(size=(3, 2, 5)), rng.normal(size=(3, 5, 4))
    got = nt.baddbmm(_t(c, None), _t(p, None), _t(q, None), beta=0.25, alpha=3.0)
    want = torch.baddbmm(torch.from_numpy(c), torch.from_numpy(p), torch.from_numpy(q), beta=0.25, alpha=3.0)
    assert_close(got, want.numpy(), rtol=1e-14)


# ----------------------------------------------------------------------------- random


def test_randperm_and_randint_like():
    p = nt.randperm(10, names=("perm",))
    assert p.names == ("perm",) and p.dtype == nt.int64 and sorted(p.tolist()) == list(range(10))
    assert nt.randperm(4, dtype=nt.float32).dtype == nt.float32
    assert nt.randperm(0).shape == (0,)
    nt.manual_seed(3)
    first = nt.randperm(50).tolist()
    nt.manual_seed(3)
    assert nt.randperm(50).tolist() == first
    with pytest.raises(ValueError, match="randperm: n must be >= 0, got -1"):
        nt.randperm(-1)
    with pytest.raises(TypeError, match="randperm: n must be an int"):
        nt.randperm(2.0)
    x = nt.zeros(3, 4, names=("a", None), dtype=nt.float64)
    r = nt.randint_like(x, 5)
    assert r.names == ("a", None) and r.dtype == nt.float64 and r.shape == (3, 4)
    values = set(nt.randint_like(nt.zeros(1000, dtype=nt.int64), 2, 5).tolist())
    assert values == {2, 3, 4}
    with pytest.raises(ValueError, match=r"randint_like: high \(1\) must be greater than low \(3\)"):
        nt.randint_like(x, 3, 1)


def test_bernoulli():
    p = nt.tensor(np.linspace(0, 1, 11).repeat(400).reshape(11, 400), names=("p", "draw"), dtype=nt.float64)
    out = nt.bernoulli(p)
    assert out.names == ("p", "draw") and out.dtype == nt.float64
    freq = out.mean("draw").numpy()
    assert set(np.unique(out.numpy())) <= {0.0, 1.0} and freq[0] == 0 and freq[-1] == 1
    assert np.abs(freq - np.linspace(0, 1, 11)).max() < 0.1
    half = nt.zeros(4000, names=("x",), dtype=nt.int64).bernoulli(0.25)
    assert half.dtype == nt.int64 and abs(half.numpy().mean() - 0.25) < 0.05
    x = nt.full((3,), 0.5, names=("x",), dtype=nt.float64).requires_grad_()
    nt.bernoulli(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]  # PyTorch's gradient of bernoulli
    with pytest.raises(ValueError, match=r"bernoulli: probabilities must be in \[0, 1\]"):
        nt.bernoulli(nt.tensor([0.5, 1.5]))
    with pytest.raises(ValueError, match=r"bernoulli: p must be in \[0, 1\], got 2"):
        nt.bernoulli(x, 2)
    with pytest.raises(TypeError, match="bernoulli: the probabilities must be floating point"):
        nt.bernoulli(nt.tensor([0, 1]))


def test_multinomial_shapes_names_and_frequencies():
    probs = nt.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]], names=("batch", "vocab"), dtype=nt.float64)
    out = nt.multinomial(probs, 3)
    assert out.names == ("batch", None) and out.dtype == nt.int64 and out.shape == (2, 3)
    for row in out.tolist():
        assert len(set(row)) == 3  # without replacement
    assert 1 not in out.tolist()[0]  # a zero probability is never drawn
    draws = probs.multinomial(20000, replacement=True, names=(..., "sample"))
    assert draws.names == ("batch", "sample")
    counts = np.stack([np.bincount(row, minlength=4) for row in draws.numpy()]) / 20000
    assert np.abs(counts - np.array([[0.1, 0.0, 0.6, 0.3], [0.25] * 4])).max() < 0.02
    by_name = nt.multinomial(probs.align_to("vocab", "batch"), 2, dim="vocab")
    assert by_name.names == (None, "batch") and by_name.shape == (2, 2)
    one = nt.multinomial(nt.tensor([0.0, 0.0, 1.0]), 1)
    assert one.tolist() == [2] and one.names == (None,)


def test_multinomial_without_replacement_draws_in_proportion():
    # the first draw of each row follows the probabilities; the second the renormalised rest
    probs = nt.tensor(np.tile([0.5, 0.3, 0.2], (6000, 1)), dtype=nt.float64)
    first = np.bincount(nt.multinomial(probs, 2).numpy()[:, 0], minlength=3) / 6000
    assert np.abs(first - [0.5, 0.3, 0.2]).max() < 0.03


def test_multinomial_errors():
    probs = nt.tensor([[0.5, 0.5, 0.0]], names=("batch", "vocab"))
    with pytest.raises(ValueError, match="multinomial: cannot draw 4 samples without replacement from 3 categories"):
        nt.multinomial(probs, 4)
    with pytest.raises(ValueError, match="multinomial: a row has only 2 categories of nonzero probability"):
        nt.multinomial(probs, 3)
    with pytest.raises(ValueError, match="multinomial: a row of probabilities sums to 0"):
        nt.multinomial(nt.zeros(2, 3), 1, replacement=True)
    with pytest.raises(ValueError, match="multinomial: the probabilities must be finite and >= 0"):
        nt.multinomial(nt.tensor([0.5, -0.1]), 1)
    with pytest.raises(ValueError, match="multinomial: num_samples must be > 0, got 0"):
        nt.multinomial(probs, 0)
    with pytest.raises(TypeError, match="multinomial: the probabilities must be floating point"):
        nt.multinomial(nt.tensor([1, 2]), 1)
    with pytest.raises(TypeError, match="multinomial: replacement must be a bool"):
        nt.multinomial(probs, 1, replacement="yes")
    with pytest.raises(nt.NamesError, match="multinomial: cannot refine"):
        nt.multinomial(probs, 1, names=("other", "sample"))


def test_normal():
    mean = nt.tensor(np.array([[-5.0], [5.0]]), names=("group", None))
    std = nt.tensor(np.array([0.5, 0.5, 0.5] * 1000), names=("draw",))
    out = nt.normal(mean, std)
    assert out.names == ("group", "draw") and out.shape == (2, 3000) and out.dtype == nt.float64
    assert_close(out.mean("draw").numpy(), np.array([-5.0, 5.0]), atol=0.05)
    assert abs(out.numpy().std(axis=1) - 0.5).max() < 0.05
    scalar_std = nt.normal(mean, 2.0)
    assert scalar_std.names == ("group", None) and scalar_std.shape == (2, 1)
    fresh = nt.normal(1.0, 3.0, (4000,), names=("x",))
    assert fresh.dtype == nt.float32 and fresh.names == ("x",) and abs(fresh.numpy().mean() - 1.0) < 0.2
    assert nt.normal(0.0, 1.0, {"a": 2, "b": 3}, dtype=nt.float64).names == ("a", "b")
    m = nt.zeros(3, names=("x",), dtype=nt.float64).requires_grad_()
    nt.normal(m, 1.0).sum().backward()
    assert m.grad.tolist() == [0.0, 0.0, 0.0]  # not reparameterised, as in PyTorch
    with pytest.raises(TypeError, match="normal: give size= when mean and std are numbers"):
        nt.normal(0.0, 1.0)
    with pytest.raises(ValueError, match="normal: std must be >= 0, got -1"):
        nt.normal(0.0, -1.0, (2,))
    with pytest.raises(ValueError, match="normal: std must be >= 0; the tensor holds a negative value"):
        nt.normal(mean, nt.tensor([-1.0]))
    with pytest.raises(TypeError, match="normal: size=, names=, dtype="):
        nt.normal(mean, 1.0, (2,))
    with pytest.raises(nt.NamesError, match="^normal: "):
        nt.normal(nt.zeros(2, names=("a",)), nt.ones(2, names=("b",)))
    with pytest.raises(ValueError, match=r"normal: the shapes of mean \(2,\) and std \(3,\) do not broadcast"):
        nt.normal(nt.zeros(2), nt.ones(3))


# ----------------------------------------------------------------------------- new_*, .data, type_as


def test_new_factories_take_dtype_and_device_not_names():
    x = nt.ones(2, 3, names=("a", "b"), dtype=nt.float64)
    for out in (x.new_zeros(4, 5), x.new_zeros((4, 5)), x.new_ones([4, 5]), x.new_empty(4, 5)):
        assert out.shape == (4, 5) and out.dtype == nt.float64 and out.names == (None, None)
        assert out.device == x.device
    assert x.new_zeros(2).tolist() == [0.0, 0.0] and x.new_ones(2).tolist() == [1.0, 1.0]
    assert x.new_zeros({"k": 2}).names == ("k",)
    assert x.new_ones(2, names=("k",), dtype=nt.int64).dtype == nt.int64
    full = x.new_full((2, 2), 7)
    assert full.dtype == nt.float64 and full.tolist() == [[7.0, 7.0], [7.0, 7.0]]
    t = x.new_tensor([1, 2, 3])
    assert t.dtype == nt.float64 and t.names == (None,) and t.tolist() == [1.0, 2.0, 3.0]
    assert x.new_tensor(nt.ones(2, names=("z",))).names == ("z",)
    assert x.new_zeros(2, requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="new_zeros: sizes must be >= 0"):
        x.new_zeros(-1)
    with pytest.raises(TypeError, match="new_full: fill_value must be a number"):
        x.new_full((2,), "a")
    with pytest.raises(TypeError, match="new_tensor: cannot make a tensor (of float64 )?from object"):
        x.new_tensor(object())


def test_data_is_detached_shares_memory_and_hides_edits_from_autograd():
    x = nt.tensor([1.0, 2.0], names=("x",), requires_grad=True)
    d = x.data
    assert d.names == ("x",) and not d.requires_grad
    y = (x * x).sum()  # saves x
    d.mul_(3)  # PyTorch's .data: the edit is not seen by autograd (x.detach().mul_ would make backward raise)
    assert x.tolist() == [3.0, 6.0]
    y.backward()
    assert x.grad.tolist() == [6.0, 12.0]
    x.data = nt.tensor([5.0, 6.0])
    assert x.tolist() == [5.0, 6.0] and x.names == ("x",) and x.requires_grad
    x.data = nt.zeros(1, 2)
    assert x.shape == (1, 2) and x.names == (None, None)
    x.data = nt.zeros(1, 2, names=("p", "q"))
    with pytest.raises(nt.NamesError, match="^data: "):
        x.data = nt.zeros(1, 2, names=("p", "r"))
    with pytest.raises(TypeError, match="data: a tensor that requires grad needs floating-point or complex data"):
        x.data = nt.tensor([[1, 2]])
    with pytest.raises(TypeError, match="data: expected a Tensor, got list"):
        x.data = [1.0]


def test_type_as():
    x = nt.ones(2, names=("x",))
    out = x.type_as(nt.zeros(1, dtype=nt.float64))
    assert out.dtype == nt.float64 and out.names == ("x",)


# ----------------------------------------------------------------------------- dry runs


def test_dry_run_through_the_meta_backend():
    def model(x, w, idx):
        h = nt.addmm(w.sum("in"), x, w).lgamma().erfc().atan2(x.mm(w))
        h = nt.lerp(h, h.polygamma(1).clamp_min(0), 0.3).nan_to_num()
        probs = h.softmax("out")
        samples = nt.multinomial(probs, 2, names=(..., "sample"))
        noise = nt.normal(h, 1.0).digamma() + nt.bernoulli(probs)
        return samples, noise, x.new_zeros(3, names=("z",)), nt.bmm(idx, idx.rename(i="k").mT).erfinv()

    trace = nt.trace_shapes(model, nt.spec({"batch": 4, "in": 3}, dtype=nt.float64),
                            nt.spec({"in": 3, "out": 5}, dtype=nt.float64), nt.spec(("b", "i", "j"), (2, 3, 3)))
    samples, noise, zeros, prod = trace.result
    assert samples.names == ("batch", "sample") and samples.shape == (4, 2) and samples.dtype == nt.int64
    assert noise.names == ("batch", "out") and noise.dtype == nt.float64
    assert zeros.device == "meta" and prod.shape == (2, 3, 3)
    assert {"lgamma", "erfc", "atan2", "polygamma", "multinomial", "normal", "bernoulli"} <= set(trace.ops)
    assert nt.randperm(5, device="meta").shape == (5,)


def test_data_setter_ends_the_view_link():
    """After ``v.data = other`` the view ``v`` holds another array: its edits must reach neither its old base's
    version counter nor (recorded in a graph) the base's history."""
    base = nt.zeros(2, 3, dtype=nt.float64)
    v = base[0]
    before = base._version
    v.data = nt.ones(3, dtype=nt.float64)
    v.add_(1.0)
    assert base._version == before and base.tolist() == [[0.0] * 3] * 2
    w = nt.ones(3, dtype=nt.float64, requires_grad=True)
    v.mul_(w)
    assert base.grad_fn is None and v.grad_fn is not None
