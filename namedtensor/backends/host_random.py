"""The host's own random generators, Python's ``random`` and NumPy's global one (``np.random.rand``...),
outside the backends' generators: ``nt.compile``'s trace compares their states before and after, since a
number drawn from them inside a compiled function would be a constant of its graph, the same at every call."""

from __future__ import annotations

import random
from typing import Any, Tuple

import numpy as np

__all__ = ["states", "restore", "same"]


def states() -> Tuple[Any, Any]:
    """The states of Python's ``random`` and of NumPy's global generator."""
    return random.getstate(), np.random.get_state()


def restore(saved: Tuple[Any, Any]) -> None:
    """Put back what :func:`states` returned, so that the draws that follow are those that would have come."""
    random.setstate(saved[0])
    np.random.set_state(saved[1])


def same(a: Tuple[Any, Any], b: Tuple[Any, Any]) -> bool:
    """Whether two :func:`states` are the same (nothing was drawn in between)."""
    (py_a, np_a), (py_b, np_b) = a, b
    return py_a == py_b and all(np.array_equal(x, y) for x, y in zip(np_a, np_b))
