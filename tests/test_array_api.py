"""namedtensor.array_api: the Array API standard's namespace, checked against NumPy, names included."""

import math

import numpy as np
import pytest

import namedtensor as nt
import namedtensor.array_api as xp

A = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def t():
    return nt.tensor(A, names=("batch", "feat"))


def close(out, expected, names):
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert out.names == names


def test_namespace_basics():
    x = t()
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError, match="^__array_namespace__: api_version"):
        x.__array_namespace__(api_version="2021.12")
    assert xp.__array_api_version__ == "2024.12"
    assert (xp.e, xp.pi, xp.inf, xp.newaxis) == (math.e, math.pi, math.inf, None) and math.isnan(xp.nan)
    assert xp.float32 is nt.float32 and xp.bool is nt.bool_
    assert all(hasattr(xp, n) for n in xp.__all__)


def test_info():
    info = xp.__array_namespace_info__()
    assert info.default_device() == "cpu" and "cpu" in info.devices() and "meta" in info.devices()
    assert info.default_dtypes() == {"real floating": nt.float32, "complex floating": nt.complex64,
                                     "integral": nt.int64, "indexing": nt.int64}
    # the standard's dtypes: namedtensor's float16 is not one of them
    assert set(info.dtypes()) == {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                  "float32", "float64", "complex64", "complex128"}
    assert set(info.dtypes(kind="integral")) == {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                                 "uint64"}
    assert set(info.dtypes(kind=("complex floating", "unsigned integer"))) == {"complex64", "complex128", "uint8",
                                                                               "uint16", "uint32", "uint64"}
    assert info.capabilities()["boolean indexing"]


def test_dtype_functions():
    assert xp.result_type(xp.int32, xp.int64) is xp.int64
    assert xp.result_type(t(), 1.0) is xp.float32 and xp.result_type(xp.int32, 1.0) is xp.float32
    # NumPy 2's promotion across kinds (tests/test_dtypes_all.py checks every pair)
    assert xp.result_type(xp.uint64, xp.int64) is xp.float64 and xp.result_type(xp.uint8, xp.int8) is xp.int16
    assert xp.result_type(xp.float64, xp.complex64) is xp.complex128 and xp.result_type(t(), 1j) is xp.complex64
    with pytest.raises(ValueError, match="^result_type:"):
        xp.result_type(1)
    assert xp.can_cast(xp.int32, xp.int64) and not xp.can_cast(xp.int64, xp.int32)
    assert not xp.can_cast(xp.int64, xp.float64)
    with pytest.raises(TypeError, match="^can_cast:"):
        xp.can_cast("int32", xp.int64)
    assert xp.finfo(xp.float32).eps == float(np.finfo(np.float32).eps) and xp.finfo(t()).bits == 32
    assert xp.iinfo(xp.int32).max == np.iinfo(np.int32).max
    with pytest.raises(TypeError, match="^finfo:"):
        xp.finfo(xp.int32)
    with pytest.raises(TypeError, match="^iinfo:"):
        xp.iinfo(xp.float32)
    assert xp.isdtype(xp.int32, "integral") and xp.isdtype(xp.float16, ("bool", "real floating"))
    assert not xp.isdtype(xp.int32, "unsigned integer") and xp.isdtype(xp.int64, xp.int64)
    assert xp.isdtype(xp.uint8, "unsigned integer") and xp.isdtype(xp.complex64, ("complex floating", "numeric"))
    with pytest.raises(ValueError, match="^isdtype:"):
        xp.isdtype(xp.int32, "whole")
    out = xp.astype(t(), xp.int64)
    assert out.dtype is nt.int64 and out.names == ("batch", "feat")
    np.testing.assert_array_equal(out.numpy(), A.astype(np.int64))


def test_creation():
    close(xp.arange(5), np.arange(5), (None,))
    close(xp.arange(1, 7, 2), np.arange(1, 7, 2), (None,))
    close(xp.zeros((2, 3)), np.zeros((2, 3)), (None, None))
    close(xp.ones(3), np.ones(3), (None,))
    close(xp.full((2,), 7.0), np.full(2, 7.0), (None,))
    assert xp.empty((2, 3)).shape == (2, 3)
    for fn, ref in ((xp.zeros_like, np.zeros_like), (xp.ones_like, np.ones_like)):
        close(fn(t()), ref(A), ("batch", "feat"))
    close(xp.full_like(t(), 2.0), np.full_like(A, 2.0), ("batch", "feat"))
    assert xp.empty_like(t()).names == ("batch", "feat")
    for k in (-1, 0, 2):
        close(xp.eye(3, 4, k=k), np.eye(3, 4, k=k), (None, None))
    close(xp.linspace(0, 1, 5), np.linspace(0, 1, 5), (None,))
    close(xp.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False), (None,))
    close(xp.tril(t()), np.tril(A), ("batch", "feat"))
    close(xp.triu(t(), k=1), np.triu(A, 1), ("batch", "feat"))
    a, b = nt.arange(3, names=("x",)), nt.arange(2, names=("y",))
    for indexing, names in (("xy", ("y", "x")), ("ij", ("x", "y"))):
        for out, ref in zip(xp.meshgrid(a, b, indexing=indexing), np.meshgrid(np.arange(3), np.arange(2),
                                                                              indexing=indexing)):
            close(out, ref, names)
    with pytest.raises(ValueError, match="^meshgrid:"):
        xp.meshgrid(a, b, indexing="yx")
    close(xp.from_dlpack(np.arange(3.0)), np.arange(3.0), (None,))


def test_asarray():
    x = t()
    assert xp.asarray(x) is x
    assert xp.asarray(x, copy=True) is not x and xp.asarray(x, copy=True).names == x.names
    close(xp.asarray([[1.0, 2.0]]), np.array([[1.0, 2.0]]), (None, None))
    assert xp.asarray(x, dtype=xp.float64).dtype is nt.float64
    with pytest.raises(ValueError, match="^asarray:"):
        xp.asarray([1, 2], copy=False)
    with pytest.raises(ValueError, match="^asarray:"):
        xp.asarray(x, dtype=xp.float64, copy=False)


UNARY = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "exp", "expm1", "floor",
         "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10", "negative", "positive", "round", "sign",
         "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc", "logical_not"]
BINARY = ["add", "atan2", "copysign", "divide", "equal", "floor_divide", "greater", "greater_equal", "hypot", "less",
          "less_equal", "logaddexp", "logical_and", "logical_or", "logical_xor", "maximum", "minimum", "multiply",
          "not_equal", "pow", "remainder", "subtract"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    a = np.array([[-0.0, 0.5, 2.0], [1.5, -0.7, 3.0]], dtype=np.float32)
    if name in ("acos", "asin", "atanh"):
        a = a / 4
    if name in ("acosh",):
        a = np.abs(a) + 1
    if name in ("log", "log1p", "log2", "log10", "sqrt"):
        a = np.abs(a) + 0.1
    with np.errstate(all="ignore"):
        out = getattr(xp, name)(nt.tensor(a, names=("batch", "feat")))
        close(out, getattr(np, name)(a), ("batch", "feat"))


@pytest.mark.parametrize("name", BINARY)
def test_binary(name):
    a = np.array([[0.5, 1.5, 2.0], [1.0, 2.5, 3.0]], dtype=np.float32)
    b = np.array([1.5, 0.5, 2.0], dtype=np.float32)
    fn = getattr(xp, name)
    out = fn(nt.tensor(a, names=("batch", "feat")), nt.tensor(b, names=("feat",)))
    close(out, getattr(np, name)(a, b), ("batch", "feat"))
    close(fn(nt.tensor(a, names=("batch", "feat")), 2.0), getattr(np, name)(a, np.float32(2.0)), ("batch", "feat"))
    with pytest.raises(nt.NamesError):
        fn(nt.tensor(a, names=("batch", "feat")), nt.tensor(b, names=("seq",)))


def test_reciprocal_and_clip():
    close(xp.reciprocal(t() + 10), 1 / (A + 10), ("batch", "feat"))
    close(xp.clip(t(), -1.0, 1.0), np.clip(A, -1, 1), ("batch", "feat"))
    close(xp.clip(t(), max=0.0), np.minimum(A, 0), ("batch", "feat"))


def test_clip_without_bounds_and_signbit_of_infinities():
    close(xp.clip(t()), A, ("batch", "feat"))  # the standard's clip(x) is a copy
    x = nt.tensor([-np.inf, -0.0, 0.0, np.inf, -1.0], names=("i",))
    assert xp.signbit(x).tolist() == [True, True, False, False, True]


@pytest.mark.parametrize("name,ref", [("sum", np.sum), ("prod", np.prod), ("mean", np.mean), ("max", np.max),
                                      ("min", np.min), ("std", np.std), ("var", np.var)])
def test_statistical(name, ref):
    fn = getattr(xp, name)
    close(fn(t(), axis="feat"), ref(A, axis=1), ("batch",))
    close(fn(t(), axis=0, keepdims=True), ref(A, axis=0, keepdims=True), ("batch", "feat"))
    close(fn(t()), ref(A), ())
    close(fn(t(), axis=("batch", "feat")), ref(A, axis=(0, 1)), ())
    close(fn(t(), axis=()), ref(A, axis=()), ("batch", "feat"))


def test_statistical_options():
    close(xp.std(t(), axis="feat", correction=1), np.std(A, axis=1, ddof=1), ("batch",))
    out = xp.sum(t(), axis="feat", dtype=xp.float64)
    assert out.dtype is nt.float64
    close(out, A.sum(axis=1, dtype=np.float64), ("batch",))
    b = A > 0
    for name in ("all", "any"):
        fn = getattr(xp, name)
        close(fn(nt.tensor(b, names=("batch", "feat")), axis="feat"), getattr(np, name)(b, axis=1), ("batch",))
        close(fn(nt.tensor(b, names=("batch", "feat")), axis=()), b, ("batch", "feat"))


def test_cumulative():
    close(xp.cumulative_sum(t(), axis="feat"), np.cumsum(A, axis=1), ("batch", "feat"))
    close(xp.cumulative_sum(t(), axis="feat", include_initial=True), np.cumsum(np.pad(A, ((0, 0), (1, 0))), axis=1),
          ("batch", "feat"))
    close(xp.cumulative_prod(t(), axis=0, include_initial=True),
          np.cumprod(np.pad(A, ((1, 0), (0, 0)), constant_values=1), axis=0), ("batch", "feat"))
    close(xp.cumulative_sum(nt.arange(4.0, names=("seq",))), np.cumsum(np.arange(4.0)), ("seq",))
    with pytest.raises(ValueError, match="^cumulative_sum:"):
        xp.cumulative_sum(t())


def test_diff():
    close(xp.diff(t(), axis="feat"), np.diff(A, axis=1), ("batch", "feat"))
    close(xp.diff(t(), axis=1, n=2), np.diff(A, axis=1, n=2), ("batch", "feat"))
    p = nt.zeros(2, 1, names=("batch", "feat"))
    close(xp.diff(t(), prepend=p, append=p), np.diff(A, prepend=np.zeros((2, 1)), append=np.zeros((2, 1))),
          ("batch", "feat"))
    with pytest.raises(ValueError, match="^diff:"):
        xp.diff(t(), axis=0, n=3)


def test_manipulation():
    x = t()
    outs = xp.broadcast_arrays(x, nt.tensor(A[0], names=("feat",)))
    for out in outs:
        assert out.names == ("batch", "feat") and out.shape == (2, 3)
    close(xp.broadcast_to(nt.tensor(A[0], names=("feat",)), (2, 3)), np.broadcast_to(A[0], (2, 3)), (None, "feat"))
    close(xp.concat([x, x], axis="batch"), np.concatenate([A, A], axis=0), ("batch", "feat"))
    close(xp.concat([x, x], axis=None), np.concatenate([A, A], axis=None), (None,))
    close(xp.expand_dims(x, axis=-1), np.expand_dims(A, -1), ("batch", "feat", None))
    with pytest.raises(IndexError, match="^expand_dims:"):
        xp.expand_dims(x, axis=4)
    close(xp.flip(x), np.flip(A), ("batch", "feat"))
    close(xp.flip(x, axis="feat"), np.flip(A, axis=1), ("batch", "feat"))
    y = nt.zeros(2, 3, 4, names=("a", "b", "c"))
    assert xp.moveaxis(y, "a", -1).names == ("b", "c", "a")
    assert xp.moveaxis(y, (0, "b"), (2, 0)).names == ("b", "c", "a")
    assert xp.moveaxis(y, 0, -1).shape == np.moveaxis(np.zeros((2, 3, 4)), 0, -1).shape
    with pytest.raises(ValueError, match="^moveaxis:"):
        xp.moveaxis(y, (0, 1), 2)
    close(xp.permute_dims(x, ("feat", "batch")), A.T, ("feat", "batch"))
    close(xp.repeat(x, 2, axis="feat"), np.repeat(A, 2, axis=1), ("batch", "feat"))
    close(xp.repeat(x, nt.tensor([1, 0, 2]), axis=1), np.repeat(A, [1, 0, 2], axis=1), ("batch", "feat"))
    close(xp.repeat(x, 2), np.repeat(A, 2), (None,))
    close(xp.reshape(x, (2, 3, 1)), A.reshape(2, 3, 1), ("batch", "feat", None))
    close(xp.reshape(x, (3, 2), copy=True), A.reshape(3, 2), (None, None))
    close(xp.roll(x, 1, axis="feat"), np.roll(A, 1, axis=1), ("batch", "feat"))
    close(xp.squeeze(xp.expand_dims(x, axis=0), 0), A, ("batch", "feat"))
    with pytest.raises(ValueError, match="^squeeze:"):
        xp.squeeze(x, "feat")
    close(xp.stack([x, x], axis=1), np.stack([A, A], axis=1), ("batch", None, "feat"))
    close(xp.stack([x, x], axis=-1), np.stack([A, A], axis=-1), ("batch", "feat", None))
    with pytest.raises(IndexError, match="^stack:"):
        xp.stack([x, x], axis=5)
    close(xp.tile(x, (2, 1)), np.tile(A, (2, 1)), ("batch", "feat"))
    parts = xp.unstack(x, axis="feat")
    assert len(parts) == 3
    close(parts[1], A[:, 1], ("batch",))


def test_searching_sorting():
    x = t()
    close(xp.argmax(x, axis="feat"), np.argmax(A, axis=1), ("batch",))
    close(xp.argmin(x, axis=0, keepdims=True), np.argmin(A, axis=0, keepdims=True), ("batch", "feat"))
    close(xp.argmax(x), np.argmax(A), ())
    close(xp.count_nonzero(x > 0, axis="feat"), np.count_nonzero(A > 0, axis=1), ("batch",))
    close(xp.count_nonzero(x > 0), np.count_nonzero(A > 0), ())
    close(xp.count_nonzero(x, axis=()), (A != 0).astype(np.int64), ("batch", "feat"))
    close(xp.where(x > 0, x, 0.0), np.where(A > 0, A, 0), ("batch", "feat"))
    r = -A
    close(xp.sort(nt.tensor(r, names=("batch", "feat")), axis="feat"), np.sort(r, axis=1), ("batch", "feat"))
    close(xp.sort(x, axis=0, descending=True), -np.sort(-A, axis=0), ("batch", "feat"))
    close(xp.argsort(nt.tensor(r, names=("batch", "feat"))), np.argsort(r, axis=-1, stable=True), ("batch", "feat"))




def test_indexing_and_linalg():
    x = t()
    idx = nt.tensor([2, 0], names=("pick",))
    close(xp.take(x, idx, axis="feat"), np.take(A, [2, 0], axis=1), ("batch", "pick"))
    close(xp.take(nt.tensor(A[0], names=("feat",)), nt.tensor([1, 1])), np.take(A[0], [1, 1]), ("feat",))
    with pytest.raises(ValueError, match="^take:"):
        xp.take(x, idx)
    ind = np.array([[0], [2]])
    close(xp.take_along_axis(x, nt.tensor(ind, names=("batch", "feat")), axis="feat"),
          np.take_along_axis(A, ind, axis=1), ("batch", "feat"))
    close(xp.matrix_transpose(x), A.T, ("feat", "batch"))
    with pytest.raises(ValueError, match="^matrix_transpose:"):
        xp.matrix_transpose(nt.zeros(3))
    close(xp.matmul(x, nt.tensor(A.T, names=("feat", "out"))), A @ A.T, ("batch", "out"))
    close(xp.vecdot(x, x, axis="feat"), np.sum(A * A, axis=1), ("batch",))


def test_array_api_compat():
    compat = pytest.importorskip("array_api_compat")
    assert compat.array_namespace(t()) is xp


@pytest.mark.parametrize("a", ["bool", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("b", ["bool", "int32", "int64", "float16", "float32", "float64"])
def test_result_type_is_numpys_for_every_pair(a, b):
    assert xp.result_type(getattr(xp, a), getattr(xp, b)).name == np.result_type(a, b).name


@pytest.mark.parametrize("name", ["float16", "float32", "float64", "int32", "int64"])
def test_machine_limits_are_numpys(name):
    info, ref = (xp.finfo, np.finfo) if name.startswith("float") else (xp.iinfo, np.iinfo)
    got, want = info(getattr(xp, name)), ref(name)
    fields = ("bits", "max", "min") + (("eps", "smallest_normal") if name.startswith("float") else ())
    assert all(getattr(got, f) == getattr(want, f) for f in fields)


def test_broadcast_arrays_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"^broadcast_arrays: shapes \(2, 3\), \(4,\) do not broadcast"):
        xp.broadcast_arrays(nt.zeros(2, 3), nt.zeros(4))


def test_size_is_the_standards_attribute_and_pytorchs_method():
    t = nt.randn(2, 3, 4, names=("a", "b", None))
    assert isinstance(t.size, int) and t.size == 24 and t.size * 2 == 48  # the standard's element count
    assert t.size() == (2, 3, 4) and t.size("b") == 3 and t.size(-1) == 4 and t.size(0) == 2  # PyTorch's method
    assert nt.zeros(0, 5).size == 0 and nt.tensor(1.5).size == 1 and nt.tensor(1.5).size() == ()
    with pytest.raises(nt.NamesError, match="size: no dim named 'c'"):
        t.size("c")
    with pytest.raises(IndexError, match="size"):
        t.size(3)


def test_to_device_is_the_standards_spelling_of_to():
    t = nt.randn(2, 3, names=("a", "b"))
    moved = t.to_device("meta")
    assert moved.device == "meta" and moved.names == ("a", "b") and moved.shape == (2, 3)
    assert t.to_device(t.device) is t
    with pytest.raises(NotImplementedError, match="to_device: stream= is not supported"):
        t.to_device("cpu", stream=1)


def test_floor_divide_and_complex_expm1_give_the_standards_special_values():
    inf = math.inf
    a = nt.tensor([inf, -inf, 5.0, -5.0, 7.0], names=("i",))
    b = nt.tensor([2.0, 2.0, -inf, inf, 2.0], names=("i",))
    out = xp.floor_divide(a, b)
    assert out.names == ("i",) and out.tolist() == [inf, -inf, -0.0, -0.0, 3.0]
    assert [math.copysign(1, v) for v in out.tolist()[2:4]] == [-1, -1]  # -0.0: the sign of the quotient
    with np.errstate(invalid="ignore"):
        assert np.isnan((a // b).tolist()[0])  # the operator stays Python's, NumPy's and PyTorch's
    assert xp.floor_divide(nt.tensor([7, -7]), 2).tolist() == [3, -4]
    z = nt.tensor([complex(inf, 0), complex(-inf, inf), complex(inf, math.nan), 0.5 + 0.5j], dtype=nt.complex128)
    got = xp.expm1(z).tolist()
    assert got[0] == complex(inf, 0) and got[1] == complex(-1, 0)
    assert got[2].real == inf and math.isnan(got[2].imag)
    assert abs(got[3] - (np.exp(0.5 + 0.5j) - 1)) < 1e-15
