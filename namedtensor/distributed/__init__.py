"""``namedtensor.distributed``: data-parallel training over MPI (and NCCL between GPUs).

Start N copies of a script with MPI; each is one rank::

    mpiexec -n 2 python train.py          # MPI from PyPI: pip install mpi4py mpich

and in the script::

    import namedtensor.distributed as dist
    dist.init_process_group("mpi")                      # "nccl": CUDA tensors, one GPU per rank
    model = dist.DistributedDataParallel(Net())         # rank 0's weights on every rank
    sampler = dist.DistributedSampler(dataset)          # each rank its own share of the data
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    ...                                                 # the usual loop: backward averages gradients
    if dist.get_rank() == 0: nt.save(model.state_dict(), "model.safetensors")

Collectives on named tensors keep names (``all_reduce``, ``broadcast``, ``all_gather``,
``reduce_scatter``; see :mod:`.collectives`).  mpi4py is imported only when a process group starts;
without it the error says what to install.  A failing rank ends the job instead of hanging it: an
uncaught exception aborts every process, and every wait times out (``init_process_group(timeout=)``).
Modules: :mod:`.group` (the process group), :mod:`.collectives`, :mod:`.ddp`, :mod:`.sampler`, the
transports :mod:`._transport` (MPI) and :mod:`._nccl`, and :mod:`._watch` (aborts, timed waits).
"""

from .collectives import Work, all_gather, all_reduce, broadcast, reduce_scatter
from .ddp import DistributedDataParallel
from .group import (ProcessGroup, barrier, destroy_process_group, get_backend, get_rank, get_world_size,
                    init_process_group, is_available, is_initialized)
from .sampler import DistributedSampler

__all__ = [
    "init_process_group", "destroy_process_group", "is_available", "is_initialized", "get_rank",
    "get_world_size", "get_backend", "barrier", "ProcessGroup",
    "all_reduce", "broadcast", "all_gather", "reduce_scatter", "Work",
    "DistributedDataParallel", "DistributedSampler",
]
