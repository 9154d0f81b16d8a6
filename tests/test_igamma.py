"""``igamma``/``igammac`` (PyTorch's regularized lower and upper incomplete gamma functions, ``nt.special.gammainc``
and ``gammaincc``): values against PyTorch and SciPy on grids and at the edges, dtypes, the generic implementation
(what array-api-strict and a machine without SciPy run) against SciPy and high-precision values, names
(Hypothesis), gradients with respect to ``other`` (gradcheck, gradgradcheck, PyTorch's), the refusal of the
gradient for ``input``, the in-place forms, errors, and a dry run on the meta backend."""

import numpy as np
import pytest
import scipy.special as sp
import torch
from hypothesis import HealthCheck, given, settings

import namedtensor as nt
from namedtensor.backends.numpy_backend import NumpyBackend
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")
few = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=15)

OPS = {"igamma": (torch.igamma, sp.gammainc), "igammac": (torch.igammac, sp.gammaincc)}

# a grid of a in (0, 1e3] and x in [0, 1e3], both sides of x = a + 1 (where the series and the continued
# fraction meet) included
A_GRID = np.concatenate([np.geomspace(1e-3, 1e3, 41), np.linspace(0.05, 60, 60), [1.0, 2.0, 1e3]])
X_GRID = np.concatenate([[0.0], np.geomspace(1e-4, 1e3, 40), np.linspace(0.1, 80, 60), [2.0, 3.0, 1001.0]])
A, X = (v.copy() for v in np.broadcast_arrays(A_GRID[:, None], X_GRID[None, :]))

# the edges: zeros, infinities, negatives, nan (PyTorch tests them in an order that gives a nan operand a value
# at x = 0, x = inf and a = inf)
_E = [0.0, -0.0, 0.5, 1.0, 3.0, np.inf, -1.0, -np.inf, np.nan]
A_EDGE, X_EDGE = (v.ravel().copy() for v in np.meshgrid(_E, _E, indexing="ij"))

# (a, x, P, Q) by mpmath at 50 digits, where a few digits are easy to lose: x near a for large a, tiny a, tails
EXACT = np.array([
    (1000.0, 1000.0, 0.5042052441802155, 0.4957947558197845),
    (1000.0, 1001.0, 0.5168114529297863, 0.4831885470702138),
    (999.5, 1000.7, 0.5193349031192203, 0.48066509688077974),
    (0.5, 2.0, 0.9544997361036416, 0.04550026389635842),
    (1e-200, 0.5, 1.0, 5.597735947761608e-201),
    (0.002, 0.1, 0.9963578893695973, 0.0036421106304026173),
    (30.0, 31.0, 0.5953478209656109, 0.4046521790343891),
    (10.0, 9.5, 0.4781739777627926, 0.5218260222372074),
    (250.0, 240.0, 0.2676500698540158, 0.7323499301459842),
    (0.001, 0.001, 0.9936876467088603, 0.00631235329113971),
    (5.0, 0.01, 8.264185641806499e-13, 0.9999999999991735),
    (700.0, 650.0, 0.027170055634622752, 0.9728299443653773),
    (3.5, 200.0, 1.0, 2.3852710811123277e-82),
])


def _t(a, names=None, requires_grad=False, dtype=None):
    return nt.tensor(a, names=names, requires_grad=requires_grad, dtype=dtype)


def _torch(a):
    return torch.from_numpy(np.array(a))


def _generic():
    """The NumPy backend as it is without SciPy: the generic implementation of ``backends/base.py``."""
    b = NumpyBackend()
    b._special = None
    return b


def _close(got, want, rtol, atol=1e-300):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("name", sorted(OPS))
def test_values_match_pytorch_and_scipy_on_a_grid(name):
    ref, ref_scipy = OPS[name]
    out = getattr(nt, name)(_t(A), _t(X))
    assert out.dtype == nt.float64
    # SciPy to about 1e-12 (its own error in the far tails), 1e-13 where the value is not near 0 or 1
    want = ref_scipy(A, X)
    _close(out.numpy(), want, rtol=1e-11)
    middle = (want > 1e-3) & (want < 1 - 1e-3)
    _close(out.numpy()[middle], want[middle], rtol=2e-13)
    # PyTorch's float64 is good to about 2e-9 here
    _close(out.numpy(), ref(_torch(A), _torch(X)).numpy(), rtol=1e-8)


@pytest.mark.parametrize("name", sorted(OPS))
def test_edges_are_pytorchs(name):
    ref = OPS[name][0]
    want = ref(_torch(A_EDGE), _torch(X_EDGE)).numpy()
    _check_edges(getattr(nt, name)(_t(A_EDGE), _t(X_EDGE)).numpy(), want)


def _check_edges(got, want):
    _close(got, want, rtol=1e-8, atol=0)
    edge = ~np.isfinite(A_EDGE) | ~np.isfinite(X_EDGE) | (A_EDGE <= 0) | (X_EDGE <= 0)
    np.testing.assert_array_equal(got[edge], want[edge])


def test_high_precision_values():
    # SciPy's (the NumPy backend's) is off by 2e-14 at a = 1e-200, the generic one is not (below)
    a, x, p, q = EXACT.T
    _close(nt.igamma(_t(a), _t(x)).numpy(), p, rtol=3e-14)
    _close(nt.igammac(_t(a), _t(x)).numpy(), q, rtol=3e-14)


@pytest.mark.parametrize("name", sorted(OPS))
def test_dtypes(name, backend):
    ref, ref_scipy = OPS[name]
    fn = getattr(nt, name)
    a32, x32 = A.astype(np.float32), X.astype(np.float32)
    out = fn(_t(a32), _t(x32))
    assert out.dtype == nt.float32
    # PyTorch computes in float32
    _close(out.numpy(), ref(_torch(a32), _torch(x32)).numpy(), rtol=1e-4, atol=1e-6)
    _close(out.numpy(), ref_scipy(a32.astype(np.float64), x32.astype(np.float64)), rtol=1e-6, atol=1e-37)
    if backend.name == "numpy":  # float16 in float16 (the strict backend has none)
        a16, x16 = np.array([0.5, 2.0, 7.0], np.float16), np.array([1.0, 1.5, 9.0], np.float16)
        half = fn(_t(a16), _t(x16))
        assert half.dtype == nt.float16
        assert_close(half, ref(_torch(a16), _torch(x16)).numpy().astype(np.float64), rtol=2e-3, atol=1e-3)
    # mixed floats in the wider one, a number in the tensor's dtype
    assert fn(_t(a32[:2, :2]), _t(X[:2, :2])).dtype == nt.float64
    assert fn(_t(a32[:2, :2]), 2.5).dtype == nt.float32
    assert_close(fn(2.5, _t(X[:3, :3])), ref_scipy(2.5, X[:3, :3]), rtol=1e-13, atol=1e-300)
    assert_close(fn(_t(A[:3, :3]), 2.5), ref_scipy(A[:3, :3], 2.5), rtol=1e-13, atol=1e-300)


def test_integer_inputs_are_computed_in_float64():
    # PyTorch promotes an integer operand with a float one (integers alone it refuses); here integers are
    # float64, as in every op that needs floats (nt.xlogy, nt.i0)
    ints = _t([0, 1, 2, 5], ("i",))
    for name, (ref, ref_scipy) in OPS.items():
        fn = getattr(nt, name)
        out = fn(ints, ints)
        assert out.dtype == nt.float64 and out.names == ("i",)
        assert_close(out, ref_scipy(np.array([0, 1, 2, 5.0]), np.array([0, 1, 2, 5.0])), rtol=1e-14)
        x = np.array([0.5, 1.0, 3.0, 4.0])
        assert_close(fn(ints, _t(x)), ref(_torch([0, 1, 2, 5]), _torch(x)).numpy(), rtol=1e-8)
        assert_close(fn(_t(x), ints), ref(_torch(x), _torch([0, 1, 2, 5])).numpy(), rtol=1e-8)
        assert fn(_t([True, False]), _t([1.0, 1.0])).dtype == nt.float64


# ----------------------------------------------------------------------------- the generic implementation


@pytest.mark.parametrize("name", sorted(OPS))
def test_generic_implementation_against_scipy(name):
    # what array-api-strict (and the NumPy backend without SciPy) runs, called on NumPy arrays
    ref_scipy = OPS[name][1]
    B = _generic()
    got = getattr(B, name)(A, X)
    want = ref_scipy(A, X)
    _close(got, want, rtol=1e-11)
    middle = (want > 1e-3) & (want < 1 - 1e-3)
    _close(got[middle], want[middle], rtol=2e-13)
    _check_edges(getattr(B, name)(A_EDGE, X_EDGE), OPS[name][0](_torch(A_EDGE), _torch(X_EDGE)).numpy())
    # broadcasting, and the result in the operands' dtype
    col = getattr(B, name)(A_GRID[:, None], X_GRID)
    assert col.shape == A.shape
    _close(col, want, rtol=1e-11)
    assert getattr(B, name)(A.astype(np.float32), X.astype(np.float32)).dtype == np.float32
    assert getattr(B, name)(A.astype(np.float16), X.astype(np.float16)).dtype == np.float16
    assert getattr(B, name)(A.astype(np.float32), X).dtype == np.float64


def test_generic_high_precision_values():
    a, x, p, q = EXACT.T
    B = _generic()
    _close(B.igamma(a, x), p, rtol=1.5e-14)
    _close(B.igammac(a, x), q, rtol=1.5e-14)


def test_numpy_backend_uses_scipy_where_installed():
    B = NumpyBackend()
    assert B._scipy_special() is sp
    np.testing.assert_array_equal(B.igamma(A, X), sp.gammainc(A, X))
    np.testing.assert_array_equal(B.igammac(A, X), sp.gammaincc(A, X))
    half = B.igamma(np.array([0.5, 2.0], np.float16), np.array([1.0, 1.5], np.float16))
    assert half.dtype == np.float16


# ----------------------------------------------------------------------------- names


@few
@given(pair=nts.broadcastable_names(max_dims=3))
def test_names_unify(pair):
    (sa, na), (sb, nb) = pair
    rng = np.random.default_rng(0)
    a, x = rng.uniform(0.1, 4, sa), rng.uniform(0, 5, sb)
    expected = (_t(a, na) + _t(x, nb)).names
    for name, (ref, _) in OPS.items():
        for out in (getattr(nt, name)(_t(a, na), _t(x, nb)), getattr(_t(a, na), name)(_t(x, nb))):
            assert out.names == expected
            assert_close(out, ref(_torch(a), _torch(x)).numpy(), rtol=1e-8)


def test_errors():
    t = _t([1.0, 2.0], ("x",))
    for name in OPS:
        with pytest.raises(nt.NamesError, match=f"{name}: dims .* do not match"):
            getattr(nt, name)(t, t.rename("y"))
        with pytest.raises(TypeError, match=f"{name}: at least one operand must be a Tensor"):
            getattr(nt, name)(1.0, 2.0)


# ----------------------------------------------------------------------------- gradients


def test_gradients_with_respect_to_other():
    rng = np.random.default_rng(1)
    a = _t(rng.uniform(0.3, 3, (3, 2)), ("batch", None))
    x = _t(rng.uniform(0.2, 4, (2,)), ("feat",), requires_grad=True)
    cases = [lambda v: nt.igamma(a, v), lambda v: nt.igammac(a, v), lambda v: nt.igamma(2.5, v),
             lambda v: a.igammac(v * 3), lambda v: nt.special.gammainc(a, v)]
    for fn in cases:
        assert gradcheck(fn, x)
        assert gradgradcheck(fn, x)
    nt.igamma(a, x).sum().backward()
    assert x.grad.names == ("feat",)
    # against PyTorch, whose formula is exp((a - 1) log(x) - x - lgamma(a)), at the edges too
    av = np.array([0.5, 1.0, 2.0, 3.5, 1.0, 0.5, 0.0])
    xv = np.array([1.5, 0.7, 0.0, 9.0, 0.0, 0.0, 2.0])
    for name, (ref, _) in OPS.items():
        ours = _t(xv, requires_grad=True)
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) and 0 * inf, in PyTorch's formula too
            getattr(nt, name)(_t(av), ours).sum().backward()
        theirs = torch.tensor(xv, requires_grad=True)
        ref(_torch(av), theirs).sum().backward()
        assert_close(ours.grad, theirs.grad.numpy(), rtol=1e-13)


def test_no_gradient_for_input():
    a = _t([1.0, 2.0], ("i",), requires_grad=True)
    x = _t([0.5, 3.0], ("i",), requires_grad=True)
    for name in OPS:
        y = getattr(nt, name)(a, x)  # the forward records a graph, as PyTorch's does
        with pytest.raises(NotImplementedError, match=f"{name}: the gradient with respect to input .* only with "
                                                      "respect to other"):
            y.sum().backward()
        with pytest.raises(NotImplementedError, match=f"{name}: the gradient with respect to input"):
            getattr(nt, name)(a * 2, 1.5).sum().backward()
        getattr(nt, name)(a.detach(), x).sum().backward()  # detached: other's gradient only
    assert x.grad is not None and a.grad is None


# ----------------------------------------------------------------------------- aliases, methods, in place


def test_special_aliases():
    assert nt.special.gammainc is nt.igamma and nt.special.gammaincc is nt.igammac
    a, x = _t(A[:5, ::7]), _t(X[:5, ::7])
    assert_close(nt.special.gammainc(a, x), torch.special.gammainc(_torch(A[:5, ::7]), _torch(X[:5, ::7])).numpy(),
                 rtol=1e-8, atol=1e-300)
    assert_close(nt.special.gammaincc(a, x), nt.igammac(a, x), rtol=0, atol=0)


def test_methods_and_in_place_forms():
    a = np.array([[0.5, 2.0], [3.0, 10.0]])
    x = np.array([1.0, 4.0])
    for name, (ref, _) in OPS.items():
        t = _t(a.copy(), ("batch", None))
        assert_close(getattr(t, name)(_t(x)), ref(_torch(a), _torch(x)).numpy(), rtol=1e-8)
        assert getattr(t, name + "_")(_t(x, ("feat",))) is t
        assert t.names == ("batch", "feat")
        assert_close(t, ref(_torch(a), _torch(x)).numpy(), rtol=1e-8)


# ----------------------------------------------------------------------------- dry run


def test_dry_run_through_the_meta_backend():
    def model(a, x):
        return nt.igamma(a, x), a.igammac(x.to(nt.float32)), nt.special.gammainc(a, 2.0)

    trace = nt.trace_shapes(model, nt.spec(("batch", None), (2, 3), dtype=nt.float32), nt.spec(("feat",), (3,), dtype=nt.float64))
    p, q, r = trace.result
    assert p.names == q.names == ("batch", "feat") and p.shape == (2, 3)
    assert p.dtype == nt.float64 and q.dtype == nt.float32 and r.names == ("batch", None)
    assert {"igamma", "igammac"} <= set(trace.ops)
