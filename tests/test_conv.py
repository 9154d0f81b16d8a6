"""Convolutions (namedtensor/ops/conv.py) and their layers (namedtensor/nn/layers/conv.py).

Values against a direct loop in NumPy and against PyTorch where installed, the name rule with the
channel and spatial dims anywhere (Hypothesis), gradients of first and second order, errors, a dry run.
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


def ref_conv(x, w, b, stride, pads, dilation, groups):
    """The convolution of (N, C, *S) by its definition, one output position and kernel offset at a time."""
    n = w.ndim - 2
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    out = [(xp.shape[2 + i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for o in np.ndindex(*out):
        for k in np.ndindex(*w.shape[2:]):
            at = tuple(o[i] * stride[i] + k[i] * dilation[i] for i in range(n))
            patch = xp[(slice(None), slice(None)) + at]
            for g in range(groups):
                wk = w[(slice(g * og, (g + 1) * og), slice(None)) + k]
                y[(slice(None), slice(g * og, (g + 1) * og)) + o] += patch[:, g * cg:(g + 1) * cg] @ wk.T
    return y if b is None else y + b.reshape((-1,) + (1,) * n)


# (n, kwargs, the padding pairs they mean) for a kernel of 3 (and 2 on the last dim)
CASES = [
    (1, {}, ((0, 0),)),
    (1, {"stride": 2, "padding": 1}, ((1, 1),)),
    (1, {"padding": "same", "dilation": 2}, ((1, 1),)),
    (2, {"padding": "same"}, ((1, 1), (0, 1))),
    (2, {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2}, ((1, 1), (0, 0))),
    (2, {"padding": "valid", "groups": 4}, ((0, 0), (0, 0))),
    (3, {"stride": 2, "padding": 1}, ((1, 1),) * 3),
]


def _operands(n, groups, seed=0):
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (2, 4) + (6, 7, 5)[:n])
    w = r.uniform(-1, 1, (8, 4 // groups) + (3,) * (n - 1) + (2,))
    return x, w, r.uniform(-1, 1, 8)


# PyTorch's own note that 'same' with an even kernel pads a copy of its input: about its speed, not ours
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths:UserWarning")
@pytest.mark.parametrize("n,kwargs,pads", CASES)
def test_conv_matches_a_direct_loop_and_torch(n, kwargs, pads):
    groups = kwargs.get("groups", 1)
    x, w, b = _operands(n, groups)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    out = fn(nt.tensor(x), nt.tensor(w), nt.tensor(b), **kwargs)
    stride = kwargs.get("stride", 1)
    dilation = kwargs.get("dilation", 1)
    expected = ref_conv(x, w, b, (stride,) * n if isinstance(stride, int) else stride, pads,
                        (dilation,) * n if isinstance(dilation, int) else dilation, groups)
    assert out.names == (None,) * (n + 2)
    assert_close(out.numpy(), expected, rtol=1e-10, atol=1e-10)
    torch = pytest.importorskip("torch")
    tfn = getattr(torch.nn.functional, f"conv{n}d")
    assert_close(out.numpy(), tfn(torch.tensor(x), torch.tensor(w), torch.tensor(b), **kwargs).numpy(),
                 rtol=1e-10, atol=1e-10)


def test_conv_takes_an_unbatched_input_as_pytorch():
    x, w, b = _operands(2, 1)
    out = F.conv2d(nt.tensor(x[0]), nt.tensor(w), nt.tensor(b), padding=1)
    assert_close(out.numpy(), ref_conv(x[:1], w, b, (1, 1), ((1, 1), (1, 1)), (1, 1), 1)[0], rtol=1e-10, atol=1e-10)


@st.composite
def named_layouts(draw):
    """A 2-d convolution's input with its batch, channel and spatial dims in any order, plus an extra batch dim."""
    order = draw(st.permutations(["b", "c", "h", "w", "t"]))
    stride = draw(st.integers(1, 2))
    padding = draw(st.sampled_from([0, 1, "same"] if stride == 1 else [0, 1]))
    out_dim = draw(st.sampled_from([None, "feat"]))
    return tuple(order), stride, padding, out_dim


@given(named_layouts())
def test_conv_finds_its_dims_by_name_anywhere_and_keeps_names(case):
    order, stride, padding, out_dim = case
    sizes = {"b": 2, "c": 3, "h": 5, "w": 4, "t": 2}
    r = np.random.default_rng(1)
    x = r.uniform(-1, 1, [sizes[d] for d in order])
    w, b = r.uniform(-1, 1, (4, 3, 3, 2)), r.uniform(-1, 1, 4)
    out = F.conv2d(nt.tensor(x, names=order), nt.tensor(w, names=("c_out", "c", "h", "w")), nt.tensor(b),
                   stride, padding, dim="c", spatial=("h", "w"), out_dim=out_dim)
    assert out.names == tuple(out_dim if d == "c" and out_dim else d for d in order)
    canonical = np.transpose(x, [order.index(d) for d in "btchw"]).reshape(4, 3, 5, 4)
    pads = ((1, 1), (0, 1)) if padding == "same" else ((padding, padding),) * 2
    expected = ref_conv(canonical, w, b, (stride,) * 2, pads, (1, 1), 1)
    got = out.rename(None).permute([order.index(d) for d in "btchw"]).numpy()
    assert_close(got.reshape(expected.shape), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n,kwargs,pads", CASES)
def test_conv_gradients_first_and_second_order(n, kwargs, pads):
    groups = kwargs.get("groups", 1)
    r = np.random.default_rng(2)
    x = nt.tensor(r.uniform(-1, 1, (2, 4) + (5, 4, 3)[:n]), requires_grad=True)
    w = nt.tensor(r.uniform(-1, 1, (4, 4 // groups) + (2,) * n), requires_grad=True)
    b = nt.tensor(r.uniform(-1, 1, 4), requires_grad=True)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    assert gradcheck(lambda x, w, b: fn(x, w, b, **kwargs), x, w, b)
    if n < 3:
        assert gradgradcheck(lambda x, w, b: fn(x, w, b, **kwargs), x, w, b)


def test_conv_gradients_keep_names_with_dims_anywhere():
    r = np.random.default_rng(3)
    x = nt.tensor(r.uniform(-1, 1, (4, 2, 3, 5)), names=("w", "c", "b", "h"), requires_grad=True)
    w = nt.tensor(r.uniform(-1, 1, (3, 2, 2, 2)), names=("c_out", "c", "h", "w"), requires_grad=True)
    b = nt.tensor(r.uniform(-1, 1, 3), names=("c_out",), requires_grad=True)

    def fn(x, w, b):
        return F.conv2d(x, w, b, stride=(1, 2), padding=1, dim="c", spatial=("h", "w"), out_dim="c_out")

    assert fn(x, w, b).names == ("w", "c_out", "b", "h")
    assert gradcheck(fn, x, w, b)
    assert gradgradcheck(fn, x, w, b)


def test_conv_errors():
    x = nt.zeros(2, 4, 6, 6, names=("b", "c", "h", "w"))
    w = nt.zeros(8, 4, 3, 3)
    with pytest.raises(ValueError, match="conv2d: padding='same' is not supported for strided"):
        F.conv2d(x, w, padding="same", stride=2)
    with pytest.raises(ValueError, match="conv2d: the input's dim 1 .'c'. has 4 channels, but the weight"):
        F.conv2d(x, nt.zeros(8, 3, 3, 3))
    with pytest.raises(ValueError, match="conv2d: the weight must be 4-D"):
        F.conv2d(x, nt.zeros(8, 4, 3))
    with pytest.raises(ValueError, match="conv2d: the kernel .* is larger than the padded input"):
        F.conv2d(x, nt.zeros(8, 4, 7, 7))
    with pytest.raises(ValueError, match="conv2d: stride must be an int >= 1"):
        F.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="conv2d: padding must be 'valid', 'same'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(ValueError, match="conv2d: groups must be a positive int"):
        F.conv2d(x, w, groups=0)
    with pytest.raises(ValueError, match="conv2d: the bias must be 1-D of size 8"):
        F.conv2d(x, w, nt.zeros(7))
    with pytest.raises(nt.NamesError, match="conv2d: the weight .* is .out, in, .kernel., but its 'w' meets"):
        F.conv2d(x, nt.zeros(8, 4, 3, 3, names=("o", "c", "w", "h")), dim="c", spatial=("h", "w"))
    with pytest.raises(nt.NamesError, match="conv2d: the output channel dim would be named 'b'"):
        F.conv2d(x, w, dim="c", out_dim="b")
    with pytest.raises(nt.NamesError, match="conv2d: dim 1 .'c'. of the input .* cannot be both the channel"):
        F.conv2d(x, w, dim="c", spatial=("c", "w"))
    with pytest.raises(TypeError, match="conv2d: the input must be floating point"):
        F.conv2d(nt.zeros(2, 4, 6, 6, dtype=nt.int64), w)


def test_conv_dry_run_on_the_meta_backend():
    x = nt.spec(("h", "w", "b", "c"), (9, 8, 2, 3), requires_grad=True)
    w = nt.spec(("c_out", "c", "h", "w"), (5, 3, 3, 3), requires_grad=True)

    def fn(x, w):
        y = F.conv2d(x, w, stride=2, padding=1, dim="c", spatial=("h", "w"))
        y.sum().backward()
        return y

    trace = nt.trace_shapes(fn, x, w)
    assert trace.result.names == ("h", "w", "b", "c") and trace.result.shape == (5, 4, 2, 5)
    assert "conv" in trace.ops


# ----------------------------------------------------------------------------- layers


@pytest.mark.parametrize("n", [1, 2, 3])
def test_conv_layer_pytorch_signature_matches_torch(n):
    layer = getattr(nn, f"Conv{n}d")(4, 6, 3, stride=2, padding=1, groups=2, dtype=nt.float64)
    assert layer.weight.shape == (6, 2) + (3,) * n and layer.weight.names == (None,) * (n + 2)
    x = np.random.default_rng(4).uniform(-1, 1, (2, 4) + (5,) * n)
    with nt.no_grad():
        out = layer(nt.tensor(x))
    weight, bias = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    expected = ref_conv(x, weight, bias, (2,) * n, ((1, 1),) * n, (1,) * n, 2)
    assert_close(out.numpy(), expected, rtol=1e-10, atol=1e-10)
    bound = 1 / np.sqrt(2 * 3 ** n)
    assert np.abs(weight).max() <= bound and np.abs(bias).max() <= bound
    torch = pytest.importorskip("torch")
    t = getattr(torch.nn, f"Conv{n}d")(4, 6, 3, stride=2, padding=1, groups=2, dtype=torch.float64)
    assert set(t.state_dict()) == set(layer.state_dict())
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in layer.state_dict().items()})
    assert_close(out.numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-10)


def test_conv_layer_named_form_keeps_names():
    layer = nn.Conv2d("c", ("h", "w"), 3, 4, (3, 2), padding="same", dtype=nt.float64)
    assert layer.weight.names == ("c_out", "c", "h", "w") and layer.bias.names == ("c_out",)
    x = nt.randn(5, 2, 6, 3, names=("h", "b", "w", "c"), dtype=nt.float64)
    out = layer(x)
    assert out.names == ("h", "b", "w", "c") and out.shape == (5, 2, 6, 4)
    renamed = nn.Conv2d("c", ("h", "w"), 3, 4, 3, out_dim="feat")
    assert renamed.weight.names == ("feat", "c", "h", "w")
    assert renamed(x.float()).names == ("h", "b", "w", "feat")


def test_conv_layer_refusals():
    with pytest.raises(NotImplementedError, match="Conv2d: padding_mode='reflect' is not supported"):
        nn.Conv2d(3, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="Conv1d: in_channels .3. and out_channels .4. must be divisible by groups"):
        nn.Conv1d(3, 4, 3, groups=2)
    with pytest.raises(TypeError, match="Conv2d: spatial must be a tuple of 2 dim names"):
        nn.Conv2d("c", ("h",), 3, 4, 3)
