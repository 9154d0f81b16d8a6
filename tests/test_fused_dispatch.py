"""The fused ops' dispatch to the backend hooks, and the NumPy references of the CUDA kernels.

``ReferenceBackend`` is NumPy with every fused hook replaced by its reference in
:mod:`namedtensor.backends.kernel_reference` (the CUDA kernels' algorithms; attention in 4x3
tiles, so partial tiles and the causal skip are exercised) and ``fused_attention`` on.  Every op
with a hook runs on it and on the plain backend (NumPy, then array-api-strict): the hook ran, and
values, names and gradients agree; gradients also pass gradcheck in float64 through it.
Attention also runs through the base class's default hooks (``fused_attention`` switched on for a
plain backend: what a GPU backend falls back to for inputs its kernel does not take).

The second half checks the references against straightforward NumPy formulas (Hypothesis over
shapes and axes), in float64 and, with the tolerances of ``TOL``, float32 and float16.
"""

import collections
import contextlib
import functools
import inspect
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
import namedtensor.nn.functional as F
from namedtensor import backends, optim
from namedtensor.backends import kernel_reference as kr
from namedtensor.backends.base import Backend
from namedtensor.backends.numpy_backend import NumpyBackend
from namedtensor.testing import gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

HOOKS = ("softmax", "softmax_backward", "cross_entropy", "cross_entropy_backward", "adamw_", "gelu",
         "gelu_backward", "norm_rows", "norm_rows_backward", "attention", "attention_backward")
TILES = {"block_m": 4, "block_n": 3}


def _hook(name: str):
    fn = getattr(kr, name)
    fixed = TILES if name.startswith("attention") else {}

    def call(self, *args, **kwargs):
        self.calls[name] += 1
        if name == "attention":  # the kernels take (N, L, D): the backend flattens the batch dims for them
            return self._attention_3d(functools.partial(fn, **fixed), *args, **kwargs)
        if name == "attention_backward":
            return self._attention_backward_3d(functools.partial(fn, **fixed), *args, **kwargs)
        return fn(*args, **kwargs, **fixed)

    call.__name__ = name
    return call


class ReferenceBackend(NumpyBackend):
    """NumPy, its fused hooks the kernels' NumPy references; ``calls`` counts the hooks' calls."""

    name = "reference"
    fused_attention = True

    def __init__(self) -> None:
        super().__init__()
        self.calls = collections.Counter()


for _name in HOOKS:
    setattr(ReferenceBackend, _name, _hook(_name))

REF = ReferenceBackend()
_GENERIC = {}


def generic(plain: Backend) -> Backend:
    """``plain``'s class with ``fused_attention`` on: attention by the base class's default hooks."""
    cls = type(plain)
    if cls not in _GENERIC:
        class Generic(cls):
            name = "generic-" + cls.name
            fused_attention = True

            def __init__(self) -> None:
                super().__init__()
                self.calls = collections.Counter()

            def attention(self, *args, **kwargs):
                self.calls["attention"] += 1
                return Backend.attention(self, *args, **kwargs)

            def attention_backward(self, *args, **kwargs):
                self.calls["attention_backward"] += 1
                return Backend.attention_backward(self, *args, **kwargs)

        _GENERIC[cls] = Generic()
    b = _GENERIC[cls]
    b.calls.clear()
    return b


@contextlib.contextmanager
def on(B: Backend):
    """Make ``B`` the CPU backend for a while: factories, gradcheck's probes and the ops run on it."""
    prev = backends._cpu
    backends._cpu = B
    try:
        yield B
    finally:
        backends._cpu = prev


def evaluate(B: Backend, fn, inputs, seed: int = 0):
    """``fn`` of tensors made on ``B`` from ``(array, names, requires_grad)``: the outputs (arrays and
    names) and the gradients of ``sum(outputs * fixed random weights)`` for the inputs that require grad."""
    with on(B):
        ts = []
        for a, names, rg in inputs:
            t = nt.tensor(a, names=names)
            ts.append(t.requires_grad_() if rg else t)
        out = fn(*ts)
        outs = list(out) if isinstance(out, tuple) else [out]
        rng = np.random.default_rng(seed)
        total = None
        for o in outs:
            w = nt.tensor(rng.uniform(-1, 1, o.shape).astype(o.dtype.name), names=o.names)
            term = (o * w).sum()
            total = term if total is None else total + term
        wanted = [t for t in ts if t.requires_grad]
        grads = nt.grad(total, wanted) if wanted else ()
        return [(o.detach().numpy(), o.names) for o in outs], [(g.numpy(), g.names) for g in grads]


def same(got, want, rtol=1e-9, atol=1e-12):
    """Two :func:`evaluate` results agree: names exactly, values and gradients within tolerance."""
    for part_got, part_want in zip(got, want):
        assert len(part_got) == len(part_want)
        for (a, a_names), (b, b_names) in zip(part_got, part_want):
            assert a_names == b_names
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def fused_and_plain(fn, inputs, fused: Backend):
    """:func:`evaluate` on ``fused`` (its call counts reset first) and on the active plain backend."""
    plain = backends.cpu()
    fused.calls.clear()
    return evaluate(fused, fn, inputs), evaluate(plain, fn, inputs)


# ============================================================================= dispatch


@st.composite
def softmax_case(draw):
    shape, names = draw(nts.named_shapes(min_dims=1, max_dims=4, max_side=5))
    ax = draw(st.integers(0, len(shape) - 1))
    dim = names[ax] if names[ax] is not None and draw(st.booleans()) else ax
    return names, dim, draw(nts.arrays(shape))


@pytest.mark.usefixtures("backend")
@given(case=softmax_case(), log=st.booleans())
def test_softmax_over_any_dim_runs_the_hooks_and_equals_the_plain_op(case, log):
    names, dim, a = case

    def fn(t):
        return t.log_softmax(dim) if log else t.softmax(dim)

    got, want = fused_and_plain(fn, [(a, names, True)], REF)
    assert REF.calls == {"softmax": 1, "softmax_backward": 1}
    same(got, want)


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [None, -100, 2])
@pytest.mark.parametrize("target_dtype", ["int64", "int32"])
def test_cross_entropy_runs_the_hooks_and_equals_the_plain_op(reduction, ignore_index, target_dtype):
    rng = np.random.default_rng(1)
    logits = rng.uniform(-3, 3, (3, 4, 5))  # (batch, seq, vocab)
    target = rng.integers(0, 5, (4, 3))  # (seq, batch): matched by name
    if ignore_index == -100:
        target[1] = -100
        target[3, 0] = -100

    def fn(x, t):
        return F.cross_entropy(x, t, dim="vocab", ignore_index=ignore_index, reduction=reduction)

    got, want = fused_and_plain(fn, [(logits, ("batch", "seq", "vocab"), True),
                                     (target.astype(target_dtype), ("seq", "batch"), False)], REF)
    assert REF.calls == {"cross_entropy": 1, "cross_entropy_backward": 1}
    same(got, want)


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("variant", ["class dim not last", "label smoothing", "class probabilities"])
def test_cross_entropy_keeps_its_own_path_where_the_hooks_do_not_apply(variant):
    rng = np.random.default_rng(2)
    names = ("batch", "vocab", "seq") if variant == "class dim not last" else ("batch", "seq", "vocab")
    logits = rng.uniform(-3, 3, (3, 5, 4) if variant == "class dim not last" else (3, 4, 5))
    if variant == "class probabilities":
        target = (rng.dirichlet(np.ones(5), (3, 4)), ("batch", "seq", "vocab"), False)
    else:
        target = (rng.integers(0, 5, (3, 4)), ("batch", "seq"), False)
    smoothing = 0.1 if variant == "label smoothing" else 0.0

    def fn(x, t):
        return F.cross_entropy(x, t, dim="vocab", label_smoothing=smoothing)

    got, want = fused_and_plain(fn, [(logits, names, True), target], REF)
    assert REF.calls["cross_entropy"] == REF.calls["cross_entropy_backward"] == 0
    same(got, want)


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "gelu"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_norms_and_gelu_run_the_hooks_and_equal_the_plain_ops(op, dtype):
    rng = np.random.default_rng(3)
    x = (rng.uniform(-2, 2, (2, 3, 6)).astype(dtype), ("batch", "seq", "embed"), True)
    w = (rng.uniform(0.5, 1.5, 6).astype(dtype), ("embed",), True)
    b = (rng.uniform(-1, 1, 6).astype(dtype), ("embed",), True)
    if op == "layer_norm":
        fn, inputs, hook = (lambda x, w, b: F.layer_norm(x, "embed", w, b)), [x, w, b], "norm_rows"
    elif op == "rms_norm":
        fn, inputs, hook = (lambda x, w: F.rms_norm(x, "embed", w)), [x, w], "norm_rows"
    else:
        fn, inputs, hook = (lambda x: F.gelu(x)), [x], "gelu"
    got, want = fused_and_plain(fn, inputs, REF)
    assert REF.calls == {hook: 1, hook + "_backward": 1}
    tol = {"rtol": 1e-9, "atol": 1e-12} if dtype == "float64" else {"rtol": 2e-5, "atol": 2e-6}
    same(got, want, **tol)


def _attention_case(name: str, rng):
    """``(fn, inputs)`` of one attention call: q, k, v (and a mask) as (array, names, requires_grad)."""
    b, h, s, n, d, e = 2, 3, 7, 7, 3, 2
    causal = False
    q_names, k_names, v_names = ("b", "h", "s", "d"), ("b", "h", "key", "d"), ("b", "h", "key", "e")
    q_shape, k_shape, v_shape = (b, h, s, d), (b, h, n, d), (b, h, n, e)
    mask = None
    query_dim = None
    if name == "causal":
        causal = True
    elif name in ("padding", "causal+padding", "padding mask with a size-1 seq dim"):
        keep = rng.random((b, n)) < 0.7
        keep[1] = False  # a batch row with no key: every query of it fully masked
        keep[0, 0] = False  # with causal: query 0 of row 0 has no key
        keep[0, 3] = True
        if name == "padding mask with a size-1 seq dim":
            mask = (keep[:, None, :], ("b", "s", "key"), False)
        elif name == "padding":
            mask = (keep.T.copy(), ("key", "b"), False)  # matched to the weights by name
        else:
            mask = (keep, ("b", "key"), False)
        causal = name == "causal+padding"
        s = 5  # rectangular: 5 queries, 7 keys
        q_shape = (b, h, s, d)
    elif name == "multi-query":
        k_names, v_names = ("b", "key", "d"), ("b", "key", "e")
        k_shape, v_shape = (b, n, d), (b, n, e)
        query_dim, causal = "s", True
    elif name == "batch dims in other orders":
        q_names, q_shape = ("s", "b", "d", "h"), (s, b, d, h)
        k_names, k_shape = ("h", "key", "b", "d"), (h, n, b, d)
    elif name == "q broadcasts a batch dim":
        q_shape = (b, 1, s, d)
    inputs = [(rng.standard_normal(q_shape), q_names, True), (rng.standard_normal(k_shape), k_names, True),
              (rng.standard_normal(v_shape), v_names, True)]

    def fn(q, k, v, m=None):
        return F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", query_dim=query_dim, mask=m,
                                              is_causal=causal)

    return fn, inputs + ([mask] if mask is not None else [])


ATTENTION_CASES = ["no mask", "causal", "padding", "causal+padding", "padding mask with a size-1 seq dim",
                   "multi-query", "batch dims in other orders", "q broadcasts a batch dim"]


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("case", ATTENTION_CASES)
@pytest.mark.parametrize("kind", ["reference", "generic"])
def test_attention_runs_the_fused_hooks_and_equals_the_plain_op(case, kind):
    fn, inputs = _attention_case(case, np.random.default_rng(4))
    fused = REF if kind == "reference" else generic(backends.cpu())
    got, want = fused_and_plain(fn, inputs, fused)
    assert fused.calls == {"attention": 1, "attention_backward": 1}
    same(got, want)


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("variant", ["dropout", "float mask", "weights", "mask varying along the queries"])
def test_attention_keeps_its_own_path_where_the_kernel_does_not_apply(variant):
    rng = np.random.default_rng(5)
    q = (rng.standard_normal((2, 4, 3)), ("b", "s", "d"), True)
    k = (rng.standard_normal((2, 5, 3)), ("b", "key", "d"), True)
    v = (rng.standard_normal((2, 5, 2)), ("b", "key", "e"), True)
    inputs = [q, k, v]
    if variant == "float mask":
        inputs.append((rng.standard_normal((4, 5)), ("s", "key"), False))
    elif variant == "mask varying along the queries":
        inputs.append((rng.random((2, 4, 5)) < 0.6, ("b", "s", "key"), False))

    def fn(q, k, v, m=None):
        return F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", mask=m,
                                              dropout_p=0.5 if variant == "dropout" else 0.0,
                                              return_weights=variant == "weights")

    if variant == "dropout":  # random: only the path is checked
        REF.calls.clear()
        evaluate(REF, fn, inputs)
        assert REF.calls["attention"] == 0
        return
    got, want = fused_and_plain(fn, inputs, REF)
    assert REF.calls["attention"] == REF.calls["attention_backward"] == 0
    same(got, want)


def test_gradcheck_through_the_reference_kernels():
    rng = np.random.default_rng(6)
    with on(REF):
        x = nt.tensor(rng.uniform(-2, 2, (2, 3, 4)), names=("a", "b", "c"), requires_grad=True)
        gradcheck(lambda t: t.softmax("b"), x)
        gradcheck(lambda t: t.log_softmax("c"), x)
        target = nt.tensor(np.array([[0, 3, -1], [2, -1, 1]]), names=("a", "b"))
        gradcheck(lambda t: F.cross_entropy(t, target, dim="c", ignore_index=-1), x)
        w = nt.tensor(rng.uniform(0.5, 1.5, 4), names=("c",), requires_grad=True)
        gradcheck(lambda t, w: F.layer_norm(t, "c", w, w * 0.5), x, w)
        gradcheck(lambda t, w: F.rms_norm(t, "c", w), x, w)
        gradcheck(F.gelu, x)
        q = nt.tensor(rng.standard_normal((2, 2, 5, 2)), names=("b", "h", "s", "d"), requires_grad=True)
        k = nt.tensor(rng.standard_normal((2, 4, 2)), names=("b", "key", "d"), requires_grad=True)
        v = nt.tensor(rng.standard_normal((2, 4, 3)), names=("b", "key", "e"), requires_grad=True)
        keep = nt.tensor(np.array([[False, True, True, False], [True, True, False, True]]), names=("b", "key"))

        def att(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", query_dim="s", mask=keep,
                                                  is_causal=True)

        REF.calls.clear()
        gradcheck(att, q, k, v)
        assert REF.calls["attention_backward"] == 1  # the fused path's gradient was the one checked


def test_second_order_gradients_through_the_fused_ops():
    # under create_graph the fused ops' gradients are tensor ops, differentiable again
    rng = np.random.default_rng(7)
    with on(REF):
        x = nt.tensor(rng.uniform(-2, 2, (2, 3)), names=("a", "c"), requires_grad=True)
        gradgradcheck(lambda t: t.softmax("c"), x)
        gradgradcheck(lambda t: t.log_softmax("a"), x)
        target = nt.tensor(np.array([2, -1]), names=("a",))
        gradgradcheck(lambda t: F.cross_entropy(t, target, dim="c", ignore_index=-1, reduction="sum"), x)
        q = nt.tensor(rng.standard_normal((3, 2)), names=("s", "d"), requires_grad=True)
        k = nt.tensor(rng.standard_normal((4, 2)), names=("key", "d"), requires_grad=True)
        v = nt.tensor(rng.standard_normal((4, 2)), names=("key", "e"), requires_grad=True)
        REF.calls.clear()
        gradgradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key",
                                                                     is_causal=True), q, k, v)
        assert REF.calls["attention"] > 0


ADAM_CASES = [("AdamW", {}, 10), ("Adam", {"weight_decay": 0.1}, 10), ("AdamW", {"weight_decay": 0.0}, 10),
              ("Adam", {"amsgrad": True}, 0), ("AdamW", {"maximize": True}, 0)]


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("kind, options, n_calls", ADAM_CASES)
def test_adam_updates_all_parameters_of_a_dtype_in_one_hook_call(kind, options, n_calls):
    rng = np.random.default_rng(8)
    specs = [((3, 4), "float64"), ((5,), "float32"), ((4, 2), "float32"), ((2, 3), "float64"), ((3,), "float64")]
    values = [rng.standard_normal(s).astype(d) for s, d in specs]
    grads = [[rng.standard_normal(s).astype(d) for s, d in specs] for _ in range(3)]

    def train(B):
        with on(B):
            ps = []
            for i, a in enumerate(values):
                names = ("r", "c")[: a.ndim]
                if i == 2:  # a non-contiguous leaf: the update must land in its buffer
                    p = nt.tensor(a.T.copy(), names=names[::-1]).transpose("c", "r").detach().requires_grad_()
                else:
                    p = nt.tensor(a, names=names).requires_grad_()
                ps.append(p)
            groups = [{"params": ps[:3]}, {"params": ps[3:], "lr": 0.01, "betas": (0.8, 0.9)}]
            opt = getattr(optim, kind)(groups, lr=0.05, **options)
            for step, gs in enumerate(grads):
                for i, (p, g) in enumerate(zip(ps, gs)):
                    # the last parameter skips step 2: at step 3 its step count differs from its group's
                    p.grad = None if (i == 4 and step == 1) else nt.tensor(g, names=p.names)
                opt.step()
            state = opt.state_dict()["state"]
            return [p.detach().numpy() for p in ps], state

    REF.calls.clear()
    got, got_state = train(REF)
    assert REF.calls["adamw_"] == n_calls  # (2 dtypes in group 1 + 1 or 2 step counts in group 2) per step
    want, want_state = train(backends.cpu())
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5 if a.dtype == np.float32 else 1e-12, atol=1e-7)
    assert got_state.keys() == want_state.keys()
    for i in want_state:
        assert got_state[i].keys() == want_state[i].keys()
        assert got_state[i]["step"] == want_state[i]["step"] == (2 if i == 4 else 3)
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(got_state[i][key].numpy(), want_state[i][key].numpy(), rtol=1e-5, atol=1e-8)


# ============================================================================= the references

#: tolerances of the references against float64 formulas: float16 results are rounded once to
#: float16 (relative error 2^-11, about 4.9e-4) from float32 accumulation; float32 results carry a
#: few float32 roundings (each 6e-8)
TOL = {"float64": {"rtol": 1e-10, "atol": 1e-12}, "float32": {"rtol": 2e-5, "atol": 2e-6},
       "float16": {"rtol": 2e-3, "atol": 2e-3}}
DTYPES = st.sampled_from(["float64", "float32", "float16"])


def close(got, want, dtype: str, **tol) -> None:
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, **{**TOL[dtype], **tol})


def test_the_references_have_the_hook_signatures():
    for name in HOOKS:
        hook = list(inspect.signature(getattr(Backend, name)).parameters.values())[1:]  # without self
        ref = list(inspect.signature(getattr(kr, name)).parameters.values())
        assert [(p.name, p.kind) for p in ref[: len(hook)]] == [(p.name, p.kind) for p in hook], name
        extra = ref[len(hook):]  # tile and chunk sizes, with defaults
        assert all(p.kind is p.KEYWORD_ONLY and p.default is not p.empty for p in extra), name
    assert {p.name: p.default for p in inspect.signature(kr.attention).parameters.values()
            if p.name.startswith("block")} == {"block_m": 64, "block_n": 64}


@st.composite
def array_and_axis(draw, max_dims=4):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=max_dims)))
    dtype = draw(DTYPES)
    return draw(nts.arrays(shape, "float64", -4, 4)).astype(dtype), draw(st.integers(-len(shape), len(shape) - 1))


@given(case=array_and_axis(), log=st.booleans())
def test_reference_softmax_over_any_axis(case, log):
    x, axis = case
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)
    y = kr.softmax(x, axis, log)
    close(y, np.log(p) if log else p, x.dtype.name)
    g = np.random.default_rng(0).uniform(-1, 1, x.shape).astype(x.dtype)
    g64 = g.astype(np.float64)
    # the vector-Jacobian products from the definitions (y computed in float64 from the same input)
    want = g64 - p * g64.sum(axis=axis, keepdims=True) if log else p * (g64 - (g64 * p).sum(axis=axis, keepdims=True))
    y_in = np.log(p) if log else p
    close(kr.softmax_backward(y_in.astype(x.dtype), g, axis, log), want, x.dtype.name,
          **({"rtol": 1e-2, "atol": 1e-2} if x.dtype == np.float16 else {}))  # y itself rounded to float16


@st.composite
def ce_case(draw):
    rows, classes = draw(st.integers(1, 6)), draw(st.integers(1, 7))
    dtype = draw(DTYPES)
    logits = draw(nts.arrays((rows, classes), "float64", -4, 4)).astype(dtype)
    target = draw(nts.arrays((rows,), "int64", 0, classes - 1))
    ignored = draw(nts.arrays((rows,), "bool"))
    return logits, np.where(ignored, -100, target), draw(nts.arrays((rows,), "float64", -1, 1)).astype(dtype)


@given(case=ce_case())
def test_reference_cross_entropy(case):
    logits, target, g = case
    x = logits.astype(np.float64)
    lse = np.log(np.exp(x).sum(axis=1))
    valid = target != -100
    picked = x[np.arange(len(x)), np.where(valid, target, 0)]
    loss, got_lse = kr.cross_entropy(logits, target, -100)
    close(got_lse, lse, logits.dtype.name)
    close(loss, np.where(valid, lse - picked, 0.0), logits.dtype.name)
    onehot = np.eye(x.shape[1])[np.where(valid, target, 0)]
    want = (np.exp(x - lse[:, None]) - onehot) * np.where(valid, g.astype(np.float64), 0.0)[:, None]
    close(kr.cross_entropy_backward(logits, got_lse, target, g, -100), want, logits.dtype.name)


@st.composite
def norm_case(draw):
    rows, n = draw(st.integers(1, 5)), draw(st.integers(1, 8))
    dtype = draw(DTYPES)
    x = draw(nts.arrays((rows, n), "float64", -3, 3)).astype(dtype)
    w = draw(st.none() | nts.arrays((n,), "float64", 0.5, 1.5))
    b = draw(st.none() | nts.arrays((n,), "float64", -1, 1))
    w, b = (None if a is None else a.astype(dtype) for a in (w, b))
    return x, w, b, draw(st.booleans()), draw(nts.arrays((rows, n), "float64", -1, 1)).astype(dtype)


@given(case=norm_case())
def test_reference_layer_and_rms_norm(case):
    x, w, b, centered, g = case
    if not centered:
        b = None
    eps = 1e-5
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    w64 = np.ones(x.shape[1]) if w is None else w.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True) if centered else 0.0
    rstd = 1 / np.sqrt(((x64 - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    xhat = (x64 - mean) * rstd
    y, got_mean, got_rstd = kr.norm_rows(x, x.shape[1], w, b, eps, centered)
    dtype = x.dtype.name
    close(y, xhat * w64 + (0.0 if b is None else b.astype(np.float64)), dtype)
    close(got_rstd, rstd[:, 0], dtype if dtype != "float16" else "float32")  # float16: float32 statistics
    assert (got_mean is None) == (not centered)
    gx, gw, gb = kr.norm_rows_backward(x, x.shape[1], got_mean, got_rstd, w, g, True, w is not None, b is not None)
    close(gx, input_grad(x64, g64, w64, centered, eps), dtype,
          **({"rtol": 1e-2, "atol": 1e-2} if dtype == "float16" else {"rtol": 1e-6, "atol": 1e-7}))
    if w is not None:
        close(gw, (g64 * xhat).sum(axis=0), dtype)
    if b is not None:
        close(gb, g64.sum(axis=0), dtype)


def input_grad(x, g, w, centered: bool, eps: float):
    """The input gradient of sum(g * norm(x) * w) by central differences (float64)."""
    def f(x):
        mean = x.mean(axis=1, keepdims=True) if centered else 0.0
        return (g * (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + eps) * w).sum()

    return numeric_grad(f, x)


def numeric_grad(f, x, h=1e-6):
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = h
        out[i] = (f(x + d) - f(x - d)) / (2 * h)
    return out


@given(x=st.tuples(st.integers(1, 40), DTYPES).flatmap(lambda c: nts.arrays((c[0],), "float64", -5, 5).map(
    lambda a: a.astype(c[1]))))
def test_reference_gelu(x):
    x64 = x.astype(np.float64)
    cdf = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x64])
    y, got_cdf = kr.gelu(x)
    close(y, x64 * cdf, x.dtype.name)
    close(got_cdf, cdf, x.dtype.name)
    g = np.linspace(-1, 1, x.size).astype(x.dtype)
    want = g.astype(np.float64) * (cdf + x64 * np.exp(-x64 * x64 / 2) / math.sqrt(2 * math.pi))
    close(kr.gelu_backward(x, got_cdf, g), want, x.dtype.name)


def adam_formula(p, g, m, v, *, lr, beta1, beta2, eps, weight_decay, step, decoupled):
    """PyTorch's Adam/AdamW step, per tensor, in float64."""
    if decoupled:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    denom = np.sqrt(v) / math.sqrt(1 - beta2 ** step) + eps
    return p - lr / (1 - beta1 ** step) * m / denom, m, v


@pytest.mark.parametrize("decoupled", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_reference_adamw_chunks_over_several_tensors(decoupled, weight_decay):
    rng = np.random.default_rng(9)
    shapes = [(7,), (3, 4), (), (0,), (2, 5)]
    params = [rng.standard_normal(s) for s in shapes]
    params[1] = np.asfortranarray(params[1])  # not C-contiguous: updated through a copy
    ms, vs = [np.zeros(s) for s in shapes], [np.zeros(s) for s in shapes]
    want = [(p.copy(), m.copy(), v.copy()) for p, m, v in zip(params, ms, vs)]
    hyper = {"lr": 0.05, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": weight_decay,
             "decoupled": decoupled}
    for step in (1, 2, 3):
        grads = [rng.standard_normal(s) for s in shapes]
        kr.adamw_(params, grads, ms, vs, step=step, chunk=5, **hyper)  # chunks end inside tensors
        want = [adam_formula(p, g, m, v, step=step, **hyper) for (p, m, v), g in zip(want, grads)]
    for got, w in zip(zip(params, ms, vs), want):
        for a, b in zip(got, w):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_reference_adamw_computes_in_float32(dtype):
    rng = np.random.default_rng(10)
    p, g = rng.standard_normal(50).astype(dtype), rng.standard_normal(50).astype(dtype)
    m, v = (rng.standard_normal(50) * 0.1).astype(dtype), rng.uniform(0.1, 1, 50).astype(dtype)
    hyper = {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "decoupled": True,
             "step": 4}
    want = adam_formula(*(a.astype(np.float64) for a in (p, g, m, v)), **hyper)
    kr.adamw_([p], [g], [m], [v], **hyper)
    for got, w in zip((p, m, v), want):
        close(got, w, dtype)


def attention_formula(q, k, v, scale, causal, keep):
    """Attention with the (N, Lq, Lk) probabilities materialised, in float64: ``(p, out, lse)``."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = scale * q @ k.transpose(0, 2, 1)
    allowed = np.ones(s.shape, bool)
    if causal:
        allowed &= np.tril(np.ones(s.shape[1:], bool))
    if keep is not None:
        allowed &= keep[:, None, :]
    s = np.where(allowed, s, -np.inf)
    top = np.where(allowed.any(axis=2), s.max(axis=2), 0.0)
    e = np.where(allowed, np.exp(s - top[..., None]), 0.0)
    total = e.sum(axis=2)
    safe = np.where(total > 0, total, 1.0)
    p = e / safe[..., None]
    return p, p @ v, np.where(total > 0, top + np.log(safe), -np.inf)


def attention_grads_formula(q, k, v, p, g, scale):
    """dq, dk, dv from the materialised probabilities (softmax's Jacobian applied directly)."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    dp = g @ v.transpose(0, 2, 1)
    ds = p * (dp - (dp * p).sum(axis=2, keepdims=True))
    return scale * ds @ k, scale * ds.transpose(0, 2, 1) @ q, p.transpose(0, 2, 1) @ g


@st.composite
def attention_case(draw):
    n, lq, lk = draw(st.integers(1, 2)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    d, dv = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    q, k, v, g = (draw(nts.arrays(s, "float64", -2, 2)) for s in ((n, lq, d), (n, lk, d), (n, lk, dv), (n, lq, dv)))
    keep = draw(st.none() | nts.arrays((n, lk), "bool"))
    tiles = {"block_m": draw(st.integers(1, 5)), "block_n": draw(st.integers(1, 5))}
    return q, k, v, g, draw(st.booleans()), keep, tiles


@given(case=attention_case())
def test_reference_attention_forward_and_backward_in_any_tiles(case):
    q, k, v, g, causal, keep, tiles = case
    scale = 1 / math.sqrt(q.shape[2])
    p, out, lse = attention_formula(q, k, v, scale, causal, keep)
    got_out, got_lse = kr.attention(q, k, v, scale=scale, causal=causal, key_keep=keep, **tiles)
    close(got_out, out, "float64")
    assert got_lse.dtype == np.float64
    np.testing.assert_allclose(got_lse, lse, rtol=1e-10, atol=1e-12)  # -inf where a query has no key
    grads = kr.attention_backward(q, k, v, got_out, got_lse, g, scale=scale, causal=causal, key_keep=keep, **tiles)
    for got, want in zip(grads, attention_grads_formula(q, k, v, p, g, scale)):
        close(got, want, "float64")


def test_reference_attention_fully_masked_queries_give_zero_and_minus_infinity():
    rng = np.random.default_rng(11)
    q, k, v = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 2))
    keep = np.array([[False, True, True, True], [False] * 4])
    out, lse = kr.attention(q, k, v, scale=0.5, causal=True, key_keep=keep, block_m=2, block_n=3)
    assert np.all(out[1] == 0) and np.all(lse[1] == -np.inf)  # row 1: no key at all
    assert np.all(out[0, 0] == 0) and lse[0, 0] == -np.inf  # query 0 sees only key 0, masked
    assert np.all(np.isfinite(lse[0, 1:]))
    dq, dk, dv = kr.attention_backward(q, k, v, out, lse, np.ones_like(out), scale=0.5, causal=True,
                                       key_keep=keep, block_m=2, block_n=3)
    assert np.all(dq[1] == 0) and np.all(dq[0, 0] == 0) and np.all(dk[1] == 0) and np.all(dv[1] == 0)
    assert np.all(dk[0, 0] == 0) and np.all(dv[0, 0] == 0)  # a masked key gets no gradient


def test_reference_attention_skips_the_tiles_above_the_causal_diagonal(monkeypatch):
    seen = []
    original = kr._allowed

    def spy(i0, i1, j0, j1, causal, key_keep):
        seen.append((i0, j0))
        return original(i0, i1, j0, j1, causal, key_keep)

    monkeypatch.setattr(kr, "_allowed", spy)
    rng = np.random.default_rng(12)
    q, k, v = rng.standard_normal((1, 8, 2)), rng.standard_normal((1, 8, 2)), rng.standard_normal((1, 8, 2))
    out, lse = kr.attention(q, k, v, scale=1.0, causal=True, key_keep=None, block_m=2, block_n=2)
    assert sorted(seen) == [(i, j) for i in range(0, 8, 2) for j in range(0, i + 1, 2)]  # 10 of 16 tiles
    seen.clear()
    kr.attention_backward(q, k, v, out, lse, np.ones_like(out), scale=1.0, causal=True, key_keep=None,
                          block_m=2, block_n=2)
    assert sorted(seen) == [(i, j) for i in range(0, 8, 2) for j in range(0, i + 1, 2)]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_reference_attention_in_low_precision(dtype):
    rng = np.random.default_rng(13)
    q, k, v, g = (rng.uniform(-2, 2, s).astype(dtype) for s in ((2, 9, 8), (2, 11, 8), (2, 11, 4), (2, 9, 4)))
    keep = rng.random((2, 11)) < 0.8
    scale = 1 / math.sqrt(8)
    p, out, lse = attention_formula(q, k, v, scale, True, keep)
    got_out, got_lse = kr.attention(q, k, v, scale=scale, causal=True, key_keep=keep, block_m=4, block_n=4)
    close(got_out, out, dtype)
    assert got_lse.dtype == np.float32  # kept in float32 for float16 input
    np.testing.assert_allclose(got_lse, lse, rtol=1e-5, atol=1e-5)
    grads = kr.attention_backward(q, k, v, got_out, got_lse, g, scale=scale, causal=True, key_keep=keep,
                                  block_m=4, block_n=4)
    # the backward reads the rounded output (its row sums with g): float16 gradients within 1e-2
    for got, want in zip(grads, attention_grads_formula(q, k, v, p, g, scale)):
        close(got, want, dtype, **({"rtol": 1e-2, "atol": 1e-2} if dtype == "float16" else {}))
