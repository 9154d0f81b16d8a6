"""Learning-rate schedulers: ``StepLR``, ``MultiStepLR``, ``ExponentialLR``, ``CosineAnnealingLR``,
``LinearLR`` (warm-up), ``LambdaLR`` and ``SequentialLR`` (e.g. warm-up then cosine), as in
``torch.optim.lr_scheduler``.

A scheduler sets each param group's ``"lr"`` from its initial value (``group["initial_lr"]``, recorded
when the first scheduler is made) and the epoch count ``last_epoch``: making one applies epoch 0,
each ``step()`` (called after ``optimizer.step()``) the next.  The lr is PyTorch's closed form of the
schedule at that epoch, so it never drifts by rounding and a scheduler restored from ``state_dict()``
continues exactly; schedulers do not compound on each other's values (PyTorch's chaining).
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from typing import Any, Callable, Dict, Iterable, List, Sequence, Union

from ..autograd.mode import outside_ops
from .optimizer import Optimizer


class LRScheduler:
    """Base class: subclasses give the lr of a group at an epoch (``_lr``)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        kind = type(self).__name__
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{kind}: {type(optimizer).__name__} is not an Optimizer.")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"{kind}: param group {i} has no 'initial_lr', needed to resume at last_epoch="
                        f"{last_epoch}; load the optimizer's state dict first, or start with last_epoch=-1."
                    )
        self.base_lrs: List[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def _lr(self, i: int, base_lr: float, epoch: int) -> float:
        """The lr of group ``i`` (initial lr ``base_lr``) at ``epoch`` (subclasses)."""
        raise NotImplementedError

    def get_lr(self) -> List[float]:
        """The lrs of the groups at the current epoch."""
        return [self._lr(i, base, self.last_epoch) for i, base in enumerate(self.base_lrs)]

    def step(self) -> None:
        """Move to the next epoch and set the groups' lrs; call it after ``optimizer.step()``."""
        if _traced(self):
            return
        self._step_count += 1
        self.last_epoch += 1
        self._set(self.get_lr())

    def _set(self, lrs: Sequence[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> List[float]:
        """The lrs the last ``step()`` (or the construction) set, one per param group."""
        return list(self._last_lr)

    def state_dict(self) -> Dict[str, Any]:
        """Everything but the optimizer (load the optimizer's own state dict beside it)."""
        return {k: _copy(v) for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`; the lrs in the optimizer come from its own state dict."""
        self.__dict__.update({k: _copy(v) for k, v in state_dict.items()})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self._last_lr})"


def _traced(scheduler: LRScheduler) -> bool:
    """Whether nt.compile made the step one of its graph's steps (then it runs at every call, not now)."""
    return outside_ops(f"{type(scheduler).__name__}.step", "changes the learning rates", replay=scheduler.step)


def _copy(v: Any) -> Any:
    return list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v


def _positive_int(kind: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{kind}: {name} must be a positive integer, got {value!r}.")
    return value


class LambdaLR(LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``; ``lr_lambda`` a function, or a list with one per group."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Union[Callable[[int], float], Sequence[Callable]],
                 last_epoch: int = -1) -> None:
        n = len(optimizer.param_groups) if isinstance(optimizer, Optimizer) else 0
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"LambdaLR: expected {n} lr_lambdas (one per param group), got {len(lr_lambda)}.")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for f in self.lr_lambdas:
            if not callable(f):
                raise TypeError(f"LambdaLR: lr_lambda must be callable, got {type(f).__name__}.")
        super().__init__(optimizer, last_epoch)

    def _lr(self, i: int, base_lr: float, epoch: int) -> float:
        return base_lr * self.lr_lambdas[i](epoch)

    def state_dict(self) -> Dict[str, Any]:
        """As PyTorch: functions are not saved (``None``); callable objects save their ``__dict__``."""
        sd = {k: _copy(v) for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(f.__dict__) for f in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        sd = dict(state_dict)
        saved = sd.pop("lr_lambdas", None) or []
        super().load_state_dict(sd)
        for f, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                f.__dict__.update(attrs)


class StepLR(LRScheduler):
    """``lr = initial_lr * gamma ** (epoch // step_size)``."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.step_size = _positive_int("StepLR", "step_size", step_size)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr(self, i: int, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** (epoch // self.step_size)


class MultiStepLR(LRScheduler):
    """``lr = initial_lr * gamma ** (number of milestones <= epoch)``."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = sorted(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr(self, i: int, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** bisect_right(self.milestones, epoch)


class ExponentialLR(LRScheduler):
    """``lr = initial_lr * gamma ** epoch``."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr(self, i: int, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** epoch


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``: from the initial
    lr down to ``eta_min`` at ``T_max`` (and back up after, as in PyTorch)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max = _positive_int("CosineAnnealingLR", "T_max", T_max)
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _lr(self, i: int, base_lr: float, epoch: int) -> float:
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class LinearLR(LRScheduler):
    """Linear warm-up (or decay): the factor on the initial lr goes from ``start_factor`` at epoch 0 to
    ``end_factor`` at ``total_iters`` and stays there."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}.")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = _positive_int("LinearLR", "total_iters", total_iters)
        super().__init__(optimizer, last_epoch)

    def _lr(self, i: int, base_lr: float, epoch: int) -> float:
        f = self.start_factor + (self.end_factor - self.start_factor) * min(self.total_iters, epoch) / self.total_iters
        return base_lr * f


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another: ``schedulers[k]`` from epoch ``milestones[k - 1]`` on, with its
    own epoch count restarting at 0 there.  E.g. ``SequentialLR(opt, [LinearLR(opt, 0.01, total_iters=100),
    CosineAnnealingLR(opt, T_max=900)], milestones=[100])``: warm-up, then cosine decay."""

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler], milestones: Sequence[int],
                 last_epoch: int = -1) -> None:
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("SequentialLR: expects at least one scheduler, got none.")
        for k, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{k}] is a {type(s).__name__}, not a scheduler.")
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{k}] ({type(s).__name__}) belongs to another optimizer; "
                                 "all must schedule the optimizer given to SequentialLR.")
        milestones = list(milestones)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: needs one milestone fewer than schedulers, got {len(schedulers)} "
                             f"schedulers and {len(milestones)} milestones.")
        if any(b <= a for a, b in zip(milestones, milestones[1:])) or (milestones and milestones[0] < 1):
            raise ValueError(f"SequentialLR: milestones must be increasing positive epochs, got {milestones}.")
        self._schedulers = schedulers
        self._milestones = milestones
        super().__init__(optimizer, last_epoch)

    def _current(self):
        k = bisect_right(self._milestones, self.last_epoch)
        return self._schedulers[k], self.last_epoch - (self._milestones[k - 1] if k else 0)

    def get_lr(self) -> List[float]:
        s, epoch = self._current()
        return [s._lr(i, base, epoch) for i, base in enumerate(s.base_lrs)]

    def step(self) -> None:
        if _traced(self):
            return
        self._step_count += 1
        self.last_epoch += 1
        s, epoch = self._current()
        s.last_epoch = epoch
        s._set(s.get_lr())
        self._last_lr = s.get_last_lr()

    def state_dict(self) -> Dict[str, Any]:
        """Its own state and each scheduler's (``"_schedulers"``)."""
        sd = {k: _copy(v) for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        sd = dict(state_dict)
        saved = sd.pop("_schedulers", None) or []
        if len(saved) != len(self._schedulers):
            raise ValueError(f"SequentialLR.load_state_dict: the state has {len(saved)} schedulers, this one "
                             f"{len(self._schedulers)}.")
        super().load_state_dict(sd)
        for s, ssd in zip(self._schedulers, saved):
            s.load_state_dict(ssd)
