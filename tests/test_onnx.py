"""nt.onnx.export: models run in ONNX Runtime equal eager, keep their dim names, and one export serves
every size of the dynamic dims; what cannot be exported says which op or size and why."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import nn
from namedtensor.nn import functional as F
from namedtensor.onnx import UnsupportedExport

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def run(model, feeds: dict) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.numpy() if isinstance(v, nt.Tensor) else v for k, v in feeds.items()})


def dims(info) -> list:
    return [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]


def inputs_like(specs, sizes: dict, seed: int = 0, high: int = 10) -> list:
    """Random tensors with the specs' names and dtypes, the dims in ``sizes`` resized."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        shape = tuple(sizes.get(n, k) for n, k in zip(s.names, s.shape))
        if s.dtype.kind == "f":
            out.append(nt.tensor(rng.standard_normal(shape).astype(s.dtype.name), names=s.names))
        else:
            out.append(nt.tensor(rng.integers(0, high, shape).astype(s.dtype.name), names=s.names))
    return out


def check(fn, specs, sizes=({},), rtol=1e-5, atol=1e-5, high=10, **kw):
    """Export ``fn`` once, then compare ONNX Runtime with eager at each entry of ``sizes``."""
    model = nt.onnx.export(fn, *specs, **kw)
    names = [i.name for i in model.graph.input]
    for k, size in enumerate(sizes):
        args = inputs_like(specs, size, seed=k, high=high)
        got = run(model, dict(zip(names, args)))
        want = fn(*args)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape) and str(g.dtype) == w.dtype.name
            np.testing.assert_allclose(g, w.detach().numpy(), rtol=rtol, atol=atol)
    return model


SEQ = ("batch", "seq", "embed")


def x_spec(embed=16):
    return nt.spec({"batch": 2, "seq": 5, "embed": embed})


# ----------------------------------------------------------------------------- models


def test_a_transformer_block_exports_with_batch_and_seq_dynamic():
    block = nn.TransformerBlock("embed", 16, 4)
    model = check(block, [x_spec()], sizes=({}, {"batch": 3, "seq": 9}, {"batch": 1, "seq": 1}))
    (x,), (y,) = model.graph.input, model.graph.output
    assert (x.name, dims(x)) == ("x", ["batch", "seq", 16])
    assert (y.name, dims(y)) == ("output", ["batch", "seq", 16])
    assert "(batch, seq, embed)" in x.doc_string
    meta = {p.key: p.value for p in model.metadata_props}
    assert json.loads(meta["namedtensor.dims"]) == {"x": list(SEQ), "output": list(SEQ)}
    initializers = {i.name for i in model.graph.initializer}
    assert {"norm1.weight", "attn.q_proj.weight", "mlp.fc1.bias"} <= initializers  # the state dict's keys


def test_the_demo_model_exports_once_for_every_batch_and_sequence_size():
    from namedtensor.demo import VOCAB, SortingTransformer

    model = SortingTransformer(32, 4, 2)
    tokens = nt.spec({"batch": 2, "seq": 6}, dtype=nt.int64)
    exported = check(model, [tokens], sizes=({}, {"batch": 5, "seq": 16}, {"batch": 1, "seq": 3}), high=VOCAB)
    assert dims(exported.graph.output[0]) == ["batch", "seq", VOCAB]
    assert model.training  # exported in eval mode, the flags put back
    # the training loss too: the logits' cross-entropy with the prompt's targets ignored
    from namedtensor.demo import IGNORE, loss_fn

    model.eval()
    targets = nt.spec({"batch": 2, "seq": 6}, dtype=nt.int64)
    loss = nt.onnx.export(lambda tokens, targets: loss_fn(model, tokens, targets), tokens, targets)
    for k, size in enumerate(({}, {"batch": 4, "seq": 11})):
        x, y = inputs_like([tokens, targets], size, seed=k, high=VOCAB)
        y = nt.where(y < 4, IGNORE, y)
        (got,) = run(loss, {"tokens": x, "targets": y})
        np.testing.assert_allclose(got, loss_fn(model, x, y).detach().numpy(), rtol=1e-5)


def test_dropout_is_off_in_the_exported_module():
    mlp = nn.Sequential(nn.Linear("embed", "hidden", 16, 32), nn.GELU(), nn.Dropout(0.5),
                        nn.Linear("hidden", "embed", 32, 16))
    model = nt.onnx.export(mlp, x_spec())
    assert mlp.training
    (x,) = inputs_like([x_spec()], {"seq": 7})
    mlp.eval()
    np.testing.assert_allclose(run(model, {"x": x})[0], mlp(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_compiled_module_exports_as_the_module_it_compiled():
    mlp = nn.Sequential(nn.Linear("embed", "hidden", 16, 32), nn.Dropout(0.5), nn.Linear("hidden", "embed", 32, 16))
    model = nt.onnx.export(nt.compile(mlp), x_spec())  # in eval mode, its dropout off, as the module's
    assert [i.name for i in model.graph.initializer] == list(mlp.state_dict()) and mlp.training
    (x,) = inputs_like([x_spec()], {"seq": 7})
    np.testing.assert_allclose(run(model, {"x": x})[0], mlp.eval()(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_dims_that_a_parameter_has_or_that_dynamic_leaves_out_are_static():
    layer = nn.Linear("embed", "hidden", 16, 8)
    model = nt.onnx.export(layer, x_spec(), dynamic=("seq",))
    assert dims(model.graph.input[0]) == [2, "seq", 16] and dims(model.graph.output[0]) == [2, "seq", 8]
    model = nt.onnx.export(layer, x_spec(), dynamic=())
    assert dims(model.graph.input[0]) == [2, 5, 16]
    with pytest.raises(ValueError, match="dynamic= names .'time'., which no input has"):
        nt.onnx.export(layer, x_spec(), dynamic=("time",))


def test_inputs_are_named_after_the_parameters_the_tensors_take():
    def scaled(factor, x, y):  # a number first: fixed in the graph, not an input
        return x * factor + y

    model = nt.onnx.export(scaled, 2.5, x_spec(), x_spec())
    assert [i.name for i in model.graph.input] == ["x", "y"]
    a, b = inputs_like([x_spec(), x_spec()], {"seq": 4})
    np.testing.assert_allclose(run(model, {"x": a, "y": b})[0], (a * 2.5 + b).numpy(), rtol=1e-6)


def test_the_model_is_written_to_path_and_names_can_be_given(tmp_path):
    path = tmp_path / "layer.onnx"
    model = nt.onnx.export(lambda x, y: (x + y, x * y), x_spec(), x_spec(), path=str(path), input_names=["a", "b"],
                           output_names=["sum", "product"])
    loaded = onnx.load(str(path))
    assert [i.name for i in loaded.graph.input] == ["a", "b"]
    assert [o.name for o in loaded.graph.output] == ["sum", "product"] == [o.name for o in model.graph.output]
    a, b = inputs_like([x_spec(), x_spec()], {"seq": 3})
    got = run(loaded, {"a": a, "b": b})
    np.testing.assert_allclose(got[1], (a * b).numpy(), rtol=1e-6)


# ----------------------------------------------------------------------------- layers and ops


@pytest.mark.parametrize("case", ["named", "dim inside", "no bias", "pytorch form"])
def test_linear_layers_export(case):
    if case == "named":
        layer, spec = nn.Linear("embed", "hidden", 16, 8), x_spec()
    elif case == "dim inside":
        layer, spec = nn.Linear("embed", "hidden", 16, 8), nt.spec({"batch": 2, "embed": 16, "seq": 5})
    elif case == "no bias":
        layer, spec = nn.Linear("embed", "hidden", 16, 8, bias=False), x_spec()
    else:
        layer, spec = nn.Linear(16, 8), x_spec()
    if case != "pytorch form":
        check(layer, [spec], sizes=({}, {"batch": 3, "seq": 4}))
        return
    # the unnamed weight does not fix "embed": tried as dynamic, the layer refuses other sizes of it, so it
    # stays static, and the export says so
    with pytest.warns(UserWarning, match=r"the dims \['embed'\] stay static"):
        model = check(layer, [spec], sizes=({}, {"batch": 3, "seq": 4}))
    assert dims(model.graph.input[0]) == ["batch", "seq", 16]


@pytest.mark.parametrize("case", ["layer", "layer without affine", "layer over two dims", "rms", "rms without weight"])
def test_norms_export(case):
    spec = x_spec()
    if case == "layer":
        layer = nn.LayerNorm("embed", 16)
    elif case == "layer without affine":
        layer = nn.LayerNorm("embed", 16, elementwise_affine=False)
    elif case == "layer over two dims":
        layer, spec = nn.LayerNorm(("head", "head_dim"), (4, 3)), nt.spec({"batch": 2, "head": 4, "seq": 5,
                                                                          "head_dim": 3})
    elif case == "rms":
        layer = nn.RMSNorm("embed", 16)
    else:
        layer = nn.RMSNorm("embed", 16, elementwise_affine=False)
    for p in layer.parameters():  # not the initial ones and zeros
        p.data = nt.randn(*p.shape, names=p.names)
    check(layer, [spec], sizes=({}, {"batch": 3, "seq": 2}))


@pytest.mark.parametrize("vocab_dim_first", [True, False])
def test_embeddings_export(vocab_dim_first):
    table = nn.Embedding(12, 8, "embed", vocab_dim="vocab")
    if not vocab_dim_first:  # the vocabulary along the weight's second dim
        table.weight = nn.Parameter(nt.randn(8, 12, names=("embed", "vocab")))
    check(table, [nt.spec({"batch": 2, "seq": 5}, dtype=nt.int64)], sizes=({}, {"batch": 4, "seq": 3}), high=12)


@pytest.mark.parametrize("mask", [None, "causal", "bool padding", "float", "bool fully masked row"])
def test_attention_exports_with_its_masks(mask):
    attn = nn.MultiheadAttention("embed", 16, 4)
    attn.eval()
    if mask is None:
        check(lambda x: attn(x), [x_spec()], sizes=({}, {"batch": 3, "seq": 7}))
    elif mask == "causal":
        check(lambda x: attn(x, is_causal=True), [x_spec()], sizes=({}, {"batch": 3, "seq": 7}))
    else:
        dtype = nt.float32 if mask == "float" else nt.bool
        m = nt.spec({"batch": 2, "key": 5}, dtype=dtype)

        def fn(x, m):
            if mask == "bool fully masked row":
                m = m & (x.sum("embed").rename(seq="key") > -1e9)  # stays a mask that may mask a whole row
            return attn(x, mask=m)

        model = nt.onnx.export(fn, x_spec(), m)
        # the mask's key and the query's seq must have one size: they share it, each keeping its name
        assert dims(model.graph.input[1]) == ["batch", "key"] and dims(model.graph.input[0]) == ["batch", "seq", 16]
        for k, size in enumerate(({}, {"batch": 3, "seq": 4})):
            x = inputs_like([x_spec()], size, seed=k)[0]
            shape = (size.get("batch", 2), size.get("seq", 5))
            rng = np.random.default_rng(k)
            if dtype == nt.bool:
                keep = rng.random(shape) > 0.3
                keep[0] = mask != "bool fully masked row"  # a row of queries with no key at all
                mv = nt.tensor(keep, names=("batch", "key"))
            else:
                mv = nt.tensor(rng.standard_normal(shape).astype(np.float32), names=("batch", "key"))
            (got,) = run(model, {"x": x, "m": mv})
            np.testing.assert_allclose(got, fn(x, mv).detach().numpy(), rtol=1e-5, atol=1e-5)


ELEMENTWISE = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / (b.abs() + 1),
    "maximum": nt.maximum, "minimum": nt.minimum, "pow": lambda a, b: a.abs() ** 1.5,
    "where": lambda a, b: nt.where(a > b, a, b * 2), "ne": lambda a, b: (a != b).to(nt.float32) + a,
    "le": lambda a, b: nt.where(a <= b, 1.0, b), "exp": lambda a, b: a.exp() - b, "log": lambda a, b: (a * a + 1).log(),
    "tanh": lambda a, b: a.tanh(), "sigmoid": lambda a, b: a.sigmoid(), "relu": lambda a, b: F.relu(a),
    "gelu": lambda a, b: F.gelu(a), "gelu tanh": lambda a, b: F.gelu(a, approximate="tanh"),
    "silu": lambda a, b: F.silu(a), "sqrt": lambda a, b: (a * a).sqrt(), "rsqrt": lambda a, b: (a * a + 1).rsqrt(),
    "abs neg": lambda a, b: -a.abs(), "erf": lambda a, b: a.erf(), "reciprocal": lambda a, b: (a * a + 1).reciprocal(),
    "square": lambda a, b: a.square(), "expm1": lambda a, b: a.expm1(), "log1p": lambda a, b: (a * a).log1p(),
    "clip": lambda a, b: a.clip(-0.5, 0.5), "sin cos": lambda a, b: a.sin() + b.cos(),
    "softplus": lambda a, b: a.softplus(), "sign floor ceil round": lambda a, b: a.sign() + (a * 3).floor() - b.ceil() + (a * 2).round(),
    "tests": lambda a, b: nt.where((a / (b * 0)).isnan() | (a / b.abs()).isinf() ^ b.isfinite(), a, b),
    "logical": lambda a, b: nt.where((a > 0).logical_and(b < 0).logical_or((a > b).logical_not()), a, b),
}


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(ELEMENTWISE)), st.integers(0, 2), st.booleans())
def test_elementwise_ops_export_with_broadcasting(name, drop, scalar_first):
    """Each op on a full tensor and one that broadcasts against it from the right (fewer dims, by name)."""
    a = x_spec()
    b = nt.spec(dict(list(zip(SEQ, (2, 5, 16)))[drop:]))
    fn = ELEMENTWISE[name]
    check((lambda x, y: fn(y * 1.0 + x, y)) if scalar_first else fn, [a, b], sizes=({}, {"batch": 3, "seq": 2}))


@pytest.mark.parametrize("how", ["sum", "mean", "sum keepdim", "mean of all", "softmax", "log_softmax"])
def test_reductions_and_softmax_export(how):
    fns = {
        "sum": lambda x: x.sum("seq"), "mean": lambda x: x.mean(("batch", "embed")),
        "sum keepdim": lambda x: x.sum("embed", keepdim=True), "mean of all": lambda x: x.mean(),
        "softmax": lambda x: x.softmax("seq"), "log_softmax": lambda x: x.log_softmax("embed"),
    }
    check(fns[how], [x_spec()], sizes=({}, {"batch": 4, "seq": 3}))


def test_names_reshapes_permutes_and_products_export():
    w = nt.randn(16, 4, names=("embed", "out"))

    def fn(x):
        h = x.align_to("embed", "batch", "seq").rename(embed="feature")  # a permute
        h = h.rename(feature="embed").align_to("batch", "seq", "embed")
        h = h.flatten(("batch", "seq"), "rows") @ w  # a reshape merging the dynamic dims, a matmul
        return h.unflatten("rows", (("batch", x.size("batch")), ("seq", x.size("seq")))).to(nt.float64)

    check(fn, [x_spec()], sizes=({}, {"batch": 3, "seq": 7}))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_exports(reduction):
    check(lambda x, y: F.mse_loss(x, y, reduction=reduction), [x_spec(), x_spec()], sizes=({}, {"seq": 8}))


def test_in_place_ops_export_as_the_ops_they_are():
    def fn(x, y):
        h = x * 2
        h += y
        F.relu(h, inplace=True)
        h.clamp_(max=3.0)
        return h

    check(fn, [x_spec(), x_spec()], sizes=({}, {"batch": 3, "seq": 7}))


# ----------------------------------------------------------------------------- what does not export


def test_an_op_without_a_conversion_is_named():
    with pytest.raises(UnsupportedExport, match="the op 'argsort' .on .batch=2, seq=5, embed=16. float32. has no ONNX"):
        nt.onnx.export(lambda x: x.sort("seq").values, x_spec())


def test_numbers_and_branches_that_follow_a_dynamic_dim_are_refused():
    dynamic = ("batch", "seq")
    with pytest.raises(UnsupportedExport, match="the op 'div' has params that change with the sizes of the dynamic"):
        nt.onnx.export(lambda x: x / x.size("seq"), x_spec(), dynamic=dynamic)
    with pytest.raises(UnsupportedExport, match="runs other ops when the dynamic dims take other sizes"):
        nt.onnx.export(lambda x: x.exp() if x.size("batch") > 2 else x.tanh(), x_spec(), dynamic=dynamic)
    # without dynamic=, the dims in question stay static and the export says why
    with pytest.warns(UserWarning, match=r"the dims \['seq'\] stay static: nt.onnx.export: the op 'div'"):
        model = nt.onnx.export(lambda x: x / x.size("seq"), x_spec())
    assert dims(model.graph.input[0]) == ["batch", 5, "embed"]
    made = lambda x: x + nt.ones(x.size("seq"), 16, names=("seq", "embed"))
    with pytest.raises(UnsupportedExport, match="a constant .* has a shape that follows the dynamic dims"):
        nt.onnx.export(made, x_spec(), dynamic=dynamic)
    # by default a dim that a constant has is static, as one that a parameter has
    assert dims(nt.onnx.export(made, x_spec()).graph.input[0]) == ["batch", 5, 16]
    # static, the same programs export
    model = nt.onnx.export(lambda x: x / x.size("seq"), x_spec(), dynamic=())
    (x,) = inputs_like([x_spec()], {})
    np.testing.assert_allclose(run(model, {"x": x})[0], (x / 5).numpy(), rtol=1e-6)


def test_a_function_that_returns_no_tensor_or_draws_numbers_is_refused():
    with pytest.raises(UnsupportedExport, match="must return a tensor or a tuple of tensors, got int"):
        nt.onnx.export(lambda x: (x * 2, 3), x_spec())
    with pytest.raises(UnsupportedExport, match="cannot be traced into a graph: random numbers"):
        nt.onnx.export(lambda x: x + nt.randn(16, names=("embed",)), x_spec())


def test_without_the_onnx_package_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r"pip install 'named-tensors\[export\]'"):
        nt.onnx.export(lambda x: x * 2, x_spec())


def test_a_dry_run_that_makes_the_first_cpu_tensor_traces():
    # in a new process only specs exist before the trace: the CPU backend is first made inside it
    code = ("import namedtensor as nt; m = nt.onnx.export(lambda x: x + nt.ones(16, names=('embed',)), "
            "nt.spec({'batch': 2, 'embed': 16})); print(m.graph.input[0].name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "x"


@pytest.mark.parametrize("reduction, smoothing", [("mean", 0.0), ("sum", 0.2), ("none", 0.0)])
def test_cross_entropy_of_class_probabilities_exports(reduction, smoothing):
    logits = nt.spec({"batch": 2, "seq": 5, "vocab": 7})
    probs = nt.spec({"vocab": 7, "batch": 2, "seq": 5})  # matched by name, in another order
    fn = lambda a, q: F.cross_entropy(a, q.softmax("vocab"), dim="vocab", reduction=reduction,
                                      label_smoothing=smoothing)
    check(fn, [logits, probs], sizes=({}, {"batch": 3, "seq": 8}))


@pytest.mark.parametrize("case", ["mean", "ignored", "sum with smoothing", "none", "all ignored"])
def test_cross_entropy_exports(case):
    kw = {"mean": {}, "ignored": {"ignore_index": 3}, "sum with smoothing": {"reduction": "sum", "label_smoothing": 0.1},
          "none": {"reduction": "none", "ignore_index": 3}, "all ignored": {"ignore_index": 3}}[case]
    logits = nt.spec({"batch": 2, "seq": 5, "vocab": 7})
    target = nt.spec({"batch": 2, "seq": 5}, dtype=nt.int64)
    fn = lambda a, b: F.cross_entropy(a, b, dim="vocab", **kw)
    model = nt.onnx.export(fn, logits, target)
    for k, size in enumerate(({}, {"batch": 3, "seq": 8})):
        a, b = inputs_like([logits, target], size, seed=k, high=7)
        if case == "all ignored":
            b = nt.full_like(b, 3)
        (got,) = run(model, {"a": a, "b": b})
        np.testing.assert_allclose(got, fn(a, b).numpy(), rtol=1e-5, atol=1e-6)
        assert got.shape == tuple(fn(a, b).shape)


IMAGE = nt.spec({"batch": 2, "channel": 3, "h": 9, "w": 8})


@pytest.mark.parametrize("case", ["conv2d", "conv2d strided grouped", "conv1d", "conv_transpose2d", "max_pool2d",
                                  "avg_pool2d padded", "adaptive_avg_pool2d", "batch_norm", "group_norm"])
def test_image_layers_export(case):
    layers = {
        "conv2d": lambda: nn.Conv2d(3, 4, 3, padding=1),
        "conv2d strided grouped": lambda: nn.Conv2d(3, 6, 3, stride=2, padding=(1, 0), dilation=(1, 2), groups=3),
        "conv1d": lambda: nn.Conv1d(3, 5, 2),
        "conv_transpose2d": lambda: nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1),
        "max_pool2d": lambda: nn.MaxPool2d(2),
        "avg_pool2d padded": lambda: nn.AvgPool2d(3, stride=2, padding=1),
        "adaptive_avg_pool2d": lambda: nn.AdaptiveAvgPool2d(2),
        "batch_norm": lambda: nn.BatchNorm2d(3),
        "group_norm": lambda: nn.GroupNorm(1, 3),
    }
    layer = layers[case]()
    if case == "batch_norm":  # running statistics that are not the initial zeros and ones
        layer.train()
        layer(nt.randn(4, 3, 9, 8, names=IMAGE.names))
    layer.eval()
    spec = nt.spec({"batch": 2, "channel": 3, "time": 9}) if case == "conv1d" else IMAGE
    if case == "adaptive_avg_pool2d":  # its pooling matrices are made for the input's h and w
        with pytest.warns(UserWarning, match=r"the dims \['h', 'w'\] stay static: .*a constant"):
            model = check(layer, [spec], sizes=({}, {"batch": 3}), rtol=1e-5, atol=1e-5)
        assert dims(model.graph.input[0]) == ["batch", "channel", 9, 8]  # no parameter fixes the channels
        return
    model = check(layer, [spec], sizes=({}, {"batch": 3, "h": 12, "w": 7, "time": 6}), rtol=1e-5, atol=1e-5)
    assert dims(model.graph.input[0]) == ["batch", 3, "time"] if case == "conv1d" else ["batch", 3, "h", "w"]


@pytest.mark.parametrize("loss", ["nll", "l1", "smooth_l1", "huber", "bce", "bce with logits", "kl_div", "cosine"])
def test_losses_and_distances_export(loss):
    a, b = nt.spec({"batch": 2, "feat": 5}), nt.spec({"batch": 2, "feat": 5})
    fns = {
        "l1": F.l1_loss, "smooth_l1": F.smooth_l1_loss, "huber": lambda x, y: F.huber_loss(x, y, delta=0.5),
        "bce": lambda x, y: F.binary_cross_entropy(x.sigmoid(), y.sigmoid()),
        "bce with logits": lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid()),
        "kl_div": lambda x, y: F.kl_div(x.log_softmax("feat"), y.softmax("feat"), reduction="sum"),
        "cosine": lambda x, y: F.cosine_similarity(x, y, dim="feat"),
    }
    if loss == "nll":
        t = nt.spec({"batch": 2}, dtype=nt.int64)
        check(lambda x, t: F.nll_loss(x.log_softmax("feat"), t, dim="feat", ignore_index=1), [a, t],
              sizes=({}, {"batch": 7}), high=5)
        return
    check(fns[loss], [a, b], sizes=({}, {"batch": 7}))


@pytest.mark.parametrize("p", [1, 2, 3, float("inf"), 0])
def test_p_norms_export(p):
    check(lambda x: x.norm(p=p, dim="embed"), [x_spec()], sizes=({}, {"batch": 3}))


def _layer_cases() -> dict:
    """Every layer of nt.nn: a constructor and the specs of its inputs."""
    seq, img = x_spec(), IMAGE
    vol = nt.spec({"batch": 2, "channel": 3, "d": 4, "h": 5, "w": 6})
    sig = nt.spec({"batch": 2, "channel": 3, "time": 9})
    tokens = nt.spec({"batch": 2, "seq": 5}, dtype=nt.int64)
    return {
        "AdaptiveAvgPool1d": (lambda: nn.AdaptiveAvgPool1d(3), [sig]),
        "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d((2, 3)), [img]),
        "AdaptiveAvgPool3d": (lambda: nn.AdaptiveAvgPool3d(2), [vol]),
        "AvgPool1d": (lambda: nn.AvgPool1d(2), [sig]), "AvgPool2d": (lambda: nn.AvgPool2d(2), [img]),
        "AvgPool3d": (lambda: nn.AvgPool3d(2), [vol]),
        "BatchNorm1d": (lambda: nn.BatchNorm1d(3), [sig]), "BatchNorm2d": (lambda: nn.BatchNorm2d(3), [img]),
        "BatchNorm3d": (lambda: nn.BatchNorm3d(3), [vol]),
        "Conv1d": (lambda: nn.Conv1d(3, 4, 3), [sig]), "Conv2d": (lambda: nn.Conv2d(3, 4, 3), [img]),
        "Conv3d": (lambda: nn.Conv3d(3, 2, 2), [vol]),
        "ConvTranspose1d": (lambda: nn.ConvTranspose1d(3, 2, 3, stride=2), [sig]),
        "ConvTranspose2d": (lambda: nn.ConvTranspose2d(3, 2, 2), [img]),
        "ConvTranspose3d": (lambda: nn.ConvTranspose3d(3, 2, 2), [vol]),
        "CosineSimilarity": (lambda: nn.CosineSimilarity("embed"), [seq, seq]),
        "Dropout": (lambda: nn.Dropout(0.3), [seq]),
        "Embedding": (lambda: nn.Embedding(10, 4, "embed"), [tokens]),
        "GELU": (lambda: nn.GELU(), [seq]), "GroupNorm": (lambda: nn.GroupNorm(1, 3), [img]),
        "Identity": (lambda: nn.Identity(), [seq]),
        "LayerNorm": (lambda: nn.LayerNorm("embed", 16), [seq]), "Linear": (lambda: nn.Linear(16, 4), [seq]),
        "LogSoftmax": (lambda: nn.LogSoftmax("embed"), [seq]),
        "MLP": (lambda: nn.MLP("embed", 16, 32), [seq]),
        "MaxPool1d": (lambda: nn.MaxPool1d(2), [sig]), "MaxPool2d": (lambda: nn.MaxPool2d(2), [img]),
        "MaxPool3d": (lambda: nn.MaxPool3d(2), [vol]),
        "MultiheadAttention": (lambda: nn.MultiheadAttention("embed", 16, 4), [seq]),
        "RMSNorm": (lambda: nn.RMSNorm("embed", 16), [seq]), "ReLU": (lambda: nn.ReLU(), [seq]),
        "SiLU": (lambda: nn.SiLU(), [seq]), "Sigmoid": (lambda: nn.Sigmoid(), [seq]),
        "Softmax": (lambda: nn.Softmax("seq"), [seq]), "Tanh": (lambda: nn.Tanh(), [seq]),
        "TransformerBlock": (lambda: nn.TransformerBlock("embed", 16, 2), [seq]),
    }


def test_every_layer_of_nn_has_an_export_case():
    import inspect

    containers = {"Module", "ModuleList", "ModuleDict", "Sequential"}
    layers = {n for n in dir(nn) if inspect.isclass(getattr(nn, n)) and issubclass(getattr(nn, n), nn.Module)}
    assert sorted(layers - containers) == sorted(_layer_cases())


@pytest.mark.parametrize("name", sorted(_layer_cases()))
def test_every_layer_exports(name):
    make, specs = _layer_cases()[name]
    layer = make()
    layer.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a layer whose sizes fix some dims (adaptive pooling) warns so
        model = nt.onnx.export(layer, *specs)
    symbolic = {d for i in model.graph.input for d in dims(i) if isinstance(d, str)}
    assert "batch" in symbolic  # the batch dim stays dynamic in every layer
    args = inputs_like(specs, {"batch": 3}, high=10)
    got = run(model, dict(zip([i.name for i in model.graph.input], args)))
    want = layer(*args)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("how", ["amax", "amin keepdim", "prod", "logsumexp", "argmax", "argmin", "cumsum", "var",
                                 "std", "cat", "stack", "flip", "getitem", "index_select", "max with indices",
                                 "max's indices"])
def test_reductions_scans_joins_and_indexing_export(how):
    idx = nt.spec({"k": 3}, dtype=nt.int64)
    fns = {
        "amax": lambda x, i: x.amax("embed"), "amin keepdim": lambda x, i: x.amin("seq", keepdim=True),
        "prod": lambda x, i: (x * 0.1 + 1).prod("embed"), "logsumexp": lambda x, i: x.logsumexp("embed"),
        "argmax": lambda x, i: x.argmax("embed"), "argmin": lambda x, i: x.argmin("seq"),
        "cumsum": lambda x, i: x.cumsum("seq"), "var": lambda x, i: x.var(("batch", "seq")),
        "std": lambda x, i: x.std("embed"), "cat": lambda x, i: nt.cat([x, x * 2], "seq"),
        "stack": lambda x, i: nt.stack([x, -x], "pair"), "flip": lambda x, i: x.flip("seq"),
        "getitem": lambda x, i: x[{"seq": slice(1, None, 2), "embed": -1}].sum("seq") + x[..., 0:3].sum(("seq", "embed")),
        "index_select": lambda x, i: x.index_select("embed", i),
        "max with indices": lambda x, i: x.max("embed").values,
        "max's indices": lambda x, i: x.max("embed").indices.to(nt.float32),
    }
    check(fns[how], [x_spec(), idx], sizes=({}, {"batch": 3, "seq": 9}), high=16)
