"""``nt.special`` (namedtensor/special.py): each function against ``torch.special`` on the same data, names
kept (unified for the binary ones), gradients of the compositions, and the refusals."""

import numpy as np
import pytest

import namedtensor as nt
from namedtensor.testing import gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
REAL = RNG.uniform(-3, 3, (3, 4))
UNIT = RNG.uniform(0.05, 0.95, (3, 4))
POSITIVE = RNG.uniform(0.5, 4, (3, 4))

# name: (our call, torch's call, data)
UNARY = {
    "digamma": POSITIVE, "psi": POSITIVE, "erf": REAL, "erfc": REAL, "erfinv": UNIT * 2 - 1, "exp2": REAL,
    "expit": REAL, "expm1": REAL, "gammaln": POSITIVE, "i0": REAL, "log1p": POSITIVE, "sinc": REAL,
    "logit": UNIT, "ndtr": REAL * 3, "ndtri": UNIT, "entr": np.concatenate([POSITIVE[:2], -POSITIVE[2:]]) * [[1, 0, 1, 1]],
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_match_torch_and_keep_names(name):
    data = UNARY[name]
    out = getattr(nt.special, name)(nt.tensor(data, names=("a", "b")))
    assert out.names == ("a", "b")
    expected = getattr(torch.special, name)(torch.tensor(data)).numpy()
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_functions_with_arguments_match_torch():
    t, tt = nt.tensor(REAL, names=("a", "b")), torch.tensor(REAL)
    for ours, theirs in [
        (nt.special.round(t, decimals=1), torch.special.round(tt, decimals=1)),
        (nt.special.round(t * 100, decimals=-1), torch.special.round(tt * 100, decimals=-1)),
        (nt.special.softmax(t, "b"), torch.special.softmax(tt, 1)),
        (nt.special.log_softmax(t, 0, dtype=nt.float32), torch.special.log_softmax(tt, 0, dtype=torch.float32)),
        (nt.special.logsumexp(t, "a"), torch.special.logsumexp(tt, 0)),
        (nt.special.polygamma(2, nt.tensor(POSITIVE)), torch.special.polygamma(2, torch.tensor(POSITIVE))),
        (nt.special.logit(nt.tensor(UNIT), eps=0.2), torch.special.logit(torch.tensor(UNIT), eps=0.2)),
        (nt.special.multigammaln(nt.tensor(POSITIVE + 1), 3), torch.special.multigammaln(torch.tensor(POSITIVE + 1), 3)),
        (nt.special.xlogy(t, nt.tensor(POSITIVE)), torch.special.xlogy(tt, torch.tensor(POSITIVE))),
    ]:
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-9)
    x = np.array([0.0, 0.0, 2.0, -1.0])
    y = np.array([np.nan, 3.0, 0.5, 0.25])
    ours = nt.special.xlog1py(nt.tensor(x, names=("i",)), nt.tensor(y, names=("i",)))
    assert ours.names == ("i",)
    np.testing.assert_allclose(ours.numpy(), torch.special.xlog1py(torch.tensor(x), torch.tensor(y)).numpy())
    # either operand may be a number, as in PyTorch
    np.testing.assert_allclose(nt.special.xlog1py(nt.tensor(x), 3.0).numpy(),
                               torch.special.xlog1py(torch.tensor(x), 3.0).numpy())
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(nt.special.xlog1py(2.0, nt.tensor(y)).numpy(),
                                   torch.special.xlog1py(2.0, torch.tensor(y)).numpy())


def test_compositions_have_gradients():
    u = nt.tensor(UNIT, names=("a", "b"), requires_grad=True)
    r = nt.tensor(REAL, names=("a", "b"), requires_grad=True)
    p = nt.tensor(POSITIVE, names=("a", "b"), requires_grad=True)
    for fn, x in [(nt.special.logit, u), (nt.special.ndtr, r), (nt.special.ndtri, u), (nt.special.entr, p),
                  (lambda v: nt.special.multigammaln(v + 1, 2), p), (lambda v: nt.special.xlog1py(v, p.detach()), r),
                  (lambda v: nt.special.xlog1py(r.detach(), v), p), (lambda v: nt.special.xlog1py(2.0, v), p)]:
        assert gradcheck(fn, x) and gradgradcheck(fn, x)


def test_refusals():
    with pytest.raises(ValueError, match="multigammaln: p must be a positive int"):
        nt.special.multigammaln(nt.tensor(POSITIVE), 0)
    with pytest.raises(ValueError, match=r"multigammaln: every element of the input must be greater than \(p - 1\) / 2"):
        nt.special.multigammaln(nt.tensor([0.4]), 2)
    assert not hasattr(nt.special, "zeta")  # listed in docs/converting.md as not yet there
