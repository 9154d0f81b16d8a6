"""nt.profile: every op of the calling thread in the block, its operands, time, bytes and FLOPs; the
key-averages table, the Chrome trace and the roofline.  Structure only: no speed is asserted."""

import gc
import json
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import backends
from namedtensor._internal import backend_of
from namedtensor.autograd import mode
from namedtensor.backends.numpy_backend import NumpyBackend
from namedtensor.profiler import OpStats, ProfileEvent, Roofline, _collection

BATCH, FEAT, CLS = 4, 8, 5
#: seconds that a garbage collection lasts at least, under the ``slow_collections`` fixture
PAUSE = 0.2


@pytest.fixture(autouse=True)
def collections_only_where_asked():
    """Automatic garbage collections are off in this module: they would be rows of their own wherever they
    fell (tested below, with ``gc.collect()`` where the tests want one)."""
    enabled = gc.isenabled()
    gc.disable()
    yield
    if enabled:
        gc.enable()


@pytest.fixture
def slow_collections():
    """Each garbage collection takes at least PAUSE seconds: a callback ahead of the profile's sleeps at its
    end, so that the time a row would have taken with it is clear of any op's own."""
    def sleep(phase, info):
        if phase == "stop":
            time.sleep(PAUSE)

    gc.callbacks.insert(0, sleep)
    yield
    gc.callbacks.remove(sleep)


def step():
    """One training step of a small named model: linear, gelu, cross-entropy, backward."""
    nt.manual_seed(0)
    lin = nt.nn.Linear("feat", "cls", FEAT, CLS)
    x = nt.randn(BATCH, FEAT, names=("batch", "feat"))
    target = nt.tensor([0, 1, 2, 3], names=("batch",))
    return lin, x, target


def run_step(lin, x, target):
    loss = nt.nn.functional.cross_entropy(lin(x).gelu(), target, dim="cls")
    loss.backward()
    return loss


def nbytes(*ts):
    return sum(t.array.nbytes for t in ts)


def test_records_the_forward_and_backward_ops_of_a_training_step():
    lin, x, target = step()
    with nt.profile() as prof:
        run_step(lin, x, target)
    names = [e.name for e in prof.events]
    assert names[:3] == ["linear", "gelu", "cross_entropy"]
    assert "linear_weight_grad" in names  # the backward's ops are recorded too
    linear = prof.events[0]
    assert isinstance(linear, ProfileEvent)
    assert [o.names for o in linear.inputs] == [("batch", "feat"), ("cls", "feat"), ("cls",)]
    assert [o.shape for o in linear.inputs] == [(BATCH, FEAT), (CLS, FEAT), (CLS,)]
    assert linear.outputs[0].names == ("batch", "cls") and linear.outputs[0].dtype == "float32"
    assert linear.bytes == nbytes(x, lin.weight, lin.bias) + BATCH * CLS * 4
    assert linear.flops == 2 * BATCH * CLS * FEAT
    grad = next(e for e in prof.events if e.name == "linear_weight_grad")
    assert grad.outputs[0].names == ("cls", "feat") and grad.flops == 2 * BATCH * CLS * FEAT
    assert all(e.duration_ns >= 0 for e in prof.events)
    calls = {s.name: s.calls for s in prof.key_averages()}
    assert calls == {n: names.count(n) for n in names}


def test_flops_and_bytes():
    m, k, n = 3, 7, 5
    a = nt.randn(m, k, names=("row", "inner"))
    b = nt.randn(k, n, names=("inner", "col"), dtype=nt.float64)
    with nt.profile() as prof:
        y = a @ b
        e = a.exp()
        s = a.sum("inner")
        a.permute("inner", "row")
    matmul, exp, sum_, permute = prof.events
    assert matmul.name == "matmul" and matmul.flops == 2 * m * n * k
    assert matmul.bytes == nbytes(a, b, y)
    assert exp.flops == m * k and exp.bytes == nbytes(a, e)  # elementwise: one per output element
    assert sum_.flops == m * k and sum_.bytes == nbytes(a, s)  # a reduction: one per input element
    assert permute.flops is None and permute.bytes == 0  # a view: it touches no data


def test_large_operands_that_reuse_a_buffer_are_recorded_too():
    a, b, c = (nt.ones(1 << 16, names=("i",)) for _ in range(3))
    with nt.profile() as prof:
        a * b + c  # the sum is written into a * b's buffer (ops/_elision.py): another op path
    assert [e.name for e in prof.events] == ["mul", "add"]
    assert all(e.bytes == 3 * (1 << 18) and e.flops == 1 << 16 for e in prof.events)


def test_table_is_sorted_by_total_time_and_names_the_ops():
    lin, x, target = step()
    with nt.profile() as prof:
        for _ in range(3):
            run_step(lin, x, target)
    stats = prof.key_averages()
    assert all(isinstance(s, OpStats) for s in stats)
    assert [s.total_ns for s in stats] == sorted((s.total_ns for s in stats), reverse=True)
    assert sum(s.calls for s in stats) == len(prof.events) and stats[0].inputs == ()
    table = prof.table()
    assert str(prof) == table
    lines = table.splitlines()
    assert lines[1].split() == ["Name", "Calls", "Total", "time", "Mean", "time", "%", "total", "Bytes", "FLOPs",
                                "GFLOP/s", "GB/s"]
    assert [line.split()[0] for line in lines[3:3 + len(stats)]] == [s.name for s in stats]
    assert lines[-1] == f"{len(prof.events)} ops, total time " + lines[-1].split("total time ")[1]
    assert {"linear", "gelu", "cross_entropy", "linear_weight_grad"} <= set(table.split())
    by_calls = prof.table(sort_by="calls", row_limit=2).splitlines()
    assert len(by_calls) == 3 + 2 + 2
    counts = [int(line.split()[1]) for line in by_calls[3:5]]
    assert counts == sorted(counts, reverse=True) and counts[0] == max(s.calls for s in stats)
    with pytest.raises(ValueError, match=re.escape("table: sort_by must be one of 'time', 'mean', 'calls', "
                                                   "'bytes', 'flops', got 'cpu_time'.")):
        prof.table(sort_by="cpu_time")
    html = prof._repr_html_()
    assert html.startswith("<table>") and "<td>linear_weight_grad</td>" in html


def test_group_by_input_shape():
    a = nt.randn(2, 3, names=("row", "inner"))
    b = nt.randn(3, 4, names=("inner", "col"))
    c = nt.randn(3, 6, names=("inner", "col"))
    with nt.profile() as prof:
        a @ b
        a @ b
        a @ c
    assert [s.calls for s in prof.key_averages() if s.name == "matmul"] == [3]
    grouped = {(s.name, tuple(s.inputs)): s.calls for s in prof.key_averages(group_by_input_shape=True)}
    assert sorted(grouped.values()) == [1, 2]
    shapes = sorted(tuple(o.shape for o in ins) for _, ins in grouped)
    assert shapes == [((2, 3), (3, 4)), ((2, 3), (3, 6))]
    table = prof.table(group_by_input_shape=True)
    assert "Input names and shapes" in table.splitlines()[1]
    assert "(row=2, inner=3) (inner=3, col=4)" in table and "(row=2, inner=3) (inner=3, col=6)" in table


def test_chrome_trace(tmp_path):
    lin, x, target = step()
    with nt.profile() as prof:
        run_step(lin, x, target)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert len(events) == len(prof.events)
    assert sorted(e["name"] for e in events) == sorted(e.name for e in prof.events)
    for e in events:
        assert e["ph"] == "X" and e["ts"] >= 0 and e["dur"] >= 0 and e["pid"] and e["tid"]
    ops = [e for e in events if e["cat"] == "op"]
    for before, after in zip(ops, ops[1:]):
        assert before["ts"] + before["dur"] <= after["ts"]  # one thread: one op after the other
    nodes = [e for e in events if e["cat"] == "backward"]
    assert {e["name"] for e in nodes} == {"linear_backward", "gelu_backward", "cross_entropy_backward"}
    weight_grad = next(e for e in ops if e["name"] == "linear_weight_grad")  # nested in its node's span
    linear = next(e for e in nodes if e["name"] == "linear_backward")
    assert linear["ts"] <= weight_grad["ts"] and weight_grad["ts"] + weight_grad["dur"] <= linear["ts"] + linear["dur"]
    linear = events[0]["args"]
    assert linear["inputs"][0] == {"names": ["batch", "feat"], "shape": [BATCH, FEAT], "dtype": "float32"}
    assert linear["outputs"][0]["names"] == ["batch", "cls"]
    assert linear["bytes"] == prof.events[0].bytes and linear["flops"] == 2 * BATCH * CLS * FEAT


def test_roofline():
    lin, x, target = step()
    with nt.profile() as prof:
        run_step(lin, x, target)
    roof = prof.roofline()
    assert isinstance(roof, Roofline)
    assert roof.bandwidth > 0 and roof.flop_rate > 0 and roof.threads == nt.get_num_threads()
    assert [r.name for r in roof.rows] == [s.name for s in prof.key_averages()]
    for r in roof.rows:
        assert r.calls > 0 and r.time_ns >= 0 and r.bound_ns > 0 and r.ratio >= 0
    linear = next(r for r in roof.rows if r.name == "linear")
    assert linear.bound_ns == pytest.approx(
        max(linear.bytes / roof.bandwidth, linear.flops / roof.flop_rate) * 1e9)
    again = prof.roofline()
    assert (again.bandwidth, again.flop_rate) == (roof.bandwidth, roof.flop_rate)  # measured once
    text = str(roof)
    assert "Time/bound" in text and text.splitlines()[-1].startswith("Machine: memory bandwidth")
    assert "<td>linear</td>" in roof._repr_html_()


def test_nothing_is_recorded_outside_the_block():
    x = nt.randn(3, names=("i",))
    x.exp()
    with nt.profile() as prof:
        x.exp()
    x.sin()
    assert [e.name for e in prof.events] == ["exp"]
    assert mode.current_tracer() is None
    with pytest.raises(nt.NamesError):
        with nt.profile() as failed:
            x + nt.randn(3, names=("j",))  # raises: the op is not recorded, and the block still ends
    x.cos()
    assert failed.events == [] and mode.current_tracer() is None


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    code = readme[readme.index("**Profiling your own code.**"):].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(code, "README.md (Profiling)", "exec"), scope)
    printed = capsys.readouterr().out
    assert "linear_weight_grad" in printed and "Input names and shapes" in printed and "Machine:" in printed
    assert len(json.loads((tmp_path / "trace.json").read_text())["traceEvents"]) == len(scope["prof"].events)


def test_nested_profiles():
    x = nt.randn(3, names=("i",))
    with nt.profile() as outer:
        x.exp()
        with nt.profile() as inner:
            x.sin()
        x.cos()
    assert [e.name for e in outer.events] == ["exp", "sin", "cos"]
    assert inner.events == outer.events[1:2]
    with pytest.raises(RuntimeError, match="profile: this profile is recording already"):
        with outer:
            with outer:
                pass
    assert mode.current_tracer() is None


def test_shape_traces_and_conversion_mode_inside_and_outside():
    x = nt.randn(3, names=("i",))

    def fn(t):
        with nt.profile() as prof:
            t.exp()
        t.sin()
        return prof

    trace = nt.trace_shapes(fn, x)  # the profile chains to the trace's tracer and puts it back
    assert trace.ops == ["exp", "sin"] and [e.name for e in trace.result.events] == ["exp"]

    with nt.profile() as prof:
        inner = nt.trace_shapes(lambda t: t.exp(), x)  # a shape trace records alone, then gives the slot back
        x.sin()
        with nt.gradual():
            x.cos()
        x.tan()  # conversion mode put the profile back
    assert inner.ops == ["exp"]
    assert [e.name for e in prof.events] == ["sin", "cos", "tan"]

    with nt.gradual():
        with nt.profile() as prof:
            x.exp()
        x.sin()
    report = nt.conversion_report()
    assert [e.name for e in prof.events] == ["exp"]
    assert [op for r in report.rows for op in r.named] == ["exp", "sin"]
    assert mode.current_tracer() is None


def test_ops_of_other_threads_are_not_recorded():
    x = nt.randn(3, names=("i",))
    started, release = threading.Event(), threading.Event()
    seen = {}

    def other():
        with nt.profile() as theirs:
            started.set()
            release.wait(10)
            x.cos()
        seen["theirs"] = [e.name for e in theirs.events]
        x.tan()  # after its block, in a thread that never profiled ours

    thread = threading.Thread(target=other)
    with nt.profile() as prof:
        thread.start()
        started.wait(10)
        x.exp()
        release.set()
        thread.join(10)
        x.sin()
    assert [e.name for e in prof.events] == ["exp", "sin"]
    assert seen["theirs"] == ["cos"]


class _FakeCuda(NumpyBackend):
    """The NumPy backend posing as a CUDA device, counting the synchronisations it is asked for."""

    name = "fake_cuda"

    def __init__(self) -> None:
        super().__init__()
        self.device = "cuda:0"
        self.synced = 0

    def upload(self, x, non_blocking=False, stream=None):
        return np.array(x, copy=True)

    def synchronize(self):
        self.synced += 1


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(backends, "_devices", {})
    monkeypatch.setattr(backends, "_registered", set())
    monkeypatch.setattr(backends, "_current", 0)
    backends.use_cpu_backend("numpy")
    fake = _FakeCuda()
    backends.register_device("cuda:0", fake)
    return fake


def test_sync_waits_for_the_device_after_each_op_on_cuda(fake_cuda):
    x = nt.randn(3, names=("i",)).to("cuda")
    on_cpu = nt.randn(3, names=("i",))
    with nt.profile() as prof:
        x.exp()
        on_cpu.exp()  # nothing to wait for on the CPU
        x.sin()
    assert fake_cuda.synced == 2 and len(prof.events) == 3
    with nt.profile(sync=False):
        x.exp()
    assert fake_cuda.synced == 2


def test_backward_nodes_are_rows_with_their_own_time():
    lin, x, target = step()  # x needs no gradient: linear's backward runs the weight gradient's op
    start = __import__("time").perf_counter_ns()
    with nt.profile() as prof:
        run_step(lin, x, target)
    wall = __import__("time").perf_counter_ns() - start
    names = [e.name for e in prof.events]
    # GELU's and cross-entropy's backwards compute on raw arrays, in no op of their own: now rows
    for node in ("gelu_backward", "cross_entropy_backward", "linear_backward"):
        assert node in names
    gelu = next(e for e in prof.events if e.name == "gelu_backward")
    assert gelu.inputs[0].names == gelu.outputs[0].names == ("batch", "cls") and gelu.flops is None
    assert gelu.bytes == 2 * BATCH * CLS * 4
    # a node's row is its own time: the ops its backward ran (linear's weight gradient) are rows of
    # their own, inside its span, and the rows add up to less than the block's wall time
    linear = next(e for e in prof.events if e.name == "linear_backward")
    weight_grad = next(e for e in prof.events if e.name == "linear_weight_grad")
    assert linear.start_ns <= weight_grad.start_ns
    assert weight_grad.start_ns + weight_grad.duration_ns <= linear.start_ns + linear.span_ns
    assert linear.duration_ns <= linear.span_ns - weight_grad.duration_ns
    assert names.index("linear_weight_grad") < names.index("linear_backward")
    assert sum(e.duration_ns for e in prof.events) <= wall
    assert "gelu_backward" in str(prof)
    assert linear.flops is None  # its products are the nested rows' FLOPs


@pytest.mark.parametrize("threads", [1, 2])
def test_a_linear_backward_on_raw_arrays_counts_its_two_products(threads):
    lin, x, target = step()
    x.requires_grad_()  # both gradients: on 2 threads two products side by side, no op of their own
    before = nt.get_num_threads()
    nt.set_num_threads(threads)
    try:
        with nt.profile() as prof:
            run_step(lin, x, target)
    finally:
        nt.set_num_threads(before)
    names = [e.name for e in prof.events]
    linear = next(e for e in prof.events if e.name == "linear_backward")
    if threads == 1:  # one after the other: each an op of its own, with its FLOPs
        assert "linear_weight_grad" in names and names.count("linear") == 2 and linear.flops is None
        return
    assert "linear_weight_grad" not in names and names.count("linear") == 1
    assert linear.flops == 2 * (2 * BATCH * CLS * FEAT)
    assert [o.names for o in linear.outputs] == [("batch", "feat"), ("cls", "feat"), ("cls",)]
    # the same gradients as the ops compute (create_graph takes them)
    loss = nt.nn.functional.cross_entropy(lin(x).gelu(), target, dim="cls")
    want = nt.grad(loss, (x, lin.weight, lin.bias), create_graph=True)
    for got, expected in zip((x.grad, lin.weight.grad, lin.bias.grad), want):
        assert got.names == expected.names
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_backward_node_rows_reach_the_profiles_a_profile_nests_in():
    x = nt.randn(3, names=("i",), requires_grad=True)
    with nt.profile() as outer:
        y = x.exp().sum()
        with nt.profile() as inner:
            y.backward()
    # sum's backward ran reshape and broadcast_to, exp's a mul: rows before their node's
    assert [e.name for e in inner.events] == ["reshape", "broadcast_to", "sum_backward", "mul", "exp_backward"]
    assert outer.events[-5:] == inner.events


def _trained(optimizer, **kw):
    """A small model, its optimizer and a batch, with gradients from one backward."""
    lin, x, target = step()
    opt = optimizer(lin.parameters(), lr=0.1, **kw)
    run_step(lin, x, target)
    return lin, x, target, opt


@pytest.mark.parametrize("optimizer, kw, state", [
    (nt.optim.AdamW, {}, 2), (nt.optim.AdamW, {"fused": True}, 2), (nt.optim.Adam, {"amsgrad": True}, 3),
    (nt.optim.SGD, {"momentum": 0.9}, 1), (nt.optim.SGD, {}, 0)])
def test_an_optimizers_step_and_zero_grad_are_rows(optimizer, kw, state):
    if kw.get("fused"):
        pytest.importorskip("numba")
    lin, x, target, opt = _trained(optimizer, **kw)
    kind = optimizer.__name__
    params = nbytes(lin.weight, lin.bias)
    with nt.profile() as prof:
        opt.step()
        opt.zero_grad(set_to_none=False)  # writes zeros into each grad
        run_step(lin, x, target)
        opt.zero_grad()  # drops them: no memory touched
    names = [e.name for e in prof.events]
    assert names[:2] == [f"Optimizer.step#{kind}.step", f"Optimizer.zero_grad#{kind}.zero_grad"]
    assert names[-1] == f"Optimizer.zero_grad#{kind}.zero_grad" and "linear" in names
    stepped, zeroed, dropped = prof.events[0], prof.events[1], prof.events[-1]
    # each parameter read and written, its grad read, each state tensor (as large) read and written
    assert stepped.bytes == 2 * params + params + 2 * state * params
    assert zeroed.bytes == params and dropped.bytes == 0
    for e in (stepped, zeroed, dropped):
        assert e.inputs == e.outputs == () and e.flops is None and e.span_ns is None and e.duration_ns >= 0
    assert f"Optimizer.step#{kind}.step" in str(prof)
    roof = next(r for r in prof.roofline().rows if r.name == f"Optimizer.step#{kind}.step")
    assert roof.bytes == stepped.bytes and roof.bound_ns > 0


def test_a_closures_ops_are_rows_of_their_own_before_the_step():
    lin, x, target, opt = _trained(nt.optim.SGD)

    def closure():
        opt.zero_grad()
        return run_step(lin, x, target)

    with nt.profile() as prof:
        opt.step(closure)
    names = [e.name for e in prof.events]
    assert names[0] == "Optimizer.zero_grad#SGD.zero_grad" and names[-1] == "Optimizer.step#SGD.step"
    assert "linear" in names and names.count("Optimizer.step#SGD.step") == 1
    # the step's row starts after the closure's ops ended
    stepped = prof.events[-1]
    assert all(e.start_ns + e.duration_ns <= stepped.start_ns for e in prof.events[:-1] if e.span_ns is None)


def test_gradient_clipping_is_a_row():
    lin, x, target, opt = _trained(nt.optim.SGD)
    grads = nbytes(lin.weight.grad, lin.bias.grad)
    with nt.profile() as prof:
        nt.optim.clip_grad_norm_(lin.parameters(), max_norm=1e9)  # reads the grads, scales none
        nt.optim.clip_grad_norm_(lin.parameters(), max_norm=1e-9)  # and scales them into new ones
        nt.optim.clip_grad_value_(lin.parameters(), 1e-12)
    assert [(e.name, e.bytes) for e in prof.events] == [
        ("clip_grad_norm_", grads), ("clip_grad_norm_", 3 * grads), ("clip_grad_value_", 2 * grads)]
    np.testing.assert_allclose(np.abs(lin.weight.grad.numpy()), 1e-12, rtol=1e-6)  # the clipping still ran


def test_work_rows_reach_the_profiles_a_profile_nests_in_and_need_one():
    lin, x, target, opt = _trained(nt.optim.SGD)
    assert mode.work_started() is None  # no profile: no clock read, no report
    with nt.profile() as outer:
        with nt.profile() as inner:
            opt.step()
    assert [e.name for e in inner.events] == ["Optimizer.step#SGD.step"] and outer.events == inner.events
    trace = nt.trace_shapes(lambda t: (mode.work_started(), t.exp())[0], x)  # a shape trace times no work
    assert trace.result is None


def test_the_steps_of_a_compiled_training_step_are_rows():
    lin, x, target, opt = _trained(nt.optim.AdamW)

    @nt.compile
    def train(x, target):
        opt.zero_grad()
        loss = run_step(lin, x, target)
        nt.optim.clip_grad_norm_(lin.parameters(), 1.0)
        opt.step()
        return loss.detach()

    train(x, target)
    with nt.profile() as prof:
        train(x, target)
    names = [e.name for e in prof.events]
    for row in ("Optimizer.zero_grad#AdamW.zero_grad", "clip_grad_norm_", "Optimizer.step#AdamW.step"):
        assert names.count(row) == 1, names
    assert names.index("clip_grad_norm_") < names.index("Optimizer.step#AdamW.step")
    assert next(e for e in prof.events if e.name == "Optimizer.step#AdamW.step").bytes == 7 * nbytes(lin.weight, lin.bias)


def test_a_work_row_waits_for_the_device_on_cuda(fake_cuda):
    p = nt.randn(3, names=("i",)).to("cuda").requires_grad_()
    p.grad = nt.ones(3, names=("i",)).to("cuda")
    opt = nt.optim.SGD([p], lr=0.1)
    with nt.profile() as prof:
        opt.step()
    assert fake_cuda.synced == 1 and [e.name for e in prof.events] == ["Optimizer.step#SGD.step"]
    with nt.profile(sync=False):
        opt.step()
    assert fake_cuda.synced == 1


def test_a_garbage_collection_is_a_row_of_its_own_out_of_the_op_it_fell_in(monkeypatch, slow_collections, tmp_path):
    x = nt.randn(3, names=("i",))
    B = backend_of(x)
    exp = B.exp

    def collecting_exp(a):
        gc.collect()
        return exp(a)

    monkeypatch.setattr(B, "exp", collecting_exp)
    hooks = list(gc.callbacks)
    with nt.profile() as prof:
        x.exp()
        x.sin()
    assert gc.callbacks == hooks  # the profile's hook is gone with it
    assert [e.name for e in prof.events] == ["exp", "sin"]
    [collection] = prof.collections
    assert collection.name == "python gc, generation 2" and collection.duration_ns >= PAUSE * 1e9
    assert (collection.inputs, collection.outputs, collection.bytes, collection.flops) == ((), (), 0, None)
    op = prof.events[0]
    assert op.start_ns <= collection.start_ns
    assert op.duration_ns < collection.duration_ns  # the op's own work: with the collection it would be longer
    stats = {s.name: s for s in prof.key_averages()}
    assert stats["python gc, generation 2"].calls == 1 and stats["exp"].total_ns == op.duration_ns
    assert prof.total_ns == sum(e.duration_ns for e in prof.events) + collection.duration_ns
    lines = prof.table().splitlines()
    assert lines[3].split()[:5] == ["python", "gc,", "generation", "2", "1"]  # the longest row
    assert lines[-1].startswith("2 ops, 1 garbage collection, total time ")
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert [(t["name"], t["cat"]) for t in trace] == [("exp", "op"), ("python gc, generation 2", "gc"), ("sin", "op")]
    row = next(r for r in prof.roofline().rows if r.name == "python gc, generation 2")
    assert row.bound_ns == 0 and row.ratio is None


def test_a_garbage_collection_is_out_of_the_backward_node_and_the_work_row_it_fell_in(monkeypatch, slow_collections):
    lin, x, target = step()
    B = backend_of(x)
    backward = B.gelu_backward

    def collecting_backward(*args):
        gc.collect()
        return backward(*args)

    monkeypatch.setattr(B, "gelu_backward", collecting_backward)
    with nt.profile() as prof:
        run_step(lin, x, target)
        start = mode.work_started()
        gc.collect(0)
        mode.work_done("work", start, 0)
    node, work = (next(e for e in prof.events if e.name == n) for n in ("gelu_backward", "work"))
    in_node, in_work = prof.collections
    assert (in_node.name, in_work.name) == ("python gc, generation 2", "python gc, generation 0")
    assert node.start_ns <= in_node.start_ns <= in_node.start_ns + in_node.duration_ns <= node.start_ns + node.span_ns
    assert node.duration_ns < in_node.duration_ns  # the node's own work
    assert work.start_ns <= in_work.start_ns and work.duration_ns < in_work.duration_ns


def test_garbage_collections_reach_the_profiles_a_profile_nests_in_and_no_other_threads():
    x = nt.randn(3, names=("i",))
    seen = {}

    def other():
        with nt.profile() as theirs:
            gc.collect(1)
        seen["theirs"] = [c.name for c in theirs.collections]

    with nt.profile() as outer:
        with nt.profile() as inner:
            gc.collect(1)
            x.exp()
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
    assert [c.name for c in inner.collections] == ["python gc, generation 1"]
    assert outer.collections == inner.collections  # not the other thread's
    assert seen["theirs"] == ["python gc, generation 1"]
    with nt.profile() as idle:
        pass
    gc.collect()  # after its block
    assert idle.collections == [] and _collection not in gc.callbacks
