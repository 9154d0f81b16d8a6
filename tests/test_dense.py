"""Fused layers: linear, embedding, dropout (namedtensor/ops/dense.py) and the nn.functional re-exports.

Values against NumPy (Hypothesis: random names, the contracted dim anywhere), the name rules,
gradients of first and second order (float64), the fast raw backward against the differentiable one,
and the error messages.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor.ops.dense import dropout, embedding, linear
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts
from helpers import grads, t64

pytestmark = pytest.mark.usefixtures("backend")


# ----------------------------------------------------------------------------- linear: values and names


@st.composite
def linear_cases(draw):
    """x of 1-4 dims with random names, the contracted dim at any position (given by name or int),
    a weight named (out, in) or unnamed, an optional bias."""
    shape, names = draw(nts.named_shapes(min_dims=1, max_dims=4))
    ax = draw(st.integers(0, len(shape) - 1))
    n_out = draw(st.integers(1, 4))
    out_name = draw(st.sampled_from([None, "out_feat"]))
    in_name = names[ax] if draw(st.booleans()) else None
    spell = draw(st.sampled_from(["name", "int", "neg"]))
    if spell == "name" and names[ax] is not None:
        dim = names[ax]
    else:
        dim = ax - len(shape) if spell == "neg" else ax
    with_bias = draw(st.booleans())
    x = draw(nts.arrays(shape))
    w = draw(nts.arrays((n_out, shape[ax])))
    b = draw(nts.arrays((n_out,)))
    return x, names, ax, dim, w, (out_name, in_name), (b if with_bias else None)


@given(linear_cases())
def test_linear_matches_numpy_with_dim_anywhere(case):
    x, names, ax, dim, w, w_names, b = case
    out = linear(nt.tensor(x, names=names), nt.tensor(w, names=w_names),
                 None if b is None else nt.tensor(b, names=(w_names[0],)), dim=dim)
    expected = np.moveaxis(np.tensordot(x, w, axes=([ax], [1])), -1, ax)
    if b is not None:
        expected = expected + b.reshape((-1,) + (1,) * (x.ndim - ax - 1))
    assert out.names == names[:ax] + (w_names[0],) + names[ax + 1:]
    assert_close(out.numpy(), expected, rtol=1e-10, atol=1e-10)


def test_linear_infers_dim_from_the_weight_and_maps_a_dim_to_itself():
    x = t64((2, 3, 4), ("batch", "embed", "seq"), requires_grad=False)
    w = t64((5, 3), ("hidden", "embed"), requires_grad=False)
    assert linear(x, w).names == ("batch", "hidden", "seq")
    square = t64((3, 3), ("embed_out", "embed"), requires_grad=False)
    bias = t64((3,), ("embed",), requires_grad=False)
    out = linear(x, square, bias, dim="embed", out_dim="embed")
    assert out.names == ("batch", "embed", "seq")
    assert linear(x, square, dim="embed").names == ("batch", "embed_out", "seq")
    plain = nt.tensor(np.ones((2, 3)))
    assert linear(plain, nt.tensor(np.ones((4, 3)))).shape == (2, 4)  # unnamed: the last dim, as in PyTorch


def test_linear_keeps_float32():
    x = nt.tensor(np.ones((2, 3), np.float32), names=("batch", "embed"), requires_grad=True)
    w = nt.tensor(np.ones((4, 3), np.float32), names=("hidden", "embed"), requires_grad=True)
    b = nt.tensor(np.ones(4, np.float32), names=("hidden",), requires_grad=True)
    out = linear(x, w, b)
    out.sum().backward()
    assert out.dtype == nt.float32 and w.grad.dtype == nt.float32 and x.grad.dtype == nt.float32
    assert w.grad.names == ("hidden", "embed") and b.grad.names == ("hidden",)


# ----------------------------------------------------------------------------- linear: gradients


@pytest.mark.parametrize("shape,names,dim", [
    ((2, 3, 4), ("batch", "seq", "embed"), "embed"),  # dim last: one matrix product
    ((2, 4, 3), ("batch", "embed", "seq"), "embed"),  # dim inside: a stack of products
    ((4, 2, 3), ("embed", "batch", "seq"), 0),  # dim first
    ((4,), ("embed",), "embed"),  # 1-D input
])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradcheck_and_gradgradcheck(shape, names, dim, bias):
    x = t64(shape, names, seed=1)
    w = t64((3, 4), ("hidden", "embed"), seed=2)
    b = t64((3,), ("hidden",), seed=3) if bias else None
    fn = (lambda x, w, b: linear(x, w, b, dim=dim)) if bias else (lambda x, w: linear(x, w, dim=dim))
    args = (x, w, b) if bias else (x, w)
    assert gradcheck(fn, *args)
    assert gradgradcheck(fn, *args)


def test_linear_fast_backward_equals_the_differentiable_one():
    x, w, b = t64((2, 4, 3), ("batch", "embed", "seq")), t64((5, 4), ("hidden", "embed"), 1), t64((5,), ("hidden",), 2)
    fn = lambda x, w, b: linear(x, w, b, dim="embed")
    for fast, slow in zip(grads(fn, [x, w, b], False), grads(fn, [x, w, b], True)):
        assert_close(fast, slow, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- linear: errors


def test_linear_errors():
    x = t64((2, 3), ("batch", "embed"), requires_grad=False)
    w = t64((4, 3), ("hidden", "feat"), requires_grad=False)
    with pytest.raises(nt.NamesError, match=r"linear: the weight \('hidden', 'feat'\) contracts 'feat', but the "
                                            r"input \('batch', 'embed'\) has no dim 'feat'. Pass dim="):
        linear(x, w)
    with pytest.raises(nt.NamesError, match=r"linear: the input \('batch', 'embed'\) is contracted over dim 1 "
                                            r"\('embed'\), but the weight .* contracts 'feat'.*Rename the weight"):
        linear(x, w, dim="embed")
    with pytest.raises(nt.NamesError, match=r"output dim would be named 'batch', which is already another dim of "
                                            r"the input \('batch', 'embed'\).*pass out_dim="):
        linear(x, t64((4, 3), ("batch", "embed"), requires_grad=False))
    with pytest.raises(nt.NamesError, match=r"the bias \('b',\) must be named like the output dim 'hidden'"):
        linear(x, t64((4, 3), ("hidden", "embed"), requires_grad=False), t64((4,), ("b",), requires_grad=False))
    with pytest.raises(nt.NamesError, match="no dim named 'seq'"):
        linear(x, t64((4, 3), ("hidden", None), requires_grad=False), dim="seq")
    with pytest.raises(ValueError, match=r"linear: the input's dim 1 \('embed'\) has size 3, but the weight "
                                         r"\('hidden', 'embed'\) of shape \(4, 5\) expects 5"):
        linear(x, t64((4, 5), ("hidden", "embed"), requires_grad=False))
    with pytest.raises(ValueError, match=r"the bias has size 2, but the weight \(4, 3\) has 4 outputs"):
        linear(x, t64((4, 3), ("hidden", "embed"), requires_grad=False), t64((2,), ("hidden",), requires_grad=False))
    with pytest.raises(ValueError, match=r"the weight must be 2-D \(out, in\)"):
        linear(x, t64((3,), ("embed",), requires_grad=False))
    with pytest.raises(TypeError, match=r"linear: the weight is nt.float32 but the input is nt.float64"):
        linear(x, nt.ones(4, 3, names=("hidden", "embed")))
    with pytest.raises(TypeError, match=r"linear: the input must be floating point, got nt.int64"):
        linear(nt.tensor(np.ones((2, 3), np.int64), names=("batch", "embed")), t64((4, 3), ("hidden", "embed")))
    with pytest.raises(TypeError, match="dim must be one dim"):
        linear(x, t64((4, 3), ("hidden", "embed")), dim=("embed",))
    with pytest.raises(TypeError, match="the weight must be a Tensor"):
        linear(x, np.ones((4, 3)))


# ----------------------------------------------------------------------------- embedding


@given(nts.named_shapes(min_dims=0, max_dims=3), st.integers(1, 5), st.booleans(), st.data())
def test_embedding_matches_numpy(index_shape, vocab, transposed, data):
    shape, names = index_shape
    idx = data.draw(nts.arrays(shape, "int64", low=0, high=vocab - 1))
    w = data.draw(nts.arrays((vocab, 3)))
    if transposed:  # the weight stored (model, vocab): dim= says which dim the indices pick from
        weight = nt.tensor(w.T, names=("model", "vocab"))
        out = embedding(nt.tensor(idx, names=names), weight, dim="vocab")
    else:
        out = embedding(nt.tensor(idx, names=names), nt.tensor(w, names=("vocab", "model")))
    assert out.names == names + ("model",)
    assert_close(out.numpy(), w[idx], rtol=0, atol=0)


@pytest.mark.parametrize("dim,wshape,wnames", [(None, (5, 3), ("vocab", "embed")), ("vocab", (3, 5), ("embed", "vocab"))])
def test_embedding_gradients_accumulate_repeated_indices(dim, wshape, wnames):
    idx = nt.tensor(np.array([[0, 4, 4], [1, 0, 4]], np.int32), names=("batch", "seq"))
    w = t64(wshape, wnames)
    fn = lambda w: embedding(idx, w, dim=dim)
    assert gradcheck(fn, w)
    assert gradgradcheck(fn, w)
    g = embedding(idx, w, dim=dim).sum().backward()
    counts = np.bincount(idx.numpy().ravel(), minlength=5)
    got = w.grad.numpy() if dim is None else w.grad.numpy().T
    assert g is None and w.grad.names == wnames
    assert_close(got, np.repeat(counts[:, None], 3, axis=1).astype(np.float64))


def test_embedding_errors():
    w = t64((5, 3), ("vocab", "embed"), requires_grad=False)
    with pytest.raises(IndexError, match=r"embedding: index 5 is out of range for the weight's dim 0 \('vocab'\) "
                                         r"of size 5 .*indices must be in \[0, 4\]"):
        embedding(nt.tensor([1, 5], names=("seq",)), w)
    with pytest.raises(IndexError, match="index -1 is out of range"):
        embedding(nt.tensor([-1, 2], names=("seq",)), w)
    with pytest.raises(TypeError, match=r"the indices must be an integer tensor, got nt.float32"):
        embedding(nt.tensor([1.0, 2.0], names=("seq",)), w)
    with pytest.raises(nt.NamesError, match=r"embedding: the indices \('embed',\) already have a dim named 'embed'"):
        embedding(nt.tensor([1, 2], names=("embed",)), w)
    with pytest.raises(nt.NamesError, match="no dim named 'tokens'"):
        embedding(nt.tensor([1, 2], names=("seq",)), w, dim="tokens")
    with pytest.raises(ValueError, match=r"the weight must be 2-D \(vocab, embed\)"):
        embedding(nt.tensor([1, 2], names=("seq",)), t64((5,), ("vocab",)))


# ----------------------------------------------------------------------------- dropout


def test_dropout_is_the_identity_when_off():
    x = t64((3, 4), ("batch", "embed"))
    assert dropout(x, 0.0) is x
    assert dropout(x, 0.5, training=False) is x


def test_dropout_masks_and_scales_and_is_seeded():
    x = nt.ones(200, 50, names=("batch", "embed"))
    nt.manual_seed(3)
    y = dropout(x, 0.25)
    nt.manual_seed(3)
    again = dropout(x, 0.25).numpy()
    values = y.numpy()
    assert y.names == ("batch", "embed") and y.dtype == nt.float32
    assert set(np.unique(values).tolist()) <= {0.0, np.float32(1 / 0.75)}
    assert abs((values == 0).mean() - 0.25) < 0.02
    assert (again == values).all()


def test_dropout_gradient_is_the_same_mask():
    x = t64((4, 5), ("batch", "embed"))

    def fn(x):
        nt.manual_seed(7)
        return dropout(x, 0.4)

    assert gradcheck(fn, x)
    assert gradgradcheck(fn, x)
    y = fn(x)
    y.sum().backward()
    assert x.grad.names == x.names
    assert_close(x.grad.numpy(), y.detach().numpy() / x.detach().numpy())


@pytest.mark.parametrize("p", [-0.1, 1.5, True, "0.5"])  # p = 1 zeroes everything, as in PyTorch
def test_dropout_refuses_p_outside_0_1(p):
    with pytest.raises(ValueError, match=r"dropout: p is the probability of zeroing an element, a number in \[0, 1\]"):
        dropout(t64((2,), ("x",)), p)


def test_dropout_refuses_integer_input():
    with pytest.raises(TypeError, match="dropout: the input must be floating point"):
        dropout(nt.tensor([1, 2]), 0.5)


# ----------------------------------------------------------------------------- nn.functional


def test_functional_reexports_the_named_ops():
    x = t64((2, 3), ("batch", "embed"), requires_grad=False)
    for name in F.__all__:
        assert callable(getattr(F, name)), name
    assert F.linear is linear and F.dropout is dropout and F.embedding is embedding
    assert_close(F.softmax(x, "embed"), x.softmax("embed"))
    assert_close(F.gelu(x, approximate="tanh").numpy(),
                 0.5 * x.numpy() * (1 + np.tanh(np.sqrt(2 / np.pi) * (x.numpy() + 0.044715 * x.numpy() ** 3))))
    for fn in (F.relu, F.silu, F.sigmoid, F.tanh, F.gelu):
        assert fn(x).names == ("batch", "embed")
