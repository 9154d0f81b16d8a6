"""Checking gradients against central differences, dim by dim.

``gradcheck(fn, *inputs)`` reduces ``fn``'s outputs to a scalar with fixed
random weights, computes its gradient with autograd, and compares it with
central differences of the same scalar, element by element.  Complex outputs
are weighted by complex numbers and the scalar is the real part of the sum;
a complex input is perturbed along its real and its imaginary part, and its
gradient is compared with ``dL/dRe(z) + i dL/dIm(z)``, PyTorch's convention
(as ``torch.autograd.gradcheck`` does).  A mismatch is
reported per input and per dim: which named dim, at which indices, how far off.
It also checks that every gradient has exactly its input's names.
"""

from __future__ import annotations

import random
from typing import Callable

from .. import _names
from .._internal import backend_of
from ..autograd.engine import grad as _grad
from ..autograd.graph import enable_grad, no_grad
from ..tensor import Tensor


class GradcheckError(AssertionError):
    """Autograd's gradient disagrees with central differences (or has the wrong names)."""


def _outputs(out) -> list:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [o for o in out if isinstance(o, Tensor) and o.dtype.kind in "fc"]
    raise TypeError(f"gradcheck: fn must return a Tensor or a tuple of tensors, got {type(out).__name__}.")


def _weights(outs, seed: int):
    rng = random.Random(seed)
    from ..ops.creation import tensor

    ws = []
    for o in outs:
        n = o.numel()
        vals = [rng.uniform(0.5, 1.5) * rng.choice((-1.0, 1.0)) for _ in range(n)]
        if o.dtype.kind == "c":
            vals = [complex(v, rng.uniform(0.5, 1.5) * rng.choice((-1.0, 1.0))) for v in vals]
        w = tensor(vals, dtype=o.dtype, device=o.device)
        ws.append(w.reshape(o.shape, names=o.names) if o.ndim else w.reshape((), names=()))
    return ws


def _scalar(fn, inputs, weights):
    return _weighted_sum(_outputs(fn(*inputs)), weights)


def _weighted_sum(outs, weights):
    """The scalar whose gradient is checked: each output times its fixed weights, summed (the real part of
    the sum for a complex output)."""
    total = None
    for o, w in zip(outs, weights):
        term = (o * w.detach()).sum()
        if term.dtype.kind == "c":
            term = term.real
        total = term if total is None else total + term
    return total


def _host(t: Tensor):
    return backend_of(t).to_numpy(t.detach().array)


def gradcheck(fn: Callable, *inputs: Tensor, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              seed: int = 0) -> bool:
    """Raise :class:`GradcheckError` unless autograd matches central differences for every input.

    Inputs that require grad are checked (use float64 for tight tolerances).
    """
    from ..ops.creation import tensor

    check = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not check:
        raise ValueError("gradcheck: no input requires grad.")
    # one fresh leaf per position: the same tensor passed twice is checked once per position,
    # as the central differences perturb one position at a time
    inputs = tuple(x.detach().requires_grad_() if i in check else x for i, x in enumerate(inputs))
    with enable_grad():
        outs = _outputs(fn(*inputs))
        weights = _weights(outs, seed)
        total = _weighted_sum(outs, weights)
        if total is None or not total.requires_grad:  # outputs constant in the inputs: gradients are 0
            analytic = [None] * len(check)
        else:
            analytic = _grad(total, [inputs[i] for i in check], allow_unused=True)
    for i, g in zip(check, analytic):
        x = inputs[i]
        if g is not None and g.names != x.names:
            raise GradcheckError(
                f"gradcheck: the gradient of input {i} has names {_names.fmt(g.names)}, "
                f"but the input has {_names.fmt(x.names)}."
            )
        if g is not None and g.shape != x.shape:
            raise GradcheckError(f"gradcheck: the gradient of input {i} has shape {g.shape}, the input {x.shape}.")
        base = _host(x).copy()
        flat = base.reshape(-1)
        numeric = base.copy().reshape(-1) * 0.0
        # a complex input moves along its real part and its imaginary part: dL/dRe + i dL/dIm
        directions = (1.0, 1j) if x.dtype.kind == "c" else (1.0,)
        for k in range(flat.size):
            orig = flat[k]
            for direction in directions:
                vals = []
                for step in (eps, -eps):
                    flat[k] = orig + direction * step
                    probe_in = list(inputs)
                    probe_in[i] = tensor(base, names=x.names, dtype=x.dtype, device=x.device)
                    with no_grad():
                        value = _scalar(fn, probe_in, weights)
                    vals.append(0.0 if value is None else value.item())
                flat[k] = orig
                numeric[k] += direction * (vals[0] - vals[1]) / (2 * eps)
        numeric = numeric.reshape(base.shape)
        got = numeric * 0.0 if g is None else _host(g)
        bad = ~(abs(got - numeric) <= atol + rtol * abs(numeric))  # written so that a NaN counts as bad
        if bad.any():
            raise GradcheckError(_describe(i, x, got, numeric, bad))
    return True


def _describe(i: int, x: Tensor, got, numeric, bad) -> str:
    lines = [
        f"gradcheck: input {i} (names {_names.fmt(x.names)}, shape {x.shape}): autograd and central "
        f"differences disagree at {int(bad.sum())} of {bad.size} elements (max abs error "
        f"{float(abs(got - numeric).max()):.3g})."
    ]
    for ax, name in enumerate(x.names):
        other = tuple(a for a in range(x.ndim) if a != ax)
        per_index = bad.any(axis=other) if other else bad
        idx = [int(k) for k in range(per_index.shape[0]) if per_index[k]]
        label = repr(name) if name is not None else f"dim {ax}"
        lines.append(f"  along {label}: at indices {idx}")
    first = tuple(int(v[0]) for v in bad.nonzero()) if bad.ndim else ()  # NumPy refuses nonzero() of 0-dim
    lines.append(f"  first bad element {first}: autograd {got[first].item()!r} vs numeric {numeric[first].item()!r}")
    return "\n".join(lines)


def gradgradcheck(fn: Callable, *inputs: Tensor, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  seed: int = 1) -> bool:
    """Check second derivatives: gradcheck of the (create_graph) gradient of ``fn``."""
    check = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def first_order(*xs):
        # the numeric probes pass fresh tensors: make them leaves so their gradient exists
        xs = [x.detach().requires_grad_() if i in check and not x.requires_grad else x for i, x in enumerate(xs)]
        with enable_grad():
            outs = _outputs(fn(*xs))
            total = _weighted_sum(outs, _weights(outs, seed))
            grads = _grad(total, [xs[i] for i in check], create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_order, *inputs, eps=eps, atol=atol, rtol=rtol, seed=seed + 1)


def assert_close(actual, expected, rtol: float = 1e-5, atol: float = 1e-6, check_names: bool = True) -> None:
    """Assert two tensors (or a tensor and an array) are equal in value, shape and, for tensors, names; floats and
    complex numbers within ``atol + rtol * |expected|``."""
    import cmath

    if isinstance(actual, Tensor) and isinstance(expected, Tensor) and check_names:
        if actual.names != expected.names:
            raise AssertionError(f"names differ: {_names.fmt(actual.names)} vs {_names.fmt(expected.names)}")
    a = _host(actual) if isinstance(actual, Tensor) else actual
    e = _host(expected) if isinstance(expected, Tensor) else expected
    a_shape = tuple(getattr(a, "shape", ()))
    e_shape = tuple(getattr(e, "shape", ()))
    if a_shape != e_shape:
        raise AssertionError(f"shapes differ: {a_shape} vs {e_shape}")
    fa = a.reshape(-1).tolist() if hasattr(a, "reshape") else [a]
    fe = e.reshape(-1).tolist() if hasattr(e, "reshape") else [e]
    for k, (x, y) in enumerate(zip(fa, fe)):
        if isinstance(x, (float, complex)) or isinstance(y, (float, complex)):
            if (cmath.isnan(x) and cmath.isnan(y)) or x == y:  # x == y: equal infinities
                continue
            if not abs(x - y) <= atol + rtol * abs(y):
                raise AssertionError(f"values differ at flat index {k}: {x!r} vs {y!r} (rtol={rtol}, atol={atol})")
        elif x != y:
            raise AssertionError(f"values differ at flat index {k}: {x!r} vs {y!r}")
