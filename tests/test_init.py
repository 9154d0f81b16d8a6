"""nn.init: in-place initialisers with fan-in/fan-out given by dim name; statistics, bounds, errors."""

import math

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import nn
from namedtensor.nn import init

pytestmark = pytest.mark.usefixtures("backend")


def values(t):
    return t.detach().numpy().astype(np.float64)


def test_fans_by_name_default_and_partial():
    w = nt.zeros(4, 6, names=("hidden", "embed"))
    assert init.calculate_fans(w) == (6, 4)  # (out, in): fan-in is the input dim
    assert init.calculate_fans(w, fan_in="hidden", fan_out="embed") == (4, 6)
    assert init.calculate_fans(w, fan_in="hidden") == (4, 6)  # the other fan: the remaining dims
    q = nt.zeros(2, 3, 5, names=("head", "head_dim", "embed"))
    assert init.calculate_fans(q, fan_in="embed") == (5, 6)
    assert init.calculate_fans(q, fan_out=("head", "head_dim")) == (5, 6)
    assert init.calculate_fans(q, fan_in=["embed", "head"], fan_out="head_dim") == (10, 3)
    assert init.calculate_fans(q) == (3 * 5, 2 * 5)  # PyTorch's positional rule: (out, in, *receptive)


def test_fan_errors():
    w = nt.zeros(4, 6, names=("hidden", "embed"))
    with pytest.raises(nt.NamesError, match="xavier_uniform_: no dim named 'embd' in a tensor with names "
                                            r"\('hidden', 'embed'\)"):
        init.xavier_uniform_(w, fan_in="embd")
    with pytest.raises(nt.NamesError, match=r"kaiming_normal_: dims \['embed'\] are in both fan_in and fan_out"):
        init.kaiming_normal_(w, fan_in="embed", fan_out=("embed", "hidden"))
    with pytest.raises(ValueError, match="at least 2 dims.*name them: fan_in=..., fan_out=..."):
        init.xavier_normal_(nt.zeros(4, names=("hidden",)))
    with pytest.raises(ValueError, match="mode must be 'fan_in' or 'fan_out'"):
        init.kaiming_uniform_(w, mode="fan")
    with pytest.raises(TypeError, match="expected a Tensor"):
        init.normal_(np.zeros(3))
    with pytest.raises(TypeError, match="needs a floating dtype"):
        init.uniform_(nt.zeros(3, dtype=nt.int64))
    with pytest.raises(ValueError, match="must not exceed"):
        init.uniform_(w, 1.0, 0.0)


def test_calculate_gain():
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("linear") == init.calculate_gain("sigmoid") == 1.0
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        init.calculate_gain("swish")


@pytest.mark.parametrize("fn, bound", [
    (lambda w: init.xavier_uniform_(w, fan_in="embed", fan_out="hidden"), math.sqrt(6 / (40 + 60))),
    (lambda w: init.xavier_uniform_(w, gain=2.0), 2 * math.sqrt(6 / (40 + 60))),
    (lambda w: init.kaiming_uniform_(w, nonlinearity="relu"), math.sqrt(2) * math.sqrt(3 / 60)),
    (lambda w: init.kaiming_uniform_(w, a=math.sqrt(5)), 1 / math.sqrt(60)),  # nn.Linear's weight
    (lambda w: init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu"), math.sqrt(2) * math.sqrt(3 / 40)),
    (lambda w: init.uniform_(w, -0.3, 0.3), 0.3),
])
def test_uniform_families_bounds_and_spread(fn, bound):
    w = nt.zeros(40, 60, names=("hidden", "embed"))
    assert fn(w) is w and w.names == ("hidden", "embed")
    v = values(w)
    assert v.min() >= -bound and v.max() <= bound
    assert v.min() < -0.95 * bound and v.max() > 0.95 * bound  # fills the interval
    assert abs(v.mean()) < 0.05 * bound
    assert v.std() == pytest.approx(bound / math.sqrt(3), rel=0.05)


@pytest.mark.parametrize("fn, std, mean", [
    (lambda w: init.xavier_normal_(w, fan_in="embed", fan_out="hidden"), math.sqrt(2 / 100), 0.0),
    (lambda w: init.kaiming_normal_(w, nonlinearity="relu"), math.sqrt(2 / 60), 0.0),
    (lambda w: init.kaiming_normal_(w, mode="fan_out", nonlinearity="tanh"), 5 / 3 / math.sqrt(40), 0.0),
    (lambda w: init.normal_(w, 1.5, 0.2), 0.2, 1.5),
])
def test_normal_families_statistics(fn, std, mean):
    w = nt.zeros(40, 60, names=("hidden", "embed"))
    assert fn(w) is w
    v = values(w)
    assert v.std() == pytest.approx(std, rel=0.05)
    assert abs(v.mean() - mean) < 0.05 * std + 1e-12


def test_fan_follows_names_not_positions():
    a = nt.zeros(30, 90, names=("hidden", "embed"))
    b = nt.zeros(90, 30, names=("embed", "hidden"))  # the same weight, stored transposed
    init.kaiming_uniform_(a, fan_in="embed")
    init.kaiming_uniform_(b, fan_in="embed")
    assert values(a).max() == pytest.approx(values(b).max(), rel=0.05)
    assert values(b).max() <= math.sqrt(2 / (1 + 0.01 ** 2)) * math.sqrt(3 / 90)
    init.kaiming_uniform_(b)  # positionally, b's fan-in would be 'hidden' (30): a wider bound
    assert values(b).max() > math.sqrt(2 / (1 + 0.01 ** 2)) * math.sqrt(3 / 90) * 1.2


def test_trunc_normal_constant_zeros_ones():
    w = nt.zeros(50, 40, names=("a", "b"))
    init.trunc_normal_(w, mean=0.1, std=1.0, a=-0.5, b=0.8)
    v = values(w)
    assert v.min() >= -0.5 and v.max() <= 0.8 and v.max() - v.min() > 1.2
    init.trunc_normal_(w, std=0.02)  # the usual transformer init: all within 2 (far beyond 2 std here)
    assert values(w).std() == pytest.approx(0.02, rel=0.05)
    init.trunc_normal_(w, mean=10.0, std=0.1, a=-1.0, b=1.0)  # no mass inside: the nearest bound
    assert np.all(values(w) == 1.0)
    with pytest.raises(ValueError, match="must be below"):
        init.trunc_normal_(w, a=1.0, b=1.0)
    assert np.all(values(init.constant_(w, 0.25)) == 0.25)
    assert np.all(values(init.zeros_(w)) == 0.0)
    assert np.all(values(init.ones_(w)) == 1.0)
    i = nt.zeros(3, dtype=nt.int64)
    assert init.constant_(i, 4).numpy().tolist() == [4, 4, 4]


def test_parameters_are_filled_in_place_without_a_graph():
    p = nn.Parameter(nt.zeros(8, 6, names=("hidden", "embed")))
    data = p.array
    version = p._version
    out = init.xavier_uniform_(p)
    assert out is p and p.array is data and p._version > version
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    e = nt.zeros(0, 4, names=("hidden", "embed"))
    assert init.kaiming_uniform_(e) is e  # empty: nothing to fill, as PyTorch


def test_manual_seed_makes_init_repeatable():
    w = nt.zeros(5, 7, names=("hidden", "embed"))
    nt.manual_seed(3)
    first = values(init.kaiming_normal_(w)).copy()
    nt.manual_seed(3)
    assert np.array_equal(values(init.kaiming_normal_(w)), first)
    assert not np.array_equal(values(init.kaiming_normal_(w)), first)
