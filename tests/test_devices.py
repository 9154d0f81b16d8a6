"""Devices without a GPU: all the device plumbing run for real on a NumPy backend posing as ``"cuda:0"``.

``FakeCuda`` is the NumPy backend with ``device = "cuda:0"`` and the device extras of the CuPy backend
(``download``/``upload``, ``pin``, streams and events, ``synchronize``, the memory counters), logging
what it is asked to do.  Registered with ``backends.register_device`` it serves ``"cuda"``, so factories,
``.to``/``.cuda``/``.cpu``, autograd across devices, the mixed-device errors, ``Module.to``, optimizer
state, checkpoints, the DataLoader and ``nt.cuda`` all run here.  The errors of machines without CuPy,
without a usable GPU or without the device asked for are pinned with a stand-in ``cupy`` module.
What only a GPU can check (the CuPy backend's values, its kernels) is in test_gpu.py.
"""

import builtins
import copy
import pickle
import re
import sys
import types
import warnings

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import backends, cuda, nn, optim
from namedtensor.backends.numpy_backend import NumpyBackend
from namedtensor.data import DataLoader, TensorDataset
from namedtensor.testing import assert_close, gradcheck, gradgradcheck


class FakeCuda(NumpyBackend):
    """The NumPy backend posing as a CUDA device, logging the device extras it is asked for."""

    name = "fake_cuda"

    def __init__(self, index: int = 0) -> None:
        super().__init__()
        self.device = f"cuda:{index}"
        self.calls = []

    def download(self, x):
        self.calls.append(("download", x.dtype.name))
        return np.array(x, copy=True)

    def upload(self, x, non_blocking=False, stream=None):
        self.calls.append(("upload", np.asarray(x).dtype.name, non_blocking, stream))
        return np.array(x, copy=True)

    def pin(self, a):
        self.calls.append(("pin",))
        return np.array(a, copy=True)

    def copy_stream(self):
        return "copy-stream"

    def record(self, stream=None):
        self.calls.append(("record", stream))
        return ("event", stream)

    def wait(self, event, stream=None):
        self.calls.append(("wait", event, stream))

    def synchronize(self):
        self.calls.append(("synchronize",))

    def memory_allocated(self):
        return 1024

    def memory_reserved(self):
        return 4096

    def empty_cache(self):
        self.calls.append(("empty_cache",))


@pytest.fixture
def fake(monkeypatch):
    """A fresh FakeCuda serving "cuda" and "cuda:0" (no CuPy involved), removed afterwards."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(backends, "_devices", {})
    monkeypatch.setattr(backends, "_registered", set())
    monkeypatch.setattr(backends, "_current", 0)
    backends.use_cpu_backend("numpy")
    b = FakeCuda()
    backends.register_device("cuda:0", b)
    return b


def on_cpu(*shape, names=None, seed=0, dtype="float64"):
    return nt.tensor(np.random.default_rng(seed).normal(size=shape).astype(dtype), names=names)


# ----------------------------------------------------------------------------- the registry


def test_register_device_serves_the_device(fake):
    assert backends.get("cuda") is fake and backends.get("cuda:0") is fake and backends.get(" CUDA:0 ") is fake
    assert fake in backends.made()
    assert backends.register_device("cuda:0", None) is fake
    with pytest.raises(RuntimeError, match="CuPy is not installed"):
        backends.get("cuda:0")  # forgotten: CuPy would be asked again


def test_register_device_checks_its_arguments(fake):
    with pytest.raises(ValueError, match=re.escape("register_device: give a device 'cuda:N', got 'cpu'.")):
        backends.register_device("cpu", fake)
    with pytest.raises(ValueError, match=re.escape("register_device: the backend's device is 'cuda:0', not 'cuda:1'.")):
        backends.register_device("cuda:1", fake)
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        backends.register_device("gpu", fake)


# ----------------------------------------------------------------------------- the errors when CUDA is missing


def _stand_in_cupy(monkeypatch, count=None, error=None):
    """A ``cupy`` module whose runtime reports ``count`` devices, or raises ``error``."""

    def get_count():
        if error is not None:
            raise error
        return count

    fake_cupy = types.ModuleType("cupy")
    fake_cupy.__version__ = "13.9.9"
    fake_cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_count))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(backends, "_devices", {})
    monkeypatch.setattr(backends, "_registered", set())


class CUDARuntimeError(RuntimeError):
    pass


@pytest.mark.usefixtures("no_cupy")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:2"])
def test_error_without_cupy(device):
    with pytest.raises(RuntimeError) as info:
        nt.zeros(2, device=device)
    assert str(info.value) == (
        f"device {device!r} needs CuPy and an NVIDIA GPU, and CuPy is not installed. "
        "Install it with: pip install cupy-cuda12x (CUDA 12) or cupy-cuda13x (CUDA 13).")


def test_error_when_cupy_fails_to_import(monkeypatch):
    real_import = builtins.__import__

    def failing(name, *args, **kwargs):
        if name == "cupy":
            raise ImportError("libcudart.so.12: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(backends, "_devices", {})
    monkeypatch.setattr(builtins, "__import__", failing)
    with pytest.raises(RuntimeError, match=re.escape(
            "device 'cuda' needs CuPy and an NVIDIA GPU; CuPy is installed but cannot be imported "
            "(libcudart.so.12: cannot open shared object file).")):
        backends.get("cuda")


def test_error_when_cupy_finds_no_driver(monkeypatch):
    _stand_in_cupy(monkeypatch, error=CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is "
                                                       "insufficient for CUDA runtime version"))
    with pytest.raises(RuntimeError) as info:
        nt.ones(2).to("cuda:0")
    msg = str(info.value)
    assert msg.startswith("device 'cuda:0' needs CuPy and an NVIDIA GPU; CuPy 13.9.9 is installed but cannot use "
                          "a CUDA device: CUDARuntimeError: cudaErrorInsufficientDriver")
    assert "nvidia-smi" in msg and "cupy-cuda12x for CUDA 12" in msg


def test_error_when_cupy_finds_no_device(monkeypatch):
    _stand_in_cupy(monkeypatch, count=0)
    with pytest.raises(RuntimeError, match=re.escape(
            "device 'cuda' needs CuPy and an NVIDIA GPU; CuPy 13.9.9 is installed but finds no CUDA device.")):
        nt.zeros(1, device="cuda")


def test_error_for_a_device_index_out_of_range(monkeypatch):
    _stand_in_cupy(monkeypatch, count=1)
    with pytest.raises(RuntimeError, match=re.escape(
            "device 'cuda:3': there is no CUDA device 3; this machine has 1 (cuda:0).")):
        nt.zeros(1, device="cuda:3")
    _stand_in_cupy(monkeypatch, count=2)
    with pytest.raises(RuntimeError, match=re.escape("this machine has 2 (cuda:0 to cuda:1).")):
        nt.zeros(1).cuda(2)


def test_cupy_backend_module_imports_no_cupy_at_import_time(no_cupy):
    import importlib

    import namedtensor.backends.cupy_backend as mod

    importlib.reload(mod)  # CuPy is imported when a device is made, not with the module
    assert mod.CupyBackend.fused_attention is True and mod.CupyBackend.name == "cupy"


# ----------------------------------------------------------------------------- the CuPy backend's kernel dispatch


class KernelUnsupported(TypeError):
    pass


def _dispatching_backend(refuse=()):
    """A CupyBackend whose namespace is NumPy and whose kernels module logs its calls (and refuses the
    ``refuse`` ones), to check on the CPU which hook goes to the kernels and which to the generic code."""
    from namedtensor.backends.base import Backend
    from namedtensor.backends.cupy_backend import CupyBackend

    calls = []

    def kernel(name):
        def call(*args, **kwargs):
            calls.append(name)
            if name in refuse:
                raise KernelUnsupported(name)
            if name.startswith("attention"):  # the kernels take (N, L, D): results of their shapes, marked
                assert all(a.ndim == 3 for a in args[:3]), [a.shape for a in args]
                if name == "attention":
                    q, _, v = args
                    return np.full(q.shape[:2] + v.shape[2:], 7.0), np.full(q.shape[:2], 8.0)
                return tuple(np.full(a.shape, 9.0) for a in args[:3])
            return ("kernel", name)
        return call

    names = ("gelu", "gelu_backward", "norm_rows", "norm_rows_backward", "softmax", "softmax_backward",
             "cross_entropy", "cross_entropy_backward", "adamw_", "attention", "attention_backward")
    b = object.__new__(CupyBackend)
    b.xp = np
    Backend.__init__(b)
    numpy_b = NumpyBackend()
    b.erf = numpy_b.erf  # CuPy's needs a device
    b._to_native, b._from_native = numpy_b._to_native, numpy_b._from_native  # NumPy dtypes, as CuPy's
    b._kernels = types.SimpleNamespace(KernelUnsupported=KernelUnsupported, **{n: kernel(n) for n in names})
    return b, calls


def _hook_calls(b, dtype):
    rng = np.random.default_rng(0)

    def arr(*shape):
        return rng.normal(size=shape).astype(dtype)

    x, w = arr(3, 4), arr(4)
    t = np.array([0, 2, 1])
    q = arr(2, 2, 3, 4)  # two batch dims, which the CUDA kernels get flattened
    adam = {"lr": 0.1, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.0, "step": 1, "decoupled": True}
    att = {"scale": 0.5, "causal": True, "key_keep": None}
    return {
        "gelu": lambda: b.gelu(x),
        "gelu_backward": lambda: b.gelu_backward(x, x, x),
        "norm_rows": lambda: b.norm_rows(x, 4, w, w, 1e-5, True),
        "norm_rows_backward": lambda: b.norm_rows_backward(x, 4, x.mean(1), x.std(1) + 1, w, x, True, True, True),
        "softmax": lambda: b.softmax(x, 1, False),
        "softmax_backward": lambda: b.softmax_backward(x, x, 0, True),
        "cross_entropy": lambda: b.cross_entropy(x, t, -100),
        "cross_entropy_backward": lambda: b.cross_entropy_backward(x, x.max(1), t, x[:, 0], -100),
        "adamw_": lambda: b.adamw_([w.copy()], [w], [w * 0], [w * 0], **adam),
        "attention": lambda: b.attention(q, q, q, **att),
        "attention_backward": lambda: b.attention_backward(q, q, q, q, np.zeros((2, 2, 3), dtype), q, **att),
    }


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_backend_sends_float16_and_float32_to_the_kernels(dtype):
    b, calls = _dispatching_backend()
    assert b.fused_attention is True
    for name, call in _hook_calls(b, dtype).items():
        result = call()
        assert calls[-1] == name
        if name == "attention":  # shaped back to the batch dims
            assert result[0].shape == (2, 2, 3, 4) and np.all(result[0] == 7)
            assert result[1].shape == (2, 2, 3) and np.all(result[1] == 8)
        elif name == "attention_backward":
            assert [g.shape for g in result] == [(2, 2, 3, 4)] * 3 and all(np.all(g == 9) for g in result)
        else:
            assert result == ("kernel", name)


def test_cupy_backend_runs_the_generic_code_for_float64_and_refused_arrays():
    b, calls = _dispatching_backend()
    generic = NumpyBackend()
    for name, call in _hook_calls(b, "float64").items():
        call()
        assert calls == [], name  # float64: no kernel asked
    x = np.random.default_rng(1).normal(size=(3, 5)).astype(np.float32)
    refused, calls = _dispatching_backend(refuse=("softmax", "attention"))
    assert np.allclose(refused.softmax(x, 1, True), generic.softmax(x, 1, True)) and calls == ["softmax"]
    q = x.reshape(1, 3, 5)
    out, lse = refused.attention(q, q, q, scale=0.3, causal=False, key_keep=None)
    ref, ref_lse = generic.attention(q, q, q, scale=0.3, causal=False, key_keep=None)
    assert np.allclose(out, ref) and np.allclose(lse, ref_lse) and calls == ["softmax", "attention"]


# ----------------------------------------------------------------------------- nt.cuda


@pytest.mark.usefixtures("no_cupy")
def test_nt_cuda_without_cupy():
    assert cuda.is_available() is False and cuda.device_count() == 0
    assert cuda.memory_allocated() == 0 and cuda.memory_reserved() == 0 and cuda.memory_allocated(0) == 0
    cuda.empty_cache()
    assert cuda.current_device() == 0
    for call in (cuda.synchronize, lambda: cuda.set_device(0), lambda: cuda.pin(nt.ones(2))):
        with pytest.raises(RuntimeError, match="needs CuPy and an NVIDIA GPU, and CuPy is not installed"):
            call()


def test_nt_cuda_dispatches_to_the_device_backend(fake):
    assert cuda.is_available() is True and cuda.device_count() == 1
    assert cuda.memory_allocated() == 1024 and cuda.memory_reserved("cuda:0") == 4096
    assert cuda.memory_allocated(3) == 0  # a device never used holds nothing
    cuda.synchronize()
    cuda.synchronize(0)
    cuda.empty_cache()
    assert fake.calls == [("synchronize",), ("synchronize",), ("empty_cache",)]
    cuda.set_device("cuda:0")
    assert cuda.current_device() == 0
    with pytest.raises(RuntimeError, match="device 'cuda:1' needs CuPy"):
        cuda.set_device(1)
    assert cuda.current_device() == 0


def test_set_device_changes_what_cuda_means(fake, monkeypatch):
    second = FakeCuda(1)
    backends.register_device("cuda:1", second)
    assert cuda.device_count() == 2
    cuda.set_device(1)
    assert cuda.current_device() == 1 and nt.zeros(1, device="cuda")._B is second
    assert nt.ones(1).cuda().device == "cuda:1"
    cuda.set_device(0)
    assert nt.zeros(1, device="cuda")._B is fake


def test_nt_cuda_argument_errors(fake):
    with pytest.raises(ValueError, match="device index must be >= 0, got -1"):
        cuda.synchronize(-1)
    with pytest.raises(ValueError, match="'cpu' is not a CUDA device"):
        cuda.memory_allocated("cpu")
    with pytest.raises(TypeError, match="a device is an index or 'cuda:N', got True"):
        cuda.set_device(True)
    with pytest.raises(ValueError, match="pin: only CPU tensors can be pinned, this one is on 'cuda:0'"):
        cuda.pin(nt.ones(2, device="cuda"))


def test_pin_copies_into_pinned_memory(fake):
    t = on_cpu(2, 3, names=("a", "b"))
    p = cuda.pin(t)
    assert p.device == "cpu" and p.names == ("a", "b") and p.dtype is nt.float64
    assert_close(p, t)
    assert not np.shares_memory(p.numpy(), t.numpy())
    assert fake.calls == [("pin",)]


# ----------------------------------------------------------------------------- factories and moves


def test_factories_make_tensors_on_the_device(fake):
    made = [nt.zeros(2, 3, device="cuda"), nt.ones(2, device="cuda:0"), nt.empty(2, device="cuda"),
            nt.full((2,), 1.5, device="cuda"), nt.arange(4, device="cuda"), nt.linspace(0, 1, 5, device="cuda"),
            nt.eye(3, device="cuda"), nt.rand(2, device="cuda"), nt.randn(2, device="cuda"),
            nt.randint(0, 5, (3,), device="cuda"), nt.tensor([1.0, 2.0], device="cuda"),
            nt.as_tensor([1, 2], device="cuda"), nt.zeros({"batch": 2}, device="cuda")]
    for t in made:
        assert t._B is fake and t.device == "cuda:0" and t.is_cuda
    x = nt.ones(2, 3, names=("a", "b"), device="cuda")
    for like in (nt.zeros_like(x), nt.ones_like(x), nt.full_like(x, 2.0), nt.rand_like(x), nt.randn_like(x),
                 nt.empty_like(x)):
        assert like._B is fake and like.names == ("a", "b")
    assert nt.zeros_like(x, device="cpu").device == "cpu"
    assert nt.zeros_like(nt.ones(2), device="cuda").device == "cuda:0"


def test_tensor_of_a_tensor_keeps_its_device_unless_told(fake):
    x = nt.ones(2, names=("a",), device="cuda")
    assert nt.tensor(x).device == "cuda:0" and nt.tensor(x, device="cpu").device == "cpu"
    assert nt.as_tensor(x) is x
    moved = nt.as_tensor(nt.ones(2), device="cuda")
    assert moved.device == "cuda:0"


def test_manual_seed_seeds_the_device(fake):
    nt.manual_seed(7)
    a = nt.randn(4, device="cuda").numpy()
    nt.manual_seed(7)
    assert np.array_equal(nt.randn(4, device="cuda").numpy(), a)


def test_to_moves_copies_and_keeps_names(fake):
    t = on_cpu(2, 3, names=("a", "b"))
    g = t.to("cuda")
    assert g._B is fake and g.names == ("a", "b") and g.dtype is nt.float64 and g.is_leaf
    assert_close(g.cpu(), t)
    assert not np.shares_memory(g.numpy(), t.numpy())
    assert g.to("cuda") is g and g.to("cuda:0") is g and g.cuda() is g and g.cuda(0) is g
    back = g.cpu()
    assert back.device == "cpu" and back._B is backends.cpu() and not np.shares_memory(back.numpy(), g.numpy())
    assert t.cpu() is t and not t.is_cuda
    assert t.cuda().device == "cuda:0" and t.to(device="cuda").device == "cuda:0"
    assert nt.ones(1).to(g).device == "cuda:0"  # another tensor's device (and dtype)
    assert fake.calls == [("upload", "float64", False, None), ("download", "float64"),
                        ("download", "float64"), ("upload", "float64", False, None),
                        ("upload", "float64", False, None), ("upload", "float32", False, None)]


def test_to_with_a_dtype_casts_on_the_smaller_side(fake):
    t = on_cpu(3)
    half = t.to("cuda", nt.float16)
    assert half.dtype is nt.float16 and half.device == "cuda:0"
    wide = nt.ones(3, dtype=nt.float16).to("cuda", nt.float64)
    assert wide.dtype is nt.float64
    # the narrowing cast ran before the copy, the widening one after it
    assert [e[1] for e in fake.calls if e[0] == "upload"] == ["float16", "float16"]
    assert t.to("cuda", non_blocking=True)._B is fake and fake.calls[-1] == ("upload", "float64", True, None)


def test_gradient_goes_back_to_the_source_device(fake):
    x = on_cpu(2, 3, names=("a", "b")).requires_grad_()
    y = x.to("cuda")
    assert y.requires_grad and y.grad_fn.op.name == "to"
    (y * y).sum().backward()
    assert x.grad.device == "cpu" and x.grad.names == ("a", "b")
    assert_close(x.grad, 2 * x.detach())
    w = on_cpu(3, names=("b",), seed=1).to("cuda").requires_grad_()
    (w.cpu() * 3).sum().backward()
    assert w.grad._B is fake
    assert_close(w.grad.cpu(), nt.full((3,), 3.0, dtype=nt.float64, names=("b",)))


def test_gradcheck_through_moves(fake):
    x = on_cpu(2, 3, names=("a", "b")).requires_grad_()
    gradcheck(lambda t: (t.to("cuda").exp() * 2).cpu(), x)
    gradgradcheck(lambda t: (t.cuda() ** 3).sum("b").cpu(), x)


def test_no_graph_when_nothing_requires_grad(fake):
    assert on_cpu(2).to("cuda").grad_fn is None
    with nt.no_grad():
        assert on_cpu(2).requires_grad_().to("cuda").grad_fn is None


def test_copy_and_pickle_keep_the_device(fake):
    x = nt.ones(2, names=("a",), device="cuda").requires_grad_()
    for y in (copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert y._B is fake and y.names == ("a",) and y.requires_grad
    p = nn.Parameter(nt.ones(2, names=("a",), device="cuda"))
    assert copy.deepcopy(p)._B is fake and pickle.loads(pickle.dumps(p))._B is fake


# ----------------------------------------------------------------------------- mixing devices


def _mixed_ops(c, g):
    """Ops given a CPU tensor ``c`` and a device tensor ``g`` (both float, dims ("a", "b"))."""
    gi = nt.tensor([0, 1], names=("a",), device="cuda")
    ci = nt.tensor([0, 1], names=("a",))
    return {
        "add": lambda: c + g, "radd": lambda: g + c, "mul": lambda: g * c, "sub": lambda: c - g,
        "div": lambda: g / c, "pow": lambda: g ** c, "lt": lambda: g < c, "eq": lambda: c == g,
        "maximum": lambda: nt.maximum(c, g), "matmul": lambda: nt.matmul(c, g.rename(a="c").align_to("b", "c")),
        "einsum": lambda: nt.einsum("ab,ab->a", c, g),
        "cat": lambda: nt.cat([g, c], "a"), "stack": lambda: nt.stack([c, g, c], "s"),
        "where": lambda: nt.where(g > 0, g, c), "where_cond": lambda: nt.where(c > 0, g, g),
        "index_select": lambda: g.index_select("a", ci), "index_select_cpu": lambda: c.index_select("a", gi),
        "gather": lambda: g.gather("a", nt.zeros(2, 3, names=("a", "b"), dtype=nt.int64)),
        "getitem": lambda: g[ci], "masked_fill": lambda: g.masked_fill(c > 0, 0.0),
        "add_": lambda: g.detach().add_(c), "copy_": lambda: g.detach().copy_(c),
        "setitem": lambda: g.detach().__setitem__(0, c[0]),
        "embedding": lambda: nn.functional.embedding(ci.rename(a="tok"), g, dim="a"),
        "cross_entropy": lambda: nn.functional.cross_entropy(g, nt.tensor([0, 1], names=("a",)), "b"),
        "mse_loss": lambda: nn.functional.mse_loss(g, c),
        "linear": lambda: nn.functional.linear(g, nt.ones(4, 3, names=("o", "b"), dtype=nt.float64)),
        "layer_norm": lambda: nn.functional.layer_norm(g, "b", weight=nt.ones(3, names=("b",), dtype=nt.float64)),
        "attention": lambda: nn.functional.scaled_dot_product_attention(
            g.rename(a="seq", b="d"), c.rename(a="key", b="d"), c.rename(a="key", b="d"), dim="d", key_dim="key"),
        "attention_mask": lambda: nn.functional.scaled_dot_product_attention(
            g.rename(a="seq", b="d"), g.rename(a="key", b="d"), g.rename(a="key", b="d"), dim="d", key_dim="key",
            mask=nt.ones(2, names=("key",), dtype=nt.bool_)),
        "nll_loss": lambda: nn.functional.nll_loss(g, nt.tensor([0, 1], names=("a",)), "b"),
        "clip": lambda: g.clip(c, 1.0), "clamp_": lambda: g.detach().clamp_(max=c),
        "outer": lambda: nt.outer(g[0], c[1].rename(b="e")), "dot": lambda: nt.dot(g[0], c[1], over="b"),
        "masked_fill_": lambda: g.detach().masked_fill_(c > 0, 1.0), "type_as": lambda: g + c.type_as(g),
    }


@pytest.fixture
def mixed(fake):
    c = on_cpu(2, 3, names=("a", "b"))
    return c, c.to("cuda"), _mixed_ops(c, c.to("cuda"))


#: every op family that takes several tensors, by the name used in _mixed_ops
MIXED = ["add", "radd", "mul", "sub", "div", "pow", "lt", "eq", "maximum", "matmul", "einsum", "cat", "stack",
         "where", "where_cond", "index_select", "index_select_cpu", "gather", "getitem", "masked_fill", "add_",
         "copy_", "setitem", "embedding", "cross_entropy", "mse_loss", "linear", "layer_norm", "attention",
         "attention_mask", "nll_loss", "clip", "clamp_", "outer", "dot", "masked_fill_", "type_as"]


@pytest.mark.parametrize("op", MIXED)
def test_mixing_devices_raises_naming_both(mixed, op):
    c, g, ops = mixed
    with pytest.raises(ValueError) as info:
        ops[op]()
    msg = str(info.value)
    assert "cuda:0 (fake_cuda)" in msg and "cpu (numpy)" in msg, msg
    assert "different devices or backends" in msg and ".to(device)" in msg


def test_python_scalars_and_same_device_ops_are_fine(mixed):
    c, g, _ = mixed
    for out in (g + 1.5, 2 * g, g ** 2, nt.where(g > 0, g, 0.0), g.clip(-1, 1), g.sum("a"), g.softmax("b"),
                nt.cat([g, g], "a"), g[0], g.masked_fill(g > 0, 0.0)):
        assert out._B is backends.get("cuda")
    assert_close((g * 2 + 1).sum("b").cpu(), (c * 2 + 1).sum("b"))


# ----------------------------------------------------------------------------- modules, optimizers, checkpoints


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear("embed", "hidden", 4, 3)
        self.norm = nn.LayerNorm("hidden", 3)
        self.register_buffer("scale", nt.full((3,), 0.5, names=("hidden",)))
        self.register_buffer("steps", nt.zeros(1, dtype=nt.int64))

    def forward(self, x):
        return self.norm(self.fc(x)) * self.scale


def _batch(device=None):
    return nt.tensor(np.random.default_rng(3).normal(size=(5, 4)).astype("float32"), names=("batch", "embed"),
                     device=device)


def test_module_to_moves_parameters_buffers_and_grads_in_place(fake):
    nt.manual_seed(0)
    net = Net()
    params = list(net.parameters())
    before = {k: v.detach().clone() for k, v in net.state_dict().items()}
    net(_batch()).sum().backward()
    grads = {id(p): p.grad.detach().clone() for p in params}
    assert net.to("cuda") is net
    assert list(net.parameters()) == params  # the same objects
    for _, t in list(net.named_parameters()) + list(net.named_buffers()):
        assert t._B is fake
    for p in params:
        assert p.grad._B is fake and p.is_leaf and p.requires_grad
        assert_close(p.grad.cpu(), grads[id(p)])
    for k, v in net.state_dict().items():
        assert_close(v.cpu(), before[k])
    out = net(_batch("cuda"))
    assert out._B is fake
    assert_close(net.cpu()(_batch()), out.cpu())
    assert net.fc.weight.device == "cpu" and net.steps.device == "cpu" and net.cuda().steps.device == "cuda:0"
    net.to("cpu", nt.float64)
    assert net.fc.weight.device == "cpu" and net.fc.weight.dtype is nt.float64 and net.steps.dtype is nt.int64
    net.to(nt.float16, device="cuda")
    assert net.fc.weight._B is fake and net.fc.weight.dtype is nt.float16


def test_module_on_the_device_mixed_with_cpu_input_raises(fake):
    net = Net().to("cuda")
    with pytest.raises(ValueError, match=r"cpu \(numpy\) and cuda:0 \(fake_cuda\)|cuda:0 \(fake_cuda\) and cpu"):
        net(_batch())


def _train(net, opt, x, steps):
    for _ in range(steps):
        opt.zero_grad()
        net(x).square().sum().backward()
        opt.step()


@pytest.mark.parametrize("make", [lambda p: optim.AdamW(p, lr=0.1), lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
                                  lambda p: optim.Adam(p, lr=0.1, amsgrad=True)])
def test_optimizer_state_follows_the_parameters(fake, make):
    nt.manual_seed(0)
    ref = Net()
    net = copy.deepcopy(ref)
    ref_opt, opt = make(ref.parameters()), make(net.parameters())
    _train(ref, ref_opt, _batch(), 2)
    _train(net, opt, _batch(), 1)
    net.to("cuda")  # after the optimizer made its state on the CPU
    _train(net, opt, _batch("cuda"), 1)
    for p in net.parameters():
        for v in opt.state[p].values():
            if isinstance(v, nt.Tensor):
                assert v._B is fake and v.names == p.names
    for a, b in zip(ref.parameters(), net.parameters()):
        assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)


def test_optimizer_load_state_dict_puts_state_on_the_parameters_device(fake, tmp_path):
    nt.manual_seed(0)
    net = Net()
    opt = optim.AdamW(net.parameters(), lr=0.1)
    _train(net, opt, _batch(), 2)
    nt.save({"model": net.state_dict(), "opt": opt.state_dict()}, tmp_path / "ck.safetensors")
    ck = nt.load(tmp_path / "ck.safetensors", device="cuda")
    assert all(t._B is fake for t in ck["model"].values())
    assert ck["opt"]["state"][0]["exp_avg"]._B is fake
    on_cpu_ck = nt.load(tmp_path / "ck.safetensors")
    gpu_net = Net().to("cuda")
    gpu_opt = optim.AdamW(gpu_net.parameters(), lr=0.1)
    gpu_net.load_state_dict(on_cpu_ck["model"])  # a CPU checkpoint into a model on the device
    gpu_opt.load_state_dict(on_cpu_ck["opt"])
    for p in gpu_net.parameters():
        assert p._B is fake and gpu_opt.state[p]["exp_avg"]._B is fake
    _train(gpu_net, gpu_opt, _batch("cuda"), 1)
    _train(net, opt, _batch(), 1)
    for a, b in zip(net.parameters(), gpu_net.parameters()):
        assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)


def test_save_from_the_device_and_load_anywhere(fake, tmp_path):
    t = nt.randn(2, 3, names=("a", "b"), device="cuda")
    nt.save({"t": t, "n": 3}, tmp_path / "t.safetensors")
    back = nt.load(tmp_path / "t.safetensors")
    assert back["t"].device == "cpu" and back["t"].names == ("a", "b") and back["n"] == 3
    assert_close(back["t"], t.cpu())
    assert nt.load(tmp_path / "t.safetensors", device="cuda:0")["t"]._B is fake


# ----------------------------------------------------------------------------- the DataLoader


def _dataset():
    x = nt.tensor(np.arange(20, dtype="float32").reshape(10, 2), names=("example", "feat"))
    y = nt.tensor(np.arange(10), names=("example",))
    return TensorDataset(x, y, dim="example")


@pytest.mark.parametrize("fast", [True, False])
def test_loader_delivers_batches_on_the_device(fake, fast):
    ds = _dataset()
    kwargs = {} if fast else {"collate_fn": lambda s: (nt.stack([a for a, _ in s], "batch"),
                                                       nt.stack([b for _, b in s], "batch"))}
    plain = list(DataLoader(ds, batch_size=4, **kwargs))
    moved = list(DataLoader(ds, batch_size=4, device="cuda", **kwargs))
    assert len(moved) == 3
    for (x, y), (gx, gy) in zip(plain, moved):
        assert gx._B is fake and gy._B is fake and gx.names == x.names
        assert_close(gx.cpu(), x) and np.array_equal(gy.numpy(), y.numpy())
    assert ("pin",) not in fake.calls


def test_loader_pinned_copies_go_one_batch_ahead_on_the_copy_stream(fake):
    fake.calls.clear()
    loader = DataLoader(_dataset(), batch_size=4, device="cuda", pin_memory=True)
    batches = iter(loader)
    first = next(batches)
    assert first[0]._B is fake
    # two batches were uploaded (on the copy stream, after the current stream's work) before the first came out
    uploads = [e for e in fake.calls if e[0] == "upload"]
    assert len(uploads) == 4 and all(e[2:] == (True, "copy-stream") for e in uploads)
    assert fake.calls[:2] == [("record", None), ("wait", ("event", None), "copy-stream")]
    assert fake.calls[-1] == ("wait", ("event", "copy-stream"), None)  # the current stream waits for the copies
    assert fake.calls.count(("pin",)) == 4
    rest = list(batches)
    assert len(rest) == 2
    plain = list(DataLoader(_dataset(), batch_size=4))
    for (x, _), (gx, _) in zip(plain, [first] + rest):
        assert_close(gx.cpu(), x)


def test_loader_pin_memory_alone_pins_cpu_batches(fake):
    fake.calls.clear()
    batches = list(DataLoader(_dataset(), batch_size=5, pin_memory=True))
    assert all(t.device == "cpu" for b in batches for t in b)
    assert fake.calls == [("pin",)] * 4
    x, _ = batches[0]
    assert x.to("cuda", non_blocking=True)._B is fake and fake.calls[-1] == ("upload", "float32", True, None)


@pytest.mark.usefixtures("no_cupy")
def test_loader_pin_memory_without_a_gpu_warns_and_does_nothing():
    with pytest.warns(UserWarning, match="pin_memory=True but no CUDA device is available"):
        loader = DataLoader(_dataset(), batch_size=5, pin_memory=True)
    assert [b[0].shape for b in loader] == [(5, 2), (5, 2)]
    with pytest.raises(RuntimeError, match="device 'cuda' needs CuPy"):
        DataLoader(_dataset(), device="cuda")
    with pytest.raises(TypeError, match="pin_memory must be True or False"):
        DataLoader(_dataset(), pin_memory=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DataLoader(_dataset(), device="cpu")  # nothing to do, nothing to say


def test_loader_keeps_structures_and_non_tensors(fake):
    samples = [{"x": nt.ones(2, names=("f",)), "tag": "s", "pair": (nt.zeros(1, names=("g",)), 1)} for _ in range(3)]
    (batch,) = list(DataLoader(samples, batch_size=3, device="cuda", pin_memory=True))
    assert batch["x"]._B is fake and batch["tag"] == ["s", "s", "s"]
    assert batch["pair"][0]._B is fake and batch["pair"][1]._B is fake


# ----------------------------------------------------------------------------- the demo


def test_demo_runs_on_the_device(fake, tmp_path, capsys):
    from namedtensor import demo

    result = demo.main(["--steps", "2", "--device", "cuda", "--out", str(tmp_path), "--no-progress"])
    assert result["reload_identical"] is True and len(result["losses"]) == 2
    assert "parameters on cuda" in capsys.readouterr().out
