"""PyTorch's functional calls mean what they mean in PyTorch, or raise (namedtensor/nn/functional.py).

Each call is spelled as in PyTorch on unnamed tensors (and on named ones, whose names ride along) and
checked against a NumPy reference written from PyTorch's formulas, and against PyTorch itself where it
is installed; gradients by central differences (float64); the named forms next to them; the calls
that would be ambiguous raise and show both forms; dry runs on the meta backend.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts
from helpers import t64

pytestmark = pytest.mark.usefixtures("backend")

REDUCTIONS = ["mean", "sum", "none"]


def arr(t):
    return np.asarray(t.detach().numpy())


def reduce_np(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


def np_log_softmax(x, axis):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def torch_or_skip():
    return pytest.importorskip("torch")


def th(a):
    torch = torch_or_skip()
    return torch.tensor(np.asarray(a))


# ----------------------------------------------------------------------------- layer_norm, rms_norm


def np_norm(x, k, w, b, eps, centered):
    axes = tuple(range(x.ndim - k, x.ndim))
    if centered:
        x = x - x.mean(axis=axes, keepdims=True)
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    y = y if w is None else y * w
    return y if b is None else y + b


@pytest.mark.parametrize("shape,k", [((2, 3, 4), 1), ((2, 3, 4), 2), ((4,), 1)])
@pytest.mark.parametrize("names", [False, True])
def test_layer_norm_takes_pytorchs_sizes_of_the_last_dims(shape, k, names):
    x = t64(shape, ("batch", "seq", "embed")[-len(shape):] if names else None)
    w, b = t64(shape[-k:], seed=1), t64(shape[-k:], seed=2)
    sizes = x.shape[-k:]
    out = F.layer_norm(x, sizes, w, b, 1e-5)
    assert out.names == x.names
    assert_close(arr(out), np_norm(arr(x), k, arr(w), arr(b), 1e-5, True), rtol=1e-10, atol=1e-10)
    if k == 1:
        assert_close(F.layer_norm(x, shape[-1], w, b), out)  # an int is a size too
    assert gradcheck(lambda x, w, b: F.layer_norm(x, sizes, w, b), x, w, b)
    assert gradgradcheck(lambda x, w: F.layer_norm(x, sizes, w), x, w)


def test_rms_norm_takes_pytorchs_sizes_and_its_default_eps():
    x, w = t64((2, 3, 4), ("batch", "seq", "embed")), t64((4,), seed=1)
    out = F.rms_norm(x, (4,), w)
    # eps=None is the machine epsilon of the dtype, as in PyTorch
    assert_close(arr(out), np_norm(arr(x), 1, arr(w), None, np.finfo(np.float64).eps, False), rtol=1e-12, atol=1e-12)
    x32 = nt.tensor(arr(x).astype(np.float32))
    assert_close(arr(F.rms_norm(x32, (3, 4))), np_norm(arr(x32), 2, None, None, np.finfo(np.float32).eps, False),
                 rtol=1e-5, atol=1e-5)
    assert gradcheck(lambda x, w: F.rms_norm(x, (4,), w, 1e-6), x, w)


def test_norms_match_torch():
    torch = torch_or_skip()
    x, w, b = t64((2, 3, 4), requires_grad=False), t64((3, 4), seed=1), t64((3, 4), seed=2)
    got = F.layer_norm(x, (3, 4), w, b, 1e-5)
    assert_close(arr(got), torch.nn.functional.layer_norm(th(arr(x)), (3, 4), th(arr(w)), th(arr(b)), 1e-5).numpy(),
                 rtol=1e-10, atol=1e-10)
    for eps in (None, 1e-3):
        ref = torch.nn.functional.rms_norm(th(arr(x)), (4,), th(arr(w))[0], eps)
        assert_close(arr(F.rms_norm(x, (4,), w[0].detach(), eps)), ref.numpy(), rtol=1e-10, atol=1e-10)


def test_norms_by_name_with_dim():
    x = t64((2, 3, 4), ("batch", "embed", "seq"))
    w = t64((3,), ("embed",), seed=1)
    ref = np.moveaxis(np_norm(np.moveaxis(arr(x), 1, -1), 1, arr(w), None, 1e-5, True), -1, 1)
    for out in (F.layer_norm(x, dim="embed", weight=w), F.layer_norm(x, "embed", w),
                F.layer_norm(x, (3,), w, dim="embed"), F.layer_norm(x, dim=1, weight=w)):
        assert out.names == x.names
        assert_close(arr(out), ref, rtol=1e-10, atol=1e-10)
    assert_close(F.rms_norm(x, dim=("embed", "seq"), eps=1e-6), F.rms_norm(x, ("seq", "embed"), eps=1e-6))
    assert gradcheck(lambda x, w: F.layer_norm(x, weight=w, dim="embed"), x, w)


def test_norm_calls_that_would_be_ambiguous_raise_and_show_both_forms():
    x = t64((2, 3, 4), ("batch", "seq", "embed"), requires_grad=False)
    both = r"takes PyTorch's sizes of the last dims .*dims by name are given with dim= \(e.g. layer_norm\(x, dim='embed'\)\)"
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(-1,\) are the sizes of the last dims in "
                                         r"PyTorch's call, but the input has shape \(2, 3, 4\).*" + both):
        F.layer_norm(x, -1)  # the old named call by position: a dim, not a size
    with pytest.raises(ValueError, match=r"rms_norm: normalized_shape \(2,\) are the sizes of the last dims"):
        F.rms_norm(x, 2)
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(4, 3\) are the sizes"):
        F.layer_norm(x, (4, 3))
    with pytest.raises(TypeError, match=r"layer_norm: normalized_shape must be sizes \(an int or a tuple of ints\) "
                                        r"or dim names, got \('seq', 2\)"):
        F.layer_norm(x, ("seq", 2))
    with pytest.raises(TypeError, match="layer_norm: no dims to normalise over"):
        F.layer_norm(x)
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(3,\) are not the sizes \(4,\) of the dims "
                                         r"'embed' given by dim="):
        F.layer_norm(x, 3, dim="embed")


def test_norms_dry_run():
    x = nt.spec(("batch", "seq", "embed"), (8, 5, 16))
    w = nt.spec((None,), (16,))
    trace = nt.trace_shapes(lambda x, w: (F.layer_norm(x, w.shape, w, w), F.rms_norm(x, dim="embed")), x, w)
    assert [t.names for t in trace.result] == [x.names, x.names]
    with pytest.raises(ValueError, match="normalized_shape"):
        nt.trace_shapes(lambda x: F.layer_norm(x, (5,)), x)


# ----------------------------------------------------------------------------- linear, embedding


def test_linear_with_pytorchs_unnamed_weight_acts_on_the_last_dim():
    x, w, b = t64((2, 3, 4), ("batch", "seq", "embed")), t64((5, 4), seed=1), t64((5,), seed=2)
    out = F.linear(x, w, b)
    assert out.names == ("batch", "seq", None)
    assert_close(arr(out), arr(x) @ arr(w).T + arr(b), rtol=1e-10, atol=1e-10)
    assert gradcheck(F.linear, x, w, b)
    assert gradgradcheck(F.linear, x, w, b)
    torch = pytest.importorskip("torch")
    ref = torch.nn.functional.linear(th(arr(x)), th(arr(w)), th(arr(b)))
    assert_close(arr(out), ref.numpy(), rtol=1e-10, atol=1e-10)


def np_embedding_grad(idx, g, rows, padding):
    out = np.zeros((rows, g.shape[-1]))
    np.add.at(out, idx.reshape(-1), g.reshape(-1, g.shape[-1]))
    out[padding] = 0
    return out


@pytest.mark.parametrize("padding_idx", [1, -1])
def test_embedding_padding_idx_gets_no_gradient(padding_idx):
    idx = nt.tensor(np.array([[0, 4, 1], [4, 1, 4]]), names=("batch", "seq"))
    w = t64((5, 3), seed=1)
    out = F.embedding(idx, w, padding_idx)
    assert out.names == ("batch", "seq", None)
    assert_close(arr(out), arr(w)[np.array([[0, 4, 1], [4, 1, 4]])])
    g = np.random.default_rng(3).standard_normal((2, 3, 3))
    out.backward(nt.tensor(g, names=out.names))
    assert_close(arr(w.grad), np_embedding_grad(np.array([[0, 4, 1], [4, 1, 4]]), g, 5, padding_idx % 5))
    # the padding row is a constant for the checks: its true derivative is what PyTorch leaves out
    rows = [r for r in range(5) if r != padding_idx % 5]
    free = nt.tensor(arr(w)[rows], requires_grad=True)
    pad = nt.tensor(arr(w)[padding_idx % 5][None])

    def fn(free):
        parts = [free[: padding_idx % 5], pad, free[padding_idx % 5:]]
        return F.embedding(idx, nt.cat(parts, 0), padding_idx=padding_idx)

    assert gradcheck(fn, free)
    assert gradgradcheck(lambda f: fn(f) * fn(f), free)
    torch = pytest.importorskip("torch")
    tw = th(arr(w)).requires_grad_()
    torch.nn.functional.embedding(th(np.array([[0, 4, 1], [4, 1, 4]])), tw, padding_idx).backward(th(g))
    assert_close(arr(w.grad), tw.grad.numpy())


def test_embedding_errors():
    idx, w = nt.tensor([0, 1]), t64((3, 2), requires_grad=False)
    with pytest.raises(ValueError, match=r"embedding: padding_idx must be an int in \[-3, 3\) for the weight's dim 0 "
                                         r"of size 3, got 3"):
        F.embedding(idx, w, padding_idx=3)
    for kwargs in ({"max_norm": 1.0}, {"scale_grad_by_freq": True}, {"sparse": True}):
        with pytest.raises(NotImplementedError, match=f"embedding: {next(iter(kwargs))}=.* is not supported"):
            F.embedding(idx, w, **kwargs)


# ----------------------------------------------------------------------------- dropout, gelu, softmax


def test_dropout_in_place_writes_into_its_input():
    x = nt.ones(400, 3, names=("batch", "feat"))
    y = F.dropout(x, 0.25, True, True)
    assert y is x and x.names == ("batch", "feat")
    values = set(np.unique(arr(x)).tolist())
    assert values == {0.0, float(np.float32(1 / 0.75))}
    z = nt.ones(4, 2)
    assert F.dropout(z, 0.5, training=False, inplace=True) is z and (arr(z) == 1).all()


def test_dropout_in_place_refuses_a_leaf_that_requires_grad():
    x = t64((3, 2), ("batch", "feat"))
    with pytest.raises(RuntimeError, match=r"^dropout: in-place edit of a tensor that requires grad \(a leaf, names "
                                           r"\('batch', 'feat'\)\)"):
        F.dropout(x, 0.5, inplace=True)
    with nt.no_grad():
        assert F.dropout(x, 0.5, inplace=True) is x


def test_dropout_in_place_inside_the_graph_equals_out_of_place():
    """As in PyTorch, a non-leaf is edited in place and the edit is recorded: the same values and gradients
    as the out-of-place call with the same mask."""
    x = t64((4, 3), ("batch", "feat"))
    nt.manual_seed(3)
    out = F.dropout(x * 1.0, 0.5)
    (want,) = nt.grad(out.sum(), [x])
    nt.manual_seed(3)
    h = x * 1.0
    assert F.dropout(h, 0.5, inplace=True) is h
    (got,) = nt.grad(h.sum(), [x])
    assert_close(h.detach(), out.detach())
    assert_close(got, want)


def test_dropout_edge_cases_are_pytorchs():
    x = t64((50, 4))
    assert (arr(F.dropout(x, 1.0)) == 0).all()  # p = 1 zeroes everything
    assert F.dropout(x, 0.0) is x
    with pytest.raises(ValueError, match=r"dropout: p is the probability of zeroing an element, a number in \[0, 1\]"):
        F.dropout(x, 1.5)
    out = F.dropout(x, 0.3)
    kept = arr(out) != 0
    assert_close(arr(out)[kept], arr(x)[kept] / 0.7)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_approximations(approximate):
    x = t64((3, 4), ("batch", "feat"))
    a = arr(x)
    if approximate == "none":
        ref = 0.5 * a * (1 + np.vectorize(math.erf)(a / math.sqrt(2)))
    else:
        ref = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    out = F.gelu(x, approximate=approximate)
    assert out.names == x.names
    assert_close(arr(out), ref, rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda t: F.gelu(t, approximate), x)
    torch = pytest.importorskip("torch")
    assert_close(arr(out), torch.nn.functional.gelu(th(a), approximate=approximate).numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("fn,ref", [(F.softmax, lambda a, ax: np.exp(np_log_softmax(a, ax))),
                                    (F.log_softmax, np_log_softmax)])
def test_softmax_needs_a_dim_and_takes_pytorchs_dtype(fn, ref):
    x = t64((2, 3), ("batch", "feat"))
    assert_close(arr(fn(x, dim=1)), ref(arr(x), 1))
    assert_close(fn(x, "feat"), fn(x, 1))
    assert fn(x.detach().float(), -1, dtype=nt.float64).dtype == nt.float64
    with pytest.raises(TypeError, match=f"{fn.__name__}: dim is required: PyTorch's choice of a dim"):
        fn(x)
    assert gradcheck(lambda t: fn(t, 0), x)


# ----------------------------------------------------------------------------- attention


def np_attention(q, k, v, mask=None, causal=False, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


SDPA_CASES = [  # q, k, v shapes and the mask's (None: none)
    ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7), None),
    ((4, 5), (2, 6, 5), (2, 6, 3), (4, 6)),  # q broadcasts over k's and v's batch dim
    ((2, 1, 4, 5), (3, 6, 5), (3, 6, 5), (2, 1, 1, 6)),  # a key-padding mask
]


@pytest.mark.parametrize("qs,ks,vs,ms", SDPA_CASES)
@pytest.mark.parametrize("kind", ["bool", "float", "causal"])
def test_sdpa_by_position_as_in_pytorch(qs, ks, vs, ms, kind):
    q, k, v = t64(qs), t64(ks, seed=1), t64(vs, seed=2)
    mask = None
    if ms is not None and kind != "causal":
        m = np.random.default_rng(4).random(ms) > 0.3
        m[..., 0] = True
        mask = nt.tensor(m) if kind == "bool" else nt.tensor(np.where(m, 0.0, -2.5))
    causal = kind == "causal"
    out = F.scaled_dot_product_attention(q, k, v, mask, 0.0, causal)
    ref = np_attention(arr(q), arr(k), arr(v), None if mask is None else arr(mask), causal)
    assert_close(arr(out), ref, rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask, is_causal=causal), q, k, v)
    torch = pytest.importorskip("torch")
    tref = torch.nn.functional.scaled_dot_product_attention(
        th(arr(q)), th(arr(k)), th(arr(v)), None if mask is None else th(arr(mask)), is_causal=causal)
    assert_close(arr(out), tref.numpy(), rtol=1e-10, atol=1e-10)


def test_sdpa_by_position_keeps_names_and_scale():
    q = t64((2, 4, 5), ("batch", "seq", "d"))
    k, v = t64((2, 6, 5), ("batch", None, "d"), seed=1), t64((2, 6, 3), (None, "key", "value"), seed=2)
    out = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    assert out.names == ("batch", "seq", "value")
    assert_close(arr(out), np_attention(arr(q), arr(k), arr(v), scale=0.3), rtol=1e-10, atol=1e-10)
    assert gradgradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    trace = nt.trace_shapes(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                            nt.spec(("batch", "seq", "d"), (2, 4, 5)), nt.spec((None, None, "d"), (2, 6, 5)),
                            nt.spec((None, None, None), (2, 6, 3)))
    assert trace.result.names == ("batch", "seq", None) and trace.result.shape == (2, 4, 3)


def test_sdpa_errors():
    q, k, v = t64((2, 4, 5), requires_grad=False), t64((2, 6, 5), requires_grad=False), t64((2, 6, 3))
    sdpa = F.scaled_dot_product_attention
    m = nt.ones(4, 6, dtype=nt.bool_)
    with pytest.raises(ValueError, match="scaled_dot_product_attention: attn_mask and is_causal=True cannot be given"):
        sdpa(q, k, v, m, is_causal=True)
    with pytest.raises(NotImplementedError, match="scaled_dot_product_attention: enable_gqa=True is not supported"):
        sdpa(q, k, v, enable_gqa=True)
    with pytest.raises(TypeError, match="scaled_dot_product_attention: the named form takes both dim= "):
        sdpa(q, k, v, dim="d")
    with pytest.raises(TypeError, match="scaled_dot_product_attention: mask=, query_dim= and return_weights= belong "):
        sdpa(q, k, v, mask=m)
    with pytest.raises(TypeError, match="scaled_dot_product_attention: with dim= the mask is aligned by name"):
        sdpa(q.rename("b", "s", "d"), k.rename("b", "key", "d"), v.rename("b", "key", "e"), m, dim="d", key_dim="key")
    with pytest.raises(nt.NamesError, match=r"scaled_dot_product_attention: q's and k's last dims \(the features "
                                            r"they contract\) are the same dim by position but named 'd' and 'e'"):
        sdpa(q.refine_names(..., "d"), k.refine_names(..., "e"), v)
    with pytest.raises(ValueError, match="scaled_dot_product_attention: q must have at least 2 dims"):
        sdpa(q[0, 0], k, v)
    with pytest.raises(ValueError, match="the mask has 4 dims, more than the attention weights"):
        sdpa(q, k, v, nt.ones(1, 2, 4, 6, dtype=nt.bool_))


# ----------------------------------------------------------------------------- cross_entropy, nll_loss


def np_cross_entropy(x, target, ax=1, weight=None, ignore_index=-100, eps=0.0, reduction="mean", log_probs=False):
    """PyTorch's F.cross_entropy (and, with ``log_probs``, F.nll_loss) in NumPy, from its C++ formulas."""
    logp = np.moveaxis(x if log_probs else np_log_softmax(x, ax), ax, -1)
    n = logp.shape[-1]
    w = np.ones(n) if weight is None else weight
    if target.dtype.kind == "f":
        q = np.moveaxis(target, ax, -1) * (1 - eps) + eps / n
        loss = -(q * logp * w).sum(-1)
        return reduce_np(loss, reduction)
    valid = target != ignore_index
    t = np.where(valid, target, 0)
    ew = np.where(valid, w[t], 0.0)
    nll = -np.take_along_axis(logp, t[..., None], -1)[..., 0] * ew
    smooth = np.where(valid, -(logp * w).sum(-1), 0.0)
    if reduction == "none":
        return (1 - eps) * nll + eps / n * smooth
    if reduction == "sum":
        return (1 - eps) * nll.sum() + eps / n * smooth.sum()
    return ((1 - eps) * nll.sum() + eps / n * smooth.sum()) / ew.sum()


def ce_inputs(shape=(3, 4, 2), seed=0):
    x = t64(shape, seed=seed)
    t = np.random.default_rng(seed).integers(0, shape[1], size=(shape[0],) + shape[2:])
    t.reshape(-1)[0] = -100
    return x, t


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("eps", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_with_pytorchs_defaults(reduction, eps, weighted):
    x, t = ce_inputs()
    w = nt.tensor(np.array([0.5, 1.0, 2.0, 0.25])) if weighted else None
    out = F.cross_entropy(x, nt.tensor(t), w, reduction=reduction, label_smoothing=eps)
    ref = np_cross_entropy(arr(x), t, 1, None if w is None else arr(w), -100, eps, reduction)
    assert_close(arr(out), np.asarray(ref), rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda x: F.cross_entropy(x, nt.tensor(t), w, reduction=reduction, label_smoothing=eps), x)
    assert gradgradcheck(lambda x: F.cross_entropy(x, nt.tensor(t), w, reduction=reduction, label_smoothing=eps), x)
    torch = pytest.importorskip("torch")
    tref = torch.nn.functional.cross_entropy(th(arr(x)), th(t), None if w is None else th(arr(w)),
                                             reduction=reduction, label_smoothing=eps)
    assert_close(arr(out), tref.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_probabilities_by_position(reduction, weighted):
    x = t64((3, 4, 2))
    q = t64((3, 4, 2), seed=5).softmax(1).detach().requires_grad_()
    w = nt.tensor(np.array([0.5, 1.0, 2.0, 0.25])) if weighted else None
    out = F.cross_entropy(x, q, w, reduction=reduction, label_smoothing=0.1)
    ref = np_cross_entropy(arr(x), arr(q), 1, None if w is None else arr(w), eps=0.1, reduction=reduction)
    assert_close(arr(out), np.asarray(ref), rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda x, q: F.cross_entropy(x, q, w, reduction=reduction, label_smoothing=0.1), x, q)
    torch = pytest.importorskip("torch")
    tref = torch.nn.functional.cross_entropy(th(arr(x)), th(arr(q)), None if w is None else th(arr(w)),
                                             reduction=reduction, label_smoothing=0.1)
    assert_close(arr(out), tref.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_with_pytorchs_defaults(reduction, weighted):
    x, t = ce_inputs((5, 3), seed=2)
    w = nt.tensor(np.array([2.0, 0.5, 1.5])) if weighted else None
    out = F.nll_loss(x, nt.tensor(t), w, reduction=reduction)
    ref = np_cross_entropy(arr(x), t, 1, None if w is None else arr(w), reduction=reduction, log_probs=True)
    assert_close(arr(out), np.asarray(ref), rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda x: F.nll_loss(x, nt.tensor(t), w, reduction=reduction), x)
    torch = pytest.importorskip("torch")
    tref = torch.nn.functional.nll_loss(th(arr(x)), th(t), None if w is None else th(arr(w)), reduction=reduction)
    assert_close(arr(out), tref.numpy(), rtol=1e-10, atol=1e-10)


def test_class_dim_by_name_and_a_name_in_weights_place():
    x = t64((3, 2, 4), ("batch", "seq", "vocab"))
    t = nt.tensor(np.random.default_rng(0).integers(0, 4, (3, 2)), names=("batch", "seq"))
    w = nt.tensor(np.array([0.5, 1.0, 2.0, 0.25]), names=("vocab",))
    ref = np_cross_entropy(arr(x), arr(t), 2, arr(w), reduction="none")
    for out in (F.cross_entropy(x, t, w, reduction="none", dim="vocab"), F.cross_entropy(x, t, w, reduction="none", dim=-1)):
        assert out.names == ("batch", "seq")
        assert_close(arr(out), ref, rtol=1e-10, atol=1e-10)
    assert_close(F.cross_entropy(x, t, "vocab"), F.cross_entropy(x, t, dim="vocab"))
    # without dim=, PyTorch's class dim 1 whatever its name
    t1 = nt.tensor(np.random.default_rng(1).integers(0, 2, (3, 4)), names=("batch", "vocab"))
    assert_close(arr(F.cross_entropy(x, t1)), np.asarray(np_cross_entropy(arr(x), arr(t1), 1)), rtol=1e-10)
    one = t64((4,), ("vocab",))  # 1-D logits: the class dim is 0
    assert_close(arr(F.cross_entropy(one, nt.tensor(2))), -np_log_softmax(arr(one), 0)[2])
    assert gradcheck(lambda x: F.nll_loss(x, t, w, dim="vocab"), x)


def test_legacy_flags_map_as_in_pytorch():
    x, t = ce_inputs((4, 3))
    tt = nt.tensor(t)
    assert_close(F.cross_entropy(x, tt, size_average=False), F.cross_entropy(x, tt, reduction="sum"))
    assert_close(F.nll_loss(x, tt, reduce=False), F.nll_loss(x, tt, reduction="none"))
    a, b = t64((2, 3)), t64((2, 3), seed=1)
    assert_close(F.mse_loss(a, b, False), F.mse_loss(a, b, reduction="sum"))


def test_loss_calls_that_would_be_ambiguous_raise():
    x, t = ce_inputs((4, 3))
    with pytest.raises(TypeError, match=r"cross_entropy: weight is PyTorch's class weight, a tensor of one weight "
                                        r"per class, got 1; the class dim is given by name or int with dim="):
        F.cross_entropy(x, nt.tensor(t), 1)
    with pytest.raises(TypeError, match="nll_loss: the class dim is given twice"):
        F.nll_loss(x.rename("b", "c"), nt.tensor(t, names=("b",)), "c", dim="c")
    with pytest.raises(TypeError, match=r"mse_loss: size_average is PyTorch's deprecated flag, a bool or None, got "
                                        r"'sum'; give the reduction by keyword"):
        F.mse_loss(x, x, "sum")  # the old named call by position
    with pytest.raises(ValueError, match=r"cross_entropy: the class weight must be 1-D with one weight per class \(3\)"):
        F.cross_entropy(x, nt.tensor(t), nt.ones(4, dtype=nt.float64))
    with pytest.raises(nt.NamesError, match="cross_entropy: the class weight has names"):
        F.cross_entropy(x.rename("b", "c"), nt.tensor(t, names=("b",)), nt.ones(3, names=("k",), dtype=nt.float64))
    with pytest.raises(NotImplementedError, match="cross_entropy: the class weight gets no gradient"):
        F.cross_entropy(x, nt.tensor(t), t64((3,)))
    with pytest.raises(ValueError, match="cross_entropy: ignore_index applies to class indices"):
        F.cross_entropy(x, x.softmax(1), ignore_index=0)


def test_losses_dry_run():
    x = nt.spec(("batch", "vocab"), (8, 5))
    t = nt.spec(("batch",), (8,), dtype=nt.int64)
    w = nt.spec((None,), (5,))
    trace = nt.trace_shapes(lambda x, t, w: (F.cross_entropy(x, t, w, label_smoothing=0.1, reduction="none"),
                                             F.nll_loss(x, t, dim="vocab"), F.huber_loss(x, x, reduction="none"),
                                             F.kl_div(x, x, reduction="batchmean")), x, t, w)
    assert [r.names for r in trace.result] == [("batch",), (), ("batch", "vocab"), ()]


# ----------------------------------------------------------------------------- pointwise losses


def np_pointwise(name, a, b, option, weight=None, pos_weight=None, log_target=False):
    d = a - b
    if name == "mse_loss":
        loss = d * d
    elif name == "l1_loss":
        loss = np.abs(d)
    elif name == "smooth_l1_loss":
        loss = np.abs(d) if option == 0 else np.where(np.abs(d) < option, 0.5 * d * d / option, np.abs(d) - 0.5 * option)
    elif name == "huber_loss":
        loss = np.where(np.abs(d) < option, 0.5 * d * d, option * (np.abs(d) - 0.5 * option))
    elif name == "binary_cross_entropy":
        loss = -(b * np.maximum(np.log(a), -100) + (1 - b) * np.maximum(np.log(1 - a), -100))
    elif name == "binary_cross_entropy_with_logits":
        sp = np.log1p(np.exp(-np.abs(a))) + np.maximum(-a, 0)
        loss = (1 - b) * a + (1 if pos_weight is None else (pos_weight - 1) * b + 1) * sp
    else:  # kl_div
        loss = np.exp(b) * (b - a) if log_target else np.where(b > 0, b * np.log(np.where(b > 0, b, 1)), 0) - b * a
    return loss if weight is None else loss * weight


POINTWISE = [  # name, option keyword and value, whether it takes weight=
    ("mse_loss", None, None, True),
    ("l1_loss", None, None, True),
    ("smooth_l1_loss", "beta", 0.7, False),
    ("smooth_l1_loss", "beta", 0.0, False),
    ("huber_loss", "delta", 0.7, True),
    ("binary_cross_entropy", None, None, True),
    ("binary_cross_entropy_with_logits", None, None, True),
    ("kl_div", None, None, False),
]


def pointwise_operands(name, shape_a, shape_b, names_a=None, names_b=None):
    a, b = t64(shape_a, names_a), t64(shape_b, names_b, seed=1)
    if name == "binary_cross_entropy":
        a = ((a.detach() + 2) / 4 * 0.9 + 0.05).requires_grad_()
        b = ((b.detach() + 2) / 4).requires_grad_()
    if name == "kl_div":
        b = ((b.detach() + 2) / 4).requires_grad_()
    return a, b


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")  # PyTorch's kl_div
@pytest.mark.parametrize("name,opt,value,weighted", POINTWISE)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_pointwise_losses_match_numpy_and_torch(name, opt, value, weighted, reduction):
    fn = getattr(F, name)
    a, b = pointwise_operands(name, (2, 3), (2, 3))
    kw = {"reduction": reduction}
    if opt:
        kw[opt] = value
    w = t64((2, 3), seed=7, requires_grad=False) if weighted else None
    if weighted:
        kw["weight"] = w
    out = fn(a, b, **kw)
    ref = reduce_np(np_pointwise(name, arr(a), arr(b), value, None if w is None else arr(w)), reduction)
    if weighted and reduction == "mean" and name in ("mse_loss", "l1_loss"):  # PyTorch divides by the weights
        ref = ref * w.numel() / arr(w).sum()
    assert_close(arr(out), np.asarray(ref), rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda a, b: fn(a, b, **kw), a, b)
    if name not in ("l1_loss", "smooth_l1_loss"):  # their second derivative is 0 or a kink
        assert gradgradcheck(lambda a, b: fn(a, b, **kw), a, b)
    torch = pytest.importorskip("torch")
    tkw = {k: th(arr(v)) if isinstance(v, nt.Tensor) else v for k, v in kw.items()}
    tref = getattr(torch.nn.functional, name)(th(arr(a)), th(arr(b)), **tkw)
    assert_close(arr(out), tref.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_pos_weight_and_kl_div_options(reduction):
    a, b = t64((3, 4)), (t64((3, 4), seed=1).detach() + 2) / 4
    pw = nt.tensor(np.array([0.5, 1.0, 2.0, 3.0]))
    out = F.binary_cross_entropy_with_logits(a, b, reduction=reduction, pos_weight=pw)
    ref = reduce_np(np_pointwise("binary_cross_entropy_with_logits", arr(a), arr(b), None, pos_weight=arr(pw)),
                    reduction)
    assert_close(arr(out), np.asarray(ref), rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda a: F.binary_cross_entropy_with_logits(a, b, reduction=reduction, pos_weight=pw), a)
    lt = t64((3, 4), seed=2)
    out = F.kl_div(a, lt, reduction=reduction, log_target=True)
    assert_close(arr(out), np.asarray(reduce_np(np_pointwise("kl_div", arr(a), arr(lt), None, log_target=True),
                                                reduction)), rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda a, lt: F.kl_div(a, lt, reduction=reduction, log_target=True), a, lt)
    bm = F.kl_div(a, b, reduction="batchmean")
    assert_close(arr(bm), np_pointwise("kl_div", arr(a), arr(b), None).sum() / 3)
    torch = pytest.importorskip("torch")
    tref = torch.nn.functional.binary_cross_entropy_with_logits(th(arr(a)), th(arr(b)), reduction=reduction,
                                                                pos_weight=th(arr(pw)))
    assert_close(arr(F.binary_cross_entropy_with_logits(a, b, reduction=reduction, pos_weight=pw)), tref.numpy(),
                 rtol=1e-10, atol=1e-10)
    assert_close(arr(bm), torch.nn.functional.kl_div(th(arr(a)), th(arr(b)), reduction="batchmean").numpy())


def test_bce_clamps_its_logs_at_minus_100():
    x, t = nt.tensor([0.0, 1.0, 0.5]), nt.tensor([1.0, 0.0, 1.0])
    assert_close(arr(F.binary_cross_entropy(x, t, reduction="none")), np.array([100.0, 100.0, math.log(2)]))


@settings(deadline=None, max_examples=30)
@given(nts.broadcastable_names(max_dims=3), st.sampled_from([p[0] for p in POINTWISE]), st.data())
def test_pointwise_losses_unify_names(pair, name, data):
    (sa, na), (sb, nb) = pair
    a, b = pointwise_operands(name, sa, sb, na, nb)
    out = getattr(F, name)(a, b, reduction="none")
    assert out.names == nt.tensor(arr(a), names=na).add(nt.tensor(arr(b), names=nb)).names
    assert getattr(F, name)(a, b).names == ()


def test_pointwise_loss_errors():
    a = t64((2, 3), ("batch", "embed"), requires_grad=False)
    with pytest.raises(nt.NamesError, match=r"l1_loss: dims \('batch', 'embed'\) and \('batch', 'feat'\) do not match"):
        F.l1_loss(a, t64((2, 3), ("batch", "feat")))
    with pytest.raises(nt.NamesError, match="huber_loss: dims"):
        F.huber_loss(a, a, weight=t64((3,), ("feat",)))
    with pytest.raises(ValueError, match=r"mse_loss: the weight must have the input's shape \(2, 3\), got \(3,\)"):
        F.mse_loss(a, a, weight=t64((3,), ("embed",)))
    with pytest.raises(ValueError, match=r"smooth_l1_loss: beta must be a number >= 0, got -1"):
        F.smooth_l1_loss(a, a, beta=-1)
    with pytest.raises(ValueError, match=r"huber_loss: delta must be a number > 0, got 0"):
        F.huber_loss(a, a, delta=0)
    with pytest.raises(ValueError, match=r"binary_cross_entropy: the input holds probabilities, every element in "
                                         r"\[0, 1\]"):
        F.binary_cross_entropy(a * 10, a.abs().clip(0, 1))
    with pytest.raises(ValueError, match=r"kl_div: reduction must be 'none', 'mean' or 'sum', got 'avg'"):
        F.kl_div(a, a, reduction="avg")
    with pytest.raises(ValueError, match=r"binary_cross_entropy_with_logits: the input's shape \(2, 3\) and "
                                         r"pos_weight's \(4,\) do not broadcast"):
        F.binary_cross_entropy_with_logits(a, a, pos_weight=t64((4,)))


@pytest.mark.parametrize("op, args, ref", [
    ("relu", (), lambda a: np.maximum(a, 0)),
    ("silu", (), lambda a: a / (1 + np.exp(-a))),
    ("threshold", (0.5, -3.0), lambda a: np.where(a > 0.5, a, -3.0)),
])
def test_activations_in_place_or_not(op, args, ref):
    """PyTorch's ``inplace=``: the same values and gradients; in place the input itself is returned."""
    a = np.array([[-1.5, 0.25, 0.5], [0.75, 2.0, -0.1]])
    x = nt.tensor(a, names=("batch", "feat"), dtype=nt.float64, requires_grad=True)
    out = getattr(F, op)(x, *args)
    assert out.names == ("batch", "feat")
    np.testing.assert_allclose(out.detach().numpy(), ref(a), rtol=1e-12)
    (want,) = nt.grad(out.sum(), [x])
    h = x * 1.0  # a non-leaf, which PyTorch (and namedtensor) edit in place inside the graph
    edited = getattr(F, op)(h, *args, inplace=True)
    assert edited is h and edited.names == ("batch", "feat")
    np.testing.assert_allclose(h.detach().numpy(), ref(a), rtol=1e-12)
    (got,) = nt.grad(edited.sum(), [x])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(TypeError, match=f"^{op}: inplace must be a bool, got str 'yes'"):
        getattr(F, op)(x, *args, inplace="yes")
