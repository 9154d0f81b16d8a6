"""The optimizer base class: parameter groups, per-parameter state, ``zero_grad``, ``step`` and state dicts.

An optimizer updates its parameters in place, on their own buffers and backend, from their ``.grad``;
parameters whose grad is ``None`` are skipped.  The state it keeps per parameter (momentum buffers,
moment estimates) are tensors on the parameter's backend with the parameter's names, so a checkpoint
keeps them.  ``state_dict()`` has PyTorch's layout: ``{"state": {index: {...}}, "param_groups":
[{..., "params": [indices]}]}``, parameters numbered in group order.

Subclasses set their defaults, check a group's hyperparameters (``_check_group``) and update one
parameter from raw arrays (``_update``; or all the parameters of a group together, ``_update_group``),
with the raw-array helpers of :mod:`namedtensor.backends.update_math` (``chunks``: cache-sized pieces of
a parameter, its grad and state; ``out_ops``: the backend's elementwise functions with ``out=``).
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from .. import _names, backends
from .._internal import backend_of, bump_version, wrap
from ..autograd.engine import zero_grads
from ..autograd.graph import enable_grad
from ..autograd.mode import outside_ops, work_done, work_started
from ..tensor import Tensor

Params = Union[Iterable[Tensor], Iterable[Dict[str, Any]]]


class Optimizer:
    """Base class of all optimizers.

    ``params``: an iterable of tensors (leaf, floating-point), or of param-group dicts
    ``{"params": [...], "lr": ..., ...}`` whose missing hyperparameters come from ``defaults``.
    Tensors that do not require grad may be given (frozen layers): they never get a grad, so are skipped.
    """

    def __init__(self, params: Params, defaults: Dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.state: Dict[Tensor, Dict[str, Any]] = defaultdict(dict)
        self.param_groups: List[Dict[str, Any]] = []
        kind = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(
                f"{kind}: params must be an iterable of tensors or of param-group dicts, got a single tensor "
                f"(names {_names.fmt(params.names)}); wrap it in a list: {kind}([t], ...)."
            )
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{kind}: params must be an ordered collection, not a set (state_dict numbers the "
                            "parameters in order); use a list.")
        if isinstance(params, dict):
            raise TypeError(f"{kind}: params must be an iterable of tensors or of param-group dicts, got one "
                            f"dict; wrap it in a list: {kind}([{{'params': ...}}], ...).")
        try:
            params = list(params)
        except TypeError:
            raise TypeError(f"{kind}: params must be an iterable of tensors or of param-group dicts, "
                            f"got {type(params).__name__}.") from None
        if not params:
            raise ValueError(f"{kind}: got an empty parameter list; pass the tensors to optimize "
                             "(e.g. model.parameters()).")
        dicts = [isinstance(p, dict) for p in params]
        if any(dicts) and not all(dicts):
            raise TypeError(f"{kind}: params mixes tensors and param-group dicts; give either tensors or dicts "
                            "(put loose tensors in a group of their own: {'params': [...]}).")
        for group in params if all(dicts) else [{"params": params}]:
            self.add_param_group(group)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Add a group ``{"params": [...], hyperparameter: value...}``; missing hyperparameters take
        the optimizer's defaults.  A parameter may belong to one group only."""
        kind = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{kind}: a param group must be a dict, got {type(param_group).__name__}.")
        if "params" not in param_group:
            raise ValueError(f"{kind}: a param group needs a 'params' entry, got keys {sorted(param_group)}.")
        gi = len(self.param_groups)
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(f"{kind}: the params of group {gi} are a set, which has no fixed order (state_dict "
                            "numbers the parameters in order); use a list.")
        else:
            params = list(params)
        if not params:
            raise ValueError(f"{kind}: param group {gi} has an empty parameter list.")
        seen = set()
        for i, p in enumerate(params):
            where = f"parameter {i} of group {gi}"
            if not isinstance(p, Tensor):
                raise TypeError(f"{kind}: {where} is a {type(p).__name__}; an optimizer optimizes tensors.")
            if not p.is_leaf:
                raise ValueError(
                    f"{kind}: can't optimize a non-leaf tensor ({where}, names {_names.fmt(p.names)}, computed "
                    f"by {p.grad_fn.op.name}); optimize the leaf tensors it was computed from, or make a leaf "
                    "with .detach().requires_grad_()."
                )
            if p.dtype.kind != "f":
                raise TypeError(f"{kind}: {where} has dtype {p.dtype!r}; only floating-point tensors can be "
                                "optimized.")
            if id(p) in seen:
                raise ValueError(f"{kind}: {where} appears twice in the group (names {_names.fmt(p.names)}); "
                                 "give each parameter once.")
            seen.add(id(p))
        for g in self.param_groups:
            if any(id(p) in seen for p in g["params"]):
                raise ValueError(f"{kind}: some parameters appear in more than one parameter group; give each "
                                 "parameter to one group only.")
        group = dict(param_group)
        group["params"] = params
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group: Dict[str, Any]) -> None:
        """Raise a clear error for a bad hyperparameter of ``group`` (subclasses)."""

    # ------------------------------------------------------------------ gradients and steps
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients: to ``None`` (the default: no memory kept, the next backward assigns)
        or to zeros."""
        kind = type(self).__name__
        zero_grads([p for group in self.param_groups for p in group["params"]], set_to_none,
                   f"Optimizer.zero_grad#{kind}.zero_grad")

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """Update every parameter that has a grad, in place.  ``closure`` (optional) re-evaluates the
        model and returns the loss; it runs with grad enabled, before the update, and its result is returned."""
        # nt.compile makes the step one of its graph's steps, run at every call; not with a closure, which
        # re-evaluates the model and returns its loss to the function
        if outside_ops(f"{type(self).__name__}.step", "takes a closure, which re-evaluates the model during the "
                       "step; call it outside the compiled function",
                       replay=None if closure is not None else self._graph_step):
            return None
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        start = work_started()  # a profile's row, after the closure's ops (rows of their own)
        self._follow_params()
        updated = []
        for group in self.param_groups:
            todo = []
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if backend_of(g) is not backend_of(p):
                    raise ValueError(
                        f"{type(self).__name__}.step: a parameter (names {_names.fmt(p.names)}) is on "
                        f"{backend_of(p)!r} but its grad is on {backend_of(g)!r}; move the grad to the "
                        "parameter's device."
                    )
                todo.append((p, g.array))
            self._update_group(group, todo)
            if start is not None:
                updated += todo
        if start is not None:
            self._report_step(start, updated)
        return loss

    def _report_step(self, start: int, updated: List[Tuple[Tensor, Any]]) -> None:
        """The step's row in a profile, PyTorch's ``Optimizer.step#AdamW.step``: its bytes are those of an
        update that reads each parameter, grad and state tensor once and writes the parameter and the state
        once (the fused update's traffic)."""
        moved = 0
        for p, g in updated:
            state = [v for v in self.state[p].values() if isinstance(v, Tensor)]
            moved += 2 * p.array.nbytes + g.nbytes + 2 * sum(v.array.nbytes for v in state)
        kind = type(self).__name__
        work_done(f"Optimizer.step#{kind}.step", start, moved, backend_of(updated[0][0]) if updated else None)

    def _graph_step(self) -> None:
        """The step as a compiled graph runs it at every call (``nt.compile`` of a training step): with
        ``in_graph`` set, which lets an optimizer choose its fused update where that gives the same values
        bit for bit (Adam)."""
        self.in_graph = True
        try:
            self.step()
        finally:
            self.in_graph = False

    #: True while a compiled graph runs the step (:meth:`_graph_step`)
    in_graph = False

    def _update_group(self, group: Dict[str, Any], todo: List[Tuple[Tensor, Any]]) -> None:
        """Update the parameters of ``group`` that have a grad, ``(parameter, raw grad array)`` pairs, in
        place; by default one by one (:meth:`_update`).  Subclasses may update them together (Adam's
        one fused call per dtype)."""
        state = self.state
        for p, grad in todo:
            self._update(p, grad, state[p], group)
            bump_version(p)  # graphs that saved the old values must refuse them

    def _update(self, p: Tensor, grad, state: Dict[str, Any], group: Dict[str, Any]) -> None:
        """Update ``p`` in place from its raw gradient array ``grad`` (subclasses)."""
        raise NotImplementedError

    def _follow_params(self) -> None:
        """Put the state on its parameter's device after ``Module.to`` moved parameters in place (a step
        that does not go through :meth:`step` calls this first); an identity compare per state tensor
        when nothing moved."""
        for p, entry in self.state.items():
            B = backend_of(p)
            for k, v in entry.items():
                if isinstance(v, Tensor) and backend_of(v) is not B and v.device != p.device:
                    entry[k] = wrap(backends.transfer(v.array, backend_of(v), B), v.names, B)

    @staticmethod
    def _state_tensor(p: Tensor) -> Tensor:
        """A zero state tensor on ``p``'s backend with ``p``'s names."""
        B = backend_of(p)
        return wrap(B.zeros_like(p.array), p.names, B)

    # ------------------------------------------------------------------ state dicts
    def _required_state(self, group: Dict[str, Any]) -> Tuple[str, ...]:
        """Keys a non-empty parameter state must have for ``group``'s options (subclasses)."""
        return ()

    def state_dict(self) -> Dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`` (PyTorch's layout).

        Parameters are numbered in group order.  As in PyTorch the state tensors are the optimizer's own
        (not copies): save the dict before stepping again, or copy it."""
        index: Dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                i = index.setdefault(id(p), len(index))
                packed["params"].append(i)
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if s and id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Load a dict made by :meth:`state_dict`: the groups' hyperparameters and every parameter's state.

        Groups are matched in order and must have as many parameters as this optimizer's; state tensors
        must have their parameter's names and shape.  They are copied onto the parameter's backend and
        dtype, so the loaded dict stays independent of the optimizer."""
        kind = type(self).__name__
        op = f"{kind}.load_state_dict"
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            got = sorted(map(str, state_dict)) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise ValueError(f"{op}: expected a dict with 'state' and 'param_groups' (from Optimizer.state_dict()), "
                             f"got {got}.")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{op}: the loaded state dict has {len(saved_groups)} parameter groups, this optimizer "
                             f"has {len(self.param_groups)}.")
        params: Dict[int, Tuple[Tensor, Dict[str, Any]]] = {}
        new_groups = []
        for gi, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            ids = list(saved["params"])
            if len(ids) != len(group["params"]):
                raise ValueError(f"{op}: parameter group {gi} of the loaded state dict has {len(ids)} parameters, "
                                 f"this optimizer's group {gi} has {len(group['params'])}.")
            new = {k: v for k, v in saved.items() if k != "params"}
            new["params"] = group["params"]
            for k, v in self.defaults.items():  # a dict saved before an option existed takes its default
                new.setdefault(k, v)
            self._check_group(new)
            new_groups.append(new)
            for i, p in zip(ids, group["params"]):
                params[int(i)] = (p, new)
        state: Dict[Tensor, Dict[str, Any]] = defaultdict(dict)
        for key, entry in state_dict["state"].items():
            try:
                i = int(key)  # a checkpoint format may have turned the indices into strings
                p, group = params[i]
            except (KeyError, ValueError, TypeError):
                raise ValueError(f"{op}: the loaded state has an entry for parameter {key!r}, which no parameter "
                                 f"group lists (they list parameters 0 to {len(params) - 1}).") from None
            state[p] = {k: self._load_value(op, i, k, v, p) for k, v in entry.items()}
            missing = [k for k in self._required_state(group) if k not in state[p]]
            if missing:
                raise ValueError(f"{op}: the state of parameter {i} lacks {', '.join(map(repr, missing))}, which "
                                 f"{kind} with these options needs; was it saved by another optimizer or with other "
                                 "options?")
        self.param_groups = new_groups
        self.state = state

    @staticmethod
    def _load_value(op: str, i: int, key: str, value: Any, p: Tensor) -> Any:
        if key == "step" and isinstance(value, Tensor):
            return int(value.item())  # a checkpoint may store the step count as a 0-dim tensor
        if not isinstance(value, Tensor):
            return value
        if value.shape != p.shape:
            raise ValueError(f"{op}: state {key!r} of parameter {i} has shape {value.shape}, the parameter "
                             f"{p.shape}.")
        if value.names != p.names:
            raise _names.NamesError(
                f"{op}: state {key!r} of parameter {i} has names {_names.fmt(value.names)}, the parameter "
                f"{_names.fmt(p.names)}; the state must have its parameter's names (was the model renamed? "
                "rename the state's tensors to match)."
            )
        B, src = backend_of(p), backend_of(value)
        data = value.array if src is B else B.asarray(src.to_numpy(value.array))
        dtype = p.dtype if value.dtype.kind == "f" else value.dtype
        return wrap(B.asarray(data, dtype=dtype, copy=True), p.names, B)

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)


# ---------------------------------------------------------------------- hyperparameter checks
def check_number(kind: str, name: str, value: Any, low: float = 0.0, high: Optional[float] = None,
                 high_open: bool = False) -> None:
    """A real number in ``[low, high]`` (``[low, high)`` when ``high_open``), else a clear error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{kind}: {name} must be a number, got {type(value).__name__}.")
    if math.isnan(value) or value < low or (high is not None and (value >= high if high_open else value > high)):
        top = "" if high is None else f" and {'<' if high_open else '<='} {high}"
        raise ValueError(f"{kind}: invalid {name} {value}: it must be >= {low}{top}.")
