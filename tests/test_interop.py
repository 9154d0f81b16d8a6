"""xarray, pandas and DLPack conversions: round trips, names, what is kept and lost, errors."""

import sys

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr

import namedtensor as nt
from namedtensor import interop
from namedtensor.interop import from_dlpack, from_xarray, to_xarray
from namedtensor.tensor import install_methods

install_methods(interop.METHODS)

pytestmark = pytest.mark.usefixtures("backend")

SHAPES = [(), (0,), (3,), (2, 0), (2, 3), (2, 1, 3)]


def dtypes(backend):
    # array-api-strict has no float16
    return [d for d in (np.bool_, np.int32, np.int64, np.float16, np.float32, np.float64)
            if backend.name == "numpy" or d is not np.float16]


def sample(shape, dtype):
    return np.asarray(np.arange(int(np.prod(shape))).reshape(shape) % 3).astype(dtype)


def names_for(shape):
    return tuple("abcd"[: len(shape)])


# ----------------------------------------------------------------------------- xarray
def test_xarray_round_trip_keeps_names_dtype_values(backend):
    for dtype in dtypes(backend):
        for shape in SHAPES:
            a = sample(shape, dtype)
            t = nt.tensor(a, names=names_for(shape))
            da = t.to_xarray()
            assert isinstance(da, xr.DataArray)
            assert da.dims == names_for(shape) and da.dtype == a.dtype and da.shape == shape
            np.testing.assert_array_equal(da.values, a)
            back = from_xarray(da)
            assert back.names == t.names and back.dtype == t.dtype and back.shape == shape
            np.testing.assert_array_equal(back.numpy(), a)


def test_xarray_identical_round_trip_with_coords_attrs_name(backend):
    da = xr.DataArray(
        np.arange(6.0).reshape(2, 3),
        dims=("time", "site"),
        coords={"time": [10, 20], "site": ["x", "y", "z"], "elev": ("site", [1.0, 2.0, 3.0])},
        attrs={"units": "K", "source": "test"},
        name="temp",
    )
    t = from_xarray(da)
    assert t.names == ("time", "site")
    back = to_xarray(t, coords=da.coords, attrs=da.attrs, name=da.name)
    xr.testing.assert_identical(back, da)


def test_from_xarray_drops_coords_attrs_and_name(backend):
    da = xr.DataArray([1.0, 2.0], dims=("x",), coords={"x": [5, 6]}, attrs={"u": 1}, name="v")
    plain = to_xarray(from_xarray(da))
    assert plain.name is None and plain.attrs == {} and "x" not in plain.coords
    xr.testing.assert_identical(plain, xr.DataArray(np.array([1.0, 2.0]), dims=("x",)))


def test_to_xarray_copies_and_detaches(backend):
    t = nt.tensor(np.ones(3), names=("x",), requires_grad=True)
    da = t.to_xarray()
    da.values[0] = 7.0
    np.testing.assert_array_equal(t.detach().numpy(), np.ones(3))
    attrs = {"u": 1}
    da = to_xarray(t, attrs=attrs)
    attrs["u"] = 2
    assert da.attrs == {"u": 1}


def test_from_xarray_copies(backend):
    da = xr.DataArray(np.zeros(3), dims=("x",))
    t = from_xarray(da)
    da.values[0] = 1.0
    np.testing.assert_array_equal(t.numpy(), np.zeros(3))


def test_to_xarray_refuses_unnamed_dims(backend):
    t = nt.tensor(np.zeros((2, 3)), names=("a", None))
    with pytest.raises(nt.NamesError, match=r"to_xarray: dim 1 of \('a', None\) is unnamed.*refine_names"):
        t.to_xarray()


def test_from_xarray_bad_input(backend):
    with pytest.raises(TypeError, match="from_xarray: expected an xarray.DataArray, got Dataset"):
        from_xarray(xr.Dataset({"v": ("x", [1.0])}))
    with pytest.raises(nt.NamesError, match="from_xarray: a dim name must be a str or None, got 0"):
        from_xarray(xr.DataArray(np.zeros(2), dims=(0,)))
    with pytest.raises(nt.NamesError, match="from_xarray: invalid dim name 'my dim'"):
        from_xarray(xr.DataArray(np.zeros(2), dims=("my dim",)))


def test_to_xarray_rejects_non_tensor(backend):
    with pytest.raises(TypeError, match="to_xarray: expected a Tensor, got ndarray"):
        to_xarray(np.zeros(2))


# ----------------------------------------------------------------------------- pandas
def test_to_pandas_series(backend):
    for dtype in dtypes(backend):
        a = sample((4,), dtype)
        s = nt.tensor(a, names=("row",)).to_pandas()
        assert isinstance(s, pd.Series)
        assert s.index.name == "row" and list(s.index) == [0, 1, 2, 3] and s.dtype == a.dtype
        np.testing.assert_array_equal(s.to_numpy(), a)


def test_to_pandas_dataframe(backend):
    for dtype in dtypes(backend):
        a = sample((2, 3), dtype)
        df = nt.tensor(a, names=("row", "col")).to_pandas()
        assert isinstance(df, pd.DataFrame)
        assert df.index.name == "row" and df.columns.name == "col"
        assert list(df.index) == [0, 1] and list(df.columns) == [0, 1, 2]
        assert all(d == a.dtype for d in df.dtypes)
        np.testing.assert_array_equal(df.to_numpy(), a)


def test_to_pandas_unnamed_and_empty(backend):
    df = nt.tensor(np.zeros((0, 2)), names=(None, "col")).to_pandas()
    assert df.shape == (0, 2) and df.index.name is None and df.columns.name == "col"
    s = nt.tensor(np.zeros(0, np.int64)).to_pandas()
    assert len(s) == 0 and s.index.name is None and s.dtype == np.int64


def test_to_pandas_copies(backend):
    t = nt.tensor(np.zeros((2, 2)), names=("a", "b"), requires_grad=True)
    df = t.to_pandas()
    df.iloc[0, 0] = 5.0
    np.testing.assert_array_equal(t.detach().numpy(), np.zeros((2, 2)))


def test_to_pandas_rank_errors(backend):
    with pytest.raises(ValueError, match=r"to_pandas: pandas holds 1-D \(Series\) or 2-D \(DataFrame\).*0 dims \(\)"):
        nt.tensor(np.float64(1.0)).to_pandas()
    with pytest.raises(ValueError, match=r"has 3 dims \('a', 'b', 'c'\).*use to_xarray"):
        nt.tensor(np.zeros((1, 2, 3)), names=("a", "b", "c")).to_pandas()


# ----------------------------------------------------------------------------- optional extras
@pytest.mark.parametrize("module, call", [
    ("xarray", lambda t: t.to_xarray()),
    ("xarray", lambda t: from_xarray(None)),
    ("pandas", lambda t: t.to_pandas()),
])
def test_missing_extra_says_what_to_install(backend, monkeypatch, module, call):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(ImportError, match=rf'needs {module}.*pip install "named-tensors\[interop\]"'):
        call(nt.tensor(np.zeros(2), names=("x",)))


# ----------------------------------------------------------------------------- DLPack
def test_numpy_from_dlpack_of_tensor_is_zero_copy(backend):
    for dtype in dtypes(backend):
        for shape in SHAPES:
            t = nt.tensor(sample(shape, dtype), names=names_for(shape))
            a = np.from_dlpack(t)
            assert a.shape == shape and a.dtype == dtype
            np.testing.assert_array_equal(a, t.numpy())
            if a.size:
                assert np.shares_memory(a, t.numpy())


def test_dlpack_device_is_cpu(backend):
    t = nt.tensor(np.zeros(2), names=("x",))
    assert tuple(t.__dlpack_device__()) == (1, 0)  # kDLCPU, device 0


def test_from_dlpack_of_numpy_is_zero_copy(backend):
    for dtype in dtypes(backend):
        for shape in SHAPES:
            src = sample(shape, dtype)
            t = from_dlpack(src, names=names_for(shape))
            assert t.names == names_for(shape) and t.shape == shape and t.dtype.name == np.dtype(dtype).name
            np.testing.assert_array_equal(t.numpy(), src)
            if src.size:
                assert np.shares_memory(t.numpy(), src)
                src.flat[0] = not src.flat[0]  # the tensor sees the producer's writes
                np.testing.assert_array_equal(t.numpy(), src)


def test_from_dlpack_names(backend):
    src = np.zeros((2, 3))
    assert from_dlpack(src).names == (None, None)
    t = nt.tensor(src, names=("a", "b"))
    assert from_dlpack(t).names == ("a", "b")  # a Tensor producer keeps its names
    assert from_dlpack(t, names=("c", None)).names == ("c", None)
    assert not from_dlpack(t).requires_grad


def test_from_dlpack_names_errors(backend):
    src = np.zeros((2, 3))
    with pytest.raises(nt.NamesError, match=r"from_dlpack: got 1 names \('a',\) for a tensor with 2 dims"):
        from_dlpack(src, names=("a",))
    with pytest.raises(nt.NamesError, match="from_dlpack: duplicate dim name 'a'"):
        from_dlpack(src, names=("a", "a"))
    with pytest.raises(nt.NamesError, match="from_dlpack: names must be a sequence of names, not the str 'ab'"):
        from_dlpack(src, names="ab")
    with pytest.raises(nt.NamesError, match="from_dlpack: a dim name must be a str or None, got 1"):
        from_dlpack(src, names=(1, "b"))


def test_from_dlpack_bad_input(backend):
    with pytest.raises(TypeError, match="from_dlpack: expected an object with __dlpack__.*got list.*nt.tensor"):
        from_dlpack([1.0, 2.0])
    assert from_dlpack(np.zeros(2, np.uint8)).dtype is nt.uint8  # every dtype of the standard is taken
    with pytest.raises(TypeError, match="from_dlpack: the .* backend cannot take this Tensor"):
        from_dlpack(torch.zeros(2, dtype=torch.bfloat16))


def test_dlpack_refuses_tensor_requiring_grad(backend):
    t = nt.tensor(np.zeros(2), names=("x",), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"__dlpack__: the tensor requires grad; export t.detach\(\)"):
        np.from_dlpack(t)
    assert np.shares_memory(np.from_dlpack(t.detach()), t.detach().numpy())


class _Producer:
    """A DLPack producer that only says where its memory is."""

    def __init__(self, kind, index=0):
        self.where = (kind, index)

    def __dlpack__(self, **kwargs):
        raise AssertionError("the device is checked before any data is taken")

    def __dlpack_device__(self):
        return self.where


@pytest.mark.usefixtures("no_cupy")
def test_from_dlpack_follows_the_producers_device():
    with pytest.raises(RuntimeError, match="device 'cuda:1' needs CuPy and an NVIDIA GPU"):
        from_dlpack(_Producer(2, 1))  # kDLCUDA, device 1
    with pytest.raises(ValueError, match="from_dlpack: the producer's memory is on DLPack device type 4"):
        from_dlpack(_Producer(4))  # kDLOpenCL
    assert from_dlpack(np.zeros(3)).device == "cpu"  # kDLCPU


def test_dlpack_round_trip_with_pytorch_where_installed():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch); the exchange "
                                "with NumPy above covers the protocol")
    t = nt.tensor(np.arange(6.0).reshape(2, 3), names=("a", "b"), dtype=nt.float32)
    pt = torch.from_dlpack(t)
    assert tuple(pt.shape) == (2, 3) and pt.dtype == torch.float32
    pt[0, 0] = 7.0  # the same memory both ways
    assert t.numpy()[0, 0] == 7.0
    back = from_dlpack(pt, names=("x", "y"))
    assert back.names == ("x", "y") and np.shares_memory(back.numpy(), t.numpy())
