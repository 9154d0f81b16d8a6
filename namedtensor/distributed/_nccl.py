"""The NCCL transport: collectives between GPUs through CuPy's NCCL bindings, bootstrapped over MPI.

Each process drives one GPU: the ``local rank`` (its index among the processes on its machine,
from MPI) modulo the machine's GPU count, which becomes the device that ``"cuda"`` means.  Rank 0
makes NCCL's unique id and MPI broadcasts it; then every rank joins the NCCL communicator.
Collectives run on a stream of their own, after the work already queued on the current stream;
``test`` says whether one is done (the group's watch polls it under the timeout).  Tensors must be CUDA tensors on the rank's device.
"""

from __future__ import annotations

from typing import Any, List, Tuple

NEED = ("backend 'nccl' needs CuPy with NCCL and an NVIDIA GPU per process "
        "(pip install cupy-cuda12x nvidia-nccl-cu12); without GPUs use backend='mpi'")


def prepare(local_rank: int) -> Tuple[Any, Any, str]:
    """This rank's ``(cupy, nccl module, device string)``, or a RuntimeError saying what is missing.

    Runs without communicating, so that the ranks can agree on failures before any collective."""
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as e:
        raise RuntimeError(f"{NEED} ({e}).") from None
    if not getattr(nccl, "available", False):  # CuPy imports, the NCCL library did not load
        raise RuntimeError(f"{NEED}: CuPy found no NCCL library.")
    from .. import backends, cuda

    count = cuda.device_count()
    if count == 0:
        backends.get("cuda")  # raises the core's message: no driver, no device...
    device = f"cuda:{local_rank % count}"
    cuda.set_device(device)
    return cupy, nccl, device


class NcclTransport:
    """Collectives through NCCL on CuPy arrays of this rank's device."""

    name = "nccl"

    def __init__(self, comm: Any, cupy: Any, nccl: Any, device: str) -> None:
        uid = None
        if comm.Get_rank() == 0:
            try:
                uid = nccl.get_unique_id()
            except Exception as e:  # every rank must hear of it, or the others would wait for the id
                uid = f"{type(e).__name__}: {e}"
        uid = comm.bcast(uid, root=0)
        if isinstance(uid, str):
            raise RuntimeError(f"init_process_group: NCCL could not make its unique id on rank 0: {uid}")
        self.cupy = cupy
        self.nccl = nccl
        self.device = device
        self.comm = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._types = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64,
                       "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64, "bool": nccl.NCCL_UINT8}
        self._ops = {"sum": nccl.NCCL_SUM, "mean": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN,
                     "prod": nccl.NCCL_PROD}

    # buffers --------------------------------------------------------------------------
    def stage(self, B, x) -> Tuple[Any, bool]:
        if B.device != self.device:
            raise RuntimeError(
                f"backend 'nccl' works on CUDA tensors on this rank's device ({self.device}); this tensor is on "
                f"{B.device}. Move it with .to({self.device!r}), or use backend='mpi' for CPU tensors.")
        if x.flags.c_contiguous:
            return x, True
        return self.cupy.ascontiguousarray(x), False

    def empty(self, shape: tuple, like: Any) -> Any:
        with self.cupy.cuda.Device(like.device.id):
            return self.cupy.empty(shape, dtype=like.dtype)

    def to_backend(self, B, buf: Any) -> Any:
        return buf

    # collectives --------------------------------------------------------------------------
    def _type(self, buf: Any) -> int:
        return self._types[buf.dtype.name]

    def _launch(self, call) -> Any:
        cp = self.cupy
        ready = cp.cuda.Event()
        ready.record(cp.cuda.get_current_stream())  # the buffers' values are written by then
        self.stream.wait_event(ready)
        call(self.stream.ptr)
        done = cp.cuda.Event()
        done.record(self.stream)
        return done

    def all_reduce(self, buf: Any, op: str) -> Any:
        p = buf.data.ptr
        return self._launch(lambda s: self.comm.allReduce(p, p, buf.size, self._type(buf), self._ops[op], s))

    def broadcast(self, buf: Any, src: int) -> Any:
        p = buf.data.ptr
        return self._launch(lambda s: self.comm.broadcast(p, p, buf.size, self._type(buf), src, s))

    def all_gather(self, send: Any, recv: Any) -> Any:
        return self._launch(lambda s: self.comm.allGather(send.data.ptr, recv.data.ptr, send.size,
                                                          self._type(send), s))

    def reduce_scatter(self, send: Any, recv: Any, op: str) -> Any:
        return self._launch(lambda s: self.comm.reduceScatter(send.data.ptr, recv.data.ptr, recv.size,
                                                              self._type(send), self._ops[op], s))

    def test(self, handle: Any) -> bool:
        return handle.done

    def progress(self, handles: List[Any]) -> None:
        pass  # NCCL runs on the GPU by itself

    def close(self) -> None:
        self.stream.synchronize()
        self.comm.destroy()
