"""Dtypes: the defaults of nt.tensor, NumPy 2's rules for Python scalars across the elementwise ops,
promotion between tensors, and the conversions (to, float/double/..., type_as, cpu, clone, contiguous)."""

import numpy as np
import pytest

import namedtensor as nt
from namedtensor.ops import elementwise as E
from namedtensor.testing import assert_close, gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")

NUMERIC = ("float32", "float64", "int32", "int64")


def named(dtype, values=(1, 2, 3)):
    return nt.tensor(np.array(values).astype(dtype), names=("x",))


# ----------------------------------------------------------------------------- creation defaults


def test_tensor_defaults():
    assert nt.tensor([1.0]).dtype is nt.float32
    assert nt.tensor(1.5).dtype is nt.float32
    assert nt.tensor([1, 2.5]).dtype is nt.float32
    assert nt.tensor([1]).dtype is nt.int64
    assert nt.tensor(3).dtype is nt.int64
    assert nt.tensor([True, False]).dtype is nt.bool_
    # NumPy arrays keep their dtype
    assert nt.tensor(np.array([1.0])).dtype is nt.float64
    assert nt.tensor(np.array([1], dtype=np.int32)).dtype is nt.int32
    assert nt.tensor([1, 2], dtype="float64").dtype is nt.float64


# ----------------------------------------------------------------------------- Python scalars

ARITH = ("add", "sub", "mul", "pow", "maximum", "minimum", "remainder", "floor_divide")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


@pytest.mark.parametrize("op", ARITH + ("div",))
@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("scalar", (2, 2.5, True))
def test_python_scalars_keep_float_dtype(op, dtype, scalar):
    t = named(dtype)
    fn = getattr(E, op)
    for out in (fn(t, scalar), fn(scalar, t)):
        assert out.dtype is t.dtype
        assert out.names == ("x",)
    want = getattr(np, {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "pow": "power"}.get(
        op, op))(np.array([1, 2, 3]).astype(dtype), scalar)
    assert_close(fn(t, scalar).numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("op", ARITH)
@pytest.mark.parametrize("dtype", ("int32", "int64"))
def test_python_ints_keep_int_dtype(op, dtype):
    t = named(dtype)
    fn = getattr(E, op)
    assert fn(t, 2).dtype is t.dtype
    assert fn(3, t).dtype is t.dtype
    assert fn(t, True).dtype is t.dtype


def test_operators_follow_the_same_rules():
    f32, i64 = named("float32"), named("int64")
    assert (f32 * 2.0).dtype is nt.float32
    assert (2 * f32).dtype is nt.float32
    assert (f32 / 3).dtype is nt.float32
    assert (f32 ** 2).dtype is nt.float32
    assert (-f32).dtype is nt.float32
    assert (i64 + 1).dtype is nt.int64
    assert (1 - i64).dtype is nt.int64
    assert (i64 // 2).dtype is nt.int64
    assert (i64 % 2).dtype is nt.int64
    # NumPy 2: true division of integers gives float64, and so does an int tensor with a Python float
    assert (i64 / 2).dtype is nt.float64
    assert (i64 * 2.5).dtype is nt.float64
    assert (named("int32") + 0.5).dtype is nt.float64


@pytest.mark.parametrize("op", COMPARE)
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("scalar", (2, 2.5))
def test_comparisons_with_scalars_give_bool(op, dtype, scalar):
    t = named(dtype)
    out = getattr(E, op)(t, scalar)
    assert out.dtype is nt.bool_ and out.names == ("x",)
    want = getattr(np, {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
                        "ge": "greater_equal"}[op])(np.array([1, 2, 3]).astype(dtype), scalar)
    assert out.tolist() == want.tolist()


def test_logical_ops_on_bool():
    a, b = nt.tensor([True, False], names=("x",)), nt.tensor([True, True])
    for out in (a & b, a | b, a ^ b, ~a, a.logical_and(True)):
        assert out.dtype is nt.bool_ and out.names == ("x",)


# ----------------------------------------------------------------------------- tensor with tensor


@pytest.mark.parametrize("a, b, want", [
    ("float32", "float64", "float64"),
    ("int32", "int64", "int64"),
    ("int64", "float32", "float64"),
    ("int32", "float32", "float64"),
    ("float32", "float32", "float32"),
])
def test_tensor_tensor_promotion_is_numpy_2(a, b, want):
    x, y = named(a), named(b)
    assert (x + y).dtype.name == want
    assert (y * x).dtype.name == want
    assert (x < y).dtype is nt.bool_
    assert E.maximum(x, y).dtype.name == want


# ----------------------------------------------------------------------------- unary ops and others


@pytest.mark.parametrize("op", sorted(E.UNARY))
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_unary_ops_keep_float_dtype(op, dtype):
    t = nt.tensor(np.array([0.25, 0.5, 0.75]).astype(dtype), names=("x",))
    out = getattr(t, op)()
    assert out.dtype is t.dtype and out.names == ("x",)


@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_other_elementwise_ops_keep_dtype(dtype):
    t = nt.tensor(np.array([-1.0, 0.5, 2.0]).astype(dtype), names=("x",))
    assert E.gelu(t, approximate="tanh").dtype is t.dtype
    assert t.clip(0, 1).dtype is t.dtype
    assert t.clip(min=0.0).dtype is t.dtype
    assert E.where(t > 0, t, 0).dtype is t.dtype
    assert E.where(t > 0, 0.0, t).dtype is t.dtype
    assert t.isnan().dtype is nt.bool_


def test_mixed_width_gradients_come_back_in_each_input_dtype():
    a = nt.tensor(np.array([1.0, 2.0], dtype=np.float32), names=("x",), requires_grad=True)
    b = nt.tensor(np.array([3.0, 4.0]), names=("x",), requires_grad=True)
    out = (a * b + a / b).sum()
    assert out.dtype is nt.float64
    out.backward()
    assert a.grad.dtype is nt.float32 and b.grad.dtype is nt.float64
    assert a.grad.names == ("x",) and b.grad.names == ("x",)
    assert_close(a.grad.numpy(), np.array([3 + 1 / 3, 4 + 1 / 4], dtype=np.float32))


# ----------------------------------------------------------------------------- float16


def test_float16(backend):
    if backend.name == "numpy":
        t = named("float16")
        assert (t * 2.0).dtype is nt.float16
        assert (t + 1).dtype is nt.float16
        assert t.exp().dtype is nt.float16
        assert named("float32").half().dtype is nt.float16
        assert nt.zeros(2, dtype=nt.float16).dtype is nt.float16
    else:
        msg = "float16 is not available on the array_api_strict backend"
        with pytest.raises(TypeError, match=msg):
            named("float32").half()
        with pytest.raises(TypeError, match=msg):
            nt.zeros(2, dtype="float16")
        with pytest.raises(TypeError, match=msg):
            nt.tensor([1.0], dtype=nt.float16)


# ----------------------------------------------------------------------------- conversions


@pytest.mark.parametrize("target", [nt.float64, "float64", "double", np.float64, np.dtype("float64")])
def test_to_accepts_dtype_spellings(target):
    t = named("float32")
    out = t.to(target)
    assert out.dtype is nt.float64 and out.names == ("x",)
    assert_close(out.numpy(), np.array([1.0, 2.0, 3.0]))


def test_to_returns_self_when_nothing_changes():
    t = named("float32")
    assert t.to(nt.float32) is t
    assert t.to("cpu") is t
    assert t.cpu() is t
    assert t.to("cpu", nt.float32) is t
    assert t.to(device="cpu") is t
    assert t.to(t) is t
    assert t.contiguous() is t
    assert t.to(nt.float32, copy=True) is not t


def test_to_device_and_dtype_together():
    t = named("int64")
    out = t.to("cpu", "float32")
    assert out.dtype is nt.float32 and out.device == "cpu" and out.names == ("x",)
    assert t.to("cpu", dtype=nt.float64).dtype is nt.float64
    assert t.to(named("float64")).dtype is nt.float64


@pytest.mark.usefixtures("no_cupy")
def test_to_errors():
    t = named("float32")
    with pytest.raises(RuntimeError, match="device 'cuda' needs CuPy"):
        t.to("cuda")
    with pytest.raises(RuntimeError, match="device 'cuda:0' needs CuPy"):
        t.to("cuda:0", nt.float64)
    with pytest.raises(ValueError, match="unknown device 'cuda:x'"):
        t.to("cuda:x")
    with pytest.raises(TypeError, match=r"to: 'floatt' is neither a dtype \(float16, .*\) nor a device"):
        t.to("floatt")
    with pytest.raises(TypeError, match="to: the dtype is given twice"):
        t.to(nt.float64, dtype=nt.float64)
    with pytest.raises(TypeError, match="to: the device is given twice"):
        t.to("cpu", device="cpu")
    with pytest.raises(TypeError, match="type_as: expected a Tensor"):
        t.type_as(np.float64)


@pytest.mark.parametrize("method, want", [
    ("float", nt.float32), ("double", nt.float64), ("long", nt.int64), ("int", nt.int32), ("bool", nt.bool_),
])
def test_cast_methods(method, want):
    t = nt.tensor(np.array([0.0, 1.5, -2.0]), names=("x",))
    out = getattr(t, method)()
    assert out.dtype is want and out.names == ("x",)
    assert out.tolist() == np.array([0.0, 1.5, -2.0]).astype(want.name).tolist()


def test_type_as_and_int_to_float():
    i = named("int64")
    f = i.type_as(named("float64"))
    assert f.dtype is nt.float64 and f.names == ("x",)
    assert f.tolist() == [1.0, 2.0, 3.0]
    assert named("float32").type_as(i).dtype is nt.int64


def test_clone_copies():
    t = named("float64")
    c = t.clone()
    assert c.names == t.names and c.dtype is t.dtype and c is not t
    assert not np.shares_memory(c.numpy(), t.numpy())
    assert c.tolist() == t.tolist()


# ----------------------------------------------------------------------------- gradients of casts


def test_float_casts_are_differentiable():
    x = nt.tensor(np.array([[0.5, -1.0], [2.0, 0.25]]), names=("a", "b"), requires_grad=True)
    y = x.float()
    assert y.requires_grad and y.dtype is nt.float32
    (y * y).sum().backward()
    assert x.grad.dtype is nt.float64 and x.grad.names == ("a", "b")
    assert_close(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
    # float32 in the middle: central differences need a larger step
    assert gradcheck(lambda t: (t.float() * 3.0).double(), x, eps=1e-2, atol=1e-4)
    assert gradgradcheck(lambda t: (t.float() ** 2).double(), x, eps=1e-2, atol=1e-3, rtol=1e-2)
    assert gradcheck(lambda t: t.clone() * t, x)
    assert gradgradcheck(lambda t: t.clone() * t, x)


def test_casts_to_int_and_bool_have_no_gradient():
    x = nt.tensor(np.array([0.5, 2.0]), names=("a",), requires_grad=True)
    for out in (x.long(), x.int(), x.bool(), x.to("int64")):
        assert not out.requires_grad and out.names == ("a",)
    with pytest.raises(RuntimeError, match="does not require grad"):
        x.long().sum().backward()
