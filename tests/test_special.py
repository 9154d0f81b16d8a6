"""The backends' special functions (``erfc erfinv lgamma digamma polygamma``): the generic versions
written with array ops (what runs without SciPy, on array-api-strict, and on any namespace) and the
NumPy backend's SciPy path, each against ``scipy.special`` on grids, at hard-coded high-precision
values where SciPy itself loses digits, and at the edges (poles, infinities) where PyTorch's meaning
is the reference; dtypes, and the meta backend's shapes."""

import math

import numpy as np
import pytest
import scipy.special as sp

from namedtensor.backends.meta_backend import META, MetaArray
from namedtensor.backends.numpy_backend import NumpyBackend
from namedtensor.backends.strict_backend import StrictBackend


@pytest.fixture(params=["scipy", "generic"])
def B(request):
    """The NumPy backend with SciPy, and as it is on a machine without SciPy (the generic versions)."""
    b = NumpyBackend()
    if request.param == "generic":
        b._special = None
    else:
        assert b._scipy_special() is sp
    return b


def _close(got, want, rtol, atol=0.0):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)


REALS = np.concatenate([np.linspace(-30, 30, 6001), np.geomspace(1e-300, 1e5, 400), -np.geomspace(1e-300, 1e5, 400)])
POSITIVE = np.concatenate([np.linspace(1e-3, 40, 4001), np.geomspace(1e-300, 1e10, 400)])
NEGATIVE = -np.linspace(0.013, 29.987, 1500)  # no integers
UNIT = np.concatenate([np.linspace(-1, 1, 4001), 1 - np.geomspace(1e-16, 0.5, 300), -1 + np.geomspace(1e-16, 0.5, 300)])


def test_erfc_matches_scipy(B):
    big = REALS[np.abs(REALS) < 26]  # SciPy flushes erfc to 0 from 26.55 on, where it is still subnormal
    _close(B.erfc(big), sp.erfc(big), rtol=1e-13, atol=1e-300)


def test_erfc_far_tail_keeps_its_digits():
    # mpmath, 40 digits: SciPy is off by 4e-14 here, the generic version (exact exponent) is not
    x = np.array([24.42, 25.713, 5.3])
    want = np.array([2.38620719376904e-261, 1.597766006711366e-289, 6.613081850340811e-14])
    b = NumpyBackend()
    b._special = None
    _close(b.erfc(x), want, rtol=2e-15)


def test_erfinv_matches_scipy_and_inverts_erf(B):
    _close(B.erfinv(UNIT), sp.erfinv(UNIT), rtol=2e-15, atol=1e-300)
    inside = UNIT[np.abs(UNIT) < 0.999]
    _close(sp.erf(B.erfinv(inside)), inside, rtol=1e-15, atol=1e-300)


def test_lgamma_matches_scipy(B):
    # near its roots (1, 2, and the negative ones) lgamma is small: the error is absolute there
    _close(B.lgamma(REALS), sp.gammaln(REALS), rtol=1e-13, atol=1e-15)
    _close(B.lgamma(POSITIVE), sp.gammaln(POSITIVE), rtol=1e-14, atol=1e-15)


def test_digamma_matches_scipy(B):
    _close(B.digamma(POSITIVE), sp.psi(POSITIVE), rtol=1e-13, atol=1e-15)
    _close(B.digamma(NEGATIVE), sp.psi(NEGATIVE), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_polygamma_matches_scipy_for_positive_x(B, n):
    x = POSITIVE[POSITIVE > 1e-30]  # SciPy overflows to inf below
    _close(B.polygamma(n, x), sp.polygamma(n, x), rtol=1e-13)


@pytest.mark.parametrize("n, x, want", [
    # mpmath.polygamma, 30 digits (SciPy's zeta-based polygamma is off by up to 1e-9 here)
    (0, -22.5, 3.1355729548639455), (0, -0.504, 0.0007420716047053964), (0, -3.3, 3.620353460592126),
    (1, -22.5, 9.826132984822411), (1, -0.504, 8.939664860882152), (1, -29.763, 21.4597805855574),
    (2, -2.5, -0.1082040516417274), (2, -29.763, -146.55135110904615), (2, -3.3, 68.76944547748523),
    (4, -22.5, -2.1407049050977114e-05), (4, -2.5, -0.06799599950673137), (4, -3.3, 9738.733062132023),
])
def test_polygamma_for_negative_x_against_high_precision_values(B, n, x, want):
    got = B.polygamma(n, np.array([x]))[0]
    assert got == pytest.approx(want, rel=1e-14, abs=1e-15)  # absolute near digamma's roots


def test_edges_have_pytorchs_values(B):
    inf, nan = math.inf, math.nan
    x = np.array([0.0, -0.0, -1.0, -3.0, inf, -inf, nan])
    _close(B.lgamma(x), [inf, inf, inf, inf, inf, inf, nan], rtol=0)
    _close(B.digamma(x), [-inf, inf, nan, nan, inf, nan, nan], rtol=0)
    _close(B.polygamma(1, x), [inf, inf, inf, inf, 0.0, nan, nan], rtol=0)
    _close(B.polygamma(2, x), [-inf, -inf, -inf, -inf, 0.0, nan, nan], rtol=0)
    _close(B.erfinv(np.array([1.0, -1.0, 1.5, -2.0, 0.0, nan])), [inf, -inf, nan, nan, 0.0, nan], rtol=0)
    _close(B.erfc(np.array([inf, -inf, 0.0, nan])), [0.0, 2.0, 1.0, nan], rtol=0)


@pytest.mark.parametrize("fn", ["erfc", "erfinv", "lgamma", "digamma", "polygamma"])
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float16, 2e-3)])
def test_special_functions_keep_float32_and_float16(B, fn, dtype, rtol):
    x = np.linspace(0.05, 0.95, 19).astype(dtype)
    call = (lambda a: B.polygamma(2, a)) if fn == "polygamma" else getattr(B, fn)
    ref = {"erfc": sp.erfc, "erfinv": sp.erfinv, "lgamma": sp.gammaln, "digamma": sp.psi,
           "polygamma": lambda a: sp.polygamma(2, a)}[fn]
    out = call(x)
    assert out.dtype == dtype
    _close(out, ref(x.astype(np.float64)), rtol=rtol, atol=rtol)


def test_generic_versions_run_on_a_namespace_that_is_not_numpy():
    strict = StrictBackend()
    generic = NumpyBackend()
    generic._special = None
    x = np.array([-2.5, -0.3, 0.2, 1.7, 6.0, 31.0])
    u = np.array([-0.999, -0.4, 0.0, 0.3, 0.75, 0.9999999])
    for fn, arg in (("erfc", x), ("erfinv", u), ("lgamma", x), ("digamma", x)):
        got = strict.to_numpy(getattr(strict, fn)(strict.asarray(arg)))
        np.testing.assert_allclose(got, getattr(generic, fn)(arg), rtol=1e-15, atol=1e-300)
    got = strict.to_numpy(strict.polygamma(3, strict.asarray(x)))
    np.testing.assert_allclose(got, generic.polygamma(3, x), rtol=1e-15)


def test_meta_backend_gives_shapes_and_dtypes():
    for fn in ("erfc", "erfinv", "lgamma", "digamma"):
        out = getattr(META, fn)(MetaArray((2, 3), np.float32))
        assert out.shape == (2, 3) and out.dtype == np.float32
    out = META.polygamma(2, MetaArray((4,), np.int64))
    assert out.shape == (4,) and out.dtype == np.float64


def test_exp2_and_fmod_generic_versions_match_numpy():
    b = NumpyBackend()
    x = np.array([-7.5, -2.0, -0.0, 0.5, 3.0, 7.25])
    np.testing.assert_array_equal(super(NumpyBackend, b).fmod(x, 2.0), np.fmod(x, 2.0))
    np.testing.assert_array_equal(super(NumpyBackend, b).fmod(-x, -3.0), np.fmod(-x, -3.0))
    ints = np.array([-7, -2, 0, 5, 9])
    np.testing.assert_array_equal(super(NumpyBackend, b).fmod(ints, 4), np.fmod(ints, 4))
    np.testing.assert_array_equal(super(NumpyBackend, b).fmod(-9, ints[ints != 0]), np.fmod(-9, ints[ints != 0]))
    np.testing.assert_allclose(super(NumpyBackend, b).exp2(x), np.exp2(x), rtol=1e-15)


def test_special_functions_match_pytorch():
    torch = pytest.importorskip("torch")
    b = NumpyBackend()
    b._special = None
    x = np.concatenate([np.linspace(-12.3, 12.3, 401), [0.0, -0.0, -2.0, math.inf]])
    u = np.linspace(-0.999, 0.999, 301)
    t, tu = torch.from_numpy(x), torch.from_numpy(u)
    _close(b.lgamma(x), torch.lgamma(t).numpy(), rtol=1e-12, atol=1e-14)
    _close(b.digamma(x), torch.digamma(t).numpy(), rtol=1e-11, atol=1e-13)
    _close(b.erfc(x), torch.erfc(t).numpy(), rtol=1e-13, atol=1e-300)
    _close(b.erfinv(u), torch.erfinv(tu).numpy(), rtol=1e-14)
    finite = x[np.isfinite(x) & (x != np.round(x))]
    # PyTorch's trigamma keeps about 10 digits (5e-10 off at -1.59 and at 0.06, where this one matches
    # mpmath and SciPy to 1e-15)
    _close(b.polygamma(1, finite), torch.polygamma(1, torch.from_numpy(finite)).numpy(), rtol=1e-8)
