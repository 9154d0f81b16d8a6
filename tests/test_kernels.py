"""The NumPy backend's blockwise kernels: the same results on one thread and on several, and the
row-wise LayerNorm/RMSNorm kernels against the generic backend methods (in float64)."""

import threading

import numpy as np
import pytest
import threadpoolctl

import namedtensor as nt
from namedtensor.backends import numpy_kernels
from namedtensor.backends.base import Backend
from namedtensor.backends.numpy_backend import NumpyBackend
from namedtensor.ops.normalization import layer_norm, rms_norm
from helpers import grads


@pytest.fixture
def small_blocks(monkeypatch):
    # many blocks on small arrays, so every thread gets work and the last block is partial
    monkeypatch.setattr(numpy_kernels, "BLOCK", 1000)
    previous = nt.get_num_threads()
    yield
    nt.set_num_threads(previous)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_kernels_agree_across_thread_counts(small_blocks, threads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10_537).astype(np.float32) * 3
    g = rng.standard_normal(10_537).astype(np.float32)
    nt.set_num_threads(1)
    ref_erf = numpy_kernels.erf32(x)
    ref_y, ref_cdf = numpy_kernels.gelu(x, None)
    ref_g = numpy_kernels.gelu_backward(x, ref_cdf, g)
    nt.set_num_threads(threads)
    assert nt.get_num_threads() == threads
    np.testing.assert_array_equal(numpy_kernels.erf32(x), ref_erf)
    y, cdf = numpy_kernels.gelu(x, None)
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_array_equal(cdf, ref_cdf)
    np.testing.assert_array_equal(numpy_kernels.gelu_backward(x, cdf, g), ref_g)


def test_kernels_take_any_layout(small_blocks):
    x = np.random.default_rng(1).standard_normal((30, 70)).astype(np.float32)
    y, cdf = numpy_kernels.gelu(x.T, None)  # a transposed view is read in its logical order
    assert y.shape == (70, 30)
    np.testing.assert_array_equal(y, numpy_kernels.gelu(np.ascontiguousarray(x.T), None)[0])


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_set_num_threads_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="positive int"):
        nt.set_num_threads(bad)


def _blas_threads() -> list:
    return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]


def test_set_num_threads_gives_the_products_to_one_pool(small_blocks):
    B = nt.backends.cpu()
    nt.set_num_threads(1)
    assert _blas_threads() and set(_blas_threads()) == {1}
    assert B.matmul is np.matmul  # one thread: BLAS multiplies, with no Python call in between
    nt.set_num_threads(2)
    # BLAS has one thread, whose idle workers cannot spin beside the pool; the pool shares the products
    assert set(_blas_threads()) == {1} and B.matmul is numpy_kernels.matmul
    with numpy_kernels.blas_threads():  # lent for the linear-algebra routines
        assert set(_blas_threads()) == {2}
    assert set(_blas_threads()) == {1}
    seen = []
    svd = np.linalg.svd
    try:
        np.linalg.svd = lambda *a, **k: seen.append(_blas_threads()) or svd(*a, **k)
        B.svd(np.eye(3), False)
    finally:
        np.linalg.svd = svd
    assert seen and set(seen[0]) == {2}
    from namedtensor.backends import numpy_backend

    einsum = np.einsum
    seen.clear()
    try:
        np.einsum = lambda *a, **k: seen.append(_blas_threads()) or einsum(*a, **k)
        B.einsum("ij,jk->ik", np.ones((3, 4)), np.ones((4, 5)))  # small: BLAS keeps its one thread
        numpy_backend._LEND_BLAS_FROM, before = 1, numpy_backend._LEND_BLAS_FROM
        try:
            B.einsum("ij,jk->ik", np.ones((3, 4)), np.ones((4, 5)))  # large: lent the pool's threads
        finally:
            numpy_backend._LEND_BLAS_FROM = before
    finally:
        np.einsum = einsum
    assert [set(t) for t in seen] == [{1}, {2}]
    with numpy_kernels.blas_threads():  # blocks open at once share the loan
        with numpy_kernels.blas_threads():
            assert set(_blas_threads()) == {2}
        assert set(_blas_threads()) == {2}
    assert set(_blas_threads()) == {1}
    nt.set_num_threads(1)
    assert B.matmul is np.matmul and set(_blas_threads()) == {1}


PRODUCTS = {  # a's shape, b's shape, how the work is shared
    "a matrix by rows": ((37, 20), (20, 11), "rows"),
    "a matrix by columns": ((8, 6), (6, 31), "columns"),
    "a matrix by the contracted dim": ((12, 40), (40, 10), "contracted"),
    "a stack by its first axis": ((6, 9, 8), (6, 8, 5), "stack"),
    "b broadcast along the stack": ((6, 3, 8, 5), (1, 3, 5, 8), "stack"),
    "a stack too short to share: by rows": ((1, 2, 30, 6), (1, 2, 6, 4), "rows"),
    "a matrix times a stack": ((30, 6), (4, 6, 7), "rows"),
}


@pytest.mark.parametrize("case", PRODUCTS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("given_out", [False, True])
@pytest.mark.parametrize("add", [None, "along rows", "along columns"])
def test_the_pool_shares_products_with_matmuls_values(small_blocks, monkeypatch, case, dtype, given_out, add):
    monkeypatch.setattr(numpy_kernels, "_SPLIT_FROM", 1)
    a_shape, b_shape, how = PRODUCTS[case]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
    want = np.matmul(a, b)
    if add is not None:  # a linear layer's bias: (out,) along the rows, or (out, 1) for a dim inside
        add = rng.standard_normal(want.shape[-1] if add == "along rows" else (want.shape[-2], 1)).astype(dtype)
        want = want + add
    calls = []
    matmul = np.matmul
    monkeypatch.setattr(numpy_kernels.np, "matmul", lambda x, y, **k: calls.append((x.shape, y.shape)) or matmul(x, y, **k))
    nt.set_num_threads(3)
    out = np.full(want.shape, np.nan, dtype) if given_out else None
    got = numpy_kernels.matmul(a, b, out, add=add)
    assert got.dtype == want.dtype and got.shape == want.shape and (out is None or got is out)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)
    assert len(calls) == 3  # one BLAS call per thread
    covered = {"rows": lambda x, y: x[-2], "columns": lambda x, y: y[-1], "contracted": lambda x, y: x[-1],
               "stack": lambda x, y: x[0]}[how]
    whole = {"rows": a_shape[-2], "columns": b_shape[-1], "contracted": a_shape[-1], "stack": a_shape[0]}[how]
    assert sum(covered(x, y) for x, y in calls) == whole


@pytest.mark.parametrize("pooled", [False, True])
def test_addmm_adds_the_bias_to_the_product(small_blocks, monkeypatch, pooled):
    monkeypatch.setattr(numpy_kernels, "_SPLIT_FROM", 1)
    nt.set_num_threads(2 if pooled else 1)
    assert numpy_kernels.pool_does_products() is pooled
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((40, 8), (8, 6), (6,)))
    want = np.matmul(a, b) + c
    for B in (nt.backends.cpu(), super(type(nt.backends.cpu()), nt.backends.cpu())):  # the hook and the default
        np.testing.assert_allclose(B.addmm(c, a, b), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("why", ["one thread", "small", "integers", "a vector"])
def test_the_pool_leaves_other_products_to_numpy(small_blocks, monkeypatch, why):
    monkeypatch.setattr(numpy_kernels, "_SPLIT_FROM", 1 << 62 if why == "small" else 1)
    a = np.arange(60).reshape(6, 10) % 7
    b = np.arange(10) if why == "a vector" else np.arange(40).reshape(10, 4) % 5
    if why != "integers":
        a, b = a.astype(np.float32), b.astype(np.float32)
    calls = []
    matmul = np.matmul
    monkeypatch.setattr(numpy_kernels.np, "matmul", lambda *x, **k: calls.append(1) or matmul(*x, **k))
    nt.set_num_threads(1 if why == "one thread" else 2)
    np.testing.assert_array_equal(numpy_kernels.matmul(a, b), matmul(a, b))
    assert calls == [1]


@pytest.mark.parametrize("threads", [2, 3, 4])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_independent_products_run_side_by_side_in_pieces(small_blocks, monkeypatch, threads, dtype):
    monkeypatch.setattr(numpy_kernels, "_SPLIT_FROM", 1)
    rng = np.random.default_rng(0)
    g, w, x = (rng.standard_normal(s).astype(dtype) for s in ((37, 5), (5, 9), (37, 9)))
    pairs = [(g, w), (g.T, x), (w.T, g.T)]  # rows outnumber columns, then the other way round
    calls = []
    matmul = np.matmul
    monkeypatch.setattr(numpy_kernels.np, "matmul", lambda a, b, **k: calls.append((a.shape, b.shape)) or matmul(a, b, **k))
    nt.set_num_threads(threads)
    got = numpy_kernels.matmuls(pairs)
    for out, (a, b) in zip(got, pairs):
        assert out.dtype == a.dtype
        np.testing.assert_allclose(out, matmul(a, b), rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)
    # a share of the threads per product, at least one, each piece whole along the contracted dim
    assert len(calls) == sum(max(1, threads * (i + 1) // 3 - threads * i // 3) for i in range(3))
    assert all(a[-1] == b[-2] and a[-1] in (5, 37) for a, b in calls)


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
@pytest.mark.parametrize("columns", [1, 3, 9])
def test_column_sums_go_beside_the_products_on_the_first_products_threads(small_blocks, monkeypatch, threads, columns):
    monkeypatch.setattr(numpy_kernels, "_SPLIT_FROM", 1)
    rng = np.random.default_rng(1)
    g, w, x = (rng.standard_normal(s).astype(np.float32) for s in ((37, columns), (columns, 9), (37, 9)))
    other = rng.standard_normal((37, 5)).astype(np.float32)
    where = []
    total = np.sum
    monkeypatch.setattr(numpy_kernels.np, "sum", lambda s, **k: where.append(threading.get_ident()) or total(s, **k))
    matmul = np.matmul
    monkeypatch.setattr(numpy_kernels.np, "matmul", lambda a, b, **k: where.append((a.shape, threading.get_ident())) or matmul(a, b, **k))
    nt.set_num_threads(threads)
    gx, gw, g_sum, other_sum = numpy_kernels.matmuls([(g, w), (g.T, x)], (g, other))
    np.testing.assert_allclose(gx, matmul(g, w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, matmul(g.T, x), rtol=1e-5, atol=1e-6)
    for got, s in ((g_sum, g), (other_sum, other)):
        assert got.shape == s.shape[1:] and got.dtype == s.dtype
        np.testing.assert_allclose(got, total(s, axis=0), rtol=1e-5, atol=1e-6)
    if threads > 1:
        # every sum ran on a thread that made a piece of the first product, none on the caller's
        first = {t for e in where if isinstance(e, tuple) and e[0][-1] == columns for t in [e[1]]}
        sums = {e for e in where if not isinstance(e, tuple)}
        assert sums and sums <= first and threading.get_ident() not in sums


@pytest.mark.parametrize("why", ["one thread", "small", "a stack", "mixed dtypes"])
def test_independent_products_go_one_after_the_other_where_the_pool_does_not_take_them(small_blocks, monkeypatch, why):
    monkeypatch.setattr(numpy_kernels, "_SPLIT_FROM", 1 << 62 if why == "small" else 1)
    a = np.ones((2, 6, 4) if why == "a stack" else (6, 4), np.float32)
    b = np.ones((4, 3), np.float64 if why == "mixed dtypes" else np.float32)
    seen = []
    monkeypatch.setattr(numpy_kernels, "matmul", lambda x, y: seen.append(1) or np.matmul(x, y))
    nt.set_num_threads(1 if why == "one thread" else 2)
    got = numpy_kernels.matmuls([(a, b), (a, b)])
    assert seen == [1, 1] and all(np.array_equal(out, np.matmul(a, b)) for out in got)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("wanted", ["all", "the weight's", "the input's"])
def test_a_linear_layer_learns_the_same_on_one_thread_and_in_the_pool(small_blocks, monkeypatch, bias, wanted):
    monkeypatch.setattr(numpy_kernels, "_SPLIT_FROM", 1)
    rng = np.random.default_rng(0)
    x = nt.tensor(rng.standard_normal((4, 16, 24)).astype(np.float32), names=("b", "s", "in"))
    w = nt.tensor(rng.standard_normal((12, 24)).astype(np.float32), names=("out", "in"))
    b = nt.tensor(rng.standard_normal(12).astype(np.float32), names=("out",)) if bias else None
    results = []
    for threads in (1, 2):  # on 2 both gradients are two products side by side, on raw arrays
        nt.set_num_threads(threads)
        wt = w.detach().requires_grad_(wanted != "the input's")
        xt = x.detach().requires_grad_(wanted != "the weight's")
        bt = b.detach().requires_grad_(wanted == "all") if bias else None
        y = nt.nn.functional.linear(xt, wt, bt)
        inputs = [t for t in (xt, wt, bt) if t is not None and t.requires_grad]
        grads = nt.grad(y.square().sum(), inputs)
        assert [g.names for g in grads] == [t.names for t in inputs]
        results.append([y.detach().numpy(), *(g.numpy() for g in grads)])
    for one, pooled in zip(*results):
        np.testing.assert_allclose(pooled, one, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- LayerNorm / RMSNorm rows


def norm_case(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)  # an offset mean, so centring matters
    w, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    return x, w, b, rng.standard_normal(shape).astype(dtype)


def run_norm(x, w, b, g, centered):
    """The kernels' forward and every gradient."""
    n = x.shape[-1]
    y, mean, rstd = numpy_kernels.norm_rows(x, n, w, b, 1e-5, centered)
    return (y, mean, rstd, *numpy_kernels.norm_rows_backward(x, n, mean, rstd, w, g, True, w is not None, centered))


def generic_norm(x, w, b, g, centered):
    """The generic backend methods in float64: the reference."""
    B, n = NumpyBackend(), x.shape[-1]
    x, g = x.astype(np.float64), g.astype(np.float64)
    w, b = (None if p is None else p.astype(np.float64) for p in (w, b))
    y, mean, rstd = Backend.norm_rows(B, x, n, w, b, 1e-5, centered)
    return (y, mean, rstd, *Backend.norm_rows_backward(B, x, n, mean, rstd, w, g, True, w is not None, centered))


# 300 rows of 37: blocks of 27 rows, the last one partial; 2 rows of 5000: one row a block, fewer
# rows than threads, scratch too large to keep; one row
@pytest.mark.parametrize("shape", [(3, 100, 37), (2, 5000), (1, 37)])
@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize("use_w", [True, False])
@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-13)])
def test_norm_rows_match_the_generic_methods_on_any_thread_count(small_blocks, shape, centered, use_w, dtype, tol):
    x, w, b, g = norm_case(shape, dtype)
    w, b = (w, b) if use_w else (None, None)
    if not centered:
        b = None
    nt.set_num_threads(1)
    ref = run_norm(x, w, b, g, centered)
    for got, want in zip(ref, generic_norm(x, w, b, g, centered)):
        assert (got is None) == (want is None)
        if got is not None:
            assert got.dtype == dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=0, atol=tol * np.max(np.abs(want)))
    for threads in (2, 3):
        nt.set_num_threads(threads)
        for got, want in zip(run_norm(x, w, b, g, centered), ref):
            if want is not None:
                np.testing.assert_array_equal(got, want)


def test_norm_rows_backward_gives_only_the_wanted_gradients(small_blocks):
    x, w, b, g = norm_case((300, 37), np.float32)
    _, mean, rstd = numpy_kernels.norm_rows(x, 37, w, b, 1e-5, True)
    full = numpy_kernels.norm_rows_backward(x, 37, mean, rstd, w, g, True, True, True)
    for wants in [(True, False, False), (False, True, False), (False, False, True), (False, True, True)]:
        got = numpy_kernels.norm_rows_backward(x, 37, mean, rstd, w, g, *wants)
        for want, a, b_ in zip(wants, got, full):
            if want:
                np.testing.assert_array_equal(a, b_)
            else:
                assert a is None


@pytest.mark.parametrize("fn", [layer_norm, rms_norm])
def test_norms_run_the_row_kernels_for_trailing_dims_of_row_major_inputs(small_blocks, monkeypatch, fn):
    calls = []
    for name in ("norm_rows", "norm_rows_backward"):
        kernel = getattr(numpy_kernels, name)
        monkeypatch.setattr(numpy_kernels, name, lambda *a, _k=kernel, _n=name: calls.append(_n) or _k(*a))
    x, w, _, _ = norm_case((4, 30, 37), np.float32)
    xt = nt.tensor(x, names=("batch", "seq", "embed"), requires_grad=True)
    wt = nt.tensor(w, names=("embed",), requires_grad=True)
    fn(xt, "embed", wt).sum().backward()
    assert calls == ["norm_rows", "norm_rows_backward"]
    calls.clear()
    fn(xt.permute("seq", "batch", "embed"), "embed", wt).sum().backward()  # a view, not row-major
    fn(xt, "seq", wt.rename(embed="seq")[:30]).sum().backward()  # not the last dim
    assert calls == []


@pytest.mark.parametrize("fn", [layer_norm, rms_norm])
def test_norms_agree_on_row_major_and_other_layouts(small_blocks, fn):
    rng = np.random.default_rng(3)
    x = nt.tensor(rng.uniform(-2, 2, (37, 4, 30)), names=("embed", "batch", "seq"))
    w = nt.tensor(rng.uniform(-2, 2, 37), names=("embed",))
    view = x.permute("batch", "seq", "embed")  # the existing whole-array steps
    copy = nt.tensor(view.numpy().copy(), names=view.names)  # the row kernels
    for create_graph in (False, True):
        for a, b in zip(grads(lambda x, w: fn(x, "embed", w), [view, w], create_graph),
                        grads(lambda x, w: fn(x, "embed", w), [copy, w], create_graph)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fn(view, "embed", w).numpy(), fn(copy, "embed", w).numpy(), rtol=1e-12, atol=1e-12)


CONTRACTIONS = {  # subscripts, a's shape, b's shape
    "named attention scores": ("bhqd,bhkd->bhqk", (2, 3, 5, 4), (2, 3, 6, 4)),
    "output in another order": ("bhqd,bhkd->kbqh", (2, 3, 5, 4), (2, 3, 6, 4)),
    "a dim one operand alone has": ("ijx,jk->ik", (4, 5, 3), (5, 6)),
    "an outer product": ("i,j->ij", (7,), (5,)),
    "all contracted": ("ij,ij->", (4, 5), (4, 5)),
    "a linear layer by name": ("bse,oe->bso", (2, 7, 6), (5, 6)),
}


@pytest.mark.parametrize("case", CONTRACTIONS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_pool_multiplies_two_operand_contractions(small_blocks, monkeypatch, case, dtype):
    monkeypatch.setattr(numpy_kernels, "_SPLIT_FROM", 1)
    subscripts, a_shape, b_shape = CONTRACTIONS[case]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
    nt.set_num_threads(1)
    assert numpy_kernels.contract(subscripts, a, b) is None  # BLAS multiplies on one thread
    nt.set_num_threads(3)
    got = numpy_kernels.contract(subscripts, a, b)
    want = np.einsum(subscripts, a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)


@pytest.mark.parametrize("subscripts, a, b", [
    ("ij,jk->ik", np.ones((2, 3), np.int64), np.ones((3, 4), np.int64)),  # integers
    ("ii,ij->j", np.ones((3, 3)), np.ones((3, 4))),  # a letter repeated in an operand (a diagonal)
    ("ij,jk->ik", np.ones((2, 3)), np.ones((1, 4))),  # sizes that do not match
    ("ij,jk", np.ones((2, 3)), np.ones((3, 4))),  # no output given
], ids=["integers", "a diagonal", "sizes that differ", "implicit output"])
def test_the_pool_leaves_other_contractions_to_einsum(small_blocks, subscripts, a, b):
    nt.set_num_threads(2)
    assert numpy_kernels.contract(subscripts, a, b) is None
