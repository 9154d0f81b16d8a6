"""The Tensor class itself: metadata, conversion, Python protocols, repr and pickling."""

import copy
import pickle
import re

import numpy as np
import pytest

import namedtensor as nt
from namedtensor.testing import assert_close

pytestmark = pytest.mark.usefixtures("backend")


def _t(names=("batch", None, "feat"), shape=(2, 3, 4), dtype=np.float64):
    a = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    return nt.tensor(a, names=names), a


def test_metadata():
    t, a = _t()
    assert t.names == ("batch", None, "feat")
    assert isinstance(t.names, tuple)
    assert t.sizes == {"batch": 2, "feat": 4}
    assert list(t.sizes) == ["batch", "feat"]  # in dim order
    assert t.shape == (2, 3, 4)
    assert all(type(s) is int for s in t.shape)
    assert t.ndim == 3 and t.dim() == 3
    assert t.numel() == 24
    assert t.size() == (2, 3, 4)
    assert t.size("feat") == 4 and t.size(1) == 3 and t.size(-3) == 2
    assert t.dtype == nt.float64
    assert t.device == "cpu"
    assert t.is_named
    assert t.is_floating_point()
    with pytest.raises(nt.NamesError, match=re.escape("size: no dim named 'seq' in a tensor with names "
                                                      "('batch', None, 'feat')")):
        t.size("seq")


def test_unnamed_and_zero_dim():
    u = nt.zeros(2, 3)
    assert not u.is_named
    assert u.names == (None, None)
    assert u.sizes == {}
    s = nt.tensor(2.0)
    assert s.names == () and s.shape == () and s.ndim == 0 and s.numel() == 1
    assert not s.is_named
    assert not nt.tensor([1, 2]).is_floating_point()


def test_array_is_the_raw_array_without_copy(backend):
    raw = backend.asarray(np.arange(6.0).reshape(2, 3))
    t = nt.as_tensor(raw, names=("a", "b"))
    assert t.array is raw
    assert t.array is t.array
    assert backend.is_array(t.array)
    s = (nt.tensor([1.0, 2.0]) * 2).sum()  # 0-dim results still give a backend array
    assert backend.is_array(s.array) and s.array.shape == ()


def test_numpy(backend):
    t, a = _t()
    out = t.numpy()
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, a)
    if backend.name == "numpy":
        assert out is t.array  # no copy on the CPU
    g = nt.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape("numpy(): the tensor requires grad; call .detach().numpy()")):
        g.numpy()
    with nt.no_grad():
        assert g.numpy().tolist() == [1.0]
    assert g.detach().numpy().tolist() == [1.0]
    np.testing.assert_array_equal(np.asarray(t), a)
    assert np.asarray(t, dtype=np.float32).dtype == np.float32


def test_numpy_array_protocol_copies_when_asked():
    t, a = _t()
    copied = np.array(t)  # np.array copies by default: writing to it must leave the tensor alone
    copied[0, 0, 0] = -1.0
    assert t.numpy()[0, 0, 0] == a[0, 0, 0]
    assert not np.shares_memory(np.array(t, dtype=np.float32), t.numpy())
    view = np.asarray(t)  # no copy asked: the same memory
    np.testing.assert_array_equal(view, a)
    with pytest.raises(ValueError, match=re.escape("__array__: converting nt.float64 to float32 needs a copy, but "
                                                   "copy=False")):
        np.array(t, dtype=np.float32, copy=False)


def test_item_and_scalar_conversions():
    assert nt.tensor(2.5).item() == 2.5
    assert isinstance(nt.tensor(2.5).item(), float)
    assert nt.tensor([[7]]).item() == 7
    assert isinstance(nt.tensor([[7]]).item(), int)
    assert nt.tensor([True]).item() is True
    with pytest.raises(ValueError, match=re.escape("item(): only a tensor with one element can be converted, this one "
                                                   "has shape (2,)")):
        nt.tensor([1.0, 2.0]).item()
    assert float(nt.tensor(1.5)) == 1.5
    assert int(nt.tensor([3])) == 3
    assert [10, 20, 30][nt.tensor(1)] == 20
    with pytest.raises(TypeError, match="only a one-element integer tensor can be used as an index"):
        [1, 2][nt.tensor(1.0)]


def test_tolist():
    t, a = _t(names=("r", "c"), shape=(2, 2))
    assert t.tolist() == a.tolist()
    assert nt.tensor(3).tolist() == 3
    assert nt.tensor([True, False]).tolist() == [True, False]


def test_len_and_iteration():
    t, a = _t(names=("batch", "feat"), shape=(3, 2))
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3
    for row, expected in zip(rows, a):
        assert row.names == ("feat",)
        assert_close(row, expected)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-dim tensor"):
        len(nt.tensor(1.0))
    with pytest.raises(TypeError, match="iteration over a 0-dim tensor"):
        iter(nt.tensor(1.0))


def test_bool():
    assert bool(nt.tensor([1.0]))
    assert not bool(nt.tensor(0.0))
    assert bool(nt.tensor([[True]]))
    with pytest.raises(ValueError, match="the truth value of a tensor with 2 elements is ambiguous; use .any"):
        bool(nt.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="ambiguous"):
        if nt.zeros(0):
            pass


def test_repr_shows_names_shape_dtype_values():
    t = nt.tensor([[1.0, 2.5], [3.0, 4.0]], names=("row", None))
    r = repr(t)
    assert r.startswith("tensor([[1. , 2.5],")
    assert "names=('row', None)" in r
    assert "shape=(2, 2)" in r
    assert "dtype=nt.float32" in r
    assert "device" not in r  # cpu is not printed
    assert str(t) == r
    assert repr(nt.tensor(1.5)) == "tensor(1.5, names=(), shape=(), dtype=nt.float32)"
    x = nt.tensor([1.0], names=("x",), requires_grad=True)
    assert repr(x).endswith("requires_grad=True)")
    assert repr(x * 2).endswith("grad_fn=mul)")
    big = repr(nt.zeros(3, 300))
    assert "..." in big and len(big) < 600  # summarised


def test_format_of_a_0_dim_tensor_is_its_numbers():
    # f"{loss:.4f}" as in PyTorch; a tensor with dims formats as str() with no spec, and raises with one
    loss = nt.tensor(1.23456)
    assert f"{loss:.3f}" == "1.235" and f"{nt.tensor(7):>4}" == "   7" and f"{nt.tensor(True)}" == "True"
    assert f"{loss}" == "1.2345600128173828"  # the float32's value, as item() gives it
    t = nt.tensor([1.5, 2.0], names=("x",))
    assert f"{t}" == str(t)
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        f"{t:.3f}"
    assert f"{nt.tensor(1.0, requires_grad=True) * 2:.2f}" == "2.00"  # a loss in training, as PyTorch formats it


def test_hash_is_identity():
    x = nt.tensor([1.0])
    y = nt.tensor([1.0])
    assert len({x, y, x}) == 2
    assert {x: 1}[x] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.bool_])
def test_pickle_round_trip_keeps_names(dtype):
    t, a = _t(dtype=dtype)
    for out in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert isinstance(out, nt.Tensor)
        assert out.names == t.names
        assert out.dtype == t.dtype
        assert out.shape == t.shape
        np.testing.assert_array_equal(out.numpy(), a)
        assert out._B is t._B


def test_pickle_keeps_requires_grad():
    x = nt.tensor([1.0, 2.0], names=("x",), requires_grad=True)
    y = pickle.loads(pickle.dumps(x))
    assert y.requires_grad and y.is_leaf and y.names == ("x",)
    z = pickle.loads(pickle.dumps(x * 2))  # a graph output comes back as a leaf with its values
    assert z.is_leaf and z.names == ("x",)
    assert z.detach().numpy().tolist() == [2.0, 4.0]


def test_requires_grad_property():
    x = nt.tensor([1.0])
    assert not x.requires_grad and x.is_leaf and x.grad_fn is None and x.grad is None
    x.requires_grad = True
    assert x.requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad
    y = nt.tensor([1.0], requires_grad=True) * 2
    assert not y.is_leaf and y.grad_fn is not None
    with pytest.raises(RuntimeError, match="requires_grad_\\(False\\) on a tensor computed from others; use .detach"):
        y.requires_grad_(False)
    with pytest.raises(TypeError, match="only floating-point and complex tensors can require grad"):
        nt.tensor([1]).requires_grad_()


def test_detach_in_place():
    x = nt.tensor([1.0, 2.0], names=("x",), requires_grad=True)
    y = x * 2
    assert y.detach_() is y
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None and y.names == ("x",)
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()
    assert x.requires_grad  # the input is untouched


def test_grad_setter_checks():
    x = nt.tensor([1.0, 2.0], names=("x",), requires_grad=True)
    x.grad = nt.tensor([0.5, 0.5], names=("x",))
    assert x.grad.names == ("x",)
    x.grad = None
    assert x.grad is None
    with pytest.raises(TypeError, match="grad must be a Tensor or None, got list"):
        x.grad = [1.0, 2.0]
    with pytest.raises(ValueError, match=re.escape("grad has shape (3,), the tensor (2,)")):
        x.grad = nt.zeros(3, names=("x",))
    with pytest.raises(nt.NamesError, match=re.escape("grad: the gradient's names ('y',) differ from the tensor's "
                                                      "names ('x',)")):
        x.grad = nt.zeros(2, names=("y",))
