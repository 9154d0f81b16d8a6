"""Adam and AdamW (decoupled weight decay), with AMSGrad and maximize.

The update is PyTorch's (``torch.optim.Adam`` / ``AdamW``), for each parameter ``p`` with gradient ``g``
at step ``t`` (counted per parameter)::

    g = -g if maximize
    p = p * (1 - lr * weight_decay)            (AdamW)    |   g = g + weight_decay * p   (Adam)
    m = m + (1 - beta1) * (g - m)              (m.lerp_(g, 1 - beta1))
    v = beta2 * v + (1 - beta2) * g * g
    v_max = max(v_max, v)                      (amsgrad; the denominator then uses v_max)
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

computed in chunks that stay in the cache (see :func:`namedtensor.backends.update_math.chunks`), as
``m = beta1 * m + (1 - beta1) * g`` and ``p -= c * m / (sqrt(v) + eps * sqrt(1 - beta2**t))`` with
``c = lr * sqrt(1 - beta2**t) / (1 - beta1**t)``: the same values up to rounding, in fewer passes.

Without amsgrad and maximize, the parameters of a group are updated together: one call of the
backend's ``adamw_`` hook per dtype (and step count, which is normally the same for all), which on
the GPU is one kernel launch over all of them; on the CPU it is the chunked computation above, one
parameter after the other.  With amsgrad or maximize each parameter is updated alone, here.

``fused=True`` (PyTorch's spelling) updates each CPU parameter in one pass of a Numba kernel
(``backends/numba_kernels.adam_``, the ``jit`` extra), amsgrad and maximize included, with the same
values bit for bit; on a GPU it is the ``adamw_`` kernel (which takes neither amsgrad nor maximize).
``foreach`` is accepted for PyTorch's code: the grouped update above is what it asks for.  In a training
step compiled whole (``nt.compile``, the step one of the graph's steps) ``fused=None`` takes the fused
update on the CPU where Numba is installed: the same values, in one kernel.

State per parameter: ``"step"`` (an int), ``"exp_avg"`` (m), ``"exp_avg_sq"`` (v) and, with amsgrad,
``"max_exp_avg_sq"``, the tensors named like ``p``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .._internal import backend_of, bump_version
from ..backends.update_math import adam_coefficients, adam_update
from ..tensor import Tensor
from .optimizer import Optimizer, Params, check_number


class Adam(Optimizer):
    """Adam (Kingma & Ba), PyTorch's ``torch.optim.Adam``: weight decay is an L2 term added to the grad."""

    _decoupled = False

    def __init__(self, params: Params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: Optional[bool] = None, fused: Optional[bool] = None) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, fused=fused)
        super().__init__(params, defaults)

    def _check_group(self, group: Dict[str, Any]) -> None:
        kind = type(self).__name__
        check_number(kind, "lr", group["lr"])
        check_number(kind, "eps", group["eps"])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"{kind}: betas must be a pair (beta1, beta2), got {betas!r}.")
        check_number(kind, "beta1 (betas[0])", betas[0], 0.0, 1.0, high_open=True)
        check_number(kind, "beta2 (betas[1])", betas[1], 0.0, 1.0, high_open=True)
        check_number(kind, "weight_decay", group["weight_decay"])
        for flag in ("foreach", "fused"):
            if group[flag] is not None and not isinstance(group[flag], bool):
                raise TypeError(f"{kind}: {flag} must be None or a bool, got {group[flag]!r}.")
        if group["fused"] and group["foreach"]:
            raise RuntimeError(f"{kind}: `fused` and `foreach` cannot be `True` together.")
        if group["fused"]:
            _check_fused(kind, group, group["params"])

    def _required_state(self, group: Dict[str, Any]) -> Tuple[str, ...]:
        extra = ("max_exp_avg_sq",) if group["amsgrad"] else ()
        return ("step", "exp_avg", "exp_avg_sq") + extra

    def _update_group(self, group: Dict[str, Any], todo: List[Tuple[Tensor, Any]]) -> None:
        amsgrad, maximize, fused = group["amsgrad"], group["maximize"], group["fused"]
        if fused is None and self.in_graph:
            # a compiled training step: the update in one kernel, the same values bit for bit
            fused = all(backend_of(p).name == "numpy" for p, _ in todo) and _numba_kernels() is not None
        if (amsgrad or maximize) and not fused:
            super()._update_group(group, todo)
            return
        if fused:  # before any state changes (parameters may have moved since the group was checked)
            _check_fused(type(self).__name__, group, [p for p, _ in todo])
        # one call per backend, dtype and step count: the parameters, grads and moments of each
        batches: Dict[tuple, tuple] = {}
        states = self.state
        for p, grad in todo:
            state = states[p]
            if not state:
                self._new_state(p, state, amsgrad)
            step = state["step"] = state["step"] + 1
            x = p.array
            B = backend_of(p)
            if grad.dtype is not x.dtype and grad.dtype != x.dtype:  # the hook takes one dtype
                grad = B.astype(grad, x.dtype)
            key = (B, x.dtype, step)
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = ([], [], [], [], [], [])
            xs, gs, ms, vs, maxima, edited = batch
            m, v = state["exp_avg"], state["exp_avg_sq"]
            xs.append(x)
            gs.append(grad)
            ms.append(m.array)
            vs.append(v.array)
            edited += (p, m, v)
            if amsgrad:
                maxima.append(state["max_exp_avg_sq"].array)
                edited.append(state["max_exp_avg_sq"])
        beta1, beta2 = group["betas"]
        hyper = dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
                     decoupled=self._decoupled)
        for (B, _, step), (xs, gs, ms, vs, maxima, edited) in batches.items():
            if fused and B.name == "numpy":
                _fused_kernels(type(self).__name__).adam_(xs, gs, ms, vs, maxima if amsgrad else None, step=step,
                                                          maximize=maximize, **hyper)
            else:
                B.adamw_(xs, gs, ms, vs, step=step, **hyper)
            for t in edited:
                bump_version(t)  # graphs that saved the old values must refuse them

    def _new_state(self, p: Tensor, state: Dict[str, Any], amsgrad: bool) -> None:
        state["step"] = 0
        state["exp_avg"] = self._state_tensor(p)
        state["exp_avg_sq"] = self._state_tensor(p)
        if amsgrad:
            state["max_exp_avg_sq"] = self._state_tensor(p)

    def _update(self, p: Tensor, grad, state: Dict[str, Any], group: Dict[str, Any]) -> None:
        B = backend_of(p)
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        if not state:
            self._new_state(p, state, amsgrad)
        step = state["step"] = state["step"] + 1
        tensors = [state["exp_avg"], state["exp_avg_sq"]] + ([state["max_exp_avg_sq"]] if amsgrad else [])
        eps, step_size, decay, l2 = adam_coefficients(lr, beta1, beta2, eps, wd, step, self._decoupled)
        adam_update(B, p.array, grad, tensors[0].array, tensors[1].array, tensors[2].array if amsgrad else None,
                    beta1, beta2, eps, step_size, decay, l2, group["maximize"])
        for t in tensors:
            bump_version(t)


def _check_fused(kind: str, group: Dict[str, Any], params: List[Tensor]) -> None:
    """Refuse ``fused=True`` where it cannot run: on the CPU without Numba; elsewhere (the backend's
    ``adamw_`` kernel) with amsgrad or maximize."""
    names = {backend_of(p).name for p in params}
    if "numpy" in names:
        _fused_kernels(kind)
    other = sorted(names - {"numpy"})
    if other and (group["amsgrad"] or group["maximize"]):
        raise NotImplementedError(f"{kind}(fused=True): the fused update on {other[0]} takes neither amsgrad nor "
                                  "maximize; use fused=None there.")


def _numba_kernels():
    """The module of the fused CPU update, or None without Numba."""
    try:
        from ..backends import numba_kernels
    except ImportError:
        return None
    return numba_kernels


def _fused_kernels(kind: str):
    """The module of the fused CPU update, imported (with Numba) when first needed."""
    kernels = _numba_kernels()
    if kernels is None:
        raise RuntimeError(f"{kind}(fused=True) on the CPU needs Numba: pip install 'named-tensors[jit]'.")
    return kernels


class AdamW(Adam):
    """AdamW (Loshchilov & Hutter), PyTorch's ``torch.optim.AdamW``: the weight decay shrinks the
    parameters directly (``p *= 1 - lr * weight_decay``), apart from the adaptive step."""

    _decoupled = True

    def __init__(self, params: Params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: Optional[bool] = None, fused: Optional[bool] = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, foreach=foreach,
                         fused=fused)
