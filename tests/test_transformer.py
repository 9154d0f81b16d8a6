"""MultiheadAttention, MLP and TransformerBlock: values against an unnamed NumPy reference (masks, cross-attention,
dims in any order), names, gradients of inputs and parameters, dropout, a tiny model that learns, errors, and
state dicts with a checkpoint round trip."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor import nn
from namedtensor.testing import gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")

F64 = nt.float64


def host(t):
    return np.asarray(t.detach().numpy())


def canonical(t, *names):
    """``t``'s values as a NumPy array with its dims in the order ``names``."""
    return host(t.align_to(*names))


def randomize(module, rng):
    """Give every parameter random values (norm weights and biases too), through load_state_dict."""
    sd = {k: nt.tensor(rng.standard_normal(v.shape) * 0.5, names=v.names, dtype=v.dtype)
          for k, v in module.state_dict().items()}
    module.load_state_dict(sd)
    return {k: host(v) for k, v in module.state_dict().items()}


# ----------------------------------------------------------------------------- the NumPy reference


def linear_ref(x, p, prefix):
    """``x @ W.T + b`` along the last axis, the weight (out, in) as the state dict holds it."""
    y = x @ p[prefix + "weight"].T
    return y + p[prefix + "bias"] if prefix + "bias" in p else y


def softmax_ref(s):
    """Softmax over the last axis; a row with no finite score gets zero weights."""
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def mha_ref(p, x, key, value, heads, allowed=None, add=None, prefix=""):
    """Unnamed multi-head attention: x (..., S, E), key and value (..., K, E_kv) -> out (..., S, E) and probs
    (..., H, S, K).  ``allowed`` (bool) and ``add`` (float) broadcast against the scores (..., H, S, K)."""
    q, k, v = (linear_ref(t, p, prefix + name + "_proj.") for t, name in ((x, "q"), (key, "k"), (value, "v")))

    def split(t):  # (..., L, E) -> (..., H, L, D), heads major as unflatten(dim, (head, head_dim))
        return np.moveaxis(t.reshape(t.shape[:-1] + (heads, t.shape[-1] // heads)), -2, -3)

    q, k, v = split(q), split(k), split(v)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if add is not None:
        s = s + add
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    probs = softmax_ref(s)
    o = np.moveaxis(probs @ v, -3, -2)  # (..., S, H, D)
    return linear_ref(o.reshape(o.shape[:-2] + (-1,)), p, prefix + "out_proj."), probs


def norm_ref(x, p, prefix, kind):
    if kind == "layer":
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * p[prefix + "weight"] + p[prefix + "bias"]
    return x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * p[prefix + "weight"]


_erf = np.vectorize(math.erf)


def mlp_ref(x, p, prefix=""):
    h = linear_ref(x, p, prefix + "fc1.")
    return linear_ref(0.5 * h * (1.0 + _erf(h / math.sqrt(2.0))), p, prefix + "fc2.")


def block_ref(x, p, heads, kind, allowed=None):
    """The pre-norm block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``; x (B, S, E)."""
    h = norm_ref(x, p, "norm1.", kind)
    x = x + mha_ref(p, h, h, h, heads, allowed, prefix="attn.")[0]
    return x + mlp_ref(norm_ref(x, p, "norm2.", kind), p, "mlp.")


def causal_ref(s, k):
    return np.tril(np.ones((s, k), dtype=bool))


def padding_ref(lengths, k):
    """Bool (B, K): key j of batch b may be attended when j < lengths[b]."""
    return np.arange(k)[None, :] < np.asarray(lengths)[:, None]


# ----------------------------------------------------------------------------- MultiheadAttention values


B_, S_, E_, H_ = 2, 4, 8, 2
LAYOUTS = [("batch", "seq", "embed"), ("seq", "batch", "embed"), ("embed", "seq", "batch")]
MASKS = ["none", "padding", "causal", "combined", "float"]


def masks_for(kind, rng, n_query, n_key, lengths=(4, 2)):
    """``(mask tensor or None, is_causal, reference allowed (B, 1, S, K) or None, reference add or None)``."""
    pad = padding_ref(lengths, n_key)
    causal = causal_ref(n_query, n_key)
    if kind == "none":
        return None, False, None, None
    if kind == "padding":  # named (key, batch): aligned to the weights by name
        return nt.tensor(pad.T.copy(), names=("key", "batch")), False, pad[:, None, None, :], None
    if kind == "causal":
        return None, True, causal, None
    if kind == "combined":
        return nt.tensor(pad, names=("batch", "key")), True, pad[:, None, None, :] & causal, None
    add = rng.standard_normal((n_query, n_key))
    return nt.tensor(add, names=("seq", "key"), dtype=F64), False, None, add


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind", MASKS)
def test_self_attention_matches_reference(kind, layout, rng):
    nt.manual_seed(1)
    mha = nn.MultiheadAttention("embed", E_, H_, dtype=F64)
    p = randomize(mha, rng)
    x = rng.standard_normal((B_, S_, E_))
    mask, is_causal, allowed, add = masks_for(kind, rng, S_, S_)
    query = nt.tensor(x, names=("batch", "seq", "embed")).align_to(*layout)
    out, weights = mha(query, mask=mask, is_causal=is_causal, need_weights=True)
    want, probs = mha_ref(p, x, x, x, H_, allowed, add)
    assert out.names == layout
    assert weights.names == ("batch", "head", "seq", "key")
    np.testing.assert_allclose(canonical(out, "batch", "seq", "embed"), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(weights), probs, rtol=1e-10, atol=1e-12)
    # the same call without weights gives the same output
    np.testing.assert_allclose(host(mha(query, mask=mask, is_causal=is_causal)), host(out), rtol=0, atol=0)
    if kind in ("padding", "combined"):  # padded keys get exactly zero weight
        assert not host(weights)[1, :, :, 2:].any()


@pytest.mark.parametrize("multi_query", [False, True])
def test_cross_attention_matches_reference(multi_query, rng):
    """Keys and values of another length (5) and size (6), named in another order; a padding mask; keys without
    the batch dim broadcast over it."""
    nt.manual_seed(2)
    kv_size, n_key = 6, 5
    mha = nn.MultiheadAttention("embed", E_, H_, kv_size=kv_size, dtype=F64)
    p = randomize(mha, rng)
    assert p["k_proj.weight"].shape == (E_, kv_size) and p["q_proj.weight"].shape == (E_, E_)
    x = rng.standard_normal((B_, S_, E_))
    kv_shape = (n_key, kv_size) if multi_query else (B_, n_key, kv_size)
    k_in, v_in = rng.standard_normal(kv_shape), rng.standard_normal(kv_shape)
    kv_names = ("key", "embed") if multi_query else ("key", "batch", "embed")
    arrange = (lambda a: a) if multi_query else (lambda a: np.transpose(a, (1, 0, 2)))
    key = nt.tensor(arrange(k_in), names=kv_names)
    value = nt.tensor(arrange(v_in), names=kv_names)
    pad = padding_ref((5, 3), n_key)
    query = nt.tensor(x.transpose(1, 0, 2), names=("seq", "batch", "embed"))
    out, weights = mha(query, key, value, mask=nt.tensor(pad, names=("batch", "key")), need_weights=True)
    assert out.names == ("seq", "batch", "embed")
    assert weights.names == ("batch", "head", "seq", "key") and weights.shape == (B_, H_, S_, n_key)
    allowed = pad[:, None, None, :]
    want, probs = mha_ref(p, x, k_in, v_in, H_, allowed)
    np.testing.assert_allclose(canonical(out, "batch", "seq", "embed"), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(weights), probs, rtol=1e-10, atol=1e-12)
    # value defaults to key
    want_kk, _ = mha_ref(p, x, k_in, k_in, H_, allowed)
    got_kk = mha(query, key, mask=nt.tensor(pad, names=("batch", "key")))
    np.testing.assert_allclose(canonical(got_kk, "batch", "seq", "embed"), want_kk, rtol=1e-10, atol=1e-12)


def test_weights_put_head_seq_key_last(rng):
    """Whatever the query's order, the weights end in (head, seq, key); other batch dims keep the query's order."""
    mha = nn.MultiheadAttention("embed", E_, H_, dtype=F64)
    p = randomize(mha, rng)
    x = rng.standard_normal((3, B_, S_, E_))  # (extra, batch, seq, embed)
    query = nt.tensor(x.transpose(3, 2, 1, 0), names=("embed", "seq", "batch", "extra"))
    out, weights = mha(query, is_causal=True, need_weights=True)
    assert out.names == ("embed", "seq", "batch", "extra")
    assert weights.names == ("batch", "extra", "head", "seq", "key")
    want, probs = mha_ref(p, x, x, x, H_, causal_ref(S_, S_))
    np.testing.assert_allclose(canonical(out, "extra", "batch", "seq", "embed"), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(canonical(weights, "extra", "batch", "head", "seq", "key"), probs, rtol=1e-10,
                               atol=1e-12)


# names a layer may be given, including ones that are also parameter names of Tensor methods
NAME_POOL = ("t", "self", "names", "dim", "x", "key", "seq", "head", "embed", "batch", "value", "mask", "q", "k_1")


@given(chosen=st.permutations(NAME_POOL), order=st.permutations(range(4)), extra=st.booleans(),
       causal=st.booleans())
def test_names_any_order_any_names(chosen, order, extra, causal):
    """Output names equal the query's, weights end in (head, seq, key), values match the reference, for any
    dim order and any names given to dim/seq/key/head/head_dim."""
    dim, seq, key, head, head_dim, batch, other = chosen[:7]
    rng = np.random.default_rng(0)
    mha = nn.MultiheadAttention(dim, 4, 2, seq=seq, key=key, head=head, head_dim=head_dim, dtype=F64)
    p = {k: host(v) for k, v in mha.state_dict().items()}
    canon = (other, batch, seq, dim) if extra else (batch, seq, dim)
    x = rng.standard_normal((2, 2, 3, 4)[-len(canon):])
    names = tuple(canon[i] for i in order if i < len(canon))
    query = nt.tensor(x, names=canon, dtype=F64).align_to(*names)
    mask = nt.tensor(padding_ref((3, 1), 3), names=(batch, key))
    out, weights = mha(query, mask=mask, is_causal=causal, need_weights=True)
    assert out.names == names
    batch_order = tuple(n for n in names if n in (batch, other))
    assert weights.names == batch_order + (head, seq, key)
    allowed = padding_ref((3, 1), 3)[:, None, None, :]
    if causal:
        allowed = allowed & causal_ref(3, 3)
    want, probs = mha_ref(p, x, x, x, 2, allowed)
    np.testing.assert_allclose(canonical(out, *canon), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(canonical(weights, *canon[:-2], head, seq, key), probs, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- gradients


def with_params(module, keys, call):
    """``fn(*inputs, *params)``: ``call(*inputs)`` with the module's parameters ``keys`` replaced by ``params``
    (so gradcheck can perturb them)."""

    def owner(key):
        *path, leaf = key.split(".")
        m = module
        for part in path:
            m = getattr(m, part)
        return m, leaf

    def fn(*args):
        inputs, values = args[: len(args) - len(keys)], args[len(args) - len(keys):]
        saved = []
        for key, value in zip(keys, values):
            m, leaf = owner(key)
            saved.append((m, leaf, m._parameters[leaf]))
            m._parameters[leaf] = value
        try:
            return call(*inputs)
        finally:
            for m, leaf, old in saved:
                m._parameters[leaf] = old

    return fn


def check_module(module, call, *inputs):
    """gradcheck of ``call`` over the inputs and every parameter of ``module``."""
    keys = [k for k, _ in module.named_parameters()]
    fn = with_params(module, keys, call)
    assert gradcheck(fn, *inputs, *(p for _, p in module.named_parameters()))


@pytest.mark.parametrize("kind", ["none", "combined", "float"])
def test_gradcheck_mha(kind, rng):
    mha = nn.MultiheadAttention("embed", 4, 2, dtype=F64)
    randomize(mha, rng)
    x = nt.tensor(rng.standard_normal((3, 2, 4)), names=("seq", "batch", "embed"), requires_grad=True)
    mask, is_causal, _, _ = masks_for(kind, rng, 3, 3, lengths=(3, 2))
    if kind == "float":  # the float mask is an input too
        mask.requires_grad_()
        check_module(mha, lambda x, m: mha(x, mask=m, need_weights=True), x, mask)
    else:
        check_module(mha, lambda x: mha(x, mask=mask, is_causal=is_causal, need_weights=True), x)


def test_gradcheck_cross_attention(rng):
    mha = nn.MultiheadAttention("embed", 4, 2, kv_size=3, dtype=F64)
    randomize(mha, rng)
    x = nt.tensor(rng.standard_normal((2, 2, 4)), names=("batch", "seq", "embed"), requires_grad=True)
    k = nt.tensor(rng.standard_normal((3, 2, 3)), names=("key", "batch", "embed"), requires_grad=True)
    v = nt.tensor(rng.standard_normal((3, 2, 3)), names=("key", "batch", "embed"), requires_grad=True)
    check_module(mha, lambda x, k, v: mha(x, k, v, is_causal=True), x, k, v)


def test_gradgradcheck_mha(rng):
    mha = nn.MultiheadAttention("embed", 4, 2, dtype=F64)
    randomize(mha, rng)
    x = nt.tensor(rng.standard_normal((1, 3, 4)), names=("batch", "seq", "embed"), requires_grad=True)
    w = mha.q_proj.weight
    fn = with_params(mha, ["q_proj.weight"], lambda x: mha(x, is_causal=True))
    assert gradgradcheck(fn, x, w)


def test_gradcheck_mlp(rng):
    mlp = nn.MLP("embed", 3, 5, dtype=F64)
    randomize(mlp, rng)
    x = nt.tensor(rng.standard_normal((3, 2)), names=("embed", "seq"), requires_grad=True)
    out = mlp(x)
    assert out.names == ("embed", "seq")
    np.testing.assert_allclose(host(out), mlp_ref(host(x).T, {k: host(v) for k, v in mlp.state_dict().items()}).T,
                               rtol=1e-10, atol=1e-12)
    check_module(mlp, mlp, x)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_gradcheck_block(norm, rng):
    block = nn.TransformerBlock("embed", 4, 2, 4, norm=norm, dtype=F64)
    randomize(block, rng)
    x = nt.tensor(rng.standard_normal((2, 3, 4)), names=("batch", "seq", "embed"), requires_grad=True)
    pad = nt.tensor(padding_ref((3, 2), 3), names=("batch", "key"))
    check_module(block, lambda x: block(x, mask=pad, is_causal=True), x)


# ----------------------------------------------------------------------------- dropout, the block in eval mode


def test_mha_dropout_train_and_eval(rng):
    mha = nn.MultiheadAttention("embed", E_, H_, dropout=0.5, dtype=F64)
    p = randomize(mha, rng)
    x = rng.standard_normal((B_, S_, E_))
    query = nt.tensor(x, names=("batch", "seq", "embed"))
    want, probs = mha_ref(p, x, x, x, H_)
    mha.eval()
    out1, w1 = mha(query, need_weights=True)
    out2 = mha(query)
    np.testing.assert_allclose(host(out1), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(out2), host(out1), rtol=0, atol=0)
    np.testing.assert_allclose(host(w1), probs, rtol=1e-10, atol=1e-12)
    mha.train()
    nt.manual_seed(7)
    out_a, w_a = mha(query, need_weights=True)
    nt.manual_seed(7)
    out_b, w_b = mha(query, need_weights=True)
    np.testing.assert_allclose(host(out_a), host(out_b), rtol=0, atol=0)  # the seed fixes the drop pattern
    np.testing.assert_allclose(host(w_a), host(w_b), rtol=0, atol=0)
    assert not np.allclose(host(out_a), want)
    # each weight is dropped (0) or kept and scaled by 1/(1-p)
    w = host(w_a)
    dropped = w == 0
    assert 0 < dropped.mean() < 1
    np.testing.assert_allclose(w[~dropped], 2 * probs[~dropped], rtol=1e-10)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_block_eval_matches_reference(norm, rng):
    block = nn.TransformerBlock("embed", E_, H_, 12, norm=norm, dropout=0.3, dtype=F64)
    p = randomize(block, rng)
    x = rng.standard_normal((B_, S_, E_))
    pad = padding_ref((4, 3), S_)
    xt = nt.tensor(x.transpose(1, 2, 0), names=("seq", "embed", "batch"))
    mask = nt.tensor(pad, names=("batch", "key"))
    block.eval()
    out = block(xt, mask=mask, is_causal=True)
    assert out.names == ("seq", "embed", "batch")
    want = block_ref(x, p, H_, norm, pad[:, None, None, :] & causal_ref(S_, S_))
    np.testing.assert_allclose(canonical(out, "batch", "seq", "embed"), want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(host(block(xt, mask=mask, is_causal=True)), host(out), rtol=0, atol=0)
    block.train()
    nt.manual_seed(3)
    train_a = host(block(xt, mask=mask, is_causal=True))
    nt.manual_seed(3)
    train_b = host(block(xt, mask=mask, is_causal=True))
    np.testing.assert_allclose(train_a, train_b, rtol=0, atol=0)
    assert not np.allclose(train_a, host(out))


def test_mlp_dropout_train_and_eval(rng):
    mlp = nn.MLP("embed", 4, 6, dropout=0.5, dtype=F64)
    p = randomize(mlp, rng)
    x = rng.standard_normal((5, 4))
    xt = nt.tensor(x, names=("seq", "embed"))
    want = mlp_ref(x, p)
    mlp.eval()
    np.testing.assert_allclose(host(mlp(xt)), want, rtol=1e-10, atol=1e-12)
    mlp.train()
    nt.manual_seed(5)
    got = host(mlp(xt))
    kept = got != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(got[kept], 2 * want[kept], rtol=1e-10)


# ----------------------------------------------------------------------------- a tiny model learns


class TinyLM(nn.Module):
    """Token and position embeddings, one causal block, a linear read-out to the vocabulary."""

    def __init__(self, vocab: int, seq_len: int, size: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, size, "embed")
        self.pos = nn.Embedding(seq_len, size, "embed", vocab_dim="pos")
        self.block = nn.TransformerBlock("embed", size, 2, 2 * size)
        self.head = nn.Linear("embed", "vocab", size, vocab)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(nt.arange(tokens.size("seq"), names=("seq",)))
        return self.head(self.block(x, is_causal=True))


def test_tiny_transformer_learns_previous_token():
    """Predict the previous token: chance is ln(8) = 2.08 nats; 60 AdamW steps bring the loss below 0.05 and
    held-out accuracy to 100%.

    The test's cost is bounded by its work, not timed: every step runs the same ops with the same
    contraction FLOPs (traced), and one step stays within a small FLOP budget."""
    nt.manual_seed(0)
    vocab, seq_len = 8, 8
    model = TinyLM(vocab, seq_len, 16)
    opt = nt.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    data_rng = np.random.default_rng(0)

    def batch(n):
        data = data_rng.integers(0, vocab, size=(n, seq_len + 1))
        tokens = nt.tensor(data[:, 1:], names=("batch", "seq"))
        target = nt.tensor(data[:, :-1], names=("batch", "seq"))  # target at t = token at t - 1
        return tokens, target.narrow("seq", 1, seq_len - 1)

    def forward_backward(tokens, target):
        loss = F.cross_entropy(model(tokens).narrow("seq", 1, seq_len - 1), target, dim="vocab")
        loss.backward()
        return loss.item()

    losses, traces = [], []
    for _ in range(60):
        opt.zero_grad()
        trace = nt.trace_shapes(forward_backward, *batch(16))
        opt.step()
        losses.append(trace.result)
        traces.append(trace)
    first = traces[0]
    assert all(t.ops == first.ops and t.total_flops == first.total_flops for t in traces)
    assert "scaled_dot_product_attention" in first.ops and 0 < first.total_flops < 2_000_000
    assert losses[0] > 1.5
    assert losses[-1] < 0.05, losses[-10:]
    model.eval()
    tokens, target = batch(64)
    with nt.no_grad():
        pred = model(tokens).narrow("seq", 1, seq_len - 1).argmax("vocab")
    assert pred.names == ("batch", "seq")
    assert (host(pred) == host(target)).mean() == 1.0


# ----------------------------------------------------------------------------- errors


def test_errors():
    with pytest.raises(ValueError, match=r"num_heads \(3\) must be a positive divisor of size \(8\)"):
        nn.MultiheadAttention("embed", 8, 3)
    with pytest.raises(ValueError, match="must be a positive divisor"):
        nn.MultiheadAttention("embed", 8, 2.0)
    with pytest.raises(ValueError, match="must be a positive divisor"):
        nn.TransformerBlock("embed", 6, 4)
    with pytest.raises(nt.NamesError, match="must be five different names"):
        nn.MultiheadAttention("embed", 8, 2, key="seq")
    with pytest.raises(nt.NamesError, match="must be five different names"):
        nn.TransformerBlock("embed", 8, 2, head_dim="embed")
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        nn.MultiheadAttention("embed", 8, 2, dropout=1.0)
    with pytest.raises(ValueError, match="norm must be 'layer' or 'rms', got 'batch'"):
        nn.TransformerBlock("embed", 8, 2, norm="batch")
    mha = nn.MultiheadAttention("embed", 8, 2)
    x = nt.randn(2, 3, 8, names=("batch", "seq", "embed"))
    with pytest.raises(ValueError, match="value= given without key="):
        mha(x, value=x)
    with pytest.raises(ValueError, match=r"linear: the input's dim 2 \('embed'\) has size 6, but the weight"):
        mha(nt.randn(2, 3, 6, names=("batch", "seq", "embed")))
    with pytest.raises(ValueError, match=r"has size 5, but the weight"):
        nn.MultiheadAttention("embed", 8, 2, kv_size=6)(x, nt.randn(2, 4, 5, names=("batch", "key", "embed")))
    with pytest.raises(nt.NamesError, match=r"the query \('batch', 'pos', 'embed'\) has no sequence dim 'seq'"):
        mha(x.rename(seq="pos"))
    with pytest.raises(nt.NamesError, match=r"the keys \('batch', 'seq', 'embed'\) have no sequence dim 'key'"):
        mha(x, x)
    with pytest.raises(nt.NamesError, match="no dim named 'embed'"):
        mha(x.rename(embed="feat"))
    with pytest.raises(nt.NamesError, match="duplicate dim name 'key'"):  # self-attention needs a free 'key'
        mha(nt.randn(2, 3, 2, 8, names=("batch", "seq", "key", "embed")))
    with pytest.raises(TypeError, match="query must be a Tensor"):
        mha(np.zeros((2, 3, 8)))
    block = nn.TransformerBlock("embed", 8, 2)
    with pytest.raises(ValueError, match=r"layer_norm: the weight has shape \(8,\).*have sizes \(4,\)"):
        block(nt.randn(2, 3, 4, names=("batch", "seq", "embed")))


# ----------------------------------------------------------------------------- state dicts and checkpoints


def test_state_dict_and_checkpoint_round_trip(tmp_path, rng):
    block = nn.TransformerBlock("embed", 8, 2, 16, norm="rms")
    sd = block.state_dict()
    names = {k: v.names for k, v in sd.items()}
    assert names == {
        "norm1.weight": ("embed",),
        "attn.q_proj.weight": ("embed_out", "embed"), "attn.q_proj.bias": ("embed_out",),
        "attn.k_proj.weight": ("embed_out", "embed"), "attn.k_proj.bias": ("embed_out",),
        "attn.v_proj.weight": ("embed_out", "embed"), "attn.v_proj.bias": ("embed_out",),
        "attn.out_proj.weight": ("embed_out", "embed"), "attn.out_proj.bias": ("embed_out",),
        "norm2.weight": ("embed",),
        "mlp.fc1.weight": ("mlp", "embed"), "mlp.fc1.bias": ("mlp",),
        "mlp.fc2.weight": ("embed", "mlp"), "mlp.fc2.bias": ("embed",),
    }
    assert sd["mlp.fc1.weight"].shape == (16, 8)
    assert "norm1.bias" in nn.TransformerBlock("embed", 8, 2).state_dict()
    randomize(block, rng)
    x = nt.tensor(rng.standard_normal((2, 3, 8)), names=("batch", "seq", "embed"), dtype=nt.float32)
    mask = nt.tensor(padding_ref((3, 1), 3), names=("batch", "key"))
    want = host(block(x, mask=mask, is_causal=True))
    path = tmp_path / "block.safetensors"
    nt.save(block.state_dict(), path)
    nt.manual_seed(123)
    fresh = nn.TransformerBlock("embed", 8, 2, 16, norm="rms")
    assert not np.array_equal(host(fresh(x, mask=mask, is_causal=True)), want)
    loaded = nt.load(path)
    assert {k: v.names for k, v in loaded.items()} == names
    fresh.load_state_dict(loaded)
    np.testing.assert_array_equal(host(fresh(x, mask=mask, is_causal=True)), want)
