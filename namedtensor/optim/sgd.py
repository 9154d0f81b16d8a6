"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay (``SGD``).

The update is PyTorch's (``torch.optim.SGD``), for each parameter ``p`` with gradient ``g``::

    g = -g if maximize;  g = g + weight_decay * p
    b = g (first step) | momentum * b + (1 - dampening) * g      (when momentum != 0)
    g = g + momentum * b (nesterov) | b
    p = p - lr * g

The momentum buffer ``b`` is state ``"momentum_buffer"``, named like ``p``.
"""

from __future__ import annotations

from typing import Any, Dict

from .._internal import backend_of, bump_version
from ..backends.update_math import chunks, out_ops
from ..tensor import Tensor
from .optimizer import Optimizer, Params, check_number


class SGD(Optimizer):
    """Stochastic gradient descent (optionally with momentum), PyTorch's ``torch.optim.SGD``."""

    def __init__(self, params: Params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: Dict[str, Any]) -> None:
        check_number("SGD", "lr", group["lr"])
        check_number("SGD", "momentum", group["momentum"])
        check_number("SGD", "dampening", group["dampening"])
        check_number("SGD", "weight_decay", group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"SGD: Nesterov momentum requires a momentum > 0 and zero dampening, got "
                             f"momentum={group['momentum']}, dampening={group['dampening']}.")

    def _update(self, p: Tensor, grad, state: Dict[str, Any], group: Dict[str, Any]) -> None:
        B = backend_of(p)
        momentum = group["momentum"]
        first = False
        states = []
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:  # the first step copies the direction into it
                buf = state["momentum_buffer"] = self._state_tensor(p)
                first = True
            states.append(buf.array)
        lr, wd, maximize = group["lr"], group["weight_decay"], group["maximize"]
        damp, nesterov = 1 - group["dampening"], group["nesterov"]
        F = out_ops(B)
        for x, g, s, tmp in chunks(B, p.array, grad, states):
            # one update of raw arrays: parameter x, grad g, state s = ([momentum buffer]); d, the step
            # direction, is tmp whenever it is written (g may be shared, s[0] is state)
            if wd != 0:
                d = F.multiply(x, wd, out=tmp)
                (F.subtract if maximize else F.add)(d, g, out=d)  # wd * p -/+ g: -g + wd * p exactly
            elif maximize:
                d = F.negative(g, out=tmp)
            else:
                d = g
            if momentum != 0:
                b = s[0]
                if first:
                    F.multiply(d, 1.0, out=b)
                else:
                    F.multiply(b, momentum, out=b)
                    F.add(b, d if damp == 1 else F.multiply(d, damp), out=b)
                d = F.add(d, F.multiply(b, momentum)) if nesterov else b
            F.subtract(x, F.multiply(d, lr, out=tmp), out=x)  # tmp is d itself or free by now
        if momentum != 0:
            bump_version(buf)
