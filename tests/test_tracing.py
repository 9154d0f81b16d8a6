"""nt.spec, nt.trace_shapes and nt.show: dry runs through the real op code, without data."""

import sys
import tracemalloc

import numpy as np
import pytest

import namedtensor as nt
from namedtensor.autograd import mode

BATCH, SEQ, EMBED, HEADS, MLP = 2, 5, 16, 4, 24


def block():
    nt.manual_seed(0)
    return nt.nn.TransformerBlock("embed", EMBED, HEADS, MLP)


def real_input():
    return nt.randn(BATCH, SEQ, EMBED, names=("batch", "seq", "embed"))


def dry_input():
    return nt.spec(("batch", "seq", "embed"), (BATCH, SEQ, EMBED))


def operands(trace):
    return [(r.op, r.inputs, r.outputs, r.flops) for r in trace]


def test_transformer_block_dry_run_records_what_the_real_run_does():
    blk = block()
    dry = nt.trace_shapes(blk, dry_input())
    real = nt.trace_shapes(blk, real_input())
    assert operands(dry) == operands(real)
    assert dry.result.device == "meta" and real.result.device == "cpu"
    assert dry.result.names == real.result.names == ("batch", "seq", "embed")
    assert dry.result.shape == real.result.shape == (BATCH, SEQ, EMBED)
    assert dry.ops.count("linear") == 6 and dry.ops.count("layer_norm") == 2 and "gelu" in dry.ops


def test_every_intermediate_has_its_names_and_shape():
    trace = nt.trace_shapes(block(), dry_input())
    attention = next(r for r in trace if r.op == "scaled_dot_product_attention")
    q, k, v = attention.inputs
    assert q.names == ("batch", "seq", "head", "head_dim") and q.shape == (BATCH, SEQ, HEADS, EMBED // HEADS)
    assert k.names == v.names == ("batch", "key", "head", "head_dim")
    assert attention.outputs[0].names == q.names and attention.outputs[0].dtype == "float32"
    mlp_in = next(r for r in trace if r.op == "linear" and r.outputs[0].names[-1] == "mlp")
    assert mlp_in.inputs[1].names == ("mlp", "embed") and mlp_in.outputs[0].shape == (BATCH, SEQ, MLP)
    for row in trace:
        for operand in row.inputs + row.outputs:
            assert len(operand.names) == len(operand.shape)


def test_flops_of_contractions():
    trace = nt.trace_shapes(block(), dry_input())
    linear = [r.flops for r in trace if r.op == "linear"]
    tokens = BATCH * SEQ
    assert linear == [2 * tokens * EMBED * EMBED] * 4 + [2 * tokens * EMBED * MLP] * 2
    attention = next(r.flops for r in trace if r.op == "scaled_dot_product_attention")
    head_dim = EMBED // HEADS
    assert attention == 2 * BATCH * HEADS * SEQ * SEQ * (head_dim + head_dim)
    assert trace.total_flops == sum(linear) + attention
    assert all(r.flops is None for r in trace if r.op not in ("linear", "scaled_dot_product_attention"))
    a, b = nt.spec(("i", "j"), (3, 4)), nt.spec(("j", "k"), (4, 5))
    assert nt.trace_shapes(nt.matmul, a, b)[0].flops == 2 * 3 * 4 * 5
    assert nt.trace_shapes(lambda a, b: nt.dot(a, b, over="j"), a, b).total_flops == 2 * 3 * 4 * 5
    assert nt.trace_shapes(lambda a, b: nt.einsum("i j, j k -> i k", a, b), a, b)[0].flops == 2 * 3 * 4 * 5


def typo(blk):
    def fn(x):
        return blk(x).sum("sequence")  # the dim is called "seq"
    return fn


def test_injected_name_error_is_found_without_data():
    fn = typo(block())
    with pytest.raises(nt.NamesError) as real:
        fn(real_input())
    with pytest.raises(nt.NamesError) as dry:
        nt.trace_shapes(fn, dry_input())
    assert str(dry.value) == str(real.value)
    assert "sequence" in str(dry.value)
    if sys.version_info >= (3, 11):
        note = dry.value.__notes__[-1]
        assert note.startswith("trace_shapes: 17 ops ran before this error") and "add" in note
    assert mode.current_tracer() is None  # recording stops with the error


def test_dry_run_allocates_nothing():
    x = nt.spec({"batch": 100_000, "seq": 10_000, "embed": 512})  # 2 TB of float32
    w = nt.spec({"hidden": 2048, "embed": 512})

    def fn(x, w):
        h = nt.nn.functional.linear(x, w, dim="embed", out_dim="hidden").gelu()
        return h.softmax("seq").sum("hidden").mean("batch")

    tracemalloc.start()
    try:
        trace = nt.trace_shapes(fn, x, w)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    assert trace.result.names == ("seq",) and trace.result.shape == (10_000,)
    assert trace[0].flops == 2 * 100_000 * 10_000 * 512 * 2048


def test_backward_in_a_dry_run_gives_gradient_shapes():
    w = nt.spec({"embed": 16, "hidden": 8}, requires_grad=True)

    def step(x, w):
        loss = nt.dot(x, w, over="embed").softmax("hidden").amax("seq").mean()
        loss.backward()
        return w.grad

    trace = nt.trace_shapes(step, dry_input(), w)
    assert trace.result.names == ("embed", "hidden") and trace.result.device == "meta"
    assert trace.ops[:4] == ["einsum", "softmax", "amax", "mean"] and len(trace) > 4


def test_mixing_spec_and_real_tensors_gives_meta():
    out = dry_input() + nt.ones(EMBED, names=("embed",))
    assert out.device == "meta" and out.names == ("batch", "seq", "embed")
    assert nt.where(nt.ones(EMBED, names=("embed",)) > 0, dry_input(), 0.0).device == "meta"


@pytest.mark.parametrize("fn", [
    lambda x: x.sum("seq"), lambda x: x.softmax("embed"), lambda x: x.transpose("seq", "batch"),
    lambda x: x.flatten(("seq", "embed"), "flat"), lambda x: x.unflatten("embed", (("h", 4), ("d", 4))),
    lambda x: nt.cat([x, x], "seq"), lambda x: nt.stack([x, x], "pair"), lambda x: x[:, 1:3],
    lambda x: x.isel(seq=2), lambda x: x.align_to("embed", ...), lambda x: x.cumsum("seq"),
    lambda x: x.topk(2, "embed").values, lambda x: x.sort("seq").indices, lambda x: x.pad({"seq": (1, 2)}),
    lambda x: x.mean(("batch", "seq"), keepdim=True), lambda x: x.argmax("embed"), lambda x: x.var("seq"),
    lambda x: nt.nn.functional.layer_norm(x, "embed"), lambda x: x.gelu() * 2 - x.exp() / 3,
    lambda x: x.max("seq").values, lambda x: x.rename(seq="time"), lambda x: x.to(nt.float64).std("embed"),
    lambda x: x.gather("embed", nt.zeros(BATCH, SEQ, 3, names=("batch", "seq", "embed"), dtype=nt.int64)),
    lambda x: nt.nn.functional.cross_entropy(x, nt.zeros(BATCH, SEQ, names=("batch", "seq"), dtype=nt.int64),
                                             dim="embed"),
    lambda x: x.masked_fill(nt.ones(EMBED, names=("embed",), dtype=nt.bool_), 0.0), lambda x: x.tril(1),
])
def test_ops_record_the_same_names_shapes_and_dtypes_dry_and_real(fn):
    assert operands(nt.trace_shapes(fn, dry_input())) == operands(nt.trace_shapes(fn, real_input()))


@pytest.mark.parametrize("fn, fragment", [
    (lambda x: x.sum().item(), "item()"),
    (lambda x: x.numpy(), "values"),
    (lambda x: bool(x.sum() > 0), "item()"),
    (lambda x: print(x.tolist()), "tolist()"),
])
def test_value_dependent_code_says_so(fn, fragment):
    with pytest.raises(nt.DataDependentError, match="dry run") as e:
        nt.trace_shapes(fn, dry_input())
    assert fragment in str(e.value)


def test_show_prints_in_dry_and_real_runs(capsys):
    def fn(x):
        h = nt.show(x.sum("embed"), "pooled")
        return h * 2

    trace = nt.trace_shapes(fn, dry_input())
    assert capsys.readouterr().out == "pooled: (batch=2, seq=5) float32 on meta\n"
    assert trace.ops == ["sum", "show: pooled", "mul"]
    fn(real_input())
    assert capsys.readouterr().out == "pooled: (batch=2, seq=5) float32\n"
    x = real_input()
    assert nt.show(x) is x
    assert capsys.readouterr().out == "tensor: (batch=2, seq=5, embed=16) float32\n"
    with pytest.raises(TypeError, match="show: expected a Tensor"):
        nt.show(np.ones(2))


def test_trace_table_and_html():
    trace = nt.trace_shapes(lambda x: x.sum("seq"), dry_input())
    text = str(trace)
    assert text.splitlines()[0].split() == ["#", "op", "inputs", "output", "dtype", "FLOPs"]
    assert "sum  (batch=2, seq=5, embed=16)  (batch=2, embed=16)  float32" in text
    assert text.endswith("1 ops, 0 FLOPs in contractions")
    html = trace._repr_html_()
    assert "<td>sum</td>" in html and "(batch=2, embed=16)" in html
    unnamed = nt.trace_shapes(lambda x: x * 2, nt.spec((None, "b"), (3, 4)))
    assert "(3, b=4)" in str(unnamed)


def test_nested_traces_record_separately():
    def inner(x):
        return x.sum("seq")

    def outer(x):
        t = nt.trace_shapes(inner, x)
        assert t.ops == ["sum"]
        return t.result * 2

    trace = nt.trace_shapes(outer, dry_input())
    assert trace.ops == ["mul"]
    assert mode.current_tracer() is None


def test_spec():
    x = nt.spec({"batch": 8, "seq": 4})
    assert x.names == ("batch", "seq") and x.shape == (8, 4) and x.dtype == nt.float32 and x.device == "meta"
    y = nt.spec((None, "seq"), (2, 3), dtype=nt.int64)
    assert y.names == (None, "seq") and y.dtype == nt.int64 and not y.requires_grad
    assert nt.spec(("a",), (2,), requires_grad=True).requires_grad
    assert repr(x) == "tensor(..., names=('batch', 'seq'), shape=(8, 4), dtype=nt.float32, device='meta')"
    with pytest.raises(TypeError, match="either in the names dict or as shape="):
        nt.spec({"a": 2}, (2,))
    with pytest.raises(TypeError, match="shape= is required"):
        nt.spec(("a",))
    with pytest.raises(ValueError, match="spec"):
        nt.spec(("a",), (-1,))
    with pytest.raises(nt.NamesError, match="spec"):
        nt.spec(("a", "a"), (2, 2))


def test_a_dry_run_backward_leaves_real_gradients_alone():
    blk = block()
    blk(real_input()).sum().backward()
    before = {name: p.grad.numpy().copy() for name, p in blk.named_parameters()}

    def step(x):
        blk(x).sum().backward()

    trace = nt.trace_shapes(step, dry_input())
    assert "linear_weight_grad" in trace.ops  # the backward ran, through meta arrays
    for name, p in blk.named_parameters():
        assert p.grad.device == "cpu" and np.array_equal(p.grad.numpy(), before[name]), name


def test_grad_on_another_device_is_refused():
    w = nt.ones(2, names=("a",), requires_grad=True)
    with pytest.raises(ValueError, match="grad is on device 'meta' but the tensor on 'cpu'"):
        w.grad = nt.spec(("a",), (2,))


def test_meta_device():
    x = nt.randn(2, 3, names=("a", "b"), requires_grad=True)
    m = x.to("meta")
    assert m.device == "meta" and m.names == x.names and m.shape == x.shape and m.requires_grad
    assert m.is_leaf  # a spec of x: gradients of a dry run stay on the meta side
    nt.trace_shapes(lambda m: m.sum().backward(), m)
    assert x.grad is None and m.grad.device == "meta" and m.grad.names == ("a", "b")
    z = nt.zeros({"batch": 4}, device="meta", dtype=nt.int64)
    assert z.device == "meta" and z.dtype == nt.int64 and z.shape == (4,)
    with pytest.raises(nt.DataDependentError, match="moving a meta tensor to a device with data"):
        m.to("cpu")


def test_a_language_model_with_real_weights_traces_on_meta_tokens():
    from namedtensor.demo import SortingTransformer

    nt.manual_seed(0)
    model = SortingTransformer()

    def step(tokens, targets):
        loss = nt.nn.functional.cross_entropy(model(tokens), targets, dim="vocab")
        loss.backward()
        return loss

    tokens = nt.randint(0, 10, (4, 16), names=("batch", "seq"))
    targets = nt.randint(0, 11, (4, 16), names=("batch", "seq"))
    dry = nt.trace_shapes(step, tokens.to("meta"), targets.to("meta"))
    assert all(p.grad is None for p in model.parameters())  # the real weights' gradients stay untouched
    real = nt.trace_shapes(step, tokens, targets)
    assert operands(dry) == operands(real)
    assert dry.ops.count("embedding") == 2 and "cross_entropy" in dry.ops
    assert dry.result.device == "meta" and dry.result.shape == ()
    with pytest.raises(IndexError, match="out of range"):  # the real run checks the indices' values
        step(tokens + 20, targets)


def test_embedding_with_meta_weight_and_real_indices():
    w = nt.spec({"vocab": 50, "embed": 8})
    out = nt.nn.functional.embedding(nt.zeros(3, names=("seq",), dtype=nt.int64), w)
    assert out.device == "meta" and out.names == ("seq", "embed") and out.shape == (3, 8)
