"""scaled_dot_product_attention and causal_mask: values against an unnamed NumPy reference, names, masks,
gradients (first and second order, both backward paths), dropout and the errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.attention import causal_mask
from namedtensor.ops.attention import scaled_dot_product_attention as sdpa
from namedtensor.testing import assert_close, gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")

# the working layouts of the reference: q (batch, head, seq, d), k (batch, head, key, d), v (batch, head, key, e)
Q = ("batch", "head", "seq", "d")
K = ("batch", "head", "key", "d")
V = ("batch", "head", "key", "e")
W = ("batch", "head", "seq", "key")


def reference(q, k, v, scale=None, allowed=None, add=None):
    """softmax(q k^T * scale + add) v, plain NumPy on (..., seq, d) / (..., key, d) arrays; masked-out pairs
    (allowed False) get zero weight, and a query with no allowed key gets zero weights."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if add is not None:
        s = s + add
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    total = e.sum(axis=-1, keepdims=True)
    p = e / np.where(total == 0, 1.0, total)
    return np.matmul(p, v), p


def arrange(a, names, layout):
    """The array ``a`` with dims ``names`` transposed to ``layout`` (a subset of the names may be size 1 and
    dropped: those not in layout must have size 1)."""
    a = np.asarray(a)
    drop = tuple(i for i, n in enumerate(names) if n not in layout)
    a = a.squeeze(axis=drop) if drop else a
    kept = [n for n in names if n in layout]
    return np.transpose(a, [kept.index(n) for n in layout])


def named(a, names, layout, **kw):
    return nt.tensor(arrange(a, names, layout), names=layout, **kw)


def host(t):
    return np.asarray(t.detach().numpy())


def qkv(rng, b=2, h=3, s=4, n_key=5, d=3, e=2, dtype="float64"):
    q = rng.standard_normal((b, h, s, d)).astype(dtype)
    k = rng.standard_normal((b, h, n_key, d)).astype(dtype)
    v = rng.standard_normal((b, h, n_key, e)).astype(dtype)
    return q, k, v


# ----------------------------------------------------------------------------- values and names

LAYOUTS = [
    # q, k, v layouts (names of the reference's dims); the value-feature dim is "e" unless renamed below
    (Q, K, V),
    (("batch", "seq", "head", "d"), ("key", "batch", "d", "head"), ("head", "key", "batch", "e")),
    (("d", "seq", "head", "batch"), ("head", "d", "batch", "key"), ("e", "batch", "head", "key")),
    (("head", "batch", "d", "seq"), ("batch", "head", "key", "d"), ("batch", "key", "e", "head")),
]


@pytest.mark.parametrize("layouts", LAYOUTS)
def test_matches_reference_in_any_layout(rng, layouts):
    lq, lk, lv = layouts
    q, k, v = qkv(rng)
    out, w = sdpa(named(q, Q, lq), named(k, K, lk), named(v, V, lv), dim="d", key_dim="key", return_weights=True)
    ro, rw = reference(q, k, v)
    out_names = tuple("e" if n == "d" else n for n in lq)
    assert out.names == out_names
    assert w.names == tuple(n for n in lq if n not in ("seq", "d")) + ("seq", "key")
    np.testing.assert_allclose(host(out), arrange(ro, ("batch", "head", "seq", "e"), out_names), rtol=1e-12)
    np.testing.assert_allclose(host(w), arrange(rw, W, w.names), rtol=1e-12)


def test_value_dim_keeps_the_name_of_dim_in_the_usual_case(rng):
    q, k, v = qkv(rng, e=3)
    names = ("batch", "seq", "head", "hd")
    kn = ("batch", "key", "head", "hd")
    out = sdpa(named(q, ("batch", "head", "seq", "hd"), names), named(k, ("batch", "head", "key", "hd"), kn),
               named(v, ("batch", "head", "key", "hd"), kn), dim="hd", key_dim="key")
    assert out.names == names
    np.testing.assert_allclose(host(out), arrange(reference(q, k, v)[0], ("batch", "head", "seq", "hd"), names))


def test_unbatched_and_scale(rng):
    q, k, v = qkv(rng, b=1, h=1)
    out = sdpa(named(q, Q, ("seq", "d")), named(k, K, ("key", "d")), named(v, V, ("key", "e")), dim="d",
               key_dim="key", scale=0.7)
    assert out.names == ("seq", "e")
    np.testing.assert_allclose(host(out), reference(q, k, v, scale=0.7)[0][0, 0], rtol=1e-12)


def test_weights_name_batch_dims_in_q_order(rng):
    q, k, v = qkv(rng)
    lq = ("seq", "head", "d", "batch")
    _, w = sdpa(named(q, Q, lq), named(k, K, K), named(v, V, V), dim="d", key_dim="key", return_weights=True)
    assert w.names == ("head", "batch", "seq", "key")
    np.testing.assert_allclose(host(w.sum("key")), np.ones((3, 2, 4)))


def test_float32_stays_float32(rng):
    q, k, v = qkv(rng, dtype="float32")
    mask = nt.tensor(rng.standard_normal((4, 5)), names=("seq", "key"))  # float64: cast to the scores' dtype
    out, w = sdpa(named(q, Q, Q), named(k, K, K), named(v, V, V), dim="d", key_dim="key", mask=mask,
                  return_weights=True)
    assert out.dtype == nt.float32 and w.dtype == nt.float32
    ro, _ = reference(q.astype("float64"), k.astype("float64"), v.astype("float64"), add=host(mask))
    np.testing.assert_allclose(host(out), ro, rtol=1e-4, atol=1e-5)


@given(st.permutations(Q), st.permutations(K), st.permutations(V),
       st.lists(st.sampled_from(W), unique=True, min_size=1, max_size=4), st.booleans(), st.booleans())
def test_names_in_any_order(lq, lk, lv, mask_names, bool_mask, causal):
    rng = np.random.default_rng(len(mask_names))
    q, k, v = qkv(rng, b=2, h=2, s=3, n_key=4)
    full = tuple(2 if n in ("batch", "head") else 3 if n == "seq" else 4 for n in W)
    sizes = tuple(s if n in mask_names else 1 for n, s in zip(W, full))
    raw = rng.random(sizes) < 0.7 if bool_mask else rng.standard_normal(sizes)
    mask = named(raw, W, tuple(mask_names))
    out, w = sdpa(named(q, Q, tuple(lq)), named(k, K, tuple(lk)), named(v, V, tuple(lv)), dim="d", key_dim="key",
                  mask=mask, is_causal=causal, return_weights=True)
    allowed = raw if bool_mask else None
    if causal:
        tri = np.tril(np.ones((3, 4), bool))
        allowed = tri if allowed is None else allowed & tri
    ro, rw = reference(q, k, v, allowed=allowed, add=None if bool_mask else raw)
    np.testing.assert_allclose(host(out), arrange(ro, ("batch", "head", "seq", "e"), out.names), atol=1e-12)
    np.testing.assert_allclose(host(w), arrange(rw, W, w.names), atol=1e-12)


# ----------------------------------------------------------------------------- masks


MASKS = [("seq", "key"), ("key", "seq"), ("batch", "key"), ("key",), ("key", "head", "seq", "batch"),
         ("head", "seq", "key")]


@pytest.mark.parametrize("mask_names", MASKS)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mask_aligned_by_name(rng, mask_names, kind):
    q, k, v = qkv(rng)
    full = dict(zip(W, (2, 3, 4, 5)))
    sizes = tuple(full[n] if n in mask_names else 1 for n in W)
    raw = rng.random(sizes) < 0.6 if kind == "bool" else rng.standard_normal(sizes)
    out, w = sdpa(named(q, Q, Q), named(k, K, K), named(v, V, V), dim="d", key_dim="key",
                  mask=named(raw, W, mask_names), return_weights=True)
    ro, rw = reference(q, k, v, allowed=raw if kind == "bool" else None, add=raw if kind == "float" else None)
    np.testing.assert_allclose(host(out), ro, atol=1e-12)
    np.testing.assert_allclose(host(w), rw, atol=1e-12)


def test_size_one_mask_dims_broadcast(rng):
    q, k, v = qkv(rng)
    raw = rng.random((2, 1, 5)) < 0.5
    out = sdpa(named(q, Q, Q), named(k, K, K), named(v, V, V), dim="d", key_dim="key",
               mask=nt.tensor(raw, names=("batch", "seq", "key")))
    np.testing.assert_allclose(host(out), reference(q, k, v, allowed=raw[:, None])[0], atol=1e-12)


@pytest.mark.parametrize("n_query, n_key", [(4, 4), (4, 6), (6, 4)])
def test_causal_is_top_left_aligned(rng, n_query, n_key):
    q, k, v = qkv(rng, s=n_query, n_key=n_key)
    args = (named(q, Q, Q), named(k, K, K), named(v, V, V))
    out, w = sdpa(*args, dim="d", key_dim="key", is_causal=True, return_weights=True)
    allowed = np.arange(n_key)[None, :] <= np.arange(n_query)[:, None]
    ro, rw = reference(q, k, v, allowed=allowed)
    np.testing.assert_allclose(host(out), ro, atol=1e-12)
    np.testing.assert_allclose(host(w), rw, atol=1e-12)
    assert (host(w)[..., ~allowed] == 0).all()
    same = sdpa(*args, dim="d", key_dim="key", mask=causal_mask(n_query, n_key))
    assert_close(same, out)


def test_causal_combines_with_a_bool_mask(rng):
    q, k, v = qkv(rng)
    pad = rng.random((2, 5)) < 0.7
    out = sdpa(named(q, Q, Q), named(k, K, K), named(v, V, V), dim="d", key_dim="key", is_causal=True,
               mask=nt.tensor(pad, names=("batch", "key")))
    allowed = np.tril(np.ones((4, 5), bool)) & pad[:, None, None, :]
    np.testing.assert_allclose(host(out), reference(q, k, v, allowed=allowed)[0], atol=1e-12)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_give_zero_weights_and_output(rng, kind):
    q, k, v = qkv(rng)
    allowed = rng.random((4, 5)) < 0.6
    allowed[1] = False
    allowed[0, 0] = True
    raw = allowed if kind == "bool" else np.where(allowed, 0.0, -np.inf)
    mask = nt.tensor(raw, names=("seq", "key"))
    args = (named(q, Q, Q, requires_grad=True), named(k, K, K, requires_grad=True),
            named(v, V, V, requires_grad=True))
    out, w = sdpa(*args, dim="d", key_dim="key", mask=mask, return_weights=True)
    assert (host(w)[:, :, 1] == 0).all() and (host(out)[:, :, 1] == 0).all()
    np.testing.assert_allclose(host(out), reference(q, k, v, allowed=allowed)[0], atol=1e-12)
    out.sum().backward()
    for t in args:
        assert np.isfinite(host(t.grad)).all()
    assert (host(args[0].grad)[:, :, 1] == 0).all()


def test_no_keys_gives_zeros(rng):
    q, k, v = qkv(rng, n_key=0)
    out = sdpa(named(q, Q, Q), named(k, K, K), named(v, V, V), dim="d", key_dim="key")
    assert out.shape == (2, 3, 4, 2) and not host(out).any()


# ----------------------------------------------------------------------------- multi-query


def test_multi_query_keys_lack_the_head_dim(rng):
    q, k, v = qkv(rng, h=3)
    k1, v1 = k[:, :1], v[:, :1]  # one key/value head shared by every query head
    lk, lv = ("batch", "key", "d"), ("key", "e", "batch")
    out, w = sdpa(named(q, Q, ("batch", "seq", "head", "d")), named(k1, K, lk), named(v1, V, lv), dim="d",
                  key_dim="key", query_dim="seq", return_weights=True)
    assert out.names == ("batch", "seq", "head", "e") and w.names == ("batch", "head", "seq", "key")
    ro, rw = reference(q, k1, v1)
    np.testing.assert_allclose(host(out), ro.transpose(0, 2, 1, 3), atol=1e-12)
    np.testing.assert_allclose(host(w), rw, atol=1e-12)


def test_size_one_batch_dims_broadcast(rng):
    q, k, v = qkv(rng)
    out = sdpa(named(q, Q, Q), named(k[:1], K, K), named(v[:, :1], V, V), dim="d", key_dim="key")
    np.testing.assert_allclose(host(out), reference(q, k[:1], v[:, :1])[0], atol=1e-12)


# ----------------------------------------------------------------------------- gradients


def small(rng, requires_grad=True, **kw):
    q, k, v = qkv(rng, b=1, h=2, s=3, n_key=4, d=2, e=2, **kw)
    return (named(q, Q, ("batch", "seq", "head", "d"), requires_grad=requires_grad),
            named(k, K, ("head", "key", "batch", "d"), requires_grad=requires_grad),
            named(v, V, ("batch", "head", "key", "e"), requires_grad=requires_grad))


def _pad_mask(rng):
    allowed = rng.random((3, 4)) < 0.6
    allowed[:, 0] = True
    allowed[2] = False  # one query with nothing to attend
    return nt.tensor(allowed, names=("seq", "key"))


CONFIGS = {
    "plain": lambda rng: {},
    "causal": lambda rng: {"is_causal": True},
    "bool": lambda rng: {"mask": _pad_mask(rng)},
    "causal+bool": lambda rng: {"is_causal": True, "mask": _pad_mask(rng)},
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_gradcheck(rng, config):
    kw = CONFIGS[config](rng)
    gradcheck(lambda q, k, v: sdpa(q, k, v, dim="d", key_dim="key", **kw), *small(rng))


def test_gradcheck_float_mask_and_weights(rng):
    mask = nt.tensor(rng.standard_normal((4, 2, 3)), names=("key", "head", "seq"), requires_grad=True)
    gradcheck(lambda q, k, v, m: sdpa(q, k, v, dim="d", key_dim="key", mask=m, is_causal=True,
                                      return_weights=True), *small(rng), mask)


def test_gradcheck_multi_query(rng):
    q, _, _ = small(rng)
    k = nt.tensor(rng.standard_normal((4, 2)), names=("key", "d"), requires_grad=True)
    v = nt.tensor(rng.standard_normal((2, 4)), names=("e", "key"), requires_grad=True)
    gradcheck(lambda q, k, v: sdpa(q, k, v, dim="d", key_dim="key", query_dim="seq"), q, k, v)


@pytest.mark.parametrize("config", ["plain", "causal+bool"])
def test_gradgradcheck(rng, config):
    kw = CONFIGS[config](rng)
    gradgradcheck(lambda q, k, v: sdpa(q, k, v, dim="d", key_dim="key", **kw), *small(rng))


def test_gradgradcheck_float_mask_and_weights(rng):
    mask = nt.tensor(rng.standard_normal((3, 4)), names=("seq", "key"), requires_grad=True)
    gradgradcheck(lambda q, k, v, m: sdpa(q, k, v, dim="d", key_dim="key", mask=m, return_weights=True),
                  *small(rng), mask)


def test_both_backward_paths_agree(rng):
    """The first-order backward (stashed exponentials) equals the create_graph one (recomputed)."""
    mask = nt.tensor(rng.standard_normal((3, 4)), names=("seq", "key"), requires_grad=True)
    inputs = small(rng) + (mask,)

    def grads(create_graph):
        out, w = sdpa(*inputs[:3], dim="d", key_dim="key", mask=mask, is_causal=True, return_weights=True)
        loss = (out * out).sum() + (w * w).sum()
        return nt.grad(loss, inputs, create_graph=create_graph)

    for fast, slow in zip(grads(False), grads(True)):
        assert_close(fast, slow.detach(), rtol=1e-10, atol=1e-12)


def test_editing_returned_weights_in_place_is_caught(rng):
    _, w = sdpa(*small(rng), dim="d", key_dim="key", return_weights=True)
    with nt.no_grad():
        w.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        w.sum().backward()


# ----------------------------------------------------------------------------- dropout


def test_dropout_is_seeded_and_scales_kept_weights(rng):
    inputs = small(rng, requires_grad=False)
    _, plain = sdpa(*inputs, dim="d", key_dim="key", return_weights=True)
    nt.manual_seed(7)
    out1, w1 = sdpa(*inputs, dim="d", key_dim="key", dropout_p=0.4, return_weights=True)
    nt.manual_seed(7)
    out2, _ = sdpa(*inputs, dim="d", key_dim="key", dropout_p=0.4, return_weights=True)
    assert_close(out1, out2)
    kept = host(w1) != 0
    np.testing.assert_allclose(host(w1)[kept], host(plain)[kept] / 0.6, rtol=1e-12)
    out3 = sdpa(*inputs, dim="d", key_dim="key", dropout_p=0.4)
    assert not np.allclose(host(out3), host(out1))
    # the output is the dropped weights times v
    v = host(inputs[2])  # (batch, head, key, e)
    np.testing.assert_allclose(host(out1), np.einsum("bhsk,bhke->bshe", host(w1), v), atol=1e-12)


def test_dropout_statistics():
    q = nt.zeros({"batch": 4, "seq": 64, "d": 2})
    k = nt.zeros({"batch": 4, "key": 64, "d": 2})
    v = nt.ones({"batch": 4, "key": 64, "e": 1})
    out, w = sdpa(q, k, v, dim="d", key_dim="key", dropout_p=0.25, return_weights=True)
    dropped = float((host(w) == 0).mean())
    assert abs(dropped - 0.25) < 0.02
    assert abs(float(host(out).mean()) - 1.0) < 0.02  # uniform weights 1/64, rescaled: mean output is 1
    zero = sdpa(q, k, v, dim="d", key_dim="key", dropout_p=1.0)
    assert not host(zero).any()


def test_dropout_backward_uses_the_forward_mask(rng):
    q, k, v = small(rng)
    nt.manual_seed(3)
    out, w = sdpa(q, k, v, dim="d", key_dim="key", dropout_p=0.5, return_weights=True)
    g = rng.standard_normal(out.shape)
    out.backward(nt.tensor(g, names=out.names))
    wd = host(w)  # (batch, head, seq, key), dropped and rescaled
    gv = np.einsum("bhsk,bshe->bhke", wd, g)
    np.testing.assert_allclose(host(v.grad), gv, atol=1e-12)
    # q's gradient through the same mask: dS = P * (dP - rowsum(dP * P)), dP = (g v^T) * keep / (1 - p)
    qa, ka, va = host(q).transpose(0, 2, 1, 3), host(k).transpose(2, 0, 1, 3), host(v)
    p = reference(qa, ka, va)[1]
    keep = (wd != 0) / 0.5
    dp = np.einsum("bshe,bhke->bhsk", g, va) * keep
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    gq = np.einsum("bhsk,bhkd->bshd", ds, ka) / np.sqrt(2)
    np.testing.assert_allclose(host(q.grad), gq, atol=1e-12)


def test_gradcheck_with_a_fixed_dropout_mask(rng):
    def fn(q, k, v):
        nt.manual_seed(11)  # the same mask on every evaluation
        return sdpa(q, k, v, dim="d", key_dim="key", dropout_p=0.3, is_causal=True)

    inputs = small(rng)
    gradcheck(fn, *inputs)
    gradgradcheck(fn, *inputs)


# ----------------------------------------------------------------------------- causal_mask


def test_causal_mask():
    m = causal_mask(3, 4)
    assert m.names == ("seq", "key") and m.dtype == nt.bool
    np.testing.assert_array_equal(host(m), np.tril(np.ones((3, 4), bool)))
    m = causal_mask(4, dim="q", key_dim="k")
    assert m.names == ("q", "k") and m.shape == (4, 4)
    np.testing.assert_array_equal(host(m), np.tril(np.ones((4, 4), bool)))
    with pytest.raises(nt.NamesError, match="duplicate dim name 'seq'"):
        causal_mask(3, dim="seq", key_dim="seq")
    with pytest.raises(ValueError, match="sizes must be >= 0"):
        causal_mask(-1)


# ----------------------------------------------------------------------------- errors


def attend(q_names, k_names, v_names, mask_names=None, sizes=None, **kw):
    sizes = {"batch": 2, "head": 2, "seq": 3, "key": 4, "d": 2, "e": 2, "x": 2, **(sizes or {})}

    def make(names):
        return nt.zeros(*[sizes.get(n, 2) for n in names], names=names)

    mask = None if mask_names is None else make(mask_names).bool()
    return sdpa(make(q_names), make(k_names), make(v_names), mask=mask, **{"dim": "d", "key_dim": "key", **kw})


NAME_ERRORS = [
    # (q, k, v, mask, kwargs, fragment)
    (("batch", "head", "seq", "d"), ("batch", "key", "d"), ("batch", "key", "d"), None, {},
     (r"cannot infer the queries' sequence dim: q has 2 dims that are neither dim='d' nor dims of k: "
      r"'head', 'seq'.*Pass query_dim=")),
    (("batch", "d"), ("batch", "key", "d"), ("batch", "key", "d"), None, {}, r"and q has none"),
    (("batch", "seq", "d"), ("batch", "seq", "d"), ("batch", "seq", "d"), None, {},
     r"key_dim='key' must be the keys' sequence dim, in k and v, but k has no dim 'key'"),
    (("batch", "seq", "d"), ("batch", "key", "d"), ("batch", "seq", "d"), None, {}, r"but v has no dim 'key'"),
    (("batch", "seq", "d"), ("batch", "seq", "d"), ("batch", "seq", "d"), None, {"key_dim": "seq"},
     r"key_dim='seq' is also a dim of q.*k.rename\(seq='key'\)"),
    (("batch", "seq", "x"), ("batch", "key", "d"), ("batch", "key", "d"), None, {}, r"but q has no dim 'd'"),
    (("batch", "seq", "d"), ("batch", "key", "d"), ("batch", "key", "d"), None, {"dim": "key"},
     r"must be different dims"),
    (("batch", None, "d"), ("batch", "key", "d"), ("batch", "key", "d"), None, {},
     r"dim 1 of q is unnamed \(q \('batch', None, 'd'\), k \('batch', 'key', 'd'\), v \('batch', 'key', 'd'\)\)"),
    (("batch", "seq", "d"), ("batch", "x", "key", "d"), ("batch", "key", "d"), None, {},
     r"k's dim 'x' is not a batch dim of q"),
    (("batch", "seq", "d"), ("batch", "key", "d"), ("batch", "key", "d", "x"), None, {},
     r"exactly one value-feature dim.*found 'd', 'x'"),
    (("batch", "seq", "d"), ("batch", "key", "d"), ("batch", "key"), None, {}, r"found none"),
    (("batch", "seq", "d"), ("batch", "key", "d"), ("batch", "key", "seq"), None, {},
     r"v's value-feature dim 'seq' is the queries' sequence dim"),
    (("batch", "seq", "d"), ("batch", "key", "d"), ("batch", "key", "d"), ("seq", "x"), {},
     r"the mask's dim 'x' is not a dim of the attention weights \('batch', 'seq', 'key'\)"),
    (("batch", "seq", "d"), ("batch", "key", "d"), ("batch", "key", "d"), ("seq", None), {},
     r"the mask is aligned to the attention weights \('batch', 'seq', 'key'\) by name, but its dim 1 is unnamed"),
    (("batch", "head", "seq", "d"), ("batch", "key", "d"), ("batch", "key", "d"), None, {"query_dim": "d"},
     r"query_dim='d' must be the queries' sequence dim"),
    (("batch", "seq", "d"), ("batch", "key", "d", "seq"), ("batch", "key", "d"), None, {"query_dim": "seq"},
     r"query_dim='seq' is also a dim of k"),
]


@pytest.mark.parametrize("q, k, v, mask, kw, fragment", NAME_ERRORS)
def test_name_errors(q, k, v, mask, kw, fragment):
    with pytest.raises(nt.NamesError, match=fragment) as info:
        attend(q, k, v, mask, **kw)
    assert str(info.value).startswith("scaled_dot_product_attention: ")


SIZE_ERRORS = [
    ({"k": {"d": 3}}, r"q and k must have the same size along their feature dim 'd': 2 vs 3"),
    ({"v": {"key": 5}}, r"k and v must have the same size along key_dim 'key': 4 vs 5"),
    ({"k": {"batch": 3}}, r"the batch dim 'batch' has sizes 2 \(q\), 3 \(k\), 2 \(v\)"),
    ({"mask": {"seq": 2}}, r"the mask's dim 'seq' has size 2 but the weights' has 3"),
]


@pytest.mark.parametrize("changes, fragment", SIZE_ERRORS)
def test_size_errors(changes, fragment):
    sizes = {"batch": 2, "seq": 3, "key": 4, "d": 2}

    def make(which, names):
        return nt.zeros(*[{**sizes, **changes.get(which, {})}[n] for n in names], names=names)

    q, k, v = make("q", ("batch", "seq", "d")), make("k", ("batch", "key", "d")), make("v", ("key", "batch", "d"))
    mask = make("mask", ("seq", "key")).bool()
    with pytest.raises(ValueError, match=fragment):
        sdpa(q, k, v, dim="d", key_dim="key", mask=mask)


def test_type_errors():
    q = nt.zeros({"seq": 2, "d": 2})
    k = nt.zeros({"key": 2, "d": 2})
    with pytest.raises(TypeError, match="one floating-point dtype"):
        sdpa(q, k, k.double(), dim="d", key_dim="key")
    with pytest.raises(TypeError, match="one floating-point dtype"):
        sdpa(q.long(), k.long(), k.long(), dim="d", key_dim="key")
    with pytest.raises(TypeError, match="mask must be bool .* or floating point"):
        sdpa(q, k, k, dim="d", key_dim="key", mask=nt.zeros({"seq": 2, "key": 2}).long())
    with pytest.raises(TypeError, match="key_dim= must be a dim name"):
        sdpa(q, k, k, dim="d", key_dim=0)
    with pytest.raises(TypeError, match="v must be a Tensor"):
        sdpa(q, k, [1.0], dim="d", key_dim="key")
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\]"):
        sdpa(q, k, k, dim="d", key_dim="key", dropout_p=1.5)
