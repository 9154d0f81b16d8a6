"""Pooling (namedtensor/ops/pooling.py) and its layers: values against NumPy loops and PyTorch, names,
gradients of first and second order, errors, a dry run."""

import numpy as np
import pytest

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor import nn
from namedtensor.testing import assert_close, gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")


def ref_pool(x, kernel, stride, pad, mode):
    """Pooling of (N, C, *S) by its definition, window by window (max pads -inf, avg counts zeros)."""
    n = len(kernel)
    xp = np.pad(x, ((0, 0), (0, 0)) + ((pad, pad),) * n, constant_values=-np.inf if mode == "max" else 0)
    out = [(xp.shape[2 + i] - kernel[i]) // stride + 1 for i in range(n)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in np.ndindex(*out):
        window = xp[(slice(None), slice(None)) + tuple(slice(o[i] * stride, o[i] * stride + kernel[i]) for i in range(n))]
        y[(slice(None), slice(None)) + o] = window.reshape(x.shape[:2] + (-1,)).max(-1) if mode == "max" else \
            window.reshape(x.shape[:2] + (-1,)).mean(-1)
    return y


def ref_adaptive(x, out):
    n = len(out)
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in np.ndindex(*out):
        key = tuple(slice(o[i] * x.shape[2 + i] // out[i], -(-(o[i] + 1) * x.shape[2 + i] // out[i])) for i in range(n))
        y[(slice(None), slice(None)) + o] = x[(slice(None), slice(None)) + key].reshape(x.shape[:2] + (-1,)).mean(-1)
    return y


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pooling_matches_a_direct_loop_and_torch(n, mode):
    x = np.random.default_rng(n).uniform(-1, 1, (2, 3) + (7, 6, 5)[:n])
    fn = getattr(F, f"{mode}_pool{n}d")
    out = fn(nt.tensor(x), 3, 2, 1)
    assert_close(out.numpy(), ref_pool(x, (3,) * n, 2, 1, mode), rtol=1e-12, atol=1e-12)
    adaptive = getattr(F, f"adaptive_avg_pool{n}d")(nt.tensor(x), (4, 3, 2)[:n])
    assert_close(adaptive.numpy(), ref_adaptive(x, (4, 3, 2)[:n]), rtol=1e-12, atol=1e-12)
    torch = pytest.importorskip("torch")
    assert_close(out.numpy(), getattr(torch.nn.functional, f"{mode}_pool{n}d")(torch.tensor(x), 3, 2, 1).numpy(),
                 rtol=1e-12, atol=1e-12)
    t_adaptive = getattr(torch.nn.functional, f"adaptive_avg_pool{n}d")(torch.tensor(x), (4, 3, 2)[:n])
    assert_close(adaptive.numpy(), t_adaptive.numpy(), rtol=1e-12, atol=1e-12)


def test_max_pool_indices_are_pytorchs_flat_positions():
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 7, 6))
    out, idx = F.max_pool2d(nt.tensor(x), 3, 2, 1, return_indices=True)
    assert idx.dtype == nt.int64
    planes = x.reshape(2, 3, -1)
    assert_close(np.take_along_axis(planes, idx.numpy().reshape(2, 3, -1), -1).reshape(out.shape), out.numpy())
    torch = pytest.importorskip("torch")
    _, t_idx = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    assert (idx.numpy() == t_idx.numpy()).all()


@pytest.mark.parametrize("fn", [
    lambda t: F.max_pool2d(t, 2, 1, spatial=("h", "w")),
    lambda t: F.avg_pool2d(t, 3, 2, 1, spatial=("h", "w")),
    lambda t: F.adaptive_avg_pool2d(t, (3, None), spatial=("h", "w")),
    lambda t: F.max_pool1d(t, 3, 2, 1, spatial="w"),
])
def test_pooling_keeps_names_with_dims_anywhere_and_gradients(fn):
    x = nt.tensor(np.random.default_rng(1).uniform(-1, 1, (5, 2, 4, 3)), names=("h", "b", "w", "c"),
                  requires_grad=True)
    assert fn(x).names == ("h", "b", "w", "c")
    assert gradcheck(fn, x)
    assert gradgradcheck(fn, x)


def test_pooling_errors_and_dry_run():
    x = nt.zeros(2, 3, 4, 4)
    with pytest.raises(ValueError, match="max_pool2d: padding .* must be at most half the kernel size"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(NotImplementedError, match="avg_pool2d: ceil_mode=True is not supported"):
        F.avg_pool2d(x, 2, ceil_mode=True)
    with pytest.raises(NotImplementedError, match="avg_pool2d: count_include_pad=False"):
        F.avg_pool2d(x, 2, count_include_pad=False)
    with pytest.raises(ValueError, match="max_pool2d: the window .* is larger than the padded input"):
        F.max_pool2d(x, 5)
    with pytest.raises(ValueError, match="adaptive_avg_pool2d: output_size must be an int >= 1"):
        F.adaptive_avg_pool2d(x, 0)
    spec = nt.spec(("b", "h", "w"), (2, 8, 6), requires_grad=True)

    def fn(t):
        y = F.adaptive_avg_pool2d(F.max_pool2d(t, 2), 2)
        y.sum().backward()
        return y

    trace = nt.trace_shapes(fn, spec)
    assert trace.result.names == ("b", "h", "w") and trace.result.shape == (2, 2, 2)


def test_pooling_layers():
    x = nt.tensor(np.random.default_rng(2).uniform(-1, 1, (2, 3, 6, 6)))
    assert_close(nn.MaxPool2d(2)(x).numpy(), ref_pool(x.numpy(), (2, 2), 2, 0, "max"))
    assert_close(nn.AvgPool2d(3, stride=1, padding=1)(x).numpy(), ref_pool(x.numpy(), (3, 3), 1, 1, "avg"))
    assert nn.AdaptiveAvgPool2d(1, spatial=("h", "w"))(x.rename("b", "c", "h", "w")).shape == (2, 3, 1, 1)
    out, idx = nn.MaxPool1d(2, return_indices=True)(x[0])
    assert out.shape == idx.shape == (3, 6, 3)
    with pytest.raises(TypeError, match="MaxPool2d: unexpected arguments"):
        nn.MaxPool2d(2, bogus=1)
