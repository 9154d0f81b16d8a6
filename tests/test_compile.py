"""nt.compile: tracing per signature, guards and retracing, the cache limit, eager fallback with a warning
naming the op, the passes (constant folding, common subexpressions, dead code, fusion), the fused
op's kernels (Numba; NumPy op by op without it; the CUDA C source) and gradients through compiled code.

The equality of compiled and eager results op family by op family is tests/test_compile_ops.py.
"""

import copy
import dataclasses
import functools
import gc
import math
import pickle
import tracemalloc
import types
import re
import threading
import warnings
import weakref
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import nn
from namedtensor.backends import numpy_kernels, thread_pool
from namedtensor.compiler import CompiledFunction, cuda_codegen, formulas, numba_codegen
from namedtensor.nn import functional as F
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from helpers import clipped_batchnorm_step, rnd


def mlp_tail(x, w):
    # formulas that vectorize, so the CPU fuses them (float64 sin and cos, pow by other numbers fuse on a GPU only)
    h = x * w + 1.0
    h = nt.maximum(h, 0.1) * 2 - x / (1.0 + x.abs()) + nt.where(h > 0, h, -h)
    return (h * h).sum("d"), h


def cuda_fused_nodes(fn, *args):
    """The nodes of fused chains in ``fn``'s graph as a GPU would fuse them (traced on the CPU)."""
    from namedtensor.compiler import api, capture, passes

    leaves, tree = capture.flatten((args, {}))
    graph = capture.capture(fn, list(leaves), tree)
    kernels = lambda *a: ({"cupy": None}, {})  # stand-ins: only the chains are wanted
    passes.fuse_elementwise(graph, api.fusible_on("cupy"), kernels, absorbs=api.absorbs)
    return [n for n in graph.nodes if hasattr(n.op, "chain")]


def cuda_chains(fn, *args):
    """The fused chains of ``fn``'s graph as a GPU would fuse them, with their inputs' dtypes."""
    return [(n.op.chain, [v.dtype for v in n.args]) for n in cuda_fused_nodes(fn, *args)]


def program(cf):
    (prog,) = [p for p in cf._cache.values() if p is not None]
    return prog


@pytest.fixture
def split_calls(monkeypatch):
    """``split_calls(n)``: every kernel call of the test is split among ``n`` threads of a new pool."""
    monkeypatch.setattr(numba_codegen, "_PARALLEL_FROM", 1)
    monkeypatch.setattr(thread_pool, "_pool", None)
    before = nt.get_num_threads()
    yield nt.set_num_threads
    nt.set_num_threads(before)


def compiled_quietly(fn, *args, **kw):
    cf = nt.compile(fn, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return cf, cf(*args)


# ----------------------------------------------------------------------------- results, graphs, gradients


def test_a_chain_is_fused_into_one_op_with_the_eager_values_and_names():
    x, w = rnd(6, 7, names=("b", "d")), rnd(7, names=("d",), seed=1)
    cf, (total, h) = compiled_quietly(mlp_tail, x, w)
    want_total, want_h = mlp_tail(x, w)
    assert_close(total, want_total, rtol=1e-5, atol=1e-5)
    assert_close(h, want_h, rtol=1e-5, atol=1e-6)
    ops = [n.op.name for n in program(cf).graph.nodes]
    assert ops == ["fused[mul+add+maximum+mul+abs+add+div+sub+gt+neg+where+add+mul]", "sum"]
    # the chain's last value is not returned: the fused op gives out h (read by the return) and the product
    assert [v.names for v in program(cf).graph.nodes[0].outputs] == [("b", "d"), ("b", "d")]
    text = cf.explain()
    assert "fused groups: 1" in text and "(b=6, d=7) float32" in text and "argument 0: (b=6, d=7)" in text


def test_gradients_through_compiled_code_are_the_eager_ones():
    x = rnd(4, 5, names=("b", "d"), dtype="float64").requires_grad_()
    w = rnd(5, names=("d",), seed=1, dtype="float64").requires_grad_()
    cf = nt.compile(lambda x, w: mlp_tail(x, w)[0])
    assert gradcheck(cf, x, w) and gradgradcheck(cf, x, w)
    got = nt.grad(cf(x, w).sum(), [x, w])
    want = nt.grad(mlp_tail(x, w)[0].sum(), [x, w])
    for g, e in zip(got, want):
        assert g.names == e.names
        assert_close(g, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_adamw_update_written_with_ops_is_one_kernel(dtype):
    pytest.importorskip("numba")
    beta1, beta2, eps, decay = 0.9, 0.999, 1e-8, 0.01

    def adamw(p, g, m, v, lr, step):
        m = m * beta1 + g * (1 - beta1)
        v = v * beta2 + g * g * (1 - beta2)
        m_hat, v_hat = m / (1 - beta1 ** step), v / (1 - beta2 ** step)
        return p * (1 - lr * decay) - lr * m_hat / (v_hat.sqrt() + eps), m, v

    p, g, m = (rnd(64, 33, names=("out", "in"), seed=k, dtype=dtype) for k in range(3))
    v = rnd(64, 33, names=("out", "in"), seed=3, dtype=dtype).abs()
    cf, got = compiled_quietly(adamw, p, g, m, v, 1e-3, 7)
    (node,) = program(cf).graph.nodes  # the parameter, both moments: three outputs of one generated kernel
    assert node.op.name.startswith("fused[") and len(node.outputs) == 3 and "numpy" in node.op.kernels
    for a, e in zip(got, adamw(p, g, m, v, 1e-3, 7)):
        assert a.names == e.names and a.dtype == e.dtype
        assert_close(a, e, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-7 if dtype == "float32" else 1e-14)


def test_the_fused_backward_saves_the_inputs_only():
    x = rnd(3, 4, names=("b", "d"), dtype="float64").requires_grad_()
    cf = nt.compile(lambda x: (x * 2 + 1).relu() * x - 3)
    y = cf(x)
    node = y.grad_fn
    assert node.op.name == "fused[mul+add+relu+mul+sub]"
    assert len(node.saved) == 1 and node.saved[0] is x  # no intermediate is stored; the backward recomputes
    assert "numpy" in node.op.backward_kernels  # one pass of the generated backward


def test_constants_are_folded_subexpressions_merged_and_dead_code_dropped():
    def fn(x):
        scale = nt.arange(4, dtype=nt.float32).rename("d") * 0.5 + 1  # made here: constants, folded
        x.exp()  # dead: nothing reads it
        return (x * scale).sum("d") + (x * scale).sum("d")  # the same product twice: merged

    x = rnd(3, 4, names=("b", "d"))
    cf, out = compiled_quietly(fn, x)
    assert_close(out, fn(x))
    report = program(cf).report
    assert report["constants folded"] == 3 and report["subexpressions merged"] == 2 and report["dead nodes dropped"] == 1


def test_externals_are_read_afresh_at_every_call():
    w = rnd(4, names=("d",))
    cf = nt.compile(lambda x: x * w)
    x = rnd(3, 4, names=("b", "d"), seed=1)
    assert_close(cf(x), x * w)
    w.mul_(3.0)  # an optimizer's in-place update: the graph sees it
    assert_close(cf(x), x * w)


def test_a_compiled_module_trains_as_the_eager_one():
    nt.manual_seed(0)
    model = nn.Sequential(nn.Linear("feat", "hidden", 8, 16), nn.GELU(), nn.Linear("hidden", "cls", 16, 3))
    compiled = nt.compile(model)
    assert list(compiled.parameters()) == list(model.parameters())
    x = rnd(5, 8, names=("batch", "feat"))
    target = nt.tensor(np.array([0, 1, 2, 1, 0]), names=("batch",))
    opt = nt.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        want = F.cross_entropy(model(x), target, dim="cls")
        got = F.cross_entropy(compiled(x), target, dim="cls")
        assert_close(got, want, rtol=1e-6, atol=1e-6)
        opt.zero_grad()
        got.backward()
        opt.step()
    assert len(compiled._cache) == 1
    model.eval()
    compiled(x)
    assert len(compiled._cache) == 2  # the training flags are part of the signature


# ----------------------------------------------------------------------------- signatures and guards


def test_a_new_signature_is_traced_again_and_the_cache_limit_warns_with_what_changed():
    cf = nt.compile(lambda x: x * 2 + 1, cache_limit=2)
    cf(rnd(3, names=("a",)))
    cf(rnd(3, names=("a",), seed=1))  # same signature: no new trace
    assert len(cf.signatures()) == 1
    cf(rnd(4, names=("a",)))
    assert [s.rsplit("; ", 1)[-1] for s in cf.signatures()] == ["argument 0: (a=3) float32 on cpu",
                                                                 "argument 0: (a=4) float32 on cpu"]
    with pytest.warns(UserWarning, match=r"traced for 2 signatures \(cache_limit=2\).*argument 0: \(b=5\)"):
        out = cf(rnd(5, names=("b",)))
    assert out.names == ("b",) and len(cf._cache) == 2
    assert_close(out, rnd(5, names=("b",)) * 2 + 1)


_STEP = 0
_LIMITED = {"model": {"scale": 1.0}}


def test_the_cache_limit_names_the_outside_value_that_changed():
    # a global counter, a config's number, a namespace's attribute: the message says which, and how
    import argparse

    global _STEP
    args = argparse.Namespace(lr=0.1)
    x = rnd(3, names=("a",))
    cases = [
        (lambda x: x * _STEP, lambda: globals().update(_STEP=_STEP + 1), r"global _STEP \(1 -> 2\)"),
        (lambda x: x * _LIMITED["model"]["scale"], lambda: _LIMITED["model"].update(scale=_LIMITED["model"]["scale"] + 1),
         r"global _LIMITED\['model'\]\['scale'\] \(2.0 -> 3.0\)"),
        (lambda x: x * args.lr, lambda: setattr(args, "lr", args.lr * 2), r"closure variable args.lr \(0.2 -> 0.4\)"),
    ]
    for fn, change, said in cases:
        compiled = nt.compile(fn, cache_limit=2)
        compiled(x)
        change()
        compiled(x)
        change()
        with pytest.warns(UserWarning, match=r"traced for 2 signatures .*differs from the last in: .*" + said +
                                             r".*or pass a number that changes at every call as a tensor"):
            assert_close(compiled(x), fn(x))


@pytest.mark.parametrize("change", ["names", "dtype", "requires_grad", "grad mode"])
def test_the_signature_covers_names_dtype_requires_grad_and_grad_mode(change):
    cf = nt.compile(lambda x: x.exp())
    x = rnd(3, names=("a",))
    cf(x)
    if change == "names":
        cf(x.rename("z"))
    elif change == "dtype":
        cf(x.double())
    elif change == "requires_grad":
        cf(x.detach().requires_grad_())
    else:
        with nt.no_grad():
            cf(x)
    assert len(cf._cache) == 2


def test_a_modules_state_key_follows_its_flags_parameters_buffers_and_children():
    from namedtensor.nn.module import state_key

    shared = nn.Linear("d", "d2", 3, 3)
    model = nn.Sequential(shared, nn.GELU(), shared)  # a module reachable twice counts once
    key = state_key(model)
    assert key[:3] == (tuple(m.training for m in model.modules()), tuple(map(id, model.parameters())),
                       tuple(map(id, model.buffers())))
    assert len(key[0]) == 3 and len(key[1]) == 2
    assert key[3][1] == (nn.Linear, (("training", True), ("in_dim", "d"), ("out_dim", "d2"), ("in_size", 3),
                                     ("out_size", 3)))
    shared.out_dim = "e"
    assert state_key(model)[3][1][1][2] == ("out_dim", "e")
    shared.eval()
    assert state_key(model)[0] == (True, False, True)
    shared.bias = nn.Parameter(nt.zeros(3, names=("d2",)))
    assert state_key(model)[1] != key[1]
    shared.register_buffer("scale", nt.ones(3, names=("d2",)))
    assert len(state_key(model)[2]) == 1
    model.append(nn.Identity())
    assert len(state_key(model)[0]) == 4
    model[1] = nn.Tanh()  # no settings, no tensors: its class tells it from the GELU it replaced
    assert state_key(model)[3][2][0] is nn.Tanh


def test_a_forward_replaced_on_the_instance_traces_again():
    model = nn.Linear("a", "b", 3, 2)
    x = rnd(4, 3, names=("n", "a"))
    compiled, got = compiled_quietly(model, x)
    assert_close(got, model(x))
    plain = model.forward
    model.forward = lambda x: plain(x) * 2
    assert_close(compiled(x), model(x))


class _Casting(nn.Module):
    def __init__(self):
        super().__init__()
        self.out_dtype = nt.float64

    def forward(self, x):
        return x.to(self.out_dtype) * 2


_OUT_DTYPE = nt.float64


class _WithClassScale(nn.Module):
    SCALE = 2.0

    def forward(self, x):
        return x * self.SCALE + _Factors.scaled(x)


class _Factors:
    FACTOR = 2.0

    @staticmethod
    def scaled(x):
        return x * _Factors.FACTOR


def test_a_class_attribute_read_through_self_or_the_class_is_part_of_the_signature():
    x = rnd(3, names=("a",))
    model = _WithClassScale()
    try:
        for change in (lambda: setattr(_WithClassScale, "SCALE", 3.0), lambda: setattr(_Factors, "FACTOR", 5.0)):
            compiled, got = compiled_quietly(model, x)
            assert_close(got, model(x))
            change()
            assert_close(compiled(x), model(x))
    finally:
        _WithClassScale.SCALE, _Factors.FACTOR = 2.0, 2.0


def test_a_dtype_setting_is_part_of_the_signature():
    # a module's, a global's and a config's dtype: a graph that specialised the cast casts to the new one
    global _OUT_DTYPE
    x = rnd(5, names=("a",))
    cfg = {"dtype": nt.float64}
    model = _Casting()
    for fn, put in ((model, lambda d: setattr(model, "out_dtype", d)),
                    (lambda x: x.to(_OUT_DTYPE), lambda d: globals().update(_OUT_DTYPE=d)),
                    (lambda x: x.to(cfg["dtype"]), lambda d: cfg.update(dtype=d))):
        put(nt.float64)
        compiled, got = compiled_quietly(fn, x)
        assert got.dtype is nt.float64
        put(nt.float16)
        assert compiled(x).dtype is nt.float16
        assert_close(compiled(x), fn(x))


def test_a_compiled_module_called_from_a_compiled_function_is_guarded_as_the_module():
    # its weights and flags are the outer signature's too: a replaced weight, a new mode trace again
    model = nn.Sequential(nn.Linear("a", "b", 3, 2), nn.Dropout(0.5)).eval()
    inner = nt.compile(model)
    outer = lambda x: inner(x).sum()
    x = rnd(4, 3, names=("n", "a"))
    compiled, got = compiled_quietly(outer, x)
    assert_close(got, model(x).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model[0].weight = nn.Parameter(rnd(2, 3, names=("b", "a"), seed=1))
        assert_close(compiled(x), model(x).sum())
        model.train()
        nt.manual_seed(3)
        got = compiled(x)
        nt.manual_seed(3)
        assert_close(got, model(x).sum())


def test_a_module_replaced_by_one_of_another_class_traces_again():
    x = rnd(5, names=("a",))
    model = nn.Sequential(nn.Tanh())
    compiled, got = compiled_quietly(model, x)
    model[0] = nn.Sigmoid()
    assert_close(compiled(x), model(x))
    act = nn.Tanh()
    fn = lambda x: act(x) * 2
    compiled, _ = compiled_quietly(fn, x)
    act = nn.Sigmoid()
    assert_close(compiled(x), fn(x))


SCALE = 2.0


def test_a_changed_setting_is_traced_again():
    # the graph specialised each of them: a module's eps, a global, a closure's number
    norm = nn.LayerNorm("d", 4)
    x = rnd(3, 4, names=("b", "d"))
    cn = nt.compile(norm)
    assert_close(cn(x), norm(x))
    norm.eps = 10.0
    assert_close(cn(x), norm(x))
    assert len(cn._cache) == 2

    cm = nt.compile(norm.forward)  # a bound method reads its module's state too
    assert_close(cm(x), norm(x))
    norm.eps = 1e-5
    assert_close(cm(x), norm(x))
    norm.bias = nn.Parameter(nt.ones(4, names=("d",)))
    assert_close(cm(x), norm(x))
    assert len(cm._cache) == 3

    global SCALE
    cg = nt.compile(lambda x: x * SCALE)
    factor = 3
    cc = nt.compile(lambda x: x * factor)
    for value in (2.0, 5.0):
        SCALE = value
        assert_close(cg(x), x * value)
    assert_close(cc(x), x * 3)
    factor = True  # equal to 1, but another setting: x * True keeps x
    assert_close(cc(x), x)
    assert len(cg._cache) == 2 and len(cc._cache) == 2


def test_a_function_that_rebinds_what_it_reads_runs_eagerly_from_then_on():
    # traced, each call would be a new signature (the global changed), and the dry runs would add to it
    def counted(x):
        global SCALE
        SCALE += 1.0
        return x * SCALE

    start = SCALE
    cf = nt.compile(counted)
    x = rnd(3, names=("a",))
    with pytest.warns(UserWarning, match=r"counted runs eagerly from now on: a value read from outside: the function "
                                         r"rebinds a global") as record:
        results = [cf(x) for _ in range(10)]
    assert len(record) == 1  # more calls than cache_limit, and no second warning about it
    assert SCALE == start + 10  # the eager calls' increments only: the dry run's was put back
    assert_close(results[-1], x * SCALE)
    assert list(cf._cache.values()) == [None]  # no trace after the first, nor a signature kept for nothing
    with pytest.raises(RuntimeError, match=r"fullgraph=True\): a value read from outside"):
        nt.compile(counted, fullgraph=True)(x)
    assert SCALE == start + 10


class _Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


class _Remembering(nn.Module):
    """Keeps its last output, as an attribute or as a buffer (a running statistic written by assignment)."""

    def __init__(self, as_buffer: bool):
        super().__init__()
        if as_buffer:
            self.register_buffer("last", nt.zeros(3, names=("a",)))

    def forward(self, x):
        self.last = x * 2
        return self.last + 1


@pytest.mark.parametrize("as_buffer", [False, True])
def test_a_module_that_keeps_a_tensor_of_its_forward_runs_eagerly(as_buffer):
    # traced, the module would keep the dry run's stand-in, and a replay would never update it
    module = _Remembering(as_buffer)
    cf = nt.compile(module)
    x = rnd(3, names=("a",))
    with pytest.warns(UserWarning, match="runs eagerly from now on: a value read from outside: the function rebinds"):
        got = cf(x)
    assert module.last.device == "cpu" and (("last" in module._buffers) is as_buffer)
    assert_close(module.last, x * 2)
    assert_close(got, x * 2 + 1)
    y = rnd(3, names=("a",), seed=1)
    cf(y)
    assert_close(module.last, y * 2)


def test_a_closure_or_a_module_that_rebinds_what_it_reads_runs_eagerly():
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        return x + count

    module, read = _Counting(), _Counting()

    def reads_a_module(x):  # a module in a closure cell: guarded as a compiled one
        return read(x)

    x = rnd(3, names=("a",))
    for fn, calls in ((bump, lambda: count), (module, lambda: module.calls), (reads_a_module, lambda: read.calls)):
        cf = nt.compile(fn)
        with pytest.warns(UserWarning, match="runs eagerly from now on: a value read from outside"):
            got = [cf(x) for _ in range(2)]
        assert calls() == 2
        assert_close(got[1], x + 2 if fn is bump else x * 2)


def test_the_default_dtype_is_part_of_the_signature():
    # a factory inside the function makes its constant in the default dtype of the call
    cf = nt.compile(lambda x: x + nt.ones(3, names=("a",)))
    x = rnd(3, names=("a",), dtype="float16")
    assert cf(x).dtype is nt.float32
    try:
        nt.set_default_dtype(nt.float64)
        got = cf(x)
    finally:
        nt.set_default_dtype(nt.float32)
    assert got.dtype is nt.float64
    assert_close(got, x.double() + 1.0)
    assert "default float dtype nt.float64" in "; ".join(capture_key_parts(cf))


def test_conversion_mode_is_part_of_the_signature():
    # flatten without out_name leaves its dims unnamed in nt.gradual and raises outside it: a graph traced
    # in the mode must not replay the unnamed dims outside it
    fn = lambda x: x.flatten(0, 1) * 2
    cf = nt.compile(fn)
    x = rnd(2, 3, names=("a", "b"))
    with nt.gradual():
        assert cf(x).names == (None,)
    with pytest.raises(nt.NamesError, match=r"flatten: flattening dims \(0, 1\) of \('a', 'b'\) without out_name"):
        cf(x)
    with nt.gradual():
        assert_close(cf(x).rename(None), fn(x).rename(None))
    assert "conversion mode (nt.gradual) on" in "; ".join(capture_key_parts(cf))


def capture_key_parts(cf) -> list:
    from namedtensor.compiler.capture import describe_key

    return [p for key in cf._cache for p in describe_key(key)]


def test_an_external_that_changes_shape_is_traced_again():
    model = nn.Linear("feat", "out", 4, 3)
    cf = nt.compile(model)
    x = rnd(2, 4, names=("batch", "feat"))
    cf(x)
    model.weight = nn.Parameter(rnd(5, 4, names=("out", "feat")))
    model.bias = nn.Parameter(rnd(5, names=("out",)))
    assert_close(cf(x), model(x))
    assert len(cf._cache) == 2


def test_an_external_whose_data_changes_dtype_is_traced_again():
    w = rnd(4, names=("feat",))
    cf = nt.compile(lambda x: (x * w).exp())
    x = rnd(2, 4, names=("batch", "feat"))
    assert cf(x).dtype == nt.float32
    w.data = w.to(nt.float64)  # the same tensor object: only the guard on its dtype sees the change
    got = cf(x)
    assert got.dtype == nt.float64
    assert_close(got, (x * w).exp(), rtol=1e-12, atol=0)
    assert len(cf._cache) == 1  # the same signature, traced again


def test_python_arguments_are_specialised_and_unhashable_ones_run_eagerly():
    cf = nt.compile(lambda x, k: x * k)
    x = rnd(3, names=("a",))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(cf(x, 2.0), x * 2.0)
        assert_close(cf(x, 3.0), x * 3.0)
        assert_close(cf(x, np.float32(4.0)), x * 4.0)
        assert_close(nt.compile(lambda x, ks: x * ks[0])(x, [5.0]), x * 5.0)  # lists of numbers are trees
    assert len(cf._cache) == 3 and None not in cf._cache.values()
    k = np.array([1.0, 2.0, 3.0], np.float32)  # an array is no part of a signature
    with pytest.warns(UserWarning, match=r"runs eagerly: an argument is neither a tensor nor hashable"):
        assert_close(cf(x, k), x * k)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        assert_close(cf(x, k * 2), x * (k * 2))
    assert len(cf._cache) == 3
    with pytest.raises(RuntimeError, match=r"fullgraph=True\): an argument is neither"):
        nt.compile(lambda x, k: x * k, fullgraph=True)(x, k)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_expm1_fuses_on_the_cpu(dtype):
    pytest.importorskip("numba")
    x = rnd(6, 300, names=("a", "b"), dtype=dtype).requires_grad_()
    elu = lambda x: nt.where(x > 0, x, 1.5 * x.expm1())  # ELU, as users write it
    cf, got = compiled_quietly(elu, x)
    assert [n.op.name for n in program(cf).graph.nodes] == ["fused[gt+expm1+mul+where]"]
    tol = 1e-6 if dtype == "float32" else 1e-14
    assert_close(got, elu(x), rtol=tol, atol=tol)
    assert_close(nt.grad(got.sum(), x)[0], nt.grad(elu(x).sum(), x)[0], rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rounding_sign_and_finiteness_fuse_with_numpys_values(dtype):
    pytest.importorskip("numba")
    # halves round to even, as NumPy's round; signed zeros, NaN and infinities as eagerly
    a = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 0.0, np.nan, np.inf, -np.inf, 3.7, -3.7, 1e20, 0.49999997,
                  4503599627370497.0, -1e-300, 7.0])
    x = nt.tensor(a.astype(dtype), names=("i",)).requires_grad_()
    g = nt.tensor(np.linspace(1, 2, len(a)).astype(dtype), names=("i",))
    cases = {"floor": lambda x: x.floor() * 2.0, "ceil": lambda x: x.ceil() * 2.0, "round": lambda x: x.round() * 2.0,
             "trunc": lambda x: nt.trunc(x) * 2.0, "frac": lambda x: nt.frac(x) * 2.0, "sign": lambda x: x.sign() * 2.0,
             "isnan": lambda x: nt.where(nt.isnan(x), 0.0, x) * 2.0, "isinf": lambda x: nt.where(nt.isinf(x), 0.0, x) * 2.0,
             "isfinite": lambda x: nt.where(nt.isfinite(x), x, 0.0) * 2.0}
    for name, fn in cases.items():
        with np.errstate(invalid="ignore"):
            cf, got = compiled_quietly(fn, x)
            want = fn(x)
            (ga,), (gw,) = nt.grad(got, (x,), g), nt.grad(want, (x,), g)  # 0 but for frac's, g
        label = f"{name}+where+mul" if name.startswith("is") else f"{name}+mul"
        assert [n.op.name for n in program(cf).graph.nodes] == [f"fused[{label}]"]
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        np.testing.assert_array_equal(np.signbit(got.detach().numpy()), np.signbit(want.detach().numpy()))
        np.testing.assert_array_equal(ga.numpy(), gw.numpy())
    # fake quantization, as quantization-aware training writes it, is one kernel each way
    fq = lambda x: (x / 0.05).round().clamp(-128, 127) * 0.05
    cf, got = compiled_quietly(fq, x)
    assert [n.op.name for n in program(cf).graph.nodes] == ["fused[div+round+clip+mul]"]
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got.detach().numpy(), fq(x).detach().numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_to_num_and_logaddexp_fuse_with_numpys_values(dtype):
    pytest.importorskip("numba")
    a = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -3.0, 1e30, -1e30, 5.0, 20.0, -20.0, 0.1])
    b = np.array([1.0, np.inf, -np.inf, 0.0, 2.0, 1.5, np.nan, 1.0, -1e30, np.inf, 3.0, -19.5, 0.1000001])
    x = nt.tensor(a.astype(dtype), names=("i",)).requires_grad_()
    y = nt.tensor(b.astype(dtype), names=("i",)).requires_grad_()
    g = nt.tensor(np.linspace(1, 2, len(a)).astype(dtype), names=("i",))
    cases = {"nan_to_num": lambda x, y: nt.nan_to_num(x) * y,  # the dtype's largest finite values for infinities
             "nan_to_num with its numbers": lambda x, y: nt.nan_to_num(x, 1.5, 7.0, -math.inf) * y,
             "logaddexp": lambda x, y: nt.logaddexp(x, y) * 2.0}  # equal operands and infinities as NumPy's
    tol = 3e-7 if dtype == "float32" else 5e-16
    for name, fn in cases.items():
        with np.errstate(all="ignore"):
            cf, got = compiled_quietly(fn, x, y)
            want = fn(x, y)
            grads, expected = nt.grad(got, (x, y), g), nt.grad(want, (x, y), g)
        assert [n.op.name for n in program(cf).graph.nodes] == [f"fused[{name.split()[0]}+mul]"]
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=tol, atol=0)  # NaN, infinities
        for a_, e in zip(grads, expected):
            np.testing.assert_allclose(a_.numpy(), e.numpy(), rtol=4 * tol, atol=0)
    small = rnd(7, names=("i",), dtype="float64").requires_grad_()
    assert gradcheck(nt.compile(lambda x, y: nt.logaddexp(x * 2.0, y)), small, rnd(7, names=("i",), seed=1, dtype="float64"))


def test_log2_and_exp2_of_cpu_kernels_are_within_an_ulp_and_exact_at_powers_of_two():
    numba = pytest.importorskip("numba")
    from namedtensor.backends import numba_math

    def kernel(fn):
        @numba.njit(error_model="numpy", fastmath={"contract"})  # as the generated kernels are compiled
        def each(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
        return each

    rng = np.random.default_rng(0)
    for dtype, log2, exp2, reach in (("float64", numba_math.log2, numba_math.exp2, 700),
                                     ("float32", numba_math.log2_32, numba_math.exp2_32, 87)):
        tiny = np.finfo(dtype).tiny
        cases = ((log2, np.log2, np.concatenate([np.exp(rng.uniform(-reach, reach, 100000)), rng.uniform(0.5, 2, 100000),
                                                 1 + rng.uniform(-1e-3, 1e-3, 20000)])),
                 (exp2, np.exp2, np.concatenate([rng.uniform(-1.4 * reach, 1.4 * reach, 100000), rng.uniform(-1, 1, 100000)])))
        for fn, exact, x in cases:
            x = x.astype(dtype)
            got = np.empty_like(x)
            kernel(fn)(x, got)
            want = exact(x.astype(np.longdouble))
            normal = np.abs(want.astype(dtype)) >= tiny
            ulps = np.abs(got[normal] - want[normal]) / np.spacing(np.abs(want[normal]).astype(dtype))
            assert ulps.max() <= 1.05, (dtype, exact.__name__)
        # powers of two exactly, and NaN, infinities, zeros and the subnormals as NumPy's
        k = np.arange(-149 if dtype == "float32" else -1074, 128 if dtype == "float32" else 1024).astype(dtype)
        powers = np.exp2(k.astype(np.float64)).astype(dtype)
        out = np.empty_like(k)
        kernel(log2)(powers, out)
        np.testing.assert_array_equal(out, k)
        kernel(exp2)(k, out)
        np.testing.assert_array_equal(out, powers)
        special = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1.0, 0.5], dtype)
        with np.errstate(all="ignore"):
            for fn, exact in ((log2, np.log2), (exp2, np.exp2)):
                kernel(fn)(special, out[:8])
                np.testing.assert_array_equal(out[:8], exact(special))
        edges = np.array([-1075.0, -1074.5, 1023.99, 1024.0] if dtype == "float64" else [-150.0, -149.5, 127.99, 128.0], dtype)
        kernel(exp2)(edges, out[:4])
        np.testing.assert_array_equal(out[:4], np.exp2(edges.astype(np.longdouble)).astype(dtype))


def test_a_chains_work_weighs_each_math_call_as_twenty_additions():
    pytest.importorskip("numba")
    x = rnd(6, 300, names=("a", "b"), dtype="float64").requires_grad_()
    for fn, work in ((lambda x: nt.where(x > 0, x, 1.5 * x.expm1()), 1 + 20 + 1 + 1),  # ELU: split from 730k elements
                     (lambda x: (x + 1.0) * x - 2.0, 3), (lambda x: (x.exp() + 1.0).log() ** 1.5, 61), (lambda x: x ** 2 + x, 2)):
        cf, _ = compiled_quietly(fn, x)
        (node,) = program(cf).graph.nodes
        assert formulas.work(node.op.chain) == work


#: short chains that together use every formula of formulas.SCALAR (one long chain would be one kernel
#: that takes Numba a minute to compile)
_EVERY_FORMULA = [
    lambda x: ((x + 0.5) - 0.25) * 1.5 / 1.25,
    lambda x: -(x.abs().square().reciprocal().exp().expm1().log().log1p().sqrt().rsqrt()),
    lambda x: x.sin() + x.cos() + x.tanh() + x.sigmoid(),
    lambda x: F.silu(x) + nt.softplus(x) + x.erf(),
    lambda x: F.gelu(x) + F.gelu(x, approximate="tanh") + x.relu(),
    lambda x: nt.maximum(x, 0.3) + nt.minimum(x, 0.6) + x.clip(-5.0, 5.0) ** 1.7,
    lambda x: nt.where(x == 0.2, 0.0, x) + nt.where(x != 0.4, x, 1.0) + nt.where(x < 0.5, x, 2.0),
    lambda x: nt.where(x <= 0.5, x, 3.0) + nt.where(x > 0.3, x, 4.0) + nt.where(x >= 0.3, x, 5.0),
    lambda x: (x * 3.0).floor() + (x * 3.0).ceil() + (x * 5.0).round() + nt.trunc(x * 7.0) + nt.frac(x * 7.0) * x
    + (x - 0.5).sign() + nt.where(nt.isnan(x), 0.0, x) + nt.where(nt.isinf(x), 0.0, x) + nt.where(nt.isfinite(x), x, 1.0),
    lambda x: nt.nan_to_num(x.log() * 2.0) + nt.logaddexp(x, x * 0.5) + x.log2() + nt.exp2(x * 3.0),
    lambda x: nt.where((nt.logical_and(x > 0.3, x - 0.5) & (x < 0.9) | ~nt.logical_or(x < 0.2, x * 0.0))
                       ^ nt.logical_xor(x > 0.6, nt.logical_not(x - 0.4)), nt.copysign(x, x - 0.5), x * 2.0),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_formula_fuses_on_the_cpu(dtype, monkeypatch):
    pytest.importorskip("numba")
    # every formula has a kernel: float32's x ** 1.7 (numba_math.pow32) is used where NumPy's power has no
    # SIMD loop (test_float32_powers_by_other_numbers_stay_numpys_where_it_has_a_simd_loop)
    monkeypatch.setattr(numpy_kernels, "simd_loop", lambda ufunc, types: False)
    x = nt.tensor(np.random.default_rng(0).uniform(0.1, 0.9, (4, 50)), names=("a", "b"), dtype=dtype).requires_grad_()
    tol = 1e-5 if dtype == "float32" else 1e-13
    used = set()
    for fn in _EVERY_FORMULA:
        cf, got = compiled_quietly(fn, x)
        (node,) = program(cf).graph.nodes  # one fused node: every formula has its kernel
        used |= {m.op.__name__ for m in node.op.chain.members}
        assert_close(got, fn(x), rtol=tol, atol=tol)
        assert_close(nt.grad(got.sum(), x)[0], nt.grad(fn(x).sum(), x)[0], rtol=10 * tol, atol=10 * tol)
    assert used == set(formulas.SCALAR)


def test_a_long_chain_is_cut_into_kernels_of_a_few_math_calls_on_the_cpu(monkeypatch):
    pytest.importorskip("numba")
    # each formula that calls numba_math is inlined into its kernel, whose compile time grows faster than
    # the chain: on the CPU a run takes at most numba_codegen.MATH_CALLS of them (3 here, to compile fast)
    monkeypatch.setattr(numba_codegen, "MATH_CALLS", 3)
    x = rnd(4, 50, names=("a", "b"), dtype="float64").requires_grad_()

    def fn(x):
        y = x
        for k in range(7):
            y = (y * 0.9).tanh() + 0.1 if k % 2 else (y * 0.5).sin() * 2.0  # math calls among cheap ops
        return y ** 2.0  # a product: no call

    cf, got = compiled_quietly(fn, x)
    nodes = program(cf).graph.nodes
    calls = [sum(formulas.calls_math(m.op.__name__, m.args) for m in n.op.chain.members) for n in nodes]
    assert calls == [3, 3, 1] and all(n.op.name.startswith("fused[") for n in nodes)
    assert_close(got, fn(x), rtol=1e-14, atol=1e-14)
    assert_close(nt.grad(got.sum(), x)[0], nt.grad(fn(x).sum(), x)[0], rtol=1e-13, atol=1e-13)
    # the GPU's kernels are C, which NVRTC compiles fast: one chain there
    assert len(cuda_chains(fn, x)) == 1


# ----------------------------------------------------------------------------- eager fallback


FALLBACKS = {
    "item": (lambda x: x * x.sum().item(), "after sum: the next step needs values"),
    "control flow": (lambda x: x * 2 if bool((x > 0).all()) else x, "the next step needs values (item()"),
    "boolean mask": (lambda x: x[x > 0], "after gt: the next step needs values"),
    "nt.grad": (lambda x: nt.grad(x.exp().sum(), x)[0], "backward: gradients returned to the function"),
    "in-place": (lambda x: x.relu_() + 1, "relu_: writes in place into a tensor ('a',) that is an argument"),
    "sampler": (lambda x: (x * 2).uniform_() + x, "uniform_: writes in place"),
    "random": (lambda x: x + nt.randn(3, names=("a",)), "random numbers: were drawn while tracing"),
}


@pytest.mark.parametrize("case", FALLBACKS)
def test_what_cannot_be_traced_runs_eagerly_with_a_warning_naming_it(case):
    fn, fragment = FALLBACKS[case]
    x = rnd(3, names=("a",)).abs().requires_grad_(case == "nt.grad")
    cf = nt.compile(fn)
    with pytest.warns(UserWarning, match="runs eagerly for this signature") as record:
        nt.manual_seed(0)
        got = cf(x)
    assert fragment in str(record[0].message)
    nt.manual_seed(0)
    want = fn(x.detach().requires_grad_(case == "nt.grad"))
    if want is not None:
        assert_close(got, want)
    assert list(cf._cache.values()) == [None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per signature
        cf(x)
    with pytest.raises(RuntimeError, match=r"fullgraph=True.*" + re.escape(fragment.split(":")[0])):
        nt.compile(fn, fullgraph=True)(x)


def test_in_place_ops_on_values_made_inside_the_function_compile_as_their_results():
    pytest.importorskip("numba")

    def fn(a, b):
        x = a * 2
        x += b
        x.relu_()
        x.mul_(3)
        x.clamp_(max=2.0)
        x.masked_fill_(b > 1.0, 0.5)
        F.relu(x, inplace=True)
        x.exp_()
        y = x.sum()  # read before the next edit: it keeps the value it read
        x -= 1
        return x * y

    a = rnd(4, 5, names=("p", "q"), dtype="float64").requires_grad_()
    b = rnd(5, names=("q",), seed=1, dtype="float64")
    cf, got = compiled_quietly(fn, a, b)
    nodes = [n.op.name for n in program(cf).graph.nodes]
    assert "fused[mul+add+relu+mul+clip]" in nodes  # the edits fuse as the ops they are
    want = fn(a, b)
    assert got.names == want.names
    assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert_close(nt.grad(got.sum(), [a])[0], nt.grad(want.sum(), [a])[0], rtol=1e-12, atol=1e-12)
    assert gradcheck(cf, a, b)


def test_writes_into_parts_of_a_tensor_made_inside_the_function_compile_as_values():
    def fn(x, v, i):
        y = x * 2
        y[0] = 1.0
        y[1:3] = v
        y[{"a": 4}] = v * 3
        y[i] = -1.0  # an index tensor: read at every call
        z = x + 1
        z.zero_()
        w = x - 1
        w.copy_(v)
        u = x * 3
        u.fill_(2.0)
        return y + z + w + u

    x = rnd(6, 4, names=("a", "b"), dtype="float64").requires_grad_()
    v = rnd(4, names=("b",), seed=1, dtype="float64").requires_grad_()
    cf, got = compiled_quietly(fn, x, v, nt.tensor([5], names=("k",)))
    assert [n.op.name for n in program(cf).graph.nodes].count("setitem") == 7
    for i in ([5], [2, 5]):
        index = nt.tensor(i, names=("k",))
        got, want = cf(x, v, index), fn(x, v, index)
        assert_close(got, want, rtol=0, atol=0)
        for a, e in zip(nt.grad(got.sum(), [x, v]), nt.grad(want.sum(), [x, v])):
            assert_close(a, e, rtol=1e-12, atol=1e-12)
    assert gradcheck(cf, x, v, nt.tensor([5], names=("k",)))


def _setitems(cf) -> list:
    return [n for n in program(cf).graph.nodes if n.op.name == "setitem"]


@pytest.mark.parametrize("start", ["zeros_like", "zeros", "full", "tensor", "an op's result"])
def test_a_tensor_built_by_writes_into_its_rows_is_copied_at_most_once(start):
    make = {"zeros_like": lambda x: nt.zeros_like(x), "zeros": lambda x: nt.zeros(x.shape, names=x.names, dtype=x.dtype),
            "full": lambda x: nt.full(x.shape, 0.5, names=x.names, dtype=x.dtype),
            "tensor": lambda x: nt.tensor(np.linspace(0, 1, x.numel()).reshape(x.shape), names=x.names),
            # an op's fresh result, which the first write takes as its own too
            "an op's result": lambda x: x.to(x.dtype) * 1.0}[start]

    def fn(x, w):
        out = make(x)
        for i in range(x.shape[0] - 1):  # the last row keeps the starting value
            out[i] = x[i] * w + i
        return out * w

    x = rnd(5, 3, names=("r", "c"), dtype="float64").requires_grad_()
    w = rnd(3, names=("c",), seed=1, dtype="float64").requires_grad_()
    cf, got = compiled_quietly(fn, x, w)
    writes = _setitems(cf)
    op_made = start == "an op's result"  # a factory's tensor is the graph's constant: copied
    assert [n.params.get("in_place", False) for n in writes] == [op_made, True, True, True]
    assert program(cf).report["writes in place"] == 3 + op_made
    for seed in (2, 3):  # the start is the graph's constant: the writes of one call leave the next one's alone
        x = rnd(5, 3, names=("r", "c"), seed=seed, dtype="float64").requires_grad_()
        got, want = cf(x, w), fn(x, w)
        assert got.names == want.names
        # x[i] * w + i is one multiply-add in the fused kernel: one rounding where eagerly there are two
        assert_close(got, want, rtol=1e-14, atol=1e-15)
        for a, e in zip(nt.grad(got.sum(), [x, w]), nt.grad(want.sum(), [x, w])):
            assert_close(a, e, rtol=1e-12, atol=1e-12)
    assert gradcheck(cf, x, w)


def test_a_table_built_from_factories_and_writes_folds_into_one_constant():
    def with_positions(x):  # sinusoidal position encodings, made at every call as in a module's forward
        seq, dim = x.shape
        pos = nt.arange(seq, dtype=nt.float32, names=("seq",)).unsqueeze(-1)
        div = (nt.arange(0, dim, 2, dtype=nt.float32, names=("half",)) * (-math.log(10000.0) / dim)).exp()
        pe = nt.zeros(seq, dim, names=("seq", "embed"))
        pe[:, 0::2] = (pos * div.rename(None).unsqueeze(0)).sin().rename(None)
        pe[:, 1::2] = (pos * div.rename(None).unsqueeze(0)).cos().rename(None)
        return x + pe

    x = rnd(16, 8, names=("seq", "embed"))
    cf, got = compiled_quietly(with_positions, x)
    assert [n.op.name for n in program(cf).graph.nodes] == ["add"]  # the table is a constant of the graph
    assert_close(got, with_positions(x), rtol=0, atol=0)


def test_a_write_into_an_ops_own_result_copies_only_what_a_backward_keeps():
    def fn(x):
        y = x * 2  # mul keeps its inputs, not its result: written in place
        y[0] = 0.5
        z = x.exp()  # exp keeps its result for its backward: copied before the write
        z[1] = 0.25
        s = x.sum()  # a 0-dim result, stored as a NumPy scalar: copied into an array
        s[()] = 3.0
        return y * z + s

    x = rnd(3, 2, names=("r", "c"), dtype="float64").requires_grad_()
    before = x.detach().numpy().copy()
    cf, got = compiled_quietly(fn, x, fuse=False)
    assert [n.params.get("in_place", False) for n in _setitems(cf)] == [True, False, True]
    want = fn(x.detach())
    assert_close(got, want, rtol=0, atol=0)
    assert np.array_equal(x.detach().numpy(), before)  # the writes went into the ops' arrays, not x's
    assert gradcheck(cf, x)  # eagerly exp's backward would refuse its edited result; the graph's is the function's


def _edits_a_view_eagerly(fn):
    """``fn`` of a (4, 3) float64 tensor, compiled: it runs eagerly, saying that its edit may be seen by a
    view, with eager's values; returns them."""
    x = rnd(4, 3, names=("r", "c"), dtype="float64")
    want = fn(x)
    with pytest.warns(UserWarning, match="may share its data with a view"):
        got = nt.compile(fn)(x)
    for g, e in zip(got, want):
        assert_close(g, e, rtol=0, atol=0)
    return want


@pytest.mark.parametrize("cut", ["split", "chunk", "unbind"])
@pytest.mark.parametrize("edit", ["the base", "a piece"])
def test_an_edit_after_split_or_unbind_shows_in_the_views_as_eagerly(cut, edit):
    # the pieces are views of the base: eagerly an edit of either shows in the other
    pieces = {"split": lambda y: y.split(2, dim="r"), "chunk": lambda y: y.chunk(2, dim="r"),
              "unbind": lambda y: y.unbind("r")}[cut]

    def fn(x):
        y = x * 2
        parts = pieces(y)
        (y if edit == "the base" else parts[0])[0] = 100.0
        return parts[0] * 1, y * 1

    want = _edits_a_view_eagerly(fn)
    assert want[0].numpy().max() == 100.0


_PLACES = {"list": [None], "dict": {"w": None}, "object": types.SimpleNamespace(inner={"w": None})}


def _put(place: str, w) -> None:
    if place == "list":
        _PLACES["list"][0] = w
    elif place == "dict":
        _PLACES["dict"]["w"] = w
    else:
        _PLACES["object"].inner["w"] = w


def _read_from(place: str):
    return {"list": lambda: _PLACES["list"][0], "dict": lambda: _PLACES["dict"]["w"],
            "object": lambda: _PLACES["object"].inner["w"]}[place]()


@pytest.mark.parametrize("place", ["list", "dict", "object"])
def test_a_tensor_read_from_a_container_is_read_again_after_it_is_replaced(place):
    # the graph held the tensor object it read; another put in its place must be read, as eagerly
    places = _PLACES  # a global the function reads: the tensor sits one to three steps inside it

    def fn(x):
        return x * (places["list"][0] if place == "list" else places["dict"]["w"] if place == "dict"
                    else places["object"].inner["w"])

    _put(place, rnd(3, names=("a",), dtype="float64"))
    x = rnd(3, names=("a",), seed=1, dtype="float64")
    cf, first = compiled_quietly(fn, x)
    assert_close(first, fn(x), rtol=0, atol=0)
    _put(place, rnd(3, names=("a",), seed=2, dtype="float64"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cf(x)
    assert_close(got, x * _read_from(place), rtol=0, atol=0)
    assert len(cf._cache) == 1  # the same signature, traced again


_DEEP = types.SimpleNamespace(a={"b": [types.SimpleNamespace(w=None)]})
_HELPER_W = None
_HELPER_SCALE = 2.0
_CALLS = 0


def _helper(x):
    return x * _HELPER_W * _HELPER_SCALE


def _other_helper(x):
    return x - _HELPER_W


def _counting_helper(x):
    global _CALLS
    _CALLS += 1
    return x * 2


class _Scaled(nn.Module):
    """A user module whose forward reads a global, a plain tensor attribute and a dict attribute."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear("a", "a", 3, 3, dtype=nt.float64)
        self.w = rnd(3, names=("a",), seed=20, dtype="float64")
        self.table = {"w": rnd(3, names=("a",), seed=21, dtype="float64")}

    def forward(self, x):
        return self._tail(self.lin(x) * self.w) * self.table["w"]

    def _tail(self, y):
        return _helper(y)


class _Holder:
    pass


def _same_after(cf, fn, x, edit, *extra):
    """``cf`` agrees with ``fn`` before and after ``edit()``, with no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(cf(x, *extra), fn(x, *extra), rtol=0, atol=0)
        edit()
        assert_close(cf(x, *extra), fn(x, *extra), rtol=0, atol=0)


def test_tensors_and_numbers_read_through_helpers_modules_and_deep_containers_are_read_again():
    # each place below was read at trace time and replayed after a change until the graph's reads of
    # the outside followed the user code it reaches (guards.reach) and looked deeper (guards.locate)
    global _HELPER_W, _HELPER_SCALE
    x = rnd(3, names=("a",), dtype="float64")
    _HELPER_W = rnd(3, names=("a",), seed=1, dtype="float64")
    _DEEP.a["b"][0].w = rnd(3, names=("a",), seed=2, dtype="float64")
    deep = lambda x: x * _DEEP.a["b"][0].w  # four steps from the global
    _same_after(nt.compile(deep), deep, x, lambda: setattr(_DEEP.a["b"][0], "w", rnd(3, names=("a",), seed=3,
                                                                                          dtype="float64")))
    through = lambda x: _helper(x) + 1  # the helper's global tensor and number, not the function's
    cf = nt.compile(through)
    _same_after(cf, through, x, lambda: globals().update(_HELPER_W=rnd(3, names=("a",), seed=4, dtype="float64")))
    _same_after(cf, through, x, lambda: globals().update(_HELPER_SCALE=5.0))

    model = _Scaled()
    cm = nt.compile(model)
    with nt.no_grad():
        _same_after(cm, model, x, lambda: setattr(model, "w", rnd(3, names=("a",), seed=5, dtype="float64")))
        _same_after(cm, model, x, lambda: model.table.update(w=rnd(3, names=("a",), seed=6, dtype="float64")))
        _same_after(cm, model, x, lambda: globals().update(_HELPER_SCALE=7.0))  # read by a method's helper
        bound = nt.compile(model.forward)
        _same_after(bound, model.forward, x, lambda: setattr(model, "w", rnd(3, names=("a",), seed=7,
                                                                                 dtype="float64")))

    holder = _Holder()  # hashed by identity: part of the signature as itself
    holder.w = rnd(3, names=("a",), seed=8, dtype="float64")
    by_argument = lambda x, h: x * h.w  # an object argument, the same object at every call
    _same_after(nt.compile(by_argument), by_argument, x,
                lambda: setattr(holder, "w", rnd(3, names=("a",), seed=9, dtype="float64")), holder)

    def by_default(x, d={"w": rnd(3, names=("a",), seed=10, dtype="float64")}):
        return x * d["w"]

    _same_after(nt.compile(by_default), by_default, x,
                lambda: by_default.__defaults__[0].update(w=rnd(3, names=("a",), seed=11, dtype="float64")))
    assert len(cf._cache) == 3 and None not in cf._cache.values()  # a signature per change, each compiled


_ACTS = {"act": None}
_PARTIAL_SCALE = 2.0


def _scaled_by(x, k):
    return x * k * _PARTIAL_SCALE


def test_functions_kept_in_containers_and_partials_are_followed():
    # a partial's function reads a global; a function kept in a dict is swapped, or reads a global
    global _PARTIAL_SCALE
    x = rnd(3, names=("a",), dtype="float64")
    helper = functools.partial(_scaled_by, k=3.0)
    through_partial = lambda x: helper(x) * 2
    _same_after(nt.compile(through_partial), through_partial, x, lambda: globals().update(_PARTIAL_SCALE=5.0))
    _ACTS["act"] = lambda x: x * 3.0
    through_dict = lambda x: _ACTS["act"](x) * 2
    cf = nt.compile(through_dict)
    _same_after(cf, through_dict, x, lambda: _ACTS.update(act=lambda x: x - 1.0))
    _ACTS["act"] = lambda x: x * _PARTIAL_SCALE
    _same_after(cf, through_dict, x, lambda: globals().update(_PARTIAL_SCALE=7.0))


def test_a_helper_rebound_to_another_function_traces_again():
    global _helper
    x = rnd(3, names=("a",), dtype="float64")
    globals().update(_HELPER_W=rnd(3, names=("a",), seed=1, dtype="float64"), _HELPER_SCALE=2.0)
    fn = lambda x: _helper(x) * 3
    was = _helper
    try:
        _same_after(nt.compile(fn), fn, x, lambda: globals().update(_helper=_other_helper))
    finally:
        _helper = was


def test_a_helper_that_rebinds_a_global_runs_eagerly_and_once_per_call():
    fn = lambda x: _counting_helper(x) + 1
    x = rnd(3, names=("a",), dtype="float64")
    cf = nt.compile(fn)
    before = _CALLS
    with pytest.warns(UserWarning, match=r"runs eagerly from now on: .*rebinds a global"):
        assert_close(cf(x), x * 2 + 1)
    assert_close(cf(x), x * 2 + 1)
    assert _CALLS == before + 2  # the dry run's increment was put back


_CONFIG = {"model": {"scale": 2.0}, "name": "a"}


class _WithConfig(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = {"p": 2.0}

    def forward(self, x):
        return x * self.cfg["p"]


def test_numbers_in_configs_are_part_of_the_signature():
    # a number in a global dict, a namespace in a closure, a module's dict attribute, an argument's
    # attribute: each change is a new signature (traced once, then found again), as a global number is
    import argparse

    x = rnd(3, names=("a",), dtype="float64")
    args = argparse.Namespace(scale=2.0)
    holder = _Holder()
    holder.scale = 2.0
    model = _WithConfig()
    cases = [
        (lambda x: x * _CONFIG["model"]["scale"], (), lambda v: _CONFIG["model"].update(scale=v)),
        (lambda x: x * args.scale, (), lambda v: setattr(args, "scale", v)),
        (model, (), lambda v: model.cfg.update(p=v)),
        (lambda x, h: x * h.scale, (holder,), lambda v: setattr(holder, "scale", v)),
    ]
    for fn, extra, put in cases:
        put(2.0)
        cf = nt.compile(fn)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for v in (2.0, 3.0, 2.0, 3.0):
                put(v)
                assert_close(cf(x, *extra), x * v, rtol=0, atol=0)
        assert len(cf._cache) == 2 and None not in cf._cache.values()  # 2.0 and 3.0, each traced once


_LOSSES = []


class _CompiledMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear("x", "y", 3, 3, dtype=nt.float64)
        self.scale = 2.0
        self.drop = nn.Dropout(0.5)

    @nt.compile
    def forward(self, x):
        return self.drop(self.lin(x)) * self._scale()

    def _scale(self):
        return self.scale * _HELPER_SCALE

    def log(self, loss):
        _LOSSES.append(loss)  # a method forward does not call: its list is no part of the signature


def test_a_method_compiled_with_the_decorator_is_bound_and_guards_its_module():
    # the instance is an argument of each call, held by its state_key: settings, weights, sub-modules,
    # training flags; a module passed as an argument likewise
    global _HELPER_SCALE
    _HELPER_SCALE = 1.0
    m = _CompiledMethod().eval()
    x = rnd(4, 3, names=("b", "x"), dtype="float64")

    def eager():
        return m.drop(m.lin(x)) * (m.scale * _HELPER_SCALE)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(m(x), eager(), rtol=0, atol=0)
        m.scale = 3.0
        assert_close(m(x), eager(), rtol=0, atol=0)
        _HELPER_SCALE = 5.0  # read by a method the compiled one calls
        assert_close(m(x), eager(), rtol=0, atol=0)
        compiled = _CompiledMethod.__dict__["forward"]
        traced = len(compiled._cache)
        for step in range(3):
            m.log(float(step))
            assert_close(m(x), eager(), rtol=0, atol=0)
        assert len(compiled._cache) == traced
        m.lin.weight = nn.Parameter(rnd(3, 3, names=("y", "x"), seed=1, dtype="float64"))
        assert_close(m(x), eager(), rtol=0, atol=0)
        m.lin = nn.Linear("x", "y", 3, 3, dtype=nt.float64)
        assert_close(m(x), eager(), rtol=0, atol=0)
        m.train()
        nt.manual_seed(2)
        got = m(x)
        nt.manual_seed(2)
        assert_close(got, eager(), rtol=0, atol=0)
        assert (got.detach().numpy() == 0).any()  # dropout's zeros: traced again in training mode
    assert "argument 0: the _CompiledMethod module's training flags" in "; ".join(capture_key_parts(compiled))
    run = nt.compile(lambda model, x: model(x))
    lin = nn.Linear("x", "y", 3, 3, dtype=nt.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(run(lin, x), lin(x), rtol=0, atol=0)
        lin.weight = nn.Parameter(rnd(3, 3, names=("y", "x"), seed=3, dtype="float64"))
        assert_close(run(lin, x), lin(x), rtol=0, atol=0)


_UNREACHED = {"a": {"b": {"c": None}}}


def test_a_tensor_found_nowhere_is_said_once():
    # a tensor in the closure of a function kept three containers deep: reach follows functions two deep,
    # locate looks into no function
    w = rnd(3, names=("a",), seed=1, dtype="float64")
    _UNREACHED["a"]["b"]["c"] = lambda: w
    fn = lambda x: x * _UNREACHED["a"]["b"]["c"]()
    cf = nt.compile(fn)
    x = rnd(3, names=("a",), dtype="float64")
    with pytest.warns(UserWarning, match=r"reads 1 tensor\(s\) \(\('a',\) \(3,\)\) that were found neither in "
                                         r"its arguments nor within 8 steps .*another tensor put in their place "
                                         r"is not seen"):
        assert_close(cf(x), fn(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(cf(x * 2), fn(x * 2))  # the same signature: no trace, no second warning


def test_a_module_read_from_a_global_is_guarded_as_a_compiled_one():
    # its training flag and its parameters: model.train() and a replaced weight reach the graph
    holder = {"model": nn.Sequential(nn.Linear("x", "y", 3, 3), nn.Dropout(0.5)), "inner": nn.Linear("x", "y", 3, 3)}
    model = holder["model"]

    def fn(x):
        return model(x) + holder["inner"](x)

    x = rnd(4, 3, names=("b", "x"))
    model.eval()
    cf, got = compiled_quietly(fn, x)
    assert_close(got, fn(x))
    model.train()
    nt.manual_seed(1)
    got = cf(x)
    nt.manual_seed(1)
    want = fn(x)
    assert_close(got, want)
    assert (got.detach().numpy() == holder["inner"](x).detach().numpy()).any()  # dropout's zeros: trained
    model.eval()
    model[0].weight = nn.Parameter(rnd(3, 3, names=("y", "x"), seed=3))
    holder["inner"].weight = nn.Parameter(rnd(3, 3, names=("y", "x"), seed=4))
    assert_close(cf(x), fn(x))


def test_a_module_in_a_container_is_guarded_by_its_state():
    # a model in a dict: its training flag and its (nested) weights, as for a module held directly
    models = {"net": nn.Sequential(nn.Linear("x", "y", 3, 3), nn.Dropout(0.5))}

    def fn(x):
        return models["net"](x)

    x = rnd(4, 3, names=("b", "x"))
    models["net"].eval()
    cf, got = compiled_quietly(fn, x)
    assert_close(got, fn(x))
    models["net"].train()
    nt.manual_seed(1)
    got = cf(x)
    nt.manual_seed(1)
    assert_close(got, fn(x))
    assert (got.detach().numpy() == 0).any()  # dropout's zeros: the graph traced again in training mode
    models["net"].eval()
    models["net"][0].weight = nn.Parameter(rnd(3, 3, names=("y", "x"), seed=3))
    assert_close(cf(x), fn(x))
    models["net"] = nn.Sequential(nn.Linear("x", "y", 3, 3), nn.Dropout(0.5)).eval()  # another model there
    assert_close(cf(x), fn(x))


class _WithCompiledParts(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nt.compile(nn.Linear("x", "h", 3, 4))
        self.norm = nt.compile(nn.LayerNorm("h", 4))
        self.stack = nn.Sequential(nt.compile(nn.Linear("h", "y", 4, 2)), nn.Dropout(0.5))

    def forward(self, x):
        return self.stack(self.norm(self.fc(x)).relu())


def test_a_compiled_module_registers_as_the_module_it_compiled():
    model = _WithCompiledParts()
    keys = ["fc.weight", "fc.bias", "norm.weight", "norm.bias", "stack.0.weight", "stack.0.bias"]
    assert list(model.state_dict()) == keys  # no key of the compiled object's own
    assert [n for n, _ in model.named_parameters()] == keys
    assert [n for n, _ in model.named_modules()] == ["", "fc", "norm", "stack", "stack.0", "stack.1"]
    assert repr(model).splitlines()[1] == "  (fc): nt.compile(Linear({'x': 3} -> {'h': 4}, bias=True))"
    model.eval()
    assert not any(m.training for m in model.modules()) and not model.fc.training
    x = rnd(5, 3, names=("b", "x"))
    want = _WithCompiledParts.forward(model, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(model(x), want)
    assert all(len(c._cache) == 1 for c in (model.fc, model.norm, model.stack[0]))  # called compiled
    # an optimizer over the parent's parameters trains the compiled parts
    before = model.fc.weight.detach().numpy().copy()
    opt = nt.optim.SGD(model.parameters(), lr=0.1)
    model(x).sum().backward()
    opt.step()
    assert not np.allclose(model.fc.weight.detach().numpy(), before)
    # a state dict round trip, and a copy with parameters of its own that is compiled too
    other = _WithCompiledParts()
    other.load_state_dict(model.state_dict())
    copied = copy.deepcopy(model)
    assert isinstance(copied.fc, CompiledFunction) and copied.fc.weight is not model.fc.weight
    for m in (other, copied):
        assert_close(m.eval()(x), model(x))
    # containers take compiled modules wherever they take modules, and a compiled function is refused
    listed = nn.ModuleList([nt.compile(nn.Linear("x", "h", 3, 4))])
    listed.insert(0, nt.compile(nn.Tanh()))
    assert len(list(listed.parameters())) == 2 and isinstance(listed[0], CompiledFunction)
    with pytest.raises(TypeError, match="cannot register a CompiledFunction as sub-module 'f': a Module is expected"):
        model.add_module("f", nt.compile(lambda x: x))


def test_a_compiled_modules_attributes_and_methods_are_the_modules():
    norm = nn.LayerNorm("h", 4)
    compiled = nt.compile(norm)
    x = rnd(3, 4, names=("b", "h"))
    assert_close(compiled(x), norm(x))
    compiled.eps = 0.5  # set on the module, whose state_key the next call reads
    assert norm.eps == 0.5 and compiled.eps == 0.5
    assert_close(compiled(x), F.layer_norm(x, "h", norm.weight, norm.bias, eps=0.5))
    compiled.extra = nn.Linear("h", "h2", 4, 2)
    assert "extra.weight" in norm.state_dict()
    del compiled.extra
    assert not hasattr(norm, "extra")
    # the methods that return the module return the compiled one, as in PyTorch: it stays compiled
    for method in (compiled.train, compiled.eval, compiled.float, lambda: compiled.to(nt.float64), compiled.cpu):
        assert method() is compiled
    assert not norm.training and norm.weight.dtype == nt.float64
    assert repr(compiled) == "nt.compile(LayerNorm({'h': 4}, eps=0.5, elementwise_affine=True))"
    # a compiled whole whose compiled part's setting changes traces again (its state_key reads the part's)
    model = _WithCompiledParts().eval()
    whole = nt.compile(model)
    x = rnd(5, 3, names=("b", "x"))
    whole(x)
    model.norm.eps = 3.0
    assert_close(whole(x), _WithCompiledParts.forward(model, x))


def _doubled_sum(x):
    return (x * 2).sum()


_COMPILED_MODELS = {}


def test_a_compiled_module_passed_as_an_argument_or_kept_in_a_container_is_guarded_as_its_module():
    # its training flag and weights are those of the module it compiled: a change traces again
    x = rnd(4, 6, names=("b", "x"))
    drop = nt.compile(nn.Dropout(0.5)).eval()
    cf = nt.compile(lambda m, x: m(x) * 2)
    assert_close(cf(drop, x), x * 2)
    drop.train()
    assert (cf(drop, x).numpy() == 0).any()  # dropout's zeros: traced again in training mode
    _COMPILED_MODELS["net"] = nt.compile(nn.Linear("x", "y", 6, 3))
    reads = nt.compile(lambda x: _COMPILED_MODELS["net"](x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # found through the dict, not "found nowhere"
        assert_close(reads(x), _COMPILED_MODELS["net"](x))
    _COMPILED_MODELS["net"].weight = nn.Parameter(rnd(3, 6, names=("y", "x"), seed=5))
    assert_close(reads(x), _COMPILED_MODELS["net"](x))


def test_a_compiled_function_or_module_copies_and_pickles_as_what_it_compiled():
    x = rnd(3, 4, names=("b", "h"))
    cf = nt.compile(_doubled_sum, cache_limit=3)
    cf(x)
    for twin in (copy.deepcopy(cf), pickle.loads(pickle.dumps(cf))):
        assert isinstance(twin, CompiledFunction) and twin._fn is _doubled_sum and twin._cache_limit == 3
        assert not twin._cache  # traced afresh
        assert_close(twin(x), cf(x))
    model = nt.compile(nn.Linear("h", "o", 4, 2))
    model(x)
    for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert twin.weight is not model.weight
        assert_close(twin(x), model(x))

@pytest.mark.parametrize("take", ["detach", "data"])
@pytest.mark.parametrize("edit", ["the source", "the new tensor"])
def test_an_edit_after_detach_or_data_shows_in_both_as_eagerly(take, edit):
    # detach() and .data share the array: eagerly an edit of either shows in the other, also where the new
    # tensor is read only after the edit
    def fn(x):
        y = x * 2
        d = y.detach() if take == "detach" else y.data
        (y if edit == "the source" else d).add_(1.0)
        return d * 1, y * 1

    want = _edits_a_view_eagerly(fn)
    assert_close(want[0], want[1], rtol=0, atol=0)


@pytest.mark.parametrize("make", ["diagonal", "unfold", "real"])
def test_a_write_into_a_read_only_result_raises_as_eagerly(make):
    # eagerly the write raises (these copies stand for PyTorch's views); a graph would have written a copy
    take = {"diagonal": lambda y: y.diagonal(),
            "unfold": lambda y: y.unfold("c", 2, 1),
            "real": lambda y: (y * (1 + 1j)).real}[make]

    def fn(x):
        y = take(x * 2)
        y[0] = 5.0
        return y

    x = rnd(3, 3, names=("r", "c"), dtype="float64")
    with pytest.raises(ValueError, match="read-only view") as eager:
        fn(x)
    cf = nt.compile(fn)
    with pytest.warns(UserWarning, match="read-only"), pytest.raises(ValueError, match="read-only view") as got:
        cf(x)
    assert str(got.value) == str(eager.value)


def test_a_write_copies_where_the_value_before_it_is_read_again():
    def fn(x):
        y = nt.zeros_like(x)
        y[0] = x[0]
        seen = y * 1  # reads y between the writes
        y[1] = x[1]
        y[2] = x[2]
        return y, seen

    x = rnd(4, 3, names=("r", "c"))
    cf, (got, seen) = compiled_quietly(fn, x)
    assert [n.params.get("in_place", False) for n in _setitems(cf)] == [False, False, True]
    want, want_seen = fn(x)
    assert_close(got, want, rtol=0, atol=0)
    assert_close(seen, want_seen, rtol=0, atol=0)
    assert not seen.numpy()[1:].any()


def test_a_write_into_a_value_the_function_returns_copies_it():
    def fn(x):
        a = x * 2
        a[0] = 1.0
        b = x * 2
        b[0] = 1.0  # the same steps as a's: merged with them, so b's next write reads a's returned value
        b[1] = 3.0
        return a, b

    x = rnd(3, 2, names=("r", "c"))
    cf, (a, b) = compiled_quietly(fn, x)
    assert program(cf).report["subexpressions merged"] == 2
    # a's write goes into x * 2's own array; b's second write reads a, which the function returns
    assert [n.params.get("in_place", False) for n in _setitems(cf)] == [True, False]
    want_a, want_b = fn(x)
    assert_close(a, want_a, rtol=0, atol=0)
    assert_close(b, want_b, rtol=0, atol=0)


def test_a_tensor_made_inside_the_function_that_outlives_the_call_runs_eagerly():
    kept = []

    def fn(x):
        buf = nt.zeros(x.shape, names=x.names)
        kept.append(buf)  # the eager function leaves its writes in this tensor: a graph would not
        buf[0] = x[0]
        return buf * 2

    x = rnd(3, 2, names=("r", "c"))
    cf = nt.compile(fn)
    with pytest.warns(UserWarning, match="made inside the function that something outside it still holds"):
        got = cf(x)
    assert_close(got, fn(x), rtol=0, atol=0)
    assert_close(kept[-1], x.numpy() * np.array([[1], [0], [0]]), rtol=0, atol=0)


def test_values_written_into_a_tensor_the_function_made_are_not_read_at_trace_time():
    def fn(x):
        out = nt.zeros(x.shape, names=x.names)
        out[0] = x[0]
        return out * 2 if bool(out.sum() > 0) else out  # a decision on the written values: eager

    x = rnd(3, 2, names=("r", "c")).abs() + 1
    cf = nt.compile(fn)
    with pytest.warns(UserWarning, match="runs eagerly"):
        got = cf(x)
    assert_close(got, fn(x), rtol=0, atol=0)


def test_flattened_arguments_are_freed_without_a_garbage_collection():
    from namedtensor.compiler.capture import flatten, unflatten

    t = rnd(2, names=("a",))
    alive = weakref.ref(t)
    gc.disable()
    try:
        leaves, tree = flatten(((t, 1), {"k": [t]}))
        rebuilt = unflatten(tree, leaves)
        assert rebuilt == ((t, 1), {"k": [t]})
        del leaves, rebuilt, t
        assert alive() is None  # no reference cycle holds the leaves
    finally:
        gc.enable()


#: in-place steps on the tensor ``a`` a function made (``b`` another, ``x`` the argument), with values kept
#: in a range where every step is smooth; "view" takes a reshape of ``a`` that a later step reads
_EDITS = {
    "add": lambda a, b, x: a.__iadd__(b),
    "scale": lambda a, b, x: a.__imul__(0.5),
    "sub_x": lambda a, b, x: a.sub_(x),
    "tanh": lambda a, b, x: a.tanh_(),
    "exp": lambda a, b, x: a.clamp_(-2.0, 2.0).exp_(),
    "sigmoid": lambda a, b, x: a.sigmoid_(),
    "slice": lambda a, b, x: a.__setitem__((slice(1, 3),), b[1:3] * 2),
    "row": lambda a, b, x: a.__setitem__(0, 0.25),
    "row_x": lambda a, b, x: a.__setitem__(2, x[2] * 3),
    "column": lambda a, b, x: a.__setitem__((slice(None), 1), b[:, 1]),
    "mask": lambda a, b, x: a.masked_fill_(b > 0.5, -0.5),
    "copy": lambda a, b, x: a.copy_(b * x),
    "new_b": None,  # b = a * 1.5 (out of place): later edits of a leave b alone
    "read": None,  # r = a * 1.0, returned: the value a had then, which later writes must leave alone
    "view": None,  # v = a.reshape(...): every later edit of a must show in v, so they run eagerly
    "piece": None,  # p = a.split(2, dim="i")[0]: a view too, whose link is made after the op has run
}


@settings(max_examples=40)
@given(start=st.sampled_from(["an op", "a factory"]), steps=st.lists(st.sampled_from(sorted(_EDITS)), min_size=1,
                                                                    max_size=8))
def test_a_sequence_of_in_place_edits_compiles_to_the_eager_values_and_gradients(start, steps):
    def fn(x):
        a = x * 1.0 if start == "an op" else nt.full((4, 3), 0.5, names=("i", "j"), dtype=nt.float64)
        b, kept = x.exp(), []
        for step in steps:
            if step == "new_b":
                b = a * 1.5
            elif step == "read":
                kept.append(a * 1.0)
            elif step == "view":
                kept.append(a.reshape(4, 3))
            elif step == "piece":
                kept.append(a.split(2, dim="i")[0])
            else:
                _EDITS[step](a, b, x)
        return (a + b.sum() + x.sum(), *kept)  # x.sum(): a gradient even where no write reads x

    x = rnd(4, 3, names=("i", "j"), dtype="float64").requires_grad_()
    want = fn(x)
    cf = nt.compile(fn, fuse=False)  # what the trace makes of the edits (fused kernels: the tests above)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = cf(x)
    first_view = min((steps.index(v) for v in ("view", "piece") if v in steps), default=len(steps))
    viewed_then_edited = any(s not in ("view", "piece", "new_b", "read") for s in steps[first_view:])
    assert bool(caught) == viewed_then_edited  # compiled unless a view would see a later edit
    for g, e in zip(got, want):
        assert g.names == e.names and g.requires_grad == e.requires_grad
        assert_close(g, e, rtol=1e-12, atol=1e-12)
    # the outputs that depend on x (a value read from a factory's tensor before any write of x does not)
    got, want = [g for g in got if g.requires_grad], [e for e in want if e.requires_grad]
    weights = [rnd(*e.shape, names=e.names, seed=k + 5, dtype="float64") for k, e in enumerate(want)]
    try:
        eager_grad = nt.grad(list(want), [x], weights)[0]
    except RuntimeError as e:  # an edit of a value an op saved: eagerly no gradient; the graph's is the function's
        assert "modified in place" in str(e)
        assert viewed_then_edited or gradcheck(cf, x)  # (run eagerly, the compiled function has none either)
    else:
        assert_close(nt.grad(list(got), [x], weights)[0], eager_grad, rtol=1e-12, atol=1e-12)


def test_an_in_place_op_keeps_the_dtype_and_errors_of_the_eager_one():
    x64 = rnd(3, names=("a",), dtype="float64")

    def widen(x):
        y = x * 2
        y += x64  # a float64 result written into float32
        return y

    cf, got = compiled_quietly(widen, rnd(3, names=("a",)))
    assert got.dtype == nt.float32
    assert_close(got, widen(rnd(3, names=("a",))))
    into_int = nt.compile(lambda i: (i * 2).add_(0.5))
    with pytest.raises(TypeError, match="cannot write a float value"):
        into_int(nt.tensor(np.arange(3), names=("a",)))


def _parameter_over_a_factory_tensor(x):
    t = nt.zeros(3, names=("a",))
    p = nn.Parameter(t, requires_grad=False)  # a view of t made by no op: it shares t's version counter
    y = p * x
    t += 1  # shows in p
    return y + p * x


@pytest.mark.parametrize("case", ["argument", "external seen by a view", "parameter", "view after", "view before",
                                  "shared data", "setitem",
                                  "sampler"])
def test_an_in_place_op_that_someone_else_would_see_runs_eagerly(case):
    w = rnd(3, names=("a",), seed=2)
    w_grad = rnd(3, names=("a",), seed=3).requires_grad_()
    fns = {
        "shared data": (_parameter_over_a_factory_tensor, "add_: writes in place into a tensor ('a',) that may share"),
        "argument": (lambda x: x.mul_(2) + 1, "that is an argument of the function"),
        "external seen by a view": (lambda x: (lambda v: (w.add_(1.0), v * x[0:2])[1])(w[0:2]),
                                    "add_: writes in place into a tensor ('a',) from outside the function that may "
                                    "share its data with a view"),
        "parameter": (lambda x: x * w_grad.add_(0.0), "that requires grad (a parameter: write under nt.no_grad())"),
        "view after": (lambda x: (lambda y: (y.reshape(3), y.add_(1))[0])(x * 2), "may share its data with a view"),
        "view before": (lambda x: (lambda y: (y, y.reshape(3).relu_())[0])(x * 2), "may share its data with a view"),
        "setitem": (lambda x: (x.__setitem__(0, 1.0), x * 2)[1], "setitem: writes in place into a tensor ('a',) that is"),
        "sampler": (lambda x: (x * 2).normal_() + x, "normal_: writes in place"),
    }
    fn, fragment = fns[case]
    x = rnd(3, names=("a",))
    if case == "parameter":  # eagerly a leaf that requires grad refuses the write: so does the eager run inside
        with pytest.warns(UserWarning, match="runs eagerly") as record, pytest.raises(RuntimeError, match="add_"):
            nt.compile(fn)(x)
        assert fragment in str(record[0].message)
        return
    nt.manual_seed(0)  # the sampler's: the eager run inside draws the same numbers
    w_before = w.clone()
    want = fn(x.clone())
    with nt.no_grad():
        w.copy_(w_before)
    nt.manual_seed(0)
    with pytest.warns(UserWarning, match="runs eagerly") as record:
        got = nt.compile(fn)(x.clone())
    assert fragment in str(record[0].message)
    assert_close(got, want)  # the eager run, views and writes as they are


def test_a_write_into_an_external_is_written_back_once_per_call():
    # the trace writes nothing into the counter (it stands for the graph's value meanwhile); each call's
    # write-back step copies the new value into it, and the ops after the edit read the new value
    counter = nt.zeros(3, names=("a",))
    cf = nt.compile(lambda x: x * counter.add_(1.0))
    x = rnd(3, names=("a",))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(1, 4):
            assert_close(cf(x), x * n, rtol=0, atol=0)
            assert counter.tolist() == [float(n)] * 3
    assert not counter.requires_grad and counter.grad_fn is None  # the trace gave it its own state back
    assert [n.params["what"] for n in program(cf).graph.nodes if n.effect()] == ["write"]


def _trained_layer():
    layer = nn.Linear("x", "y", 4, 3)
    x = rnd(5, 4, names=("b", "x"))
    layer(x).square().sum().backward()
    return layer, x


def test_a_detached_value_of_parameters_alone_is_read_at_every_call():
    # the dry run computes an op of externals alone for real: its detach() was read as a constant, the
    # dry run's value, at every call (the weight's norm logged after the optimizer's step never moved)
    res = []
    for compiled in (False, True):
        nt.manual_seed(0)
        lin = nn.Linear("x", "y", 4, 2)
        opt = nt.optim.SGD(lin.parameters(), lr=0.1)
        x = rnd(8, 4, names=("b", "x"))

        def step(x):
            loss = lin(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return lin.weight.sum().detach(), lin.bias.data * 2

        run = nt.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res.append([[v for t in run(x) for v in np.ravel(t.tolist())] for _ in range(3)])
    assert res[0][0] != res[0][1]  # the weight moves
    np.testing.assert_allclose(res[1], res[0], rtol=1e-6)


def test_a_training_step_with_batchnorm_and_weight_clipping_compiles_whole():
    # the running statistics and the clipped weight are written back where eager code writes them; the
    # forward after the clipping reads the leaf (its gradient reaches it), the optimizer's step the clipped values
    res = []
    for compiled in (False, True):
        model, step = clipped_batchnorm_step()
        run = nt.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            losses = [run(rnd(8, 4, names=("b", "x"), seed=k)).item() for k in range(4)]
        res.append((losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}))
        if compiled:
            (program,) = run._cache.values()
            steps = [n.params["what"] for n in program.graph.nodes if n.effect()]
            assert steps == ["write", "write", "write", "write", "zero_grad", "backward", "SGD.step"], steps
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-6)
    for key, want in res[0][1].items():
        np.testing.assert_allclose(res[1][1][key], want, rtol=1e-6, atol=1e-7, err_msg=key)


def test_an_optimizers_step_inside_a_compiled_function_runs_at_every_call():
    # a step of the graph: traced as a direct call, the update would happen once (during the dry run)
    layer, _ = _trained_layer()
    opt = nt.optim.AdamW(layer.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step = nt.compile(opt.step, fullgraph=True)
        for _ in range(3):
            before = layer.weight.detach().clone()
            step()
            assert float((layer.weight.detach() - before).abs().max()) > 1e-3
    assert opt.state[layer.weight]["step"] == 3
    assert [n.params["what"] for n in program(step).graph.nodes] == ["AdamW.step"]
    with pytest.warns(UserWarning, match=r"AdamW\.step: takes a closure"):
        nt.compile(lambda: opt.step(lambda: layer(rnd(2, 4, names=("b", "x"))).sum()))()
    assert opt.state[layer.weight]["step"] == 4


def _training(compiled: bool, body):
    """A layer, its AdamW and StepLR, and ``body(model, opt, sched, x, y)`` as a function (compiled or
    not) of the batch: the same start every time."""
    nt.manual_seed(0)
    model = nn.Sequential(nn.Linear("x", "h", 4, 8), nn.GELU(), nn.Linear("h", "y", 8, 2))
    opt = nt.optim.AdamW(model.parameters(), lr=0.05)
    sched = nt.optim.lr_scheduler.StepLR(opt, 1, 0.9)

    def step(x, y):
        return body(model, opt, sched, x, y)

    return model, opt, nt.compile(step, fullgraph=True) if compiled else step


def _mse(model, x, y):
    return ((model(x) - y) ** 2).mean()


def _whole_step(model, opt, sched, x, y):
    opt.zero_grad()
    loss = _mse(model, x, y)
    loss.backward()
    opt.step()
    sched.step()
    return loss.detach()


def _two_forwards(model, opt, sched, x, y):
    # the second forward reads the updated parameters: nothing is merged or moved across the step
    before = _mse(model, x, y)
    model.zero_grad(set_to_none=False)
    before.backward(retain_graph=True)
    opt.step()
    after = _mse(model, x, y)
    return before.detach(), after, _mse(model, x, y).detach()


def _given_gradient(model, opt, sched, x, y):
    out = model(x)
    out.backward(gradient=y * 0.5)
    opt.step()
    opt.zero_grad()
    return out


def _clipped_step(model, opt, sched, x, y):
    opt.zero_grad()
    loss = _mse(model, x, y)
    loss.backward()
    norm = nt.optim.clip_grad_norm_(model.parameters(), 0.05)
    nt.optim.clip_grad_value_(model.parameters(), 0.01)
    opt.step()
    return loss.detach(), norm, norm * 2  # the norm is a value of the graph, which ops may read


@pytest.mark.parametrize("body", [_whole_step, _two_forwards, _given_gradient, _clipped_step])
def test_a_whole_training_step_compiles_with_its_backward_and_updates_in_order(body):
    x, y = rnd(16, 4, names=("b", "x")), rnd(16, 2, names=("b", "y"), seed=1)
    eager, eager_opt, eager_step = _training(False, body)
    model, opt, step = _training(True, body)
    for _ in range(4):
        want, got = eager_step(x, y), step(x, y)
        for a, e in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
            assert a.requires_grad == e.requires_grad
            assert_close(a, e, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), eager.parameters()):
        assert_close(p, q, rtol=1e-5, atol=1e-6)
        assert (p.grad is None) == (q.grad is None)
    assert opt.param_groups[0]["lr"] == eager_opt.param_groups[0]["lr"]
    steps = [n.params["what"] for n in program(step).graph.nodes if n.effect()]
    assert steps == {_whole_step: ["zero_grad", "backward", "AdamW.step", "StepLR.step"],
                     _two_forwards: ["zero_grad", "backward", "AdamW.step"],
                     _given_gradient: ["backward", "AdamW.step", "zero_grad"],
                     _clipped_step: ["zero_grad", "backward", "clip_grad_norm_", "clip_grad_value_", "AdamW.step"]}[body]
    assert len(step._cache) == 1


def test_a_compiled_step_drops_each_value_after_its_last_reader_as_eager_code_does():
    # unfused, the graph's values are eager's own: a whole step that held its forward's values to its
    # return would peak a sixth higher than eager through the backward
    def peak_of(compiled: bool) -> int:
        nt.manual_seed(0)
        model = nn.Sequential(nn.Linear("x", "h", 64, 512), nn.GELU(), nn.Linear("h", "h2", 512, 512), nn.GELU(),
                              nn.Linear("h2", "y", 512, 8))
        opt = nt.optim.SGD(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()

        step = nt.compile(step, fullgraph=True, fuse=False) if compiled else step
        x, y = rnd(2048, 64, names=("b", "x")), rnd(2048, 8, names=("b", "y"), seed=1)
        for _ in range(3):
            step(x, y)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            step(x, y)
            return tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()

    compiled = peak_of(True)
    assert compiled <= 1.03 * peak_of(False)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_a_compiled_step_updates_with_the_fused_adam_kernel_the_same_values(monkeypatch, amsgrad):
    pytest.importorskip("numba")
    from namedtensor.backends import numba_kernels

    calls = []
    adam_ = numba_kernels.adam_
    monkeypatch.setattr(numba_kernels, "adam_", lambda *a, **k: calls.append(1) or adam_(*a, **k))
    x, y = rnd(16, 4, names=("b", "x")), rnd(16, 2, names=("b", "y"), seed=1)
    results = {}
    for fused in (None, False):
        calls.clear()
        nt.manual_seed(0)
        model = nn.Sequential(nn.Linear("x", "h", 4, 8), nn.GELU(), nn.Linear("h", "y", 8, 2))
        opt = nt.optim.AdamW(model.parameters(), lr=0.05, amsgrad=amsgrad, fused=fused)
        step = nt.compile(lambda x, y: _whole_step(model, opt, _NoSchedule(), x, y), fullgraph=True)
        for _ in range(3):
            step(x, y)
        results[fused] = [p.detach().numpy() for p in model.parameters()]
        assert not opt.in_graph
        assert len(calls) == (3 if fused is None else 0)  # fused=False keeps the chunked update
    for a, b in zip(results[None], results[False]):
        np.testing.assert_array_equal(a, b)  # bit for bit


class _NoSchedule:
    def step(self):
        pass


def test_a_step_that_returns_a_norm_of_another_dtype_than_traced_raises():
    # the norm's dtype is the first trainable parameter's, which here gets no gradient: the graph's ops
    # after the step were traced for float64, and the replay's norm is float32
    unused = nt.zeros(2, names=("u",), dtype=nt.float64).requires_grad_()
    w = rnd(3, names=("a",)).requires_grad_()

    def fn(x):
        (x * w).sum().backward()
        return nt.optim.clip_grad_norm_([unused, w], 1.0) + 1.0

    with pytest.raises(RuntimeError, match=r"clip_grad_norm_ inside nt.compile: it returned a tensor of shape \(\) "
                                           r"and dtype nt.float32, but the graph was traced for a 0-dim nt.float64"):
        nt.compile(fn)(rnd(3, names=("a",)))


# what the step does, the message's fragment, and its effect once done (once: the refused trace did nothing)
STATE_STEPS = {
    "grad read": (lambda layer: layer.weight.grad * 2, ".grad: reads a gradient, which every backward",
                  lambda layer, got: _same(got, layer.weight.grad * 2)),
    "grad set": (lambda layer: setattr(layer.bias, "grad", None), ".grad: sets a gradient",
                 lambda layer, got: layer.bias.grad is None and layer.weight.grad is not None),
    "hook": (lambda layer: layer.weight.register_hook(_count), "register_hook: registers a gradient hook",
             lambda layer, got: _hook_calls(layer) == 1),
    "post-accumulate hook": (lambda layer: layer.weight.register_post_accumulate_grad_hook(_count),
                             "register_post_accumulate_grad_hook: registers", lambda layer, got: _hook_calls(layer) == 1),
    "retain_grad": (lambda layer: _retained(layer.weight * 2), "retain_grad: keeps a gradient",
                    lambda layer, got: _retains(got)),
}


def _same(a, b) -> bool:
    return bool(np.array_equal(a.detach().numpy(), b.detach().numpy()))


def _retained(t):
    t.retain_grad()
    return t


def _retains(t) -> bool:
    t.sum().backward()
    return t.grad is not None and _same(t.grad, nt.ones_like(t))


def _count(_):
    _count.calls += 1


def _hook_calls(layer) -> int:
    _count.calls = 0
    layer(rnd(2, 4, names=("b", "x"))).sum().backward()
    return _count.calls


@pytest.mark.parametrize("case", STATE_STEPS)
def test_a_step_on_state_no_op_carries_runs_eagerly_before_it_happens(case):
    fn, fragment, done_once = STATE_STEPS[case]
    layer, x = _trained_layer()
    cf = nt.compile(lambda x: (fn(layer), layer(x)))
    grad = layer.weight.grad.clone()
    with pytest.warns(UserWarning, match="runs eagerly for this signature") as record:
        got, y = cf(x)
    assert fragment in str(record[0].message)
    assert_close(y, layer(x))
    assert done_once(layer, got)
    if case == "grad read":  # read afresh at every call, though backward made a new gradient tensor
        layer.weight.grad = grad * 3
        assert_close(cf(x)[0], grad * 6)


CUT_FROM_THE_GRAPH = {
    "no_grad block": lambda x, w: _no_grad_part(x, w) + x * w,
    "detach": lambda x, w: (x * w).detach() * x + w.detach().exp(),
    ".data": lambda x, w: x.data * w + (x * w).data,
    "set_grad_enabled": lambda x, w: _no_grad_part(x, w, nt.set_grad_enabled(False)) * w,
}


def _no_grad_part(x, w, mode=None):
    with mode if mode is not None else nt.no_grad():
        return (x * w).exp() + x


@pytest.mark.parametrize("case", CUT_FROM_THE_GRAPH)
def test_no_grad_and_detach_inside_compile_with_the_eager_gradients(case):
    # a replay runs in the call's grad mode: the values made without history are cut from the graph
    fn = CUT_FROM_THE_GRAPH[case]
    x = rnd(3, 4, names=("b", "d"), dtype="float64").requires_grad_()
    w = rnd(4, names=("d",), seed=1, dtype="float64").requires_grad_()
    cf, got = compiled_quietly(fn, x, w)
    want = fn(x, w)
    assert_close(got, want, rtol=1e-14, atol=1e-14)
    # not gradcheck's central differences: they see through the cut, as the eager gradients do not
    grads = [nt.grad(y.sum(), [x, w], allow_unused=True) for y in (got, want)]
    assert [g is None for g in grads[1]] != [True, True]
    for a, e, t in zip(*grads, (x, w)):
        # an input whose every path to the result is cut may still be an input of a fused node, whose
        # backward gives it zeros where eagerly it gets None
        assert_close(nt.zeros_like(t) if a is None else a, nt.zeros_like(t) if e is None else e, rtol=1e-14, atol=1e-14)
    assert "detach" in [n.op.name for n in program(cf).graph.nodes]
    assert nt.is_grad_enabled()


def test_a_detached_result_shares_the_version_counter_as_eagerly():
    x = rnd(3, names=("a",)).requires_grad_()
    cf = nt.compile(lambda x: x.detach())
    y = x * x  # saves x
    d = cf(x)
    assert not d.requires_grad and d.names == x.names
    d.add_(1.0)  # writes into x's array, as eagerly
    assert_close(x.detach(), d)
    with pytest.raises(RuntimeError, match="was modified in place after it was saved"):
        y.sum().backward()


@pytest.mark.parametrize("case", ["enable_grad inside no_grad", "a new leaf", "a leaf frozen"])
def test_grad_mode_changes_a_replay_cannot_make_run_eagerly(case):
    w = rnd(3, names=("a",)).requires_grad_()
    x = rnd(3, names=("a",)).requires_grad_()

    def fn(x):
        if case == "enable_grad inside no_grad":
            with nt.enable_grad():
                return x * w
        if case == "a new leaf":
            return x * nt.ones(3, names=("a",), requires_grad=True)
        w.requires_grad_(False)
        return x * w

    cf = nt.compile(fn)
    fragment = {"enable_grad inside no_grad": "mul: records a graph (enable_grad) inside a function called without",
                "a new leaf": "requires_grad_: makes a leaf", "a leaf frozen": "requires_grad_: makes a leaf"}[case]
    with pytest.warns(UserWarning, match="runs eagerly") as record:
        if case == "enable_grad inside no_grad":
            with nt.no_grad():
                got = cf(x)
        else:
            got = cf(x)
    assert fragment in str(record[0].message)
    assert got.requires_grad and w.requires_grad is (case != "a leaf frozen")


class _Pair(NamedTuple):
    first: object
    second: object


@dataclasses.dataclass
class _Result:
    loss: object
    parts: object
    label: str = "out"


class _Box:
    def __init__(self, t):
        self.t = t


def test_named_tuples_and_dataclasses_go_in_and_come_out_whole():
    x = rnd(3, names=("a",))
    cf, got = compiled_quietly(lambda p, r: _Result((p.first * r.loss).sum(), _Pair(p.second + 1, [r.parts * 2]), r.label),
                               _Pair(x, x * 3), _Result(x.exp(), x, "in"))
    assert isinstance(got, _Result) and isinstance(got.parts, _Pair) and got.label == "in"
    assert_close(got.loss, (x * x.exp()).sum())
    assert_close(got.parts.second[0], x * 2)
    y = rnd(3, names=("a",), seed=1)
    again = cf(_Pair(y, y), _Result(y, y, "in"))  # the same signature: replayed on the new tensors
    assert len(cf._cache) == 1
    assert_close(again.loss, (y * y).sum())


def test_tensors_returned_inside_another_object_run_eagerly():
    # the graph could return only the dry run's tensors inside it
    cf = nt.compile(lambda x: (_Box(x * 2), x))
    x = rnd(3, names=("a",))
    with pytest.warns(UserWarning, match="return: returns tensors inside a _Box, which a graph cannot make again"):
        box, _ = cf(x)
    assert box.t.device == "cpu"
    assert_close(box.t, x * 2)


def test_a_tensor_over_an_externals_array_is_read_at_every_call():
    # w.data and w.detach() are new tensors that the graph alone holds, over w's array: no constants, or
    # the optimizer's in-place updates would never be seen (and constant folding would freeze them)
    w = nt.ones(3, names=("a",), requires_grad=True)
    x = rnd(3, names=("a",))
    for read in (lambda: w.data, lambda: w.detach()):
        cf = nt.compile(lambda x: x * (read() * 2))
        for _ in range(3):
            assert_close(cf(x), x * (w.detach() * 2))
            with nt.no_grad():
                w.add_(1.0)
        assert program(cf).report["constants folded"] == 0


@pytest.mark.parametrize("draw", ["python", "numpy"])
def test_numbers_drawn_from_python_or_numpys_generators_run_eagerly(draw):
    # the trace would keep its draw as a constant; the eager run draws what it would have drawn
    import random

    fn = (lambda x: x * random.random()) if draw == "python" else (lambda x: x * float(np.random.rand()))
    x = rnd(4, names=("a",))
    random.seed(0)
    np.random.seed(0)
    want = [fn(x) for _ in range(3)]
    random.seed(0)
    np.random.seed(0)
    compiled = nt.compile(fn)
    with pytest.warns(UserWarning, match=r"runs eagerly for this signature: random numbers: were drawn from "
                                         r"Python's random or NumPy's global generator"):
        got = [compiled(x) for _ in range(3)]
    for g, w in zip(got, want):
        assert_close(g, w, rtol=0, atol=0)


@pytest.mark.parametrize("inplace", [False, True])
def test_dropout_draws_a_new_mask_at_every_call_as_eagerly(inplace):
    x = rnd(4, 50, names=("b", "d"))
    # two masks, not merged; in place, the dropout op written back into its input
    fn = lambda x: F.dropout(x * 2, 0.5, inplace=inplace) + F.dropout(x * 2, 0.5, inplace=inplace)
    compiled, _ = compiled_quietly(fn, x)
    nt.manual_seed(3)
    first, second = compiled(x), compiled(x)
    nt.manual_seed(3)
    assert_close(first, fn(x))
    assert_close(second, fn(x))
    assert not np.array_equal(first.numpy(), second.numpy())
    assert [n.op.name for n in program(compiled).graph.nodes].count("dropout") == 2


def test_a_user_error_is_the_eager_error():
    cf = nt.compile(lambda a, b: a + b)
    with pytest.raises(nt.NamesError, match="add"):
        cf(rnd(3, names=("a",)), rnd(3, names=("b",)))


def test_compile_argument_errors():
    with pytest.raises(TypeError, match="compile: expected a function or a Module"):
        nt.compile(3)
    with pytest.raises(ValueError, match="cache_limit must be an int >= 1"):
        nt.compile(lambda x: x, cache_limit=0)
    assert nt.compile(cache_limit=2)(lambda x: x + 1)._cache_limit == 2


# ----------------------------------------------------------------------------- kernels


def test_without_numba_the_cpu_fuses_nothing_and_says_so_once(monkeypatch):
    monkeypatch.setitem(numba_codegen._NUMBA, "module", None)
    x, w = rnd(6, 7, names=("b", "d")), rnd(7, names=("d",), seed=1)
    cf = nt.compile(mlp_tail)
    got = cf(x, w)
    assert not any(hasattr(n.op, "chain") for n in program(cf).graph.nodes)  # no kernel: no fused op
    for g, e in zip(got, mlp_tail(x, w)):
        assert_close(g, e, rtol=0, atol=0)  # the ops' own forwards: the eager values exactly
    monkeypatch.delitem(numba_codegen._NUMBA, "module")
    with pytest.warns(UserWarning, match=r"fused CPU kernels need Numba \(pip install 'named-tensors\[jit\]'\)"):
        monkeypatch.setitem(__import__("sys").modules, "numba", None)
        numba_codegen.numba_available()


def test_numba_kernels_match_numpy_across_broadcasts_sizes_and_dtypes():
    pytest.importorskip("numba")
    for shape, dtype in (((3, 5, 7), "float32"), ((40000,), "float64"), ((2, 3000, 17), "float32"), ((), "float64")):
        names = tuple("abc"[: len(shape)])
        x = rnd(*shape, names=names, dtype=dtype)
        bias = rnd(*shape[-1:], names=names[-1:], seed=2, dtype=dtype) if shape else nt.tensor(0.5)

        def fn(x, b):
            y = nt.where(x > 0, x * b, x - 1)
            return (y.clip(-0.5, 2.0).square() + nt.maximum(y, b)).sqrt(), y.relu() / (1 + b.abs())

        cf, got = compiled_quietly(fn, x, bias)
        assert "numpy" in program(cf).graph.nodes[0].op.kernels
        for g, e in zip(got, fn(x, bias)):
            assert g.dtype == e.dtype and g.names == e.names
            assert_close(g, e, rtol=2e-6 if dtype == "float32" else 1e-13, atol=1e-7)


def _kernel_layouts(loaded) -> set:
    """The layouts of the array arguments that the loaded kernels were compiled for ('C', 'A' strided)."""
    return {t.layout for m in loaded for sig in m.kernel.signatures for t in sig if hasattr(t, "layout")}


@settings(max_examples=25)
@given(data=st.data())
def test_kernels_take_broadcast_and_strided_operands_as_row_major_arrays(data):
    pytest.importorskip("numba")
    ndim = data.draw(st.integers(1, 3), "ndim")
    shape = tuple(data.draw(st.lists(st.integers(2, 5), min_size=ndim, max_size=ndim), "shape"))
    names = tuple("abc"[:ndim])

    def operand(label: str, seed: int):
        ones = data.draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim), f"{label} size-1 dims")
        dropped = data.draw(st.integers(0, ndim - 1), f"{label} leading dims left out")
        dims = [(n, 1 if one else size) for n, one, size in zip(names, ones, shape)][dropped:]
        t = rnd(*(size for _, size in dims), names=tuple(n for n, _ in dims), seed=seed)
        if len(dims) > 1 and data.draw(st.booleans(), f"{label} strided"):
            t = rnd(*(size for _, size in dims[::-1]), names=tuple(n for n, _ in dims[::-1]), seed=seed)
            t = t.permute(*(n for n, _ in dims))  # a view that is not row-major
        return t.requires_grad_()

    x = rnd(*shape, names=names, seed=1).requires_grad_()
    b, c = operand("b", 2), operand("c", 3)
    last = names[-1]

    def fn(x, b, c):
        y = F.gelu(x * b + c)
        return y, (y - b).sum(last), (x * c).sum(names[0])

    loaded = []
    load = numba_codegen._load
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(numba_codegen, "_load", lambda source: loaded.append(load(source)) or loaded[-1])
        _, got = compiled_quietly(fn, x, b, c)
        seeds = [rnd(*o.shape, names=o.names, seed=9 + k) for k, o in enumerate(got)]
        grads = nt.grad(list(got), [x, b, c], seeds)
    want = fn(x, b, c)
    for g, e in zip(got, want):
        assert g.names == e.names
        assert_close(g, e, rtol=1e-5, atol=1e-5)
    for g, e in zip(grads, nt.grad(list(want), [x, b, c], seeds)):
        assert g.names == e.names
        assert_close(g, e, rtol=1e-4, atol=1e-4)
    assert loaded and _kernel_layouts(loaded) == {"C"}


def test_nan_and_inf_follow_numpy_in_kernels():
    pytest.importorskip("numba")
    x = nt.tensor(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.0], "float64"), names=("a",))
    fn = lambda x: (nt.maximum(x, 0.5) + nt.minimum(x, -0.5), x.relu() * 1.0, (x / 0.0) + 0, (x * 2).sqrt() * 1)
    _, got = compiled_quietly(fn, x)
    for g, e in zip(got, fn(x)):
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_infinite_and_nan_numbers_in_a_chain():
    pytest.importorskip("numba")
    x = nt.tensor(np.array([1.0, -2.0, 3.0, 0.0], "float32"), names=("a",))
    fn = lambda x: (nt.where(x > 0, x * 2, -np.inf) + 1, nt.where(x > 0, x * 2, np.nan) + np.inf)
    cf, got = compiled_quietly(fn, x)
    assert any(n.op.name.startswith("fused[") for n in program(cf).graph.nodes)
    for g, e in zip(got, fn(x)):
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_a_signature_is_compiled_and_first_run_with_the_garbage_collector_paused():
    seen = []

    def fn(x):
        seen.append(gc.isenabled())
        return (x * 2).relu() + 1

    cf = nt.compile(fn)
    assert gc.isenabled()
    cf(rnd(3, names=("a",)))
    assert seen and not any(seen) and gc.isenabled()  # traced with it off, back on after
    cf(rnd(3, names=("a",)))
    assert gc.isenabled()
    gc.disable()  # the program's own choice stays
    try:
        cf(rnd(4, names=("a",)))
        assert not gc.isenabled()
    finally:
        gc.enable()
    failing = nt.compile(lambda x: x + nt.tensor([1.0, 2.0], names=("b",)), fullgraph=True)
    with pytest.raises(nt.NamesError):
        failing(rnd(3, names=("a",)))
    assert gc.isenabled()  # also after an error


def test_generated_kernels_are_cached_on_disk(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("NAMEDTENSOR_CACHE_DIR", str(tmp_path))
    cf = nt.compile(lambda x: (x * 3).relu() - 1)
    cf(rnd(4, names=("a",)))
    assert len(list((tmp_path / "kernels").glob("nt_kernel_*.py"))) == 2  # the chain's forward and backward


def test_threads_compiling_one_new_kernel_at_once_each_get_it(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("NAMEDTENSOR_CACHE_DIR", str(tmp_path))
    fn = lambda x: (x * 3.0517).relu() - 1  # a constant no other test's kernel has: its source is new here
    x = rnd(4, 5, names=("a", "b"))
    start, results = threading.Barrier(8), {}

    def compile_and_call(i: int) -> None:
        cf = nt.compile(fn)
        start.wait()
        try:
            results[i] = cf(x)
        except Exception as e:  # kept for the assertion below, which names it
            results[i] = e

    threads = [threading.Thread(target=compile_and_call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got in results.values():
        assert isinstance(got, nt.Tensor), got
        assert_close(got, fn(x))
    files = [p.name for p in (tmp_path / "kernels").iterdir() if p.is_file()]
    assert len(files) == 2 and all(f.endswith(".py") for f in files), files  # the two kernels, no temporaries

def test_cuda_source_of_a_chain_forward_and_backward():
    x, w = rnd(6, 7, names=("b", "d")), rnd(7, names=("d",), seed=1)
    ((chain, in_dtypes),) = cuda_chains(lambda x, w: F.gelu(x * w + 1.0) * 2 - x.exp(), x, w)
    assert chain.label() == "mul+add+gelu+mul+exp+sub"
    ins, outs, body = cuda_codegen.forward_source(chain, in_dtypes)
    assert ins == "float32 x0, float32 x1" and outs == "float32 o0"  # NumPy's names, as CuPy reads them
    assert "float t2 = ((float)(((0.5 * t1) * (1.0 + erf((t1 * 0.7071067811865475))))));" in body
    assert body.splitlines()[-1] == "o0 = t5;"
    ins, outs, body, same = cuda_codegen.backward_source(chain, in_dtypes)
    assert ins == "float32 x0, float32 x1, float32 go0" and outs == "float32 gi0, float32 gi1" and same == {0: 0, 1: 1}
    assert "float g5 = ((float)(go0));" in body and body.splitlines()[-2:] == ["gi0 = gx0;", "gi1 = gx1;"]
    # an add's operands have one gradient: one output, which both get
    h, o = rnd(6, 7, names=("b", "d")), rnd(6, 7, names=("b", "d"), seed=1)
    ((chain, in_dtypes),) = cuda_chains(lambda h, o: (h + o).exp() * 2, h, o)
    ins, outs, body, same = cuda_codegen.backward_source(chain, in_dtypes)
    assert outs == "float32 gi0" and same == {0: 0, 1: 0} and body.splitlines()[-1] == "gi0 = gx0;"


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_traces_as_its_composition_which_fuses_with_the_ops_before_it(reduction):
    pytest.importorskip("numba")
    x = rnd(4, 6, names=("batch", "embed"), dtype="float64").requires_grad_()
    r = rnd(4, 6, names=("batch", "embed"), seed=1, dtype="float64").requires_grad_()
    y = rnd(6, names=("embed",), seed=2, dtype="float64")  # a target that broadcasts
    fn = lambda x, r, y: F.mse_loss(x * 2 + r, y, reduction=reduction)
    cf, got = compiled_quietly(fn, x, r, y)
    last = "" if reduction == "none" else f"+{reduction}"
    assert [n.op.name for n in program(cf).graph.nodes] == [f"fused[mul+add+sub+square{last}]"]
    want = fn(x, r, y)
    assert want.grad_fn.op.name == "mse_loss"  # eagerly one op
    assert got.names == want.names
    assert_close(got, want, rtol=1e-12, atol=1e-12)
    for a, e in zip(nt.grad(got.sum(), [x, r]), nt.grad(want.sum(), [x, r])):
        assert_close(a, e, rtol=1e-12, atol=1e-12)
    assert gradcheck(cf, x, r, y)


@pytest.mark.parametrize("weighted", [False, True])
def test_a_loss_counts_the_targets_of_each_call(weighted):
    # the mean divides by the (weights of the) targets not ignored: values the graph must not freeze; the
    # weighted loss builds its per-target weights from the targets with backend functions ("computed")
    z = rnd(6, 5, names=("batch", "cls"), dtype="float64").requires_grad_()
    w = nt.tensor(np.linspace(0.5, 2, 5), names=("cls",)) if weighted else None
    fn = lambda z, t: F.cross_entropy(z, t, weight=w, dim="cls", label_smoothing=0.1)
    cf = nt.compile(fn)
    for ignored in ([0, 3], [1], []):
        t = np.array([0, 1, 2, 3, 4, 0])
        t[ignored] = -100
        target = nt.tensor(t, names=("batch",))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = cf(z, target)
        want = fn(z, target)
        assert_close(got, want, rtol=1e-12, atol=1e-12)
        assert_close(nt.grad(got, z)[0], nt.grad(want, z)[0], rtol=1e-12, atol=1e-12)
    assert len(cf._cache) == 1
    assert ("computed(" in cf.explain()) == weighted


#: the reference of the CPU kernels' math: a long double (x86's 64-bit significand, a quad on Arm), to a
#: fraction of a double's ulp; where it is a double, the C library's own result, itself within an ulp
_WIDE = np.finfo(np.longdouble).nmant > 60


def _ulps(out: np.ndarray, want: np.ndarray) -> float:
    """The largest error of ``out`` against the long doubles ``want``, in ulps of ``out``'s dtype."""
    ulp = np.spacing(np.abs(want.astype(out.dtype))).astype(np.longdouble)
    return float(np.max(np.abs(out.astype(np.longdouble) - want) / ulp))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sin_and_cos_of_cpu_kernels_are_within_an_ulp_below_their_limit(dtype):
    numba = pytest.importorskip("numba")
    from namedtensor.backends import numba_math

    sin, cos = (numba_math.sin32, numba_math.cos32) if dtype == "float32" else (numba_math.sin64, numba_math.cos64)

    @numba.njit(error_model="numpy", fastmath={"contract"})  # as the kernels compile them
    def each(cosine, a, out):
        for i in range(a.shape[0]):
            out[i] = cos(a[i]) if cosine else sin(a[i])

    rng = np.random.default_rng(0)
    tiny = np.finfo(dtype).smallest_subnormal
    near = (np.arange(1, int(numba_math.TRIG_LIMIT / 1.6)) * (np.pi / 2)).astype(dtype)  # next to these: the worst
    x = np.concatenate([(rng.standard_normal(300_000) * 10.0 ** rng.integers(-30 if dtype == "float32" else -300, 7,
                                                                             300_000)).astype(dtype),
                        near, np.nextafter(near, 0), np.nextafter(near, np.inf), np.array([0.0, -0.0, tiny, -tiny], dtype)])
    x = x[np.abs(x) < numba_math.TRIG_LIMIT]
    for cosine, exact in ((False, np.sin), (True, np.cos)):
        out = np.empty_like(x)
        each(cosine, x, out)
        assert _ulps(out, exact(x.astype(np.longdouble))) <= (1.0 if _WIDE or dtype == "float32" else 1.5)
    out = np.empty(3, dtype)
    each(False, np.array([np.nan, np.inf, -np.inf], dtype), out)
    assert np.isnan(out).all()
    each(False, np.array([0.0, -0.0, tiny], dtype), out)
    assert out.tolist() == [0.0, -0.0, tiny] and np.signbit(out[1])
    each(True, np.array([0.0, -0.0, tiny], dtype), out)
    assert out.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("scale", [1.0, 1e3, 3e6, 1e30])
def test_chains_with_sin_and_cos_fuse_with_exact_large_arguments(scale, dtype):
    pytest.importorskip("numba")
    fn = lambda x, w: (x * w).sin() * 2 + x.cos()
    a = rnd(8, 2500, names=("a", "b"), dtype=dtype).numpy() * scale
    a[0, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]  # NaN in the first pass, the infinities in the second
    x = nt.tensor(a, names=("a", "b")).requires_grad_()
    w = rnd(2500, names=("b",), seed=1, dtype=dtype).requires_grad_()  # broadcast: its gradient is summed in the kernel
    with np.errstate(invalid="ignore"):
        cf, got = compiled_quietly(fn, x, w)
    assert [n.op.name for n in program(cf).graph.nodes] == ["fused[mul+sin+mul+cos+add]"]
    with np.errstate(invalid="ignore"):
        want = fn(x, w)
        (gx, gw), (ex, ew) = nt.grad(got.sum(), [x, w]), nt.grad(want.sum(), [x, w])
    eps = float(np.finfo(dtype).eps)
    assert_close(got, want, rtol=0, atol=3 * eps)  # an ulp of values up to 3 (NaN where eager has NaN)
    assert_close(gx, ex, rtol=10 * eps, atol=10 * eps * np.nanmax(np.abs(ex.numpy())))
    assert_close(gw, ew, rtol=100 * eps, atol=100 * eps * np.nanmax(np.abs(ew.numpy())))


def test_float64_integer_powers_of_cpu_kernels_are_within_an_ulp_in_their_range():
    numba = pytest.importorskip("numba")
    from namedtensor.backends import numba_math

    def each_of(n):
        @numba.njit(error_model="numpy", fastmath={"contract"})  # as the kernels compile them
        def each(a, out):
            for i in range(a.shape[0]):
                out[i] = numba_math.powi64(a[i], n)

        return each

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4, 5, 7, 11, 16, 37, 64, -1, -2, -3, -8, -16, -64):
        reach = numba_math.POWI_SAFE / abs(n)  # |x| ** n within 2^-POWI_SAFE and 2^POWI_SAFE
        x = rng.choice([-1.0, 1.0], 100_000) * 2.0 ** rng.uniform(-reach, reach, 100_000)
        x = np.concatenate([x, [2.0 ** reach, -(2.0 ** -reach), 1.0, -1.0]])
        out = np.empty_like(x)
        each_of(n)(x, out)
        assert _ulps(out, np.power(x.astype(np.longdouble), n)) <= (1.0 if _WIDE else 1.5), n
        if n > 0:  # signed zeros, which the kernels take in the first pass
            zeros = np.array([0.0, -0.0])
            out = np.empty(2)
            each_of(n)(zeros, out)
            assert out.tolist() == [0.0, 0.0] and list(np.signbit(out)) == [False, n % 2 == 1], n


_POWERS = {
    "x ** 4 + x": (lambda x, w: (x * w) ** 4 + x, "fused[mul+pow+add]"),
    "x ** -3 * x": (lambda x, w: (x * w) ** -3 * x, "fused[mul+pow+mul]"),
    "sum of x ** 16": (lambda x, w: ((x * w) ** 16).sum("b"), "fused[mul+pow+sum]"),
    "softmax of x ** 7": (lambda x, w: ((x * w) ** 7).softmax("b"), "fused[mul+pow+softmax]"),
}


def _fuses_as_eager(fn, label: str, x, w, share: float = 1e-13) -> None:
    """``fn(x, w)`` compiles to the one fused node ``label``, and its values and gradients (of a random
    weighting of the output) are eager's: NaN and infinities where eager has them, else within ``1e-13`` and
    ``share`` of the largest finite value (a sum adds thousands of terms, and ``+ x`` may cancel)."""
    with np.errstate(all="ignore"):
        cf, got = compiled_quietly(fn, x, w)
        want = fn(x, w)
        r = nt.tensor(np.random.default_rng(2).standard_normal(got.shape), names=got.names)
        grads, wanted = nt.grad((got * r).sum(), [x, w]), nt.grad((want * r).sum(), [x, w])
    assert [n.op.name for n in program(cf).graph.nodes] == [label]
    for g, e in [(got, want), *zip(grads, wanted)]:
        g, e = g.detach().numpy(), e.detach().numpy()
        assert np.array_equal(np.isnan(g), np.isnan(e)) and np.array_equal(g[np.isinf(e)], e[np.isinf(e)])
        finite = np.isfinite(e)
        assert_close(g[finite], e[finite], rtol=1e-13, atol=share * np.abs(e[finite]).max(initial=0.0))


@pytest.mark.parametrize("scale", [1.0, 1e30, 1e-30])
@pytest.mark.parametrize("case", list(_POWERS))
def test_float64_chains_with_integer_powers_fuse_with_exact_edges(case, scale):
    pytest.importorskip("numba")
    fn, label = _POWERS[case]
    a = np.random.default_rng(0).standard_normal((6, 3000)) * scale  # 1e30, 1e-30: powers out of range
    a[0, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]  # the C library's special cases, in the second pass
    x = nt.tensor(a, names=("a", "b")).requires_grad_()
    _fuses_as_eager(fn, label, x, rnd(3000, names=("b",), seed=1, dtype="float64").requires_grad_())


def test_float64_powers_of_cpu_kernels_are_within_an_ulp_where_safe():
    numba = pytest.importorskip("numba")
    from namedtensor.backends import numba_math

    @numba.njit(error_model="numpy", fastmath={"contract"})  # as the kernels compile them
    def each(x, y, out, safe):
        for i in range(x.shape[0]):
            out[i] = numba_math.pow64(x[i], y[i])
            safe[i] = numba_math.pow64_safe(x[i], y[i])

    rng = np.random.default_rng(0)
    n = 200_000
    wide = 2.0 ** rng.uniform(-1020, 1020, n)  # y up to the reach: results over the whole normal range
    near = rng.uniform(0.5, 2.0, n)
    one = 1.0 + rng.uniform(-1e-6, 1e-6, n)  # a tiny log times a large y
    x = np.concatenate([wide, near, one, [1.0, 1.0, 2.0, 0.5]])
    y = np.concatenate([rng.uniform(-1, 1, n) * 700 / np.abs(np.log(wide)), rng.uniform(-1000, 1000, n),
                        rng.uniform(-1e8, 1e8, n), [0.0, 1e300, 1000.0, -1000.0]])
    out, safe = np.empty_like(x), np.empty(x.shape, bool)
    each(x, y, out, safe)
    assert safe.mean() > 0.95  # the bound is close: few chunks take the C library's pow
    want = np.power(x[safe].astype(np.longdouble), y[safe].astype(np.longdouble))
    assert _ulps(out[safe], want) <= (1.0 if _WIDE else 1.5)
    # where it is not safe: a base that is not positive, normal and finite, a NaN or infinite exponent, or
    # |y log x| that might reach 708 (e^708 and e^-708 are the edges of the normal range)
    tiny = np.finfo(np.float64).tiny
    cases = [(0.0, 2.5), (-0.0, 2.5), (-2.0, 2.5), (tiny / 2, 0.5), (np.inf, 0.5), (np.nan, 0.5), (2.0, np.nan),
             (2.0, np.inf), (2.0, -np.inf), (2.0, 1022.0), (2.0, -1022.0), (np.e, 708.0), (tiny, 1.0)]
    xs, ys = (np.array(c) for c in zip(*cases))
    out, safe = np.empty_like(xs), np.empty(xs.shape, bool)
    each(xs, ys, out, safe)
    assert not safe.any()


_FLOAT64_POWERS = {
    "x ** 17 + x": (lambda x, w: (x * w).abs() ** 17 + x, "fused[mul+abs+pow+add]"),
    "x ** 2.5 + x": (lambda x, w: (x * w).abs() ** 2.5 + x, "fused[mul+abs+pow+add]"),
    "x ** -0.7 * x": (lambda x, w: (x * w).abs() ** -0.7 * x, "fused[mul+abs+pow+mul]"),
    "sum of x ** 1.5": (lambda x, w: ((x * w).abs() ** 1.5).sum("b"), "fused[mul+abs+pow+sum]"),
    "x ** w": (lambda x, w: (x * 0.5).abs() ** w, "fused[mul+abs+pow]"),
    "2 ** (x w)": (lambda x, w: 2.0 ** (x * w) - x, "fused[mul+pow+sub]"),
}


@pytest.mark.parametrize("scale", [1.0, 1e3, 1e-300])
@pytest.mark.parametrize("case", list(_FLOAT64_POWERS))
def test_float64_chains_with_any_power_fuse_with_exact_edges(case, scale):
    pytest.importorskip("numba")
    fn, label = _FLOAT64_POWERS[case]
    a = np.random.default_rng(0).standard_normal((6, 3000)) * scale  # 1e3 and 1e-300: powers out of range
    a[0, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]  # the C library's special cases, in the second pass
    x = nt.tensor(a, names=("a", "b")).requires_grad_()
    _fuses_as_eager(fn, label, x, nt.tensor(np.random.default_rng(1).uniform(-3, 3, 3000), names=("b",)).requires_grad_())
    xs = nt.tensor(np.random.default_rng(3).uniform(0.2, 1.2, (3, 8)), names=("a", "b")).requires_grad_()
    ws = nt.tensor(np.random.default_rng(4).uniform(0.5, 1.5, 8), names=("b",)).requires_grad_()
    assert gradcheck(nt.compile(fn), xs, ws)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
def test_chains_over_empty_dims_give_the_eager_values_and_gradients(shape):
    # a mean over no elements is NaN, and its gradient empty: building its backward divided by zero
    fns = [lambda x: (x.cos() + x).mean("a"), lambda x: (x * 2 + 1).mean("b"), lambda x: (x * 2).exp().mean(("a", "b")),
           lambda x: (x.sin() * x).sum("b"), lambda x: (x * 0.5) ** 4 + x ** -2, lambda x: (x.sin() * 2).softmax("b")]
    x = rnd(*shape, names=("a", "b"), dtype="float64").requires_grad_()
    for fn in fns:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's mean of an empty slice
            want = fn(x)
            cf = nt.compile(fn)
            got = cf(x)
            (g,), (e,) = nt.grad(got.sum(), [x]), nt.grad(want.sum(), [x])
        assert len([p for p in cf._cache.values() if p is not None]) == 1
        assert got.names == want.names and got.shape == want.shape
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        assert g.shape == e.shape == x.shape


_TRIG_ENDS = {
    "sum over the last dim": (lambda x, w: ((x * w).sin() * x).sum("b"), "fused[mul+sin+mul+sum]"),
    "mean over the first": (lambda x, w: ((x * w).cos() + x).mean("a"), "fused[mul+cos+add+mean]"),
    "sum over all": (lambda x, w: (x.sin() * w).sum(("a", "b")), "fused[sin+mul+sum]"),
    "softmax": (lambda x, w: (x.sin() * w).softmax("b"), "fused[sin+mul+softmax]"),
    "log_softmax": (lambda x, w: (x.cos() * w + x).log_softmax("b"), "fused[cos+mul+add+log_softmax]"),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("scale", [1.0, 3e6])
@pytest.mark.parametrize("end", list(_TRIG_ENDS))
def test_sin_and_cos_chains_ending_in_a_reduction_or_softmax_are_one_kernel(end, scale, dtype):
    pytest.importorskip("numba")
    fn, label = _TRIG_ENDS[end]
    x = (rnd(6, 3000, names=("a", "b"), dtype=dtype) * scale).requires_grad_()  # 3e6: every row's second pass
    w = rnd(3000, names=("b",), seed=1, dtype=dtype).requires_grad_()
    cf, got = compiled_quietly(fn, x, w)
    assert [n.op.name for n in program(cf).graph.nodes] == [label]
    want = fn(x, w)
    eps = float(np.finfo(dtype).eps)
    top = float(want.abs().max())
    # a total over 18,000 terms, added in another order than NumPy's
    assert_close(got, want, rtol=10 * eps, atol=(300 if end == "sum over all" else 10) * eps * top)
    (gx, gw), (ex, ew) = nt.grad((got * got).sum(), [x, w]), nt.grad((want * want).sum(), [x, w])
    assert_close(gx, ex, rtol=10 * eps, atol=300 * eps * float(ex.abs().max()))
    assert_close(gw, ew, rtol=100 * eps, atol=300 * eps * float(ew.abs().max()))
    a = x.detach().numpy().copy()
    a[1, :4] = [np.inf, -np.inf, 0.0, -0.0]  # the infinities in the second pass, whose sin is NaN
    a[2, 7] = np.nan
    special = nt.tensor(a, names=x.names)
    with np.errstate(invalid="ignore"):
        assert_close(cf(special, w), fn(special, w), rtol=10 * eps,
                     atol=(300 if end == "sum over all" else 10) * eps * top)


def test_the_vectorized_math_of_cpu_kernels_is_accurate():
    numba = pytest.importorskip("numba")
    from scipy.special import erf

    from namedtensor.backends import numba_math

    @numba.njit(error_model="numpy", fastmath={"contract"})
    def each(fn_index, a, out):  # the kernels' own error model and contractions
        for i in range(a.shape[0]):
            out[i] = numba_math.exp(a[i]) if fn_index == 0 else numba_math.tanh(a[i]) if fn_index == 1 \
                else numba_math.exp32(a[i]) if fn_index == 2 else numba_math.tanh32(a[i]) if fn_index == 3 \
                else numba_math.erf32(a[i]) if fn_index == 4 else numba_math.log(a[i]) if fn_index == 5 \
                else numba_math.log1p(a[i]) if fn_index == 6 else numba_math.log32(a[i]) if fn_index == 7 \
                else numba_math.log1p32(a[i]) if fn_index == 8 else numba_math.expm1(a[i]) if fn_index == 9 \
                else numba_math.expm1_32(a[i])

    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, -1e-12, 5e-324])
    x = np.concatenate([np.linspace(-745, 709, 100001), np.linspace(-30, 30, 100001), specials])
    out = np.empty_like(x)
    each(0, x, out)
    want = np.exp(x)
    normal = np.isfinite(want) & (want > 1e-300)
    assert np.max(np.abs(out[normal] - want[normal]) / want[normal]) < 4e-16
    np.testing.assert_allclose(out[~normal & np.isfinite(want)], want[~normal & np.isfinite(want)], rtol=1e-13, atol=0)
    np.testing.assert_array_equal(out[-8:], want[-8:])
    each(1, x, out)
    want = np.tanh(x)
    # within an ulp and a half everywhere: 1 - 2 / (e^2|x| + 1) cancelled to 57 ulps near |x| = 0.02
    finite = np.isfinite(x)
    assert _ulps(out[finite], np.tanh(x[finite].astype(np.longdouble))) <= (1.5 if _WIDE else 2.5)
    np.testing.assert_array_equal(out[-8:-2], want[-8:-2])

    # log and log1p over the whole range, subnormals, the edges and the special values
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.concatenate([np.exp(np.linspace(-745, 709, 100001)), np.linspace(0, 10, 100001),
                            [5e-324, 1e-310, 1.0, np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0)],
                            specials[:5], [-1.0]])
        z = np.concatenate([np.linspace(-0.999999, 10, 100001), np.exp(np.linspace(-700, 700, 100001)),
                            -np.exp(np.linspace(-700, -1e-9, 1001)), [-1.0, -2.0, 1e-300, -1e-300], specials[:5]])
        for fn_index, exact, arg in ((5, np.log, x), (6, np.log1p, z)):
            got = np.empty_like(arg)
            each(fn_index, arg, got)
            want = exact(arg)
            finite = np.isfinite(want) & (want != 0)
            assert np.max(np.abs(got[finite] - want[finite]) / np.abs(want[finite])) < 3e-16, fn_index
            np.testing.assert_array_equal(got[~finite], want[~finite])  # NaN, infinities and signed zeros

    # expm1 near 0, where exp(x) - 1 would cancel, and over exp's range
    with np.errstate(over="ignore"):
        x = np.concatenate([np.linspace(-745, 709, 100001), np.linspace(-1, 1, 200001), np.exp(np.linspace(-700, 0, 10001)),
                            -np.exp(np.linspace(-700, 0, 10001)), specials, [710.0, -800.0, 1e-20, -1e-20]])
        got = np.empty_like(x)
        each(9, x, got)
        want = np.expm1(x)
    finite = np.isfinite(want) & (want != 0)
    assert np.max(np.abs(got[finite] - want[finite]) / np.abs(want[finite])) < 5e-16
    np.testing.assert_array_equal(got[~finite], want[~finite])
    assert np.signbit(got[np.flatnonzero(x == 0)]).tolist() == np.signbit(want[np.flatnonzero(x == 0)]).tolist()

    # the float32 functions, in float32 ulps of the exact (float64) answer, subnormal results included
    specials32 = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-12, 1e-45], dtype=np.float32)
    x32 = np.concatenate([np.linspace(-104, 89, 200001), np.linspace(-10, 10, 200001)]).astype(np.float32)
    x32 = np.concatenate([x32, specials32])
    out32 = np.empty_like(x32)
    wide = x32.astype(np.float64)
    for fn_index, exact, bound in ((2, np.exp, 1.0), (3, np.tanh, 8.0), (4, erf, 8.0)):
        each(fn_index, x32, out32)
        with np.errstate(over="ignore"):
            want = exact(wide)
            ulp = np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
        finite = np.isfinite(want) & (np.abs(want) < 3e38)
        error = np.abs(out32[finite].astype(np.float64) - want[finite])
        tiny = np.abs(wide[finite]) < 1e-30  # erf(x) = 2x/sqrt(pi) there, in subnormals for erf32
        assert np.max(error[~tiny] / ulp[finite][~tiny]) <= bound, fn_index
        if fn_index > 2:
            assert np.max(error) < 5e-7
        np.testing.assert_array_equal(out32[-8:-3], want[-8:-3].astype(np.float32))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x32 = np.concatenate([np.exp(np.linspace(-103, 88, 200001)), np.linspace(0, 10, 100001),
                              [1e-45, 1e-40, 1.0, -1.0], specials32[:5]]).astype(np.float32)
        z32 = np.concatenate([np.linspace(-0.9999, 10, 100001), np.exp(np.linspace(-80, 80, 100001)),
                              -np.exp(np.linspace(-80, -1e-6, 1001)), [-1.0, -2.0, 1e-30, -1e-30],
                              specials32[:5]]).astype(np.float32)
        e32 = np.concatenate([np.linspace(-104, 88, 200001), np.linspace(-1, 1, 200001),
                              np.exp(np.linspace(-80, 0, 10001)), -np.exp(np.linspace(-80, 0, 10001)),
                              [1e-20, -1e-20, 89.0, -200.0], specials32[:5]]).astype(np.float32)
        for fn_index, exact, arg, bound in ((7, np.log, x32, 2.0), (8, np.log1p, z32, 2.0), (10, np.expm1, e32, 3.0)):
            got = np.empty_like(arg)
            each(fn_index, arg, got)
            want = exact(arg.astype(np.float64))
            ulp = np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
            finite = np.isfinite(want) & (np.abs(want) < 3e38) & (want != 0)
            assert np.max(np.abs(got[finite] - want[finite]) / ulp[finite]) <= bound, fn_index
            special = ~np.isfinite(want) | (want == 0)
            np.testing.assert_array_equal(got[special], want[special].astype(np.float32))


REDUCED = {"sum last": ("c", False), "mean last two": (("b", "c"), False), "sum all": (None, False),
           "mean keepdim": ("c", True), "sum first": ("a", False), "mean first two": (("a", "b"), False),
           "sum first keepdim": ("a", True), "sum middle": ("b", False), "mean middle keepdim": ("b", True),
           "sum first and last": (("a", "c"), False), "mean first and last keepdim": (("c", "a"), True)}


def test_dependent_math_calls_are_cut_into_stages_over_a_chunk():
    lines = [("t0", "float64", "(log1p(exp(-fabs(x0))) + x0)"), ("t1", "float64", "erf(x0) * exp(x0)"),
             ("t2", "float64", "tanh(t0) * t1"), ("t3", "float64", "t0 * 2.0"), ("t4", "float64", "pow(t0, float64(3.0))")]
    hoisted = numba_codegen._hoisted(lines)
    # a long call inside another's arguments becomes a statement of its own, its text unchanged
    assert hoisted[:2] == [("t0_h0", "float64", "exp(-fabs(x0))"), ("t0", "float64", "(log1p(t0_h0) + x0)")]
    assert hoisted[2:] == lines[1:]
    # log1p takes exp's result: a stage later; erf and exp of an input share exp's stage; tanh of t0 a third;
    # an integer power (a few products) is no long call, nor is a product of long calls' results
    assert [[v for v, _, _ in stage] for stage in numba_codegen._stages(hoisted)] == [
        ["t0_h0", "t1"], ["t0", "t3", "t4"], ["t2"]]
    # what nothing wanted reads is dropped before the stages (a buffer's store would keep it alive)
    assert [v for v, _, _ in numba_codegen._live(hoisted, ["t2 * 0.5", "t4"])] == ["t0_h0", "t0", "t1", "t2", "t4"]
    assert numba_codegen._stages([("t0", "float32", "exp(x0)"), ("t1", "float32", "t0 * 2.0")]) == [
        [("t0", "float32", "exp(x0)"), ("t1", "float32", "t0 * 2.0")]]


_MATH_CHAINS = {
    "softplus": lambda x, y: x.softplus() * 2.0,
    "mish": lambda x, y: x * x.softplus().tanh(),
    "logaddexp": lambda x, y: nt.logaddexp(x * 2.0, y),
    "tanh of exp": lambda x, y: (x * 0.5).exp().tanh() + y,
    "softplus summed": lambda x, y: (x.softplus() - x * y).sum(),
    "softplus mean of rows": lambda x, y: (x.softplus() * y).mean("i"),
    "softplus summed over columns": lambda x, y: (x.softplus() * y).sum("b"),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", _MATH_CHAINS)
def test_chains_of_dependent_math_calls_run_in_stages_with_eager_values(case, dtype, split_calls):
    pytest.importorskip("numba")
    split_calls(2)
    fn = _MATH_CHAINS[case]
    # rows of 2048 and a part chunk: a long row is cut into chunks, each run stage by stage
    x = (rnd(3, 2100, names=("b", "i"), dtype=dtype) * 4.0).requires_grad_()
    y = rnd(3, 2100, names=("b", "i"), seed=1, dtype=dtype)
    x.detach().numpy()[0, :6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 40.0]
    loaded = []
    load = numba_codegen._load
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(numba_codegen, "_load", lambda source: loaded.append(load(source)) or loaded[-1])
        cf, got = compiled_quietly(fn, x, y)
        seed = rnd(*got.shape, names=got.names, seed=2, dtype=dtype)
        grad = nt.grad(got, x, seed)[0]
    with np.errstate(invalid="ignore", over="ignore"):
        want = fn(x, y)
        want_grad = nt.grad(want, x, seed)[0]
    tol = dict(rtol=2e-6, atol=2e-6) if dtype == "float32" else dict(rtol=1e-13, atol=1e-13)
    if got.ndim:
        np.testing.assert_array_equal(np.isnan(got.detach().numpy()), np.isnan(want.detach().numpy()))
        assert_close(got, want, **tol)
        np.testing.assert_array_equal(np.isnan(grad.numpy()), np.isnan(want_grad.numpy()))
    else:  # the NaN row sums to NaN: compare the others
        assert np.isnan(got.item()) and np.isnan(want.item())
    rows = slice(1, None)
    assert_close(grad[{"b": rows}], want_grad[{"b": rows}], rtol=tol["rtol"] * 50, atol=tol["atol"] * 50)
    sources = [open(m.__file__).read() for m in loaded]
    staged = [text for text in sources if text.count("for c in range(n):") > 1]
    assert staged and all("np.empty(2048" in text for text in staged)  # one kernel at least runs in stages
    if dtype == "float64" and case in ("softplus", "mish", "softplus summed over columns"):
        small = (rnd(2, 5, names=("b", "i"), dtype=dtype)).requires_grad_()
        assert gradcheck(nt.compile(fn), small, rnd(2, 5, names=("b", "i"), seed=3, dtype=dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_math_calls_of_cpu_kernels_keep_the_sign_of_zero_as_numpy(dtype):
    pytest.importorskip("numba")
    x = nt.tensor(np.array([-0.0, 0.0], dtype), names=("a",))
    fns = {"tanh": lambda x: x.tanh(), "expm1": lambda x: x.expm1(), "log1p": lambda x: x.log1p(),
           "sin": lambda x: x.sin(), "erf": lambda x: x.erf(), "silu": lambda x: F.silu(x), "gelu": lambda x: F.gelu(x)}
    for name, fn in fns.items():
        cf, got = compiled_quietly(lambda x: fn(x * 1.0), x)
        assert [n.op.name.startswith("fused[") for n in program(cf).graph.nodes] == [True], name  # a kernel's value
        want = fn(x * 1.0)
        np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want.numpy()), err_msg=name)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)


def test_float32_tanh_of_cpu_kernels_is_1_where_it_rounds_to_1_and_its_gradient_0():
    pytest.importorskip("numba")
    x = nt.tensor(np.array([9.1, 10.0, 20.0, 1e30, np.inf, -20.0, -np.inf, 0.5], "float32"), names=("a",))
    x = x.requires_grad_()
    fn = lambda x: (x * 1.0).tanh()
    cf, got = compiled_quietly(fn, x)
    assert [n.op.name for n in program(cf).graph.nodes] == ["fused[mul+tanh]"]
    want = fn(x)
    np.testing.assert_array_equal(got.detach().numpy()[1:-1], want.detach().numpy()[1:-1])
    assert got.detach().numpy()[0] == 1.0  # tanh(9.1) rounds to 1 (NumPy's is an ulp below)
    np.testing.assert_array_equal(nt.grad(got.sum(), x)[0].numpy()[:-1], 0.0)
    # tanh of an exponential saturates where the exponential passes 9.01: a zero gradient, as eagerly
    z = nt.tensor(np.array([2.5, 3.0, 5.0, 20.0], "float32"), names=("a",)).requires_grad_()
    chain = lambda z: z.exp().tanh() * 1.0
    _, out = compiled_quietly(chain, z)
    np.testing.assert_array_equal(nt.grad(out.sum(), z)[0].numpy(), nt.grad(chain(z).sum(), z)[0].numpy())


@pytest.mark.parametrize("reduce", list(REDUCED))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_chain_ending_in_a_reduction_is_one_kernel(reduce, dtype):
    pytest.importorskip("numba")
    x = rnd(4, 6, 300, names=("a", "b", "c"), dtype=dtype).requires_grad_()
    w = rnd(300, names=("c",), seed=1, dtype=dtype)
    dims = REDUCED[reduce]
    how = "mean" if reduce.startswith("mean") else "sum"

    def fn(x, w):
        h = nt.maximum(x * w - 0.25, 0.0) * (x + 1.0)
        return getattr(h, how)(dims[0], keepdim=dims[1]) if dims[0] is not None else getattr(h, how)()

    cf, got = compiled_quietly(fn, x, w)
    want = fn(x, w)
    tol = 1e-12 if dtype == "float64" else 2e-5
    assert got.names == want.names and got.dtype == want.dtype
    assert_close(got, want, rtol=tol, atol=tol)
    assert_close(nt.grad(got.sum(), x)[0], nt.grad(want.sum(), x)[0], rtol=tol, atol=tol)
    ops = [n.op.name for n in program(cf).graph.nodes]
    assert ops == [f"fused[mul+sub+maximum+add+mul+{how}]"]
    assert len(program(cf).graph.nodes[0].op.chain.outputs) == 1  # the product is never stored


@pytest.mark.parametrize("dims", [("a",), ("b",), ("a", "c"), ("a", "b", "c"), ("b", "c")],
                         ids=["leading", "middle", "first and last", "all (a loss)", "all but a dim of 1"])
def test_a_reduction_splits_its_work_among_threads(monkeypatch, dims):
    pytest.importorskip("numba")
    monkeypatch.setattr(numba_codegen, "_PARALLEL_FROM", 1)
    monkeypatch.setattr(thread_pool, "_pool", None)
    threads = nt.get_num_threads()
    nt.set_num_threads(3)
    try:
        x = rnd(7 if "a" in dims else 1, 3, 5000, names=("a", "b", "c"), dtype="float64")
        fn = lambda x: (x * x - x).mean(dims)
        cf, got = compiled_quietly(fn, x)
        assert_close(got, fn(x), rtol=1e-12, atol=1e-12)
        assert [n.op.name for n in program(cf).graph.nodes] == ["fused[mul+sub+mean]"]
        assert thread_pool._pool[0]._max_workers == 3  # the work went to the backend's pool of 3 threads
    finally:
        nt.set_num_threads(threads)


def test_kernels_split_their_rows_among_threads(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(numba_codegen, "_PARALLEL_FROM", 1)  # every call is split
    monkeypatch.setattr(thread_pool, "_pool", None)
    threads = nt.get_num_threads()
    nt.set_num_threads(3)
    try:
        x = rnd(5, 7, 5000, names=("a", "b", "c"))
        w = rnd(5000, names=("c",), seed=1)
        fn = lambda x, w: ((nt.maximum(x * w, 0.0) + 1.0) * x, (x * w - 1.0).sum("c"))
        cf, got = compiled_quietly(fn, x, w)
        for g, e in zip(got, fn(x, w)):
            assert_close(g, e, rtol=1e-5, atol=1e-4)
        xg = x.detach().requires_grad_()
        assert_close(nt.grad(cf(xg, w)[0].sum(), xg)[0], nt.grad(fn(xg, w)[0].sum(), xg)[0], rtol=1e-6, atol=1e-6)
        assert thread_pool._pool[0]._max_workers == 3  # the calls went to the backend's pool of 3 threads
    finally:
        nt.set_num_threads(threads)


@pytest.mark.parametrize("threads", [1, 3])
def test_a_broadcast_operands_gradient_is_summed_inside_the_backward_kernel(split_calls, threads):
    pytest.importorskip("numba")
    split_calls(threads)
    x = rnd(5, 7, 300, names=("a", "b", "c")).requires_grad_()
    bias = rnd(300, names=("c",), seed=1).requires_grad_()  # broadcast along the rows
    scale = rnd(5, 7, 1, names=("a", "b", "c"), seed=2).requires_grad_()  # one number per row
    fn = lambda x, bias, scale: F.gelu(x * scale + bias)
    cf = nt.compile(fn)
    g = rnd(5, 7, 300, names=("a", "b", "c"), seed=3)
    cf(x, bias, scale)
    B = nt.backends.cpu()
    shapes = []
    empty, zeros = B.empty, B.zeros
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(B, "empty", lambda shape, **kw: shapes.append(tuple(shape)) or empty(shape, **kw))
        mp.setattr(B, "zeros", lambda shape, **kw: shapes.append(tuple(shape)) or zeros(shape, **kw))
        got = nt.grad(cf(x, bias, scale), [x, bias, scale], g)
    # the forward's output and x's gradient are the only arrays of the output's size: the other two
    # gradients are one float64 row per part of the work, added up after
    assert shapes.count((5, 7, 300)) == 2
    assert (threads, 1, 1, 300) in shapes and (threads, 5, 7, 1) in shapes
    for a, e in zip(got, nt.grad(fn(x, bias, scale), [x, bias, scale], g)):
        assert a.names == e.names and a.dtype == e.dtype
        assert_close(a, e, rtol=1e-5, atol=1e-5)
    # every operand broadcast: the kernel stores no gradient at the output's size
    outer = lambda u, v: (u * v + 1.0).relu()
    got = nt.grad(nt.compile(outer)(scale, bias), [scale, bias], g)
    for a, e in zip(got, nt.grad(outer(scale, bias), [scale, bias], g)):
        assert a.names == e.names
        assert_close(a, e, rtol=1e-5, atol=1e-5)


def test_operands_with_one_gradient_formula_get_one_array_from_the_backward_kernel():
    pytest.importorskip("numba")
    # a residual add before a loss: both operands' gradient is 2 (h + o - y) / n, as the eager add hands
    # both the same gradient; here the kernel writes it once
    h, o = (rnd(4, 6, names=("b", "e"), seed=s, dtype="float64").requires_grad_() for s in (0, 1))
    y = rnd(4, 6, names=("b", "e"), seed=2, dtype="float64")
    bias = rnd(6, names=("e",), seed=3, dtype="float64").requires_grad_()
    fn = lambda h, o, bias: ((h + o + bias - y) ** 2).mean()
    cf, _ = compiled_quietly(fn, h, o, bias)
    node = cf(h, o, bias)._node
    kernel = node.op.backward_kernels["numpy"]
    grads = kernel(node.B, [t._data for t in node.saved_tensors()], [nt.ones(()).double().array])
    assert grads[0] is grads[1] and grads[2] is not grads[0] and grads[2].shape == (6,)
    for a, e in zip(nt.grad(cf(h, o, bias), [h, o, bias]), nt.grad(fn(h, o, bias), [h, o, bias])):
        assert a.names == e.names
        assert_close(a, e, rtol=1e-14, atol=1e-15)
    # leaves that get the one array keep gradients of their own
    cf(h, o, bias).backward()
    assert not np.shares_memory(h.grad.array, o.grad.array)
    before = o.grad.numpy().copy()
    h.grad.add_(1.0)
    np.testing.assert_array_equal(o.grad.numpy(), before)
    assert gradcheck(cf, h, o, bias)


def test_a_linear_layers_bias_joins_the_fused_chain_that_reads_it():
    pytest.importorskip("numba")
    x = rnd(3, 4, 5, names=("b", "s", "embed"), dtype="float64").requires_grad_()
    w = rnd(6, 5, names=("hidden", "embed"), seed=1, dtype="float64").requires_grad_()
    bias = rnd(6, names=("hidden",), seed=2, dtype="float64").requires_grad_()
    fn = lambda x, w, bias: (F.linear(x, w, bias) * 0.5).relu()
    cf, got = compiled_quietly(fn, x, w, bias)
    text = cf.explain()
    assert "biases split: 1" in text and "fused[add+mul+relu]" in text and "linear(%0, %1, ax=2" in text
    assert got.names == ("b", "s", "hidden")
    assert_close(got, fn(x, w, bias))
    assert gradcheck(cf, x, w, bias)
    g = rnd(3, 4, 6, names=("b", "s", "hidden"), seed=3, dtype="float64")
    for a, e in zip(nt.grad(cf(x, w, bias), [x, w, bias], g), nt.grad(fn(x, w, bias), [x, w, bias], g)):
        assert a.names == e.names
        assert_close(a, e)


@pytest.mark.parametrize("case", ["residual", "two readers", "returned", "dim inside", "no bias"])
def test_a_bias_stays_in_its_layer_where_splitting_would_not_pay(case):
    pytest.importorskip("numba")
    x = rnd(3, 4, 5, names=("b", "s", "embed"))
    w = rnd(5, 5, names=("embed_out", "embed"), seed=1)
    bias = rnd(5, names=("embed_out",), seed=2)
    fns = {
        "residual": lambda x: (x.rename(embed="embed_out") + F.linear(x, w, bias)).relu(),
        "two readers": lambda x: (lambda y: (y.relu(), y * 2.0))(F.linear(x, w, bias)),
        "returned": lambda x: (lambda y: (y, y.relu()))(F.linear(x, w, bias)),
        "dim inside": lambda x: F.linear(x.align_to("embed", "b", "s"), w, bias).relu(),
        "no bias": lambda x: F.linear(x, w).relu(),
    }
    cf, got = compiled_quietly(fns[case], x)
    assert "biases split: 0" in cf.explain()
    for a, e in zip(got if isinstance(got, tuple) else (got,), (lambda r: r if isinstance(r, tuple) else (r,))(
            fns[case](x))):
        assert a.names == e.names
        assert_close(a, e, rtol=1e-6, atol=1e-6)


def test_smaller_operands_computed_inside_a_run_or_kept_when_read_after_it():
    pytest.importorskip("numba")
    x = rnd(6, 7, names=("b", "d"), dtype="float64").requires_grad_()
    w = rnd(7, names=("d",), seed=1, dtype="float64").requires_grad_()

    def inside(x, w):  # w's ops are per element of (b, d) inside the kernel: one fused op
        return (x * w + 1.0) * (w.abs() + 1.0) - w * 2

    def read_after(x, w):  # the small s is returned: it keeps its nodes, before the fused one
        s = (w.abs() + 1.0) * 0.5
        return x * s + s * x * x, s

    for fn, ops in ((inside, ["fused[mul+add+abs+add+mul+mul+sub]"]),
                    (read_after, ["abs", "add", "mul", "fused[mul+mul+mul+add]"])):
        cf, got = compiled_quietly(fn, x, w)
        want = fn(x, w)
        for g, e in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.names == e.names and g.shape == e.shape
            assert_close(g, e, rtol=1e-12, atol=1e-12)
        assert [n.op.name for n in program(cf).graph.nodes] == ops
        first = got[0] if isinstance(got, tuple) else got
        wanted = want[0] if isinstance(want, tuple) else want
        for g, e in zip(nt.grad(first.sum(), [x, w]), nt.grad(wanted.sum(), [x, w])):
            assert_close(g, e, rtol=1e-12, atol=1e-12)


def test_a_node_that_reads_none_of_a_run_does_not_end_it():
    pytest.importorskip("numba")
    x = rnd(6, 7, names=("b", "d"), dtype="float64").requires_grad_()
    w = rnd(7, 5, names=("d", "o"), dtype="float64", seed=1).requires_grad_()

    def fn(x, w):
        a = x * 2.0 - 1.0
        y = x @ w  # reads x, not the run's values: it runs before the fused node
        b = nt.maximum(a, 0.0) * x
        return b, y * 3.0

    cf, got = compiled_quietly(fn, x, w)
    want = fn(x, w)
    for g, e in zip(got, want):
        assert_close(g, e, rtol=1e-12, atol=1e-12)
    assert [n.op.name for n in program(cf).graph.nodes] == ["matmul", "fused[mul+sub+maximum+mul]", "mul"]
    for g, e in zip(nt.grad(got[0].sum() + got[1].sum(), [x, w]), nt.grad(want[0].sum() + want[1].sum(), [x, w])):
        assert_close(g, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("centered, with_w, with_b", [(True, True, True), (True, False, False), (True, True, False),
                                                      (False, True, False), (False, False, False)])
@pytest.mark.parametrize("parts", [1, 3])
def test_row_kernels_match_the_backends(monkeypatch, dtype, centered, with_w, with_b, parts):
    pytest.importorskip("numba")
    from namedtensor.backends import numba_kernels

    if parts > 1:
        monkeypatch.setattr(numba_kernels, "_PARALLEL_FROM", 1)
        monkeypatch.setattr(numba_kernels, "get_num_threads", lambda: parts)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((7, 5, 33)) * 3 + 1).astype(dtype)
    g = rng.standard_normal((7, 5, 33)).astype(dtype)
    w = rng.standard_normal(33).astype(dtype) if with_w else None
    b = rng.standard_normal(33).astype(dtype) if with_b else None
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    got = numba_kernels.norm_rows(x, 33, w, b, 1e-5, centered)
    want = numpy_kernels.norm_rows(x, 33, w, b, 1e-5, centered)
    for a, e in zip(got, want):
        if e is None:
            assert a is None
            continue
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_allclose(a, e, **tol)
    _, mean, rstd = want
    wants = (True, with_w, with_b and centered)
    got = numba_kernels.norm_rows_backward(x, 33, mean, rstd, w, g, *wants)
    want = numpy_kernels.norm_rows_backward(x, 33, mean, rstd, w, g, *wants)
    for wanted, a, e in zip(wants, got, want):
        assert (a is None) == (not wanted)
        if wanted:
            assert a.dtype == e.dtype and a.shape == e.shape
            np.testing.assert_allclose(a, e, **tol)
    # a residual add and the norm of its sum, forward and backward, against the backend's two steps
    r = rng.standard_normal((7, 5, 33)).astype(dtype)
    got = numba_kernels.add_norm_rows(x, r, 33, w, b, 1e-5, centered)
    want = nt.backends.cpu().add_norm_rows(x, r, 33, w, b, 1e-5, centered)
    np.testing.assert_allclose(got[0], x + r, rtol=0, atol=0)
    for a, e in zip(got, want):
        assert (a is None) == (e is None)
        if e is not None:
            assert a.dtype == e.dtype and a.shape == e.shape
            np.testing.assert_allclose(a, e, **tol)
    h, _, mean, rstd = want
    g_add = rng.standard_normal((7, 5, 33)).astype(dtype)
    got = numba_kernels.add_norm_rows_backward(h, 33, mean, rstd, w, g, g_add, *wants[1:])
    want = nt.backends.cpu().add_norm_rows_backward(h, 33, mean, rstd, w, g, g_add, *wants[1:])
    np.testing.assert_allclose(want[0], numpy_kernels.norm_rows_backward(h, 33, mean, rstd, w, g, True, False, False)[0]
                               + g_add, **tol)
    for wanted, a, e in zip((True,) + wants[1:], got, want):
        assert (a is None) == (not wanted)
        if wanted:
            assert a.dtype == e.dtype and a.shape == e.shape
            np.testing.assert_allclose(a, e, **tol)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_compiled_norms_run_the_generated_row_kernels(norm):
    pytest.importorskip("numba")
    x = rnd(4, 6, 16, names=("batch", "seq", "embed"), dtype="float64").requires_grad_()
    w = rnd(16, names=("embed",), seed=1, dtype="float64").requires_grad_()
    b = rnd(16, names=("embed",), seed=2, dtype="float64").requires_grad_()

    def fn(x, w, b):
        h = x * 2.0 + b
        if norm == "layer":
            return F.layer_norm(h, dim="embed", weight=w, bias=b)
        return F.rms_norm(h, dim="embed", weight=w)

    cf, got = compiled_quietly(fn, x, w, b)
    assert "row kernels: 1" in cf.explain()
    assert [n.params.get("rows") for n in program(cf).graph.nodes if n.op.row_kernels][0].__name__ \
        == "namedtensor.backends.numba_kernels"
    want = fn(x, w, b)
    assert got.names == want.names
    assert_close(got, want, rtol=1e-12, atol=1e-12)
    inputs = (x, w, b) if norm == "layer" else (x, w)
    g = rnd(4, 6, 16, names=("batch", "seq", "embed"), seed=3, dtype="float64")
    for a, e in zip(nt.grad(got, inputs, g), nt.grad(want, inputs, g)):
        assert_close(a, e, rtol=1e-12, atol=1e-12)
    assert gradcheck(cf, x, w, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("parts", [1, 2])
@pytest.mark.parametrize("masked, causal", [(False, False), (True, False), (True, True)])
def test_the_softmax_kernel_matches_the_backends(monkeypatch, dtype, parts, masked, causal):
    pytest.importorskip("numba")
    from namedtensor.backends import cpu
    from namedtensor.backends import numba_kernels

    if parts > 1:
        monkeypatch.setattr(numba_kernels, "_PARALLEL_FROM", 1)
        monkeypatch.setattr(numba_kernels, "get_num_threads", lambda: parts)
    B = cpu()
    rng = np.random.default_rng(0)
    scores = (rng.standard_normal((3, 4, 9, 7)) * 4).astype(dtype)  # (batch, head, key, query)
    if masked:
        scores[0, 0, :, 2] = -np.inf  # a query with no key to attend
        scores[1, 2, 4, 3] = -np.inf
        scores[2, 1, :, 5] = np.inf
    scores[2, 3, 1, 0] = np.nan
    if causal:
        scores[1, 1, 6, 2] = np.inf  # a cut score: -inf added to it, NaN as eagerly
    tol = dict(rtol=1e-5, atol=1e-7) if dtype == "float32" else dict(rtol=1e-13, atol=1e-15)
    e, inv = numba_kernels.softmax_columns(scores.copy(), masked, causal)
    e_want, inv_want = B.softmax_columns(scores.copy(), masked, causal)
    assert e.dtype == inv.dtype == np.dtype(dtype) and inv.shape == inv_want.shape == (3, 4, 1, 7)
    np.testing.assert_allclose(e, e_want, **tol)  # NaNs in the same places
    np.testing.assert_allclose(inv, inv_want, **tol)
    if masked:
        assert np.all(e[0, 0, :, 2] == 0) and inv[0, 0, 0, 2] == 1
    if causal:  # key 8 comes after every query (7 of them): its weights are 0
        assert np.all(e[0, 1, 8, :] == 0) and np.all(e[0, 1, 3, :3] == 0) and np.all(e[0, 1, 3, 3:] > 0)
    d = rng.standard_normal(scores.shape).astype(dtype)
    c = rng.standard_normal((3, 4, 1, 7)).astype(dtype)
    got = numba_kernels.softmax_columns_backward(d.copy(), e_want, c)
    np.testing.assert_allclose(got, B.softmax_columns_backward(d.copy(), e_want, c), **tol)


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_attention_runs_the_blocks_with_numba_steps(monkeypatch, causal):
    pytest.importorskip("numba")
    from namedtensor.backends import numba_kernels, numpy_attention

    calls = []

    def counted(name, step):
        def run(*args):
            calls.append(name)
            return step(*args)
        return run

    monkeypatch.setattr(numba_kernels, "_STEPS", numpy_attention.Steps(
        *(counted(name, step) for name, step in zip(numpy_attention.Steps._fields, numba_kernels._STEPS))))
    q = rnd(2, 3, 5, 4, names=("batch", "head", "seq", "dim"), dtype="float64").requires_grad_()
    k = rnd(2, 3, 6, 4, names=("batch", "head", "key", "dim"), seed=1, dtype="float64").requires_grad_()
    v = rnd(2, 3, 6, 4, names=("batch", "head", "key", "dim"), seed=2, dtype="float64").requires_grad_()
    if causal:
        k, v = k[{"key": slice(0, 5)}].detach().requires_grad_(), v[{"key": slice(0, 5)}].detach().requires_grad_()

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, dim="dim", key_dim="key") * 2.0

    cf, got = compiled_quietly(fn, q, k, v)
    assert "row kernels: 1" in cf.explain()
    want = fn(q, k, v)
    assert got.names == want.names
    assert_close(got, want, rtol=1e-12, atol=1e-12)
    g = nt.randn(*want.shape, names=want.names, dtype="float64")
    assert set(calls) == {"softmax", "transposed"}
    del calls[:]
    for a, e in zip(nt.grad(got, (q, k, v), g), nt.grad(want, (q, k, v), g)):
        assert_close(a, e, rtol=1e-11, atol=1e-12)
    assert set(calls) == {"grad", "transposed"}
    assert gradcheck(cf, q, k, v)


@pytest.mark.parametrize("exponent", [0, 0.5, 1, 2, 3, -1, 1.5, 5, -3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_powers_by_a_number_fuse_as_products_with_pows_edge_cases(exponent, dtype, monkeypatch):
    pytest.importorskip("numba")
    # the float32 power by 1.5 is numba_math.pow32's where NumPy's power has no SIMD loop (the next test)
    monkeypatch.setattr(numpy_kernels, "simd_loop", lambda ufunc, types: False)
    values = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -2.0, 0.3, 7.5, 1e20, -1e-3, 1.0])
    x = nt.tensor(np.concatenate([values, np.linspace(-3, 3, 60)]).astype(dtype), names=("i",))
    fn = lambda x: (x * 1.0) ** exponent * 2.0
    with np.errstate(invalid="ignore", divide="ignore"):  # NumPy's own warnings (0 ** -1, (-2) ** 1.5)
        cf, got = compiled_quietly(fn, x)
        want = fn(x)
    ulp = 2.4e-7 if dtype == "float32" else 4.5e-16  # 3: two roundings where pow takes one
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=ulp, atol=0)  # NaN, infinities
    np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want.numpy()))  # and signed zeros
    # 1.5: numba_math.pow32 in float32, pow64 in float64; 5 and -3: powi32 and powi64
    assert "fused[mul+pow+mul]" in cf.explain()
    xs = nt.tensor(np.linspace(0.1, 3, 30), names=("i",)).requires_grad_()
    cf64, got = compiled_quietly(fn, xs)
    assert_close(nt.grad(got.sum(), xs)[0], nt.grad(fn(xs).sum(), xs)[0], rtol=1e-14, atol=1e-14)
    assert gradcheck(cf64, xs)


def test_pow32_is_within_a_float32_ulp_of_numpy_with_its_special_cases():
    numba = pytest.importorskip("numba")
    from namedtensor.backends import numba_math

    @numba.njit(error_model="numpy")
    def each(x, y, out):
        for i in range(x.shape[0]):
            out[i] = numba_math.pow32(x[i], y[i])

    rng = np.random.default_rng(0)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1.5, -1.5,
                        1e-40, 3.4e38, -7.0], "float32")
    xs, ys = (a.ravel() for a in np.meshgrid(special, special))
    x = np.concatenate([xs, rng.uniform(0, 10, 100000), -rng.uniform(0, 10, 10000), np.exp(rng.uniform(-80, 80, 100000))])
    y = np.concatenate([ys, rng.uniform(-20, 20, 100000), np.round(rng.uniform(-9, 9, 10000)), rng.uniform(-1, 1, 100000)])
    x, y = x.astype("float32"), y.astype("float32")
    got = np.empty_like(x)
    each(x, y, got)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    n = len(xs)  # the special cases: NaN, infinities and signed zeros where the C library has them
    np.testing.assert_array_equal(np.isnan(got[:n]), np.isnan(want[:n]))
    np.testing.assert_array_equal(np.signbit(got[:n]), np.signbit(want[:n]))
    np.testing.assert_allclose(got, want, rtol=1.2e-7, atol=1.5e-45)  # a subnormal result: one step of them
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(np.float32).tiny)
    ulps = np.abs(got[normal].astype(float) - want[normal]) / np.spacing(np.abs(want[normal]))
    assert ulps.max() <= 1.0


def test_powi32_is_within_half_an_ulp_with_numpys_special_cases():
    numba = pytest.importorskip("numba")
    from namedtensor.backends import numba_math

    @numba.njit(error_model="numpy")
    def each(x, n, out):
        for i in range(x.shape[0]):
            out[i] = numba_math.powi32(x[i], n)

    rng = np.random.default_rng(0)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 3.4e38, -3.4e38], "float32")
    x = np.concatenate([special, rng.uniform(-3, 3, 20000), np.exp(rng.uniform(-88, 88, 20000)) * rng.choice([-1, 1], 20000)])
    x = x.astype("float32")
    got = np.empty_like(x)
    tiny, big = np.finfo(np.float32).tiny, np.finfo(np.float32).max
    for n in [k for k in range(-16, 17) if k]:
        each(x, n, got)
        with np.errstate(all="ignore"):
            want = np.power(x.astype(np.longdouble), n)
            numpy = np.power(x, np.float32(n))
        s = len(special)  # NaN, infinities and signed zeros as NumPy's
        np.testing.assert_array_equal(got[:s], numpy[:s])
        np.testing.assert_array_equal(np.signbit(got[:s]), np.signbit(numpy[:s]))
        normal = np.isfinite(want) & (np.abs(want) >= tiny) & (np.abs(want) <= big)
        ulps = np.abs(got[normal] - want[normal]) / np.spacing(np.abs(want[normal]).astype(np.float32))
        assert ulps.max() <= 0.5 + 2.0 ** -20, n  # correctly rounded but for float64's few roundings
        below = np.isfinite(want) & (np.abs(want) < tiny)  # a subnormal result, or 0: within one step of them
        np.testing.assert_allclose(got[below], want[below].astype("float32"), rtol=0, atol=1.5e-45)
        assert np.all(np.isinf(got[np.abs(want) > big]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_power_by_an_integer_is_a_kernel_even_alone(dtype):
    pytest.importorskip("numba")
    # NumPy's vectorized pow does a negative base one element at a time: 44 ms a million, powi32's 0.1
    x = nt.tensor(np.linspace(-3, 3, 301), names=("i",), dtype=dtype).requires_grad_()
    for e, alone in ((3, True), (4, True), (-3, True), (16, True), (2, False), (-1, False), (1, False)):
        with np.errstate(divide="ignore", invalid="ignore"):
            cf, got = compiled_quietly(lambda x: x ** e, x)
            want = x ** e
        assert [n.op.name for n in program(cf).graph.nodes] == (["fused[pow]"] if alone else ["pow"]), e
        assert_close(got, want, rtol=3e-7 if dtype == "float32" else 5e-16, atol=0)
        if alone:
            assert_close(nt.grad(got.sum(), x)[0], nt.grad(want.sum(), x)[0], rtol=1e-6 if dtype == "float32" else 1e-15,
                         atol=0)
    assert not formulas.faster_alone("_Pow", [None, 17]) and not formulas.faster_alone("_Pow", [None, 2.5])
    assert formulas.faster_alone("_Gelu", [None]) and not formulas.faster_alone("_Exp", [None])


def test_integer_powers_call_powi_in_both_float_dtypes():
    # a negative literal keeps its one float32(...): the pattern of an integer power must see it
    cases = {("float32", "pow(x0, float32(-3.0))"): "t0 = float32(powi32(x0, -3))",
             ("float32", "pow(x0, 16.0)"): "t0 = float32(powi32(x0, 16))",
             ("float32", "pow(x0, 17.0)"): "t0 = float32(pow32(x0, float32(17.0)))",
             ("float32", "pow(x0, float32(-1.5))"): "t0 = float32(pow32(x0, float32(-1.5)))",
             ("float64", "pow(x0, float64(-3.0))"): "t0 = float64(powi64(x0, -3))",
             ("float64", "pow(x0, float64(2.5))"): "t0 = float64(pow64(x0, float64(2.5)))"}
    for (dtype, expr), line in cases.items():
        assert numba_codegen._statement("t0", dtype, expr) == line
    assert not formulas.float32_pow("_Pow", [None, 16], "float32") and formulas.float32_pow("_Pow", [None, 17], "float32")
    assert formulas.float32_pow("_Pow", [None, 1.5], "float32") and not formulas.float32_pow("_Pow", [None, 1.5], "float64")
    assert formulas.float32_pow("_Pow", [None, object()], "float32") and not formulas.float32_pow("_Mul", [None, 1.5], "float32")
    assert formulas.float32_pow("_Pow", [None, math.inf], "float32")


@pytest.mark.parametrize("simd", [True, False])
def test_float32_powers_by_other_numbers_stay_numpys_where_it_has_a_simd_loop(simd, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(numpy_kernels, "simd_loop", lambda ufunc, types: simd and (ufunc, types) == ("power", "fff"))
    x = nt.tensor(np.linspace(0.5, 2, 64).astype("float32"), names=("i",)).requires_grad_()
    w = nt.tensor(np.linspace(-1, 1, 64).astype("float32"), names=("i",)).requires_grad_()
    fn = lambda x, w: (x * w + 1.0) ** 1.5 * x ** w + x ** 4 * 3.0
    cf, got = compiled_quietly(fn, x, w)
    want = fn(x, w)
    assert_close(got, want, rtol=3e-7, atol=0)
    for a, e in zip(nt.grad(got.sum(), (x, w)), nt.grad(want.sum(), (x, w))):
        assert_close(a, e, rtol=1e-6, atol=1e-7)
    text = cf.explain()
    if simd:  # NumPy's loops take the powers by 1.5 and by w; x ** 4 is numba_math.powi32's, in a kernel
        assert "= pow(%3, 1.5)" in text and "= pow(%0, %1)" in text and "fused[mul+pow+mul+add]" in text
    else:
        assert "= pow(" not in text and "fused[" in text


def test_simd_loop_reads_numpys_dispatch(monkeypatch):
    import numpy.lib.introspect as introspect

    def dispatch(current):
        return lambda func_name=None: {"power": {"fff": {"current": current, "available": "X86_V4 baseline(X86_V2)"}}}

    for current, simd in (("X86_V4", True), ("baseline(X86_V2)", False), ("X86_V2", False)):
        monkeypatch.setattr(introspect, "opt_func_info", dispatch(current))
        assert numpy_kernels.simd_loop.__wrapped__("power", "fff") is simd
        assert numpy_kernels.simd_loop.__wrapped__("power", "ddd") is False
        assert numpy_kernels.simd_loop.__wrapped__("exp", "fff") is False


def test_float64_erf_of_cpu_kernels_is_within_an_ulp_of_the_c_librarys():
    numba = pytest.importorskip("numba")
    from namedtensor.backends import numba_math

    @numba.njit(error_model="numpy", fastmath={"contract"})  # as the kernels compile them
    def each(a, out):
        for i in range(a.shape[0]):
            out[i] = numba_math.erf64(a[i])

    # every range of fdlibm's approximations and their edges, tiny and subnormal arguments
    edges = np.array([0.84375, 1.25, 1 / 0.35, 6.0])
    x = np.concatenate([np.linspace(-7, 7, 100001), np.exp(np.linspace(-700, 2, 50001)), -np.exp(np.linspace(-30, 2, 20001)),
                        edges, np.nextafter(edges, 0), -edges, [5e-324, -1e-310, 1e-300]])
    out = np.empty_like(x)
    each(x, out)
    want = np.array([math.erf(v) for v in x])
    nonzero = want != 0
    assert np.max(np.abs(out - want)[nonzero] / np.spacing(np.abs(want[nonzero]))) <= 1.0
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
    out = np.empty_like(special)
    each(special, out)
    np.testing.assert_array_equal(out, [np.nan, 1.0, -1.0, 0.0, -0.0])
    assert list(np.signbit(out[3:])) == [False, True]


_FLOAT64_ERFS = {
    "gelu": (lambda x, w: F.gelu(x * w + 0.1) * 2.0, "fused[mul+add+gelu+mul]"),
    "gelu tanh": (lambda x, w: F.gelu(x * w + 0.1, approximate="tanh") * 2.0, "fused[mul+add+gelu+mul]"),
    "erf": (lambda x, w: (x * w).erf() + x, "fused[mul+erf+add]"),
    "mean of gelu": (lambda x, w: F.gelu(x * w).mean("b"), "fused[mul+gelu+mean]"),
}


@pytest.mark.parametrize("case", list(_FLOAT64_ERFS))
def test_float64_chains_with_erf_and_gelu_fuse(case):
    pytest.importorskip("numba")
    fn, label = _FLOAT64_ERFS[case]
    a = np.random.default_rng(0).standard_normal((6, 3000)) * 3
    a[0, :7] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 40.0]
    x = nt.tensor(a, names=("a", "b")).requires_grad_()
    w = nt.tensor(np.random.default_rng(1).uniform(0.5, 1.5, 3000), names=("b",)).requires_grad_()
    # 1 + erf(x) and 1 + tanh(x) cancel for negative x in both: a few ulps of the largest value
    _fuses_as_eager(fn, label, x, w, share=1e-14)
    xs = nt.tensor(np.random.default_rng(3).standard_normal((3, 8)), names=("a", "b")).requires_grad_()
    ws = nt.tensor(np.random.default_rng(4).uniform(0.5, 1.5, 8), names=("b",)).requires_grad_()
    assert gradcheck(nt.compile(fn), xs, ws)


def test_float32_powers_of_any_operands_fuse_where_numpys_power_has_no_simd_loop(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(numpy_kernels, "simd_loop", lambda ufunc, types: False)
    rng = np.random.default_rng(0)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, -2.0, 0.5, 3.0, -3.0, 1.5])
    bases, powers = (a.ravel().astype("float32") for a in np.meshgrid(special, special))
    x = nt.tensor(np.concatenate([bases, rng.uniform(0, 5, 500).astype("float32")]), names=("i",))
    y = nt.tensor(np.concatenate([powers, rng.uniform(-6, 6, 500).astype("float32")]), names=("i",))
    fn = lambda x, y: ((x * 1.0) ** (y * 1.0) + 1.0, (2.0 ** (y * 0.5)) * 1.0)
    with np.errstate(all="ignore"):
        cf, got = compiled_quietly(fn, x, y)
        want = fn(x, y)
    assert [n.op.name for n in program(cf).graph.nodes] == ["fused[mul+mul+pow+add+mul+pow+mul]"]
    for g, w in zip(got, want):  # within a float32 ulp (pow32 rounds once, from float64), NaN where NumPy's
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1.2e-7, atol=0)
        np.testing.assert_array_equal(np.signbit(g.numpy()), np.signbit(w.numpy()))  # signed zeros, NaNs
    xs = nt.tensor(rng.uniform(0.2, 3, 40).astype("float32"), names=("i",)).requires_grad_()
    ys = nt.tensor(rng.uniform(-2, 2, 40).astype("float32"), names=("i",)).requires_grad_()
    cf, got = compiled_quietly(lambda x, y: x ** y * 2.0, xs, ys)
    assert [n.op.name for n in program(cf).graph.nodes] == ["fused[pow+mul]"]
    for a, e in zip(nt.grad(got.sum(), [xs, ys]), nt.grad((xs ** ys * 2.0).sum(), [xs, ys])):
        assert_close(a, e, rtol=1e-6, atol=1e-6)


def _residual(norm: str):
    """A residual add read by a norm and by an elementwise op after it."""

    def fn(x, r, w, b):
        h = x + r
        y = F.layer_norm(h, dim="embed", weight=w, bias=b) if norm == "layer" else F.rms_norm(h, dim="embed", weight=w)
        return h * 0.5 + y.tanh()

    return fn


@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("x_grad", [True, False])
def test_a_residual_add_joins_the_norm_of_its_sum(norm, x_grad):
    pytest.importorskip("numba")
    names = ("batch", "seq", "embed")
    x = rnd(3, 4, 16, names=names, dtype="float64").requires_grad_(x_grad)
    r = rnd(3, 4, 16, names=names, seed=1, dtype="float64").requires_grad_()
    w = rnd(16, names=("embed",), seed=2, dtype="float64").requires_grad_()
    b = rnd(16, names=("embed",), seed=3, dtype="float64").requires_grad_()
    fn = _residual(norm)
    cf, got = compiled_quietly(fn, x, r, w, b)
    assert "residual norms joined: 1" in cf.explain()
    ops = [n.op.name for n in program(cf).graph.nodes]
    assert ops[0] == f"add+{norm}_norm" and "add" not in ops and f"{norm}_norm" not in ops
    want = fn(x, r, w, b)
    assert got.names == want.names
    assert_close(got, want, rtol=1e-12, atol=1e-12)
    inputs = [t for t in (x, r, w, b) if t.requires_grad and (norm == "layer" or t is not b)]
    g = rnd(3, 4, 16, names=names, seed=4, dtype="float64")
    for a, e in zip(nt.grad(got, inputs, g), nt.grad(want, inputs, g)):
        assert a.names == e.names
        assert_close(a, e, rtol=1e-12, atol=1e-12)
    assert gradcheck(cf, x, r, w, b)
    assert gradgradcheck(cf, x, r, w, b)


@pytest.mark.parametrize("case", ["broadcast", "an unnamed operand", "dim inside", "weight made after"])
def test_a_residual_add_stays_apart_where_it_cannot_join(case):
    pytest.importorskip("numba")
    x = rnd(3, 4, 16, names=("batch", "seq", "embed"))
    r = rnd(3, 4, 16, names=("batch", "seq", "embed"), seed=1)
    w = rnd(16, names=("embed",), seed=2)
    fns = {
        "broadcast": lambda x, r: F.layer_norm(x + w, dim="embed") * r,
        "an unnamed operand": lambda x, r: F.layer_norm(x + r.rename(None), dim="embed"),
        "dim inside": lambda x, r: F.layer_norm(x + r, dim="seq"),
        "weight made after": lambda x, r: (lambda h: F.layer_norm(h, dim="embed", weight=(w * h.mean()).tanh()))(x + r),
    }
    cf, got = compiled_quietly(fns[case], x, r)
    assert "residual norms joined: 0" in cf.explain()
    want = fns[case](x, r)
    assert got.names == want.names
    assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_on_the_gpu_a_residual_add_joins_its_norm_too(norm):
    # optimised as for CuPy (traced on the CPU): the CUDA norm kernel does both (tests/test_cuda_kernels.py)
    from namedtensor.compiler import api, capture

    names = ("batch", "seq", "embed")
    args = [rnd(3, 4, 16, names=names), rnd(3, 4, 16, names=names, seed=1), rnd(16, names=("embed",), seed=2),
            rnd(16, names=("embed",), seed=3)]
    leaves, tree = capture.flatten((args, {}))
    graph = capture.capture(_residual(norm), list(leaves), tree)
    report = api.optimize_for(graph, "cupy", fuse=True)
    assert report["residual norms joined"] == 1 and "row kernels" not in report
    assert [n.op.name for n in graph.nodes][0] == f"add+{norm}_norm"
    unfused = capture.capture(_residual(norm), list(leaves), tree)
    assert "residual norms joined" not in api.optimize_for(unfused, "cupy", fuse=False)


def test_a_joined_residual_norm_takes_operands_in_any_memory_layout():
    pytest.importorskip("numba")
    # transposed views with the names (batch, seq, embed): the sum is not row-major either, so the node
    # runs the add and the norm's steps on whole arrays, forward and backward
    x = rnd(16, 3, 4, names=("embed", "batch", "seq"), dtype="float64").align_to("batch", "seq", "embed")
    r = rnd(16, 3, 4, names=("embed", "batch", "seq"), seed=1, dtype="float64").align_to("batch", "seq", "embed")
    x, r = x.requires_grad_(), r.requires_grad_()
    w = rnd(16, names=("embed",), seed=2, dtype="float64").requires_grad_()
    b = rnd(16, names=("embed",), seed=3, dtype="float64").requires_grad_()
    for norm in ("layer", "rms"):
        fn = _residual(norm)
        cf, got = compiled_quietly(fn, x, r, w, b)
        assert "residual norms joined: 1" in cf.explain()
        want = fn(x, r, w, b)
        assert_close(got, want, rtol=1e-12, atol=1e-12)
        inputs = [x, r, w] + ([b] if norm == "layer" else [])
        for a, e in zip(nt.grad(got.sum(), inputs), nt.grad(want.sum(), inputs)):
            assert_close(a, e, rtol=1e-12, atol=1e-12)


def _attention_weights(how: str):
    """Scale + mask + softmax (or log-softmax) of scores, as attention written by hand has them."""
    return lambda s, mask: getattr(s * 0.3 + mask, how)("key")


@pytest.mark.parametrize("how", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", [1, 3])
def test_scale_mask_and_softmax_are_one_kernel_forward_and_backward(split_calls, how, dtype, threads):
    pytest.importorskip("numba")
    split_calls(threads)
    s = rnd(2, 3, 6, 9, names=("batch", "head", "query", "key"), dtype=dtype).requires_grad_()
    # a causal mask (-inf above the diagonal) for softmax; log-softmax gets a finite one (-inf would be
    # its output)
    above = np.triu(np.ones((6, 9), dtype=bool), 1)
    mask = nt.tensor(np.where(above, -np.inf if how == "softmax" else -30.0, 0.0).astype(dtype),
                     names=("query", "key"))
    fn = _attention_weights(how)
    cf, got = compiled_quietly(fn, s, mask)
    assert [n.op.name for n in program(cf).graph.nodes] == [f"fused[mul+add+{how}]"]
    want = fn(s, mask)
    tol = 1e-12 if dtype == "float64" else 2e-6
    assert got.names == want.names and got.dtype == want.dtype
    assert_close(got, want, rtol=tol, atol=tol)
    g = rnd(2, 3, 6, 9, names=("batch", "head", "query", "key"), seed=1, dtype=dtype)
    (a,), (e,) = nt.grad(got, [s], g), nt.grad(want, [s], g)
    assert a.names == e.names
    assert_close(a, e, rtol=tol, atol=tol)
    if dtype == "float64":
        assert gradcheck(cf, s, mask)
        assert gradgradcheck(cf, s, mask)


def test_a_softmax_kernel_gives_nan_and_masked_rows_as_numpy_does():
    pytest.importorskip("numba")
    a = np.random.default_rng(0).standard_normal((4, 5))
    a[1, 2] = np.nan  # a NaN row stays NaN
    a[2] = -np.inf  # a row with nothing to attend: NaN, as exp(-inf - -inf)
    a[3, 1] = np.inf
    x = nt.tensor(a, names=("query", "key"))
    for how in ("softmax", "log_softmax"):
        fn = lambda x: getattr(x * 1.0 + 0.0, how)("key")
        cf, got = compiled_quietly(fn, x)
        assert [n.op.name for n in program(cf).graph.nodes] == [f"fused[mul+add+{how}]"]
        with np.errstate(invalid="ignore"):
            want = fn(x)
        assert_close(got, want, rtol=1e-12, atol=1e-12)  # NaNs where NumPy has them


@pytest.mark.parametrize("how", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dim", ["head", "query"])
def test_a_softmax_along_another_dim_is_one_kernel_by_columns_on_the_cpu(split_calls, how, dtype, threads, dim):
    pytest.importorskip("numba")
    split_calls(threads)
    a = np.random.default_rng(0).standard_normal((3, 6, 9)) * 3
    a[1, 3, 5] = np.nan  # a NaN column stays NaN
    a[2, 4, 6] = 1e22  # beyond 2^20 sin's fast argument reduction is inexact: that chunk is done again exactly
    s = nt.tensor(a.astype(dtype), names=("head", "query", "key")).requires_grad_()
    m = np.zeros((3, 6, 9))
    m[:, 1, 2] = -np.inf  # along "head": a column of -inf (NaN, as exp(-inf - -inf)), along "query" one -inf
    m[0, :, 4] = -np.inf  # along "query": a column of -inf, along "head" one -inf
    mask = nt.tensor(m.astype(dtype), names=("head", "query", "key"))
    w = nt.tensor(np.linspace(0.5, 3, 9).astype(dtype), names=("key",)).requires_grad_()  # broadcast along the others
    fn = lambda s, mask, w: getattr(s.sin() * w + mask, how)(dim)
    with np.errstate(invalid="ignore"):
        cf, got = compiled_quietly(fn, s, mask, w)
        want = fn(s, mask, w)
    assert [n.op.name for n in program(cf).graph.nodes] == [f"fused[sin+mul+add+{how}]"]
    tol = 1e-12 if dtype == "float64" else 2e-6
    assert got.names == want.names and got.dtype == want.dtype
    assert_close(got, want, rtol=tol, atol=tol)  # NaNs where eager has them
    g = rnd(3, 6, 9, names=("head", "query", "key"), seed=2, dtype=dtype)
    with np.errstate(invalid="ignore"):
        for ga, ge in zip(nt.grad(got, [s, w], g), nt.grad(want, [s, w], g)):  # w's summed over the other dims
            assert_close(ga, ge, rtol=10 * tol, atol=10 * tol)
    if dtype == "float64" and threads == 1:
        small = rnd(3, 4, 5, names=("head", "query", "key"), seed=3, dtype=dtype).requires_grad_()
        assert gradcheck(nt.compile(fn), small, rnd(3, 4, 5, names=("head", "query", "key"), seed=4, dtype=dtype),
                         rnd(5, names=("key",), seed=5, dtype=dtype))
    # on the GPU too (its kernel takes blocks of columns: tests/test_cuda_emulated.py runs it)
    assert [c.label() for c, _ in cuda_chains(fn, s, mask, w)] == [f"sin+mul+add+{how}"]
    for shape in ((0, 6, 9), (3, 0, 9), (3, 6, 0), (1, 1, 9)):  # empty along the dim, or across it
        e = rnd(*shape, names=("head", "query", "key"), dtype=dtype)
        cf, got = compiled_quietly(lambda e: getattr(e * 3.0, how)(dim), e)
        assert got.shape == shape and [n.op.name for n in program(cf).graph.nodes] == [f"fused[mul+{how}]"]
        assert_close(got, getattr(e * 3.0, how)(dim), rtol=tol, atol=tol)
    mask = rnd(6, 9, names=("query", "key"), seed=1)
    ((chain, _),) = cuda_chains(_attention_weights("softmax"), s, mask)
    assert chain.label() == "mul+add+softmax"


def test_a_softmax_chain_saves_its_output_as_the_eager_softmax_does():
    pytest.importorskip("numba")
    s = rnd(4, 6, names=("query", "key"), dtype="float64").requires_grad_()
    mask = rnd(4, 6, names=("query", "key"), seed=1, dtype="float64")
    cf, got = compiled_quietly(_attention_weights("softmax"), s, mask)
    (node,) = program(cf).graph.nodes
    assert node.op.saves_output and node.op.saves == (0, 1)
    got.mul_(2.0)  # the backward reads the output: an edit of it is caught, as eagerly
    with pytest.raises(RuntimeError, match="modified in place"):
        nt.grad(got.sum(), [s])
