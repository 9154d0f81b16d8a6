"""The CUDA kernels (:mod:`namedtensor.backends.cuda_kernels`) against their NumPy references
(:mod:`namedtensor.backends.kernel_reference`), in float32 and float16.

Marked ``gpu``: run on a CUDA device with CuPy.  ``tests/test_cuda_emulated.py`` runs these same
tests on the CPU, the kernels' sources compiled by g++ behind a CUDA emulation (``tests/cuda_emulator.py``).

Sizes are odd on purpose: partial warps, partial tiles (attention tiles are 32 queries x 32 keys),
rows longer than a warp takes (> 1024: a block per row), several column blocks, several chunks.

Tolerances (``TOL``), relative and absolute, on results compared in float64: float32 2e-5 (2e-6
absolute) for the row kernels and GELU, 1e-4 for attention (sums over keys in another order) and
Adam; float16 4e-3, about four half-precision ulps (both sides compute in float32 from the same
half inputs and round once; float32 summation order may move a result across a rounding boundary).
On the CPU emulation the largest error seen is a quarter of these.
"""

import math

import numpy as np
import pytest

from namedtensor.backends import cuda_kernels as ck
from namedtensor.backends import kernel_reference as ref

pytestmark = pytest.mark.gpu

DTYPES = [np.float32, np.float16]

TOL = {
    (np.float32, "rows"): dict(rtol=2e-5, atol=2e-6),
    (np.float32, "attention"): dict(rtol=1e-4, atol=1e-5),
    (np.float32, "adam"): dict(rtol=1e-4, atol=1e-6),
    (np.float16, "rows"): dict(rtol=4e-3, atol=4e-3),
    (np.float16, "attention"): dict(rtol=4e-3, atol=4e-3),
    (np.float16, "adam"): dict(rtol=4e-3, atol=4e-3),
}


@pytest.fixture(scope="module")
def cp():
    import cupy

    return cupy


def close(actual, expected, dtype, kind="rows"):
    """``actual`` (a device array) equals ``expected`` (NumPy) within the tolerance of ``dtype``/``kind``;
    NaN and infinities must match."""
    got = actual.get()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(expected, np.float64), equal_nan=True,
                               **TOL[(dtype, kind)])


def rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# ----------------------------------------------------------------------------- softmax

SOFTMAX_CASES = [
    ((7,), 0),  # one short row
    ((5, 33), -1),  # warp per row, a partial last pass
    ((3, 1500), 1),  # a block per row
    ((1, 16400), 1),  # a block of 1024 threads per row
    ((4, 9, 33), 1),  # an inner axis: two column blocks, the second partial
    ((2, 3, 5), 0),  # the first axis
    ((6, 50, 2), 1),  # inner of 2: one warp's columns mostly idle
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES)
def test_softmax(cp, rng, shape, axis, log, dtype):
    x = rand(rng, shape, dtype, 3.0)
    close(ck.softmax(cp.asarray(x), axis, log), ref.softmax(x, axis, log), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES)
def test_softmax_backward(cp, rng, shape, axis, log, dtype):
    y = ref.softmax(rand(rng, shape, dtype, 3.0), axis, log)
    g = rand(rng, shape, dtype)
    close(ck.softmax_backward(cp.asarray(y), cp.asarray(g), axis, log), ref.softmax_backward(y, g, axis, log), dtype)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_softmax_masked_entries(cp, rng, axis, log):
    # -inf entries get probability 0 (log: -inf); a slice of -inf only is NaN, as in NumPy
    x = rand(rng, (6, 40), np.float32)
    x[:, 3] = -np.inf
    x[2, :] = -np.inf
    x[:, 5] = -np.inf
    with np.errstate(invalid="ignore"):  # the reference's -inf - -inf
        expected = ref.softmax(x, axis, log)
    close(ck.softmax(cp.asarray(x), axis, log), expected, np.float32)


def test_softmax_non_contiguous_and_empty(cp, rng):
    x = rand(rng, (40, 30), np.float32)
    close(ck.softmax(cp.asarray(x).T, 1, False), ref.softmax(np.ascontiguousarray(x.T), 1, False), np.float32)
    assert ck.softmax(cp.asarray(np.zeros((0, 5), np.float32)), 1, False).shape == (0, 5)


# ----------------------------------------------------------------------------- cross-entropy

CE_CASES = [(9, 7), (5, 1024), (3, 1500), (1, 16500)]  # warp per row (to 1024), then blocks of 256 and 1024


def _targets(rng, rows, C, ignore_index):
    t = rng.integers(0, C, rows)
    t[::3] = ignore_index  # every third row ignored
    return t.astype(np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ignore_index", [-100, 2])
@pytest.mark.parametrize("rows,C", CE_CASES)
def test_cross_entropy(cp, rng, rows, C, ignore_index, dtype):
    x = rand(rng, (rows, C), dtype, 2.0)
    t = _targets(rng, rows, C, ignore_index)
    loss, lse = ck.cross_entropy(cp.asarray(x), cp.asarray(t), ignore_index)
    rloss, rlse = ref.cross_entropy(x, t, ignore_index)
    assert loss.dtype == dtype and lse.dtype == dtype
    close(loss, rloss, dtype)
    close(lse, rlse, dtype)
    assert np.all(loss.get()[t == ignore_index] == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ignore_index", [-100, 2])
@pytest.mark.parametrize("rows,C", CE_CASES)
def test_cross_entropy_backward(cp, rng, rows, C, ignore_index, dtype):
    x = rand(rng, (rows, C), dtype, 2.0)
    t = _targets(rng, rows, C, ignore_index)
    _, lse = ref.cross_entropy(x, t, ignore_index)
    g = rand(rng, (rows,), dtype)
    got = ck.cross_entropy_backward(cp.asarray(x), cp.asarray(lse), cp.asarray(t), cp.asarray(g), ignore_index)
    close(got, ref.cross_entropy_backward(x, lse, t, g, ignore_index), dtype)
    assert np.all(got.get()[t == ignore_index] == 0)


# ----------------------------------------------------------------------------- GELU


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu(cp, rng, dtype):
    x = rand(rng, (3, 77), dtype, 3.0)
    x[0, :4] = [0.0, -10.0, 10.0, -0.5]
    y, cdf = ck.gelu(cp.asarray(x))
    ry, rcdf = ref.gelu(x)
    close(y, ry, dtype)
    close(cdf, rcdf, dtype)
    g = rand(rng, x.shape, dtype)
    close(ck.gelu_backward(cp.asarray(x), cdf, cp.asarray(g)), ref.gelu_backward(x, rcdf, g), dtype)


# ----------------------------------------------------------------------------- LayerNorm / RMSNorm

NORM_CASES = [((50, 33), 33), ((2, 3, 96), 96), ((4, 1500), 1500), ((3, 5, 2, 8), 16)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape,n", NORM_CASES)
def test_norm_rows(cp, rng, shape, n, affine, centered, dtype):
    x = rand(rng, shape, dtype, 2.0) + 0.5
    w = rand(rng, (n,), dtype) if affine else None
    b = rand(rng, (n,), dtype) if affine and centered else None
    dev = (lambda a: None if a is None else cp.asarray(a))
    y, mean, rstd = ck.norm_rows(cp.asarray(x), n, dev(w), dev(b), 1e-5, centered)
    ry, rmean, rrstd = ref.norm_rows(x, n, w, b, 1e-5, centered)
    close(y, ry, dtype)
    close(rstd, rrstd, dtype)
    assert rstd.dtype == np.float32  # statistics stay float32 (documented)
    if centered:
        close(mean, rmean, dtype)
    else:
        assert mean is None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape,n", NORM_CASES)
def test_norm_rows_backward(cp, rng, shape, n, affine, centered, dtype):
    x = rand(rng, shape, dtype, 2.0) + 0.5
    w = rand(rng, (n,), dtype) if affine else None
    _, mean, rstd = ref.norm_rows(x, n, w, None, 1e-5, centered)
    g = rand(rng, shape, dtype)
    wants = (True, affine, affine and centered)
    got = ck.norm_rows_backward(cp.asarray(x), n, None if mean is None else cp.asarray(mean), cp.asarray(rstd),
                                None if w is None else cp.asarray(w), cp.asarray(g), *wants)
    expected = ref.norm_rows_backward(x, n, mean, rstd, w, g, *wants)
    for a, e in zip(got, expected):
        assert (a is None) == (e is None)
        if e is not None:
            # gw, gb are sums over rows: compare relative to their scale
            close(a, e, dtype)


def test_norm_rows_backward_only_params(cp, rng):
    x = rand(rng, (37, 20), np.float32)
    w = rand(rng, (20,), np.float32)
    _, mean, rstd = ref.norm_rows(x, 20, w, None, 1e-5, True)
    g = rand(rng, x.shape, np.float32)
    gx, gw, gb = ck.norm_rows_backward(cp.asarray(x), 20, cp.asarray(mean), cp.asarray(rstd), cp.asarray(w),
                                       cp.asarray(g), False, True, True)
    _, rgw, rgb = ref.norm_rows_backward(x, 20, mean, rstd, w, g, False, True, True)
    assert gx is None
    close(gw, rgw, np.float32)
    close(gb, rgb, np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize("shape,n", NORM_CASES)
def test_a_residual_add_and_its_norm_in_one_pass(cp, rng, shape, n, centered, dtype):
    x, r = rand(rng, shape, dtype, 2.0) + 0.5, rand(rng, shape, dtype)
    w = rand(rng, (n,), dtype)
    b = rand(rng, (n,), dtype) if centered else None
    h, y, mean, rstd = ck.add_norm_rows(cp.asarray(x), cp.asarray(r), n, cp.asarray(w),
                                        None if b is None else cp.asarray(b), 1e-5, centered)
    rh = (x + r).astype(dtype)  # the sum rounded to the dtype, as the add alone rounds it
    ry, rmean, rrstd = ref.norm_rows(rh, n, w, b, 1e-5, centered)
    np.testing.assert_array_equal(h.get(), rh)
    close(y, ry, dtype)
    close(rstd, rrstd, dtype)
    assert (mean is None) == (not centered)

    g, g_add = rand(rng, shape, dtype), rand(rng, shape, dtype)
    got = ck.add_norm_rows_backward(h, n, mean, rstd, cp.asarray(w), cp.asarray(g), cp.asarray(g_add), True, centered)
    gx, gw, gb = ref.norm_rows_backward(rh, n, rmean, rrstd, w, g, True, True, centered)
    close(got[0], (gx.astype(dtype) + g_add).astype(dtype), dtype)  # the residual stream's gradient added
    close(got[1], gw, dtype)
    assert (got[2] is None) == (not centered)
    if centered:
        close(got[2], gb, dtype)


def test_a_residual_of_another_shape_or_dtype_is_left_to_the_generic_code(cp, rng):
    x = cp.asarray(rand(rng, (4, 8), np.float32))
    with pytest.raises(ck.KernelUnsupported, match="residual"):
        ck.add_norm_rows(x, cp.asarray(rand(rng, (4, 8), np.float16)), 8, None, None, 1e-5, True)
    with pytest.raises(ck.KernelUnsupported, match="added gradient"):
        ck.add_norm_rows_backward(x, 8, None, cp.asarray(np.ones(4, np.float32)), None, x, x[:2], False, False)


# ----------------------------------------------------------------------------- Adam / AdamW


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decoupled,wd", [(True, 0.1), (False, 0.1), (True, 0.0)])
def test_adamw(cp, rng, decoupled, wd, dtype):
    shapes = [(3, 5), (0,), (1,), (ck._ADAM_CHUNK + 77,), (40, 3)]  # empty, one element, two chunks
    host = {name: [rand(rng, s, dtype) for s in shapes] for name in ("p", "g", "m")}
    host["v"] = [np.abs(rand(rng, s, dtype)) for s in shapes]
    dev = {name: [cp.asarray(a) for a in arrays] for name, arrays in host.items()}
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=wd, decoupled=decoupled)
    for step in (1, 2):  # the second step reuses the chunk table
        ck.adamw_(dev["p"], dev["g"], dev["m"], dev["v"], step=step, **kw)
        ref.adamw_(host["p"], host["g"], host["m"], host["v"], step=step, **kw)
    for name in ("p", "m", "v"):
        for a, e in zip(dev[name], host[name]):
            close(a, e, dtype, "adam")


def test_adamw_rejects_mixed_dtypes(cp):
    p = [cp.asarray(np.ones(3, np.float32)), cp.asarray(np.ones(3, np.float16))]
    with pytest.raises(ck.KernelUnsupported, match="one dtype"):
        ck.adamw_(p, p, p, p, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1,
                  decoupled=True)


# ----------------------------------------------------------------------------- attention

# (N, Lq, Lk, D, Dv): partial tiles everywhere; head dims padded to 32, 64 and 128
ATTENTION_SHAPES = [
    (2, 37, 45, 20, 24),
    (1, 1, 70, 64, 64),
    (3, 70, 33, 100, 128),
    (2, 33, 1, 8, 8),
]
MASKS = ["none", "causal", "padding", "causal+padding"]


def _keep(rng, N, Lk, mask):
    if "padding" not in mask:
        return None
    keep = rng.random((N, Lk)) < 0.7
    keep[0, :] = False  # a batch row with no key at all: every query fully masked
    return keep


def _attention_inputs(rng, shape, dtype, mask):
    N, Lq, Lk, D, Dv = shape
    q, k, v = rand(rng, (N, Lq, D), dtype), rand(rng, (N, Lk, D), dtype), rand(rng, (N, Lk, Dv), dtype)
    return q, k, v, dict(scale=1.0 / math.sqrt(D), causal="causal" in mask, key_keep=_keep(rng, N, Lk, mask))


def _dev_kw(cp, kw):
    keep = kw["key_keep"]
    return dict(kw, key_keep=None if keep is None else cp.asarray(keep))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("shape", ATTENTION_SHAPES)
def test_attention(cp, rng, shape, mask, dtype):
    q, k, v, kw = _attention_inputs(rng, shape, dtype, mask)
    out, lse = ck.attention(cp.asarray(q), cp.asarray(k), cp.asarray(v), **_dev_kw(cp, kw))
    rout, rlse = ref.attention(q, k, v, **kw)
    assert out.dtype == dtype and lse.dtype == np.float32
    close(out, rout, dtype, "attention")
    close(lse, rlse, dtype, "attention")
    if kw["key_keep"] is not None:  # fully masked queries: out 0, lse -inf
        assert np.all(out.get()[0] == 0) and np.all(lse.get()[0] == -np.inf)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("shape", ATTENTION_SHAPES)
def test_attention_backward(cp, rng, shape, mask, dtype):
    q, k, v, kw = _attention_inputs(rng, shape, dtype, mask)
    out, lse = ref.attention(q, k, v, **kw)
    g = rand(rng, out.shape, dtype)
    got = ck.attention_backward(*(cp.asarray(a) for a in (q, k, v, out, lse, g)), **_dev_kw(cp, kw))
    expected = ref.attention_backward(q, k, v, out, lse, g, **kw)
    for a, e in zip(got, expected):
        assert a.dtype == dtype
        close(a, e, dtype, "attention")


def test_attention_causal_more_queries_than_keys(cp, rng):
    # top-left aligned: queries past the last key see every key
    q, k, v, kw = _attention_inputs(rng, (1, 50, 20, 16, 16), np.float32, "causal")
    out, lse = ck.attention(cp.asarray(q), cp.asarray(k), cp.asarray(v), **kw)
    rout, rlse = ref.attention(q, k, v, **kw)
    close(out, rout, np.float32, "attention")
    close(lse, rlse, np.float32, "attention")


def test_attention_no_keys(cp, rng):
    q = rand(rng, (2, 5, 8), np.float32)
    empty = np.zeros((2, 0, 8), np.float32)
    out, lse = ck.attention(cp.asarray(q), cp.asarray(empty), cp.asarray(empty), scale=0.5, causal=False,
                            key_keep=None)
    assert np.all(out.get() == 0) and np.all(lse.get() == -np.inf)


# ----------------------------------------------------------------------------- what the kernels refuse


def test_unsupported_inputs_raise_type_error(cp, rng):
    x = cp.asarray(rand(rng, (3, 4), np.float64))
    with pytest.raises(TypeError, match="float16 or float32"):
        ck.softmax(x, 1, False)
    q = cp.asarray(rand(rng, (1, 4, 129), np.float32))
    with pytest.raises(ck.KernelUnsupported, match="head dims up to 128"):
        ck.attention(q, q, q, scale=1.0, causal=False, key_keep=None)
