"""Normalisation over named dims: layer_norm and rms_norm (namedtensor/ops/normalization.py).

Values against NumPy (Hypothesis: random names, any subset of dims, weights whose dims come in any
order), the name rule, gradients of first and second order (float64), the fast raw backward against
the differentiable one, and the error messages.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.normalization import layer_norm, rms_norm
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts
from helpers import grads, t64

pytestmark = pytest.mark.usefixtures("backend")


def np_norm(x, axes, w, b, eps, centered):
    """The reference; ``w``/``b`` already laid out to broadcast against ``x``."""
    if centered:
        x = x - x.mean(axis=axes, keepdims=True)
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    if w is not None:
        y = y * w
    return y if b is None else y + b


@st.composite
def norm_cases(draw):
    """An input of 1-4 dims, a nonempty subset of its dims (by name or int) and parameters with those
    dims: in the input's order, or in another order when every normalised dim is named."""
    shape, names = draw(nts.named_shapes(min_dims=1, max_dims=4, min_side=2))
    axes = sorted(draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True)))
    dims = tuple(names[a] if names[a] is not None and draw(st.booleans()) else a for a in axes)
    if len(dims) == 1 and draw(st.booleans()):
        dims = dims[0]
    order = list(range(len(axes)))
    if all(names[a] is not None for a in axes):
        order = draw(st.permutations(order))
    x = draw(nts.arrays(shape))
    p_shape = tuple(shape[axes[i]] for i in order)
    p_names = tuple(names[axes[i]] for i in order)
    w, b = draw(nts.arrays(p_shape)), draw(nts.arrays(p_shape))
    bshape = tuple(s if i in axes else 1 for i, s in enumerate(shape))
    back = np.argsort(order)  # parameter dims back into the input's order
    return x, names, tuple(axes), dims, (w, b, p_names), lambda p: np.transpose(p, back).reshape(bshape)


@given(norm_cases(), st.booleans(), st.booleans())
def test_layer_norm_matches_numpy(case, use_w, use_b):
    x, names, axes, dims, (w, b, p_names), lay = case
    out = layer_norm(nt.tensor(x, names=names), dim=dims, weight=nt.tensor(w, names=p_names) if use_w else None,
                     bias=nt.tensor(b, names=p_names) if use_b else None, eps=1e-5)
    expected = np_norm(x, axes, lay(w) if use_w else None, lay(b) if use_b else None, 1e-5, True)
    assert out.names == names
    assert_close(out.numpy(), expected, rtol=1e-9, atol=1e-9)


@given(norm_cases(), st.booleans())
def test_rms_norm_matches_numpy(case, use_w):
    x, names, axes, dims, (w, _, p_names), lay = case
    out = rms_norm(nt.tensor(x, names=names), dim=dims, weight=nt.tensor(w, names=p_names) if use_w else None,
                   eps=1e-6)
    assert out.names == names
    assert_close(out.numpy(), np_norm(x, axes, lay(w) if use_w else None, None, 1e-6, False), rtol=1e-9, atol=1e-9)


def test_layer_norm_keeps_float32_and_names_its_gradients():
    x = nt.randn(2, 3, 4, names=("batch", "seq", "embed"), requires_grad=True)
    w, b = nt.ones(4, names=("embed",), requires_grad=True), nt.zeros(4, names=("embed",), requires_grad=True)
    y = layer_norm(x, "embed", w, b)
    (y * y).sum().backward()
    assert y.dtype == nt.float32 and x.grad.dtype == nt.float32 and w.grad.dtype == nt.float32
    assert (x.grad.names, w.grad.names, b.grad.names) == (x.names, ("embed",), ("embed",))
    assert abs(float(y.detach().mean())) < 1e-6


# ----------------------------------------------------------------------------- gradients

CASES = [
    ("embed", (3,), ("embed",)),  # the last dim (the einsum fast path)
    (("seq", "embed"), (3, 2), ("embed", "seq")),  # two trailing dims, parameters in the other order
    (("batch", "embed"), (2, 3), ("batch", "embed")),  # not trailing: with a dim left between
    ("seq", (2,), ("seq",)),  # a middle dim
]


@pytest.mark.parametrize("dims,p_shape,p_names", CASES)
@pytest.mark.parametrize("params", ["wb", "w", "b", ""])
def test_layer_norm_gradcheck(dims, p_shape, p_names, params):
    x = t64((2, 2, 3), ("batch", "seq", "embed"))
    w = t64(p_shape, p_names, seed=1) if "w" in params else None
    b = t64(p_shape, p_names, seed=2) if "b" in params else None
    inputs = [t for t in (x, w, b) if t is not None]

    def fn(x, *p):
        it = iter(p)
        return layer_norm(x, dims, next(it) if w is not None else None, next(it) if b is not None else None)

    assert gradcheck(fn, *inputs)
    assert gradgradcheck(fn, *inputs)
    for fast, slow in zip(grads(fn, inputs, False), grads(fn, inputs, True)):
        assert_close(fast, slow, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dims,p_shape,p_names", CASES)
@pytest.mark.parametrize("use_w", [True, False])
def test_rms_norm_gradcheck(dims, p_shape, p_names, use_w):
    x = t64((2, 2, 3), ("batch", "seq", "embed"))
    inputs = [x, t64(p_shape, p_names, seed=1)] if use_w else [x]
    fn = lambda x, *w: rms_norm(x, dims, *w)
    assert gradcheck(fn, *inputs)
    assert gradgradcheck(fn, *inputs)
    for fast, slow in zip(grads(fn, inputs, False), grads(fn, inputs, True)):
        assert_close(fast, slow, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- errors


def test_normalization_errors():
    x = t64((2, 3, 4), ("batch", "seq", "embed"), requires_grad=False)
    with pytest.raises(nt.NamesError, match=r"layer_norm: the weight has names \('feat',\) but must have the names "
                                            r"of the normalised dims of the input \('batch', 'seq', 'embed'\), "
                                            r"\('embed',\): matched by name in any order.*Rename the weight's dims"):
        layer_norm(x, "embed", t64((4,), ("feat",)))
    with pytest.raises(nt.NamesError, match=r"layer_norm: the bias has names \('seq', 'batch'\)"):
        layer_norm(x, ("seq", "embed"), None, t64((3, 4), ("seq", "batch")))
    with pytest.raises(ValueError, match=r"rms_norm: the weight has 2 dims \(names \('seq', 'embed'\)\) but 1 dims "
                                         r"are normalised: \('embed',\)"):
        rms_norm(x, "embed", t64((3, 4), ("seq", "embed")))
    with pytest.raises(ValueError, match=r"the weight has shape \(5,\) \(names \('embed',\)\), but the normalised "
                                         r"dims \('embed',\) of the input have sizes \(4,\)"):
        layer_norm(x, "embed", t64((5,), ("embed",)))
    with pytest.raises(nt.NamesError, match="layer_norm: no dim named 'model'"):
        layer_norm(x, "model")
    with pytest.raises(ValueError, match="rms_norm: give at least one dim to normalise over"):
        rms_norm(x, ())
    with pytest.raises(TypeError, match="layer_norm: the input must be floating point, got nt.int64"):
        layer_norm(nt.tensor([[1, 2]], names=("batch", "embed")), "embed")
    with pytest.raises(TypeError, match="layer_norm: the weight is nt.float32 but the input is nt.float64"):
        layer_norm(x, "embed", nt.ones(4, names=("embed",)))
