"""Batch and group normalisation (namedtensor/ops/batchnorm.py) and their layers (nn/layers/batchnorm.py).

Values and running statistics against NumPy references and PyTorch where installed, the name rule with
the channel dim anywhere (Hypothesis), gradients of first and second order, errors, a dry run, and the
layers' PyTorch state dicts and modes.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor import nn
from namedtensor.testing import assert_close, gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")

TOL = {"rtol": 1e-10, "atol": 1e-10}


def ref_batch_norm(x, rm, rv, w, b, training, momentum, eps):
    """``(y, new running mean, new running var)`` of (N, C, *) by the definition."""
    axes = tuple(a for a in range(x.ndim) if a != 1)
    shape = (-1,) + (1,) * (x.ndim - 2)
    if training:
        mean, var = x.mean(axes), x.var(axes)
        n = x.size // x.shape[1]
        rm = None if rm is None else (1 - momentum) * rm + momentum * mean
        rv = None if rv is None else (1 - momentum) * rv + momentum * var * n / (n - 1)
    else:
        mean, var = rm, rv
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y, rm, rv


def ref_group_norm(x, groups, w, b, eps):
    """Group norm of (N, C, *) by the definition: each sample's group of channels normalised together."""
    g = x.reshape(x.shape[0], groups, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (-1,) + (1,) * (x.ndim - 2)
    return y * (1 if w is None else w.reshape(shape)) + (0 if b is None else b.reshape(shape))


def _operands(shape, seed=0):
    r = np.random.default_rng(seed)
    c = shape[1]
    return (r.uniform(-1, 1, shape), r.uniform(-1, 1, c), r.uniform(0.5, 1.5, c), r.uniform(-1, 1, c),
            r.uniform(-1, 1, c))


# ----------------------------------------------------------------------------- batch_norm


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (2, 3, 4, 5), (2, 3, 2, 3, 2)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_numpy_and_torch(shape, training):
    x, rm, rv, w, b = _operands(shape)
    trm, trv = nt.tensor(rm), nt.tensor(rv)
    out = F.batch_norm(nt.tensor(x), trm, trv, nt.tensor(w), nt.tensor(b), training, 0.3, 1e-3)
    y, erm, erv = ref_batch_norm(x, rm, rv, w, b, training, 0.3, 1e-3)
    assert out.names == (None,) * len(shape)
    assert_close(out.numpy(), y, **TOL)
    assert_close(trm.numpy(), erm, **TOL)
    assert_close(trv.numpy(), erv, **TOL)
    torch = pytest.importorskip("torch")
    t_rm, t_rv = torch.tensor(rm), torch.tensor(rv)
    expected = torch.nn.functional.batch_norm(torch.tensor(x), t_rm, t_rv, torch.tensor(w), torch.tensor(b),
                                              training, 0.3, 1e-3)
    assert_close(out.numpy(), expected.numpy(), **TOL)
    assert_close(trm.numpy(), t_rm.numpy(), **TOL)
    assert_close(trv.numpy(), t_rv.numpy(), **TOL)


def test_batch_norm_without_running_stats_or_affine_uses_the_batch():
    x, *_ = _operands((4, 3, 5))
    out = F.batch_norm(nt.tensor(x), None, None, training=True)
    assert_close(out.numpy(), ref_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)[0], **TOL)


def test_batch_norm_keeps_buffer_names_when_the_input_is_named():
    # the running statistics of PyTorch's form are unnamed: a named input must not name them
    x, rm, rv, _, _ = _operands((4, 3, 5))
    trm, trv = nt.tensor(rm), nt.tensor(rv)
    out = F.batch_norm(nt.tensor(x, names=("b", "c", "t")), trm, trv, training=True)
    assert out.names == ("b", "c", "t") and trm.names == (None,) and trv.names == (None,)
    assert_close(trm.numpy(), ref_batch_norm(x, rm, rv, None, None, True, 0.1, 1e-5)[1], **TOL)


@st.composite
def channel_layouts(draw):
    """An input's dims in any order, with the channel dim 'c' anywhere, and whether the parameters are named."""
    return tuple(draw(st.permutations(["b", "c", "h", "w"]))), draw(st.booleans()), draw(st.booleans())


def _canonical(x, order, first="bchw"):
    """``x`` of dims ``order`` laid out as ``first``."""
    return np.transpose(x, [order.index(d) for d in first])


@settings(max_examples=25, deadline=None)
@given(channel_layouts())
def test_batch_norm_finds_the_channel_dim_by_name_anywhere(case):
    order, named, training = case
    sizes = {"b": 2, "c": 3, "h": 4, "w": 2}
    x, rm, rv, w, b = _operands((2, 3, 4, 2), seed=5)
    xo = np.transpose(x, ["bchw".index(d) for d in order])
    pn = ("c",) if named else None
    trm, trv = nt.tensor(rm, names=pn), nt.tensor(rv, names=pn)
    out = F.batch_norm(nt.tensor(xo, names=order), trm, trv, nt.tensor(w, names=pn), nt.tensor(b, names=pn),
                       training, 0.2, 1e-4, dim="c")
    y, erm, erv = ref_batch_norm(x, rm, rv, w, b, training, 0.2, 1e-4)
    assert out.names == order and out.shape == tuple(sizes[d] for d in order)
    assert trm.names == (pn or (None,))
    assert_close(_canonical(out.numpy(), order), y, **TOL)
    assert_close(trm.numpy(), erm, **TOL)
    assert_close(trv.numpy(), erv, **TOL)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradients_first_and_second_order(training):
    x, rm, rv, w, b = _operands((3, 2, 4), seed=6)
    xt = nt.tensor(x, names=("t", "c", "b"), requires_grad=True)
    wt, bt = (nt.tensor(p, names=("c",), requires_grad=True) for p in (w, b))

    def fn(x, w, b):
        # fresh running statistics on each call: training updates them in place
        return F.batch_norm(x, nt.tensor(rm, names=("c",)), nt.tensor(rv, names=("c",)), w, b, training, dim="c")

    assert gradcheck(fn, xt, wt, bt)
    assert gradgradcheck(fn, xt, wt, bt)


def test_batch_norm_gradients_reach_the_running_stats_in_eval():
    x, rm, rv, _, _ = _operands((3, 2, 4), seed=7)
    xt = nt.tensor(x, requires_grad=True)
    rmt, rvt = nt.tensor(rm, requires_grad=True), nt.tensor(rv, requires_grad=True)
    assert gradcheck(lambda x, m, v: F.batch_norm(x, m, v), xt, rmt, rvt)


def test_batch_norm_errors():
    x = nt.zeros(2, 3, 4, names=("b", "c", "t"))
    with pytest.raises(ValueError, match="batch_norm: running_mean and running_var must be given when training"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match="batch_norm: expected more than 1 value per channel when training"):
        F.batch_norm(nt.zeros(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match=r"batch_norm: the weight has shape \(4,\), but the channel dim"):
        F.batch_norm(x, None, None, nt.ones(4), training=True)
    with pytest.raises(ValueError, match="batch_norm: the weight, bias and running statistics must have one dim"):
        F.batch_norm(x, None, None, nt.ones(3, 1), training=True)
    with pytest.raises(nt.NamesError, match=r"batch_norm: a parameter named \('t',\) meets the channel dim"):
        F.batch_norm(x, nt.zeros(3, names=("t",)), nt.ones(3))
    with pytest.raises(ValueError, match=r"batch_norm: the input \(None,\) must be \(N, C, \*\)"):
        F.batch_norm(nt.zeros(3), None, None, training=True)
    with pytest.raises(nt.NamesError, match="batch_norm: no dim named 'k'"):
        F.batch_norm(x, None, None, training=True, dim="k")
    with pytest.raises(TypeError, match="batch_norm: the input must be floating point"):
        F.batch_norm(nt.zeros(2, 3, dtype=nt.int64), None, None, training=True)
    with pytest.raises(TypeError, match="batch_norm: running_mean must be a Tensor"):
        F.batch_norm(x, np.zeros(3), nt.ones(3))
    with pytest.raises(TypeError, match="batch_norm: the weight is nt.float64 but the input is nt.float32"):
        F.batch_norm(x, None, None, nt.ones(3, dtype=nt.float64), training=True)


def test_batch_norm_dry_run_on_the_meta_backend():
    x = nt.spec(("h", "b", "c"), (5, 2, 3), requires_grad=True)
    w = nt.spec(("c",), (3,), requires_grad=True)
    rm, rv = nt.spec(("c",), (3,)), nt.spec(("c",), (3,))

    def fn(x, w, rm, rv):
        y = F.batch_norm(x, rm, rv, w, None, True, dim="c")
        y.sum().backward()
        return y

    trace = nt.trace_shapes(fn, x, w, rm, rv)
    assert trace.result.names == ("h", "b", "c") and trace.result.shape == (5, 2, 3)
    assert "mean" in trace.ops and "rsqrt" in trace.ops


# ----------------------------------------------------------------------------- group_norm


@pytest.mark.parametrize("shape,groups", [((2, 6), 3), ((3, 4, 5), 2), ((2, 6, 3, 2), 3), ((2, 4, 2, 2, 3), 4)])
def test_group_norm_matches_numpy_and_torch(shape, groups):
    x, _, _, w, b = _operands(shape, seed=8)
    out = F.group_norm(nt.tensor(x), groups, nt.tensor(w), nt.tensor(b), 1e-3)
    assert out.names == (None,) * len(shape)
    assert_close(out.numpy(), ref_group_norm(x, groups, w, b, 1e-3), **TOL)
    assert_close(F.group_norm(nt.tensor(x), groups).numpy(), ref_group_norm(x, groups, None, None, 1e-5), **TOL)
    torch = pytest.importorskip("torch")
    expected = torch.nn.functional.group_norm(torch.tensor(x), groups, torch.tensor(w), torch.tensor(b), 1e-3)
    assert_close(out.numpy(), expected.numpy(), **TOL)


@settings(max_examples=25, deadline=None)
@given(channel_layouts())
def test_group_norm_finds_its_dims_by_name_anywhere(case):
    order, named, batch_given = case
    x, _, _, _, _ = _operands((2, 4, 3, 2), seed=9)
    w, b = np.linspace(0.5, 2, 4), np.linspace(-1, 1, 4)
    xo = np.transpose(x, ["bchw".index(d) for d in order])
    pn = ("c",) if named else None
    # without batch= the batch dim is the first: name it 'b' by putting it first when batch= is left out
    if not batch_given:
        order = ("b",) + tuple(d for d in order if d != "b")
        xo = np.transpose(x, ["bchw".index(d) for d in order])
    out = F.group_norm(nt.tensor(xo, names=order), 2, nt.tensor(w, names=pn), nt.tensor(b, names=pn),
                       dim="c", batch="b" if batch_given else None)
    assert out.names == order
    assert_close(_canonical(out.numpy(), order), ref_group_norm(x, 2, w, b, 1e-5), **TOL)


def test_group_norm_with_several_batch_dims():
    x, _, _, _, _ = _operands((2, 4, 3, 5), seed=10)
    out = F.group_norm(nt.tensor(x, names=("b", "c", "t", "h")), 2, dim="c", batch=("b", "t"))
    # the dims b and t keep separate statistics: (b, t) is the sample, (c, h) the features
    canonical = np.transpose(x, (0, 2, 1, 3)).reshape(6, 4, 5)
    expected = np.transpose(ref_group_norm(canonical, 2, None, None, 1e-5).reshape(2, 3, 4, 5), (0, 2, 1, 3))
    assert_close(out.numpy(), expected, **TOL)


def test_group_norm_gradients_first_and_second_order():
    x, _, _, w, b = _operands((2, 4, 3), seed=11)
    xt = nt.tensor(x, names=("b", "c", "t"), requires_grad=True)
    wt, bt = nt.tensor(w, names=("c",), requires_grad=True), nt.tensor(b, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b, dim="c"), xt, wt, bt)
    assert gradgradcheck(lambda x, w, b: F.group_norm(x, 2, w, b, dim="c"), xt, wt, bt)


def test_group_norm_errors():
    x = nt.zeros(2, 4, 3, names=("b", "c", "t"))
    with pytest.raises(ValueError, match="group_norm: the 4 channels .* cannot be split into 3 groups"):
        F.group_norm(x, 3)
    with pytest.raises(TypeError, match="group_norm: num_groups must be a positive int"):
        F.group_norm(x, 0)
    with pytest.raises(nt.NamesError, match="group_norm: dim 1 .'c'. of the input .* cannot be both the channel"):
        F.group_norm(x, 2, dim="c", batch="c")
    with pytest.raises(nt.NamesError, match="group_norm: no dim named 'k'"):
        F.group_norm(x, 2, dim="c", batch="k")
    with pytest.raises(ValueError, match=r"group_norm: the bias has shape \(3,\)"):
        F.group_norm(x, 2, None, nt.zeros(3))


def test_group_norm_dry_run_on_the_meta_backend():
    x = nt.spec(("h", "b", "c"), (5, 2, 4), requires_grad=True)

    def fn(x):
        y = F.group_norm(x, 2, dim="c", batch="b")
        y.sum().backward()
        return y

    trace = nt.trace_shapes(fn, x)
    assert trace.result.names == ("h", "b", "c") and trace.result.shape == (5, 2, 4)


# ----------------------------------------------------------------------------- layers


def _layer_steps(layer, shapes, seed):
    """The layer's outputs on a few random training batches and one eval batch, with the NumPy reference's:
    ``(outputs, expected, expected running mean and var)``."""
    r = np.random.default_rng(seed)
    c = shapes[0][1]
    rm, rv = np.zeros(c), np.ones(c)
    outs, expected = [], []
    momentum = layer.momentum
    for i, shape in enumerate(shapes):
        x = r.uniform(-1, 1, shape)
        layer.train(i < len(shapes) - 1)
        with nt.no_grad():
            outs.append(layer(nt.tensor(x)).numpy())
        factor = 1 / (i + 1) if momentum is None else momentum
        y, new_rm, new_rv = ref_batch_norm(x, rm, rv, None, None, layer.training, factor, layer.eps)
        if layer.training:
            rm, rv = new_rm, new_rv
        expected.append(y)
    return outs, expected, rm, rv


@pytest.mark.parametrize("n,shape", [(1, (4, 3)), (1, (4, 3, 5)), (2, (2, 3, 4, 2)), (3, (2, 3, 2, 2, 3))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_layer_matches_numpy_and_torch(n, shape, momentum):
    layer = getattr(nn, f"BatchNorm{n}d")(3, momentum=momentum, dtype=nt.float64)
    assert layer.weight.names == (None,) and layer.running_mean.names == (None,)
    outs, expected, rm, rv = _layer_steps(layer, [shape] * 4, seed=n)
    for got, want in zip(outs, expected):
        assert_close(got, want, **TOL)
    assert_close(layer.running_mean.numpy(), rm, **TOL)
    assert_close(layer.running_var.numpy(), rv, **TOL)
    assert layer.num_batches_tracked.item() == 3 and layer.num_batches_tracked.dtype == nt.int64
    torch = pytest.importorskip("torch")
    t = getattr(torch.nn, f"BatchNorm{n}d")(3, momentum=momentum, dtype=torch.float64)
    r = np.random.default_rng(n)
    for i in range(4):
        t.train(i < 3)
        assert_close(outs[i], t(torch.tensor(r.uniform(-1, 1, shape))).detach().numpy(), **TOL)
    state = layer.state_dict()
    assert list(state) == list(t.state_dict())
    for k, v in t.state_dict().items():
        assert_close(state[k].numpy(), v.numpy(), **TOL)


def test_batch_norm_layer_loads_a_state_dict_and_moves_buffers():
    layer = nn.BatchNorm2d(3)
    state = {"weight": nt.full((3,), 2.0), "bias": nt.full((3,), 0.5), "running_mean": nt.full((3,), 1.0),
             "running_var": nt.full((3,), 4.0), "num_batches_tracked": nt.tensor(7)}
    layer.load_state_dict(state)
    layer.eval()
    x = np.random.default_rng(12).uniform(-1, 1, (2, 3, 2, 2)).astype(np.float32)
    with nt.no_grad():
        out = layer(nt.tensor(x)).numpy()
    assert_close(out, (x - 1) / np.sqrt(4 + 1e-5) * 2 + 0.5, rtol=1e-5, atol=1e-6)
    buffers = dict(layer.named_buffers())
    layer.to(nt.float64)
    assert all(b is buffers[k] for k, b in layer.named_buffers())  # moved in place
    assert layer.running_var.dtype == nt.float64 and layer.num_batches_tracked.dtype == nt.int64
    assert layer.num_batches_tracked.item() == 7


def test_batch_norm_layer_without_tracking_or_affine():
    layer = nn.BatchNorm1d(3, affine=False, track_running_stats=False, dtype=nt.float64)
    assert layer.weight is None and layer.running_mean is None and list(layer.state_dict()) == []
    x = np.random.default_rng(13).uniform(-1, 1, (5, 3))
    for training in (True, False):  # without running statistics eval uses the batch's too
        layer.train(training)
        assert_close(layer(nt.tensor(x)).numpy(), ref_batch_norm(x, None, None, None, None, True, 0, 1e-5)[0], **TOL)
    tracking = nn.BatchNorm1d(3, dtype=nt.float64)
    tracking.reset_running_stats()
    assert tracking.num_batches_tracked.item() == 0


def test_batch_norm_layer_named_form():
    layer = nn.BatchNorm2d("c", 3, dtype=nt.float64)
    assert layer.weight.names == ("c",) and layer.running_mean.names == ("c",) and layer.running_var.names == ("c",)
    x, *_ = _operands((2, 3, 4, 2), seed=14)
    order = ("h", "b", "w", "c")
    out = layer(nt.tensor(np.transpose(x, [1 if d == "c" else "bchw".index(d) for d in order]), names=order))
    assert out.names == order
    y, rm, _ = ref_batch_norm(x, np.zeros(3), np.ones(3), None, None, True, 0.1, 1e-5)
    assert_close(_canonical(out.detach().numpy(), order), y, **TOL)
    assert_close(layer.running_mean.numpy(), rm, **TOL)
    assert layer.running_mean.names == ("c",)
    assert "BatchNorm2d('c', 3" in repr(layer)


def test_batch_norm_layer_refusals():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input \(got 3D input"):
        nn.BatchNorm2d(3)(nt.zeros(2, 3, 4))
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected 2D or 3D input \(got 4D input"):
        nn.BatchNorm1d(3)(nt.zeros(2, 3, 4, 4))
    with pytest.raises(TypeError, match="BatchNorm2d: num_features must be a positive int"):
        nn.BatchNorm2d("c", 0)
    with pytest.raises(TypeError, match="BatchNorm3d: affine must be a bool"):
        nn.BatchNorm3d(3, affine=1)
    with pytest.raises(TypeError, match=r"BatchNorm2d: .* takes PyTorch's signature BatchNorm2d\(num_features"):
        nn.BatchNorm2d(3, 4, 5, 6, 7, 8, 9, 10)


def test_group_norm_layer_matches_numpy_and_torch():
    layer = nn.GroupNorm(2, 4, eps=1e-3, dtype=nt.float64)
    assert layer.weight.names == (None,)
    x = np.random.default_rng(15).uniform(-1, 1, (3, 4, 5))
    out = layer(nt.tensor(x))
    assert_close(out.detach().numpy(), ref_group_norm(x, 2, np.ones(4), np.zeros(4), 1e-3), **TOL)
    torch = pytest.importorskip("torch")
    t = torch.nn.GroupNorm(2, 4, eps=1e-3, dtype=torch.float64)
    assert list(t.state_dict()) == list(layer.state_dict())
    assert_close(out.detach().numpy(), t(torch.tensor(x)).detach().numpy(), **TOL)


def test_group_norm_layer_named_form_and_refusals():
    layer = nn.GroupNorm("c", 2, 4, batch="b", affine=False, dtype=nt.float64)
    assert layer.weight is None
    x = np.random.default_rng(16).uniform(-1, 1, (5, 2, 4))
    out = layer(nt.tensor(x, names=("t", "b", "c")))
    assert out.names == ("t", "b", "c")
    assert_close(out.numpy(), np.transpose(ref_group_norm(np.transpose(x, (1, 2, 0)), 2, None, None, 1e-5),
                                           (2, 0, 1)), **TOL)
    assert nn.GroupNorm("c", 2, 4).weight.names == ("c",)
    assert "GroupNorm('c', 2, 4" in repr(layer)
    with pytest.raises(ValueError, match=r"GroupNorm: num_channels \(6\) must be divisible by num_groups \(4\)"):
        nn.GroupNorm(4, 6)
    with pytest.raises(TypeError, match="GroupNorm: batch must be a dim name, a tuple of names or None"):
        nn.GroupNorm("c", 2, 4, batch=1)
