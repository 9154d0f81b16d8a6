"""How a process group moves bytes: MPI on host (NumPy) buffers, or NCCL on CUDA buffers.

A transport knows nothing of names: it stages a tensor's values into a contiguous buffer (the
tensor's own memory where it can), starts non-blocking collectives on buffers and returns a
handle that ``test`` says is done; the group's watch (:mod:`._watch`) waits on it under the
timeout.  :mod:`.collectives` and :mod:`.ddp` call it; the NCCL one is in :mod:`._nccl`.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from .. import backends

#: MPI reductions of booleans: "max" is any, "min" is all (a sum of booleans has no meaning)
_BOOL_OPS = {"max": "LOR", "min": "LAND"}


class MpiTransport:
    """Collectives through MPI's non-blocking calls (``Iallreduce``...) on NumPy buffers; tensors of
    another backend (CUDA included) are staged through host memory."""

    name = "mpi"

    def __init__(self, comm: Any, MPI: Any) -> None:
        self.comm = comm
        self.MPI = MPI
        self._host = backends.host()

    # buffers --------------------------------------------------------------------------
    def stage(self, B, x) -> Tuple[Any, bool]:
        """A contiguous buffer with the values of ``x`` (an array of backend ``B``), and whether it
        *is* ``x`` (then a collective that writes it needs no copy back)."""
        arr = B.to_numpy(x)
        if arr is x and arr.flags.c_contiguous and arr.flags.writeable:
            return arr, True
        return arr.copy(order="C"), False

    def empty(self, shape: tuple, like: Any) -> Any:
        """A new buffer of ``shape`` with the dtype of buffer ``like``."""
        return self._host.empty(shape, dtype=like.dtype)

    def to_backend(self, B, buf: Any) -> Any:
        """``buf`` as an array of backend ``B`` (no copy on NumPy)."""
        return buf if B is self._host else B.asarray(buf)

    # collectives (non-blocking: each returns a handle) ------------------------------------
    def _op(self, op: str, buf: Any) -> Any:
        if buf.dtype.kind == "b":
            return getattr(self.MPI, _BOOL_OPS[op])
        return {"sum": self.MPI.SUM, "mean": self.MPI.SUM, "max": self.MPI.MAX, "min": self.MPI.MIN,
                "prod": self.MPI.PROD}[op]

    def all_reduce(self, buf: Any, op: str) -> Any:
        return self.comm.Iallreduce(self.MPI.IN_PLACE, buf, self._op(op, buf))

    def broadcast(self, buf: Any, src: int) -> Any:
        return self.comm.Ibcast(buf, root=src)

    def all_gather(self, send: Any, recv: Any) -> Any:
        return self.comm.Iallgather(send, recv)

    def reduce_scatter(self, send: Any, recv: Any, op: str) -> Any:
        return self.comm.Ireduce_scatter_block(send, recv, self._op(op, send))

    def test(self, handle: Any) -> bool:
        return handle.Test()

    def progress(self, handles: List[Any]) -> None:
        """Let MPI move pending collectives along (an MPI without a progress thread only advances
        them inside MPI calls): called by DDP from its gradient hooks."""
        if handles:
            self.MPI.Request.Testall(handles)

    def close(self) -> None:
        pass
