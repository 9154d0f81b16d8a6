"""The FFTs (namedtensor/ops/spectral.py, ``nt.fft`` and ``xp.fft``).

Values against NumPy and PyTorch for every transform, norm and length (cut and padded); the name
rule (the frequency dims keep their names, or take ``out_name``/``out_names``) with Hypothesis;
gradients of first and second order by central differences (complex inputs and outputs through
their real and imaginary parts) and against PyTorch's; dtypes; errors; a dry run.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.array_api as xp
from namedtensor.testing import gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")

NORMS = [None, "backward", "ortho", "forward"]
ONE_DIM = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
REAL_IN = {"rfft", "ihfft"}


def assert_close(actual, expected, rtol=1e-7, atol=1e-10):
    """Complex-aware closeness of arrays (tensors are compared as their NumPy arrays)."""
    as_array = (lambda v: v.numpy() if isinstance(v, nt.Tensor) else v)
    np.testing.assert_allclose(as_array(actual), as_array(expected), rtol=rtol, atol=atol)


def _signal(rng, shape, complex_):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if complex_ else x


@pytest.mark.parametrize("name", ONE_DIM)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 4, 9])
def test_one_dim_transforms_match_numpy_and_torch(name, norm, n):
    rng = np.random.default_rng(0)
    x = _signal(rng, (3, 6, 2), name not in REAL_IN)
    t = nt.tensor(x, names=("batch", "time", "chan"))
    out = getattr(nt.fft, name)(t, n=n, dim="time", norm=norm)
    expected = getattr(np.fft, name)(x, n=n, axis=1, norm=norm)
    assert out.names == ("batch", "time", "chan") and out.shape == expected.shape
    assert out.dtype == (nt.float64 if name in ("irfft", "hfft") else nt.complex128)
    assert_close(out.numpy(), expected, rtol=1e-10, atol=1e-10)
    torch = pytest.importorskip("torch")
    theirs = getattr(torch.fft, name)(torch.tensor(x), n=n, dim=1, norm=norm).resolve_conj().numpy()
    assert_close(out.numpy(), theirs, rtol=1e-10, atol=1e-10)


N_DIM_CASES = [(None, None), ((4, 6), None), (None, (0, 2)), ((5, 3), (2, 0)), ((8,), (1,))]


@pytest.mark.parametrize("name, s, dim", [
    (name, s, dim) for name in ["fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2"]
    for s, dim in N_DIM_CASES if not (name.endswith("2") and dim is not None and len(dim) != 2)  # *2: two dims
])
def test_n_dim_transforms_match_torch(name, s, dim):
    rng = np.random.default_rng(1)
    x = _signal(rng, (4, 5, 6), not name.startswith("rfft"))
    t = nt.tensor(x, names=("a", "b", "c"))
    kwargs = {} if dim is None and name.endswith("2") else {"dim": dim}
    out = getattr(nt.fft, name)(t, s=s, norm="ortho", **kwargs)
    assert out.names == ("a", "b", "c")
    torch = pytest.importorskip("torch")
    theirs = getattr(torch.fft, name)(torch.tensor(x), s=s, norm="ortho", **kwargs).resolve_conj().numpy()
    assert_close(out.numpy(), theirs, rtol=1e-10, atol=1e-10)


def test_dims_by_name_anywhere_and_renamed():
    x = nt.randn(3, 8, 2, names=("batch", "time", "chan"), dtype=nt.float64)
    moved = x.align_to("time", "chan", "batch")
    assert_close(nt.fft.rfft(moved, dim="time").align_to("batch", "time", "chan"), nt.fft.rfft(x, dim=1))
    spectrum = nt.fft.rfft(x, dim="time", out_name="freq")
    assert spectrum.names == ("batch", "freq", "chan") and spectrum.shape == (3, 5, 2)
    back = nt.fft.irfft(spectrum, n=8, dim="freq", out_name="time")
    assert back.names == x.names
    assert_close(back, x)
    both = nt.fft.fftn(x, dim=("chan", "time"), out_names=("kc", "kt"))
    assert both.names == ("batch", "kt", "kc")
    assert_close(nt.fft.ifftn(both, dim=("kt", "kc"), out_names=("time", "chan")).real, x)


@settings(deadline=None, max_examples=40)
@given(data=st.data())
def test_the_name_rule_keeps_or_renames_the_transformed_dims(data):
    names = data.draw(nts.names(data.draw(st.integers(1, 4))))
    shape = data.draw(st.tuples(*(st.integers(1, 4) for _ in names)))
    k = data.draw(st.integers(1, len(names)))
    dims = tuple(data.draw(st.permutations(range(len(names))))[:k])
    t = nt.zeros(*shape, names=names)
    out = nt.fft.fftn(t, dim=dims)
    assert out.names == names and out.shape == shape
    fresh = tuple(f"k{i}" for i in range(k))
    renamed = nt.fft.fftn(t, dim=dims, out_names=fresh)
    expected = list(names)
    for d, n in zip(dims, fresh):
        expected[d] = n
    assert renamed.names == tuple(expected)


def _complex_input(shape, names, seed):
    rng = np.random.default_rng(seed)
    return tuple(nt.tensor(rng.standard_normal(shape), names=names, requires_grad=True) for _ in range(2))


@pytest.mark.parametrize("name", ONE_DIM)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [None, 3, 8])
def test_one_dim_gradients_first_and_second_order(name, norm, n):
    fn = getattr(nt.fft, name)
    re, im = _complex_input((2, 5), ("batch", "time"), 2)

    def as_real(out):
        return nt.view_as_real(out) if out.dtype.kind == "c" else out

    if name in REAL_IN:
        def f(a):
            return as_real(fn(a, n=n, dim="time", norm=norm))
        assert gradcheck(f, re) and gradgradcheck(f, re)
    else:
        def g(a, b):
            return as_real(fn(nt.complex(a, b), n=n, dim="time", norm=norm))
        assert gradcheck(g, re, im) and gradgradcheck(g, re, im)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_n_dim_gradients_first_and_second_order(name):
    fn = getattr(nt.fft, name)
    re, im = _complex_input((3, 4, 2), ("a", "b", "c"), 3)
    if name == "rfftn":
        def f(a):
            return nt.view_as_real(fn(a, s=(5, 3), dim=("a", "b")))
        assert gradcheck(f, re) and gradgradcheck(f, re)
        return

    def g(a, b):
        out = fn(nt.complex(a, b), s=(5, 3), dim=("a", "b"))
        return nt.view_as_real(out) if out.dtype.kind == "c" else out
    assert gradcheck(g, re, im) and gradgradcheck(g, re, im)


@pytest.mark.parametrize("name", ONE_DIM)
def test_gradients_follow_pytorchs_convention_for_complex_inputs(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = _signal(rng, (6,), name not in REAL_IN)
    w = _signal(rng, (8 if name in ("irfft", "hfft") else 5 if name in REAL_IN else 8,), False)

    def loss(mod, t, weights):
        out = getattr(mod, name)(t, n=8)
        return (out.abs() * weights).sum() if out.dtype.is_complex else (out * weights).sum()

    t = nt.tensor(x, names=("time",), requires_grad=True)
    loss(nt.fft, t, nt.tensor(w, names=("time",))).backward()
    tt = torch.tensor(x, requires_grad=True)
    loss(torch.fft, tt, torch.tensor(w)).backward()
    assert_close(t.grad.numpy(), tt.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_dtypes_follow_pytorch(backend):
    assert nt.fft.fft(nt.randn(4)).dtype == nt.complex64
    assert nt.fft.fft(nt.randn(4, dtype=nt.float64)).dtype == nt.complex128
    assert nt.fft.fft(nt.arange(4)).dtype == nt.complex64  # ints compute in the default float
    assert nt.fft.rfft(nt.arange(4)).dtype == nt.complex64
    if backend.name == "numpy":  # the strict backend has no float16
        assert nt.fft.rfft(nt.randn(4, dtype=nt.float16)).dtype == nt.complex64
        assert nt.fft.fft(nt.randn(4, dtype=nt.float16)).dtype == nt.complex64
    assert nt.fft.irfft(nt.fft.rfft(nt.randn(4))).dtype == nt.float32
    assert nt.fft.ifft(nt.zeros(3, dtype=nt.complex64)).dtype == nt.complex64


def test_frequencies_and_shifts():
    for n in (1, 4, 5):
        assert_close(nt.fft.fftfreq(n, 0.5, dtype=nt.float64).numpy(), np.fft.fftfreq(n, 0.5))
        assert_close(nt.fft.rfftfreq(n, 0.5, dtype=nt.float64).numpy(), np.fft.rfftfreq(n, 0.5))
    f = nt.fft.fftfreq(6, names=("freq",))
    assert f.names == ("freq",) and f.dtype == nt.float32 and not f.requires_grad
    x = nt.tensor(np.arange(12.0).reshape(3, 4), names=("a", "b"))
    assert_close(nt.fft.fftshift(x).numpy(), np.fft.fftshift(np.arange(12.0).reshape(3, 4)))
    assert_close(nt.fft.fftshift(x, dim="b").numpy(), np.fft.fftshift(np.arange(12.0).reshape(3, 4), axes=1))
    assert_close(nt.fft.ifftshift(nt.fft.fftshift(x, dim=("a", "b")), dim=("a", "b")), x)
    assert nt.fft.fftshift(x, dim="a").names == ("a", "b")
    re, im = _complex_input((3, 4), ("a", "b"), 5)
    assert gradcheck(lambda a, b: nt.view_as_real(nt.fft.fftshift(nt.complex(a, b), dim="b")), re, im)


def test_errors():
    x = nt.randn(3, 4, names=("a", "b"))
    with pytest.raises(ValueError, match="fft: norm must be one of 'backward', 'ortho', 'forward'"):
        nt.fft.fft(x, norm="unitary")
    with pytest.raises(ValueError, match="rfft: n must be at least 1, got 0"):
        nt.fft.rfft(x, n=0)
    with pytest.raises(TypeError, match="fft: n must be an int, got float 2.5"):
        nt.fft.fft(x, n=2.5)
    with pytest.raises(TypeError, match="rfft: expects a real input tensor, got nt.complex64"):
        nt.fft.rfft(nt.fft.fft(x))
    with pytest.raises(nt.NamesError, match="fft: no dim named 'time'"):
        nt.fft.fft(x, dim="time")
    with pytest.raises(nt.NamesError, match=r"fftn: renaming the transformed dims of \('a', 'b'\) to \('b',\) would "
                                            "repeat a name"):
        nt.fft.fftn(x, dim="a", out_names=("b",))
    with pytest.raises(nt.NamesError, match=r"fftn: 1 output name\(s\) \('k',\) for 2 transformed dim\(s\)"):
        nt.fft.fftn(x, out_names=("k",))
    with pytest.raises(TypeError, match="fftn: out_names= takes a tuple of names"):
        nt.fft.fftn(x, dim="a", out_names="k")
    with pytest.raises(ValueError, match=r"fftn: s has 1 lengths for 2 dims"):
        nt.fft.fftn(x, s=(3,), dim=("a", "b"))
    with pytest.raises(ValueError, match="irfft: the output length 2 \\* \\(bins - 1\\) is 0 for an input of 1 bin"):
        nt.fft.irfft(nt.zeros(1, dtype=nt.complex64))
    with pytest.raises(TypeError, match="fftfreq: dtype must be a floating-point dtype"):
        nt.fft.fftfreq(4, dtype=nt.int64)


def test_the_standards_spellings():
    rng = np.random.default_rng(6)
    x = _signal(rng, (4, 6), True)
    t = nt.tensor(x, names=("a", "b"))
    assert xp.fft.fft(t, axis="a").names == ("a", "b")
    assert_close(xp.fft.fft(t, axis=0, n=5).numpy(), np.fft.fft(x, axis=0, n=5))
    assert_close(xp.fft.fftn(t, axes=("b",), s=(3,), norm="forward").numpy(),
                 np.fft.fftn(x, axes=(1,), s=(3,), norm="forward"))
    assert_close(xp.fft.irfftn(t, axes=(0, 1)).numpy(), np.fft.irfftn(x, axes=(0, 1)))
    assert_close(xp.fft.ihfft(t.real, axis=1).numpy(), np.fft.ihfft(x.real, axis=1))
    assert_close(xp.fft.fftfreq(5, d=2.0, dtype=xp.float64).numpy(), np.fft.fftfreq(5, 2.0))
    assert_close(xp.fft.fftshift(t, axes="b").numpy(), np.fft.fftshift(x, axes=1))


def test_dry_run_on_the_meta_backend():
    def fn(x):
        return nt.fft.irfft(nt.fft.rfft(x, n=10, dim="time", out_name="freq"), n=10, dim="freq", out_name="time")

    trace = nt.trace_shapes(fn, nt.spec(("batch", "time"), (2, 7)))
    assert "rfft" in str(trace) and "irfft" in str(trace)
    out = fn(nt.spec(("batch", "time"), (2, 7)))
    assert out.shape == (2, 10) and out.names == ("batch", "time") and out.dtype == nt.float32
    assert nt.fft.fftn(nt.spec(("a", "b"), (3, 4), dtype=nt.float64), s=(5, 2)).shape == (5, 2)
