"""Adam and AdamW (decoupled weight decay), with AMSGrad and maximize.

The update is PyTorch's (``torch.optim.Adam`` / ``AdamW``), for each parameter ``p`` with gradient ``g``
at step ``t`` (counted per parameter)::

    g = -g if maximize
    p = p * (1 - lr * weight_decay)            (AdamW)    |   g = g + weight_decay * p   (Adam)
    m = m + (1 - beta1) * (g - m)              (m.lerp_(g, 1 - beta1))
    v = beta2 * v + (1 - beta2) * g * g
    v_max = max(v_max, v)                      (amsgrad; the denominator then uses v_max)
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

computed in chunks that stay in the cache (see :func:`namedtensor.optim.optimizer.chunks`), as
``m = beta1 * m + (1 - beta1) * g`` and ``p -= c * m / (sqrt(v) + eps * sqrt(1 - beta2**t))`` with
``c = lr * sqrt(1 - beta2**t) / (1 - beta1**t)``: the same values up to rounding, in fewer passes.

Without amsgrad and maximize, the parameters of a group are updated together: one call of the
backend's ``adamw_`` hook per dtype (and step count, which is normally the same for all), which on
the GPU is one kernel launch over all of them; on the CPU it is the chunked computation above, one
parameter after the other.  With amsgrad or maximize each parameter is updated alone, here.

State per parameter: ``"step"`` (an int), ``"exp_avg"`` (m), ``"exp_avg_sq"`` (v) and, with amsgrad,
``"max_exp_avg_sq"``, the tensors named like ``p``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..tensor import Tensor
from .optimizer import Optimizer, Params, check_number, chunks, out_ops


class Adam(Optimizer):
    """Adam (Kingma & Ba), PyTorch's ``torch.optim.Adam``: weight decay is an L2 term added to the grad."""

    _decoupled = False

    def __init__(self, params: Params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize)
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

    def _required_state(self, group: Dict[str, Any]) -> Tuple[str, ...]:
        extra = ("max_exp_avg_sq",) if group["amsgrad"] else ()
        return ("step", "exp_avg", "exp_avg_sq") + extra

    def _update_group(self, group: Dict[str, Any], todo: List[Tuple[Tensor, Any]]) -> None:
        if group["amsgrad"] or group["maximize"]:
            super()._update_group(group, todo)
            return
        # one hook call per backend, dtype and step count: the parameters, grads and moments of each
        batches: Dict[tuple, tuple] = {}
        states = self.state
        for p, grad in todo:
            state = states[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = self._state_tensor(p)
                state["exp_avg_sq"] = self._state_tensor(p)
            step = state["step"] = state["step"] + 1
            x = p.array
            if grad.dtype is not x.dtype and grad.dtype != x.dtype:  # the hook takes one dtype
                grad = p._B.astype(grad, x.dtype)
            key = (p._B, x.dtype, step)
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = ([], [], [], [], [])
            xs, gs, ms, vs, edited = batch
            m, v = state["exp_avg"], state["exp_avg_sq"]
            xs.append(x)
            gs.append(grad)
            ms.append(m.array)
            vs.append(v.array)
            edited += (p, m, v)
        beta1, beta2 = group["betas"]
        for (B, _, step), (xs, gs, ms, vs, edited) in batches.items():
            B.adamw_(xs, gs, ms, vs, lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                     weight_decay=group["weight_decay"], step=step, decoupled=self._decoupled)
            for t in edited:
                t._bump()  # graphs that saved the old values must refuse them

    def _update(self, p: Tensor, grad, state: Dict[str, Any], group: Dict[str, Any]) -> None:
        B = p._B
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = self._state_tensor(p)
            state["exp_avg_sq"] = self._state_tensor(p)
            if amsgrad:
                state["max_exp_avg_sq"] = self._state_tensor(p)
        step = state["step"] = state["step"] + 1
        tensors = [state["exp_avg"], state["exp_avg_sq"]] + ([state["max_exp_avg_sq"]] if amsgrad else [])
        eps, step_size, decay, l2 = adam_coefficients(lr, beta1, beta2, eps, wd, step, self._decoupled)
        F = out_ops(B)
        maximize = group["maximize"]
        for x, g, s, tmp in chunks(B, p.array, grad, [t.array for t in tensors]):
            # one update of raw arrays: parameter x, grad g, state s = (m, v[, v_max]); g is only read
            adam_chunk(F, x, F.negative(g) if maximize else g, s[0], s[1], s[2] if amsgrad else None, tmp,
                       beta1, beta2, eps, step_size, decay, l2)
        for t in tensors:
            t._bump()


def adam_coefficients(lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
                      decoupled: bool) -> Tuple[float, float, Any, Any]:
    """``(eps', step_size, decay, l2)`` for :func:`adam_chunk` at ``step``: PyTorch's update
    ``p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)`` rewritten as
    ``p -= step_size * m / (sqrt(v) + eps')`` (the same values up to rounding, in fewer passes);
    ``decay`` multiplies the parameter (AdamW) and ``l2`` adds ``l2 * p`` to the gradient (Adam), or None."""
    bc2_sqrt = (1 - beta2 ** step) ** 0.5
    decay = 1 - lr * weight_decay if decoupled and weight_decay != 0 else None
    l2 = weight_decay if not decoupled and weight_decay != 0 else None
    return eps * bc2_sqrt, lr / (1 - beta1 ** step) * bc2_sqrt, decay, l2


def adam_chunk(F, x, g, m, v, v_max, tmp, beta1: float, beta2: float, eps: float, step_size: float,
               decay, l2) -> None:
    """One Adam step in place on raw arrays of one chunk: parameter ``x``, gradient ``g`` (only read),
    moments ``m`` and ``v``, amsgrad's running max ``v_max`` (or None), scratch ``tmp``; ``F``: the
    backend's ``out=`` functions; the coefficients from :func:`adam_coefficients`.  The optimizer's
    per-parameter path and the backends' generic ``adamw_`` both run it."""
    if decay is not None:
        F.multiply(x, decay, out=x)
    if l2 is not None:
        g = F.add(g, F.multiply(x, l2))
    F.multiply(v, beta2, out=v)
    F.multiply(g, g, out=tmp)
    F.multiply(tmp, 1 - beta2, out=tmp)
    F.add(v, tmp, out=v)
    F.multiply(m, beta1, out=m)
    F.multiply(g, 1 - beta1, out=tmp)
    F.add(m, tmp, out=m)
    if v_max is not None:
        v = F.maximum(v_max, v, out=v_max)
    F.sqrt(v, out=tmp)
    F.add(tmp, eps, out=tmp)
    F.divide(m, tmp, out=tmp)
    F.multiply(tmp, step_size, out=tmp)
    F.subtract(x, tmp, out=x)


class AdamW(Adam):
    """AdamW (Loshchilov & Hutter), PyTorch's ``torch.optim.AdamW``: the weight decay shrinks the
    parameters directly (``p *= 1 - lr * weight_decay``), apart from the adaptive step."""

    _decoupled = True

    def __init__(self, params: Params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
