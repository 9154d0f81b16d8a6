"""Keeping freed memory in the process's heap, so that repeated steps reuse pages instead of faulting
in fresh ones.

glibc's malloc serves arrays above its mmap threshold with fresh ``mmap`` pages, and trims the top of
its heap when more than its trim threshold lies free there.  A training step allocates and frees the
same tens of megabytes every time, so each step faults in (and the kernel zeroes) every page of its
large intermediates again: about 3,500 faults and 7 ms of a 60 ms CPU step of the benchmark block.
:func:`retain_freed_memory` raises both thresholds (``mallopt``), so arrays up to 32 MB (glibc's
largest mmap threshold) come from the heap and freed memory stays there for the next step.  The
process's resident memory then stays at its peak instead of shrinking after each step; the peak itself
does not grow.

``nt.compile`` turns retention on when it builds its first program, since compiled code is what runs in
hot loops, unless the program called :func:`retain_freed_memory` itself or its environment configures
malloc (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_``, ``MALLOC_MMAP_MAX_``
or ``glibc.malloc`` tunables in ``GLIBC_TUNABLES``): the user's settings win.  Other C libraries
(musl, macOS, Windows) are left alone.
"""

from __future__ import annotations

import ctypes
import os
import platform
from typing import Optional

__all__ = ["retain_freed_memory", "retain_by_default", "retaining"]

# mallopt's parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc refuses mmap thresholds above half its largest heap (32 MiB on 64-bit machines)
_MMAP_THRESHOLD = 32 << 20
_TRIM_THRESHOLD = 1 << 30
# glibc's initial values: what turning retention off restores
_GLIBC_DEFAULT = 128 << 10
_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")

_state = {"decided": False, "on": False}


def _glibc() -> Optional[ctypes.CDLL]:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def _configured_by_environment() -> bool:
    return any(k in os.environ for k in _ENVIRONMENT) or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "")


def _set(libc: ctypes.CDLL, mmap_threshold: int, trim_threshold: int) -> bool:
    # mallopt returns 1 on success; both must hold for the heap to keep what it frees
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                      trim_threshold))


def retain_freed_memory(enabled: bool = True) -> bool:
    """Keep freed memory in the process's heap (``enabled=True``) so that the next step's arrays reuse
    its pages.  ``False`` leaves malloc's own policy in place, or, where retention was on, restores
    glibc's initial thresholds and hands the free memory back (glibc's adaptive mmap threshold, which
    any ``mallopt`` turns off, stays off then).  Returns whether retention is now in effect: False
    where the C library is not glibc.  Calling it also stops ``nt.compile`` from turning retention on."""
    if not isinstance(enabled, bool):
        raise TypeError(f"retain_freed_memory: enabled must be a bool, got {enabled!r}.")
    _state["decided"] = True
    libc = _glibc()
    if libc is None:
        _state["on"] = False
        return False
    if enabled:
        _state["on"] = _set(libc, _MMAP_THRESHOLD, _TRIM_THRESHOLD)
    elif _state["on"]:
        _set(libc, _GLIBC_DEFAULT, _GLIBC_DEFAULT)
        libc.malloc_trim(0)
        _state["on"] = False
    return _state["on"]


def retain_by_default() -> None:
    """Turn retention on once, unless the program or its environment already decided (nt.compile)."""
    if _state["decided"]:
        return
    if _configured_by_environment():
        _state["decided"] = True
        return
    retain_freed_memory(True)


def retaining() -> bool:
    """Whether :func:`retain_freed_memory` is in effect."""
    return _state["on"]
