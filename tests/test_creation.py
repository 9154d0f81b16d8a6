"""Making tensors: nt.tensor / nt.as_tensor, the factories with names= and dict shapes, *_like,
manual_seed, and device strings."""

import re

import numpy as np
import pytest

import namedtensor as nt
from namedtensor.testing import assert_close

pytestmark = pytest.mark.usefixtures("backend")


# ----------------------------------------------------------------------------- nt.tensor


def test_tensor_from_lists():
    t = nt.tensor([[1.0, 2.0], [3.0, 4.0]], names=("r", "c"))
    assert t.names == ("r", "c")
    assert t.shape == (2, 2)
    assert t.dtype == nt.float32  # Python floats give the default float
    assert_close(t, np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert nt.tensor([1, 2, 3]).dtype == nt.int64
    assert nt.tensor([True, False]).dtype == nt.bool
    assert nt.tensor([1, 2.5]).dtype == nt.float32  # one float is enough
    assert nt.tensor([[1, 2], [3, 4]]).names == (None, None)
    assert nt.tensor([]).shape == (0,)


def test_tensor_from_scalars():
    for value, dtype in ((3.5, nt.float32), (3, nt.int64), (True, nt.bool)):
        t = nt.tensor(value)
        assert t.shape == ()
        assert t.names == ()
        assert t.dtype == dtype
        assert t.item() == value


@pytest.mark.parametrize("np_dtype, dtype", [(np.float32, nt.float32), (np.float64, nt.float64),
                                             (np.int32, nt.int32), (np.int64, nt.int64), (np.bool_, nt.bool)])
def test_tensor_from_numpy_keeps_dtype(np_dtype, dtype):
    a = np.arange(6).reshape(2, 3).astype(np_dtype)
    t = nt.tensor(a, names=("x", "y"))
    assert t.dtype == dtype
    assert t.names == ("x", "y")
    np.testing.assert_array_equal(t.numpy(), a)


def test_tensor_float16_on_numpy_backend(backend):
    a = np.array([1.0, 2.0], dtype=np.float16)
    if backend.name == "numpy":
        assert nt.tensor(a).dtype == nt.float16
    else:
        with pytest.raises(TypeError, match="float16"):
            nt.tensor(a)


def test_tensor_copies():
    a = np.array([1.0, 2.0])
    t = nt.tensor(a)
    same_dtype = nt.tensor(a, dtype=nt.float64)
    x = nt.tensor([1.0, 2.0])
    from_tensor = nt.tensor(x, dtype=nt.float32)
    a[0] = 100.0
    assert t.numpy()[0] == 1.0 and same_dtype.numpy()[0] == 1.0
    assert not np.shares_memory(from_tensor.numpy(), x.numpy())


def test_tensor_dtype_argument():
    for dtype in (nt.float64, "float64", np.float64, np.dtype("float64"), nt.double):
        assert nt.tensor([1, 2], dtype=dtype).dtype == nt.float64
    assert nt.tensor([1.5, 2.5], dtype=int).dtype == nt.int64
    assert nt.tensor([1, 0], dtype=bool).dtype == nt.bool
    assert nt.tensor([1, 2], dtype=float).dtype == nt.float32
    # no detour through float32: full precision when float64 is asked for
    assert nt.tensor([0.1], dtype=nt.float64).item() == 0.1
    with pytest.raises(TypeError, match="unsupported dtype 'bfloat16'"):
        nt.tensor([1.0], dtype="bfloat16")


def test_tensor_unsupported_numpy_dtype(backend):
    # every dtype of the Array API standard is supported; NumPy's timedelta64 is not
    a = np.arange(3).astype("m8[s]")
    if backend.name == "array_api_strict":  # there the namespace itself refuses the NumPy array
        with pytest.raises(TypeError, match="tensor: cannot make a tensor from ndarray"):
            nt.tensor(a)
        return
    with pytest.raises(TypeError, match=r"tensor: unsupported dtype \S*timedelta64\[s\]; namedtensor supports"):
        nt.tensor(a)
    # ... and the message's advice works
    t = nt.tensor(a, dtype=nt.float32)
    assert t.dtype == nt.float32
    assert_close(t, np.array([0.0, 1.0, 2.0]))


def test_tensor_from_numpy_scalars_keeps_dtype():
    # np.float64 is a subclass of float, but it is NumPy data: it keeps its dtype like an array does
    assert nt.tensor(np.float64(1.5)).dtype == nt.float64
    assert nt.tensor([np.float64(1.5), np.float64(2.0)]).dtype == nt.float64
    assert nt.tensor(np.float32(1.5)).dtype == nt.float32
    assert nt.tensor([1.5, np.float64(2.0)]).dtype == nt.float32  # a Python float is there: float32


def test_tensor_bad_data():
    with pytest.raises(TypeError, match="tensor: cannot make a tensor from list"):
        nt.tensor([[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError, match="tensor: "):
        nt.tensor(2**70)  # too large for int64
    with pytest.raises(TypeError, match="tensor"):
        nt.tensor(object())


def test_tensor_from_tensor_keeps_names():
    x = nt.tensor([[1.0, 2.0]], names=("r", "c"))
    y = nt.tensor(x)
    assert y.names == ("r", "c")
    assert y is not x
    assert_close(y, x)
    assert nt.tensor(x, names=("a", "b")).names == ("a", "b")
    assert nt.tensor(x, dtype=nt.float64).dtype == nt.float64


def test_tensor_requires_grad():
    t = nt.tensor([1.0, 2.0], names=("x",), requires_grad=True)
    assert t.requires_grad and t.is_leaf
    with pytest.raises(TypeError, match="only floating-point and complex tensors can require grad, "
                                        "this one is nt.int64"):
        nt.tensor([1, 2], requires_grad=True)


def test_tensor_names_validation():
    with pytest.raises(nt.NamesError, match=re.escape("tensor: got 1 names ('N',) for a tensor with 2 dims")):
        nt.tensor([[1.0]], names=("N",))
    with pytest.raises(nt.NamesError, match=re.escape("tensor: duplicate dim name 'N' in ('N', 'N')")):
        nt.tensor([[1.0]], names=("N", "N"))
    for bad in ("1x", "a-b", ""):
        with pytest.raises(nt.NamesError, match=re.escape(f"tensor: invalid dim name {bad!r}")):
            nt.tensor([1.0], names=(bad,))
    with pytest.raises(nt.NamesError, match=re.escape("names must be a sequence of names, not the str 'x'; write ('x',)")):
        nt.tensor([1.0], names="x")
    with pytest.raises(nt.NamesError, match="must be a str or None, got 1 of type int"):
        nt.tensor([1.0], names=(1,))
    assert nt.tensor([[1.0]], names=[None, "b"]).names == (None, "b")


# ----------------------------------------------------------------------------- nt.as_tensor


def test_as_tensor_does_not_copy(backend):
    a = np.arange(4.0).reshape(2, 2)
    t = nt.as_tensor(a, names=("r", "c"))
    assert t.names == ("r", "c")
    if backend.name == "numpy":
        assert t.array is a
        a[0, 0] = 42.0
        assert t.numpy()[0, 0] == 42.0
    raw = backend.asarray(a)
    assert nt.as_tensor(raw).array is raw
    same_dtype = nt.as_tensor(raw, dtype=nt.float64)
    assert same_dtype.array is raw
    cast = nt.as_tensor(raw, dtype=nt.float32)
    assert cast.dtype == nt.float32 and cast.array is not raw


def test_as_tensor_of_tensors_and_lists():
    x = nt.tensor([1.0, 2.0], names=("x",))
    assert nt.as_tensor(x) is x
    renamed = nt.as_tensor(x, names=("y",))
    assert renamed.names == ("y",)
    assert x.names == ("x",)
    t = nt.as_tensor([1.0, 2.0], names=("k",))
    assert t.dtype == nt.float32 and t.names == ("k",)
    assert nt.as_tensor(np.arange(3, dtype=np.uint8), dtype=nt.int64).dtype == nt.int64
    assert nt.as_tensor(np.arange(3, dtype=np.uint8)).dtype == nt.uint8
    # NumPy's timedelta64: refused by namedtensor, or on array-api-strict by the namespace itself
    with pytest.raises(TypeError, match=r"as_tensor: (unsupported|cannot make .* not support the) dtype \S*timedelta"):
        nt.as_tensor(np.arange(3).astype("m8[s]"))


# ----------------------------------------------------------------------------- factories

FACTORIES = ("zeros", "ones", "empty", "rand", "randn")


@pytest.mark.parametrize("name", FACTORIES)
def test_factories_with_names_and_dict_shapes(name):
    f = getattr(nt, name)
    for t in (f(2, 3, names=("a", "b")), f((2, 3), names=("a", "b")), f([2, 3], names=["a", "b"]),
              f({"a": 2, "b": 3})):
        assert t.names == ("a", "b")
        assert t.shape == (2, 3)
        assert t.sizes == {"a": 2, "b": 3}
        assert t.dtype == nt.float32
    assert f(2, 3).names == (None, None)
    assert f().shape == ()
    assert f(2, dtype=nt.float64).dtype == nt.float64
    assert f(2, requires_grad=True).requires_grad
    with pytest.raises(ValueError, match=f"{name}: give names either as the keys of the shape dict or as names="):
        f({"a": 2}, names=("a",))
    with pytest.raises(nt.NamesError, match=re.escape(f"{name}: got 1 names ('a',) for a tensor with 2 dims")):
        f(2, 3, names=("a",))
    with pytest.raises(ValueError, match=f"{name}: sizes must be >= 0, got -1"):
        f(2, -1)
    with pytest.raises(ValueError, match=f"{name}: sizes must be >= 0, got -1"):
        f({"a": -1})
    with pytest.raises(TypeError, match=f"{name}: sizes must be ints, got float 2.5"):
        f({"a": 2.5})
    with pytest.raises(TypeError, match=f"{name}: sizes must be ints"):
        f(2.0, 3)
    with pytest.raises(nt.NamesError, match=f"{name}: invalid dim name '1a'"):
        f({"1a": 2})


def test_factory_values():
    np.testing.assert_array_equal(nt.zeros(2, 3).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(nt.ones({"a": 2}).numpy(), np.ones(2))
    r = nt.rand(200).numpy()
    assert r.min() >= 0 and r.max() < 1 and 0.3 < r.mean() < 0.7
    n = nt.randn(500, dtype=nt.float64).numpy()
    assert abs(n.mean()) < 0.2 and 0.8 < n.std() < 1.2
    with pytest.raises(TypeError, match="randn: needs a floating dtype, got nt.int64"):
        nt.randn(2, dtype=nt.int64)
    assert nt.zeros(2, dtype=nt.int32).dtype == nt.int32
    assert nt.ones(2, dtype=nt.bool).dtype == nt.bool


def test_full():
    t = nt.full((2, 3), 1.5, names=("a", "b"))
    assert t.names == ("a", "b") and t.dtype == nt.float32
    assert_close(t, np.full((2, 3), 1.5))
    assert nt.full(3, 7).dtype == nt.int64
    assert nt.full(3, 7).shape == (3,)
    assert nt.full(2, True).dtype == nt.bool
    assert nt.full({"k": 2}, 0.5).names == ("k",)
    assert nt.full(2, 1, dtype=nt.float64).dtype == nt.float64


def test_arange_linspace_eye():
    t = nt.arange(5, names=("i",))
    assert t.names == ("i",) and t.dtype == nt.int64
    np.testing.assert_array_equal(t.numpy(), np.arange(5))
    np.testing.assert_array_equal(nt.arange(2, 10, 3).numpy(), [2, 5, 8])
    f = nt.arange(0, 1, 0.25)
    assert f.dtype == nt.float32
    assert_close(f, np.arange(0, 1, 0.25))
    assert nt.arange(3, dtype=nt.float64).dtype == nt.float64
    lin = nt.linspace(0, 1, 5, names=("t",))
    assert lin.names == ("t",) and lin.dtype == nt.float32
    assert_close(lin, np.linspace(0, 1, 5))
    e = nt.eye(3, names=("i", "j"))
    assert e.names == ("i", "j")
    np.testing.assert_array_equal(e.numpy(), np.eye(3))
    np.testing.assert_array_equal(nt.eye(2, 3).numpy(), np.eye(2, 3))
    with pytest.raises(nt.NamesError, match=re.escape("arange: got 2 names")):
        nt.arange(3, names=("a", "b"))
    with pytest.raises(ValueError, match="arange: step must not be 0"):
        nt.arange(0, 3, 0)


def test_randint():
    t = nt.randint(3, 10, (4, 5), names=("a", "b"))
    assert t.names == ("a", "b") and t.shape == (4, 5) and t.dtype == nt.int64
    v = t.numpy()
    assert v.min() >= 3 and v.max() < 10
    assert nt.randint(10, (2, 3)).shape == (2, 3)
    assert nt.randint(10, size=(2,)).numpy().max() < 10
    assert nt.randint(0, 4, {"k": 3}).names == ("k",)
    assert nt.randint(5, (2,), dtype=nt.int32).dtype == nt.int32
    with pytest.raises(ValueError, match=re.escape("randint: high (3) must be greater than low (3)")):
        nt.randint(3, 3, (2,))
    f = nt.randint(0, 4, (50,), dtype=nt.float64).numpy()  # integers, in a float dtype
    assert f.dtype == np.float64 and np.all(f == np.floor(f)) and f.min() >= 0 and f.max() < 4
    assert nt.randint(0, 2, (3,), dtype=nt.bool).dtype == nt.bool


# ----------------------------------------------------------------------------- *_like


LIKE = ("zeros_like", "ones_like", "empty_like", "rand_like", "randn_like")


@pytest.mark.parametrize("name", LIKE)
def test_like_copies_names_shape_dtype(name):
    x = nt.zeros(2, 3, names=("a", None), dtype=nt.float64)
    f = getattr(nt, name)
    t = f(x)
    assert t.names == ("a", None) and t.shape == (2, 3) and t.dtype == nt.float64 and t.device == "cpu"
    assert f(x, names=("p", "q")).names == ("p", "q")
    assert f(x, dtype=nt.float32).dtype == nt.float32
    assert f(x, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match=f"{name}: expected a Tensor, got list"):
        f([1.0])


def test_like_values_and_methods():
    x = nt.zeros(2, 3, names=("a", "b"))
    np.testing.assert_array_equal(nt.ones_like(x).numpy(), np.ones((2, 3)))
    t = nt.full_like(x, 2.5)
    assert t.names == ("a", "b")
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 2.5))
    for m in (x.zeros_like(), x.ones_like(), x.full_like(1.0)):
        assert m.names == ("a", "b") and m.shape == (2, 3)
    i = nt.zeros(2, dtype=nt.int64)
    with pytest.raises(TypeError, match="rand_like: needs a floating dtype"):
        nt.rand_like(i)
    assert nt.zeros_like(i).dtype == nt.int64


# ----------------------------------------------------------------------------- seeds


@pytest.mark.parametrize("name", ["rand", "randn", "rand_like", "randint"])
def test_manual_seed_reproducible(name):
    def draw():
        if name == "rand_like":
            return nt.rand_like(nt.zeros(3, 4)).numpy()
        if name == "randint":
            return nt.randint(0, 1000, (3, 4)).numpy()
        return getattr(nt, name)(3, 4).numpy()

    nt.manual_seed(123)
    a = draw()
    b = draw()
    nt.manual_seed(123)
    np.testing.assert_array_equal(draw(), a)
    assert not np.array_equal(a, b)  # the stream moves on
    nt.manual_seed(124)
    assert not np.array_equal(draw(), a)


def test_manual_seed_type():
    with pytest.raises(TypeError, match="manual_seed: the seed must be an int, got str"):
        nt.manual_seed("1")
    with pytest.raises(TypeError, match="got bool"):
        nt.manual_seed(True)


# ----------------------------------------------------------------------------- devices


def test_cpu_devices():
    for device in (None, "cpu", "CPU", " cpu "):
        t = nt.zeros(2, device=device)
        assert t.device == "cpu"
    assert nt.tensor([1.0], device="cpu").device == "cpu"


@pytest.mark.usefixtures("no_cupy")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:1"])
def test_cuda_without_cupy_is_a_clear_error(device):
    expected = "needs CuPy and an NVIDIA GPU, and CuPy is not installed"
    for make in (lambda: nt.zeros(2, device=device), lambda: nt.tensor([1.0], device=device),
                 lambda: nt.zeros_like(nt.zeros(2), device=device), lambda: nt.arange(3, device=device)):
        with pytest.raises(RuntimeError, match=re.escape(f"device {device!r} ") + ".*" + re.escape(expected)):
            make()


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "tpu", "cuda:", "cuda0", ""])
def test_bad_device_strings(device):
    with pytest.raises(ValueError, match=re.escape(f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:N' or 'meta'")):
        nt.zeros(2, device=device)
