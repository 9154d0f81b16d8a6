"""Conversion mode: run named tensors through unconverted code and list what is left to convert.

Inside ``with nt.gradual():`` every op the calling thread runs is recorded under the line of the
user's code that called it (the first stack frame outside the ``namedtensor`` package): whether it
ran on named tensors or on unnamed ones, and where an op dropped names: a ``reshape``/``view`` (the dims
it split or merged), a ``flatten`` without ``out_name`` of named dims, an ``unflatten`` of a named dim
without new names.  ``nt.conversion_report()`` lists them line by line: the to-do list for converting
the rest of the code.

The mode softens one error only: where an op cannot infer a name (``_names.NamesDropped``: flatten and
unflatten, which outside the mode ask for the name), it leaves just those dims unnamed, keeps every
other name and records the names dropped, as ``reshape`` does.  Rule 2 and every other check stay: a
mismatch of names is a bug the user wants to see while converting, so every other ``NamesError`` is
raised as outside the mode (docs/design.md, "Conversion mode").

The state is per thread, like grad mode: the mode records through the thread's tracer slot, chained to
the tracer it found (a shape trace outside it keeps working), and an op that drops names reads one
thread-local attribute, on that path only (for flatten/unflatten, after their name rule raised).  Outside the
mode nothing is recorded and an op pays nothing.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from . import _names
from .autograd.mode import swap_tracer
from .tensor import Tensor

__all__ = ["gradual", "conversion_report", "ConversionReport", "ReportLine"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class ReportLine(NamedTuple):
    """What ran at one line of the user's code under :func:`gradual`."""

    file: str
    line: int
    code: str
    named: Tuple[str, ...]
    unnamed: Tuple[str, ...]
    dropped: Tuple[Tuple[str, Tuple[str, ...]], ...]


class _Line:
    __slots__ = ("named", "unnamed", "dropped")

    def __init__(self) -> None:
        self.named: Dict[str, None] = {}  # dicts as ordered sets: ops in the order they first ran
        self.unnamed: Dict[str, None] = {}
        self.dropped: Dict[Tuple[str, Tuple[str, ...]], None] = {}


class _ThreadState(threading.local):
    #: the calling thread's recording (None outside gradual), keyed by (file, line)
    lines: Optional[Dict[Tuple[str, int], _Line]] = None
    #: what the last gradual block recorded, for conversion_report() after the block
    last: Optional[Dict[Tuple[str, int], _Line]] = None


_state = _ThreadState()


def _user_site() -> Tuple[str, int]:
    """The file and line of the first frame outside the package (the user's call)."""
    frame = sys._getframe()
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return "<unknown>", 0
    return frame.f_code.co_filename, frame.f_lineno


def _line() -> _Line:
    site = _user_site()
    lines = _state.lines
    entry = lines.get(site)
    if entry is None:
        entry = lines[site] = _Line()
    return entry


def note_dropped(op: str, dropped: Tuple[str, ...]) -> None:
    """Record that ``op`` dropped the names ``dropped`` (called by ops on that path only; a no-op
    outside :func:`gradual`)."""
    if _state.lines is not None:
        _line().dropped[(op, dropped)] = None


def active() -> bool:
    """Whether this thread is in :func:`gradual` (part of ``nt.compile``'s signature: a graph traced in
    the mode replays its unnamed dims where the strict op raises)."""
    return _state.lines is not None


def degrade(err: _names.NamesDropped) -> Any:
    """Inside :func:`gradual`: the name rule's result without the names it could not infer
    (``err.result``); the op records ``err.dropped`` with :func:`note_dropped` once it succeeded.
    Outside it: raise ``err``, the op's strict error.  Called from the op's ``except`` clause, so the
    mode costs nothing until a name cannot be inferred."""
    if _state.lines is None:
        raise err
    return err.result


def _is_named(x: object) -> bool:
    return isinstance(x, Tensor) and _names.is_named(x._names)


class _Recorder:
    """The tracer of one gradual block: records each op, then calls the tracer it replaced."""

    __slots__ = ("inner",)

    def __init__(self, inner: Optional[Callable]) -> None:
        self.inner = inner

    def __call__(self, op, inputs, outputs, params) -> None:
        entry = _line()
        named = any(map(_is_named, inputs)) or any(map(_is_named, outputs))
        (entry.named if named else entry.unnamed)[op.name] = None
        if self.inner is not None:
            self.inner(op, inputs, outputs, params)


class gradual:
    """Context manager (or decorator): conversion mode in this thread.

    Ops run as usual and are recorded per line of the calling code, for :func:`conversion_report`.
    Every name rule and error stays, except that ``flatten``/``unflatten`` leave unnamed the dims whose
    names they cannot infer (and record the names dropped) instead of raising.  Blocks nest; the
    outermost one starts a new report.
    """

    __slots__ = ("_prev_lines", "_prev_tracer")

    def __enter__(self) -> "gradual":
        self._prev_lines = _state.lines
        if self._prev_lines is None:
            _state.lines = {}
        self._prev_tracer = swap_tracer(None)
        swap_tracer(_Recorder(self._prev_tracer))
        return self

    def __exit__(self, *exc) -> None:
        swap_tracer(self._prev_tracer)
        if self._prev_lines is None:
            _state.last = _state.lines
        _state.lines = self._prev_lines

    def __call__(self, fn: Callable) -> Callable:
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with gradual():
                return fn(*args, **kwargs)

        return wrapper


class ConversionReport:
    """The lines of user code that ran under :func:`gradual`, in the order they first ran.

    ``rows`` are :class:`ReportLine` tuples; ``todo`` are those that still run unnamed ops or drop
    names; ``str(report)`` is a table.
    """

    def __init__(self, rows: List[ReportLine]) -> None:
        self.rows = rows

    @property
    def todo(self) -> List[ReportLine]:
        """The lines still to convert: some op ran unnamed there, or names were dropped."""
        return [r for r in self.rows if r.unnamed or r.dropped]

    def __str__(self) -> str:
        if not self.rows:
            return "conversion_report: no ops ran under nt.gradual()."
        out = []
        for r in self.rows:
            out.append(f"{r.file}:{r.line}: {r.code}")
            if r.named:
                out.append(f"    named:   {' '.join(r.named)}")
            if r.unnamed:
                out.append(f"    unnamed: {' '.join(r.unnamed)}")
            for op, names in r.dropped:
                out.append(f"    dropped: {op} dropped the names {_names.fmt(names)}")
        return "\n".join(out)

    __repr__ = __str__


def conversion_report() -> ConversionReport:
    """The report of this thread's current :func:`gradual` block, or of its last one after it ended."""
    lines = _state.lines if _state.lines is not None else _state.last
    rows = []
    for (file, line), entry in (lines or {}).items():
        code = linecache.getline(file, line).strip() if line else ""
        rows.append(ReportLine(file, line, code, tuple(entry.named), tuple(entry.unnamed), tuple(entry.dropped)))
    return ConversionReport(rows)
