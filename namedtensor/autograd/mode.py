"""Grad mode, the tracer slot and version counters: the autograd state below ``Tensor``.

``tensor.py`` and the graph (:mod:`.graph`) both read this state, so it lives in a module that
imports nothing of the package.  Grad mode and the tracer belong to a thread, as PyTorch's grad
mode does: a ``backward()`` or a ``no_grad`` block in one thread must not change what another
thread's ops record, and a shape trace or a profile records only its own thread's ops.  Both sit in
one tuple per thread, :data:`state` ``.current``, read by ``apply`` once per op.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Callable, Optional, Tuple, Union


class _ThreadState(threading.local):
    """One thread's autograd state.  The class attribute is what every thread starts with (grad mode
    on, no tracer), so a new thread needs no set-up call."""

    #: ``(grad mode on, tracer or None)``; the tracer is called as ``fn(op, inputs, outputs, params)``
    #: after every op while a shape trace, conversion mode, a profile or ``nt.compile`` records (tracing.py,
    #: conversion.py, profiler.py, compiler/capture.py).  A tracer may also have
    #: ``backward_hook(roots, grad_outputs, retain_graph, create_graph, inputs)``, called when a backward
    #: pass starts (True: the tracer recorded it, and the pass does not run now), ``edit_hook(t, op)``,
    #: before an in-place op writes into ``t`` (refusing it, or letting the op make its result a value
    #: that ``t`` stands for from then on: ``edited(t, result)``, ops/inplace.py), ``inplace_hook(t, op)``,
    #: before a sampler draws into ``t`` (refusing it), ``state_hook(what, why, tensor, replay, result)``,
    #: before a step on state that no op carries (``.grad``, an optimizer's or a scheduler's step:
    #: :func:`outside_ops`), ``traces_compositions``,
    #: which makes ops that are one fused step record their parts (ops/_common.traced_as_composition),
    #: ``alias_hook(spec, t)``, when a dry run makes ``spec`` the meta stand-in of ``t``,
    #: ``detach_hook(t, out)``, when ``detach()`` or ``.data`` makes ``out`` over ``t``'s array,
    #: ``work_hook(name, start, nbytes, backend)``, after work on raw arrays that runs no op (an optimizer's
    #: step, gradient clipping: :func:`work_done`), and
    #: ``run_backward_node(node, grads)``, which runs a graph node's backward for the engine (and times
    #: it).  One tuple, replaced whole on every change, because a thread-local read costs several plain
    #: ones and ``apply`` needs both
    current = (True, None)
    #: ``(start, end)`` in ``time.perf_counter_ns`` of the op now reported to the tracer: written by the op
    #: path just before it calls the tracer, and only while one is installed, so that ops pay nothing for it
    #: otherwise; a tracer reads it with :func:`op_span` (a thread-local rather than an argument, so that
    #: tracers that chain to the one they replaced, as conversion mode does, pass it on without knowing it)
    span = (0, 0)


state = _ThreadState()


def is_grad_enabled() -> bool:
    """Whether ops record the graph now, in this thread (off inside ``no_grad``)."""
    return state.current[0]


def current_tracer() -> Optional[Callable]:
    """The tracer that this thread's ops report to (None outside a shape trace)."""
    return state.current[1]


def op_span() -> Tuple[int, int]:
    """``(start, end)`` in ``time.perf_counter_ns`` of the op that this thread's tracer is called for: from
    just before its forward to just before the tracer call (the forward, wrapping the result and, when
    one is recorded, the graph node; not the tracers' own work)."""
    return state.span


def outside_ops(what: str, why: str, tensor=None, replay: Optional[Callable[[], object]] = None,
                result: object = None):
    """Tell this thread's tracer, before it happens, that step ``what`` reads or changes state that no op
    carries (``why``; of ``tensor``, where one is concerned).  nt.compile's tracer records a step that
    ``replay()`` can make again at every call (an optimizer's step, ``zero_grad``) as a step of its graph,
    and then the caller skips it now: True, or, for a step that returns a 0-dim tensor (``result``: its
    dtype), the stand-in the caller returns instead; it refuses the others.
    False: go on (no such tracer)."""
    tracer = state.current[1]
    if tracer is not None:
        hook = getattr(tracer, "state_hook", None)
        if hook is not None:
            return hook(what, why, tensor, replay, result)
    return False


def detached(source, out) -> None:
    """Tell this thread's tracer (nt.compile's, with a ``detach_hook``) that ``out`` was made over
    ``source``'s array outside the ops (``detach()``, ``.data``): an edit of either shows in the other.
    Callers test for a tracer first (``state.current[1]``), so that an eager detach pays no call."""
    hook = getattr(state.current[1], "detach_hook", None)
    if hook is not None:
        hook(source, out)


def work_started() -> Optional[int]:
    """``time.perf_counter_ns()`` where this thread's tracer times work that runs no op (a tracer with a
    ``work_hook``: a profile's), else None; the caller reports the work with :func:`work_done`.  Outside a
    profile that costs one attribute test, not a clock reading."""
    tracer = state.current[1]
    return None if tracer is None or not hasattr(tracer, "work_hook") else time.perf_counter_ns()


def work_done(name: str, start: int, nbytes: int, backend=None) -> None:
    """Tell this thread's tracer that ``name``, work on raw arrays that runs no op (an optimizer's update,
    gradient clipping), ran from ``start`` (:func:`work_started`) until now and moved ``nbytes``; ``backend``
    is where it queued its kernels (a profile waits for a GPU's)."""
    hook = getattr(state.current[1], "work_hook", None)
    if hook is not None:
        hook(name, start, nbytes, backend)


def swap_tracer(tracer: Optional[Callable]) -> Optional[Callable]:
    """Install ``tracer`` for this thread's ops and return the one it replaces."""
    grad_enabled, previous = state.current
    state.current = (grad_enabled, tracer)
    return previous


def _set_grad_enabled(mode: bool) -> bool:
    """Set this thread's grad mode and return the one it replaces."""
    previous, tracer = state.current
    state.current = (mode, tracer)
    return previous


class _GradMode:
    __slots__ = ("_mode", "_prev")

    def __init__(self, mode: bool) -> None:
        self._mode = mode

    def __enter__(self):
        self._prev = _set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc) -> None:
        _set_grad_enabled(self._prev)

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _GradMode(mode):
                return fn(*args, **kwargs)

        return wrapper


def no_grad() -> _GradMode:
    """Context manager (or decorator) in which no graph is recorded."""
    return _GradMode(False)


def enable_grad() -> _GradMode:
    """Context manager (or decorator) that records the graph again, e.g. inside ``no_grad``."""
    return _GradMode(True)


class _SetGradEnabled(_GradMode):
    """Sets the mode at once (``nt.set_grad_enabled(False)`` as a plain call works, as in PyTorch);
    as a context manager it restores the previous mode on exit."""

    __slots__ = ()

    def __init__(self, mode: bool) -> None:
        self._mode = mode
        self._prev = _set_grad_enabled(mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        _set_grad_enabled(self._prev)  # as a decorator it must not change the mode where it is applied
        return super().__call__(fn)


def set_grad_enabled(mode: bool) -> _GradMode:
    """Turn graph recording on or off in this thread: as a call, a context manager or a decorator."""
    return _SetGradEnabled(bool(mode))


def inference_mode(mode: Union[bool, Callable] = True) -> Union[_GradMode, Callable]:
    """PyTorch's ``inference_mode``: here :func:`no_grad` (``mode=False``: :func:`enable_grad`), as a context
    manager or a decorator, ``@inference_mode`` without a call included.  Tensors made inside are ordinary
    tensors (PyTorch's inference tensors have no counterpart: nothing here costs less than no_grad)."""
    if callable(mode):
        return _GradMode(False)(mode)
    if mode.__class__ is not bool:
        raise TypeError(f"inference_mode: mode must be a bool, got {type(mode).__name__} {mode!r}.")
    return _GradMode(not mode)


def version_counter(t) -> list:
    """The tensor's version counter (shared by its views), made on first use."""
    try:
        return t._vc
    except AttributeError:
        vc = t._vc = [0]
        return vc
