"""Optimizers (SGD, Adam, AdamW), their state dicts, and gradient clipping.

The updates are checked step by step against NumPy references written from PyTorch's documented
algorithms (``torch.optim.SGD``/``Adam``/``AdamW``); bench/optim_step.py compares with PyTorch itself.
"""

import math

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import optim
from namedtensor.backends import update_math
from namedtensor.testing import assert_close

pytestmark = pytest.mark.usefixtures("backend")

NAMES = ("out", "in")
SHAPE = (3, 4)


# ---------------------------------------------------------------------- references (PyTorch's algorithms)
def ref_sgd(w, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    w = w.copy()
    buf = None
    for g in grads:
        d = -g if maximize else g
        d = d + weight_decay * w
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        w = w - lr * d
    return w


def ref_adam(w, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
             decoupled=False):
    w = w.copy()
    b1, b2 = betas
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    vmax = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = -g if maximize else g
        if decoupled:
            w = w * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax if amsgrad else v) / math.sqrt(1 - b2 ** t) + eps
        w = w - lr / (1 - b1 ** t) * m / denom
    return w, m, v, vmax


def make(shape=SHAPE, names=NAMES, seed=0, dtype="float64"):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return nt.tensor(a, names=names, requires_grad=True), a


def grads_for(shape, n, seed=1, dtype="float64"):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def run(opt, params, grads_per_param):
    """Step ``opt`` once per grad, setting each parameter's grad first."""
    for step_grads in zip(*grads_per_param):
        for p, g in zip(params, step_grads):
            p.grad = nt.tensor(g, names=p.names)
        opt.step()


SGD_OPTIONS = [
    {},
    {"momentum": 0.9},
    {"momentum": 0.9, "dampening": 0.3},
    {"momentum": 0.9, "nesterov": True},
    {"weight_decay": 0.1},
    {"momentum": 0.5, "weight_decay": 0.1, "nesterov": True, "maximize": True},
    {"momentum": 0.8, "dampening": 0.5, "weight_decay": 0.05, "maximize": True},
    {"maximize": True},
]

ADAM_OPTIONS = [
    {},
    {"betas": (0.8, 0.99), "eps": 1e-6},
    {"weight_decay": 0.1},
    {"amsgrad": True},
    {"maximize": True},
    {"weight_decay": 0.05, "amsgrad": True, "maximize": True},
    {"betas": (0.3, 0.5)},
]


# ---------------------------------------------------------------------- update parity
@pytest.mark.parametrize("options", SGD_OPTIONS, ids=str)
def test_sgd_matches_reference_over_steps(options):
    p, a = make()
    grads = grads_for(SHAPE, 5)
    opt = optim.SGD([p], lr=0.1, **options)
    run(opt, [p], [grads])
    assert_close(p.detach(), ref_sgd(a, grads, 0.1, **options), rtol=1e-12, atol=1e-12)
    assert p.names == NAMES


@pytest.mark.parametrize("options", ADAM_OPTIONS, ids=str)
@pytest.mark.parametrize("kind", ["Adam", "AdamW"])
def test_adam_matches_reference_over_steps(kind, options):
    p, a = make()
    grads = grads_for(SHAPE, 6)
    opt = getattr(optim, kind)([p], lr=0.05, **options)
    run(opt, [p], [grads])
    decoupled = kind == "AdamW"
    wd = options.get("weight_decay", 1e-2 if decoupled else 0.0)
    ref = dict(options, weight_decay=wd)
    w, m, v, vmax = ref_adam(a, grads, lr=0.05, decoupled=decoupled, **ref)
    assert_close(p.detach(), w, rtol=1e-12, atol=1e-12)
    state = opt.state[p]
    assert state["step"] == 6
    assert_close(state["exp_avg"], m, rtol=1e-12, atol=1e-14)
    assert_close(state["exp_avg_sq"], v, rtol=1e-12, atol=1e-14)
    if options.get("amsgrad"):
        assert_close(state["max_exp_avg_sq"], vmax, rtol=1e-12, atol=1e-14)
    else:
        assert "max_exp_avg_sq" not in state


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("options", ADAM_OPTIONS, ids=str)
@pytest.mark.parametrize("kind", ["Adam", "AdamW"])
@pytest.mark.parametrize("pool", [2, 3])
def test_fused_adam_is_the_grouped_update_bit_for_bit(kind, options, dtype, pool, monkeypatch):
    pytest.importorskip("numba")
    from namedtensor.backends import numba_kernels

    # the 115 elements the kernel takes go to the threads in runs of 57 or 38 that cut the 10 x 11 parameter
    # and (the last run) span it and the next one
    monkeypatch.setattr(numba_kernels, "_ADAM_PARALLEL_FROM", 38)
    threads = nt.get_num_threads()
    nt.set_num_threads(pool)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((10, 11)).astype(dtype), rng.standard_normal(5).astype(dtype),
              rng.standard_normal((4, 3)).astype(dtype).T]  # the last one is not row-major
    grads = [grads_for(a.shape, 4, seed=k, dtype=dtype) for k, a in enumerate(arrays)]
    names = [("r", "c"), ("b",), ("x", "y")]
    results = []
    try:
        for fused in (None, True):
            params = [nt.tensor(a, names=n, requires_grad=True) for a, n in zip(arrays, names)]
            unfusable = nt.backends.cpu().name != "numpy" and (options.get("amsgrad") or options.get("maximize"))
            if fused and unfusable:
                with pytest.raises(NotImplementedError, match=f"{kind}\\(fused=True\\): the fused update on "
                                                              "array_api_strict takes neither amsgrad nor maximize"):
                    getattr(optim, kind)(params, lr=0.05, fused=fused, **options)
                return
            opt = getattr(optim, kind)(params, lr=0.05, fused=fused, **options)
            run(opt, params, grads)
            results.append([p.detach().numpy().copy() for p in params]
                           + [opt.state[p][k].numpy().copy() for p in params for k in opt.state[p] if k != "step"])
    finally:
        nt.set_num_threads(threads)
    for a, b in zip(*results):
        assert a.dtype == b.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a, b)


def test_fused_and_foreach_options():
    p, _ = make()
    assert optim.AdamW([p], foreach=True).param_groups[0]["foreach"] is True
    with pytest.raises(RuntimeError, match="AdamW: `fused` and `foreach` cannot be `True` together"):
        optim.AdamW([p], fused=True, foreach=True)
    with pytest.raises(TypeError, match="Adam: fused must be None or a bool, got 'yes'"):
        optim.Adam([p], fused="yes")
    with pytest.raises(TypeError, match="AdamW: foreach must be None or a bool, got 1"):
        optim.AdamW([p], foreach=1)


def test_a_state_dict_saved_without_the_fused_and_foreach_options_loads_with_their_defaults():
    opt, sd = _trained_adam()
    for group in sd["param_groups"]:
        del group["fused"], group["foreach"]
    p = nt.tensor(np.zeros(SHAPE), names=NAMES, requires_grad=True)
    fresh = optim.Adam([p], amsgrad=True)
    fresh.load_state_dict(sd)
    assert fresh.param_groups[0]["fused"] is None and fresh.param_groups[0]["foreach"] is None
    p.grad = nt.tensor(np.ones(SHAPE), names=NAMES)
    fresh.step()
    assert fresh.state[p]["step"] == opt.state[opt.param_groups[0]["params"][0]]["step"] + 1


def test_fused_adam_without_numba_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "namedtensor.backends.numba_kernels", None)  # importing it fails
    monkeypatch.delattr(nt.backends, "numba_kernels", raising=False)
    p, _ = make()
    if nt.backends.cpu().name == "numpy":
        with pytest.raises(RuntimeError, match=r"AdamW\(fused=True\) on the CPU needs Numba: pip install "
                                               r"'named-tensors\[jit\]'"):
            optim.AdamW([p], fused=True)
    else:  # the fused update of other backends is their adamw_ hook
        assert optim.AdamW([p], fused=True).param_groups[0]["fused"] is True


def test_adamw_defaults_match_pytorch():
    p, _ = make()
    group = optim.AdamW([p]).param_groups[0]
    assert {k: group[k] for k in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach",
                                  "fused")} == dict(
        lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False, foreach=None,
        fused=None)
    assert optim.Adam([p]).param_groups[0]["weight_decay"] == 0.0
    assert optim.SGD([p]).param_groups[0]["lr"] == 1e-3


@pytest.mark.parametrize("make_opt", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda ps: optim.AdamW(ps, lr=0.05, amsgrad=True),
], ids=["sgd", "adamw"])
def test_chunked_update_equals_whole_update(make_opt, monkeypatch):
    # a parameter bigger than a chunk is updated chunk by chunk (with a short last chunk): same values
    a = np.random.default_rng(0).standard_normal((5, 7))
    grads = grads_for((5, 7), 3)
    results = []
    for chunk in (10**9, 8):
        monkeypatch.setattr(update_math, "CHUNK", chunk)
        p = nt.tensor(a, names=("r", "c"), requires_grad=True)
        run(make_opt([p]), [p], [grads])
        results.append(p.detach().numpy().copy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("kind", ["SGD", "AdamW"])
def test_update_writes_into_the_parameters_buffer(kind, monkeypatch):
    # a leaf that is a non-contiguous view of another tensor: the update lands in the shared memory
    monkeypatch.setattr(update_math, "CHUNK", 4)
    base = nt.tensor(np.arange(12.0).reshape(3, 4), names=("a", "b"))
    p = base.transpose("a", "b").detach().requires_grad_()
    assert p.names == ("b", "a")
    p.grad = nt.ones(4, 3, names=("b", "a"), dtype=nt.float64)
    opt = getattr(optim, kind)([p], lr=0.5)
    opt.step()
    assert_close(base.transpose("a", "b"), p.detach())
    assert not np.allclose(base.numpy(), np.arange(12.0).reshape(3, 4))


def test_float32_stays_float32():
    p, a = make(dtype="float32")
    grads = grads_for(SHAPE, 4, dtype="float32")
    opt = optim.AdamW([p], lr=0.05)
    run(opt, [p], [grads])
    assert p.dtype == nt.float32
    assert opt.state[p]["exp_avg"].dtype == nt.float32
    w, *_ = ref_adam(a.astype("float64"), [g.astype("float64") for g in grads], lr=0.05, weight_decay=0.01,
                     decoupled=True)
    assert_close(p.detach(), w, rtol=1e-5, atol=1e-6)


def test_state_is_named_like_the_parameter_and_on_its_backend():
    p, _ = make()
    q = nt.tensor(np.ones(5), names=(None,), requires_grad=True)
    opt = optim.Adam([p, q], amsgrad=True)
    run(opt, [p, q], [grads_for(SHAPE, 2), grads_for((5,), 2)])
    for t in (p, q):
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            s = opt.state[t][key]
            assert s.names == t.names and s.shape == t.shape
            assert s._B is t._B
            assert not s.requires_grad
    sgd = optim.SGD([p], lr=0.1, momentum=0.9)
    run(sgd, [p], [grads_for(SHAPE, 1)])
    assert sgd.state[p]["momentum_buffer"].names == NAMES


def test_parameters_without_grad_are_skipped():
    p, a = make()
    q, b = make(seed=5)
    frozen = nt.tensor(np.ones(3), names=("x",))  # does not require grad: allowed, never updated
    opt = optim.Adam([p, q, frozen], lr=0.1)
    p.grad = nt.tensor(grads_for(SHAPE, 1)[0], names=NAMES)
    opt.step()
    assert_close(q.detach(), b)
    assert_close(frozen, np.ones(3), check_names=False)
    assert q not in opt.state and frozen not in opt.state
    assert not np.allclose(p.detach().numpy(), a)


def test_param_groups_with_different_hyperparameters():
    p, a = make()
    q, b = make(seed=3)
    gp, gq = grads_for(SHAPE, 4, seed=7), grads_for(SHAPE, 4, seed=8)
    opt = optim.SGD([{"params": [p]}, {"params": q, "lr": 0.01, "momentum": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    run(opt, [p, q], [gp, gq])
    assert_close(p.detach(), ref_sgd(a, gp, 0.1, momentum=0.9), rtol=1e-12, atol=1e-12)
    assert_close(q.detach(), ref_sgd(b, gq, 0.01, momentum=0.5), rtol=1e-12, atol=1e-12)


def test_add_param_group_later_and_lr_change_takes_effect():
    p, a = make()
    q, b = make(seed=3)
    opt = optim.SGD([p], lr=0.1)
    opt.add_param_group({"params": [q], "lr": 0.5})
    g = grads_for(SHAPE, 2)
    run(opt, [p, q], [g[:1], g[:1]])
    opt.param_groups[1]["lr"] = 0.25
    run(opt, [p, q], [g[1:], g[1:]])
    assert_close(q.detach(), b - 0.5 * g[0] - 0.25 * g[1], rtol=1e-12, atol=1e-12)
    assert_close(p.detach(), a - 0.1 * g[0] - 0.1 * g[1], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------- zero_grad, closure, autograd
def test_zero_grad_to_none_and_to_fresh_zeros():
    x = nt.tensor(np.ones(3), names=("a",), requires_grad=True)
    y = nt.tensor(np.ones(3), names=("a",), requires_grad=True)
    g = nt.tensor(np.arange(3.0), names=("a",))
    (x + y).backward(g)  # x.grad and y.grad may share g's buffer
    opt = optim.SGD([x, y], lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert_close(x.grad, np.zeros(3), check_names=False)
    assert x.grad.names == ("a",)
    assert_close(g, np.arange(3.0), check_names=False)  # zeroing never writes into a shared buffer
    opt.zero_grad()
    assert x.grad is None and y.grad is None


def test_step_with_closure_returns_loss_and_runs_with_grad():
    p, a = make()

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    opt = optim.SGD([p], lr=0.1)
    with nt.no_grad():
        loss = opt.step(closure)
    assert math.isclose(loss.item(), float((a * a).sum()))
    assert_close(p.detach(), a - 0.1 * 2 * a, rtol=1e-12, atol=1e-12)


def test_step_bumps_the_version_so_saved_graphs_refuse():
    p, _ = make()
    y = (p * p).sum()
    p.grad = nt.ones(*SHAPE, names=NAMES, dtype=nt.float64)
    optim.SGD([p], lr=0.1).step()
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_adam_minimises_a_quadratic():
    target = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.5]])
    x = nt.zeros(2, 3, names=("i", "j"), dtype=nt.float64, requires_grad=True)
    c = nt.tensor(target, names=("i", "j"))
    opt = optim.Adam([x], lr=0.1)
    for _ in range(300):
        opt.zero_grad()
        loss = ((x - c) ** 2).sum()
        loss.backward()
        opt.step()
    assert ((x - c) ** 2).sum().item() < 1e-6


@pytest.mark.parametrize("make_opt", [
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    lambda ps: optim.AdamW(ps, lr=0.05, weight_decay=0.0),
], ids=["momentum", "nesterov", "adamw"])
def test_least_squares_fit(make_opt):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 4))
    w_true = np.array([1.0, -2.0, 0.5, 3.0])
    y = X @ w_true + 0.7
    xs = nt.tensor(X, names=("sample", "feature"))
    ys = nt.tensor(y, names=("sample",))
    w = nt.zeros(4, names=("feature",), dtype=nt.float64, requires_grad=True)
    b = nt.zeros((), dtype=nt.float64, requires_grad=True)
    opt = make_opt([w, b])
    for _ in range(300):
        opt.zero_grad()
        loss = (((xs * w).sum("feature") + b - ys) ** 2).mean()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-4
    assert_close(w.detach(), w_true, atol=1e-2, check_names=False)


# ---------------------------------------------------------------------- state dicts
def _train(opt, params, grads, steps):
    run(opt, params, [g[:steps] for g in grads])


@pytest.mark.parametrize("make_opt", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True),
    lambda ps: optim.AdamW([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.01}], lr=0.05),
], ids=["sgd", "adam", "adamw-groups"])
def test_state_dict_round_trip_continues_training_identically(make_opt):
    a = np.random.default_rng(0).standard_normal(SHAPE)
    b = np.random.default_rng(1).standard_normal(5)
    grads = [grads_for(SHAPE, 6, seed=2), grads_for((5,), 6, seed=3)]

    def params():
        return [nt.tensor(a, names=NAMES, requires_grad=True), nt.tensor(b, names=("v",), requires_grad=True)]

    straight = params()
    opt = make_opt(straight)
    run(opt, straight, grads)

    first = params()
    opt1 = make_opt(first)
    run(opt1, first, [g[:3] for g in grads])
    sd = opt1.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert [g["params"] for g in sd["param_groups"]] in ([[0, 1]], [[0], [1]])
    for entry in sd["state"].values():
        for v in entry.values():
            if isinstance(v, nt.Tensor):
                assert v.names in (NAMES, ("v",))

    resumed = [nt.tensor(t.detach().numpy().copy(), names=t.names, requires_grad=True) for t in first]
    opt2 = make_opt(resumed)
    opt2.load_state_dict(sd)
    run(opt1, first, [g[3:] for g in grads])  # the loaded state is a copy: opt1 going on cannot disturb opt2
    run(opt2, resumed, [g[3:] for g in grads])
    for r, s in zip(resumed, straight):
        np.testing.assert_array_equal(r.detach().numpy(), s.detach().numpy())


def test_load_state_dict_takes_hyperparameters_and_string_indices():
    p, _ = make()
    opt = optim.Adam([p], lr=0.1)
    run(opt, [p], [grads_for(SHAPE, 2)])
    sd = opt.state_dict()
    sd = {"state": {str(k): v for k, v in sd["state"].items()},
          "param_groups": [dict(g, lr=0.02) for g in sd["param_groups"]]}
    sd["state"]["0"] = dict(sd["state"]["0"], step=nt.tensor(2.0))  # a step saved as a 0-dim tensor
    q = nt.tensor(p.detach().numpy().copy(), names=NAMES, requires_grad=True)
    opt2 = optim.Adam([q], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.02
    assert opt2.param_groups[0]["params"][0] is q
    assert opt2.state[q]["step"] == 2
    assert opt2.state[q]["exp_avg"] is not opt.state[p]["exp_avg"]
    assert_close(opt2.state[q]["exp_avg"], opt.state[p]["exp_avg"])


def _trained_adam():
    p, _ = make()
    opt = optim.Adam([p], amsgrad=True)
    run(opt, [p], [grads_for(SHAPE, 1)])
    return opt, opt.state_dict()


def test_load_state_dict_errors():
    _, sd = _trained_adam()
    p, _ = make()
    q, _ = make(seed=1)
    with pytest.raises(ValueError, match="has 1 parameter groups, this optimizer has 2"):
        optim.Adam([{"params": [p]}, {"params": [q]}], amsgrad=True).load_state_dict(sd)
    with pytest.raises(ValueError, match="group 0 of the loaded state dict has 1 parameters, this optimizer's "
                                         "group 0 has 2"):
        optim.Adam([p, q], amsgrad=True).load_state_dict(sd)
    renamed = nt.tensor(np.zeros(SHAPE), names=("row", "col"), requires_grad=True)
    with pytest.raises(nt.NamesError, match=r"state 'exp_avg' of parameter 0 has names \('out', 'in'\), the "
                                            r"parameter \('row', 'col'\)"):
        optim.Adam([renamed], amsgrad=True).load_state_dict(sd)
    other_shape = nt.tensor(np.zeros((4, 3)), names=NAMES, requires_grad=True)
    with pytest.raises(ValueError, match=r"has shape \(3, 4\), the parameter \(4, 3\)"):
        optim.Adam([other_shape], amsgrad=True).load_state_dict(sd)
    with pytest.raises(ValueError, match="lacks 'max_exp_avg_sq'"):
        optim.Adam([p], amsgrad=False).load_state_dict(dict(sd, param_groups=[
            dict(sd["param_groups"][0], amsgrad=True)], state={0: {"step": 1, "exp_avg": sd["state"][0]["exp_avg"],
                                                                   "exp_avg_sq": sd["state"][0]["exp_avg_sq"]}}))
    with pytest.raises(ValueError, match="entry for parameter 7, which no parameter group lists"):
        optim.Adam([p]).load_state_dict(dict(sd, state={7: {}}))
    with pytest.raises(ValueError, match="expected a dict with 'state' and 'param_groups'"):
        optim.Adam([p]).load_state_dict({"weight": p})


def test_load_state_dict_across_backends():
    from namedtensor import backends

    opt, sd = _trained_adam()
    other = "numpy" if backends.cpu().name != "numpy" else "array_api_strict"
    before = backends.cpu().name
    backends.use_cpu_backend(other)
    try:
        q = nt.tensor(np.zeros(SHAPE), names=NAMES, requires_grad=True)
        opt2 = optim.Adam([q], amsgrad=True)
        opt2.load_state_dict(sd)
        assert opt2.state[q]["exp_avg"]._B is q._B
        assert_close(opt2.state[q]["exp_avg"].numpy(), opt.state[opt.param_groups[0]["params"][0]]["exp_avg"].numpy())
    finally:
        backends.use_cpu_backend(before)


# ---------------------------------------------------------------------- construction errors
def test_construction_errors():
    p, _ = make()
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf tensor .*computed by mul"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="has dtype nt.int64; only floating-point tensors can be optimized"):
        optim.SGD([nt.tensor(np.arange(3), names=("a",))], lr=0.1)
    with pytest.raises(TypeError, match=r"got a single tensor .*wrap it in a list"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="not a set"):
        optim.SGD({p}, lr=0.1)
    with pytest.raises(TypeError, match="mixes tensors and param-group dicts"):
        optim.SGD([p, {"params": [p]}], lr=0.1)
    with pytest.raises(TypeError, match="parameter 1 of group 0 is a ndarray"):
        optim.SGD([p, np.ones(3)], lr=0.1)
    with pytest.raises(ValueError, match="appears twice in the group"):
        optim.SGD([p, p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="needs a 'params' entry"):
        optim.SGD([{"lr": 0.1}])
    with pytest.raises(ValueError, match="SGD: invalid lr -0.1: it must be >= 0"):
        optim.SGD([p], lr=-0.1)
    with pytest.raises(ValueError, match="SGD: invalid lr -1: it must be >= 0"):
        optim.SGD([{"params": [p], "lr": -1}], lr=0.1)
    with pytest.raises(TypeError, match="SGD: lr must be a number, got str"):
        optim.SGD([p], lr="0.1")
    with pytest.raises(ValueError, match="invalid momentum -0.5"):
        optim.SGD([p], lr=0.1, momentum=-0.5)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum > 0 and zero dampening"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"Adam: invalid beta1 \(betas\[0\]\) 1.0: it must be >= 0.0 and < 1.0"):
        optim.Adam([p], betas=(1.0, 0.999))
    with pytest.raises(ValueError, match=r"AdamW: invalid beta2 \(betas\[1\]\) -0.1"):
        optim.AdamW([p], betas=(0.9, -0.1))
    with pytest.raises(TypeError, match="betas must be a pair"):
        optim.Adam([p], betas=0.9)
    with pytest.raises(ValueError, match="invalid eps -1e-08"):
        optim.Adam([p], eps=-1e-8)
    with pytest.raises(ValueError, match="invalid weight_decay -0.01"):
        optim.AdamW([p], weight_decay=-0.01)


def test_grad_on_another_backend_is_refused():
    from namedtensor import backends

    p, _ = make()
    other = backends._make("numpy" if p._B.name != "numpy" else "array_api_strict")
    p.grad = nt.Tensor._make(other.asarray(np.ones(SHAPE)), NAMES, other)
    with pytest.raises(ValueError, match="its grad is on"):
        optim.SGD([p], lr=0.1).step()


# ---------------------------------------------------------------------- clipping
def _with_grads(arrays, names):
    params = []
    for a, n in zip(arrays, names):
        t = nt.tensor(np.zeros_like(a), names=n, requires_grad=True)
        t.grad = nt.tensor(a, names=n)
        params.append(t)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_values(norm_type):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(SHAPE), rng.standard_normal(5)]
    params = _with_grads(arrays, [NAMES, ("v",)])
    flat = np.concatenate([a.ravel() for a in arrays])
    total = np.linalg.norm(flat, ord=norm_type)
    max_norm = total / 4
    out = optim.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    assert out.names == () and out.dtype == nt.float64
    assert math.isclose(out.item(), total, rel_tol=1e-12)
    coef = max_norm / (total + 1e-6)
    for p, a in zip(params, arrays):
        assert p.grad.names == p.names
        assert_close(p.grad, a * coef, rtol=1e-12, atol=1e-14, check_names=False)
    clipped = np.concatenate([p.grad.numpy().ravel() for p in params])
    assert np.linalg.norm(clipped, ord=norm_type) <= max_norm


def test_clip_grad_norm_below_the_bound_leaves_grads():
    a = np.array([3.0, 4.0])
    (p,) = _with_grads([a], [("v",)])
    out = optim.clip_grad_norm_(p, 10.0)  # a single tensor is accepted
    assert math.isclose(out.item(), 5.0)
    assert_close(p.grad, a, check_names=False)


def test_clip_grad_norm_scales_shared_gradients_once():
    x = nt.tensor(np.zeros(2), names=("a",), requires_grad=True)
    y = nt.tensor(np.zeros(2), names=("a",), requires_grad=True)
    g = nt.tensor(np.array([3.0, 4.0]), names=("a",))
    (x + y).backward(g)  # both grads may be g's own buffer
    total = optim.clip_grad_norm_([x, y], 1.0)
    assert math.isclose(total.item(), math.sqrt(50.0))
    expected = np.array([3.0, 4.0]) / (math.sqrt(50.0) + 1e-6)
    assert_close(x.grad, expected, check_names=False)
    assert_close(y.grad, expected, check_names=False)
    assert_close(g, np.array([3.0, 4.0]), check_names=False)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf * 0: the NaN PyTorch gives
def test_clip_grad_norm_nonfinite():
    params = _with_grads([np.array([1.0, np.inf]), np.array([2.0])], [("a",), ("b",)])
    with pytest.raises(RuntimeError, match="total norm of order 2.0 of the gradients is non-finite"):
        optim.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    out = optim.clip_grad_norm_(params, 1.0)
    assert math.isinf(out.item())
    assert_close(params[1].grad, np.array([0.0]), check_names=False)  # scaled by 1 / inf
    nan = _with_grads([np.array([np.nan, 1.0])], [("a",)])
    assert math.isnan(optim.clip_grad_norm_(nan, 1.0).item())
    assert np.isnan(nan[0].grad.numpy()).all()


def test_clip_grad_norm_edge_cases_and_errors():
    p, _ = make()
    out = optim.clip_grad_norm_([p], 1.0)  # no grads: norm 0
    assert out.item() == 0.0 and out.names == ()
    with pytest.raises(ValueError, match="norm_type must be a positive number or inf, got -1.0"):
        optim.clip_grad_norm_([p], 1.0, norm_type=-1)
    with pytest.raises(ValueError, match="max_norm must be >= 0"):
        optim.clip_grad_norm_([p], -1.0)
    with pytest.raises(TypeError, match="parameters must be tensors"):
        optim.clip_grad_norm_([np.ones(2)], 1.0)


def test_clip_grad_value():
    a = np.array([[-3.0, 0.5], [2.0, -0.2]])
    (p,) = _with_grads([a], [("i", "j")])
    assert optim.clip_grad_value_([p], 1.0) is None
    assert p.grad.names == ("i", "j")
    assert_close(p.grad, np.clip(a, -1.0, 1.0), check_names=False)
    with pytest.raises(ValueError, match="clip_value must be >= 0"):
        optim.clip_grad_value_([p], -1.0)


def test_exports():
    assert optim.lr_scheduler.CosineAnnealingLR is optim.CosineAnnealingLR
    for name in optim.__all__:
        assert hasattr(optim, name)
