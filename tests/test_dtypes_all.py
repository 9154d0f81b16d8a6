"""Every dtype of the Array API standard, through creation, arithmetic and promotion (against NumPy 2's
tables for all pairs), reductions, sorting, indexing, checkpoints, display and the meta backend."""

import itertools

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import _dtypes, backends
from namedtensor.array_api import _dtypes as xd
from namedtensor.testing import assert_close

from conftest import BACKENDS

ALL = _dtypes.ALL
NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
         "float64", "complex64", "complex128")
ids = [d.name for d in ALL]
PAIRS = list(itertools.product(ALL, ALL))
pair_ids = [f"{a.name}-{b.name}" for a, b in PAIRS]


def _np(d):
    return np.dtype(d.name)


def _values(d, n=3):
    """``n`` small values every dtype holds (0, 1, 2...; a complex part for complex dtypes)."""
    a = np.arange(n) % 2 == 1 if d is nt.bool_ else np.arange(n).astype(d.name)
    if d.kind == "c":
        a = a + 1j * np.arange(n)[::-1]
    return a.astype(d.name)


def _on_backend(d, backend):
    """Whether ``backend`` has ``d``: array-api-strict lacks float16 (it is not in the standard)."""
    return not (backend.name == "array_api_strict" and d is nt.float16)


#: every dtype on every CPU backend that has it (test_creation checks that the others refuse it)
HELD = [(b, d) for b in BACKENDS for d in ALL if not (b == "array_api_strict" and d is nt.float16)]


@pytest.fixture(params=HELD, ids=[f"{b}-{d.name}" for b, d in HELD])
def held(request):
    """``(backend, dtype)``, the backend active: a dtype test runs where its dtype exists, and only there."""
    name, d = request.param
    backend = backends.use_cpu_backend(name)
    nt.manual_seed(0)
    yield backend, d
    backends.use_cpu_backend("numpy")


def test_every_dtype_of_the_standard_is_there():
    assert sorted(d.name for d in ALL) == sorted(NAMES)
    for name in NAMES:
        d = getattr(nt, name if name != "bool" else "bool_")
        assert isinstance(d, nt.DType) and d.name == name and d.itemsize == np.dtype(name).itemsize
        assert d.kind == np.dtype(name).kind
        assert _dtypes.as_dtype(np.dtype(name)) is d and _dtypes.as_dtype(name) is d
    assert (nt.short, nt.cfloat, nt.cdouble) == (nt.int16, nt.complex64, nt.complex128)
    assert _dtypes.as_dtype(complex) is nt.complex64 and _dtypes.as_dtype("cdouble") is nt.complex128
    assert nt.uint8.kind == "u" and nt.complex64.is_complex and not nt.uint8.is_signed and nt.int8.is_signed


@pytest.mark.parametrize("d", ALL, ids=ids)
def test_creation(backend, d):
    if not _on_backend(d, backend):
        with pytest.raises(TypeError, match=f"dtype nt.{d.name} is not available on the array_api_strict backend"):
            nt.zeros(2, dtype=d)
        return
    a = _values(d)
    for t in (nt.tensor(a, names=("x",)), nt.as_tensor(a, names=("x",)), nt.tensor(a.tolist(), dtype=d)):
        assert t.dtype is d
        np.testing.assert_array_equal(t.numpy(), a)
    for fn, ref in ((nt.zeros, np.zeros), (nt.ones, np.ones)):
        t = fn(2, 3, names=("a", "b"), dtype=d)
        assert t.dtype is d and t.names == ("a", "b")
        np.testing.assert_array_equal(t.numpy(), ref((2, 3), _np(d)))
    assert nt.empty(2, dtype=d).dtype is d and nt.zeros_like(nt.tensor(a)).dtype is d
    fill = True if d is nt.bool_ else 3
    np.testing.assert_array_equal(nt.full((2,), fill, dtype=d).numpy(), np.full(2, fill, _np(d)))
    assert nt.tensor(a).to(nt.complex128).dtype is nt.complex128 and nt.ones(2).to(d).dtype is d


def test_python_numbers_choose_the_default_dtypes(backend):
    assert nt.tensor([1j, 2]).dtype is nt.complex64 and nt.tensor(1 + 2j).dtype is nt.complex64
    assert nt.tensor([1.5, 2j], dtype=nt.complex128).dtype is nt.complex128
    assert nt.tensor([0.1 + 0.1j], dtype=nt.complex128).item() == 0.1 + 0.1j  # no complex64 detour
    assert nt.full((2,), 1 - 1j).dtype is nt.complex64
    assert nt.tensor(np.complex128(1j)).dtype is nt.complex128  # NumPy data keeps its dtype
    assert nt.randn(3, dtype=nt.complex64).dtype is nt.complex64
    assert nt.rand_like(nt.zeros(2, dtype=nt.complex128)).dtype is nt.complex128


def test_complex_normal_samples_have_unit_variance():
    z = nt.randn(20000, dtype=nt.complex128).numpy()
    assert abs(np.mean(np.abs(z) ** 2) - 1) < 0.05 and abs(np.var(z.real) - 0.5) < 0.03
    u = nt.rand(20000, dtype=nt.complex64).numpy()
    assert 0 <= u.real.min() and u.real.max() < 1 and 0 <= u.imag.min() and u.imag.max() < 1


@pytest.mark.parametrize("a, b", PAIRS, ids=pair_ids)
def test_promotion_of_every_pair_is_numpys(backend, a, b):
    expected = np.result_type(_np(a), _np(b))
    assert xd.result_type(a, b).name == expected.name
    # bool with bool is logic, not arithmetic (array-api-strict refuses bool + bool)
    if not (_on_backend(a, backend) and _on_backend(b, backend)) or a is b is nt.bool_:
        return
    x, y = _values(a), _values(b)[::-1].copy()
    tx, ty = nt.tensor(x, names=("n",)), nt.tensor(y, names=("n",))
    with np.errstate(all="ignore"):
        for op, ref in (("add", np.add), ("mul", np.multiply), ("eq", np.equal)):
            out = getattr(nt, op)(tx, ty)
            want = ref(x, y)
            assert out.dtype.name == want.dtype.name and out.names == ("n",)
            np.testing.assert_array_equal(out.numpy(), want)
        np.testing.assert_array_equal((tx - ty).numpy(), np.subtract(x, y))
        # true division: NumPy's dtype, except that integers give float64 (the library's rule)
        quotient = (tx / (ty + 1 if b is not nt.bool_ else ty.to(nt.int64) + 1))
        assert quotient.dtype.kind in "fc"
        want = np.true_divide(x, (y + 1 if b is not nt.bool_ else y.astype(np.int64) + 1))
        assert quotient.dtype.name == want.dtype.name
        assert_close(quotient.numpy(), want, rtol=1e-3)


def test_promotion_with_python_scalars(backend):
    u8, i8 = nt.tensor([1, 2], dtype=nt.uint8), nt.tensor([1, 2], dtype=nt.int8)
    assert (u8 + 1).dtype is nt.uint8 and (i8 * 2).dtype is nt.int8  # weak scalars keep the tensor's dtype
    assert (u8 * 0.5).dtype is nt.float64 and (i8 * 1j).dtype is nt.complex128  # NumPy 2's
    assert (nt.ones(2) * 1j).dtype is nt.complex64 and (nt.ones(2, dtype=nt.float64) + 1j).dtype is nt.complex128
    assert (nt.ones(2, dtype=nt.complex64) * 2.5).dtype is nt.complex64
    assert xd.result_type(nt.uint16, 1j) is nt.complex64 and xd.result_type(nt.float64, 1j) is nt.complex128
    assert xd.result_type(nt.complex64, 1.0) is nt.complex64 and xd.result_type(nt.uint8, 1) is nt.uint8


def test_unsigned_arithmetic_wraps_as_numpys(backend):
    a = np.array([0, 1, 250], dtype=np.uint8)
    t = nt.tensor(a, names=("n",))
    with np.errstate(all="ignore"):
        for got, want in ((t + 10, a + 10), (t - 1, a - 1), (-t, -a), (t * 3, a * 3), (t // 7, a // 7),
                          (t % 7, a % 7), (t - t.flip("n"), a - a[::-1])):
            assert got.dtype is nt.uint8 and got.names == ("n",)
            np.testing.assert_array_equal(got.numpy(), want)
    # NumPy's words, or array-api-strict's
    with pytest.raises(OverflowError, match="^add: Python int.* (-1 out of bounds for uint8|within the bounds)"):
        t + (-1)
    big = nt.tensor([2**64 - 1], dtype=nt.uint64)
    assert (big + nt.tensor([-1], dtype=nt.int64)).dtype is nt.float64  # no integer holds both
    assert (nt.tensor([1], dtype=nt.uint32) + nt.tensor([1], dtype=nt.int8)).dtype is nt.int64
    assert (t / 2).dtype is nt.float64
    assert (nt.tensor([7], dtype=nt.int16) / nt.tensor([2], dtype=nt.int8)).item() == 3.5


REDUCTIONS = [("sum", np.sum), ("prod", np.prod), ("mean", np.mean), ("amax", np.max), ("amin", np.min)]


@pytest.mark.parametrize("name, ref", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reductions(held, name, ref):
    _, d = held
    a = np.stack([_values(d, 4), _values(d, 4)[::-1]])
    t = nt.tensor(a, names=("a", "b"))
    if d.kind == "c" and name in ("amax", "amin"):
        with pytest.raises(TypeError, match=f"^{name}: complex numbers have no order"):
            getattr(t, name)("b")
        return
    out = getattr(t, name)("b")
    want = ref(a.astype(np.float64) if name == "mean" and d.kind in "biu" else a, axis=1)
    assert out.names == ("a",) and out.dtype.name == want.dtype.name
    assert_close(out.numpy(), want, rtol=1e-3)
    np.testing.assert_array_equal(t.cumsum("b").numpy(), np.cumsum(a, axis=1))


def test_sort_and_argsort(held):
    _, d = held
    a = np.array([3, 0, 2, 1]).astype(d.name) if d is not nt.bool_ else np.array([True, False, True, False])
    t = nt.tensor(a, names=("n",))
    if d.kind == "c":
        for fn in (lambda: t.sort("n"), lambda: t.argsort("n"), lambda: t.topk(2), lambda: t.median("n"),
                   lambda: t.max(), lambda: t.argmax(), lambda: t.cummax("n")):
            with pytest.raises(TypeError, match="complex numbers have no order .*t.abs\\(\\)"):
                fn()
        return
    values, indices = t.sort("n", stable=True)
    assert values.dtype is d and values.names == ("n",)
    np.testing.assert_array_equal(values.numpy(), np.sort(a, kind="stable"))
    np.testing.assert_array_equal(indices.numpy(), np.argsort(a, kind="stable"))
    np.testing.assert_array_equal(t.argmax().numpy(), np.argmax(a))


def test_indexing(held):
    _, d = held
    a = np.stack([_values(d, 4)] * 3)
    t = nt.tensor(a, names=("a", "b"))
    np.testing.assert_array_equal(t[1].numpy(), a[1])
    np.testing.assert_array_equal(t[{"b": slice(1, 3)}].numpy(), a[:, 1:3])
    np.testing.assert_array_equal(t[:, [0, 2]].numpy(), a[:, [0, 2]])
    mask = np.array([True, False, True, True])
    np.testing.assert_array_equal(t[:, nt.tensor(mask)].numpy(), a[:, mask])
    idx = nt.tensor([[1], [3], [0]], names=("a", "b"))
    np.testing.assert_array_equal(t.gather("b", idx).numpy(), np.take_along_axis(a, idx.numpy(), axis=1))
    # an unsigned index works as NumPy's does
    np.testing.assert_array_equal(t[:, nt.tensor([3, 0], dtype=nt.uint8)].numpy(), a[:, [3, 0]])
    u = t.clone()
    u[0] = t[2]
    assert u.dtype is d
    np.testing.assert_array_equal(u.numpy()[0], a[2])
    assert nt.cat([t, t], "a").dtype is d and nt.stack([t, t], "c").dtype is d


def test_checkpoints_round_trip(held, tmp_path):
    _, d = held
    t = nt.tensor(np.stack([_values(d)] * 2), names=("a", None))
    path = tmp_path / "ckpt.safetensors"
    if d is nt.complex128:
        with pytest.raises(TypeError, match=r"save: cannot save obj: the safetensors format has no complex128 dtype"):
            nt.save(t, path)
        assert not path.exists()
        nt.save(nt.view_as_real(t, name="part"), path)  # the message's advice works
        back = nt.view_as_complex(nt.load(path))
        assert back.dtype is d and back.names == ("a", None)
        np.testing.assert_array_equal(back.numpy(), t.numpy())
        return
    nt.save({"t": t, "n": 3}, path)
    back = nt.load(path)["t"]
    assert back.dtype is d and back.names == ("a", None)
    np.testing.assert_array_equal(back.numpy(), t.numpy())


def test_display(held):
    _, d = held
    t = nt.tensor(np.stack([_values(d)] * 2), names=("a", "b"))
    assert f"dtype=nt.{d.name}" in repr(t)
    html = t._repr_html_()
    assert d.name in html and "<table>" in html
    big = nt.tensor(np.stack([np.stack([_values(d)] * 2)] * 2), names=("c", "a", "b"))
    summary = big._repr_html_().split('class="nt-summary">')[1].split("<")[0]
    if d.kind == "c":
        assert summary.startswith("max |z| 2.") and "mean 1.+1.j" in summary
    elif d is not nt.bool_:
        assert summary.startswith("min 0") and "· max 2" in summary and "· mean 1" in summary


def test_meta_backend_gives_the_dtypes_of_a_real_run(held):
    _, d = held
    s = nt.spec(("a", "b"), (2, 3), d)
    real = nt.tensor(np.stack([_values(d)] * 2), names=("a", "b"))

    def fn(x):
        return (x * 2).sum("b"), (x * 2).mean("a"), x.to(nt.complex128)[0], x.real * 1

    for got, want in zip(fn(s), fn(real)):
        assert got.device == "meta" and got.dtype is want.dtype and got.names == want.names
        assert got.shape == want.shape


def test_casters_and_to(backend):
    t = nt.tensor([1.7, 2.2], names=("n",))
    for method, d in (("short", nt.int16), ("char", nt.int8), ("byte", nt.uint8), ("cfloat", nt.complex64),
                      ("cdouble", nt.complex128)):
        out = getattr(t, method)()
        assert out.dtype is d and out.names == ("n",)
        np.testing.assert_array_equal(out.numpy(), t.numpy().astype(d.name))
    assert t.to("uint16").dtype is nt.uint16 and t.to(np.complex64).dtype is nt.complex64
    assert t.cfloat().is_complex() and not t.is_complex() and nt.is_complex(t.cdouble())


def test_integer_and_complex_info(backend):
    assert (xd.iinfo(nt.uint8).min, xd.iinfo(nt.uint8).max) == (0, 255)
    assert xd.iinfo(nt.uint64).max == 2**64 - 1 and xd.iinfo(nt.int8).min == -128
    assert xd.finfo(nt.complex64).eps == float(np.finfo(np.complex64).eps)
    assert xd.finfo(nt.complex128).dtype is nt.float64 and xd.finfo(nt.complex128).bits == 64
    assert xd.can_cast(nt.uint8, nt.int16) and not xd.can_cast(nt.uint8, nt.int8)
    assert xd.can_cast(nt.float32, nt.complex64) and not xd.can_cast(nt.float64, nt.complex64)
    assert not xd.can_cast(nt.int8, nt.float64) and not xd.can_cast(nt.complex64, nt.float64)
    with pytest.raises(TypeError, match="^iinfo: expected a"):
        xd.iinfo(nt.complex64)


def test_interop_round_trips(held):
    import torch

    _, d = held

    t = nt.tensor(np.stack([_values(d)] * 2), names=("a", "b"))
    back = nt.from_xarray(t.to_xarray())
    assert back.dtype is d and back.names == ("a", "b")
    np.testing.assert_array_equal(back.numpy(), t.numpy())
    theirs = torch.from_dlpack(t)
    assert str(theirs.dtype) == f"torch.{d.name}"
    mine = nt.from_dlpack(theirs, names=("a", "b"))
    assert mine.dtype is d
    np.testing.assert_array_equal(mine.numpy(), t.numpy())
