"""Quantized tensors with names, observers, the dynamic / static / quantization-aware workflows, their
checkpoints and their ONNX export."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import nn
from namedtensor.quantization import (FakeQuantize, MinMaxObserver, MovingAverageMinMaxObserver,
                                      PerChannelMinMaxObserver, QuantizedLinear, DynamicQuantizedLinear, convert,
                                      default_per_channel_qconfig, per_channel_dynamic_qconfig, prepare, prepare_qat,
                                      quantize_dynamic, quantized_linear)
from namedtensor.testing import assert_close, gradcheck


def quantized_np(a, scale, zero, lo, hi):
    return np.clip(np.round(a / scale) + zero, lo, hi)


# ----------------------------------------------------------------------------- quantized tensors


@pytest.mark.parametrize("dtype, lo, hi", [(nt.qint8, -128, 127), (nt.quint8, 0, 255)])
def test_quantize_per_tensor_keeps_names_and_matches_the_formula(dtype, lo, hi):
    a = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32) * 4
    a[0, :3] = [0.25, 0.75, -0.25]  # ties round to even
    x = nt.tensor(a, names=("batch", "feat"))
    q = nt.quantize_per_tensor(x, 0.5, 3, dtype)
    assert q.names == ("batch", "feat") and q.shape == (3, 5) and q.dtype is dtype
    assert q.qscheme() == "per_tensor_affine" and q.q_scale() == 0.5 and q.q_zero_point() == 3
    stored = q.int_repr()
    assert stored.dtype is dtype.storage and stored.names == x.names
    np.testing.assert_array_equal(stored.numpy(), quantized_np(a, 0.5, 3, lo, hi))
    deq = q.dequantize()
    assert deq.names == x.names and deq.dtype is nt.float32
    np.testing.assert_array_equal(deq.numpy(), (quantized_np(a, 0.5, 3, lo, hi) - 3) * 0.5)
    text = repr(q)
    assert "names=('batch', 'feat')" in text and f"dtype=nt.{dtype.name}" in text and "scale=0.5" in text
    with pytest.raises(RuntimeError, match="quantized per tensor; use q_scale"):
        q.q_per_channel_scales()


def test_quantize_per_channel_by_name_wherever_the_dim_is():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    x = nt.tensor(a, names=("in", "out", "k"))
    scales = nt.tensor([0.1, 0.2, 0.05], names=("out",))
    zeros = nt.tensor([0, 5, -3], names=("out",))
    q = nt.quantize_per_channel(x, scales, zeros, dim="out", dtype=nt.qint8)
    assert q.qscheme() == "per_channel_affine" and q.q_per_channel_dim() == "out" and q.q_per_channel_axis() == 1
    assert q.q_per_channel_scales().names == ("out",) and q.names == x.names
    s, z = np.array([0.1, 0.2, 0.05])[:, None], np.array([0, 5, -3])[:, None]
    want = quantized_np(a, s.astype(np.float32), z, -128, 127)
    np.testing.assert_array_equal(q.int_repr().numpy(), want)
    np.testing.assert_allclose(q.dequantize().numpy(), ((want - z) * s).astype(np.float32), rtol=1e-6)
    # PyTorch's call: the axis by position, the dtype fifth
    same = nt.quantize_per_channel(x, scales.rename(None), zeros.rename(None), 1, nt.qint8)
    np.testing.assert_array_equal(same.int_repr().numpy(), want)
    with pytest.raises(RuntimeError, match="quantized per channel"):
        q.q_scale()


def test_quantization_errors_name_the_problem():
    x = nt.randn(3, 4, names=("out", "in"))
    s, z = nt.ones(3, names=("out",)), nt.zeros(3, dtype=nt.int64, names=("out",))
    with pytest.raises(ValueError, match="scale must be positive"):
        nt.quantize_per_tensor(x, 0.0, 0, nt.qint8)
    with pytest.raises(ValueError, match="zero_point 300 is outside nt.qint8's range"):
        nt.quantize_per_tensor(x, 0.1, 300, nt.qint8)
    with pytest.raises(TypeError, match="dtype must be nt.qint8 or nt.quint8"):
        nt.quantize_per_tensor(x, 0.1, 0, nt.int32)
    with pytest.raises(TypeError, match="must be floating point"):
        nt.quantize_per_tensor(x.long(), 0.1, 0, nt.qint8)
    with pytest.raises(nt.NamesError, match="scales or zero points named \\('in',\\) meet the channel dim"):
        nt.quantize_per_channel(x, s.rename("in"), z, dim="out", dtype=nt.qint8)
    with pytest.raises(ValueError, match="one entry per channel"):
        nt.quantize_per_channel(x, s.rename(None), z.rename(None), dim="in", dtype=nt.qint8)
    with pytest.raises(TypeError, match="give the channel dim once"):
        nt.quantize_per_channel(x, s, z, 0, nt.qint8, dim="out")
    with pytest.raises(nt.NamesError, match="no dim named 'time'"):
        nt.quantize_per_channel(x, s, z, dim="time", dtype=nt.qint8)
    with pytest.raises(ValueError, match="every scale must be positive"):
        nt.quantize_per_channel(x, s * 0, z, dim="out", dtype=nt.qint8)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_a_per_channel_round_trip_is_within_half_a_step(shape, data):
    names = tuple(data.draw(st.permutations(["a", "b", "c"]))[: len(shape)])
    ch = data.draw(st.integers(0, len(shape) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    a = rng.standard_normal(shape).astype(np.float32)
    x = nt.tensor(a, names=names)
    step = np.abs(a).max(axis=tuple(d for d in range(len(shape)) if d != ch)) / 127 + 1e-6
    q = nt.quantize_per_channel(x, nt.tensor(step, names=(names[ch],)),
                                nt.zeros(shape[ch], dtype=nt.int64, names=(names[ch],)), dim=names[ch], dtype=nt.qint8)
    back = q.dequantize()
    assert back.names == names
    bound = np.expand_dims(step, tuple(d for d in range(len(shape)) if d != ch)) / 2 * (1 + 1e-5)
    assert (np.abs(back.numpy() - a) <= bound).all()


def test_quantized_tensors_save_and_load_with_names_and_parameters(tmp_path):
    w = nt.randn(4, 6, names=("out", "in"))
    per_tensor = nt.quantize_per_tensor(w, 0.05, -2, nt.qint8)
    per_channel = nt.quantize_per_channel(w, w.abs().amax("in") / 127, nt.zeros(4, dtype=nt.int64, names=("out",)),
                                          dim="out", dtype=nt.qint8)
    nt.save({"t": per_tensor, "c": [per_channel]}, tmp_path / "q.safetensors")
    back = nt.load(tmp_path / "q.safetensors")
    t, (c,) = back["t"], back["c"]
    assert (t.q_scale(), t.q_zero_point(), t.names, t.dtype) == (0.05, -2, ("out", "in"), nt.qint8)
    assert c.q_per_channel_dim() == "out" and c.q_per_channel_scales().names == ("out",)
    assert_close(t.dequantize(), per_tensor.dequantize(), rtol=0, atol=0)
    assert_close(c.dequantize(), per_channel.dequantize(), rtol=0, atol=0)


# ----------------------------------------------------------------------------- fake quantization


def test_fake_quantization_is_quantize_then_dequantize_with_a_straight_through_gradient():
    a = np.linspace(-3, 3, 41)
    x = nt.tensor(a, names=("i",)).requires_grad_()
    y = nt.fake_quantize_per_tensor_affine(x, 0.1, 2, -20, 20)
    want = (quantized_np(a, 0.1, 2, -20, 20) - 2) * 0.1
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12)
    assert y.names == ("i",)
    (g,) = nt.grad(y.sum(), [x])
    inside = (np.round(a / 0.1) + 2 >= -20) & (np.round(a / 0.1) + 2 <= 20)
    np.testing.assert_array_equal(g.numpy(), inside.astype(float))

    # the surrogate the gradient belongs to: x clamped to the representable range, whose gradient
    # (checked by central differences away from the two edges) is the fake quantizer's
    def surrogate(t):
        return t.clip((-20 - 2) * 0.1, (20 - 2) * 0.1)

    inner = nt.tensor(np.linspace(-2.15, 1.75, 13), names=("i",)).requires_grad_()
    assert gradcheck(surrogate, inner)
    (fq,) = nt.grad(nt.fake_quantize_per_tensor_affine(inner, 0.1, 2, -20, 20).sum(), [inner])
    (sg,) = nt.grad(surrogate(inner).sum(), [inner])
    assert_close(fq, sg)


def test_per_channel_fake_quantization_by_name():
    x = nt.randn(3, 4, names=("in", "out"), dtype=nt.float64).requires_grad_()
    s, z = nt.tensor([0.1, 0.2, 0.3, 0.05], names=("out",)), nt.tensor([0, 1, -1, 2], names=("out",))
    y = nt.fake_quantize_per_channel_affine(x, s, z, quant_min=-128, quant_max=127, dim="out")
    q = nt.quantize_per_channel(x.detach(), s, z, dim="out", dtype=nt.qint8)
    assert_close(y.detach(), q.dequantize().to(nt.float64), rtol=1e-6, atol=1e-7)
    (g,) = nt.grad(y.sum(), [x])
    assert_close(g, nt.ones_like(g))


# ----------------------------------------------------------------------------- observers


def test_observers_give_pytorchs_scale_and_zero_point():
    x = nt.tensor([-1.0, 0.5, 3.0], names=("i",))
    obs = MinMaxObserver()
    obs(x)
    obs(x * 0.5)
    scale, zero = obs.calculate_qparams()
    assert_close(scale, nt.tensor(4.0 / 255, dtype=nt.float64))
    assert int(zero.item()) == round(0 - (-1.0 / (4.0 / 255)))
    sym = MinMaxObserver(dtype=nt.qint8, qscheme="per_tensor_symmetric")
    sym(x)
    s, z = sym.calculate_qparams()
    assert_close(s, nt.tensor(3.0 / 127.5, dtype=nt.float64))
    assert int(z.item()) == 0
    avg = MovingAverageMinMaxObserver(averaging_constant=0.5)
    avg(x)
    avg(x * 3)
    assert float(avg.max_val.item()) == 6.0 and float(avg.min_val.item()) == -2.0
    with pytest.raises(RuntimeError, match="nothing was observed yet"):
        MinMaxObserver().calculate_qparams()


def test_a_per_channel_observer_keeps_one_range_per_named_channel():
    w = nt.tensor([[1.0, -2.0], [0.5, 0.25], [-4.0, 3.0]], names=("out", "in"))
    obs = PerChannelMinMaxObserver(dim="out")
    obs(w.align_to("in", "out"))  # wherever the dim is
    scales, zeros = obs.calculate_qparams()
    assert scales.names == ("out",)
    assert_close(scales, nt.tensor([2.0, 0.5, 4.0], names=("out",), dtype=nt.float64) / 127.5)
    assert zeros.tolist() == [0, 0, 0]
    by_axis = PerChannelMinMaxObserver(ch_axis=-1)  # PyTorch's spelling, from the end as for any dim
    by_axis(w.align_to("in", "out"))
    assert_close(by_axis.calculate_qparams()[0], scales)
    with pytest.raises(nt.NamesError, match="PerChannelMinMaxObserver: no dim named 'time'"):
        PerChannelMinMaxObserver(dim="time")(w)


# ----------------------------------------------------------------------------- layers and workflows


def _block():
    nt.manual_seed(0)
    block = nn.TransformerBlock("embed", 32, 4)
    block.eval()
    return block


def x_of(batch=3, seq=7, seed=0):
    return nt.tensor(np.random.default_rng(seed).standard_normal((batch, seq, 32)).astype(np.float32),
                     names=("batch", "seq", "embed"))


def test_the_quantized_linear_product_is_exact_int8_arithmetic():
    rng = np.random.default_rng(3)
    for k in (16, 600):  # 600: past float32's exact sums, computed in float64
        w = nt.tensor(rng.standard_normal((5, k)).astype(np.float32), names=("hidden", "embed"))
        b = nt.tensor(rng.standard_normal(5).astype(np.float32), names=("hidden",))
        x = nt.tensor(rng.standard_normal((3, k)).astype(np.float32) * 2, names=("batch", "embed"))
        q = nt.quantize_per_tensor(w, float(w.abs().max()) / 127, 0, nt.qint8)
        y = quantized_linear(x, q, b, scale=0.03, zero_point=120)
        xq = np.clip(np.round(x.numpy() / np.float32(0.03)) + 120, 0, 255).astype(np.int64) - 120
        acc = xq @ q.int_repr().numpy().astype(np.int64).T  # exact integers
        want = (acc.astype(np.float64) * (np.float64(q.q_scale()) * 0.03)).astype(np.float32) + b.numpy()
        assert y.names == ("batch", "hidden")
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("qconfig", [None, per_channel_dynamic_qconfig])
def test_quantize_dynamic_swaps_every_linear_and_stays_close(qconfig):
    block = _block()
    quantized = quantize_dynamic(block, None if qconfig is None else {nn.Linear: qconfig}, dtype=nt.qint8)
    assert isinstance(block.mlp.fc1, nn.Linear)  # the original is untouched
    kinds = {type(m).__name__ for m in quantized.modules()}
    assert "DynamicQuantizedLinear" in kinds and "Linear" not in kinds
    w = quantized.mlp.fc1.weight()
    assert w.names == ("mlp", "embed") and w.dtype is nt.qint8
    assert w.qscheme() == ("per_tensor_affine" if qconfig is None else "per_channel_affine")
    x = x_of()
    want, got = block(x), quantized(x)
    assert got.names == want.names
    assert float((got - want).abs().max()) < 0.05 * float(want.abs().max())
    assert "qint8" in repr(quantized.mlp.fc1)
    with pytest.raises(NotImplementedError, match="only nn.Linear layers"):
        quantize_dynamic(block, {nn.LayerNorm})
    assert isinstance(quantize_dynamic(nn.Linear("embed", "out", 32, 4)), DynamicQuantizedLinear)


def test_a_compiled_linear_layer_is_quantized_as_the_layer():
    block = _block()
    block.mlp.fc1 = nt.compile(block.mlp.fc1)
    quantized = quantize_dynamic(block)
    assert isinstance(quantized.mlp.fc1, DynamicQuantizedLinear)
    x = x_of()
    assert float((quantized(x) - block(x)).abs().max()) < 0.05 * float(block(x).abs().max())


@pytest.mark.parametrize("qconfig", [None, default_per_channel_qconfig])
def test_static_quantization_calibrates_then_converts(qconfig):
    block = _block()
    prepared = prepare(block, qconfig=qconfig)
    for seed in range(3):
        prepared(x_of(seed=seed))
    quantized = convert(prepared)
    layer = quantized.attn.q_proj
    assert isinstance(layer, QuantizedLinear) and 0 <= int(layer.input_zero_point.item()) <= 255
    x = x_of(seed=7)
    want, got = block(x), quantized(x)
    assert got.names == want.names
    assert float((got - want).abs().max()) < 0.05 * float(want.abs().max())
    block.mlp.qconfig = None  # a submodule with qconfig None stays float
    kept = prepare(block)
    kept(x)
    kept = convert(kept)
    assert type(kept.mlp.fc1) is nn.Linear and isinstance(kept.attn.q_proj, QuantizedLinear)
    with pytest.raises(TypeError, match="the qconfig's activation must make observers"):
        prepare(block, qconfig=nt.quantization.default_qat_qconfig)


def test_quantization_aware_training_trains_through_the_fake_quantizers():
    nt.manual_seed(1)
    model = nn.Sequential(nn.Linear("embed", "hidden", 8, 16), nn.ReLU(), nn.Linear("hidden", "out", 16, 1))
    qat = prepare_qat(model)
    assert isinstance(qat[0].weight_fake_quant, FakeQuantize)
    qat.train()
    opt = nt.optim.SGD(qat.parameters(), lr=0.05)
    x = nt.randn(64, 8, names=("batch", "embed"))
    target = x.sum("embed") * 0.5
    losses = []
    for _ in range(30):
        loss = ((qat(x).squeeze("out") - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert qat[0].weight.grad is not None and losses[-1] < 0.5 * losses[0]
    qat.eval()
    quantized = convert(qat)
    assert isinstance(quantized[2], QuantizedLinear)
    assert float((quantized(x) - qat(x)).abs().max()) < 0.1


def test_quantized_models_save_and_load_their_state(tmp_path):
    block = _block()
    quantized = quantize_dynamic(block, {nn.Linear: per_channel_dynamic_qconfig})
    nt.save(quantized.state_dict(), tmp_path / "q.safetensors")
    fresh = quantize_dynamic(nn.TransformerBlock("embed", 32, 4), {nn.Linear: per_channel_dynamic_qconfig})
    fresh.load_state_dict(nt.load(tmp_path / "q.safetensors"))
    fresh.eval()
    x = x_of()
    assert_close(fresh(x), quantized(x), rtol=0, atol=0)


# ----------------------------------------------------------------------------- export


@pytest.mark.parametrize("how", ["dynamic", "dynamic per channel", "static", "static per channel", "qat"])
def test_quantized_models_export_to_onnx_in_qdq_form(how):
    ort = pytest.importorskip("onnxruntime")
    block = _block()
    if how.startswith("dynamic"):
        model = quantize_dynamic(block, {nn.Linear: per_channel_dynamic_qconfig} if "channel" in how else None)
    elif how.startswith("static"):
        prepared = prepare(block, qconfig=default_per_channel_qconfig if "channel" in how else None)
        prepared(x_of(seed=5))
        model = convert(prepared)
    else:
        model = prepare_qat(block)
        model.train()
        model(x_of(seed=5))
        model.eval()
    exported = nt.onnx.export(model, nt.spec({"batch": 2, "seq": 5, "embed": 32}))
    kinds = {n.op_type for n in exported.graph.node}
    assert {"DynamicQuantizeLinear" if how.startswith("dynamic") else "QuantizeLinear", "DequantizeLinear"} <= kinds
    session = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    for size in ((3, 7), (1, 12)):
        x = x_of(*size, seed=size[1])
        (got,) = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-4, atol=1e-4)
    floats = len(nt.onnx.export(block, nt.spec({"batch": 2, "seq": 5, "embed": 32})).SerializeToString())
    if how != "qat":
        assert len(exported.SerializeToString()) < 0.5 * floats  # the norms and biases stay float
