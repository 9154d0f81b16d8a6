"""The op profiler: ``nt.profile``, with PyTorch's key-averages table, a Chrome trace and a roofline.

``with nt.profile() as prof:`` records every op that the calling thread runs inside the block, forward
ops and the ops of backward passes alike: its name, the names, shapes and dtypes of its tensor inputs
and outputs, its time, the bytes it moved (its tensor inputs' and outputs' ``nbytes`` together, the
traffic of an op that reads its inputs once and writes its outputs once; none for a view) and its FLOPs
(``tracing.flops``: a contraction's by its formula, one per output element of an elementwise op, one per
input element of an op that reduces).  A backward that a node computes on raw arrays (GELU's,
cross-entropy's, a linear layer's two products side by side) runs no op: it shows as the node's
``"<op>_backward"`` row, with FLOPs where ``tracing.BACKWARD_FLOPS`` has a rule for it.  Work on raw
arrays outside any op is a row too, without operands or FLOPs: an optimizer's step and ``zero_grad``
(PyTorch's ``Optimizer.step#AdamW.step`` and ``Optimizer.zero_grad#AdamW.zero_grad``), ``clip_grad_norm_``
and ``clip_grad_value_``, eager or a step of a compiled training step, its bytes those it reads and writes.
Then ``print(prof)`` is PyTorch's key-averages table with names, ``prof.export_chrome_trace(path)``
writes a trace for chrome://tracing or Perfetto, and ``prof.roofline()`` compares each op's time with
the least time this machine's memory bandwidth and matmul rate allow.

Python's garbage collector stops the thread that triggers it, inside whatever op is running: a full
collection in a process holding a few hundred thousand objects takes over 100 ms (the benchmark block's
process with PyTorch and Numba loaded: 131 ms, in one of twenty steps), and the profile's own records
are among the allocations that trigger it.  So a collection on the recording thread is a row of its own
(``"python gc, generation 2"``, in ``prof.collections``: PyTorch's profiler has no such row), and its
time is taken out of the ops, backward nodes and work rows it fell in, whose times stay their own work.

How it hooks in: a profile is a tracer, in the thread's tracer slot (``autograd/mode.py``) that shape
traces and conversion mode use too, chained to the tracer it finds there and putting it back on exit,
so blocks nest and mix with ``nt.gradual`` and ``nt.trace_shapes``.  ``apply`` reads the slot once per
op; only while a tracer is installed does it read the clock, before the forward and after the op's own
bookkeeping (the graph node, when one is recorded), and leave the two readings in the thread's state
for ``op_span()``.  So the time is the op's own, not the profiler's, and ops outside a profile pay one
``is not None`` test.  Work outside ops reads the clock through ``mode.work_started`` (only where the
tracer has a ``work_hook``, as a profile's has) and reports through ``mode.work_done``.  On a GPU an op only queues its kernels: with ``sync=True`` (the default) the
profile waits for the device after each op on CUDA and reads the clock again, so the time covers the
kernels (the first op in the block also waits for work queued before it).
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from html import escape
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from ._internal import backend_of, op_span, raw, swap_tracer
from ._dtypes import float32
from .autograd.mode import no_grad
from .backends import get_num_threads
from .ops.creation import ones, randn
from .tensor import Tensor
from .tracing import BACKWARD_FLOPS, Operand, flops, operand_of

__all__ = ["profile", "Profile", "ProfileEvent", "OpStats", "Roofline", "RooflineRow"]

_clock = time.perf_counter_ns
_OPERANDS = "Input names and shapes"  # the column that grouping by input shape adds

#: the orders :meth:`Profile.table` sorts by, each the value it sorts on (largest first)
_SORT_KEYS: Dict[str, Callable[["OpStats"], Any]] = {
    "time": lambda s: s.total_ns,
    "mean": lambda s: s.mean_ns,
    "calls": lambda s: s.calls,
    "bytes": lambda s: s.bytes,
    "flops": lambda s: s.flops,
}


class ProfileEvent(NamedTuple):
    """One op that ran in a profile: its name, tensor operands, start (``time.perf_counter_ns``), duration
    (nanoseconds), the bytes of its operands and its FLOPs (None where it computes nothing, as a copy, or
    where it is not counted).  A backward node (``"<op>_backward"``) has the time of its own work as its
    duration, and ``span_ns``, from its start to its end, around the ops its backward ran."""

    name: str
    inputs: Tuple[Operand, ...]
    outputs: Tuple[Operand, ...]
    start_ns: int
    duration_ns: int
    bytes: int
    flops: Optional[int]
    span_ns: Optional[int] = None


class OpStats(NamedTuple):
    """One row of :meth:`Profile.key_averages`: the calls of one op (of one op on inputs of the same names
    and shapes when grouped by input shape; ``inputs`` are then the first call's, else empty)."""

    name: str
    inputs: Tuple[Operand, ...]
    calls: int
    total_ns: int
    bytes: int
    flops: int

    @property
    def mean_ns(self) -> float:
        """The mean time of a call, in nanoseconds."""
        return self.total_ns / self.calls

    @property
    def gflops_per_s(self) -> float:
        """FLOPs per second, in billions (FLOPs per nanosecond)."""
        return self.flops / self.total_ns if self.total_ns else 0.0

    @property
    def gbytes_per_s(self) -> float:
        """Bytes moved per second, in billions (bytes per nanosecond)."""
        return self.bytes / self.total_ns if self.total_ns else 0.0


class RooflineRow(NamedTuple):
    """One op's place under the roofline: its time and the least time the machine allows for its bytes and
    FLOPs (``bound_ns``, summed over its calls), and their ratio (None where it moved and computed nothing)."""

    name: str
    calls: int
    time_ns: int
    bound_ns: float
    ratio: Optional[float]
    bytes: int
    flops: int


class Roofline:
    """The machine's figures (``bandwidth`` in bytes per second, ``flop_rate`` in FLOPs per second, on
    ``threads`` threads) and one :class:`RooflineRow` per op name, the slowest first; a table when printed."""

    def __init__(self, bandwidth: float, flop_rate: float, threads: int, rows: List[RooflineRow]) -> None:
        self.bandwidth = bandwidth
        self.flop_rate = flop_rate
        self.threads = threads
        self.rows = rows

    def machine(self) -> str:
        """The machine's figures, in words."""
        return (f"memory bandwidth {self.bandwidth / 1e9:.2f} GB/s (array copy), matmul {self.flop_rate / 1e9:.2f} "
                f"GFLOP/s (float32 {_GEMM}x{_GEMM}, {self.threads} threads)")

    def cells(self) -> List[Tuple[str, ...]]:
        """The rows as strings, in the table's columns."""
        return [(r.name, str(r.calls), _fmt_time(r.time_ns), _fmt_time(r.bound_ns),
                 "" if r.ratio is None else f"{r.ratio:.2f}", _fmt_bytes(r.bytes), _fmt_count(r.flops))
                for r in self.rows]

    def __str__(self) -> str:
        header = ("Name", "Calls", "Time", "Bound", "Time/bound", "Bytes", "FLOPs")
        return _layout(header, self.cells(), f"Machine: {self.machine()}")

    __repr__ = __str__

    def _repr_html_(self) -> str:
        header = ("Name", "Calls", "Time", "Bound", "Time/bound", "Bytes", "FLOPs")
        return _html(header, self.cells(), f"Machine: {self.machine()}")


class _Recorder:
    """The tracer of one profile block: records each op, then calls the tracer it replaced; runs each
    backward node for the engine, recording the node's own work."""

    __slots__ = ("events", "collections", "sync", "inner")

    def __init__(self, events: List[ProfileEvent], collections: List[ProfileEvent], sync: bool,
                 inner: Optional[Callable]) -> None:
        self.events = events
        self.collections = collections
        self.sync = sync
        self.inner = inner

    def __call__(self, op, inputs, outputs, params) -> None:
        start, end = op_span()
        if self.sync:
            B = backend_of(outputs[0])
            if B.device.startswith("cuda"):  # the op only queued its kernels: its time ends when they do
                B.synchronize()
                end = _clock()
        end -= self.collected_since(start)
        tensors = [x for x in inputs if isinstance(x, Tensor)]
        ins = tuple(operand_of(x) for x in tensors)
        outs = tuple(operand_of(o) for o in outputs)
        # a view (rename, transpose, a basic slice) touches no data, whatever its operands' sizes
        moved = 0 if op.view else sum(raw(x).nbytes for x in tensors) + sum(raw(o).nbytes for o in outputs)
        self.events.append(ProfileEvent(op.name, ins, outs, start, end - start, int(moved),
                                        flops(op, ins, outs, params)))
        if self.inner is not None:
            self.inner(op, inputs, outputs, params)

    def run_backward_node(self, node, grads) -> tuple:
        """Run ``node``'s backward and record ``"<op>_backward"``: its time less that of the ops it ran (those
        are rows of their own), so that a backward computed on raw arrays (GELU's, cross-entropy's, a fused
        op's kernel) shows, and nothing is counted twice."""
        first = len(self.events)
        start = _clock()
        in_grads = node.op.backward(node, *grads)
        out = [g for g in in_grads if isinstance(g, Tensor)]
        if self.sync and out and backend_of(out[0]).device.startswith("cuda"):
            backend_of(out[0]).synchronize()
        end = _clock()
        inner = sum(e.duration_ns for e in self.events[first:]) + self.collected_since(start)
        ins = tuple(operand_of(g) for g in grads if isinstance(g, Tensor))
        outs = tuple(operand_of(g) for g in out)
        moved = sum(raw(g).nbytes for g in grads if isinstance(g, Tensor)) + sum(raw(g).nbytes for g in out)
        rule = BACKWARD_FLOPS.get(node.op.name)
        count = int(rule(ins, outs, node.params)) if rule is not None and len(self.events) == first else None
        self.add(ProfileEvent(f"{node.op.name}_backward", ins, outs, start, max(end - start - inner, 0), int(moved),
                              count, end - start))
        return in_grads

    def work_hook(self, name: str, start: int, nbytes: int, B) -> None:
        """Record ``name``, work on raw arrays that ran no op (``autograd.mode.work_done``: an optimizer's
        step, gradient clipping), from ``start`` until now less the ops it ran (rows of their own)."""
        if self.sync and B is not None and B.device.startswith("cuda"):
            B.synchronize()
        end = _clock()
        inner = self.collected_since(start)
        for e in reversed(self.events):  # in the order they ended: those inside ended last
            if e.start_ns < start:
                break
            inner += e.duration_ns
        self.add(ProfileEvent(name, (), (), start, max(end - start - inner, 0), int(nbytes), None))

    def add(self, event: ProfileEvent) -> None:
        """Record ``event`` here and in the profiles this one nests in."""
        self.events.append(event)
        if isinstance(self.inner, _Recorder):
            self.inner.add(event)

    def add_collection(self, event: ProfileEvent) -> None:
        """Record a garbage collection here and in the profiles this one nests in."""
        self.collections.append(event)
        if isinstance(self.inner, _Recorder):
            self.inner.add_collection(event)

    def collected_since(self, start: int) -> int:
        """The nanoseconds of the garbage collections since ``start`` (``perf_counter_ns``): the work of
        none of the rows they fell in."""
        paused = 0
        for c in reversed(self.collections):
            if c.start_ns < start:
                break
            paused += c.duration_ns
        return paused


#: ``recorders``: the recorders of the profiles this thread is in, innermost last; ``gc_start``: when the
#: collection now running on this thread began
_recording = threading.local()
#: how many profiles record, on all threads: the collector's hook is installed while there are any
_profiles = {"recording": 0}
_profiles_lock = threading.Lock()


def _collection(phase: str, info: dict) -> None:
    """``gc.callbacks``' hook while profiles record: a collection on a thread that records is a row of the
    innermost profile there (and so of those it nests in)."""
    recorders = getattr(_recording, "recorders", None)
    if not recorders:
        return
    if phase == "start":
        _recording.gc_start = _clock()
        return
    start = _recording.gc_start
    row = f"python gc, generation {info['generation']}"
    recorders[-1].add_collection(ProfileEvent(row, (), (), start, _clock() - start, 0, None))


def _start_recording(recorder: _Recorder) -> None:
    if not hasattr(_recording, "recorders"):
        _recording.recorders = []
    _recording.recorders.append(recorder)
    with _profiles_lock:
        _profiles["recording"] += 1
        if _profiles["recording"] == 1:
            gc.callbacks.append(_collection)


def _stop_recording() -> None:
    _recording.recorders.pop()
    with _profiles_lock:
        _profiles["recording"] -= 1
        if _profiles["recording"] == 0:
            gc.callbacks.remove(_collection)


class Profile:
    """What ``with nt.profile() as prof:`` recorded: ``events`` (one :class:`ProfileEvent` per op, in the
    order they ended), ``collections`` (one per garbage collection on the recording thread, its time
    taken out of the events it fell in), ``key_averages()``, ``table()`` (also ``print(prof)``, and HTML
    in Jupyter), ``export_chrome_trace(path)`` and ``roofline()``.

    Made by :func:`profile`; a block records the ops of the thread that enters it, and blocks nest (an
    inner block's ops are in the outer one's events too).
    """

    def __init__(self, sync: bool = True) -> None:
        self.sync = sync
        self.events: List[ProfileEvent] = []
        self.collections: List[ProfileEvent] = []
        #: perf_counter_ns when the first block began: time 0 of the Chrome trace
        self.origin_ns: Optional[int] = None
        self._thread = 0  # the native id of the thread that recorded, the Chrome trace's "tid"
        self._recorder: Optional[_Recorder] = None
        self._previous: Optional[Callable] = None

    def __enter__(self) -> "Profile":
        if self._recorder is not None:
            raise RuntimeError("profile: this profile is recording already; nest a new nt.profile() instead.")
        if self.origin_ns is None:
            self.origin_ns = _clock()
        self._thread = threading.get_native_id()
        self._previous = swap_tracer(None)
        self._recorder = _Recorder(self.events, self.collections, self.sync, self._previous)
        swap_tracer(self._recorder)
        _start_recording(self._recorder)
        return self

    def __exit__(self, *exc) -> None:
        _stop_recording()
        swap_tracer(self._previous)
        self._recorder = self._previous = None

    @property
    def total_ns(self) -> int:
        """The time of every recorded op and garbage collection together, in nanoseconds."""
        return sum(e.duration_ns for e in self.events) + sum(c.duration_ns for c in self.collections)

    def key_averages(self, group_by_input_shape: bool = False) -> List[OpStats]:
        """One :class:`OpStats` per op name (per op name and input names and shapes with
        ``group_by_input_shape=True``, as PyTorch's ``key_averages``), and one per generation of the
        garbage collections, the largest total time first."""
        groups: Dict[Any, List[ProfileEvent]] = {}
        for e in self.events + self.collections:
            key = (e.name, tuple((o.names, o.shape) for o in e.inputs)) if group_by_input_shape else e.name
            groups.setdefault(key, []).append(e)
        stats = [OpStats(es[0].name, es[0].inputs if group_by_input_shape else (), len(es),
                         sum(e.duration_ns for e in es), sum(e.bytes for e in es), sum(e.flops or 0 for e in es))
                 for es in groups.values()]
        stats.sort(key=lambda s: s.total_ns, reverse=True)
        return stats

    def _rows(self, sort_by: str, row_limit: Optional[int], group_by_input_shape: bool):
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"table: sort_by must be one of {', '.join(map(repr, _SORT_KEYS))}, got {sort_by!r}.")
        stats = sorted(self.key_averages(group_by_input_shape), key=_SORT_KEYS[sort_by], reverse=True)
        total = self.total_ns
        header = ("Name", "Calls", "Total time", "Mean time", "% total", "Bytes", "FLOPs", "GFLOP/s", "GB/s")
        cells = []
        for s in stats[:row_limit]:
            row = (s.name, str(s.calls), _fmt_time(s.total_ns), _fmt_time(s.mean_ns),
                   f"{100 * s.total_ns / total:.1f}%" if total else "", _fmt_bytes(s.bytes), _fmt_count(s.flops),
                   f"{s.gflops_per_s:.2f}" if s.flops else "", f"{s.gbytes_per_s:.2f}")
            if group_by_input_shape:
                row += (" ".join(map(str, s.inputs)),)
            cells.append(row)
        if group_by_input_shape:
            header += (_OPERANDS,)
        count = len(self.collections)
        collected = f", {count} garbage collection{'s' if count > 1 else ''}" if count else ""
        return header, cells, f"{len(self.events)} ops{collected}, total time {_fmt_time(total)}"

    def table(self, sort_by: str = "time", row_limit: Optional[int] = None,
              group_by_input_shape: bool = False) -> str:
        """The key averages as a table (PyTorch's profiler table, with names): calls, total and mean time,
        % of the total, bytes, FLOPs, GFLOP/s and GB/s per op, largest ``sort_by`` first (``"time"``,
        ``"mean"``, ``"calls"``, ``"bytes"`` or ``"flops"``), at most ``row_limit`` rows."""
        return _layout(*self._rows(sort_by, row_limit, group_by_input_shape))

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return _html(*self._rows("time", None, False))

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as a Chrome trace (JSON ``traceEvents``, complete events ``"ph": "X"`` with ``ts``
        and ``dur`` in microseconds from the start of the profile) for chrome://tracing or Perfetto; each
        event's ``args`` hold its operands' names, shapes and dtypes, its bytes and its FLOPs.  A backward
        node spans the ops its backward ran, which show nested in it; a garbage collection (category
        ``"gc"``) shows inside the row it fell in."""
        origin = self.origin_ns or 0
        pid, tid = os.getpid(), self._thread
        collections = set(map(id, self.collections))
        trace = [{"name": e.name, "cat": "gc" if id(e) in collections else "op" if e.span_ns is None else "backward",
                  "ph": "X",
                  "ts": (e.start_ns - origin) / 1e3, "dur": (e.duration_ns if e.span_ns is None else e.span_ns) / 1e3,
                  "pid": pid, "tid": tid,
                  "args": {"inputs": [_operand_json(o) for o in e.inputs],
                           "outputs": [_operand_json(o) for o in e.outputs],
                           "bytes": e.bytes, "flops": e.flops}}
                 for e in sorted(self.events + self.collections, key=lambda e: e.start_ns)]
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)

    def roofline(self) -> Roofline:
        """Each op's time against the roofline bound ``max(bytes / bandwidth, FLOPs / matmul rate)`` of this
        machine, summed over its calls, and their ratio (1: as fast as the machine allows).  The figures
        are measured once per process and thread count: a large array copy and a float32 matmul of
        1024x1024 on ``nt.get_num_threads()`` threads (the CPU's, also for ops on a GPU)."""
        threads = get_num_threads()
        bandwidth, rate = _machine(threads)
        bounds: Dict[str, float] = {}
        for e in self.events + self.collections:  # per call: one op's calls may differ in size, and so in what bounds them
            bounds[e.name] = bounds.get(e.name, 0.0) + max(e.bytes / bandwidth, (e.flops or 0) / rate) * 1e9
        rows = [RooflineRow(s.name, s.calls, s.total_ns, bounds[s.name],
                            s.total_ns / bounds[s.name] if bounds[s.name] else None, s.bytes, s.flops)
                for s in self.key_averages()]
        return Roofline(bandwidth, rate, threads, rows)


def profile(sync: bool = True) -> Profile:
    """A context manager recording every op this thread runs in its block (forward and backward), with
    its operands, time, bytes and FLOPs: ``with nt.profile() as prof: ...``, then ``print(prof)``,
    ``prof.export_chrome_trace(path)``, ``prof.roofline()``.  ``sync``: on a GPU, wait for each op's
    kernels, so that its time is theirs (nothing to wait for on the CPU)."""
    return Profile(sync)


# -- the machine's figures ----------------------------------------------------------------------------

_GEMM = 1024
_COPY_BYTES = 1 << 26  # 64 MiB: far beyond any cache, so the copy runs at the memory's speed
#: (bytes per second, FLOPs per second) by thread count, measured on first use
_figures: Dict[int, Tuple[float, float]] = {}


def _best(fn: Callable[[], Any], repeat: int = 5) -> float:
    """The least time of ``repeat`` calls of ``fn``, in seconds, after one call that warms up."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _machine(threads: int) -> Tuple[float, float]:
    """This machine's memory bandwidth (bytes per second, a copy reads and writes each byte) and float32
    matmul rate (FLOPs per second) on ``threads`` BLAS threads, measured once per thread count."""
    figures = _figures.get(threads)
    if figures is None:
        from threadpoolctl import threadpool_limits

        previous = swap_tracer(None)  # the measurements are no ops of the user's
        try:
            with no_grad():
                src, dst = ones(_COPY_BYTES // 4, dtype=float32), ones(_COPY_BYTES // 4, dtype=float32)
                bandwidth = 2 * _COPY_BYTES / _best(lambda: dst.copy_(src))  # into memory already touched
                a, b = randn(_GEMM, _GEMM), randn(_GEMM, _GEMM)
                with threadpool_limits(limits=threads, user_api="blas"):
                    rate = 2 * _GEMM ** 3 / _best(lambda: a @ b)
        finally:
            swap_tracer(previous)
        figures = _figures[threads] = (bandwidth, rate)
    return figures


# -- formatting ----------------------------------------------------------------------------------------

def _operand_json(o: Operand) -> Dict[str, Any]:
    return {"names": list(o.names), "shape": list(o.shape), "dtype": o.dtype}


def _fmt_time(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.3f}s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f}ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3f}us"
    return f"{ns:.1f}ns"  # a roofline bound of a small op


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _fmt_count(n: int) -> str:
    if not n:
        return ""
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def _layout(header: Tuple[str, ...], rows: List[Tuple[str, ...]], footer: str) -> str:
    """A plain-text table, PyTorch's profiler style: the name and the operands (the first and the last
    column) left-aligned, the figures between them right-aligned."""
    widths = [max(len(r[c]) for r in (header, *rows)) for c in range(len(header))]
    text = (0, len(header) - 1) if header[-1] == _OPERANDS else (0,)

    def line(cells):
        return "  ".join(c.ljust(w) if k in text else c.rjust(w)
                         for k, (c, w) in enumerate(zip(cells, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([rule, line(header), rule, *map(line, rows), rule, footer])


def _html(header: Tuple[str, ...], rows: List[Tuple[str, ...]], footer: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><p>{escape(footer)}</p>"
