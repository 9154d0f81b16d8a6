"""The NumPy backend's blocked attention (backends/numpy_attention.py) against the materialised default
(``Backend.attention``), and its dispatch from ``scaled_dot_product_attention``.

Hypothesis draws batch dims, sequence lengths, head sizes, causal and key-padding masks (queries with
no key to attend included), operand layouts (head-major views of ``(batch, seq, heads, dim)`` arrays,
keys broadcast along a batch dim) and block sizes small enough to cut the batch into blocks of heads
and the queries into pieces, on one and two threads, with the blocks' elementwise steps in NumPy or
in nt.compile's Numba kernels.
"""

import contextlib
import importlib.util
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor.backends import numpy_attention
from namedtensor.backends.base import Backend
from namedtensor.backends.numpy_backend import NumpyBackend

PLAIN = NumpyBackend()
BUDGETS = [1, 5, 20, 100, 300, numpy_attention.BLOCK_SCORES]
STEPS = ["numpy", "numba"] if importlib.util.find_spec("numba") else ["numpy"]


def _steps(which: str) -> numpy_attention.Steps:
    if which == "numpy":
        return numpy_attention.NUMPY_STEPS
    from namedtensor.backends import numba_kernels

    return numba_kernels._STEPS


@contextlib.contextmanager
def threads(n: int):
    before = nt.get_num_threads()
    nt.set_num_threads(n)
    try:
        yield
    finally:
        nt.set_num_threads(before)


def _operand(rng, batch, length, width, dtype, head_major: bool):
    """A ``(*batch, length, width)`` array; ``head_major``: a view of a ``(batch[0], length, *batch[1:],
    width)`` array, as attention sees the heads of a ``(batch, seq, heads, dim)`` tensor."""
    if head_major and len(batch) >= 1:
        a = rng.standard_normal((batch[0], length) + tuple(batch[1:]) + (width,)).astype(dtype)
        return np.moveaxis(a, 1, len(batch))
    return rng.standard_normal(tuple(batch) + (length, width)).astype(dtype)


@st.composite
def problems(draw):
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    n_query, n_key = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    d, dv = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    head_major = draw(st.booleans())
    q = _operand(rng, batch, n_query, d, np.float64, head_major)
    k = _operand(rng, batch, n_key, d, np.float64, head_major)
    v = _operand(rng, batch, n_key, dv, np.float64, head_major)
    if batch and draw(st.booleans()):  # k and v shared along the last batch dim (multi-query attention)
        k = np.broadcast_to(k[..., :1, :, :], k.shape)
        v = np.broadcast_to(v[..., :1, :, :], v.shape)
    keep = None
    if draw(st.booleans()):
        keep = rng.uniform(size=batch + (n_key,)) < draw(st.sampled_from([0.0, 0.5, 0.9]))
    return dict(q=q, k=k, v=v, key_keep=keep, causal=draw(st.booleans()), scale=draw(st.sampled_from([0.5, 1.0])),
                budget=draw(st.sampled_from(BUDGETS)), backward_budget=draw(st.sampled_from(BUDGETS)),
                min_queries=draw(st.integers(1, 4)), threads=draw(st.sampled_from([1, 2])), seed=seed,
                steps=draw(st.sampled_from(STEPS)))


@settings(max_examples=150, deadline=None)
@given(problems())
def test_the_blocks_compute_what_the_materialised_default_does(p):
    q, k, v, keep = p["q"], p["k"], p["v"], p["key_keep"]
    kw = dict(scale=p["scale"], causal=p["causal"], key_keep=keep)
    blocks = dict(budget=p["budget"], min_queries=p["min_queries"], steps=_steps(p["steps"]))
    with threads(p["threads"]), warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 or log(0) warnings for queries with no key to attend
        out, lse = numpy_attention.attention(q, k, v, **kw, **blocks)
        g = np.random.default_rng(p["seed"] + 1).standard_normal(out.shape)
        # the backward's blocks need not be the forward's
        grads = numpy_attention.attention_backward(q, k, v, out, lse, g, **kw, **dict(blocks, budget=p["backward_budget"]))
    ref_out, ref_lse = Backend.attention(PLAIN, q, k, v, **kw)
    np.testing.assert_allclose(out, ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.isfinite(lse), np.isfinite(ref_lse))
    np.testing.assert_allclose(lse[np.isfinite(lse)], ref_lse[np.isfinite(ref_lse)], rtol=1e-12)
    ref_grads = Backend.attention_backward(PLAIN, q, k, v, ref_out, ref_lse, g, **kw)
    for got, want, operand in zip(grads, ref_grads, (q, k, v)):
        assert got.shape == operand.shape
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_a_query_with_no_key_to_attend_gets_zeros_and_no_gradient():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 5, 3)).astype(np.float32) for _ in range(3))
    keep = np.ones((2, 5), bool)
    keep[1] = False  # the second sequence's queries have no key at all
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, lse = numpy_attention.attention(q, k, v, scale=1.0, causal=False, key_keep=keep)
        dq, dk, dv = numpy_attention.attention_backward(q, k, v, out, lse, np.ones_like(out), scale=1.0,
                                                        causal=False, key_keep=keep)
    assert np.all(out[1] == 0) and np.all(np.isneginf(lse[1])) and np.all(np.isfinite(lse[0]))
    assert np.all(dq[1] == 0) and np.all(dk[1] == 0) and np.all(dv[1] == 0)
    assert np.all(np.isfinite(out)) and np.abs(dq[0]).sum() > 0


def test_the_results_do_not_depend_on_the_threads_and_keep_the_operands_layout():
    rng = np.random.default_rng(1)
    q, k, v = (_operand(rng, (4, 3), 70, 8, np.float32, head_major=True) for _ in range(3))
    g = rng.standard_normal(q.shape).astype(np.float32)
    results = []
    for n in (1, 2):
        with threads(n):
            out, lse = numpy_attention.attention(q, k, v, scale=0.3, causal=True, key_keep=None, budget=4000,
                                                 min_queries=16)
            results.append((out, lse) + numpy_attention.attention_backward(
                q, k, v, out, lse, g, scale=0.3, causal=True, key_keep=None, budget=4000, min_queries=16))
    for one, two in zip(*results):
        np.testing.assert_array_equal(one, two)
    out, _, dq, dk, dv = results[0]
    for result in (out, dq, dk, dv):  # (batch, heads, seq, dim) views of (batch, seq, heads, dim) arrays
        assert np.moveaxis(result, 2, 1).flags.c_contiguous


def test_blocks_cover_the_batch_and_the_queries_once():
    blocks = numpy_attention._blocks((2, 5), 10, 10, budget=250, min_queries=3)
    covered = np.zeros((2, 5, 10), int)
    for at, pieces in blocks:
        for queries in pieces:
            covered[at + (queries,)] += 1
    assert np.all(covered == 1)
    assert [len(pieces) for _, pieces in blocks] == [1] * len(blocks) and len(blocks) == 6  # 2 heads a block
    spans = numpy_attention._blocks((6, 2), 2, 5, budget=50, min_queries=3)  # 2 heads of 10 scores: 2 of them
    assert [at for at, _ in spans] == [(slice(lo, lo + 2), slice(None)) for lo in (0, 2, 4)]
    assert numpy_attention._blocks((6, 2), 2, 5, budget=120, min_queries=3) == [((slice(None),) * 2, [slice(0, 2)])]
    cut = numpy_attention._blocks((1,), 100, 10, budget=250, min_queries=3)
    assert [q.stop - q.start for q in cut[0][1]] == [25, 25, 25, 25]  # 250 scores a piece
    assert [q.stop - q.start for q in numpy_attention._blocks((), 10, 1000, 250, 3)[0][1]] == [3, 3, 3, 1]


@pytest.mark.parametrize("which", STEPS)
@pytest.mark.parametrize("shape", [(5, 3), (4, 5, 3), (2, 4, 5, 3), (2, 3, 2, 5, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_transposed_step_swaps_and_scales_views_of_any_layout(which, shape, dtype):
    rng = np.random.default_rng(len(shape))
    whole = rng.standard_normal((*shape[:-2], shape[-2] + 2, 7)).astype(dtype)
    view = whole[..., 1:-1, 2:5]
    for a in (view, np.asfortranarray(view)):  # rows strided; axes' strides reversed
        for scale in (1, 0.3):
            got = _steps(which).transposed(a, scale)
            want = np.swapaxes(a, -1, -2) * dtype(scale)
            assert got.dtype == dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            if which == "numba":  # contiguous, so that BLAS reads it untransposed
                assert got.flags.c_contiguous


def test_other_dtypes_take_the_default():
    q = np.ones((2, 3, 4), np.float16)
    assert not numpy_attention.takes(q, q, q)
    assert not numpy_attention.takes(np.ones((2, 0, 4), np.float32), q, q)
    out, lse = PLAIN.attention(q, q, q, scale=0.5, causal=False, key_keep=None)
    assert out.dtype == np.float16 and lse.dtype == np.float32


def _counting(monkeypatch):
    calls = {"attention": 0, "attention_backward": 0}
    for name in calls:
        original = getattr(numpy_attention, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(numpy_attention, name, counted)
    return calls


def _qkv(dtype="float64"):
    rng = np.random.default_rng(2)
    q = nt.tensor(rng.standard_normal((2, 6, 3, 4)).astype(dtype), names=("batch", "seq", "heads", "d"),
                  requires_grad=True)
    k = nt.tensor(rng.standard_normal((2, 5, 3, 4)).astype(dtype), names=("batch", "key", "heads", "d"),
                  requires_grad=True)
    v = nt.tensor(rng.standard_normal((2, 5, 3, 2)).astype(dtype), names=("batch", "key", "heads", "e"),
                  requires_grad=True)
    return q, k, v


@pytest.mark.parametrize("mask", ["none", "causal", "key padding"])
def test_the_op_runs_the_blocks_keeps_names_and_passes_gradcheck(monkeypatch, mask):
    calls = _counting(monkeypatch)
    q, k, v = _qkv()
    m = nt.tensor(np.array([[1, 1, 0, 1, 1], [0, 0, 0, 0, 0]], bool), names=("batch", "key"))
    kwargs = dict(dim="d", key_dim="key", is_causal=mask == "causal", mask=m if mask == "key padding" else None)
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    assert out.names == ("batch", "seq", "heads", "e")
    stash = out.grad_fn.stash
    assert stash[0].size == out.numel() and stash[1].size == 2 * 3 * 6  # the output and lse: no scores kept
    out.sum().backward()
    assert calls == {"attention": 1, "attention_backward": 1}
    with nt.no_grad():
        expected = F.scaled_dot_product_attention(q, k, v, **kwargs, return_weights=True)[0]  # the materialised path
    np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), rtol=1e-12, atol=1e-14)
    assert nt.testing.gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, **kwargs), q, k, v)


def test_calls_the_blocks_do_not_take_run_the_materialised_path(monkeypatch):
    calls = _counting(monkeypatch)
    q, k, v = _qkv()
    float_mask = nt.tensor(np.zeros((6, 5)), names=("seq", "key"))
    with nt.no_grad():
        F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", mask=float_mask)
        F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", dropout_p=0.5)
        F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", return_weights=True)
        F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key",
                                       mask=nt.tensor(np.ones((6, 5), bool), names=("seq", "key")))
    assert calls["attention"] == 0
