"""nn layers called as in PyTorch (sizes first, dims by position) and with unnamed dims: what PyTorch's
call means (values and gradients against NumPy, and against PyTorch itself where it is installed, with
PyTorch's state dicts loaded as they are), the names of the outputs (unnamed stays unnamed, a named
input keeps its other names), and a TypeError showing both signatures for a call that fits neither."""

import math

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import nn
from namedtensor.testing import gradcheck
from test_layers import check_param_grads, np_gelu, np_layer_norm
from test_transformer import check_module

pytestmark = pytest.mark.usefixtures("backend")

F64 = nt.float64


def arr(t):
    return t.detach().numpy()


def torch_state(module):
    """A ``torch.nn.Module``'s state dict as unnamed namedtensor tensors, as another tool would save it."""
    return {k: nt.tensor(v.detach().numpy()) for k, v in module.state_dict().items()}


def from_torch(t):
    return nt.tensor(t.detach().numpy())


# ----------------------------------------------------------------------------- Linear
def test_unnamed_linear_from_the_issue():
    """``nn.Linear(None, None, 4, 8)`` crashed in its constructor; it is the named form with unnamed dims."""
    lin = nn.Linear(None, None, 4, 8, dtype=F64)
    assert lin.weight.names == (None, None) and lin.weight.shape == (8, 4) and lin.bias.names == (None,)
    x = nt.randn(2, 3, 4, dtype=F64)
    y = lin(x)
    assert y.names == (None, None, None) and y.shape == (2, 3, 8)
    assert np.allclose(arr(y), arr(x) @ arr(lin.weight).T + arr(lin.bias))
    check_param_grads(lin, x)


@pytest.mark.parametrize("make", [lambda: nn.Linear(4, 8, dtype=F64), lambda: nn.Linear(None, None, 4, 8, dtype=F64),
                                  lambda: nn.Linear(in_features=4, out_features=8, dtype=F64)])
def test_pytorch_linear_acts_on_the_last_dim_whatever_its_name(make):
    lin = make()
    assert lin.weight.names == (None, None) and (lin.in_features, lin.out_features) == (4, 8)
    assert list(lin.state_dict()) == ["weight", "bias"]
    x = nt.randn(2, 3, 4, names=("batch", "seq", "embed"), dtype=F64)
    y = lin(x)
    assert y.names == ("batch", "seq", None)  # the other names stay, the new dim is unnamed
    assert np.allclose(arr(y), arr(x) @ arr(lin.weight).T + arr(lin.bias))
    check_param_grads(lin, x)
    assert repr(lin) == "Linear(in_features=4, out_features=8, bias=True)"


def test_pytorch_linear_options_and_partly_named_forms():
    lin = nn.Linear(5, 3, False, None, F64)  # PyTorch's positional order: bias, device, dtype
    assert lin.bias is None and lin.weight.dtype is F64 and list(lin.state_dict()) == ["weight"]
    w = arr(nn.Linear(50, 40).weight)
    assert np.abs(w).max() <= 1 / math.sqrt(50) < 1.1 * np.abs(w).max()  # PyTorch's bound, 1/sqrt(in)
    into = nn.Linear(None, "hidden", 4, 3)  # reads the last dim, writes a named one
    assert into.weight.names == ("hidden", None)
    assert into(nt.randn(2, 4, names=("batch", "embed"))).names == ("batch", "hidden")
    out_of = nn.Linear("embed", None, 4, 3)
    assert out_of(nt.randn(4, 2, names=("embed", "batch"))).names == (None, "batch")


@pytest.mark.parametrize("call, problem", [
    (lambda: nn.Linear("embed", 8), "missing a required argument: 'in_size'"),
    (lambda: nn.Linear(4, "hidden"), "out_features must be an int, got 'hidden'"),
    (lambda: nn.Linear(4, 8, "cpu"), "bias must be a bool, got 'cpu'"),
    (lambda: nn.Linear(1.5, "hidden", 4, 8), "in_dim must be a dim name (str) or None, got 1.5"),
    (lambda: nn.Linear("embed", "hidden", 4, 8.0), "out_size must be an int, got 8.0"),
])
def test_linear_call_that_fits_neither_signature_shows_both(call, problem):
    with pytest.raises(TypeError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"Linear: {problem}")
    assert "PyTorch's signature Linear(in_features, out_features, bias=True, device=None, dtype=None)" in msg
    assert "the named one Linear(in_dim, out_dim, in_size, out_size, bias=True, dtype=nt.float32, device=None)" in msg


# ----------------------------------------------------------------------------- Embedding
def test_pytorch_embedding_unnamed_weight_and_output():
    emb = nn.Embedding(7, 3, dtype=F64)
    assert emb.weight.names == (None, None) and emb.weight.shape == (7, 3)
    assert (emb.num_embeddings, emb.embedding_dim, emb.padding_idx) == (7, 3, None)
    idx = nt.tensor(np.array([[0, 6, 2], [2, 2, 5]]))
    y = emb(idx)
    assert y.names == (None, None, None)
    assert np.array_equal(arr(y), arr(emb.weight)[np.array([[0, 6, 2], [2, 2, 5]])])
    assert emb(idx.refine_names("batch", "seq")).names == ("batch", "seq", None)
    check_param_grads(emb, idx)
    assert repr(emb) == "Embedding(7, 3)"


@pytest.mark.parametrize("make", [lambda: nn.Embedding(6, 2, padding_idx=1, dtype=F64),
                                  lambda: nn.Embedding(6, 2, -5, dtype=F64),
                                  lambda: nn.Embedding(6, 2, "embed", padding_idx=1, dtype=F64)])
def test_embedding_padding_idx_row_is_zero_and_gets_no_gradient(make):
    emb = make()
    assert emb.padding_idx == 1 and not arr(emb.weight)[1].any() and arr(emb.weight)[0].any()
    with nt.no_grad():
        emb.weight[1] = 3.0  # its value is still looked up, as in PyTorch
    idx = nt.tensor(np.array([1, 2, 1, 4]))
    y = emb(idx)
    assert np.array_equal(arr(y), arr(emb.weight)[[1, 2, 1, 4]])
    y.sum().backward()
    assert arr(emb.weight.grad)[:, 0].tolist() == [0, 0, 1, 0, 1, 0]  # PyTorch's gradient, not the true one


def test_embedding_pytorch_options_it_lacks_raise():
    for option, value in (("max_norm", 1.0), ("scale_grad_by_freq", True), ("sparse", True), ("_freeze", True)):
        with pytest.raises(NotImplementedError, match=f"Embedding: {option}={value!r} is not supported"):
            nn.Embedding(5, 2, **{option: value})
    assert nn.Embedding(5, 2, norm_type=1.0).weight.shape == (5, 2)  # PyTorch ignores it without max_norm
    with pytest.raises(ValueError, match=r"padding_idx=5 must be within the 5 embeddings \(\[-5, 4\]\)"):
        nn.Embedding(5, 2, 5)
    with pytest.raises(TypeError, match=r"Embedding: num_embeddings must be an int, got 'vocab'.*Embedding\(num, "
                                        r"size, out_dim, vocab_dim='vocab', \*, padding_idx=None"):
        nn.Embedding("vocab", 5, 2)


# ----------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize("shape", [4, (4,), (3, 4), [3, 4]])
def test_pytorch_layer_norm_over_the_last_dims(shape):
    ln = nn.LayerNorm(shape, dtype=F64)
    sizes = (shape,) if isinstance(shape, int) else tuple(shape)
    assert ln.weight.names == (None,) * len(sizes) and ln.normalized_shape == sizes
    assert list(ln.state_dict()) == ["weight", "bias"]
    with nt.no_grad():
        ln.weight.copy_(nt.tensor(np.random.default_rng(0).uniform(0.5, 2, sizes), dtype=F64))
        ln.bias.copy_(nt.tensor(np.random.default_rng(1).uniform(-1, 1, sizes), dtype=F64))
    x = nt.randn(2, 3, 4, names=("batch", "seq", "embed"), dtype=F64)
    y = ln(x)
    assert y.names == ("batch", "seq", "embed")
    axes = tuple(range(3 - len(sizes), 3))
    assert np.allclose(arr(y), np_layer_norm(arr(x), axes, arr(ln.weight), arr(ln.bias), 1e-5))
    check_param_grads(ln, x.rename(None))
    assert repr(ln) == f"LayerNorm({sizes}, eps=1e-05, elementwise_affine=True)"


def test_layer_norm_unnamed_dims_options_and_errors():
    assert nn.LayerNorm(None, 4).weight.names == (None,)
    plain = nn.LayerNorm(4, 1e-3, False, dtype=F64)  # PyTorch's positional eps, elementwise_affine
    assert plain.weight is None and plain.bias is None and plain.eps == 1e-3
    x = nt.randn(3, 4, dtype=F64)
    assert np.allclose(arr(plain(x)), np_layer_norm(arr(x), 1, 1.0, 0.0, 1e-3))
    assert nn.LayerNorm(4, bias=False).bias is None
    with pytest.raises(ValueError, match=r"LayerNorm: normalised over the last dims of sizes \(4,\), but the input "
                                         r"has shape \(3, 5\)"):
        plain(nt.randn(3, 5, dtype=F64))
    with pytest.raises(TypeError, match=r"LayerNorm: dims\[1\] must be a dim name \(str\).*LayerNorm\("
                                        r"normalized_shape, eps=1e-05"):
        nn.LayerNorm(("embed", 4), (4, 4))


@pytest.mark.parametrize("dtype", [nt.float32, F64])
def test_pytorch_rms_norm_default_eps_is_the_machine_epsilon(dtype):
    rms = nn.RMSNorm((2, 3), dtype=dtype)
    assert rms.eps is None and rms.weight.names == (None, None)
    x = nt.tensor(np.full((2, 2, 3), 1e-4), dtype=dtype)  # small enough for eps to show
    a = arr(x).astype(np.float64)
    eps = np.finfo(np.dtype(dtype.name)).eps
    ref = a / np.sqrt((a ** 2).mean(axis=(1, 2), keepdims=True) + eps)
    np.testing.assert_allclose(arr(rms(x)), ref, rtol=1e-5)
    assert repr(rms) == "RMSNorm((2, 3), eps=None, elementwise_affine=True)"
    named = nn.RMSNorm("embed", 3, eps=None, dtype=F64)  # the named form takes eps=None too
    assert named(nt.randn(2, 3, names=("batch", "embed"), dtype=F64)).names == ("batch", "embed")
    check_param_grads(nn.RMSNorm(3, dtype=F64), nt.randn(2, 3, dtype=F64))


def test_norm_negative_size_is_a_position_not_a_size():
    with pytest.raises(nt.NamesError, match=r"RMSNorm: normalized_shape \(4, -1\) has a negative size.*give them "
                                            r"by name: RMSNorm\('embed', 16\)"):
        nn.RMSNorm((4, -1))


# ----------------------------------------------------------------------------- dropout, activations
def test_dropout_and_activations_on_unnamed_dims():
    x = nt.randn(4, 3, dtype=F64)
    layers = [(nn.ReLU(), lambda a: np.maximum(a, 0)), (nn.GELU(), np_gelu), (nn.SiLU(), lambda a: a / (1 + np.exp(-a))),
              (nn.GELU("tanh"), lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))),
              (nn.Tanh(), np.tanh), (nn.Sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
              (nn.Softmax(dim=-1), lambda a: np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True)),
              (nn.LogSoftmax(0), lambda a: a - np.log(np.exp(a).sum(axis=0, keepdims=True))),
              (nn.Identity(), lambda a: a)]
    for layer, ref in layers:
        y = layer(x)
        assert y.names == (None, None)
        assert np.allclose(arr(y), ref(arr(x)))
        assert gradcheck(layer, x.detach().requires_grad_())
    drop = nn.Dropout(0.5, False)
    assert drop(x).names == (None, None)
    drop.eval()
    assert drop(x) is x


def test_pytorch_options_that_would_mean_something_else_raise():
    for make in (lambda: nn.ReLU(inplace=True), lambda: nn.SiLU(True), lambda: nn.Dropout(0.1, inplace=True)):
        with pytest.raises(NotImplementedError, match="inplace=True is not supported"):
            make()
    for layer in (nn.Softmax, nn.LogSoftmax):
        with pytest.raises(TypeError, match=r"give the dim to normalise along.*dim=None .* is not supported"):
            layer()


# ----------------------------------------------------------------------------- MultiheadAttention
def np_softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_mha(q, k, v, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o, heads, add=0.0):
    """Batch-first ``(N, L, E)`` multi-head attention of PyTorch's layer, weights ``(N, H, L, S)``."""
    def split(x, w, b):
        n, s, _ = x.shape
        return (x @ w.T + b).reshape(n, s, heads, -1).transpose(0, 2, 1, 3)

    qh, kh, vh = split(q, w_q, b_q), split(k, w_k, b_k), split(v, w_v, b_v)
    p = np_softmax(qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(qh.shape[-1]) + add)
    out = (p @ vh).transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], -1)
    return out @ w_o.T + b_o, p


def mha_params(mha):
    e = mha.embed_dim
    w = [arr(mha.in_proj_weight)[i * e:(i + 1) * e] for i in range(3)]
    b = [arr(mha.in_proj_bias)[i * e:(i + 1) * e] for i in range(3)]
    return (*w, *b, arr(mha.out_proj.weight), arr(mha.out_proj.bias))


def test_pytorch_mha_parameters_are_pytorchs():
    mha = nn.MultiheadAttention(8, 2)
    assert [(k, v.names, v.shape) for k, v in mha.state_dict().items()] == [
        ("in_proj_weight", (None, None), (24, 8)), ("in_proj_bias", (None,), (24,)),
        ("out_proj.weight", (None, None), (8, 8)), ("out_proj.bias", (None,), (8,))]
    assert mha.q_proj_weight is None and (mha.head_dim, mha.batch_first, mha.kdim) == (4, False, 8)
    assert not arr(mha.in_proj_bias).any() and not arr(mha.out_proj.bias).any()
    bound = math.sqrt(6 / (8 + 24))  # xavier_uniform_ over the packed (3E, E) weight, as PyTorch
    assert np.abs(arr(mha.in_proj_weight)).max() <= bound
    cross = nn.MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False)
    assert [(k, v.shape) for k, v in cross.state_dict().items()] == [
        ("q_proj_weight", (8, 8)), ("k_proj_weight", (8, 3)), ("v_proj_weight", (8, 5)), ("out_proj.weight", (8, 8))]
    assert cross.in_proj_weight is None and cross.in_proj_bias is None


@pytest.mark.parametrize("batch_first", [False, True])
def test_pytorch_mha_layout_masks_and_weights(batch_first, rng):
    mha = nn.MultiheadAttention(4, 2, batch_first=batch_first, dtype=F64)
    with nt.no_grad():
        for p in mha.parameters():
            p.copy_(nt.tensor(rng.uniform(-1, 1, p.shape), dtype=F64))
    q, kv = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))  # (N, L, E), (N, S, E)
    layout = (lambda a: a) if batch_first else (lambda a: a.transpose(1, 0, 2))
    pad = np.array([[False] * 5, [False, False, False, True, True]])  # True: a key NOT attended
    additive = rng.standard_normal((3, 5))
    query = nt.tensor(layout(q), names=("batch", "seq", "embed") if batch_first else ("seq", "batch", "embed"))
    out, weights = mha(query, nt.tensor(layout(kv)), nt.tensor(layout(kv)), key_padding_mask=nt.tensor(pad),
                       attn_mask=nt.tensor(additive))
    want, probs = np_mha(q, kv, kv, *mha_params(mha), 2, additive + np.where(pad, -np.inf, 0)[:, None, None, :])
    assert out.names == query.names and weights.names == (None, None, None)
    np.testing.assert_allclose(arr(out), layout(want), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(arr(weights), probs.mean(axis=1), rtol=1e-10, atol=1e-12)
    out2, none = mha(query, nt.tensor(layout(kv)), nt.tensor(layout(kv)), need_weights=False)
    assert none is None and out2.names == query.names
    _, per_head = mha(query, query, query, average_attn_weights=False,
                      attn_mask=nt.tensor(np.triu(np.ones((4, 3, 3), bool), 1)), is_causal=True)
    _, causal = np_mha(q, q, q, *mha_params(mha), 2, np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, 0))
    assert per_head.shape == (2, 2, 3, 3)
    np.testing.assert_allclose(arr(per_head), causal, rtol=1e-10, atol=1e-12)


def test_pytorch_mha_unbatched_and_gradients(rng):
    mha = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, dtype=F64)
    x = nt.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    k = nt.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    v = nt.tensor(rng.standard_normal((5, 2)), requires_grad=True)
    out, weights = mha(x, k, v)
    assert out.shape == (3, 4) and weights.shape == (3, 5)
    pad = nt.tensor(np.array([False, False, True, False, True]))
    check_module(mha, lambda x, k, v: mha(x, k, v, key_padding_mask=pad)[0], x, k, v)


def test_pytorch_mha_errors():
    mha = nn.MultiheadAttention(8, 2)
    x = nt.randn(3, 2, 8)
    with pytest.raises(ValueError, match="is_causal=True is a hint that attn_mask is a causal mask, so it needs "
                                         "attn_mask"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(nt.NamesError, match=r"PyTorch's attn_mask is read by position, but it has names "
                                            r"\('seq', 'key'\)"):
        mha(x, x, x, attn_mask=nt.zeros(3, 3, names=("seq", "key")))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(3, 2\); it must be \(L, S\) = \(3, 3\) or "
                                         r"\(N \* num_heads, L, S\) = \(4, 3, 3\)"):
        mha(x, x, x, attn_mask=nt.zeros(3, 2))
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(3,\); it must be \(N, S\) = \(2, 3\)"):
        mha(x, x, x, key_padding_mask=nt.zeros(3, dtype=nt.bool_))
    with pytest.raises(TypeError, match="attn_mask must be bool or floating point"):
        mha(x, x, x, attn_mask=nt.zeros(3, 3, dtype=nt.int64))
    with pytest.raises(ValueError, match=r"query, key and value must be \(L, N, E\) \(or \(L, E\) unbatched\)"):
        mha(x, nt.randn(3, 1, 8), nt.randn(3, 1, 8))
    with pytest.raises(NotImplementedError, match="MultiheadAttention: add_bias_kv=True is not supported"):
        nn.MultiheadAttention(8, 2, add_bias_kv=True)
    with pytest.raises(ValueError, match=r"num_heads \(3\) must be a positive divisor of embed_dim \(8\)"):
        nn.MultiheadAttention(8, 3)
    with pytest.raises(TypeError, match=r"MultiheadAttention: missing a required argument: 'num_heads'.*"
                                        r"MultiheadAttention\(embed_dim, num_heads, dropout=0.0"):
        nn.MultiheadAttention("embed", 8)


# ----------------------------------------------------------------------------- dim=None: MHA, MLP, block
def unnamed_copy(named, positional):
    """Load ``named``'s parameters into ``positional``, the same layer built with dim=None (unnamed weights)."""
    positional.load_state_dict({k: v.rename(None) for k, v in named.state_dict().items()})


def test_positional_mha_is_the_named_one_by_position(rng):
    named = nn.MultiheadAttention("embed", 4, 2, dtype=F64)
    positional = nn.MultiheadAttention(None, 4, 2, dtype=F64)
    assert all(p.names == (None,) * p.ndim for p in positional.parameters())
    unnamed_copy(named, positional)
    x = nt.tensor(rng.standard_normal((2, 3, 4)))
    pad = np.array([[True] * 3, [True, True, False]])  # True: may attend, as in the named layer
    want, want_w = named(x.refine_names("batch", "seq", "embed"), is_causal=True, need_weights=True,
                         mask=nt.tensor(pad, names=("batch", "key")))
    out, weights = positional(x, is_causal=True, need_weights=True, mask=nt.tensor(pad[:, None, None, :]))
    assert out.names == (None, None, None) and weights.names == (None,) * 4
    np.testing.assert_allclose(arr(out), arr(want), rtol=1e-12)
    np.testing.assert_allclose(arr(weights), arr(want_w), rtol=1e-12)
    assert positional(x.refine_names("batch", "seq", "embed")).names == ("batch", "seq", "embed")
    check_module(positional, positional, x.requires_grad_())
    with pytest.raises(nt.NamesError, match=r"lines the mask up with the weights \(..., head, seq, key\) by position"):
        positional(x, mask=nt.tensor(pad, names=("batch", "key")))
    with pytest.raises(TypeError, match="with dim=None the layer finds its dims by position, so key, seq cannot be "
                                        "given"):
        nn.MultiheadAttention(None, 4, 2, seq="s", key="k")


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_positional_block_and_mlp_are_the_named_ones_by_position(norm, rng):
    named = nn.TransformerBlock("embed", 4, 2, 6, norm=norm, dtype=F64)
    positional = nn.TransformerBlock(None, 4, 2, 6, norm=norm, dtype=F64)
    unnamed_copy(named, positional)
    x = nt.tensor(rng.standard_normal((2, 3, 4)))
    want = named(x.refine_names("batch", "seq", "embed"), is_causal=True)
    out = positional(x, is_causal=True)
    assert out.names == (None, None, None)
    np.testing.assert_allclose(arr(out), arr(want), rtol=1e-12)
    assert positional(x.refine_names("batch", "seq", None)).names == ("batch", "seq", None)
    check_module(positional, positional, x.requires_grad_())
    mlp = nn.MLP(None, 4, 6, dtype=F64)
    assert mlp.fc1.weight.names == (None, None)
    assert mlp(x.refine_names("batch", "seq", "embed")).names == ("batch", "seq", "embed")
    check_module(mlp, mlp, x)
    with pytest.raises(TypeError, match="TransformerBlock: with dim=None .* so head_dim, mlp_dim cannot be given"):
        nn.TransformerBlock(None, 4, 2, head_dim="d", mlp_dim="m")


# ----------------------------------------------------------------------------- against PyTorch itself
@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_linear_embedding_norms_match_torch(torch):
    torch.manual_seed(0)
    pairs = [(torch.nn.Linear(4, 3), nn.Linear(4, 3), (2, 5, 4)),
             (torch.nn.Linear(4, 3, bias=False), nn.Linear(4, 3, bias=False), (4,)),
             (torch.nn.LayerNorm((5, 4)), nn.LayerNorm((5, 4)), (2, 5, 4)),
             (torch.nn.RMSNorm(4), nn.RMSNorm(4), (3, 4)),
             (torch.nn.GELU("tanh"), nn.GELU("tanh"), (3, 4)),
             (torch.nn.LogSoftmax(dim=1), nn.LogSoftmax(dim=1), (3, 4))]
    for theirs, ours, shape in pairs:
        theirs.double()
        for p in theirs.parameters():
            torch.nn.init.uniform_(p, -1, 1)
        ours.double().load_state_dict(torch_state(theirs))
        x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
        ref = theirs(x)
        xt = from_torch(x).requires_grad_()
        got = ours(xt)
        np.testing.assert_allclose(arr(got), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
        ref.sum().backward()
        got.sum().backward()
        np.testing.assert_allclose(arr(xt.grad), x.grad.numpy(), rtol=1e-10, atol=1e-12)
        for (key, p), q in zip(ours.named_parameters(), theirs.parameters()):
            np.testing.assert_allclose(arr(p.grad), q.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=key)
    theirs, ours = torch.nn.Embedding(6, 3, padding_idx=2), nn.Embedding(6, 3, padding_idx=2)
    ours.load_state_dict(torch_state(theirs))
    idx = np.array([[2, 0, 5], [2, 2, 1]])
    ref = theirs(torch.tensor(idx))
    got = ours(nt.tensor(idx))
    np.testing.assert_allclose(arr(got), ref.detach().numpy())
    (ref * ref).sum().backward()
    (got * got).sum().backward()
    np.testing.assert_allclose(arr(ours.weight.grad), theirs.weight.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kind", ["plain", "bool masks", "float masks", "cross", "unbatched"])
def test_mha_matches_torch(kind, batch_first, torch):
    torch.manual_seed(1)
    kv = {"kdim": 3, "vdim": 5} if kind == "cross" else {}
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=torch.float64, **kv)
    ours = nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=F64, **kv)
    for p in theirs.parameters():
        torch.nn.init.uniform_(p, -0.5, 0.5)
    ours.load_state_dict(torch_state(theirs))
    n, lq, s = 2, 3, 4
    lead = (lambda *rest: rest) if kind == "unbatched" else (
        (lambda *rest: (n, *rest)) if batch_first else (lambda first, *rest: (first, n, *rest)))
    q = torch.randn(*lead(lq, 8), dtype=torch.float64)
    k = torch.randn(*lead(s, kv.get("kdim", 8)), dtype=torch.float64)
    v = torch.randn(*lead(s, kv.get("vdim", 8)), dtype=torch.float64)
    masks = {}
    if kind == "bool masks":
        masks = {"key_padding_mask": torch.tensor([[False, False, True, False], [False, True, True, True]]),
                 "attn_mask": torch.tensor([[False, True, False, False]] * lq)}
    elif kind == "float masks":
        masks = {"key_padding_mask": torch.randn(n, s, dtype=torch.float64),
                 "attn_mask": torch.randn(n * 2, lq, s, dtype=torch.float64)}
    for average in (True, False):
        ref_out, ref_w = theirs(q, k, v, average_attn_weights=average, **masks)
        out, w = ours(from_torch(q), from_torch(k), from_torch(v), average_attn_weights=average,
                      **{key: from_torch(m) for key, m in masks.items()})
        np.testing.assert_allclose(arr(out), ref_out.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(arr(w), ref_w.detach().numpy(), rtol=1e-10, atol=1e-12)


def pytorch_style_model(nn):
    """One model, written once for ``torch.nn`` and for ``namedtensor.nn``: the PyTorch code runs unchanged."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 8, padding_idx=0)
            self.norm = nn.LayerNorm(8)
            self.attn = nn.MultiheadAttention(8, 2, dropout=0.1, batch_first=True)
            self.fc = nn.Linear(8, 16)
            self.act = nn.GELU(approximate="tanh")
            self.drop = nn.Dropout(0.1)
            self.out = nn.Linear(16, 5)

        def forward(self, tokens):
            x = self.emb(tokens)
            h = self.norm(x)
            a, _ = self.attn(h, h, h, need_weights=False)
            x = x + self.drop(a)
            return self.out(self.act(self.fc(x))).log_softmax(-1)

    return Model()


def test_pytorch_model_code_runs_unchanged_with_torchs_weights(torch):
    torch.manual_seed(2)
    theirs = pytorch_style_model(torch.nn).double().eval()
    ours = pytorch_style_model(nn).double().eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(torch_state(theirs))
    tokens = np.array([[3, 0, 7, 10], [1, 2, 0, 0]])
    ref = theirs(torch.tensor(tokens))
    got = ours(nt.tensor(tokens))
    assert got.names == (None, None, None)
    np.testing.assert_allclose(arr(got), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert ours(nt.tensor(tokens, names=("batch", "seq"))).names == ("batch", "seq", None)
