"""On a CUDA device: every op family and layer equals the CPU result, a Transformer trains, and the
device features (Module.to, nt.cuda's memory functions, pinned DataLoader batches) work.

Marked ``gpu``: deselected (by conftest.py, with the reason) where CuPy or a CUDA device is missing.
Each op runs on the same inputs on the CPU (NumPy) and on "cuda"; values and the gradients of a
fixed random weighting of the outputs must agree to float32 rounding (rtol 1e-4 / atol 1e-5, looser
where the op sums many terms), and float16 results on the GPU to the float32 CPU result of the same
float16-rounded inputs (rtol/atol 2e-2).  The CUDA kernels against their NumPy references are in
test_cuda_kernels.py.
"""

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import backends, cuda, nn, optim
from namedtensor.compiler import capture
from namedtensor.data import DataLoader, TensorDataset
from namedtensor.nn import functional as F
from namedtensor.testing import assert_close
from helpers import clipped_batchnorm_step, ints, rnd

pytestmark = pytest.mark.gpu

F32 = {"rtol": 1e-4, "atol": 1e-5}
F16 = {"rtol": 2e-2, "atol": 2e-2}


@pytest.fixture(autouse=True)
def on_numpy():
    backends.use_cpu_backend("numpy")
    nt.manual_seed(0)


def _outputs(out):
    if isinstance(out, nt.Tensor):
        return [out]
    return [o for o in out if isinstance(o, nt.Tensor)]


def check(fn, *inputs, tol=F32, grad=True):
    """``fn`` on the CPU and on the GPU (the same inputs moved): equal outputs and input gradients."""
    cpu_in = [t.detach().requires_grad_(grad and t.dtype.kind == "f") for t in inputs]
    gpu_in = [t.detach().to("cuda").requires_grad_(grad and t.dtype.kind == "f") for t in inputs]
    cpu_out, gpu_out = _outputs(fn(*cpu_in)), _outputs(fn(*gpu_in))
    assert len(cpu_out) == len(gpu_out)
    for c, g in zip(cpu_out, gpu_out):
        assert g.device.startswith("cuda") and g.dtype is c.dtype and g.names == c.names
        assert_close(g.detach().cpu(), c.detach(), **tol)
    floats = [(c, g) for c, g in zip(cpu_out, gpu_out) if c.requires_grad]
    if not floats:
        return
    rng = np.random.default_rng(1)
    cpu_total = gpu_total = 0
    for c, g in floats:
        w = nt.tensor(rng.normal(size=c.shape).astype(c.dtype.name), names=c.names)
        cpu_total = cpu_total + (c * w).sum()
        gpu_total = gpu_total + (g * w.to("cuda")).sum()
    cpu_total.backward()
    gpu_total.backward()
    for c, g in zip(cpu_in, gpu_in):
        if c.requires_grad and c.grad is not None:
            assert g.grad.device.startswith("cuda")
            assert_close(g.grad.cpu(), c.grad, **tol)


def check_half(fn, *inputs, tol=F16):
    """``fn`` in float16 on the GPU against float32 on the CPU, from the same float16-rounded inputs."""
    rounded = [t.to(nt.float16).to(nt.float32) if t.dtype.kind == "f" else t for t in inputs]
    expected = _outputs(fn(*rounded))
    got = _outputs(fn(*[t.to("cuda", nt.float16) if t.dtype.kind == "f" else t.to("cuda") for t in rounded]))
    for c, g in zip(expected, got):
        if c.dtype.kind == "f":
            assert g.dtype is nt.float16
            assert_close(g.cpu().to(nt.float32), c, **tol)
        else:
            assert_close(g.cpu(), c)


X = ("batch", "seq", "embed")


def x3(seed=0, **kw):
    return rnd(2, 5, 8, names=X, seed=seed, **kw)


# ----------------------------------------------------------------------------- op families


ELEMENTWISE = {
    "arith": lambda x, y: (x + y) * x - y / (1.5 + x.abs()) + 2 ** x.clip(-2, 2) - x.square(),
    "math": lambda x, y: x.exp() + y.sin() + x.cos() * y.tanh() + x.sigmoid() + y.abs().log1p() + x.expm1(),
    "activations": lambda x, y: x.relu() + F.gelu(y) + F.silu(x) + F.gelu(x, approximate="tanh") + y.softplus(),
    "sqrt_rsqrt": lambda x, y: x.abs().add(0.5).sqrt() + y.abs().add(0.5).rsqrt() + x.reciprocal().clip(-3, 3),
    "compare_where": lambda x, y: nt.where(x > y, x, y * 2) + nt.maximum(x, y) - nt.minimum(x, 0.1),
    "erf_sign": lambda x, y: x.erf() + y.sign() * x.floor() + x.ceil() * 0.5 + y.round(),
}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise(name):
    check(ELEMENTWISE[name], x3(0), x3(1))


@pytest.mark.parametrize("name", ["arith", "math", "activations", "compare_where"])
def test_elementwise_float16(name):
    check_half(ELEMENTWISE[name], x3(0), x3(1))


def test_logical_and_integer_ops():
    a, b = ints(5, 4, 3, names=("i", "j")), ints(5, 4, 3, names=("i", "j"), seed=1)
    check(lambda a, b: ((a + b) * 3 // 2 - a % 3, nt.logical_and(a > 1, b < 3), nt.logical_or(a > 3, b > 3)
                        .logical_not(), (a == b).any("j"), (a != b).all("i")), a, b, grad=False)


REDUCTIONS = {
    "sum_mean": lambda x: (x.sum("seq"), x.mean(("batch", "embed")), x.sum(), x.mean("embed", keepdim=True)),
    "prod": lambda x: x.clip(0.5, 1.5).prod("seq"),
    "max_min": lambda x: (x.amax("seq"), x.amin("embed"), x.max("seq").values, x.min("embed").values),
    "arg": lambda x: (x.argmax("seq"), x.argmin("embed")),
    "std_var": lambda x: (x.std("seq"), x.var("embed", unbiased=False), x.var(("seq", "embed"))),
    "logsumexp_norm": lambda x: (x.logsumexp("embed"), x.norm(dim="seq"), x.norm(p=1, dim="embed")),
    "softmax": lambda x: (x.softmax("embed"), x.log_softmax("embed"), x.softmax("seq"), x.log_softmax("batch")),
    "cumulative": lambda x: (x.cumsum("seq"), (x.clip(-1, 1) + 2).cumprod("embed")),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(name):
    check(REDUCTIONS[name], x3())


def test_softmax_float16_and_big_rows():
    check_half(REDUCTIONS["softmax"], x3())
    wide = rnd(4, 3000, names=("row", "vocab"))
    check(lambda x: (x.softmax("vocab"), x.log_softmax("vocab"), x.log_softmax("row")), wide,
          tol={"rtol": 1e-4, "atol": 1e-6})


def test_sorting():
    check(lambda x: (nt.sort(x, "embed").values, nt.sort(x, "seq", descending=True).values,
                     nt.argsort(x, "embed"), x.topk(3, "embed").values, x.topk(2, "seq", largest=False).indices),
          x3())


SHAPES = {
    "flatten": lambda x: x.flatten(("seq", "embed"), "flat").unflatten("flat", (("s", 5), ("e", 8))),
    "squeeze": lambda x: x.unsqueeze(1, "one").squeeze("one").reshape(10, 8, names=("rows", "embed")),
    "broadcast": lambda x: x.sum("seq").align_to("batch", "seq", "embed").broadcast_to((2, 5, 8)) * x,
    "movement": lambda x: (x.flip("seq"), x.roll(2, "embed"), x.tile((1, 2, 1)), x.sum("batch").tril(),
                           x.sum("batch").triu(1)),
    "naming": lambda x: (x.align_to("embed", "batch", "seq"), x.permute("seq", "embed", "batch"),
                         x.transpose("batch", "embed"), x.rename(seq="time")),
    "joining": lambda x: (nt.cat([x, x * 2], "seq"), nt.stack([x, -x], "pair"), *x.split(3, "embed"),
                          *x.chunk(2, "seq"), *x.unbind("batch"), x.pad({"seq": (1, 2)}, value=0.5)),
}


@pytest.mark.parametrize("name", SHAPES)
def test_shape_movement_naming_joining(name):
    check(SHAPES[name], x3())


INDEXING = {
    "basic": lambda x, i: (x[0], x[:, 1:4], x[{"seq": 2}], x.select("embed", 3), x.narrow("seq", 1, 3),
                           x.isel(seq=slice(0, 2))),
    "advanced": lambda x, i: (x.index_select("seq", i), x[:, i], x.gather("embed", i.rename(seq="embed")
                                                                           .align_to("batch", "seq", "embed")
                                                                           .expand(2, 5, 3) % 8)),
    "masks": lambda x, i: (x.masked_fill(x > 0.5, -1.0), nt.where(x < 0, 0.0, x)),
}


@pytest.mark.parametrize("name", INDEXING)
def test_indexing(name):
    check(INDEXING[name], x3(), ints(5, 3, names=("seq",)))


def test_inplace_and_setitem():
    def fn(x, y):
        z = x * 1.0
        with nt.no_grad():
            w = z.detach().clone()
            w.add_(y).mul_(2).clamp_(-1, 1)
            w[0, 1] = 5.0
            w.masked_fill_(w < -0.5, 0.0)
        return z + w

    check(fn, x3(), x3(1))


LINALG = {
    "matmul": lambda x, w: (nt.matmul(x, w), x @ w),
    "einsum": lambda x, w: (nt.einsum("batch seq embed, embed hidden -> batch hidden", x, w),),
    "dot_outer": lambda x, w: (nt.dot(x, x, over="embed"), nt.outer(x[0, 0], w[:, 0].rename(embed="e2"))),
    "linear": lambda x, w: F.linear(x, w.rename(hidden="out").align_to("out", "embed"), dim="embed"),
}


@pytest.mark.parametrize("name", LINALG)
def test_linalg(name):
    check(LINALG[name], x3(), rnd(8, 6, names=("embed", "hidden"), seed=2), tol={"rtol": 1e-4, "atol": 1e-4})


def test_embedding():
    check(lambda idx, w: F.embedding(idx, w, dim="vocab"), ints(10, 3, 4, names=("batch", "seq")),
          rnd(10, 8, names=("vocab", "embed")))


def test_normalization():
    w, b = rnd(8, names=("embed",), seed=3), rnd(8, names=("embed",), seed=4)
    check(lambda x, w, b: (F.layer_norm(x, "embed", w, b), F.layer_norm(x, ("seq", "embed")),
                           F.rms_norm(x, "embed", w), F.rms_norm(x, "embed")), x3(), w, b)
    check_half(lambda x, w, b: (F.layer_norm(x, "embed", w, b), F.rms_norm(x, "embed", w)), x3(), w, b)


def test_losses():
    logits = rnd(4, 6, 10, names=("batch", "seq", "vocab"))
    target = ints(10, 4, 6, names=("batch", "seq"))
    target_np = target.numpy().copy()
    target_np[0, :3] = -100
    ignored = nt.tensor(target_np, names=("batch", "seq"))
    check(lambda z, t, u: (F.cross_entropy(z, t, "vocab"), F.cross_entropy(z, u, "vocab", ignore_index=-100),
                           F.cross_entropy(z, t, "vocab", reduction="none"),
                           F.cross_entropy(z, t, "vocab", label_smoothing=0.1),
                           F.nll_loss(z.log_softmax("vocab"), t, "vocab"),
                           F.mse_loss(z, z.detach() * 0.5)), logits, target, ignored)
    check_half(lambda z, t: F.cross_entropy(z, t, "vocab", reduction="none"), logits, target)


def _qkv(seq=7, key=7, d=16, heads=2, seed=0, dtype="float32"):
    q = rnd(2, heads, seq, d, names=("batch", "head", "seq", "d"), seed=seed, dtype=dtype)
    k = rnd(2, heads, key, d, names=("batch", "head", "key", "d"), seed=seed + 1, dtype=dtype)
    v = rnd(2, heads, key, d, names=("batch", "head", "key", "d"), seed=seed + 2, dtype=dtype)
    return q, k, v


ATTENTION = {
    "plain": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key"),
    "causal": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", is_causal=True),
    "padding": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", mask=m),
    "causal_padding": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", mask=m,
                                                                        is_causal=True, scale=0.3),
    "float_mask": lambda q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, dim="d", key_dim="key", mask=nt.zeros_like(m, dtype=q.dtype).masked_fill(m.logical_not(), -1e9)),
    "weights": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", mask=m,
                                                                 return_weights=True),
}


def _padding(key=7):
    keep = np.ones((2, key), dtype=bool)
    keep[1, key - 3:] = False
    return nt.tensor(keep, names=("batch", "key"))


@pytest.mark.parametrize("name", ATTENTION)
def test_attention(name):
    check(ATTENTION[name], *_qkv(), _padding(), tol={"rtol": 1e-4, "atol": 2e-5})


@pytest.mark.parametrize("name", ["plain", "causal", "causal_padding"])
def test_attention_long_and_float16(name):
    # longer than one tile of the fused kernel in both directions, and head sizes it specialises on
    for seq, key, d in ((130, 130, 64), (70, 200, 32)):
        check(ATTENTION[name], *_qkv(seq, key, d, heads=1), _padding(key), tol={"rtol": 1e-3, "atol": 1e-4})
        check_half(ATTENTION[name], *_qkv(seq, key, d, heads=1), _padding(key))


def test_dtype_casts_and_factories_on_the_device():
    check(lambda x: (x.to(nt.float64), x.half().float(), x.double().sum("seq"), x.long(), x.bool()), x3())
    for t in (nt.zeros(2, 3, device="cuda"), nt.arange(5, device="cuda"), nt.eye(3, device="cuda"),
              nt.full((2,), 3, device="cuda"), nt.linspace(0, 1, 4, device="cuda")):
        assert t.is_cuda
        assert_close(t.cpu(), t.to("cpu"))
    assert nt.arange(5, device="cuda").tolist() == [0, 1, 2, 3, 4]
    nt.manual_seed(3)
    a = nt.randn(1000, device="cuda")
    nt.manual_seed(3)
    assert nt.randn(1000, device="cuda").tolist() == a.tolist()
    assert abs(a.mean().item()) < 0.1 and abs(a.std().item() - 1) < 0.1
    u = nt.rand(1000, device="cuda", dtype=nt.float16)
    assert u.dtype is nt.float16 and 0 <= u.min().item() and u.max().item() < 1
    r = nt.randint(0, 7, (1000,), device="cuda")
    assert r.dtype is nt.int64 and set(r.tolist()) == set(range(7))


def test_mixing_cpu_and_cuda_raises():
    x = x3()
    with pytest.raises(ValueError, match=r"cpu \(numpy\) and cuda:0 \(cupy\)"):
        x + x.cuda()


# ----------------------------------------------------------------------------- layers and training


LAYERS = {
    "linear": lambda: nn.Linear("embed", "hidden", 8, 12),
    "layer_norm": lambda: nn.LayerNorm("embed", 8),
    "rms_norm": lambda: nn.RMSNorm("embed", 8),
    "mlp": lambda: nn.MLP("embed", 8, 32),
    "attention": lambda: nn.MultiheadAttention("embed", 8, 2),
    "block": lambda: nn.TransformerBlock("embed", 8, 2),
    "activations": lambda: nn.Sequential(nn.GELU(), nn.SiLU(), nn.Tanh(), nn.Sigmoid(), nn.ReLU(), nn.Softmax("embed")),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layers_match_the_cpu(name):
    nt.manual_seed(0)
    cpu_layer = LAYERS[name]()
    gpu_layer = LAYERS[name]()
    gpu_layer.load_state_dict(cpu_layer.state_dict())
    gpu_layer.to("cuda")
    x = x3().requires_grad_()
    xg = x.detach().cuda().requires_grad_()
    call = (lambda m, t: m(t, is_causal=True)) if name == "block" else (lambda m, t: m(t))
    c, g = call(cpu_layer, x), call(gpu_layer, xg)
    assert_close(g.detach().cpu(), c.detach(), rtol=1e-4, atol=1e-5)
    c.square().sum().backward()
    g.square().sum().backward()
    assert xg.grad.is_cuda
    assert_close(xg.grad.cpu(), x.grad, rtol=1e-3, atol=1e-4)
    for (k, pc), (_, pg) in zip(cpu_layer.named_parameters(), gpu_layer.named_parameters()):
        assert pg.grad.is_cuda, k
        assert_close(pg.grad.cpu(), pc.grad, rtol=1e-3, atol=1e-4)


def test_embedding_and_dropout_layers():
    emb = nn.Embedding(10, 8, "embed").to("cuda")
    idx = ints(10, 2, 5, names=("batch", "seq")).cuda()
    out = emb(idx)
    assert out.is_cuda and out.names == ("batch", "seq", "embed")
    drop = nn.Dropout(0.5).to("cuda")
    y = drop(nt.ones(1000, names=("x",), device="cuda"))
    kept = (y != 0).sum().item()
    assert 350 < kept < 650 and set(np.unique(y.cpu().numpy()).tolist()) <= {0.0, 2.0}
    drop.eval()
    assert drop(y) is y or (drop(y) == y).all().item()


class TinyLM(nn.Module):
    def __init__(self, vocab=16, size=32, heads=4, layers=2, device=None):
        super().__init__()
        self.tok = nn.Embedding(vocab, size, "embed", device=device)
        self.blocks = nn.ModuleList([nn.TransformerBlock("embed", size, heads, device=device) for _ in range(layers)])
        self.norm = nn.LayerNorm("embed", size, device=device)
        self.head = nn.Linear("embed", "vocab", size, vocab, device=device)

    def forward(self, tokens):
        x = self.tok(tokens)
        for block in self.blocks:
            x = block(x, is_causal=True)
        return self.head(self.norm(x))


def test_a_transformer_trains_on_the_gpu():
    nt.manual_seed(0)
    model = TinyLM(device="cuda")
    assert all(p.is_cuda for p in model.parameters())
    opt = optim.AdamW(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    # the task: copy the sequence shifted by one (next token = current token + 1 mod 16)
    start = rng.integers(0, 16, size=(32, 1))
    seq = (start + np.arange(17)) % 16
    tokens = nt.tensor(seq[:, :-1], names=("batch", "seq"), device="cuda")
    targets = nt.tensor(seq[:, 1:], names=("batch", "seq"), device="cuda")
    losses = []
    for _ in range(60):
        loss = F.cross_entropy(model(tokens), targets, "vocab")
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    for p in model.parameters():
        for v in opt.state[p].values():
            if isinstance(v, nt.Tensor):
                assert v.is_cuda


def test_the_same_training_step_on_cpu_and_gpu():
    nt.manual_seed(0)
    cpu_model = TinyLM()
    gpu_model = TinyLM()
    gpu_model.load_state_dict(cpu_model.state_dict())
    gpu_model.to("cuda")
    tokens = ints(16, 4, 12, names=("batch", "seq"))
    targets = ints(16, 4, 12, names=("batch", "seq"), seed=1)
    for model, dev in ((cpu_model, "cpu"), (gpu_model, "cuda")):
        opt = optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(3):
            loss = F.cross_entropy(model(tokens.to(dev)), targets.to(dev), "vocab")
            opt.zero_grad()
            loss.backward()
            opt.step()
    # Softmax over keys ignores what the key projection's bias adds (q·b is the same for every key), so
    # that bias's gradient is zero up to rounding, and Adam scales the rounding noise, different on each
    # device, to steps of ±lr: its gradient must be that noise, every other parameter must agree.
    for (k, a), (_, b) in zip(cpu_model.named_parameters(), gpu_model.named_parameters()):
        if k.endswith("k_proj.bias"):
            assert float(a.grad.abs().max()) < 1e-7 and float(b.grad.cpu().abs().max()) < 1e-7, k
            assert_close(b.detach().cpu(), a.detach(), rtol=0, atol=2 * 3 * 1e-3)  # 3 steps of at most ±lr each
        else:
            assert_close(b.detach().cpu(), a.detach(), rtol=1e-3, atol=1e-4)


def test_module_to_round_trip_and_checkpoint(tmp_path):
    nt.manual_seed(0)
    model = TinyLM()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = list(model.parameters())
    model.cuda()
    assert list(model.parameters()) == params and all(p.is_cuda for p in params)
    nt.save(model.state_dict(), tmp_path / "m.safetensors")
    loaded = nt.load(tmp_path / "m.safetensors", device="cuda")
    assert all(t.is_cuda for t in loaded.values())
    model.cpu()
    for k, v in model.state_dict().items():
        assert v.device == "cpu"
        assert_close(v, before[k], rtol=0, atol=0)
        assert_close(loaded[k].cpu(), before[k], rtol=0, atol=0)


def test_backward_across_the_device_boundary():
    x = x3().requires_grad_()
    y = (x.cuda().exp() * 2).sum("seq").cpu()
    y.sum().backward()
    assert x.grad.device == "cpu"
    assert_close(x.grad, 2 * x.detach().exp(), **F32)


# ----------------------------------------------------------------------------- nt.cuda and the DataLoader


def test_nt_cuda_functions():
    import cupy

    assert cuda.is_available() and cuda.device_count() == cupy.cuda.runtime.getDeviceCount() >= 1
    assert cuda.current_device() == 0
    cuda.empty_cache()
    base = cuda.memory_allocated()
    t = nt.zeros(1 << 20, device="cuda")  # 4 MiB
    cuda.synchronize()
    assert cuda.memory_allocated() >= base + (4 << 20)
    assert cuda.memory_reserved() >= cuda.memory_allocated()
    del t
    assert cuda.memory_allocated() == base
    reserved = cuda.memory_reserved()
    cuda.empty_cache()
    assert cuda.memory_reserved() <= reserved - (4 << 20)
    cuda.set_device(0)
    with pytest.raises(RuntimeError, match="there is no CUDA device"):
        nt.zeros(1, device=f"cuda:{cuda.device_count()}")


def test_pinned_memory_and_non_blocking_copies():
    B = backends.get("cuda")
    t = x3()
    p = cuda.pin(t)
    assert B.is_pinned(p.numpy()) and not B.is_pinned(t.numpy())
    g = p.to("cuda", non_blocking=True)
    cuda.synchronize()
    assert_close(g.cpu(), t, rtol=0, atol=0)


@pytest.mark.parametrize("device", [None, "cuda"])
def test_pin_memory_loader(device):
    x = rnd(40, 3, names=("example", "feat"))
    y = ints(5, 40, names=("example",))
    ds = TensorDataset(x, y, dim="example")
    B = backends.get("cuda")
    plain = list(DataLoader(ds, batch_size=16, shuffle=True, seed=0))
    fast = list(DataLoader(ds, batch_size=16, shuffle=True, seed=0, pin_memory=True, device=device))
    assert len(fast) == len(plain) == 3
    for (px, py), (fx, fy) in zip(plain, fast):
        if device is None:
            assert fx.device == "cpu" and B.is_pinned(fx.numpy())
        else:
            assert fx.is_cuda and fy.is_cuda
        assert_close(fx.cpu(), px, rtol=0, atol=0)
        assert fy.cpu().tolist() == py.tolist()


def test_dlpack_with_cupy_is_zero_copy():
    import cupy

    src = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    t = nt.from_dlpack(src, names=("a", "b"))
    assert t.device == "cuda:0" and t.names == ("a", "b")
    src[0, 0] = 7.0  # the same memory
    assert t.cpu().numpy()[0, 0] == 7.0
    back = cupy.from_dlpack(t)
    assert back.data.ptr == src.data.ptr


# ----------------------------------------------------------------------------- PyTorch-style ops and layers


def img(seed=0):
    return rnd(2, 3, 8, 8, names=(None,) * 4, seed=seed)


PYTORCH_STYLE = {
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1, stride=(1, 2)), lambda: (img(), rnd(4, 3, 3, 3, names=(None,) * 4))),
    "conv1d_groups": (lambda x, w: F.conv1d(x, w, groups=3, dilation=2),
                      lambda: (rnd(2, 6, 9, names=(None,) * 3), rnd(6, 2, 3, names=(None,) * 3, seed=1))),
    "pooling": (lambda x: (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, stride=2, padding=1), F.adaptive_avg_pool2d(x, 3)),
                lambda: (img(),)),
    "rearrange_reshape": (lambda h: (nt.rearrange(h, "batch seq embed=(head d) -> batch head seq d", head=2),
                                     h.reshape(2, 5, 2, 4)), lambda: (x3(),)),
    "special": (lambda x: (x.lgamma(), x.digamma(), (x - 0.5).erfinv(), x.polygamma(1)),
                lambda: (rnd(2, 5, 8, names=X, low=0.05),)),
    "incomplete_gamma": (lambda x: (nt.igamma(x.detach() * 4, x * 3), nt.igammac(x.detach() * 4 + 0.5, x * 3),
                                    nt.special.gammainc(2.0, x)), lambda: (rnd(2, 5, 8, names=X, low=0.05),)),
    "inplace_in_graph": (lambda x: (x * 2).relu_().exp_().mul_(0.5), lambda: (x3(),)),
    "scans_and_medians": (lambda x: (x.cummax("seq").values, x.logcumsumexp("seq"), x.median("embed").values),
                          lambda: (x3(),)),
    "losses_pytorch_style": (lambda z, t: (F.cross_entropy(z, t, label_smoothing=0.1),
                                           F.binary_cross_entropy_with_logits(z, (z > 0).float())),
                             lambda: (rnd(6, 5, names=(None, None)), ints(5, 6, names=(None,)))),
    "sdpa_unnamed": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                     lambda: tuple(rnd(2, 2, 5, 4, names=(None,) * 4, seed=s) for s in range(3))),
}


@pytest.mark.parametrize("name", PYTORCH_STYLE)
def test_pytorch_style_ops_match_the_cpu(name):
    fn, inputs = PYTORCH_STYLE[name]
    check(fn, *inputs())


def test_incomplete_gamma_edges_match_the_cpu():
    # cupyx.scipy.special's gammainc/gammaincc, with PyTorch's values at the edges (nan operands included)
    edges = [0.0, -0.0, 0.5, 1.0, 3.0, 30.0, np.inf, -1.0, np.nan]
    a, x = (nt.tensor(v.ravel().copy()) for v in np.meshgrid(edges, edges, indexing="ij"))
    for fn in (nt.igamma, nt.igammac):
        got, want = fn(a.to("cuda"), x.to("cuda")).cpu().numpy(), fn(a, x).numpy()
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-13, atol=0)


# ----------------------------------------------------------------------------- dtypes, nt.linalg, nt.fft, scatter, sets


def square(seed=0, n=4):
    """A batch of well-conditioned square matrices."""
    a = np.random.default_rng(seed).normal(size=(3, n, n)) + n * np.eye(n)
    return nt.tensor(a.astype("float32"), names=("batch", "row", "col"))


def spd(seed=0, n=4):
    """A batch of symmetric positive definite matrices with well-separated eigenvalues."""
    q = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, n, n)))[0]
    a = q @ (np.arange(1, n + 1)[:, None] * np.swapaxes(q, -1, -2))
    return nt.tensor(a.astype("float32"), names=("batch", "row", "col"))


def index_like(high, *shape, names, seed=0):
    return nt.tensor(np.random.default_rng(seed).integers(0, high, size=shape), names=names)


# Decompositions are compared through sign-invariant quantities (cuSOLVER and LAPACK may choose
# different signs for the same vectors).
MATRIX = {
    "inv_det_slogdet": (lambda a: (nt.linalg.inv(a), nt.linalg.det(a), nt.linalg.slogdet(a).logabsdet),
                        lambda: (square(),)),
    "solve_cholesky": (lambda a, s: (nt.linalg.solve(a, s.rename(col="k")), nt.linalg.cholesky(s)), lambda: (square(), spd(1))),
    "eigh": (lambda s: (nt.linalg.eigvalsh(s), nt.linalg.eigh(s).eigenvectors.abs()), lambda: (spd(),)),
    "svd_qr": (lambda a: (nt.linalg.svdvals(a), nt.linalg.svd(a).U.abs(), nt.linalg.qr(a).R.abs()),
               lambda: (square(2),)),
    "norms_pinv": (lambda a: (nt.linalg.matrix_norm(a), nt.linalg.matrix_norm(a, "nuc"),
                              nt.linalg.vector_norm(a, 3, dim="col"), nt.linalg.pinv(a)), lambda: (square(3),)),
    "fft": (lambda x: (nt.fft.rfft(x, dim="seq", out_name="freq").abs(),
                       nt.fft.fftn(x, dim=("seq", "embed")).real,
                       nt.fft.irfft(nt.fft.rfft(x, dim="embed"), n=8, dim="embed")), lambda: (x3(),)),
    "complex": (lambda x, y: ((nt.complex(x, y) * nt.complex(y, x)).imag, nt.complex(x, y).angle(),
                              nt.view_as_real(nt.complex(x, y).exp()),
                              (nt.complex(x, y) @ nt.complex(y, x).rename(seq="s2").align_to("batch", "embed", "s2")).abs()),
                lambda: (x3(), x3(1))),
    "scatter": (lambda x, i, s, j, r: (x.scatter_add("embed", i, s), x.scatter("embed", i, s, reduce="multiply"),
                                       nt.scatter_reduce(x, "embed", i, s, reduce="amax"), x.index_add("seq", j, r)),
                lambda: (x3(), index_like(8, 2, 5, 3, names=X), rnd(2, 5, 3, names=X, seed=3),
                         index_like(5, 4, names=("seq",)), rnd(2, 4, 8, names=X, seed=4))),
    "statistics": (lambda x: (x.quantile(0.3, dim="embed"), x.nanmean("seq"), x.diff(dim="embed"),
                              nt.cosine_similarity(x, x.flip("seq"), dim="embed"), x.repeat_interleave(2, dim="seq")),
                   lambda: (x3(),)),
}


@pytest.mark.parametrize("name", MATRIX)
def test_linalg_fft_complex_scatter_statistics_match_the_cpu(name):
    fn, inputs = MATRIX[name]
    check(fn, *inputs(), tol={"rtol": 1e-3, "atol": 1e-4})


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8", "uint16", "uint32", "uint64", "complex64", "complex128"])
def test_every_dtype_computes_on_the_device(dtype):
    a = nt.tensor((np.arange(24).reshape(4, 6) % 7 + 1).astype(dtype), names=("row", "col"))
    b = nt.tensor((np.arange(6) % 3 + 1).astype(dtype), names=("col",))

    def fn(a, b):
        out = (a + b, a * b, a.sum("col"), a.max("row").values if a.dtype.kind != "c" else a.abs().max("row").values,
               a == b, a.to(nt.float64) if a.dtype.kind != "c" else a.real)
        if a.dtype.kind in "iu":
            out += (a & b, a | b, a ^ b, ~a, a << 1, a >> 1, a // b, a % b)
        return out

    check(fn, a, b, grad=False)


def test_sets_and_counting_match_the_cpu():
    t = index_like(6, 40, names=("tok",))
    x = rnd(40, names=("tok",))
    check(lambda t, x: (*nt.unique(t, return_inverse=True, return_counts=True), nt.nonzero(t > 3),
                        nt.searchsorted(nt.arange(0, 6, 2, device=t.device), t), nt.bincount(t, weights=x), x.histc(bins=7),
                        *nt.unique_consecutive(t, return_counts=True)), t, x)


# ----------------------------------------------------------------------------- nt.compile on the device


def test_compiled_functions_run_their_fused_kernels_on_the_device():
    def fn(x, w):
        h = x * w + 1.0
        h = F.gelu(h) * 2 - x.exp() + nt.where(h > 0, h.sigmoid(), h.tanh())
        return (h * h).sum("embed"), h.clip(-1, 1)

    compiled = nt.compile(fn)
    check(compiled, x3(), rnd(8, names=("embed",), seed=1), tol={"rtol": 1e-4, "atol": 1e-4})
    assert len([p for p in compiled._cache.values() if p is not None]) >= 2  # the CPU and the CUDA signatures
    (gpu,) = [p for key, p in compiled._cache.items() if "on cuda" in "; ".join(capture.describe_key(key))]
    fused = [n.op for n in gpu.graph.nodes if hasattr(n.op, "chain")]
    assert fused and all("cupy" in op.kernels and "cupy" in op.backward_kernels for op in fused)
    x = x3().to("cuda")
    got = compiled(x, rnd(8, names=("embed",), seed=1).to("cuda"))
    assert all(g.device.startswith("cuda") for g in got)


def test_a_compiled_chain_ending_in_a_reduction_is_one_kernel_on_the_device():
    fn = lambda x, w: (((x * w - 0.5).relu() * x).mean("embed"), ((x + w) * x).sum(("seq", "embed")),
                       ((x - w) * x).sum(x.names[0]))  # the leading dim
    compiled = nt.compile(fn)
    check(compiled, x3(), rnd(8, names=("embed",), seed=1), tol={"rtol": 1e-4, "atol": 1e-5})
    gpu = [p for key, p in compiled._cache.items() if "on cuda" in "; ".join(capture.describe_key(key))][0]
    assert [n.op.name for n in gpu.graph.nodes] == ["fused[mul+sub+relu+mul+mean]", "fused[add+mul+sum]",
                                                    "fused[sub+mul+sum]"]


def test_biases_reductions_over_any_dims_and_expm1_compile_on_the_device():
    def fn(x, w, b):
        return (F.gelu(F.linear(x, w, b)), (x * x - x).mean(x.names[1]),
                ((x.expm1() + 1.0) * x).sum((x.names[0], "embed")))

    compiled = nt.compile(fn)
    w, b = rnd(6, 8, names=("hidden", "embed"), seed=2), rnd(6, names=("hidden",), seed=3)
    check(compiled, x3(), w, b, tol={"rtol": 1e-4, "atol": 1e-5})
    gpu = [p for key, p in compiled._cache.items() if "on cuda" in "; ".join(capture.describe_key(key))][0]
    names = [n.op.name for n in gpu.graph.nodes]
    assert "fused[add+gelu]" in names and "fused[mul+sub+mean]" in names and "fused[expm1+add+mul+sum]" in names


@pytest.mark.parametrize("how", ["softmax", "log_softmax"])
@pytest.mark.parametrize("keys", [5, 300])
def test_scale_mask_and_softmax_compile_to_one_kernel_each_way_on_the_device(how, keys):
    fn = lambda s, mask: getattr(s * 0.3 + mask, how)("key")
    compiled = nt.compile(fn)
    s = rnd(2, 4, 6, keys, names=("batch", "head", "query", "key"))
    mask = nt.tensor(np.where(np.random.default_rng(0).random((6, keys)) < 0.3, -30.0, 0.0).astype("float32"),
                     names=("query", "key"))
    check(compiled, s, mask, tol={"rtol": 1e-4, "atol": 1e-5})
    gpu = [p for key, p in compiled._cache.items() if "on cuda" in "; ".join(capture.describe_key(key))][0]
    assert [n.op.name for n in gpu.graph.nodes] == [f"fused[mul+add+{how}]"]


def test_a_compiled_transformer_block_matches_the_eager_one_on_the_device():
    nt.manual_seed(0)
    block = nn.TransformerBlock("embed", 8, 2, 16).to("cuda")
    compiled = nt.compile(block)
    x = x3().to("cuda")
    assert_close(compiled(x).cpu(), block(x).cpu(), rtol=1e-4, atol=1e-5)
    (gpu,) = [p for p in compiled._cache.values() if p is not None]
    assert "add+layer_norm" in [n.op.name for n in gpu.graph.nodes]  # the residual add joins the second norm
    grads = nt.grad(compiled(x).square().sum(), list(block.parameters()))
    want = nt.grad(block(x).square().sum(), list(block.parameters()))
    for a, e in zip(grads, want):
        assert_close(a.cpu(), e.cpu(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("scale", [1.0, 3e6])
def test_sin_and_cos_chains_compile_to_one_kernel_on_the_device(dtype, scale):
    fn = lambda x, w: (x * w).sin() * 2 + x.cos()
    compiled = nt.compile(fn)
    x, w = rnd(2, 5, 8, names=X, dtype=dtype) * scale, rnd(8, names=("embed",), seed=1, dtype=dtype)
    # large arguments: the device's sin and cos against the CPU's, each exact to its last bits
    check(compiled, x, w, tol={"rtol": 1e-4, "atol": 1e-4 if scale == 1.0 else 2e-3})
    gpu = [p for key, p in compiled._cache.items() if "on cuda" in "; ".join(capture.describe_key(key))][0]
    fused = [n.op for n in gpu.graph.nodes if hasattr(n.op, "chain")]
    assert [op.name for op in fused] == ["fused[mul+sin+mul+cos+add]"]
    assert "cupy" in fused[0].kernels and "cupy" in fused[0].backward_kernels


def test_a_whole_compiled_training_step_matches_the_eager_steps_on_the_device():
    def make():
        nt.manual_seed(0)
        model = nn.Sequential(nn.Linear("embed", "hidden", 8, 16), nn.GELU(), nn.Linear("hidden", "out", 16, 3))
        model = model.to("cuda")
        opt = optim.AdamW(model.parameters(), lr=0.05)
        sched = optim.lr_scheduler.StepLR(opt, 1, 0.9)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            norm = optim.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            sched.step()
            return loss.detach(), norm

        return model, step

    eager, eager_step = make()
    model, step = make()
    step = nt.compile(step, fullgraph=True)
    x, y = x3().to("cuda"), rnd(2, 5, 3, names=("batch", "seq", "out"), seed=4).to("cuda")
    for _ in range(4):
        for got, want in zip(step(x, y), eager_step(x, y)):
            assert got.device.startswith("cuda")
            assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-6)
    for p, q in zip(model.parameters(), eager.parameters()):
        assert p.device.startswith("cuda")
        assert_close(p.cpu(), q.cpu(), rtol=1e-4, atol=1e-6)
    (program,) = [p for p in step._cache.values() if p is not None]
    assert [n.params["what"] for n in program.graph.nodes if n.effect()] == [
        "zero_grad", "backward", "clip_grad_norm_", "AdamW.step", "StepLR.step"]


def test_a_compiled_step_with_batchnorm_and_weight_clipping_writes_back_on_the_device():
    # write-back steps (running statistics, a clipped weight) copy into the device's arrays
    eager, eager_step = clipped_batchnorm_step("cuda")
    model, step = clipped_batchnorm_step("cuda")
    step = nt.compile(step, fullgraph=True)
    for k in range(4):
        x = rnd(8, 4, names=("b", "x"), seed=k).to("cuda")
        assert_close(step(x).cpu(), eager_step(x).cpu(), rtol=1e-5, atol=1e-6)
    for (key, a), (_, b) in zip(model.state_dict().items(), eager.state_dict().items()):
        assert a.device.startswith("cuda"), key
        assert_close(a.cpu(), b.cpu(), rtol=1e-5, atol=1e-6)
    (program,) = [p for p in step._cache.values() if p is not None]
    assert [n.params["what"] for n in program.graph.nodes if n.effect()][:4] == ["write"] * 4


def test_compiled_writes_into_op_results_and_factory_tensors_on_the_device():
    def fn(x, w):
        y = x * w  # an op's own result: written in place
        y[0] = 0.5
        rows = nt.zeros_like(x)  # a factory's tensor: copied once, then written in place
        for i in range(x.shape[0]):
            rows[i] = x[i] * 2.0 + i
        return y * x + rows

    compiled = nt.compile(fn)
    check(compiled, x3(), rnd(8, names=("embed",), seed=1))
    gpu = [p for key, p in compiled._cache.items() if "on cuda" in "; ".join(capture.describe_key(key))][0]
    writes = [n.params.get("in_place", False) for n in gpu.graph.nodes if n.op.name == "setitem"]
    assert writes == [True, False, True]


def test_a_profile_times_an_optimizer_step_and_clipping_on_the_device():
    lin = nn.Linear("feat", "cls", 64, 16).to("cuda")
    x = rnd(32, 64, names=("batch", "feat")).to("cuda")
    opt = optim.AdamW(lin.parameters(), lr=0.1)
    (lin(x) ** 2).sum().backward()
    with nt.profile() as prof:
        optim.clip_grad_norm_(lin.parameters(), 1e-3)
        opt.step()
        opt.zero_grad(set_to_none=False)
    params = lin.weight.array.nbytes + lin.bias.array.nbytes
    rows = {e.name: e for e in prof.events}
    # each parameter, grad and moment read once; the parameter and its two moments written
    assert rows["Optimizer.step#AdamW.step"].bytes == 7 * params
    assert rows["clip_grad_norm_"].bytes == 3 * params and rows["Optimizer.zero_grad#AdamW.zero_grad"].bytes == params
    assert all(e.duration_ns > 0 for e in prof.events)
    assert float(lin.weight.grad.abs().sum().item()) == 0.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_powers_erf_and_gelu_on_the_device_equal_the_cpus(dtype):
    fn = lambda x, y: ((x * 0.5).abs() ** (y * 0.3) + (x * 1.0) ** 2.5 + F.gelu(x * y) + (x * y).erf(),
                       2.0 ** (y * 0.5) - F.gelu(x, approximate="tanh"))
    x = rnd(64, 300, names=("a", "b"), dtype=dtype)
    y = rnd(300, names=("b",), seed=1, dtype=dtype)
    with np.errstate(invalid="ignore"):  # NumPy's NaN for a negative base to 2.5, as CUDA's pow gives
        want = fn(x, y)
    got = nt.compile(fn)(x.to("cuda"), y.to("cuda"))
    for g, e in zip(got, want):
        assert_close(g.cpu(), e, **(F32 if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}))
