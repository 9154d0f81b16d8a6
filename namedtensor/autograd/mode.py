"""Grad mode, the shape tracer's slot and version counters: the autograd state below ``Tensor``.

``tensor.py`` and the graph (:mod:`.graph`) both read this state, so it lives in a module that
imports nothing of the package.  The two mutable globals are read through the module
(``mode._grad_enabled``, ``mode._tracer``), never imported by name: a name imported once would
keep the value it had then.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

#: whether ops record the graph (off inside ``no_grad``)
_grad_enabled = True

#: ``fn(op, inputs, outputs, params)`` called after every op while a shape dry run records (see tracing.py)
_tracer: Optional[Callable] = None


def is_grad_enabled() -> bool:
    """Whether ops record the graph now (off inside ``no_grad``)."""
    return _grad_enabled


class _GradMode:
    __slots__ = ("_mode", "_prev")

    def __init__(self, mode: bool) -> None:
        self._mode = mode

    def __enter__(self):
        global _grad_enabled
        self._prev = _grad_enabled
        _grad_enabled = self._mode
        return self

    def __exit__(self, *exc) -> None:
        global _grad_enabled
        _grad_enabled = self._prev

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
        global _grad_enabled
        self._mode = mode
        self._prev = _grad_enabled
        _grad_enabled = mode

    def __enter__(self):
        return self

    def __call__(self, fn):
        global _grad_enabled
        _grad_enabled = self._prev  # as a decorator it must not change the mode where it is applied
        return super().__call__(fn)


def set_grad_enabled(mode: bool) -> _GradMode:
    """Turn graph recording on or off: as a call, a context manager or a decorator."""
    return _SetGradEnabled(bool(mode))


def version_counter(t) -> list:
    """The tensor's version counter (shared by its views), made on first use."""
    try:
        return t._vc
    except AttributeError:
        vc = t._vc = [0]
        return vc
