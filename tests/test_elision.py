"""Temporary elision (ops/_elision.py): large results reuse a temporary operand's buffer, and
nothing anyone can still see is ever overwritten."""

import operator

import numpy as np
import pytest

import namedtensor as nt
from namedtensor.ops import _elision

N = 1 << 17  # above the elision threshold


@pytest.fixture
def spy(monkeypatch):
    """Records, for each add/multiply the NumPy backend runs, whether it wrote into an operand."""
    from namedtensor import backends

    B = backends.cpu()
    hits = []
    for name in ("add", "multiply"):
        real = getattr(B, name)

        def record(*args, _real=real, **kwargs):
            hits.append("out" in kwargs)
            return _real(*args, **kwargs)

        monkeypatch.setattr(B, name, record)
    return hits


def big(seed):
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def test_calibrated_on_this_interpreter():
    assert _elision.enabled, "reference counts could not be calibrated on this interpreter"
    # a temporary is seen with fewer references than any variable, whichever way the op is entered
    assert _elision.CALL_REFS <= _elision.OPERATOR_REFS


def test_temporaries_are_reused(spy):
    a, b, c = (nt.tensor(big(i), names=("x",)) for i in range(3))
    y = a * b + c
    np.testing.assert_allclose(y.numpy(), big(0) * big(1) + big(2), rtol=1e-6)
    assert spy == [False, True]  # a*b allocates; + writes into it
    spy.clear()
    z = nt.add(nt.mul(a, b), c)
    np.testing.assert_allclose(z.numpy(), big(0) * big(1) + big(2), rtol=1e-6)
    assert spy == [False, True]
    spy.clear()
    w = (a * 2.0) * 3
    np.testing.assert_allclose(w.numpy(), big(0) * 6, rtol=1e-6)
    assert spy == [False, True]


def _patterns(a, b, c):
    """Each pattern keeps the intermediate t = a*b visible and returns it with the result."""

    def named():
        t = a * b
        return t, t + c

    def named_call():
        t = a * b
        return t, nt.add(t, c)

    def method():
        t = a * b
        return t, t.add(c)

    def right_side():
        t = a * b
        return t, c + t

    def in_dict_through_c():
        d = {"t": a * b}
        return d["t"], operator.add(d["t"], c)

    def in_list():
        box = [a * b]
        return box[0], box[0] + c

    def array_kept():
        t = a * b
        arr = t.array
        return nt.as_tensor(arr, names=t.names), t + c

    def view_kept():
        t = a * b
        v = t[0:10]
        return v, t + c

    return [named, named_call, method, right_side, in_dict_through_c, in_list, array_kept, view_kept]


@pytest.mark.parametrize("index", range(8))
def test_visible_operands_are_never_overwritten(index):
    a, b, c = (nt.tensor(big(i), names=("x",)) for i in range(3))
    before = (big(0) * big(1))
    kept, result = _patterns(a, b, c)[index]()
    np.testing.assert_array_equal(kept.numpy(), before[: kept.shape[0]])
    np.testing.assert_allclose(result.numpy(), before + big(2), rtol=1e-6)
    for t, src in zip((a, b, c), range(3)):
        np.testing.assert_array_equal(t.numpy(), big(src))


def test_while_recording_only_ops_that_save_no_input_reuse_buffers(spy):
    a = nt.tensor(big(0), names=("x",), requires_grad=True)
    b = nt.tensor(big(1), names=("x",))
    y = (a * b + 1.0) * 2.0  # mul saves its inputs: never elided; add saves none: elided
    assert spy == [False, True, False]
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), big(1) * 2, rtol=1e-6)


def test_saved_outputs_are_never_overwritten(spy):
    a = nt.tensor(big(0) / 10, names=("x",), requires_grad=True)
    y = a.exp() + 1.0  # exp saves its output for backward
    assert spy == [False]
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.exp(big(0) / 10), rtol=1e-6)


def test_dtype_change_is_not_elided(spy):
    a = nt.tensor(np.arange(N, dtype=np.int64), names=("x",))
    y = (a * 2) * 0.5  # int64 * float -> float64 cannot live in the int buffer
    assert y.dtype == nt.float64
    np.testing.assert_allclose(y.numpy(), np.arange(N) * 1.0)
    assert spy[-1] is False
