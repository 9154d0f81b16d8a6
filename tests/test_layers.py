"""nn layers: output names, values against NumPy, gradients (float64) on inputs and parameters,
errors, repr, and a tiny model that trains."""

import math
from contextlib import contextmanager

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import nn
from namedtensor.testing import assert_close, gradcheck

pytestmark = pytest.mark.usefixtures("backend")

F64 = nt.float64


def arr(t):
    return t.detach().numpy()


@contextmanager
def swapped(module, **tensors):
    """Run ``module`` with some parameters replaced by plain tensors (for gradcheck on parameters)."""
    saved = {k: module._parameters[k] for k in tensors}
    module._parameters.update(tensors)
    try:
        yield module
    finally:
        module._parameters.update(saved)


def check_param_grads(layer, x):
    """gradcheck of ``layer(x)`` in x and in every parameter of the layer."""
    names = [n for n, _ in layer.named_parameters()]

    def fn(x, *params):
        with swapped(layer, **dict(zip(names, params))):
            return layer(x)

    x = x.detach().requires_grad_(x.dtype.kind == "f")
    params = [p.detach().requires_grad_() for p in layer.parameters()]
    assert gradcheck(fn, x, *params)


# ----------------------------------------------------------------------------- Linear
def test_linear_names_values_and_parameters():
    lin = nn.Linear("embed", "hidden", 4, 3)
    assert lin.weight.names == ("hidden", "embed") and lin.weight.shape == (3, 4)
    assert lin.bias.names == ("hidden",) and lin.weight.dtype is nt.float32
    x = nt.randn(2, 4, 5, names=("batch", "embed", "seq"))  # the read dim is not last
    y = lin(x)
    assert y.names == ("batch", "hidden", "seq") and y.shape == (2, 3, 5)
    ref = np.einsum("bes,he->bhs", arr(x), arr(lin.weight)) + arr(lin.bias)[None, :, None]
    assert np.allclose(arr(y), ref, atol=1e-5)
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]


def test_linear_same_dim_keeps_the_name():
    lin = nn.Linear("embed", "embed", 4, 6, dtype=F64)
    assert lin.weight.names == ("embed_out", "embed") and lin.bias.names == ("embed_out",)
    x = nt.randn(3, 4, names=("seq", "embed"), dtype=F64)
    y = lin(x)
    assert y.names == ("seq", "embed") and y.shape == (3, 6) and y.dtype is F64
    assert np.allclose(arr(y), arr(x) @ arr(lin.weight).T + arr(lin.bias))


def test_linear_without_bias_and_init_bounds():
    lin = nn.Linear("embed", "hidden", 50, 40, bias=False)
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]
    w = arr(lin.weight)
    bound = 1 / math.sqrt(50)  # kaiming_uniform(a=sqrt(5)) with fan-in 50, as nn.Linear
    assert w.min() >= -bound and w.max() <= bound and w.max() > 0.9 * bound
    b = arr(nn.Linear("embed", "hidden", 50, 40).bias)
    assert b.min() >= -bound and b.max() <= bound
    x = nt.randn(2, 50, names=("batch", "embed"))
    assert np.allclose(arr(lin(x)), arr(x) @ w.T, atol=1e-5)


def test_linear_gradcheck():
    nt.manual_seed(1)
    check_param_grads(nn.Linear("embed", "hidden", 3, 2, dtype=F64), nt.randn(2, 3, 2, names=("batch", "embed", "seq"),
                                                                             dtype=F64))
    check_param_grads(nn.Linear("embed", "embed", 3, 3, dtype=F64), nt.randn(2, 3, names=("batch", "embed"),
                                                                           dtype=F64))


def test_linear_errors():
    lin = nn.Linear("embed", "hidden", 4, 3)
    with pytest.raises(nt.NamesError, match="'embed'"):
        lin(nt.randn(2, 4, names=("batch", "feat")))
    with pytest.raises(ValueError, match=r"linear: the input's dim 1 \('embed'\) has size 5.*expects 4"):
        lin(nt.randn(2, 5, names=("batch", "embed")))


def test_linear_cast_with_module_to():
    lin = nn.Linear("embed", "hidden", 3, 2)
    x = nt.randn(4, 3, names=("batch", "embed"), dtype=F64)
    weight = lin.weight
    lin.double()
    assert lin.weight is weight and weight.dtype is F64 and lin.bias.dtype is F64
    y = lin(x)
    assert y.dtype is F64 and y.names == ("batch", "hidden")
    assert np.allclose(arr(y), arr(x) @ arr(weight).T + arr(lin.bias))


# ----------------------------------------------------------------------------- Embedding
def test_embedding_names_values_and_grad():
    emb = nn.Embedding(7, 3, "embed", dtype=F64)
    assert emb.weight.names == ("vocab", "embed") and emb.weight.shape == (7, 3)
    idx = nt.tensor(np.array([[0, 6, 2], [2, 2, 5]]), names=("batch", "seq"))
    y = emb(idx)
    assert y.names == ("batch", "seq", "embed") and y.shape == (2, 3, 3)
    assert np.array_equal(arr(y), arr(emb.weight)[np.array([[0, 6, 2], [2, 2, 5]])])
    w = arr(nn.Embedding(200, 50, "embed").weight)
    assert abs(w.std() - 1.0) < 0.05  # N(0, 1), as PyTorch
    check_param_grads(emb, idx)
    y.sum().backward()
    assert emb.weight.grad.names == ("vocab", "embed")
    assert arr(emb.weight.grad)[:, 0].tolist() == [1, 0, 3, 0, 0, 1, 1]  # repeated indices accumulate


def test_embedding_custom_vocab_name_and_errors():
    emb = nn.Embedding(5, 2, "hidden", vocab_dim="token")
    assert emb.weight.names == ("token", "hidden")
    assert emb(nt.tensor(np.array([1, 4]), names=("seq",))).names == ("seq", "hidden")
    with pytest.raises(IndexError, match=r"index 5 is out of range.*indices must be in \[0, 4\]"):
        emb(nt.tensor(np.array([1, 5]), names=("seq",)))
    with pytest.raises(nt.NamesError):
        nn.Embedding(5, 2, "vocab")  # the weight would be named ('vocab', 'vocab')


# ----------------------------------------------------------------------------- normalisation
def np_layer_norm(x, axes, w, b, eps):
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def test_layer_norm_over_a_named_dim_anywhere():
    ln = nn.LayerNorm("embed", 4, dtype=F64)
    assert ln.weight.names == ("embed",) and ln.bias.names == ("embed",)
    with nt.no_grad():
        ln.weight.copy_(nt.tensor([1.0, 2.0, 0.5, -1.0], names=("embed",), dtype=F64))
        ln.bias.copy_(nt.tensor([0.0, 0.1, 0.2, 0.3], names=("embed",), dtype=F64))
    x = nt.randn(4, 3, names=("embed", "batch"), dtype=F64)  # normalised dim first
    y = ln(x)
    assert y.names == ("embed", "batch")
    ref = np_layer_norm(arr(x), 0, arr(ln.weight)[:, None], arr(ln.bias)[:, None], 1e-5)
    assert np.allclose(arr(y), ref)
    check_param_grads(ln, nt.randn(4, 2, names=("embed", "batch"), dtype=F64))


def test_layer_norm_over_several_dims_and_without_affine():
    ln = nn.LayerNorm(("head", "head_dim"), (2, 3), dtype=F64)
    assert ln.weight.names == ("head", "head_dim") and ln.weight.shape == (2, 3)
    x = nt.randn(2, 2, 3, names=("batch", "head", "head_dim"), dtype=F64)
    assert np.allclose(arr(ln(x)), np_layer_norm(arr(x), (1, 2), 1.0, 0.0, 1e-5))
    check_param_grads(ln, x)
    plain = nn.LayerNorm({"embed": 4}, elementwise_affine=False, eps=1e-3)
    assert plain.weight is None and plain.bias is None and list(plain.parameters()) == []
    x = nt.randn(3, 4, names=("batch", "embed"))
    assert np.allclose(arr(plain(x)), np_layer_norm(arr(x), 1, 1.0, 0.0, 1e-3), atol=1e-5)
    assert nn.LayerNorm("embed", 4, bias=False).bias is None


def test_rms_norm():
    rms = nn.RMSNorm("embed", 3, dtype=F64)
    assert rms.weight.names == ("embed",) and rms.eps == 1e-6
    with nt.no_grad():
        rms.weight.copy_(nt.tensor([1.0, -2.0, 0.5], names=("embed",), dtype=F64))
    x = nt.randn(3, 2, names=("embed", "seq"), dtype=F64)
    y = rms(x)
    assert y.names == ("embed", "seq")
    xa = arr(x)
    ref = xa / np.sqrt((xa ** 2).mean(axis=0, keepdims=True) + 1e-6) * arr(rms.weight)[:, None]
    assert np.allclose(arr(y), ref)
    check_param_grads(rms, x)
    assert list(nn.RMSNorm("embed", 3, elementwise_affine=False).parameters()) == []


def test_norm_errors():
    with pytest.raises(ValueError, match=r"LayerNorm: 2 dims \('a', 'b'\) but 1 sizes"):
        nn.LayerNorm(("a", "b"), 4)
    with pytest.raises(TypeError, match="give the sizes"):
        nn.RMSNorm("embed")
    with pytest.raises(nt.NamesError, match="by name"):
        nn.LayerNorm(-1, 4)
    with pytest.raises(nt.NamesError):
        nn.LayerNorm(("a", "a"), (2, 2))
    with pytest.raises(nt.NamesError, match="'embed'"):
        nn.LayerNorm("embed", 4)(nt.randn(2, 4, names=("batch", "feat")))


# ----------------------------------------------------------------------------- dropout
def test_dropout_train_and_eval():
    drop = nn.Dropout(0.25)
    x = nt.ones(40, 50, names=("batch", "embed"))
    y = drop(x)
    assert y.names == ("batch", "embed")
    v = arr(y)
    kept = v != 0
    assert np.allclose(v[kept], 1 / 0.75)
    assert abs(kept.mean() - 0.75) < 0.05
    drop.eval()
    assert np.array_equal(arr(drop(x)), arr(x))
    assert np.array_equal(arr(nn.Dropout(0.0)(x)), arr(x))
    nt.manual_seed(5)
    a = arr(nn.Dropout(0.5)(x))
    nt.manual_seed(5)
    assert np.array_equal(arr(nn.Dropout(0.5)(x)), a)
    with pytest.raises(ValueError, match=r"Dropout: p is the probability of zeroing an element, a number in "
                                         r"\[0, 1\); got 1"):
        nn.Dropout(1)


# ----------------------------------------------------------------------------- activations
def np_gelu(x):
    from math import erf

    return x * 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))


@pytest.mark.parametrize("layer, ref", [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.GELU(), np_gelu),
    (nn.GELU(approximate="tanh"), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Softmax("seq"), lambda x: np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)),
    (nn.LogSoftmax("seq"), lambda x: x - np.log(np.exp(x).sum(axis=0, keepdims=True))),
    (nn.Identity(3, k=4), lambda x: x),
])
def test_activations(layer, ref):
    x = nt.randn(4, 3, names=("seq", "batch"), dtype=F64)
    y = layer(x)
    assert y.names == ("seq", "batch")
    assert np.allclose(arr(y), ref(arr(x)))
    if not isinstance(layer, nn.Identity):
        assert gradcheck(layer, x.detach().requires_grad_())


def test_activation_errors():
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        nn.GELU("fast")
    with pytest.raises(nt.NamesError, match="'seq'"):
        nn.Softmax("seq")(nt.randn(2, names=("batch",)))


# ----------------------------------------------------------------------------- repr, state dicts
def test_layer_reprs():
    model = nn.Sequential(nn.Embedding(10, 8, "embed"), nn.LayerNorm("embed", 8), nn.Linear("embed", "hidden", 8, 16),
                          nn.GELU(), nn.Dropout(0.1), nn.Linear("hidden", "embed", 16, 8, bias=False),
                          nn.RMSNorm("embed", 8), nn.Softmax("embed"), nn.Identity())
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Embedding({'vocab': 10} -> {'embed': 8})\n"
        "  (1): LayerNorm({'embed': 8}, eps=1e-05, elementwise_affine=True)\n"
        "  (2): Linear({'embed': 8} -> {'hidden': 16}, bias=True)\n"
        "  (3): GELU(approximate='none')\n"
        "  (4): Dropout(p=0.1)\n"
        "  (5): Linear({'hidden': 16} -> {'embed': 8}, bias=False)\n"
        "  (6): RMSNorm({'embed': 8}, eps=1e-06, elementwise_affine=True)\n"
        "  (7): Softmax(dim='embed')\n"
        "  (8): Identity()\n"
        ")"
    )


def test_layers_state_dict_round_trip_with_names():
    def make():
        return nn.Sequential(nn.Linear("embed", "hidden", 4, 6), nn.LayerNorm("hidden", 6),
                             nn.Linear("hidden", "embed", 6, 4))

    a, b = make(), make()
    sd = a.state_dict()
    assert {k: v.names for k, v in sd.items()} == {
        "0.weight": ("hidden", "embed"), "0.bias": ("hidden",), "1.weight": ("hidden",), "1.bias": ("hidden",),
        "2.weight": ("embed", "hidden"), "2.bias": ("embed",)}
    b.load_state_dict(sd)
    x = nt.randn(2, 4, names=("batch", "embed"))
    with nt.no_grad():
        assert_close(b(x), a(x))
    wrong = nn.Sequential(nn.Linear("embed", "hidden", 4, 5), nn.LayerNorm("hidden", 5),
                          nn.Linear("hidden", "out", 5, 4))
    with pytest.raises(nn.StateDictError, match="7 problems") as info:
        wrong.load_state_dict(sd)
    msg = str(info.value)
    assert "'0.weight': sizes differ: state dict {'hidden': 6, 'embed': 4} vs model {'hidden': 5, 'embed': 4}" in msg
    assert "'2.weight': names differ: state dict ('embed', 'hidden') vs model ('out', 'hidden')" in msg


# ----------------------------------------------------------------------------- training
def test_tiny_model_trains_with_gradient_descent():
    """Linear-GELU-Linear fits a fixed random teacher: MSE falls from ~0.6 below 0.03 in 150 steps."""
    nt.manual_seed(0)
    teacher = nn.Sequential(nn.Linear("feat", "hidden", 4, 8), nn.Tanh(), nn.Linear("hidden", "out", 8, 2))
    model = nn.Sequential(nn.Linear("feat", "hidden", 4, 16), nn.GELU(), nn.Linear("hidden", "out", 16, 2))
    x = nt.randn(64, 4, names=("batch", "feat"))
    with nt.no_grad():
        target = teacher(x)
    params = list(model.parameters())

    def loss_fn():
        return ((model(x) - target) ** 2).mean()

    first = loss_fn().item()
    for _ in range(150):
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        with nt.no_grad():
            for p in params:
                p.sub_(p.grad * 0.2)
    final = loss_fn().item()
    assert model[0].weight.grad.names == ("hidden", "feat")
    assert first > 0.1 and final < 0.03, (first, final)
