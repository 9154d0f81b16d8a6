"""Losses: cross_entropy, nll_loss, mse_loss (namedtensor/ops/losses.py).

Values against NumPy references written with PyTorch's formulas (label smoothing, ignore_index,
class probabilities, the three reductions), Hypothesis over names, the class dim's position and the
target's dim order, gradients of first and second order for every option (float64), the fast raw
backward against the differentiable one, and the error messages.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.losses import cross_entropy, mse_loss, nll_loss
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts
from helpers import grads, t64

pytestmark = pytest.mark.usefixtures("backend")

REDUCTIONS = ["mean", "sum", "none"]


def np_log_softmax(x, axis):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def np_cross_entropy(x, target, ax, ignore_index=None, eps=0.0, reduction="mean"):
    """PyTorch's F.cross_entropy, in NumPy (the class dim at ``ax``; integer or probability target)."""
    logp = np.moveaxis(np_log_softmax(x, ax), ax, -1)
    n = logp.shape[-1]
    if target.dtype.kind == "f":
        q = np.moveaxis(target, ax, -1) * (1 - eps) + eps / n
        loss = -(q * logp).sum(-1)
        count = loss.size
    else:
        valid = np.ones(target.shape, bool) if ignore_index is None else target != ignore_index
        picked = np.take_along_axis(logp, np.where(valid, target, 0)[..., None], -1)[..., 0]
        loss = np.where(valid, -(1 - eps) * picked - eps * logp.mean(-1), 0.0)
        count = valid.sum()
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else (loss.sum() / count if count else np.nan)


def np_nll(logp, target, ax, ignore_index=None, reduction="mean"):
    logp = np.moveaxis(logp, ax, -1)
    valid = np.ones(target.shape, bool) if ignore_index is None else target != ignore_index
    loss = np.where(valid, -np.take_along_axis(logp, np.where(valid, target, 0)[..., None], -1)[..., 0], 0.0)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else (loss.sum() / valid.sum() if valid.any() else np.nan)


# ----------------------------------------------------------------------------- cross_entropy: values, names


@st.composite
def class_cases(draw, probs=False):
    """Logits of 1-4 dims, fully named or not, the class dim anywhere; a target with the other dims
    (or all of them, for probabilities) in a random order when every dim is named."""
    shape, names = draw(nts.named_shapes(min_dims=1, max_dims=4))
    if draw(st.booleans()):
        names = tuple(draw(st.permutations(nts.NAME_POOL))[: len(shape)])
    ax = draw(st.integers(0, len(shape) - 1))
    x = draw(nts.arrays(shape))
    n = shape[ax]
    if probs:
        q = draw(nts.arrays(shape, low=0.0, high=1.0))
        target = q / q.sum(axis=ax, keepdims=True)
        t_names = names
    else:
        target = draw(nts.arrays(shape[:ax] + shape[ax + 1:], "int64", low=0, high=n - 1))
        t_names = names[:ax] + names[ax + 1:]
        if draw(st.booleans()) and target.size:
            target.reshape(-1)[0] = -100
    perm = tuple(range(target.ndim))
    if None not in names:
        perm = tuple(draw(st.permutations(perm)))
    dim = names[ax] if names[ax] is not None and draw(st.booleans()) else ax
    return x, names, ax, dim, target, t_names, perm


def _permuted(target, t_names, perm):
    return np.transpose(target, perm), tuple(t_names[i] for i in perm)


@given(class_cases(), st.sampled_from(REDUCTIONS), st.sampled_from([0.0, 0.3]), st.booleans())
def test_cross_entropy_class_indices_match_pytorch_formulas(case, reduction, eps, ignore):
    x, names, ax, dim, target, t_names, perm = case
    ignore_index = -100 if ignore else None
    if not ignore:
        target = np.where(target < 0, 0, target)
    tp, tp_names = _permuted(target, t_names, perm)
    out = cross_entropy(nt.tensor(x, names=names), nt.tensor(tp, names=tp_names), dim=dim, ignore_index=ignore_index,
                        label_smoothing=eps, reduction=reduction)
    expected = np_cross_entropy(x, target, ax, ignore_index, eps, reduction)
    if reduction == "none":
        expected = np.transpose(expected, perm)
        assert out.names == tuple(a if a is not None else b for a, b in zip(tp_names, tuple(t_names[i] for i in perm)))
    else:
        assert out.names == ()
    assert_close(out.numpy(), np.asarray(expected), rtol=1e-10, atol=1e-10)


@given(class_cases(probs=True), st.sampled_from(REDUCTIONS), st.sampled_from([0.0, 0.2]))
def test_cross_entropy_class_probabilities_match_pytorch_formulas(case, reduction, eps):
    x, names, ax, dim, target, t_names, perm = case
    tp, tp_names = _permuted(target, t_names, perm)
    out = cross_entropy(nt.tensor(x, names=names), nt.tensor(tp, names=tp_names), dim=dim, label_smoothing=eps,
                        reduction=reduction)
    expected = np_cross_entropy(x, target, ax, None, eps, reduction)
    if reduction == "none":  # the target's order, without the class dim
        rest = [i for i in perm if i != ax]
        expected = np.transpose(expected, [sorted(rest).index(i) for i in rest])
        assert out.names == tuple(tp_names[k] for k, i in enumerate(perm) if i != ax)
    assert_close(out.numpy(), np.asarray(expected), rtol=1e-10, atol=1e-10)


def test_cross_entropy_target_in_another_order_names_the_loss_like_the_target():
    logits = t64((2, 3, 5), ("batch", "seq", "vocab"), requires_grad=False)
    target = nt.tensor(np.array([[1, 4], [0, 2], [3, 3]]), names=("seq", "batch"))
    loss = cross_entropy(logits, target, "vocab", reduction="none")
    assert loss.names == ("seq", "batch")
    same = cross_entropy(logits, target.align_to("batch", "seq"), "vocab", reduction="none")
    assert_close(loss.numpy(), same.numpy().T)
    unnamed = cross_entropy(logits, target.align_to("batch", "seq").rename(None), "vocab", reduction="none")
    assert unnamed.names == ("batch", "seq")  # None dims take the logits' names


def test_cross_entropy_is_stable_and_keeps_float32():
    x = nt.tensor(np.array([[1000.0, 0.0, -1000.0]], np.float32), names=("batch", "vocab"), requires_grad=True)
    loss = cross_entropy(x, nt.tensor([2], names=("batch",)), "vocab")
    loss.backward()
    assert loss.dtype == nt.float32 and x.grad.dtype == nt.float32
    assert loss.item() == pytest.approx(2000.0)
    assert np.isfinite(x.grad.numpy()).all()


def test_cross_entropy_all_ignored_mean_is_nan_with_zero_gradient():
    x = t64((2, 3), ("batch", "vocab"))
    loss = cross_entropy(x, nt.tensor([-100, -100], names=("batch",)), "vocab", ignore_index=-100)
    loss.backward()
    assert math.isnan(loss.item())  # as in PyTorch: 0 / 0 elements
    assert (x.grad.numpy() == 0).all()


# ----------------------------------------------------------------------------- cross_entropy: gradients


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("eps", [0.0, 0.25])
@pytest.mark.parametrize("ignore", [False, True])
def test_cross_entropy_class_indices_gradcheck(reduction, eps, ignore):
    x = t64((2, 3, 2), ("batch", "vocab", "seq"))  # the class dim inside
    target = nt.tensor(np.array([[2, -1], [0, 1]]), names=("seq", "batch"))  # another order
    if not ignore:
        target = target.clip(0, 2)
    fn = lambda x: cross_entropy(x, target, "vocab", ignore_index=-1 if ignore else None,
                                 label_smoothing=eps, reduction=reduction)
    assert gradcheck(fn, x)
    assert gradgradcheck(fn, x)
    for fast, slow in zip(grads(fn, [x], False), grads(fn, [x], True)):
        assert_close(fast, slow, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("eps", [0.0, 0.25])
def test_cross_entropy_class_probabilities_gradcheck(reduction, eps):
    x = t64((2, 3, 2), ("batch", "vocab", "seq"))
    q = np.random.default_rng(1).uniform(0.1, 1, size=(2, 2, 3))
    target = nt.tensor(q / q.sum(-1, keepdims=True), names=("seq", "batch", "vocab"), requires_grad=True)
    fn = lambda x, q: cross_entropy(x, q, "vocab", label_smoothing=eps, reduction=reduction)
    assert gradcheck(fn, x, target)
    assert gradgradcheck(fn, x, target)
    for fast, slow in zip(grads(fn, [x, target], False), grads(fn, [x, target], True)):
        assert_close(fast, slow, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- nll_loss


@given(class_cases(), st.sampled_from(REDUCTIONS), st.booleans())
def test_nll_loss_matches_numpy(case, reduction, ignore):
    x, names, ax, dim, target, t_names, perm = case
    if not ignore:
        target = np.where(target < 0, 0, target)
    tp, tp_names = _permuted(target, t_names, perm)
    out = nll_loss(nt.tensor(x, names=names), nt.tensor(tp, names=tp_names), dim=dim,
                   ignore_index=-100 if ignore else None, reduction=reduction)
    expected = np_nll(x, target, ax, -100 if ignore else None, reduction)
    if reduction == "none":
        expected = np.transpose(expected, perm)
    assert_close(out.numpy(), np.asarray(expected), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ignore", [False, True])
def test_nll_loss_gradcheck(reduction, ignore):
    x = t64((3, 4), ("batch", "vocab"))
    target = nt.tensor([3, -1, 0], names=("batch",))
    if not ignore:
        target = target.clip(0, 3)
    kw = {"ignore_index": -1 if ignore else None, "reduction": reduction}
    assert gradcheck(lambda x: nll_loss(x, target, "vocab", **kw), x)
    assert gradgradcheck(lambda x: nll_loss(x.log_softmax("vocab"), target, "vocab", **kw), x)


def test_nll_of_log_softmax_is_cross_entropy():
    x = t64((3, 4), ("batch", "vocab"), requires_grad=False)
    target = nt.tensor([3, 1, 0], names=("batch",))
    assert_close(nll_loss(x.log_softmax("vocab"), target, "vocab"), cross_entropy(x, target, "vocab"))


# ----------------------------------------------------------------------------- mse_loss


@given(nts.broadcastable_names(max_dims=3), st.sampled_from(REDUCTIONS), st.data())
def test_mse_loss_matches_numpy(pair, reduction, data):
    (sa, na), (sb, nb) = pair
    a, b = data.draw(nts.arrays(sa)), data.draw(nts.arrays(sb))
    out = mse_loss(nt.tensor(a, names=na), nt.tensor(b, names=nb), reduction=reduction)
    sq = (a - b) ** 2
    expected = {"none": sq, "sum": sq.sum(), "mean": sq.mean()}[reduction]
    if reduction == "none":
        assert out.names == nt.tensor(a, names=na).add(nt.tensor(b, names=nb)).names
    assert_close(out.numpy(), np.asarray(expected), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss_gradcheck_with_broadcasting(reduction):
    a, b = t64((2, 3), ("batch", "embed")), t64((3,), ("embed",), seed=1)
    assert gradcheck(lambda a, b: mse_loss(a, b, reduction=reduction), a, b)
    assert gradgradcheck(lambda a, b: mse_loss(a, b, reduction=reduction), a, b)


# ----------------------------------------------------------------------------- errors


def test_class_target_errors():
    logits = t64((2, 3, 5), ("batch", "seq", "vocab"), requires_grad=False)
    with pytest.raises(nt.NamesError, match=r"cross_entropy: the target has names \('batch', 'time'\) but must "
                                            r"have the logits' names without the class dim dim 2 \('vocab'\), of "
                                            r"\('batch', 'seq', 'vocab'\), \('batch', 'seq'\): matched by name in "
                                            r"any order.*Rename the target's dims"):
        cross_entropy(logits, nt.tensor(np.zeros((2, 3), np.int64), names=("batch", "time")), "vocab")
    with pytest.raises(TypeError, match=r"the target must be an integer tensor of class indices, got nt.float64 "
                                        r"\(class indices are integers: use .long\(\)"):
        cross_entropy(logits, t64((2, 3), ("batch", "seq")), "vocab")
    with pytest.raises(TypeError, match="integer tensor of class indices, got nt.bool"):
        nll_loss(logits, nt.tensor(np.zeros((2, 3), bool), names=("batch", "seq")), "vocab")
    with pytest.raises(IndexError, match=r"cross_entropy: the target holds class index 5, out of range for the 5 "
                                         r"classes of the logits' dim 2 \('vocab'\).*must be in \[0, 4\], or "
                                         r"ignore_index=-100"):
        cross_entropy(logits, nt.tensor(np.full((2, 3), 5), names=("batch", "seq")), "vocab", ignore_index=-100)
    with pytest.raises(IndexError, match="nll_loss: the target holds class index -3"):
        nll_loss(logits, nt.tensor(np.full((2, 3), -3), names=("batch", "seq")), "vocab")
    with pytest.raises(ValueError, match=r"class indices have the logits' dims without the class dim \(2 dims\), "
                                         r"but the target has names \('batch',\)"):
        cross_entropy(logits, nt.tensor([0, 1], names=("batch",)), "vocab")
    with pytest.raises(ValueError, match=r"the target's sizes \{'batch': 2, 'seq': 4\} do not match the logits'"):
        cross_entropy(logits, nt.tensor(np.zeros((2, 4), np.int64), names=("batch", "seq")), "vocab")
    with pytest.raises(nt.NamesError, match="cross_entropy: no dim named 'classes'"):
        cross_entropy(logits, nt.tensor(np.zeros((2, 3), np.int64), names=("batch", "seq")), "classes")


def test_probability_target_errors():
    logits = t64((2, 5), ("batch", "vocab"), requires_grad=False)
    probs = t64((2, 5), ("batch", "vocab"), requires_grad=False)
    with pytest.raises(ValueError, match="ignore_index applies to class indices, not to class probabilities"):
        cross_entropy(logits, probs, "vocab", ignore_index=0)
    with pytest.raises(nt.NamesError, match=r"the target has names \('batch', 'cls'\) but must have the logits' names"):
        cross_entropy(logits, probs.rename("batch", "cls"), "vocab")
    with pytest.raises(ValueError, match="class probabilities have the logits' sizes"):
        cross_entropy(logits, t64((2, 4), ("batch", "vocab"), requires_grad=False), "vocab")
    with pytest.raises(TypeError, match=r"the target \(class probabilities\) is nt.float32 but the input is nt.float64"):
        cross_entropy(logits, nt.ones(2, 5, names=("batch", "vocab")), "vocab")


@pytest.mark.parametrize("kwargs,message", [
    ({"label_smoothing": 1.5}, r"label_smoothing must be a number in \[0, 1\], got 1.5"),
    ({"reduction": "avg"}, "reduction must be 'none', 'mean' or 'sum', got 'avg'"),
])
def test_option_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cross_entropy(t64((2, 3), ("batch", "vocab")), nt.tensor([0, 1], names=("batch",)), "vocab", **kwargs)


def test_mse_loss_errors():
    a = t64((2, 3), ("batch", "embed"), requires_grad=False)
    with pytest.raises(nt.NamesError, match=r"mse_loss: dims \('batch', 'embed'\) and \('batch', 'feat'\) do not "
                                            r"match at position -1"):
        mse_loss(a, t64((2, 3), ("batch", "feat")))
    with pytest.raises(ValueError, match=r"mse_loss: the input's shape \(2, 3\) and the target's \(2, 4\) do not "
                                         r"broadcast"):
        mse_loss(a, t64((2, 4), ("batch", "embed")))
    with pytest.raises(TypeError, match="mse_loss: the target is nt.float32 but the input is nt.float64"):
        mse_loss(a, nt.ones(2, 3, names=("batch", "embed")))
    with pytest.raises(TypeError, match="mse_loss: the target must be a Tensor"):
        mse_loss(a, 1.0)
