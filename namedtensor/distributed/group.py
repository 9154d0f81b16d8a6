"""The process group: which processes train together, this one's rank among them, and the transport.

``init_process_group(backend="mpi")`` joins every process that ``mpiexec -n N`` started (or the
processes of a given MPI communicator) into one group; ``backend="nccl"`` moves CUDA tensors
between GPUs with NCCL, with MPI to start it.  Run without ``mpiexec``, a script is a group of one
(rank 0 of 1), so the same script runs alone.  The group works on a duplicate of the communicator,
so the program's own MPI calls never match the library's, and on a second one for the messages that
find out which rank a wait is missing (:mod:`._watch`).

A failing rank ends the job instead of hanging it: from ``init_process_group`` on, an uncaught
exception aborts every process, and every wait of the group raises past ``timeout`` seconds.
"""

from __future__ import annotations

import atexit
import datetime
import math
import time
from typing import Any, Optional, Tuple, Union

from . import _mpi, _watch
from ._transport import MpiTransport

BACKENDS = ("mpi", "nccl")
#: seconds a wait of the group may last (PyTorch's default too): generous, for a rank that evaluates or saves
DEFAULT_TIMEOUT = 1800.0


class ProcessGroup:
    """The processes that work together: ``rank`` (this one's index), ``size``, ``backend``, the MPI
    communicator ``comm``, the ``transport`` of tensors, and the ``watch`` that times every wait
    (``watch.timeout`` seconds) and makes the small metadata exchanges."""

    def __init__(self, backend: str, comm: Any, MPI: Any, transport: Any, watch: _watch.Watch) -> None:
        self.backend = backend
        self.comm = comm
        self.MPI = MPI
        self.transport = transport
        self.watch = watch
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()


_group: Optional[ProcessGroup] = None
_farewell_registered = False


def init_process_group(backend: str = "mpi", comm: Any = None,
                       timeout: Union[float, datetime.timedelta, None] = None) -> None:
    """Join this process to the group of all processes that ``mpiexec`` started.

    ``backend``: ``"mpi"`` (tensors of any device; CPU tensors go without a copy where they are
    contiguous) or ``"nccl"`` (CUDA tensors, one GPU per process: the process's index on its
    machine modulo the GPU count becomes the device ``"cuda"`` means).  ``comm``: an mpi4py
    communicator to use instead of ``COMM_WORLD`` (to train in a subset of the processes).
    ``timeout``: how long any wait of the group may last, in seconds or as a ``datetime.timedelta``
    (default 30 minutes); past it the wait raises a ``TimeoutError`` naming the collective and the
    ranks that did not arrive.  Every process of the group must call it.  From here on an uncaught
    exception on any rank aborts the whole job (``MPI_Abort``), printing the rank and its traceback.
    """
    global _group
    if _group is not None:
        raise RuntimeError("init_process_group: a process group is already initialized; "
                           "call destroy_process_group() first to start another.")
    if backend not in BACKENDS:
        raise ValueError(f"init_process_group: unknown backend {backend!r}; choose 'mpi' (CPU or any device) "
                         "or 'nccl' (CUDA tensors).")
    seconds = _seconds(timeout)
    MPI = _mpi.load("init_process_group")
    _watch.abort_on_uncaught_exceptions(MPI)
    comm, side = _duplicate(MPI.COMM_WORLD if comm is None else comm, MPI, seconds)
    watch = _watch.Watch(comm, side, MPI, seconds)
    try:
        transport = MpiTransport(comm, MPI) if backend == "mpi" else _nccl_transport(comm, MPI, watch)
    except BaseException:
        comm.Free()
        side.Free()
        raise
    _group = ProcessGroup(backend, comm, MPI, transport, watch)
    _say_farewell_at_exit()


def _seconds(timeout: Union[float, datetime.timedelta, None]) -> float:
    if timeout is None:
        return DEFAULT_TIMEOUT
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf:
        raise ValueError(f"init_process_group: timeout must be a positive number of seconds or a "
                         f"datetime.timedelta, got {timeout!r}.")
    return float(seconds)


def _duplicate(base: Any, MPI: Any, seconds: float) -> Tuple[Any, Any]:
    """Two duplicates of ``base`` (the group's, and the side channel's), under the timeout: a rank
    that never calls init_process_group must not hang the others in it."""
    comm, first = base.Idup()
    side, second = base.Idup()
    requests = [first, second]
    if not _watch.poll(lambda: MPI.Request.Testall(requests), time.monotonic() + seconds, lambda: False):
        raise TimeoutError(f"init_process_group: timed out after {seconds:g} s on rank {base.Get_rank()} of "
                           f"{base.Get_size()}: not every process called init_process_group (one may have failed "
                           "or exited before it).")
    return comm, side


def _say_farewell_at_exit() -> None:
    """At exit, a process whose group is still up tells the other ranks, which stop waiting for it."""
    global _farewell_registered
    if not _farewell_registered:
        atexit.register(_farewell)
        _farewell_registered = True


def _farewell() -> None:
    if _group is not None:
        _group.watch.farewell()


def _nccl_transport(comm: Any, MPI: Any, watch: _watch.Watch) -> Any:
    from . import _nccl

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)  # this rank's index on its machine picks its GPU
    local_rank = local.Get_rank()
    local.Free()
    try:
        parts, problem = _nccl.prepare(local_rank), None
    except RuntimeError as e:
        parts, problem = None, str(e)
    problems = watch.exchange(problem, "init_process_group")  # every rank learns of any rank that cannot take part
    failed = [(r, p) for r, p in enumerate(problems) if p is not None]
    if failed:
        shown = "; ".join(f"rank {r}: {p}" for r, p in failed)
        raise RuntimeError(f"init_process_group(backend='nccl'): {len(failed)} of {len(problems)} ranks cannot "
                           f"use NCCL. {shown}")
    return _nccl.NcclTransport(comm, *parts)


def destroy_process_group() -> None:
    """Leave the group (its communicator is freed); ``init_process_group`` may start another."""
    global _group
    group = require_group("destroy_process_group")
    _group = None
    group.transport.close()
    group.comm.Free()
    group.watch.side.Free()


def is_available() -> bool:
    """Whether MPI (mpi4py and an MPI library) can be loaded; loading it starts MPI."""
    return _mpi.available()


def is_initialized() -> bool:
    """Whether ``init_process_group`` was called (and ``destroy_process_group`` not since)."""
    return _group is not None


def require_group(op: str) -> ProcessGroup:
    """The process group, or for ``op`` the error saying how to start one."""
    if _group is None:
        raise RuntimeError(f"{op}: no process group; call nt.distributed.init_process_group() first "
                           "(and start the processes with: mpiexec -n N python script.py).")
    return _group


def get_rank() -> int:
    """This process's index in the group, 0 to ``get_world_size() - 1``."""
    return require_group("get_rank").rank


def get_world_size() -> int:
    """The number of processes in the group."""
    return require_group("get_world_size").size


def get_backend() -> str:
    """``"mpi"`` or ``"nccl"``."""
    return require_group("get_backend").backend


def barrier() -> None:
    """Wait until every process of the group has reached this call (under the group's timeout)."""
    group = require_group("barrier")
    seq = group.watch.start()
    group.watch.wait(group.comm.Ibarrier().Test, "barrier", seq)
