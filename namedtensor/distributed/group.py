"""The process group: which processes train together, this one's rank among them, and the transport.

``init_process_group(backend="mpi")`` joins every process that ``mpiexec -n N`` started (or the
processes of a given MPI communicator) into one group; ``backend="nccl"`` moves CUDA tensors
between GPUs with NCCL, with MPI to start it.  Run without ``mpiexec``, a script is a group of one
(rank 0 of 1), so the same script runs alone.  The group works on a duplicate of the communicator,
so the program's own MPI calls never match the library's.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _mpi
from ._transport import MpiTransport

BACKENDS = ("mpi", "nccl")


class ProcessGroup:
    """The processes that work together: ``rank`` (this one's index), ``size``, ``backend``, the MPI
    communicator ``comm`` (also used for small metadata exchanges) and the ``transport`` of tensors."""

    def __init__(self, backend: str, comm: Any, MPI: Any, transport: Any) -> None:
        self.backend = backend
        self.comm = comm
        self.MPI = MPI
        self.transport = transport
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()


_group: Optional[ProcessGroup] = None


def init_process_group(backend: str = "mpi", comm: Any = None) -> None:
    """Join this process to the group of all processes that ``mpiexec`` started.

    ``backend``: ``"mpi"`` (tensors of any device; CPU tensors go without a copy where they are
    contiguous) or ``"nccl"`` (CUDA tensors, one GPU per process: the process's index on its
    machine modulo the GPU count becomes the device ``"cuda"`` means).  ``comm``: an mpi4py
    communicator to use instead of ``COMM_WORLD`` (to train in a subset of the processes).
    Every process of the group must call it.
    """
    global _group
    if _group is not None:
        raise RuntimeError("init_process_group: a process group is already initialized; "
                           "call destroy_process_group() first to start another.")
    if backend not in BACKENDS:
        raise ValueError(f"init_process_group: unknown backend {backend!r}; choose 'mpi' (CPU or any device) "
                         "or 'nccl' (CUDA tensors).")
    MPI = _mpi.load("init_process_group")
    base = MPI.COMM_WORLD if comm is None else comm
    comm = base.Dup()
    try:
        transport = MpiTransport(comm, MPI) if backend == "mpi" else _nccl_transport(comm, MPI)
    except BaseException:
        comm.Free()
        raise
    _group = ProcessGroup(backend, comm, MPI, transport)


def _nccl_transport(comm: Any, MPI: Any) -> Any:
    from . import _nccl

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)  # this rank's index on its machine picks its GPU
    local_rank = local.Get_rank()
    local.Free()
    try:
        parts, problem = _nccl.prepare(local_rank), None
    except RuntimeError as e:
        parts, problem = None, str(e)
    problems = comm.allgather(problem)  # every rank learns of any rank that cannot take part
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
    """Wait until every process of the group has reached this call."""
    require_group("barrier").comm.Barrier()
