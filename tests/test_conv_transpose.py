"""Transposed convolutions (namedtensor/ops/conv.py) and their layers (namedtensor/nn/layers/conv.py).

Values against a direct scatter loop in NumPy and against PyTorch where installed, the name rule with
the channel and spatial dims anywhere (Hypothesis), gradients of first and second order, errors, a
dry run.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor import nn
from namedtensor.testing import assert_close, gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")

FNS = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _per_dim(value, n):
    """An int or a tuple of them as one per spatial dim."""
    return (value,) * n if isinstance(value, int) else tuple(value)


def ref_conv_transpose(x, w, b, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed convolution of (N, C, *S) by its definition: each input entry times the kernel,
    added at stride * i + dilation * k, then ``padding`` cropped off both sides (output_padding after)."""
    n = w.ndim - 2
    stride, padding, dilation = _per_dim(stride, n), _per_dim(padding, n), _per_dim(dilation, n)
    output_padding = _per_dim(output_padding, n)
    ig, og = x.shape[1] // groups, w.shape[1]
    full = [(x.shape[2 + i] - 1) * stride[i] + dilation[i] * (w.shape[2 + i] - 1) + 1 + output_padding[i]
            for i in range(n)]
    y = np.zeros((x.shape[0], og * groups, *full))
    for i in np.ndindex(*x.shape[2:]):
        for k in np.ndindex(*w.shape[2:]):
            at = tuple(i[d] * stride[d] + k[d] * dilation[d] for d in range(n))
            for g in range(groups):
                wk = w[(slice(g * ig, (g + 1) * ig), slice(None)) + k]
                y[(slice(None), slice(g * og, (g + 1) * og)) + at] += x[(slice(None), slice(g * ig, (g + 1) * ig)) + i] @ wk
    y = y[(slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(padding, full))]
    return y if b is None else y + b.reshape((-1,) + (1,) * n)


# (n, kwargs) for a kernel of 3 (and 2 on the last dim); output_padding below stride, and once only below dilation
CASES = [
    (1, {}),
    (1, {"stride": 2, "padding": 1, "output_padding": 1}),
    (1, {"dilation": 3, "output_padding": 2}),
    (2, {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2, "output_padding": (1, 1)}),
    (2, {"stride": 3, "padding": 2, "output_padding": 2, "groups": 4}),
    (3, {"stride": 2, "padding": 1, "output_padding": (1, 0, 1)}),
]


def _operands(n, groups, seed=0):
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (2, 4) + (4, 3, 2)[:n])
    w = r.uniform(-1, 1, (4, 8 // groups) + (3,) * (n - 1) + (2,))
    return x, w, r.uniform(-1, 1, 8)


@pytest.mark.parametrize("n,kwargs", CASES)
def test_conv_transpose_matches_a_direct_loop_and_torch(n, kwargs):
    x, w, b = _operands(n, kwargs.get("groups", 1))
    out = FNS[n](nt.tensor(x), nt.tensor(w), nt.tensor(b), **kwargs)
    assert out.names == (None,) * (n + 2)
    assert_close(out.numpy(), ref_conv_transpose(x, w, b, **kwargs), rtol=1e-10, atol=1e-10)
    torch = pytest.importorskip("torch")
    tfn = getattr(torch.nn.functional, f"conv_transpose{n}d")
    assert_close(out.numpy(), tfn(torch.tensor(x), torch.tensor(w), torch.tensor(b), **kwargs).numpy(),
                 rtol=1e-10, atol=1e-10)


def test_conv_transpose_takes_an_unbatched_input_and_no_bias():
    x, w, _ = _operands(2, 1)
    out = F.conv_transpose2d(nt.tensor(x[0]), nt.tensor(w), stride=2)
    assert_close(out.numpy(), ref_conv_transpose(x[:1], w, None, stride=2)[0], rtol=1e-10, atol=1e-10)


def test_conv_transpose_is_the_adjoint_of_conv():
    # <conv(a, w), x> == <a, conv_transpose(x, w)> for the same geometry: the defining property
    r = np.random.default_rng(5)
    a, w, x = r.uniform(-1, 1, (2, 3, 7, 7)), r.uniform(-1, 1, (4, 3, 3, 2)), r.uniform(-1, 1, (2, 4, 4, 4))
    geo = {"stride": 2, "padding": 1}
    lhs = (F.conv2d(nt.tensor(a), nt.tensor(w), **geo).numpy() * x).sum()
    rhs = (a * F.conv_transpose2d(nt.tensor(x), nt.tensor(w), output_padding=(0, 1), **geo).numpy()).sum()
    assert_close(np.float64(lhs), np.float64(rhs), rtol=1e-10, atol=1e-10)


@st.composite
def named_layouts(draw):
    """A 2-d transposed convolution's input with its dims in any order, plus an extra batch dim."""
    order = draw(st.permutations(["b", "c", "h", "w", "t"]))
    stride = draw(st.integers(1, 2))
    padding = draw(st.integers(0, 1))
    output_padding = draw(st.integers(0, stride - 1))
    out_dim = draw(st.sampled_from([None, "feat"]))
    return tuple(order), stride, padding, output_padding, out_dim


@given(named_layouts())
def test_conv_transpose_finds_its_dims_by_name_anywhere_and_keeps_names(case):
    order, stride, padding, output_padding, out_dim = case
    sizes = {"b": 2, "c": 3, "h": 4, "w": 3, "t": 2}
    r = np.random.default_rng(1)
    x = r.uniform(-1, 1, [sizes[d] for d in order])
    w, b = r.uniform(-1, 1, (3, 4, 3, 2)), r.uniform(-1, 1, 4)
    out = F.conv_transpose2d(nt.tensor(x, names=order), nt.tensor(w, names=("c", "c_out", "h", "w")), nt.tensor(b),
                             stride, padding, output_padding, dim="c", spatial=("h", "w"), out_dim=out_dim)
    assert out.names == tuple(out_dim if d == "c" and out_dim else d for d in order)
    canonical = np.transpose(x, [order.index(d) for d in "btchw"]).reshape(4, 3, 4, 3)
    expected = ref_conv_transpose(canonical, w, b, stride, padding, output_padding)
    got = out.rename(None).permute([order.index(d) for d in "btchw"]).numpy()
    assert_close(got.reshape(expected.shape), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n,kwargs", CASES)
def test_conv_transpose_gradients_first_and_second_order(n, kwargs):
    groups = kwargs.get("groups", 1)
    r = np.random.default_rng(2)
    x = nt.tensor(r.uniform(-1, 1, (2, 4) + (3, 2, 2)[:n]), requires_grad=True)
    w = nt.tensor(r.uniform(-1, 1, (4, 8 // groups) + (2,) * n), requires_grad=True)
    b = nt.tensor(r.uniform(-1, 1, 8), requires_grad=True)
    assert gradcheck(lambda x, w, b: FNS[n](x, w, b, **kwargs), x, w, b)
    if n < 3:
        assert gradgradcheck(lambda x, w, b: FNS[n](x, w, b, **kwargs), x, w, b)


def test_conv_transpose_gradients_keep_names_with_dims_anywhere():
    r = np.random.default_rng(3)
    x = nt.tensor(r.uniform(-1, 1, (3, 2, 2, 4)), names=("w", "c", "b", "h"), requires_grad=True)
    w = nt.tensor(r.uniform(-1, 1, (2, 3, 2, 2)), names=("c", "c_out", "h", "w"), requires_grad=True)
    b = nt.tensor(r.uniform(-1, 1, 3), names=("c_out",), requires_grad=True)

    def fn(x, w, b):
        return F.conv_transpose2d(x, w, b, stride=(1, 2), padding=1, output_padding=(0, 1), dim="c",
                                  spatial=("h", "w"), out_dim="c_out")

    y = fn(x, w, b)
    assert y.names == ("w", "c_out", "b", "h") and y.shape == (5, 3, 2, 3)
    assert gradcheck(fn, x, w, b)
    assert gradgradcheck(fn, x, w, b)


def test_conv_transpose_errors():
    x = nt.zeros(2, 4, 5, 5, names=("b", "c", "h", "w"))
    w = nt.zeros(4, 2, 3, 3)
    with pytest.raises(ValueError, match="conv_transpose2d: output_padding must be smaller than stride or dilation"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ValueError, match="conv_transpose2d: the input's dim 1 .'c'. has 4 channels, but the weight"):
        F.conv_transpose2d(x, nt.zeros(3, 2, 3, 3))
    with pytest.raises(ValueError, match=r"conv_transpose2d: the input.s .* with groups=3 expects 4 \(and in channels divisible by groups"):
        F.conv_transpose2d(x, w, groups=3)
    with pytest.raises(ValueError, match="conv_transpose2d: the weight must be 4-D .in, out // groups"):
        F.conv_transpose2d(x, nt.zeros(4, 2, 3))
    with pytest.raises(ValueError, match="conv_transpose2d: the output's spatial size .* is not positive"):
        F.conv_transpose2d(x, nt.zeros(4, 2, 1, 1), padding=3)
    with pytest.raises(ValueError, match="conv_transpose2d: padding must be an int >= 0"):
        F.conv_transpose2d(x, w, padding="same")
    with pytest.raises(ValueError, match="conv_transpose2d: the bias must be 1-D of size 2"):
        F.conv_transpose2d(x, w, nt.zeros(4))
    with pytest.raises(nt.NamesError, match=r"conv_transpose2d: the weight .* is \(in, out, \*kernel\), but its 'o'"):
        F.conv_transpose2d(x, nt.zeros(4, 2, 3, 3, names=("o", "c", "h", "w")), dim="c", spatial=("h", "w"))
    with pytest.raises(nt.NamesError, match="conv_transpose2d: the bias .* must be named like the weight's output dim 'o'"):
        F.conv_transpose2d(x, nt.zeros(4, 2, 3, 3, names=("c", "o", "h", "w")), nt.zeros(2, names=("c",)),
                           dim="c", spatial=("h", "w"), out_dim="p")
    with pytest.raises(TypeError, match="conv_transpose2d: the input must be floating point"):
        F.conv_transpose2d(nt.zeros(2, 4, 5, 5, dtype=nt.int64), w)


def test_conv_transpose_dry_run_on_the_meta_backend():
    x = nt.spec(("h", "w", "b", "c"), (4, 3, 2, 3), requires_grad=True)
    w = nt.spec(("c", "c_out", "h", "w"), (3, 5, 3, 3), requires_grad=True)

    def fn(x, w):
        y = F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, dim="c", spatial=("h", "w"))
        y.sum().backward()
        return y

    trace = nt.trace_shapes(fn, x, w)
    assert trace.result.names == ("h", "w", "b", "c") and trace.result.shape == (8, 6, 2, 5)
    assert "conv_transpose" in trace.ops


# ----------------------------------------------------------------------------- layers


@pytest.mark.parametrize("n", [1, 2, 3])
def test_conv_transpose_layer_pytorch_signature_matches_torch(n):
    kwargs = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}
    layer = getattr(nn, f"ConvTranspose{n}d")(4, 6, 3, dtype=nt.float64, **kwargs)
    assert layer.weight.shape == (4, 3) + (3,) * n and layer.weight.names == (None,) * (n + 2)
    x = np.random.default_rng(4).uniform(-1, 1, (2, 4) + (3,) * n)
    with nt.no_grad():
        out = layer(nt.tensor(x))
    weight, bias = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    assert_close(out.numpy(), ref_conv_transpose(x, weight, bias, **kwargs), rtol=1e-10, atol=1e-10)
    # PyTorch's fan_in of a transposed weight (in, out // groups, *kernel) is its second dim times the kernel
    bound = 1 / np.sqrt(3 * 3 ** n)
    assert np.abs(weight).max() <= bound and np.abs(bias).max() <= bound
    torch = pytest.importorskip("torch")
    t = getattr(torch.nn, f"ConvTranspose{n}d")(4, 6, 3, dtype=torch.float64, **kwargs)
    assert set(t.state_dict()) == set(layer.state_dict())
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in layer.state_dict().items()})
    assert_close(out.numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-10)


def test_conv_transpose_layer_named_form_keeps_names():
    layer = nn.ConvTranspose2d("c", ("h", "w"), 3, 4, (3, 2), stride=2, output_padding=(1, 0), dtype=nt.float64)
    assert layer.weight.names == ("c", "c_out", "h", "w") and layer.bias.names == ("c_out",)
    x = nt.randn(5, 2, 6, 3, names=("h", "b", "w", "c"), dtype=nt.float64)
    out = layer(x)
    assert out.names == ("h", "b", "w", "c") and out.shape == (12, 2, 12, 4)
    renamed = nn.ConvTranspose2d("c", ("h", "w"), 3, 4, 3, out_dim="feat", bias=False)
    assert renamed.weight.names == ("c", "feat", "h", "w") and renamed.bias is None
    assert renamed(x.float()).names == ("h", "b", "w", "feat")
    assert "output_padding=(1, 0)" in repr(layer)


def test_conv_transpose_layer_refusals():
    with pytest.raises(NotImplementedError, match="ConvTranspose2d: padding_mode='reflect' is not supported"):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="ConvTranspose1d: in_channels .3. and out_channels .4. must be divisible"):
        nn.ConvTranspose1d(3, 4, 3, groups=2)
    with pytest.raises(TypeError, match="ConvTranspose2d: spatial must be a tuple of 2 dim names"):
        nn.ConvTranspose2d("c", ("h",), 3, 4, 3)
    with pytest.raises(TypeError, match="ConvTranspose2d: output_padding must be an int or a tuple of ints"):
        nn.ConvTranspose2d(3, 4, 3, output_padding="same")


@pytest.mark.parametrize("n", [1, 2])
def test_conv_transpose_layer_output_size_picks_the_output_padding_as_torch(n):
    layer = getattr(nn, f"ConvTranspose{n}d")(2, 3, 3, stride=3, padding=1, dtype=nt.float64)
    x = np.random.default_rng(5).uniform(-1, 1, (2, 2) + (4,) * n)
    torch = pytest.importorskip("torch")
    t = getattr(torch.nn, f"ConvTranspose{n}d")(2, 3, 3, stride=3, padding=1, dtype=torch.float64)
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in layer.state_dict().items()})
    # (4 - 1) * 3 - 2 + 3 = 10 is the smallest size; a stride of 3 allows 10, 11 and 12
    for size in (10, 11, 12):
        spatial = (size,) * n
        for output_size in (spatial, (2, 3) + spatial):
            with nt.no_grad():
                out = layer(nt.tensor(x), output_size=output_size)
            assert out.shape == (2, 3) + spatial
            expected = t(torch.tensor(x), output_size=list(output_size)).detach().numpy()
            assert_close(out.numpy(), expected, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match=r"conv_transpose: requested an output size of \(13,\), but valid sizes range "
                                         r"from \(10,\) to \(12,\)"):
        nn.ConvTranspose1d(2, 3, 3, stride=3, padding=1)(nt.randn(2, 2, 4), output_size=(13,))


def test_conv_transpose_output_size_by_name_and_its_errors():
    layer = nn.ConvTranspose2d("c", ("h", "w"), 3, 4, 3, stride=2, dtype=nt.float64)
    x = nt.randn(5, 2, 6, 3, names=("h", "b", "w", "c"), dtype=nt.float64)
    out = layer(x, output_size=(12, 13))  # h: 11 or 12, w: 13 or 14
    assert out.names == ("h", "b", "w", "c") and out.shape == (12, 2, 13, 4)
    assert layer(x, output_size=(12, 2, 14, 4)).shape == (12, 2, 14, 4)  # the whole shape, in x's layout
    assert gradcheck(lambda t: layer(t, output_size=(6, 7)), x[:2, :, :3].requires_grad_())  # h 5 or 6, w 7 or 8
    with pytest.raises(ValueError, match=r"conv_transpose: output_size must give the 2 spatial size\(s\) or the "
                                         r"whole output shape \(4 sizes\), got \(12,\)"):
        layer(x, output_size=(12,))
    with pytest.raises(TypeError, match="conv_transpose: output_size must be a tuple or list of ints, got int 12"):
        layer(x, output_size=12)
    with pytest.raises(TypeError, match=r"Conv2d.forward: output_size= belongs to the transposed convolutions"):
        nn.Conv2d(3, 4, 3)(nt.randn(1, 3, 5, 5), output_size=(3, 3))
